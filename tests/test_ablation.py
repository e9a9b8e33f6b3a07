"""FA-3, idea by idea: the ladder's records (bench --ladder) in the results file, the story's bars and sentences, the
figure, and the scene recorded, without ladder records, and where live cannot run the ladder."""
import json

import pytest

import story
import viz
from bench import ladder as bench_ladder
from bench import results as res
from bench.measure import Setting, make_record
from costmodel import Shape
from tests.support_app import (assert_no_exception, open_app, page_text, plotly_specs, shown, upload,
                               uploaded_recording)

FACTS = {"name": "NVIDIA H200", "sm_count": 132, "smem_per_sm_bytes": 233472, "smem_per_block_bytes": 232448,
         "l2_bytes": 62914560, "hbm_bytes": 150109880320, "copy_gbps": 4273.4, "compute_capability": "9.0",
         "driver": "580", "torch": "2.11.0", "triton": "3.6.0", "matmul_tflops": 720.0}
STEP_MS = (2.4, 2.1, 1.95, 1.85, 1.83, 1.80, 1.78)  # made up for the tests: each step faster; the reference 1.9 ms
ALGORITHMS = {**{name: ("fa2" if i == 0 else "fa3") for i, name in enumerate(story.step_names())},
              bench_ladder.REFERENCE: "sdpa_default"}


def ladder_run(failures=None) -> list[dict]:
    times = {name: [ms * 0.99, ms, ms * 1.01] for name, ms in zip(story.step_names(), STEP_MS)}
    times[bench_ladder.REFERENCE] = [1.9, 1.9, 1.9]
    return bench_ladder.ladder_records(times, ALGORITHMS, bench_ladder.SHAPE, "NVIDIA H200", failures=failures)


def shipped_fa3() -> dict:
    return make_record(Setting("fa3", bench_ladder.SHAPE), "ok", "NVIDIA H200", "cuda", [1.78, 1.8]).to_dict()


def phase(kernel: str, config: str | None) -> dict:
    lanes = [{"warp": 0, "role": "consumer 0", "spans": [["qk", 0, 100], ["softmax", 100, 180], ["pv", 180, 260]]},
             {"warp": 4, "role": "consumer 1", "spans": [["wait", 0, 90], ["qk", 90, 190], ["softmax", 190, 260]]},
             {"warp": 8, "role": "producer", "spans": [["load", 0, 40]]}]
    return {"kernel": kernel, "config": config, "batch": 1, "heads": 4, "seq_len": 4096, "head_dim": 128,
            "causal": False, "dtype": "bfloat16", "program_count": 4, "plain_ms": 0.1, "instrumented_launch_ms": 30.0,
            "sm_clock_mhz": 1980.0, "overhead": 0.05, "profiled_output_identical": True,
            "programs": [{"cta": 0, "sm": 0, "lanes": lanes}]}


def doc(records, phases=(), version=res.SCHEMA_VERSION) -> dict:
    return {"schema": res.SCHEMA, "schema_version": version, "meta": {"created": "2026-12-04T07:00:00Z",
                                                                      "command": "python -m bench --ladder"},
            "device": dict(FACTS), "records": records, "timelines": [], "phases": list(phases)}


def parse(d) -> res.RecordedResults:
    return res.parse_results(json.dumps(d).encode(), "test.json")


# -- the names every layer shares ------------------------------------------------------------------------------

def test_the_story_names_the_steps_the_ladder_runs():
    from kernels import fa3, ladder
    assert story.step_names() == tuple(s.name for s in ladder.steps())
    assert story.step_names()[1:] == tuple(fa3.LADDER), "every LADDER row, in its order, after FA-2 order"
    assert story.ablation.REFERENCE == bench_ladder.REFERENCE
    assert bench_ladder.step_names() == (*story.step_names(), story.ablation.REFERENCE)
    assert set(story.ablation.SHORT) == {*story.step_names(), story.ablation.REFERENCE}
    assert ladder.steps()[-1].config == fa3.SHIPPED[(128, False)], "the last step is the shipped kernel"
    with pytest.raises(ValueError, match="no ladder step"):
        ladder.step("+ a trick nobody shipped")
    published = {p.ours for p in story.PUBLISHED_STEPS if p.ours}
    assert published <= set(story.step_names()), "a published step stands beside a step we have"


# -- records: written, read back, kept apart from the shipped kernel's ------------------------------------------

def test_ladder_records_round_trip_beside_the_shipped_kernels_record(tmp_path):
    records = ladder_run()
    assert [r["config"] for r in records] == list(bench_ladder.step_names())
    assert [r["algorithm"] for r in records] == ["fa2"] + ["fa3"] * 6 + ["sdpa_default"]
    path = tmp_path / "ladder.json"
    res.dump_results(path, dict(FACTS), [shipped_fa3(), *records], [], "python -m bench --ladder", "today",
                     phases=[phase("fa3", story.step_names()[2]), phase("fa3", None)])
    loaded = res.load_results_path(path)
    assert len(loaded.records) == 9, "seven steps, cuDNN and the shipped fa3 at the same setting: no conflict"
    assert [r["config"] for r in loaded.records] == [None, *bench_ladder.step_names()]
    median = {r["config"]: r["time_ms"] for r in loaded.records}
    assert median[story.step_names()[2]] == pytest.approx(1.95)
    assert [p["config"] for p in loaded.phases] == [story.step_names()[2], None]
    assert json.loads(path.read_text())["schema_version"] == 5


def test_a_file_without_config_reads_as_before():
    old = doc([shipped_fa3()], [phase("fa3", None)], version=3)
    del old["phases"][0]["config"]
    for record in old["records"]:
        del record["config"]
    loaded = parse(old)
    assert loaded.records[0]["config"] is None and loaded.phases[0]["config"] is None and not loaded.notes


@pytest.mark.parametrize("bad, why", [(7, "is not text"), ("", "is empty"), ("   ", "is empty"), (["a"], "is not text")])
def test_a_bad_config_refuses_the_file_saying_why(bad, why):
    records = ladder_run()
    records[1]["config"] = bad
    with pytest.raises(res.ResultsError, match=f"record 1: config = .* {why}: a ladder record names its step"):
        parse(doc(records))
    with pytest.raises(res.ResultsError, match=f"phases 0: config = .* {why}"):
        parse(doc([shipped_fa3()], [{**phase("fa3", None), "config": bad}]))


def test_two_times_of_one_step_refuse_the_file_naming_the_step():
    records = ladder_run()
    again = dict(records[4], time_ms=records[4]["time_ms"] * 2, tflops=records[4]["tflops"] / 2,
                 gbps=records[4]["gbps"] / 2, time_ms_p20=None, time_ms_p80=None)
    with pytest.raises(res.ResultsError, match="step '\\+ Q in registers'"):
        parse(doc([*records, again]))


def test_a_failed_step_is_an_error_record_without_a_time():
    records = ladder_run(failures={story.step_names()[3]: "output has NaN or Inf"})
    failed = records[3]
    assert failed["status"] == "error" and failed["time_ms"] is None and "NaN" in failed["message"]
    parse(doc(records))  # and the file still reads


def test_merging_a_ladder_run_keeps_the_kernels_own_phases_and_records(tmp_path):
    from bench import cli
    path = tmp_path / "h200.json"
    res.dump_results(path, dict(FACTS), [shipped_fa3()], [], "python -m bench", "yesterday",
                     phases=[phase("fa3", None), phase("fa2", None)])
    steps = [phase("fa3", name) for name in story.step_names()[1:3]]
    records, _, phases, extra, _ = cli.merged(path, ladder_run(), [], steps, {"ratios": []}, "python -m bench --ladder")
    assert [r["config"] for r in records] == [None, *bench_ladder.step_names()]
    assert [(p["kernel"], p["config"]) for p in phases] == [("fa3", None), ("fa2", None),
                                                           *(("fa3", n) for n in story.step_names()[1:3])]
    res.dump_results(path, dict(FACTS), records, [], "merged", "today", extra, phases)  # and it writes


def test_merging_another_run_keeps_the_decode_records_copy_roof(tmp_path):
    """The decode scene reads its records against meta.decode_copy_gbps: a later --ladder (or prefill) run merged
    into the file keeps it, as it keeps the decode records; a --decode run replaces it."""
    from bench import cli
    path = tmp_path / "h200.json"
    res.dump_results(path, dict(FACTS), [shipped_fa3()], [], "python -m bench --decode", "yesterday",
                     {"ratios": [], "decode_copy_gbps": 4294.5})
    extra = cli.merged(path, ladder_run(), [], [], {"ratios": []}, "python -m bench --ladder")[3]
    assert extra["decode_copy_gbps"] == 4294.5
    extra = cli.merged(path, [], [], [], {"ratios": [], "decode_copy_gbps": 4100.0}, "python -m bench --decode")[3]
    assert extra["decode_copy_gbps"] == 4100.0


def test_the_page_keeps_ladder_records_out_of_the_other_scenes():
    from page import stage
    loaded = parse(doc([shipped_fa3(), *ladder_run()], [phase("fa3", None), phase("fa3", story.step_names()[1])]))
    recording = stage._as_recording("test.json", loaded)
    assert [r["config"] for r in recording.records] == [None]
    assert len(recording.ladder) == 8 and len(recording.phases) == 1
    assert set(recording.ladder_programs) == {story.step_names()[1]}
    assert [p.kernel for p in recording.programs] == ["fa3"]


# -- the story and the figure ------------------------------------------------------------------------------

def test_bars_are_the_steps_in_order_each_against_the_one_before():
    bars = story.bars(ladder_run())
    assert [b.name for b in bars] == [*story.step_names(), story.ablation.REFERENCE]
    tflops = [b.tflops for b in bars]
    assert tflops[1] / tflops[0] == pytest.approx(STEP_MS[0] / STEP_MS[1])
    assert bars[0].vs_before is None and bars[2].vs_before == pytest.approx(STEP_MS[1] / STEP_MS[2])
    assert bars[-1].reference and bars[-1].vs_before is None, "cuDNN is the reference, not a step"
    sentence = story.ladder_sentence(bars, "NVIDIA H200")
    assert "6 of 6 steps faster than the one before" in sentence
    assert f"{tflops[0]:,.0f} TFLOPS" in sentence and f"{tflops[-2] / tflops[-1]:.2f}×" in sentence


def test_a_step_without_a_number_keeps_its_place_and_says_why():
    records = [r for r in ladder_run(failures={story.step_names()[2]: "RuntimeError: boom"})
               if r["config"] != story.step_names()[4]]
    bars = story.bars(records)
    assert bars[2].tflops is None and "boom" in bars[2].note
    assert bars[4].tflops is None and bars[4].note == "not in this recording"
    assert bars[3].vs_before is None, "no ratio across a missing step"
    assert "3 of 3 steps faster" not in story.ladder_sentence(bars, "GPU")
    assert story.ladder_sentence(story.bars([]), "GPU") == "" and not story.has_numbers(story.bars([]))


def test_the_figure_draws_our_bars_the_published_ranges_and_the_selection():
    selected = story.step_names()[2]
    data = story.chart_data(story.bars(ladder_run()), selected)
    fig = viz.ablation_figure(data, height=600, width=1000)
    bars, published = fig.data[1], fig.data[-1]
    assert len(fig.data[0].x) == 8, "every category keeps its place"
    assert list(bars.y) == pytest.approx([b["tflops"] for b in data["ours"]])
    widths = list(bars.marker.line.width) if isinstance(bars.marker.line.width, tuple) else None
    outlined = [c for c, col in zip(bars.x, bars.marker.line.color) if col != "rgba(0,0,0,0)"]
    assert len(outlined) == 1 and outlined[0].startswith(viz.ablation._tick(story.ablation.SHORT[selected]))
    assert widths is None and bars.text[2] == f"<b>{data['ours'][2]['tflops']:,.0f}</b>"
    assert bars.x[2].endswith(f"<b>{data['ours'][2]['vs_before']:.2f}×</b>"), "the ratio under its tick"
    assert "×" not in bars.x[0] and "×" not in bars.x[-1], "none for the first step and the reference"
    assert published.type == "bar" and list(published.error_y.array + published.y) == pytest.approx([p.high for p in story.PUBLISHED_STEPS])
    assert len(fig.layout.xaxis.categoryarray) == len(data["categories"]) == 8


def test_the_figure_without_records_shows_the_published_steps_only():
    fig = viz.ablation_figure(story.chart_data(story.bars([])))
    assert [t.type for t in fig.data] == ["scatter", "bar"] and fig.data[1].error_y.array is not None
    assert "published steps only" in fig.layout.annotations[0].text
    with pytest.raises(ValueError, match="not among the chart's categories"):
        viz.ablation_figure({"categories": ["a"], "ours": [], "published": [{"category": "b", "low": 1, "high": 2,
                                                                            "text": "", "note": ""}]})


# -- the scene ---------------------------------------------------------------------------------------------

def _upload_with_ladder() -> bytes:
    d = json.loads(uploaded_recording())
    d["device"]["matmul_tflops"] = 720.0
    d["records"] += ladder_run()
    d["phases"] = [phase("fa3", name) for name in story.step_names()[1:]]
    return json.dumps(d).encode()


def test_the_scene_recorded_draws_the_bars_and_the_selected_steps_lanes():
    app = upload(open_app(scene="ablation", rung="3"), _upload_with_ladder())
    assert_no_exception(app)
    specs = plotly_specs(app)
    assert len(specs) == 3, "the bars, the lanes, and the FP8 view's chart in its popover"
    bar = next(t for t in specs[0]["data"] if t["type"] == "bar")
    assert len(bar["x"]) == 8, "seven steps and cuDNN, each with a number"
    assert "+ overlap: one program" in json.dumps(specs[1]["layout"], ensure_ascii=False), "the selected step's lanes"
    text = page_text(app)
    assert "6 of 6 steps faster than the one before" in text and "recorded on Test GPU" in text
    assert story.what_changed(story.step_names()[3]) in text and "inside a GEMM scope" in text


def test_the_scene_without_ladder_records_says_so_in_one_line():
    app = upload(open_app(scene="ablation"), uploaded_recording())
    assert_no_exception(app)
    text = page_text(app)
    assert "no ladder records yet" in text and "TFLOPS →" not in text
    specs = plotly_specs(app)
    bars = [t for t in specs[0]["data"] if t["type"] == "bar"]
    assert len(specs) == 2 and len(bars) == 1 and "published" in bars[0]["name"], "the published steps only"
    assert "CPU emulation of e4m3" in specs[1]["layout"]["xaxis"]["title"]["text"], "and the FP8 view's chart in its popover"
    assert app.info and "No Proton lanes recorded" in app.info[0].value


def test_live_where_the_ladder_cannot_run_shows_the_recording_and_says_why(monkeypatch):
    from page import stage as stage_module
    recording = stage_module._as_recording("h200.json", parse(doc([shipped_fa3(), *ladder_run()])))

    def refuse():
        raise RuntimeError("FA-3 style kernel needs Hopper (sm_90); this GPU is sm_100")
    monkeypatch.setattr(stage_module, "measure_ladder_live", refuse)
    monkeypatch.setattr(stage_module, "shipped_recording", lambda: recording)
    live = stage_module.Stage(settings=stage_module.Settings(), on_gpu=True, live=True, backend_reason="cuda",
                              facts={"name": "NVIDIA B200"})
    source = stage_module.ladder_source(live)
    assert "this GPU is sm_100" in shown(source.live_problem) and source.label.startswith("recorded on NVIDIA H200")
    assert len(source.records) == 8 and source.gpu == "NVIDIA H200"
    assert "Live: FA-3 style kernel needs Hopper" in shown(story.no_records_sentence(source.live_problem))


def test_bench_ladder_is_a_flag_and_its_phases_record_every_step_gluon_first():
    from bench import cli
    args = cli.parse_args(["--ladder", "--phases"])
    assert args.ladder and args.phases
    jobs = cli._phase_jobs(ladder=True)
    assert [step for _, step in jobs] == [*story.step_names()[1:], story.step_names()[0]], "the tl kernel last"
    assert [kernel for kernel, _ in jobs] == ["fa3"] * 6 + ["fa2"]
    assert all(step is None for _, step in cli._phase_jobs(ladder=False))


def test_the_scene_live_where_the_ladder_cannot_run_renders_the_recording_and_says_why(monkeypatch):
    """A live page on a GPU that is not Hopper: the ladder refuses to run; the scene shows the shipped recording's
    ladder, labelled as recorded, and says in its line why it is not live."""
    from page import stage as stage_module
    recording = stage_module._as_recording("h200.json", parse(doc([shipped_fa3(), *ladder_run()])))

    def refuse():
        raise RuntimeError("FA-3 style kernel needs Hopper (sm_90); this GPU is sm_100")
    monkeypatch.setattr(stage_module, "is_live", lambda settings: True)
    monkeypatch.setattr(stage_module, "live_device_facts", lambda: dict(FACTS, name="NVIDIA B200"))
    monkeypatch.setattr(stage_module, "measure_ladder_live", refuse)
    monkeypatch.setattr(stage_module, "shipped_recording", lambda: recording)
    app = open_app(scene="ablation", source="live")
    assert_no_exception(app)
    text = page_text(app)
    assert "recorded on NVIDIA H200" in text and "6 of 6 steps faster" in text
    assert "Not live: FA-3 style kernel needs Hopper (sm_90); this GPU is sm_100" in text
    specs = plotly_specs(app)
    assert len(specs) == 2 and len(next(t for t in specs[0]["data"] if t["type"] == "bar")["x"]) == 8
    assert "CPU emulation of e4m3" in specs[1]["layout"]["xaxis"]["title"]["text"], "the FP8 view: no e4m3 kernel off Hopper"


def test_a_partial_run_replaces_only_its_own_ratio_rows():
    """A run that re-measures the causal rows (bench --causal true --merge-into) replaces those rows whole (each row
    is one run's side-by-side ratios) and keeps the earlier non-causal ones; a run with no ratio rows keeps all."""
    from bench import cli
    def row(d, causal, ms):
        return {"head_dim": d, "causal": causal, "dtype": "bfloat16", "flash_ms": ms, "flash_vs_sdpa_flash": 1.3}
    earlier = [row(64, False, 1.0), row(64, True, 2.0), row(128, False, 3.0), row(128, True, 4.0)]
    fresh = [row(64, True, 1.5), row(128, True, 3.5)]
    merged = cli.merged_ratios(earlier, fresh)
    assert [(r["head_dim"], r["causal"], r["flash_ms"]) for r in merged] == [
        (64, False, 1.0), (64, True, 1.5), (128, False, 3.0), (128, True, 3.5)]
    assert cli.merged_ratios(earlier, []) == earlier and cli.merged_ratios([], []) is None



def test_the_last_step_is_said_beside_the_main_runs_figure_for_the_same_kernel():
    """The ladder's last step is the shipped kernel, which the other scenes show from the recording's main run at the
    same shape: the caption names both figures (the shipped recording: 672 there, 660 in the ladder's run), and says
    nothing where the main run lacks that record or the ladder has no numbers."""
    run = ladder_run()
    main = {**shipped_fa3(), "recorded_at": "2026-12-04T17:34Z"}
    assert (main["seq_len"], main["batch"], main["heads"], main["head_dim"], main["causal"], main["dtype"],
            main.get("pass") or "prefill") == story.ablation.LADDER_SHAPE  # bench's ladder shape is the story's
    bar_list = story.bars(run)
    said = story.ablation.other_run_sentence(bar_list, [main, *run])
    last = [b for b in bar_list if not b.reference][-1]
    assert f"{main['tflops']:,.0f} TFLOPS (2026-12-04), this run {last.tflops:,.0f}" in said
    assert f"two runs, {abs(main['tflops'] / last.tflops - 1):.1%} apart" in said
    assert story.ablation.other_run_sentence(bar_list, run) == ""  # ladder records are not the main run's
    assert story.ablation.other_run_sentence(story.bars([]), [main]) == ""
    shipped = res.load_results("h200.json")
    words = story.ablation.other_run_sentence(story.bars([r for r in shipped.records if r.get("config")]),
                                              shipped.records)
    shipped_main = next(r for r in shipped.records if r["algorithm"] == "fa3" and not r.get("config") and (
        r["seq_len"], r["batch"], r["heads"], r["head_dim"], r["causal"], r["dtype"], r["pass"]) == story.ablation.LADDER_SHAPE)
    assert f"{shipped_main['tflops']:,.0f} TFLOPS" in words and "this run" in words


def test_the_steps_said_to_ship_run_the_kernels_as_they_ship():
    from kernels import fa3, ladder
    steps = {s.name: s for s in ladder.steps()}
    assert set(story.ablation.SHIPS_AS) <= set(steps)
    for name, kernel in story.ablation.SHIPS_AS.items():
        assert steps[name].algorithm == kernel
        assert steps[name].config in (None, fa3.SHIPPED[(128, False)]), name  # None: fa2 as it ships


def test_the_inside_and_ablation_scenes_each_name_their_proton_recording_and_the_others():
    """The inside scene's FA-3 card (the shipped kernel recorded by `bench --phases`, 2026-12-02) and the ablation's
    last step (the same kernel recorded by `bench --ladder --phases`, 2026-12-04) are two runs: 44.2 µs and 57 % in one,
    44.6 µs and 58 % in the other. Each scene says which recording its numbers are (what was launched, when), and
    that the other's is another recording."""
    shipped = res.load_results("h200.json")
    programs = story.recorded_programs([p for p in shipped.phases if p.get("config") is None])
    steps = story.step_programs([p for p in shipped.phases if p.get("config")])
    fa3, last = next(p for p in programs if p.kernel == "fa3"), steps[story.step_names()[-1]]
    assert (fa3.day, last.day) == ("2026-12-02", "2026-12-04") and fa3.setting == last.setting
    assert f"{fa3.microseconds:.1f}" != f"{last.microseconds:.1f}", "two runs: their numbers differ"
    launch = "one launch at batch 1 × 4 heads, N = 4K, head_dim 128"
    for rung, name in ((len(story.step_names()) - 1, "+ conditional rescale"), (0, "FA-2 order"), (3, "+ softmax")):
        ablation = page_text(open_app(scene="ablation", rung=str(rung)))
        assert f"Its lanes (Proton, {launch}, 2026-12-04" in ablation, name
        other = "the inside scene's card of this kernel is another recording, 2026-12-02): some warpgroup"
        assert (other in ablation) == (rung != 3), name  # only the steps that run a kernel as it ships
    app = open_app(scene="inside")
    inside = page_text(app)
    assert f"Recorded on NVIDIA H200, 2026-12-02: {launch.replace('one launch', 'one launch of each kernel')}" in inside
    assert "The ablation scene's lanes are another recording, 2026-12-04." in inside
    card = next(m for m in app.metric if m.label.startswith("FA-3 style"))
    assert f"one program, {fa3.microseconds:.1f} µs; softmax under the other's GEMM {fa3.softmax_overlap:.0%}" in \
        card.proto.delta, "the card writes its µs as the ablation's lanes do: to a tenth"
    assert f"{story.ablation.SHORT[story.step_names()[-1]]}: one program, {last.microseconds:,.1f} µs" == \
        story.step_lanes_title(story.step_names()[-1], last)


def test_a_recording_of_another_launch_says_which():
    """Where the ladder's lanes were recorded at another shape than the inside scene's, each says the other's launch."""
    shipped = res.load_results("h200.json")
    programs = story.recorded_programs([p for p in shipped.phases if p.get("config") is None])
    steps = story.step_programs([{**p, "seq_len": 8192} for p in shipped.phases if p.get("config")])
    said = story.ablation.ladder_recording_sentence(programs, steps)
    assert said == ("The ablation scene's lanes are another recording, one launch at batch 1 × 4 heads, N = 8K, "
                    "head_dim 128, 2026-12-04.")
    assert story.ablation.ladder_recording_sentence(programs, {}) == ""
    lanes = story.step_lanes_sentence(steps[story.step_names()[-1]], programs, story.step_names()[-1])
    assert "another recording, one launch at batch 1 × 4 heads, N = 4K, head_dim 128, 2026-12-02)" in lanes
