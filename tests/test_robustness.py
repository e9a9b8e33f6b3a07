"""Robustness: a presenter's held key, the picture cache's keys, schema-valid uploads that must neither crash
scenes nor be drawn as facts, the library's softmax scale and memory, and what the browser may send."""
import json
import math

import pytest
import torch

import costmodel
import story
from app import SCENE_KEYS as SCENES
from bench import results
from page import guard, pictures, script
from tests.support_app import assert_no_exception, badges, open_app, page_text, shown, upload, uploaded_recording


def recording(change) -> bytes:
    doc = json.loads(uploaded_recording())
    change(doc)
    return json.dumps(doc).encode()


def refused(data: bytes) -> str:
    with pytest.raises(results.ResultsError) as why:
        results.parse_results(data, "upload")
    return str(why.value)


# -- 1. a held key: the server does not collect all its garbage after every rerun -----------------------------

def test_the_server_skips_the_full_collection_after_each_rerun():
    from streamlit import config
    config.get_config_options(force_reparse=True)  # .streamlit/config.toml, as `streamlit run` reads it
    assert config.get_option("runner.postScriptGC") is False


def test_the_page_script_gathers_arrow_and_page_keys():
    text = (script.Path(script.__file__).with_name("script.js")).read_text()
    assert "onNavKey" in text and "stopImmediatePropagation" in text and "COMMIT_EVERY_MS" in text


# -- 2. the picture cache keeps one figure per trace and view, not one per step -----------------------------

def test_a_picture_request_holds_what_changes_the_figure_and_no_step():
    trace = pictures.TraceRequest(64, 16, 16, 32, True, "float32", 0, "fa2")
    device = pictures.PictureDevice(232448, 62914560, 132, "NVIDIA H200")
    tiles = [pictures.PictureRequest.of(trace, "tiles", "light", 700, device, n) for n in (1024, 8192)]
    assert tiles[0] == tiles[1] and hash(tiles[0]) == hash(tiles[1])  # the talk's N is only the re-reads'
    assert tiles[0].device == pictures.PictureDevice()                 # the tiles view quotes no GPU
    rereads = [pictures.PictureRequest.of(trace, "rereads", "light", 700, device, n) for n in (1024, 8192)]
    assert rereads[0] != rereads[1]
    assert "start_step" not in pictures.PictureRequest.__dataclass_fields__


@pytest.mark.parametrize("view", ["tiles", "hbm", "source"])
def test_a_cached_figure_shown_at_a_step_is_the_figure_built_at_that_step(view):
    import viz
    from kernels import source
    from kernels.trace import trace_flash
    from viz.animation import at_step
    trace = trace_flash(64, 16, 16, 32, True, dtype="float32").to_dict()
    build = {"tiles": lambda step: viz.tiling_figure(trace, start_step=step),
             "hbm": lambda step: viz.hbm_sram_figure(trace, start_step=step),
             "source": lambda step: viz.kernel_source_figure(
                 trace, source.kernel_source("fa2"),
                 source.step_phases("fa2", trace["loads"], trace["stores"], source.kernel_source("fa2")["phases"]),
                 start_step=step)}[view]
    base = build(0)
    for step in (3, len(base.frames) - 1):
        assert json.loads(at_step(base, step).to_json()) == json.loads(build(step).to_json())


def test_viewers_at_different_steps_share_one_build(monkeypatch):
    built = []
    real = pictures.VIEWS["tiles"].build
    monkeypatch.setitem(pictures.VIEWS, "tiles", pictures.View("Tiles", lambda t, r: built.append(r) or real(t, r)))
    pictures.FIGURES.clear()
    request = pictures.PictureRequest.of(pictures.TraceRequest(64, 16, 16, 32, False, "float32", 5, "fa2"),
                                         "tiles", "dark", 700, pictures.PictureDevice(), 8192)
    sliders = [pictures.picture(request, step).layout.sliders[0].active for step in (0, 3, 7)]
    assert len(built) == 1 and len(set(sliders)) == 3


# -- 3. uploads that pass the schema no longer crash scenes -------------------------------------------------

def _counted(doc, kernels):
    for record in doc["records"]:
        if record["algorithm"] == "naive" and record["status"] == "ok":
            record.update(dram_read_bytes=10**9, dram_write_bytes=10**9, kernels=kernels)


@pytest.mark.parametrize("scene", ["roofline", "takeaways", "compare"])
def test_a_null_per_kernel_count_is_dropped_with_a_note_and_every_scene_runs(scene):
    kernels = [{"name": name, "time_ms": 1.0, "dram_read_bytes": 10**8, "dram_write_bytes": None, "l2_bytes": None}
               for name in ("scores", "softmax", "pv")]
    data = recording(lambda doc: _counted(doc, kernels))
    loaded = results.parse_results(data, "upload")
    assert all(record["kernels"] is None for record in loaded.records)
    assert any("kernels" in note for note in loaded.notes)
    app = upload(open_app(scene=scene, seq_len="1024"), data)
    assert_no_exception(app)
    assert not app.sidebar.get("error")


@pytest.mark.parametrize("tiles", [(48, 64), (1, 64), (64, 512)])
def test_tiles_the_cost_model_refuses_are_dropped_where_the_file_is_read(tiles):
    def change(doc):
        doc["records"][0]["block_m"], doc["records"][0]["block_n"] = tiles
    loaded = results.parse_results(recording(change), "upload")
    assert (loaded.records[0]["block_m"], loaded.records[0]["block_n"]) == (None, None)
    assert any("block_m" in note for note in loaded.notes)
    for scene in ("compare", "takeaways"):
        app = upload(open_app(scene=scene, seq_len="1024"), recording(change))
        assert_no_exception(app)
        assert "None" not in page_text(app)


# -- 4. absurd but in-bounds numbers are refused, naming the field -----------------------------------------

def _flash_time(ms):
    def change(doc):
        record = doc["records"][0]
        record.update(time_ms=ms, time_ms_p20=ms, time_ms_p80=ms)
    return change


def test_a_time_no_gpu_could_run_is_refused():
    assert "TFLOPS" in refused(recording(_flash_time(1e-6)))


def test_tflops_that_disagree_with_the_time_are_refused():
    def change(doc):
        doc["records"][0]["tflops"] = 90_000.0  # inside the schema's bounds, but not what its time gives
    assert "tflops" in refused(recording(change)) and "does not match" in refused(recording(change))


def test_one_counted_byte_is_dropped_as_no_count():
    def change(doc):
        doc["records"][0].update(dram_read_bytes=1, dram_write_bytes=0)
    loaded = results.parse_results(recording(change), "upload")
    assert loaded.records[0]["dram_read_bytes"] is None and any("dram_read_bytes" in n for n in loaded.notes)


def test_a_gpu_with_one_byte_of_shared_memory_is_refused():
    def change(doc):
        doc["device"]["smem_per_block_bytes"] = 1
    assert "smem_per_block_bytes" in refused(recording(change))


def test_conflicting_duplicates_are_refused_and_exact_ones_kept_once():
    def conflicting(doc):
        twin = dict(doc["records"][0])
        twin.update(time_ms=2 * twin["time_ms"], time_ms_p20=2 * twin["time_ms_p20"],
                    time_ms_p80=2 * twin["time_ms_p80"], tflops=twin["tflops"] / 2, gbps=twin["gbps"] / 2)
        doc["records"].append(twin)
    assert "same setting" in refused(recording(conflicting))
    exact = results.parse_results(recording(lambda doc: doc["records"].append(dict(doc["records"][0]))), "upload")
    assert len(exact.records) == len(json.loads(uploaded_recording())["records"])


def test_a_timeline_over_days_is_refused_and_huge_ones_count_without_overflow():
    timeline = {"sm_count": 4, "seq_len": 1 << 20, "heads": 64, "batch": 1, "head_dim": 128, "block_m": 128,
                "causal": False, "sm_id": [i % 4 for i in range(10_000)], "t_start_ns": [0] * 10_000,
                "t_end_ns": [10**15] * 10_000, "q_block": [i % 8192 for i in range(10_000)], "bh": [0] * 10_000}
    assert "hour" in refused(recording(lambda doc: doc.update(timelines=[timeline])))
    stats = story.timeline_stats(timeline)  # the arithmetic itself holds, whatever the file
    assert 0.0 <= stats["utilization"] <= 1.0 and stats["waves"] > 0 and math.isfinite(stats["makespan_us"])


# -- 5. upload usability ------------------------------------------------------------------------------------

def test_a_blank_gpu_name_is_refused():
    def change(doc):
        doc["device"]["name"] = "   "
    assert "name is empty" in refused(recording(change))


@pytest.mark.parametrize("field, value", [("head_dim", 7), ("batch", 65536), ("heads", 4096)])
def test_the_closest_recorded_setting_is_offered_only_when_the_link_can_hold_it(field, value):
    def change(doc):
        for record in doc["records"]:
            grow = value / record[field] if field != "head_dim" else 1  # as much more work, as much more time
            record[field] = value
            if record["status"] == "ok":  # the file stays consistent: its TFLOPS follow from its times
                for key in ("time_ms", "time_ms_p20", "time_ms_p80"):
                    record[key] *= grow
                record["gbps"] /= grow
                record["tflops"] = costmodel.attention_flops(costmodel.Shape.of_record(record)) / (
                    record["time_ms"] * 1e-3) / 1e12
    app = upload(open_app(scene="seqlen"), recording(change))
    assert_no_exception(app)
    assert not [b for b in app.button if b.label == "Show the closest recorded setting"]
    assert "none of the recording's settings can be shown here" in page_text(app)


def test_records_only_off_the_slider_are_said():
    def change(doc):
        for record in doc["records"]:
            record["seq_len"] += 1
    app = upload(open_app(scene="headline"), recording(change))
    assert_no_exception(app)
    assert "off the slider" in shown(" ".join(info.value for info in app.info))


def test_a_step_past_the_end_is_corrected_in_the_link():
    app = open_app(scene="tiling", trace_len="64", block_m="16", block_n="16", step="1048576")
    assert_no_exception(app)
    assert app.query_params["step"] == "15"  # 4 × 4 tiles: steps 0 … 15
    back = next(button for button in app.button if button.label == "◀ Step")
    assert not back.disabled
    back.click().run()
    assert app.query_params["step"] == "14"


# -- 6. the library's softmax scale and memory -------------------------------------------------------------

@pytest.mark.parametrize("scale", [0.0, -0.125, -1e-30])
@pytest.mark.parametrize("name", ["fa2", "naive"])
def test_a_non_positive_softmax_scale_is_refused(name, scale):
    from kernels import flash_attention, naive_attention
    q = torch.randn(1, 1, 37, 16)
    with pytest.raises(ValueError, match="sm_scale must be a positive"):
        {"fa2": flash_attention, "naive": naive_attention}[name](q, q, q, causal=True, sm_scale=scale)


def test_scores_larger_than_the_device_are_refused_before_any_launch():
    from bench.measure import oom_bytes
    from kernels import naive_attention
    q = torch.randn(1, 1, 1, 16).expand(64, 64, 32768, 16)  # no memory of its own
    with pytest.raises(torch.OutOfMemoryError) as why:
        naive_attention(q, q, q)
    assert oom_bytes(str(why.value)) == 64 * 64 * 32768**2 * (4 + 4)  # S in fp32 and P in fp32


# -- 7. what the browser sends -----------------------------------------------------------------------------

@pytest.mark.parametrize("viewport", [{"width": "abc", "height": 900}, {"width": 1e9, "height": 900},
                                      {"width": True, "height": 900}, {"width": 1280.5, "height": 720},
                                      "1920x1080", {"width": -5, "height": 900}])
def test_a_viewport_that_is_not_a_window_is_ignored(monkeypatch, viewport):
    monkeypatch.setattr(script.st, "session_state", {script.PAGE_SCRIPT_KEY: {"viewport": viewport}})
    assert script.window_size() is None and script.canvas_scale() == 1.0


def test_a_real_viewport_scales_the_stage(monkeypatch):
    monkeypatch.setattr(script.st, "session_state", {script.PAGE_SCRIPT_KEY: {"viewport": {"width": 1280,
                                                                                          "height": 720}}})
    assert script.window_size() == {"width": 1280, "height": 720} and script.canvas_scale() == pytest.approx(2 / 3)


def test_a_clear_cache_message_clears_only_its_own_session():
    import streamlit as st
    from streamlit.runtime.app_session import AppSession
    guard.install()
    calls = []

    @st.cache_data
    def shared(x):
        calls.append(x)
        return x
    shared(1)

    class Session:  # what the handler touches of an AppSession
        class _session_state:
            cleared = False

            @classmethod
            def clear(cls):
                cls.cleared = True
    AppSession._handle_clear_cache_request(Session)
    shared(1)
    assert calls == [1], "the shared cache survived"
    assert Session._session_state.cleared, "the session's own state was cleared"


def test_a_websocket_from_another_local_port_is_refused():
    guard.install()
    from streamlit.web.server.starlette import starlette_websocket
    assert not starlette_websocket._is_origin_allowed("http://127.0.0.1:9999", "127.0.0.1:8501")
    assert starlette_websocket._is_origin_allowed("http://127.0.0.1:8501", "127.0.0.1:8501")
    assert starlette_websocket._is_origin_allowed(None, "127.0.0.1:8501")


def test_every_scene_still_runs():
    for scene in SCENES:
        app = open_app(scene=scene, trace_len="64", block_m="16", block_n="32")
        assert_no_exception(app)
        assert "RECORDED on" in badges(app)
