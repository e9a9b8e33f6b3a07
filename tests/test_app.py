"""The app on the CPU path (recorded results + Triton interpreter), driven by Streamlit's AppTest.

Links ask for the recorded source, so a GPU machine runs the same tests (only the animation then runs on
the GPU). The interpreter costs ~10 ms per tile, so every animation here is tiny (64 tokens, 16–32 token
tiles).
"""
import json

import pytest

from app import SCENE_KEYS as SCENES
from costmodel import tile_schedule
from page.settings import resolve, settings_from_query
from tests.support_app import SMALL_ANIMATION, assert_no_exception, badges, metric_values, open_app, page_text, \
    plotly_specs, upload, uploaded_recording

@pytest.mark.parametrize("scene", SCENES)
def test_every_scene_runs_on_the_cpu_path(scene):
    app = open_app(scene=scene, **SMALL_ANIMATION)
    assert_no_exception(app)
    assert app.query_params["scene"] == scene
    assert badges(app), "the data source is always visible"


def test_moving_the_sequence_slider_changes_the_numbers():
    app = open_app(scene="headline", seq_len="1024")
    before = metric_values(app)
    app.select_slider(key="control_seq_len").set_value(65536).run()
    assert_no_exception(app)
    assert app.query_params["seq_len"] == "65536"
    after = metric_values(app)
    assert before != after
    assert "64K" in " ".join(metric.label for metric in app.metric)


@pytest.mark.parametrize("causal", [False, True])
def test_the_animation_has_one_frame_per_schedule_step(causal):
    app = open_app(scene="tiling", causal=str(causal).lower(), **SMALL_ANIMATION)
    assert_no_exception(app)
    (figure,) = plotly_specs(app)
    expected = len(tile_schedule(64, 16, 32, causal))
    assert len(figure["frames"]) == expected
    assert f"{expected} steps" in page_text(app)
    assert app.get("download_button"), "the animation can be saved as a standalone HTML page"


def test_stepping_the_animation_moves_the_start_frame():
    app = open_app(scene="tiling", **SMALL_ANIMATION)
    forward = next(button for button in app.button if button.label == "Step ▶")
    forward.click().run()
    assert_no_exception(app)
    assert app.query_params["step"] == "1"
    (figure,) = plotly_specs(app)
    assert figure["layout"]["sliders"][0]["active"] == 1


def test_next_scene_button_walks_the_story():
    app = open_app(scene="headline")
    next(button for button in app.button if button.label == "Next ▶").click().run()
    assert app.query_params["scene"] == SCENES[1]


def test_a_deep_link_restores_the_view():
    link = {"scene": "problem", "seq_len": "32768", "heads": "8", "dtype": "float32", "causal": "true",
            "theme": "dark", "batch": "2", "head_dim": "128"}
    app = open_app(**link)
    assert_no_exception(app)
    assert not app.warning
    assert app.select_slider(key="control_seq_len").value == 32768
    assert app.session_state["control_heads"] == 8
    assert app.session_state["control_dtype"] == "float32"
    assert app.session_state["control_causal"] is True
    assert {key: app.query_params[key] for key in link} == link
    # one head's fp32 scores at 32K: 32768² × 4 bytes = 4 GiB
    assert "4.0 GiB" in page_text(app)


@pytest.mark.parametrize("hostile", [
    {"seq_len": "abc"},
    {"seq_len": "-5", "heads": "1e9", "batch": "0"},
    {"seq_len": "99999999999999999999999999999999"},
    {"scene": "../../etc/passwd"},
    {"recording": "../../etc/passwd"},
    {"dtype": "<script>alert(1)</script>"},
    {"theme": "[click](javascript:alert(1))"},
    {"block_m": "48", "block_n": "4096"},
    {"whatever": "1", "seq_len": ["1024", "2048"]},
])
def test_hostile_links_fall_back_with_a_warning(hostile):
    app = open_app(**hostile)
    assert_no_exception(app)
    assert app.warning, "what was ignored is said on the page"
    expected, _ = resolve(settings_from_query(hostile)[0], "scene", SCENES)
    assert app.query_params["seq_len"] == str(expected.seq_len)  # the address bar shows what is used
    assert app.query_params["scene"] == expected.scene


def test_a_hostile_value_is_quoted_not_rendered():
    app = open_app(theme="[click](javascript:alert(1))")
    assert "`[click](javascript:alert(1))`" in app.warning[0].value  # inside a code span: shown, not a link


@pytest.mark.parametrize("seq_len, speedup", [("1024", "3.0×"), ("2048", "3.0×"), ("4096", "out of memory")])
def test_an_uploaded_recording_drives_the_numbers(seq_len, speedup):
    app = upload(open_app(scene="headline", seq_len=seq_len), uploaded_recording())
    assert_no_exception(app)
    assert "RECORDED on Test GPU, 2026-01-02" in badges(app)
    assert metric_values(app)[-1] == speedup
    if speedup == "out of memory":
        assert "out of memory" in page_text(app)
    assert app.query_params["recording"] == "uploaded"  # a copied link never names a shipped file for an upload's


def test_a_link_made_from_an_upload_says_so_and_shows_the_shipped_recording():
    app = open_app(scene="headline", recording="uploaded")
    assert_no_exception(app)
    assert "made from an uploaded results file" in app.warning[0].value
    assert app.query_params["recording"] == "h200.json"


def test_tiles_too_big_for_the_recorded_gpu_shrink_with_a_note():
    app = upload(open_app(scene="compare", block_m="256", block_n="256"), uploaded_recording())
    assert_no_exception(app)
    assert "shared memory" in app.warning[0].value
    assert (app.query_params["block_m"], app.query_params["block_n"]) == ("32", "32")  # 48 KiB per block


def test_a_setting_the_recording_lacks_is_said_and_offered():
    app = upload(open_app(scene="seqlen", heads="8"), uploaded_recording())
    assert_no_exception(app)
    assert "no measurements for this setting" in page_text(app)
    next(button for button in app.button if button.label == "Closest recorded").click().run()
    assert (app.query_params["heads"], app.query_params["batch"], app.query_params["head_dim"]) == ("16", "2", "128")


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", json.dumps({"schema": "other"}).encode(), b"[]"])
def test_a_bad_upload_is_refused_and_the_app_keeps_running(data):
    app = upload(open_app(scene="seqlen"), data)
    assert_no_exception(app)
    assert "That file was not used" in " ".join(error.value for error in app.sidebar.get("error"))


def test_a_plain_link_opens_the_headline_without_warnings():
    app = open_app()
    assert_no_exception(app)
    assert not app.warning
    assert app.query_params["scene"] == SCENES[0]


def test_the_warm_up_flag_runs_ahead_and_the_page_says_it_is_ready(monkeypatch):
    """`streamlit run app.py -- --warm-up`: before the first view, everything the talk's setting needs is run
    (live: every slider stop measured; here, the animation's trace), and the page says it is ready."""
    import sys
    from page import stage as page_stage
    monkeypatch.setattr(sys, "argv", ["app.py", "--warm-up"])
    monkeypatch.setattr(page_stage, "WARMED", {})
    app = open_app(scene="headline", **SMALL_ANIMATION)
    assert_no_exception(app)
    assert "READY:" in badges(app) and "the animation's trace" in badges(app)
    assert len(page_stage.WARMED) == 1


def test_without_the_flag_nothing_runs_ahead():
    from page import stage as page_stage
    page_stage.WARMED.clear()
    app = open_app(scene="headline")
    assert "READY:" not in badges(app) and not page_stage.WARMED


def test_two_sessions_at_once_outside_a_server(monkeypatch):
    """Two sessions run at once in threads of their own, with no Streamlit server (as the live test runs them): the
    page machinery must not need a runtime to tell whether a browser is there (it raised "Runtime hasn't been
    created" in the second session, which then showed an error)."""
    import threading
    from streamlit.runtime import Runtime
    # AppTest puts its mock runtime in the process-wide Runtime._instance for its run and sets it back to None after:
    # the session that ends first takes it from under the other, and Streamlit's own script runner then raises
    # "Runtime hasn't been created" (a race in the test harness, seen once in a CI run, not in the page). Keep the
    # last one a run set, so each session still finds one; the page's own code is what this test is about.
    last = {}

    def instance(cls):
        if cls._instance is not None:
            last["runtime"] = cls._instance
        if "runtime" not in last:
            raise RuntimeError("Runtime hasn't been created!")
        return last["runtime"]
    monkeypatch.setattr(Runtime, "instance", classmethod(instance))
    apps = {}

    def session(heads: str) -> None:
        apps[heads] = open_app(scene="headline", heads=heads)
    threads = [threading.Thread(target=session, args=(heads,)) for heads in ("8", "16")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for app in apps.values():
        assert_no_exception(app)
    assert metric_values(apps["8"]) != metric_values(apps["16"])


def _talk_records(head_dim: int, causal: bool, heads: int = 16) -> list[dict]:
    """The shipped recording's flash and standard records at the talk's batch, as the sequence-length scene reads
    them."""
    from bench.results import load_results
    return [r for r in load_results("h200.json").records if r["algorithm"] in ("fa2", "naive")
            and (r["batch"], r["heads"], r["head_dim"], r["causal"], r["dtype"]) == (2, heads, head_dim, causal,
                                                                                    "bfloat16")
            and r.get("config") is None and r.get("pass", "prefill") == "prefill"]


@pytest.mark.parametrize("params, shape", [({"causal": "true"}, (128, True, 16)), ({"causal": "false"}, (128, False, 16)),
                                           ({"causal": "true", "seq_len": "262144"}, (128, True, 16)),
                                           ({"head_dim": "64", "causal": "true", "seq_len": "1024"}, (64, True, 16)),
                                           ({"model": "llama3-8b"}, (128, False, 32))])
def test_the_speedup_table_fits_the_place_the_scene_has(params, shape):
    """The sequence-length scene's speedup table, causal on, took 1,128 px of page in a 1,080 px window: Streamlit's
    table wrapped its notes at a width of its own. Now it is a figure of its rows counted in lines (viz.table), no
    taller than the chart of the scene's other views at the same setting (the place its Body leaves under the slider
    and the tabs, above the caption), showing the story's numbers as written (a preset the recording lacks: the
    header, and the caption says why)."""
    import story
    from page import BODY_WIDTH_PX
    from viz.table import table_layout
    (chart,) = plotly_specs(open_app(scene="seqlen", tab="time", **params))
    app = open_app(scene="seqlen", tab="table", **params)
    assert_no_exception(app)
    assert not app.table, "no Streamlit table: it sizes itself past the canvas"
    (table,) = plotly_specs(app)
    assert table["data"][0]["type"] == "table"
    assert table["layout"]["height"] <= chart["layout"]["height"], (table["layout"]["height"], chart["layout"]["height"])
    rows = story.speedup_table_text(_talk_records(*shape))
    assert table["data"][0]["header"]["values"] == list(story.SPEEDUP_COLUMNS)
    assert [list(column) for column in table["data"][0]["cells"]["values"]] == [
        [row[name] for row in rows] for name in story.SPEEDUP_COLUMNS]
    assert table["layout"]["height"] == pytest.approx(table_layout(rows, BODY_WIDTH_PX, story.SPEEDUP_COLUMNS).height_px)
