"""The backward scene ("Training: the backward pass"): its numbers (story/backward.py) from backward records and the
cost model, its figures, and the scene on the CPU path: recorded with backward records, recorded without any, and
the tile walk from kernels/fa2_bwd.visit_order. Times and TFLOPS here are made up for the tests."""
import json
from pathlib import Path

import pytest

import costmodel
import story
import viz
from bench import results
from costmodel import Shape
from kernels.fa2_bwd import visit_order
from tests.support_app import assert_no_exception, open_app, page_text, plotly_specs, upload, uploaded_recording

SHAPE = Shape(8192, 2, 16, 128, "bfloat16", False)
H200_BYTES = 150109880320


def record(algorithm, seq_len=8192, pass_="backward", status="ok", tflops=300.0, peak=None, causal=False):
    return {"algorithm": algorithm, "seq_len": seq_len, "batch": 2, "heads": 16, "head_dim": 128,
            "dtype": "bfloat16", "causal": causal, "kv_len": seq_len, "kv_heads": 16, "pass": pass_,
            "status": status, "time_ms": 1.0 if status == "ok" else None, "time_ms_p20": None, "time_ms_p80": None,
            "tflops": tflops if status == "ok" else None, "gbps": None, "bytes_moved": 1 << 20, "peak_extra_bytes": peak,
            "needed_bytes": (1 << 40) if status == "oom" else None, "message": "out of memory" if status == "oom" else "",
            "device": "Test GPU", "timing_kind": "cuda"}


# -- the cost model: a training step's memory, by hand ----------------------------------------------------------

def test_a_training_steps_memory_by_hand():
    s = Shape(1024, 2, 16, 128, "bfloat16")
    scores = 1024 * 1024 * 2 * 16
    o = 2 * 16 * 1024 * 128 * 2
    grads = 3 * o
    assert costmodel.standard_training_bytes(s) == scores * 4 + scores * 2 + o + grads
    assert costmodel.flash_training_bytes(s) == o + 2 * (2 * 16 * 1024 * 4) + grads
    fp32 = s.at(dtype="float32")
    assert costmodel.standard_training_bytes(fp32) == scores * 4 + 2 * o * 4, "fp32: softmax's output is P"
    assert costmodel.standard_training_bytes(s.at(causal=True)) == costmodel.standard_training_bytes(s), \
        "eager autograd keeps the whole N × N under a mask too"
    wall = costmodel.standard_training_wall(H200_BYTES, s)
    need = lambda n: (costmodel.standard_training_bytes(s.at(seq_len=n, kv_len=n))  # noqa: E731
                      + costmodel.inputs_bytes(s.at(seq_len=n, kv_len=n)) + costmodel.output_bytes(s.at(seq_len=n)))
    assert need(wall.fits_up_to) <= H200_BYTES < need(wall.fits_up_to + 1)
    assert wall.seq_len == 32768


# -- the story ---------------------------------------------------------------------------------------------------

def test_backward_records_are_told_apart_by_their_pass():
    mixed = [record("fa2"), record("fa2", pass_="prefill"), {**record("fa2"), "pass": None}]
    assert story.backward.backward_records(mixed) == [mixed[0]]


def test_the_bars_are_the_records_at_the_talks_setting_and_say_what_is_missing():
    backward = [record("fa2", tflops=350.0), record("sdpa_default", tflops=500.0),
                record("sdpa_flash", tflops=280.0, seq_len=16384), record("fa2", causal=True, tflops=1.0)]
    forward = [record("fa2", pass_="prefill", tflops=600.0)]
    bars = story.backward.tflops_bars(backward, forward, SHAPE)
    assert [(b.algorithm, b.pass_, b.tflops) for b in bars] == [
        ("fa3", "backward", None), ("fa2", "backward", 350.0), ("sdpa_default", "backward", 500.0),
        ("sdpa_flash", "backward", None), ("fa3", "prefill", None), ("fa2", "prefill", 600.0)]
    said = story.backward.tflops_sentence(bars, SHAPE)
    assert "The backward of flash (ours) runs at 0.70× cuDNN's" in said and "0.58× its own forward's" in said
    assert "SDPA flash (FA-2), backward (not measured at this setting)" in said
    assert "FA-3 style (ours), backward (not measured at this setting)" in said
    # where the FA-3 style backward was measured, the sentence speaks of it and of its own forward
    bars = story.backward.tflops_bars(backward + [record("fa3", tflops=520.0)],
                                      forward + [record("fa3", pass_="prefill", tflops=650.0)], SHAPE)
    said = story.backward.tflops_sentence(bars, SHAPE)
    assert "The backward of FA-3 style (ours) runs at 1.04× cuDNN's" in said and "0.80× its own forward's" in said
    assert "fa2 backward runs" not in said and "No bar: SDPA flash (FA-2), backward" in said
    oom = story.backward.tflops_bars([record("fa2", status="oom")], [], SHAPE)[1]
    assert oom.algorithm == "fa2" and oom.tflops is None and "out of memory" in oom.note


@pytest.mark.parametrize("seq_len", costmodel.SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_memory_sentence_is_true_at_every_slider_stop(seq_len, causal):
    shape = SHAPE.at(seq_len=seq_len, kv_len=seq_len, causal=causal)
    said = story.backward.memory_sentence(shape, H200_BYTES)
    wall = costmodel.standard_training_wall(H200_BYTES, shape)
    assert ("past it" in said) == (seq_len > wall.fits_up_to)
    assert "within that bound" in said or "past it" in said
    assert costmodel.standard_training_bytes(shape) > costmodel.flash_training_bytes(shape)


def test_the_wall_is_standard_attentions_first_measured_out_of_memory():
    records = [record("torch_naive", seq_len=65536, status="oom"), record("torch_naive", seq_len=32768, status="oom"),
               record("fa2", seq_len=131072, status="oom")]
    assert story.backward.training_wall(records)["seq_len"] == 32768
    drawn = story.backward.with_training_failures(records)
    assert drawn[1]["need_bytes"] == costmodel.standard_training_bytes(Shape.of_record(records[1]))
    assert story.backward.training_wall([record("fa2")]) is None


OOM_MESSAGE = ("CUDA out of memory. Tried to allocate 32.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which "
               "10.16 GiB is free. Including non-PyTorch memory, this process has 129.63 GiB memory in use. Of the "
               "allocated memory 128.70 GiB is allocated by PyTorch")


def test_an_out_of_memory_cross_sits_at_what_the_allocator_measured_when_the_bound_is_lower():
    """The formula is a lower bound (48 GiB at 16K here); the failed run held 129.63 GiB when a 32 GiB allocation
    failed, so the ✕ sits at that sum less the inputs: above the device, as an out-of-memory record must."""
    oom = {**record("torch_naive", seq_len=16384, status="oom"), "message": OOM_MESSAGE, "needed_bytes": 32 << 30}
    shape = Shape.of_record(oom)
    drawn, = story.backward.with_training_failures([oom])
    inputs = costmodel.inputs_bytes(shape) + costmodel.output_bytes(shape)
    assert drawn["need_bytes"] == int(129.63 * 2 ** 30) + (32 << 30) - inputs
    assert drawn["need_bytes"] > H200_BYTES > costmodel.standard_training_bytes(shape)
    assert "held 129.6 GiB when a 32.0 GiB allocation failed" in drawn["failure"]
    assert "(measured, the CUDA context included); the formula's lower bound: 48." in drawn["failure"]
    # a message that does not say what was held: the formula's bound, and the record's own failure text
    bare, = story.backward.with_training_failures([record("torch_naive", seq_len=16384, status="oom")])
    assert bare["need_bytes"] == costmodel.standard_training_bytes(shape) and "held" not in bare["failure"]


def test_every_recorded_out_of_memory_cross_sits_above_the_device():
    """In the shipped recording, at every backward setting, each out-of-memory ✕ of standard attention sits above the
    device's memory: never an "out of memory" drawn below the line it ran into."""
    data = json.loads((Path(__file__).resolve().parents[1] / "results" / "h200.json").read_text())
    oom = [r for r in story.backward.backward_records(data["records"])
           if r["algorithm"] == story.backward.STANDARD and r["status"] == "oom"]
    assert len(oom) >= 4
    for drawn in story.backward.with_training_failures(oom):
        assert drawn["need_bytes"] > data["device"]["hbm_bytes"], drawn["failure"]


@pytest.mark.parametrize("seq_len", [4096, 8192, 16384, 32768])
def test_the_memory_sentence_says_where_the_recording_ran_out_before_the_bound(seq_len):
    """Where the recording ran out of memory at a shorter N than the formula's bound reaches (16K against ≈ 27K),
    the sentence says so, with the measured peak against the bound, and never calls an N past the measured wall
    "within that bound"."""
    shape = SHAPE.at(seq_len=seq_len, kv_len=seq_len)
    records = [record("torch_naive", seq_len=8192, peak=32 << 30),
               {**record("torch_naive", seq_len=16384, status="oom"), "message": OOM_MESSAGE}]
    said = story.backward.memory_sentence(shape, H200_BYTES, records)
    assert "the recording ran out of memory from N = 16K" in said and "within that bound" not in said
    ratio = (32 << 30) / costmodel.standard_training_bytes(SHAPE)
    assert f"its measured peak at N = 8K: 32.0 GiB, {ratio:.1f}× the bound" in said
    assert ("past that: the standard step cannot run here" in said) == (seq_len >= 16384)
    assert ("is short of it" in said) == (seq_len < 16384)


def test_the_walk_caption_counts_one_tile_in_the_singular():
    said = story.backward.walk_caption(64, 64, 1, True, 1, 1)
    assert "for 1 tile." in said and "for 1 tile (" in said and "1 tiles" not in said
    assert "for 6 tiles" in story.backward.walk_caption(256, 64, 4, False, 6, 6)


# -- the figures ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_the_walk_figure_has_a_frame_per_recomputed_tile(causal):
    walk = visit_order(256, causal)
    fig = viz.backward_walk_figure(walk, 4, 4, start_step=2)
    assert len(fig.frames) == len(walk["dkdv"]) + len(walk["dq"])
    left, right = fig.data
    assert list(zip(left.y, left.x)) == walk["dkdv"] and list(zip(right.y, right.x)) == walk["dq"]
    assert left.marker.line.width[2] == 5.0 and max(right.marker.line.width) == 0.0, "step 3: the dK/dV pass"
    last = fig.frames[-1].data
    assert last[1].marker.line.width[-1] == 5.0


def test_the_bars_figure_draws_only_measured_bars():
    bars = story.backward.tflops_bars([record("fa2", tflops=350.0)], [], SHAPE)
    fig = viz.backward_tflops_figure([vars(b) for b in bars])
    assert list(fig.data[0].x) == [350.0]


# -- the scene -----------------------------------------------------------------------------------------------------

def timed(rec: dict) -> dict:
    """The record with the time its TFLOPS say, by the FLOPs the results parser checks it against."""
    if rec["status"] != "ok":
        return rec
    ms = costmodel.pass_flops(Shape.of_record(rec)) / (rec["tflops"] * 1e12) * 1e3
    return {**rec, "time_ms": ms, "gbps": rec["bytes_moved"] / (ms * 1e-3) / 1e9}


def with_backward_records() -> bytes:
    doc = json.loads(uploaded_recording())
    doc["records"] += [timed(r) for r in (record("fa2", seq_len=1024, tflops=210.0, peak=40 << 20),
                                          record("sdpa_default", seq_len=1024, tflops=260.0, peak=30 << 20),
                                          record("torch_naive", seq_len=1024, tflops=90.0, peak=300 << 20),
                                          record("torch_naive", seq_len=4096, status="oom"))]
    return json.dumps(doc).encode()


def test_the_scene_opens_on_the_walk_after_the_tiling():
    from app import SCENE_KEYS
    assert SCENE_KEYS[SCENE_KEYS.index("tiling") + 1] == "backward"
    app = open_app(scene="backward", trace_len="128", causal="true")
    assert_no_exception(app)
    (fig,) = plotly_specs(app)
    walk = visit_order(128, True)
    assert len(fig["frames"]) == len(walk["dkdv"]) + len(walk["dq"]) == 6
    assert "comes from kernels/fa2_bwd.py" in page_text(app) and "not traced" in page_text(app)


def test_recorded_without_backward_records_it_says_so_and_draws_formulas_only():
    """A recording with no backward records (this upload: prefill records only)."""
    app = upload(open_app(scene="backward", part="speed", seq_len="1024"), uploaded_recording())
    assert_no_exception(app)
    assert not plotly_specs(app)
    assert story.backward.NO_BACKWARD_RECORDS in page_text(app).replace("This", "this")
    app = upload(open_app(scene="backward", part="memory", seq_len="1024"), uploaded_recording())
    assert_no_exception(app)
    (fig,) = plotly_specs(app)
    assert [d["name"] for d in fig["data"] if "measured" in d["name"]] == []
    assert "formulas only" in page_text(app)
    assert "formula, a lower bound" in fig["layout"]["title"]["text"], "the wall by the formula, said as one"


def test_the_formula_wall_shades_from_the_first_n_past_the_device():
    wall = story.backward.formula_wall(SHAPE, H200_BYTES)
    assert wall["seq_len"] == costmodel.standard_training_wall(H200_BYTES, SHAPE).fits_up_to + 1
    assert story.backward.formula_wall(SHAPE, None) is None


def test_recorded_with_backward_records_it_draws_them():
    app = upload(open_app(scene="backward", part="speed", seq_len="1024"), with_backward_records())
    assert_no_exception(app)
    (fig,) = plotly_specs(app)
    forward_tflops = costmodel.attention_flops(SHAPE.at(seq_len=1024, kv_len=1024)) / 1e-3 / 1e12  # its 1 ms
    assert fig["data"][0]["x"] == pytest.approx([210.0, 260.0, forward_tflops])
    assert fig["data"][0]["y"][2] == "flash (ours), forward", "SDPA FA-2 has no record: no bar"
    assert "0.81× cuDNN's" in page_text(app)
    app.query_params["part"] = "memory"
    app.segmented_control(key="control_part").set_value("memory").run()
    assert_no_exception(app)
    (fig,) = plotly_specs(app)
    measured = {d["name"]: d["y"] for d in fig["data"] if d["name"].endswith("measured peak")}
    assert len(measured) == 2, measured
    assert [d["name"] for d in fig["data"] if d.get("showlegend") is not False].count(viz.memory.MEASURED_DOTS) == 1
    assert "dots: measured peaks" in page_text(app)
    assert "out of memory at N = 4K (measured)" in fig["layout"]["title"]["text"]


def test_the_results_parser_keeps_backward_records_for_the_scene():
    loaded = results.parse_results(with_backward_records(), "t.json")
    assert len(story.backward.backward_records(loaded.records)) == 4


def test_the_page_reads_backward_records_kept_apart_or_among_the_records():
    from types import SimpleNamespace

    from page.stage import backward_records
    apart, among = record("fa2", tflops=1.0), record("sdpa_default")
    assert backward_records(None) == []
    assert backward_records(SimpleNamespace(records=[among, record("fa2", pass_="prefill")])) == [among]
    assert backward_records(SimpleNamespace(records=[among], backward=(apart, among))) == [apart, among], \
        "a Recording with a `backward` field: its records, each once"


def test_a_setting_with_no_backward_measured_says_so_without_an_empty_chart():
    """Llama 3 8B's heads were not timed in a backward (the recording's backward records are B2 H16): the speed view
    says which bars are missing and draws no chart with empty axes."""
    app = open_app(scene="backward", part="speed", model="llama3-8b")
    assert_no_exception(app)
    assert plotly_specs(app) == []
    said = " ".join(i.value for i in app.info)
    assert "No bars: all 6 not measured at this setting." in said and "No bar:" not in said  # one reason, said once


def test_the_shipped_recording_draws_its_measured_backward():
    """results/h200.json holds bench --backward's records (H200, 2026-12-04 and -05): the TFLOPS view draws our two
    backwards (the FA-3 style one and the teaching one), cuDNN's and SDPA FA-2's, and both our forwards from them, and
    the memory view its measured peaks."""
    app = open_app(scene="backward", part="speed")
    assert_no_exception(app)
    (fig,) = plotly_specs(app)
    assert len(fig["data"][0]["x"]) == len(story.backward.BARS) and all(x > 0 for x in fig["data"][0]["x"])
    assert "FA-3 style (ours), backward" in fig["data"][0]["y"]
    app = open_app(scene="backward", part="memory")
    assert_no_exception(app)
    (fig,) = plotly_specs(app)
    assert any("measured" in d.get("name", "") for d in fig["data"])


# -- a live page (a GPU simulated: the measurement replaced by one that records what it was asked) ---------------------

LIVE_FACTS = {"name": "Test GPU", "sm_count": 132, "smem_per_sm_bytes": 233472, "smem_per_block_bytes": 232448,
              "hbm_bytes": H200_BYTES, "hbm_gbps": 4800.0, "bf16_tflops": 989.0}
LIVE_TFLOPS = {("fa3", "backward"): 520.0, ("fa2", "backward"): 340.0, ("sdpa_default", "backward"): 500.0,
               ("sdpa_flash", "backward"): 290.0, ("fa3", "prefill"): 650.0, ("fa2", "prefill"): 400.0}


@pytest.fixture
def live_gpu(monkeypatch):
    """A live page whose measurements come from a fake GPU: each call is kept, each record says its TFLOPS."""
    from page import stage as stage_module
    asked = []

    def measure(algorithm, seq_len, batch, heads, head_dim, dtype, causal, pass_="prefill"):
        asked.append((algorithm, seq_len, pass_))
        rec = record(algorithm, seq_len=seq_len, pass_=pass_, causal=causal,
                     tflops=LIVE_TFLOPS.get((algorithm, pass_), 100.0), peak=64 << 20)
        return {**timed(rec), "batch": batch, "heads": heads, "head_dim": head_dim, "dtype": dtype}
    monkeypatch.setattr(stage_module, "is_live", lambda settings: True)
    monkeypatch.setattr(stage_module, "live_device_facts", lambda: dict(LIVE_FACTS))
    monkeypatch.setattr(stage_module, "measure_live", measure)
    return asked


def test_the_live_limit_is_the_backward_of_b2_h16_d128_at_32k():
    assert story.backward.live_fits(SHAPE.at(seq_len=32768, kv_len=32768))
    assert not story.backward.live_fits(SHAPE.at(seq_len=65536, kv_len=65536))
    assert story.backward.live_fits(SHAPE.at(seq_len=65536, kv_len=65536, causal=True, heads=8, kv_heads=8)), "by FLOPs, not N"
    assert story.backward.live_fits(SHAPE.at(seq_len=8192, kv_len=8192, dtype="float32"))
    assert not story.backward.live_fits(SHAPE.at(seq_len=16384, kv_len=16384, dtype="float32")), "fp32 counts 8×"
    why = story.backward.live_limit_why(SHAPE.at(seq_len=65536, kv_len=65536))
    assert "up to 44 TFLOP a backward, B2 H16 d128 at N = 32K; this one is 175.9 TFLOP" in why


def test_a_live_page_times_every_bar_at_the_sliders_n(live_gpu):
    app = open_app(scene="backward", part="speed", source="live", seq_len="8192")
    assert_no_exception(app)
    assert sorted(live_gpu) == sorted((a, 8192, p) for a, p, _ in story.backward.BARS)
    (fig,) = plotly_specs(app)
    assert fig["data"][0]["x"] == pytest.approx([LIVE_TFLOPS[(a, p)] for a, p, _ in story.backward.BARS])
    text = page_text(app)
    assert "Source: measured live on Test GPU." in text and "recorded on" not in text
    assert "runs at 1.04× cuDNN's" in text and "0.80× its own forward's" in text


def test_a_live_page_past_the_limit_quotes_the_recording_and_says_why(live_gpu):
    app = open_app(scene="backward", part="speed", source="live", seq_len="65536")
    assert_no_exception(app)
    assert not [job for job in live_gpu if job[2] == "backward"], "nothing timed past the limit"
    text = page_text(app)
    assert "recorded on NVIDIA H200" in text
    assert "timed live up to 44 TFLOP a backward, B2 H16 d128 at N = 64K; this one is" not in text
    assert "timed live up to 44 TFLOP a backward, B2 H16 d128 at N = 32K; this one is 175.9 TFLOP" in text
    app = open_app(scene="backward", part="memory", source="live", seq_len="8192")
    assert_no_exception(app)
    assert "the memory curves quote the recording" in page_text(app)


def test_the_warm_up_times_the_backward_bars_at_every_stop_that_fits(live_gpu, monkeypatch):
    import sys

    from page import stage as stage_module
    monkeypatch.setattr(sys, "argv", ["app.py", "--warm-up"])
    monkeypatch.setattr(stage_module, "WARMED", {})
    monkeypatch.setattr(stage_module, "live_sm_timeline", lambda *args: {})
    monkeypatch.setattr(stage_module, "measure_ladder_live", lambda: [])
    app = open_app(scene="headline", source="live", trace_len="128")
    assert_no_exception(app)
    timed_backward = sorted({n for _, n, p in live_gpu if p == "backward"})
    assert timed_backward == [n for n in costmodel.SEQ_LENS if n <= 32768]
    assert len(stage_module.WARMED) == 1
