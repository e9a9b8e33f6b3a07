"""The ablation scene's FP8 view: the presenter turns the planted outliers up and the rotation on and off and sees each
variant's error against float64 beside the speed it gained over bf16 — recorded (bench --fp8), or on the CPU the
emulation of e4m3 (errors only, never a speed)."""
import json

import pytest

import story
import viz
from tests.support_app import assert_no_exception, open_app, page_text, plotly_specs, upload, uploaded_recording
from tests.support_fp8 import fp8_run

FA3 = story.fp8.FA3_LEVEL  # the FA-3 paper's outliers: N(0, 10²) added to 0.1 % of entries
HARSH = "×10–100"


def _upload_with_fp8() -> bytes:
    d = json.loads(uploaded_recording())
    d["device"]["matmul_tflops"] = 720.0
    d["records"] += fp8_run()
    return json.dumps(d).encode()


def test_recorded_points_read_the_error_at_the_level_and_the_speed_of_the_same_rounds():
    points = story.fp8.recorded_points(fp8_run(), HARSH)
    assert [p["name"] for p in points] == ["FP8 per-tensor", "FP8 per-tensor + rotation", "FP8 per-head",
                                           "FP8 per-head + rotation", "bf16"]
    assert points[0]["rel_rms"] == 0.1475 and points[1]["rel_rms"] == 0.1122 and points[-1]["rel_rms"] == 0.0115
    assert points[0]["speedup"] == pytest.approx(1.65 / 1.1) and points[-1]["speedup"] == 1.0
    paper = story.fp8.recorded_points(fp8_run(), FA3)
    assert [p["rel_rms"] for p in paper] == [0.098, 0.042, 0.098, 0.042, 0.0031]
    random = story.fp8.recorded_points(fp8_run(), "none")
    assert random[0]["rel_rms"] == 0.054 and random[-1]["rel_rms"] == 0.0037
    assert story.fp8.recorded_points(fp8_run(), "×100–1000") == [], "not a recorded level"
    assert story.fp8.recorded_points(fp8_run(), FA3, seq_len=16384) == [], "no records at that shape"


def test_the_sentence_says_the_rotations_ratio_beside_the_papers_and_bf16():
    points = story.fp8.recorded_points(fp8_run(), FA3)
    words = story.fp8.rotation_sentence(points, FA3, rotation=True)
    assert "the FA-3 paper's outliers (+N(0, 10²) on 0.1 %)" in words
    assert "0.098" in words and "0.042" in words and f"{0.098 / 0.042:.1f}× lower" in words
    assert "(the FA-3 paper: 2.6×, with per-block scales)" in words and "bf16's is 0.0031" in words
    assert "1.50× bf16's speed" in words
    harsh = story.fp8.rotation_sentence(story.fp8.recorded_points(fp8_run(), HARSH), HARSH, rotation=False)
    assert "planted outliers ×10–100 on 0.1 %" in harsh and f"{0.1475 / 0.1122:.1f}× lower" in harsh
    assert "FA-3 paper" not in harsh, "its 2.6× is on its own, milder outliers"
    # where the rotation made it worse (the emulated ×100–1000: 0.312 against 0.342), "1.1× higher", never "0.9×"
    worse = [dict(p, rel_rms=0.342) if p["rotation"] else dict(p, rel_rms=0.312) for p in points]
    said = story.fp8.rotation_sentence(worse, FA3, rotation=True)
    assert "1.1× higher" in said and "0.9×" not in said
    level = story.fp8.rotation_sentence([dict(p, rel_rms=0.0537) for p in points], FA3, rotation=True)
    assert "about the same" in level and "1.0× lower" not in level
    emulated = [dict(p, speedup=None) for p in points]
    assert "No speed" in story.fp8.rotation_sentence(emulated, FA3, rotation=False)
    assert "No FP8 numbers" in story.fp8.rotation_sentence([], FA3, rotation=False)


def test_the_figure_puts_speed_on_x_when_timed_and_the_variants_when_not():
    points = story.fp8.recorded_points(fp8_run(), FA3)
    fig = viz.fp8_figure(points, rotation=True, source_label="recorded on NVIDIA H200")
    assert fig.layout.xaxis.title.text == "speed ÷ bf16, measured"  # the source: the caption above it
    sides = {(t.name, t.textposition) for t in fig.data}
    assert {side for name, side in sides if "per-tensor" in name} == {"middle left"}
    assert {side for name, side in sides if "per-head" in name} == {"middle right"}, "overlapping markers: apart"
    shown = [t.text[0] for t in fig.data if t.text[0]]
    # the chosen rotation's numbers, each saying whose; per-tensor's and per-head's in one label left of their spot
    assert shown == ["per-tensor + rot. 0.042<br>per-head + rot. 0.042", "bf16 0.003"], shown
    assert not [t for t in fig.data if t.text[0] and t.marker.opacity != 1.0], "the other rotation's: faint, unlabelled"
    assert fig.layout.yaxis.type == "log"
    assert [t.x[0] for t in fig.data] == [pytest.approx(1.5)] * 4 + [1.0]
    assert [t.marker.opacity for t in fig.data] == [0.3, 1.0, 0.3, 1.0, 1.0], "the chosen rotation drawn strong"
    emulated = viz.fp8_figure([dict(p, speedup=None) for p in points], rotation=False, source_label="CPU emulation")
    assert emulated.layout.xaxis.title.text == "CPU emulation: errors only, no speed"
    with pytest.raises(ValueError, match="must be positive"):
        viz.fp8_figure([dict(points[0], rel_rms=0.0)], rotation=False)


def _ablation_after_upload(recording: bytes):
    """The ablation scene with this recording uploaded: (the app, its text, the FP8 view's chart)."""
    app = upload(open_app(scene="ablation"), recording)
    assert_no_exception(app)
    return app, page_text(app), plotly_specs(app)[-1]


def test_the_views_recorded_levels_are_the_inputs_bench_fp8_records():
    from bench import fp8 as bench_fp8
    kinds = bench_fp8.error_kinds()
    assert [story.fp8.OUTLIER_LEVELS[level] for level in story.fp8.RECORDED_LEVELS] == [
        kinds["err_"], kinds["paper_outlier_err_"], kinds["outlier_err_"]]
    assert all(story.fp8.level_key(level).removesuffix("rel_rms") in kinds for level in story.fp8.OUTLIER_LEVELS)


def test_the_view_opens_at_fa3s_test_unless_the_recording_predates_its_errors():
    assert story.fp8.default_level(None) == FA3 and story.fp8.default_level(fp8_run()) == FA3
    older = [{k: v for k, v in r.items() if "paper" not in k} for r in fp8_run()]
    assert story.fp8.default_level(older) == HARSH
    assert HARSH in story.fp8.RECORDED_LEVELS and story.fp8.recorded_points(older, HARSH)
    assert "predates these errors" in story.fp8.no_points_sentence(FA3, has_records=True)


def test_the_view_on_the_cpu_shows_the_emulation_labelled_and_never_a_speed():
    """A recording without FP8 records (this upload) on the CPU: the emulation, labelled, errors only."""
    _, text, fp8_chart = _ablation_after_upload(uploaded_recording())
    assert "Source: CPU emulation of e4m3" in text and "No speed: only a GPU times the kernel" in text
    assert fp8_chart["layout"]["xaxis"]["title"]["text"] == "CPU emulation of e4m3: errors only, no speed"


def test_the_presenter_turns_the_outliers_up_and_the_rotation_on_and_the_error_moves():
    app = open_app(scene="ablation")
    errors = {}
    for level in ("none", FA3, HARSH, "×100–1000"):
        app.segmented_control(key="fp8_outliers").set_value(level).run()
        assert_no_exception(app)
        chart = plotly_specs(app)[-1]
        errors[level] = {t["name"]: t["y"][0] for t in chart["data"]}
    per_tensor = [errors[level]["FP8 per-tensor"] for level in ("none", FA3, HARSH, "×100–1000")]
    assert per_tensor == sorted(per_tensor), per_tensor
    for level in (FA3, HARSH):
        assert errors[level]["FP8 per-tensor + rotation"] < errors[level]["FP8 per-tensor"], "the rotation helps"
    app.toggle(key="fp8_rotation").set_value(True).run()
    assert_no_exception(app)
    strong = [t["name"] for t in plotly_specs(app)[-1]["data"] if t["marker"]["opacity"] == 1.0]
    assert strong == ["FP8 per-tensor + rotation", "FP8 per-head + rotation", "bf16"]


def test_the_view_recorded_shows_the_fp8_records_with_their_speed():
    app, text, chart = _ablation_after_upload(_upload_with_fp8())
    assert "Source: recorded on Test GPU" in text and "1.50× bf16's speed" in text
    assert chart["layout"]["xaxis"]["title"]["text"] == "speed ÷ bf16, measured"  # its source: the caption
    app.segmented_control(key="fp8_outliers").set_value("×100–1000").run()
    assert_no_exception(app)
    assert "CPU emulation of e4m3" in page_text(app) and "×100–1000 is measured live" in page_text(app)
