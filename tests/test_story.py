"""story/: the numbers the scenes quote, from records and the cost model; and the roofline figure."""
import math

import pytest

import costmodel
from costmodel import Shape
from kernels import specs
import story
import viz.roofline
import viz.theme

PEAK, COPY = 700.0, 4250.0  # TFLOPS, GB/s (the H200's measured roofs are of this size)


def S(seq_len, batch, heads, head_dim, dtype_bytes, causal):
    """The cost model's shape as these tests write it: (N, batch, heads, head_dim, bytes per element, causal)."""
    return Shape(seq_len, batch, heads, head_dim, {2: "bfloat16", 4: "float32"}[dtype_bytes], causal)


def record(algorithm: str, time_ms: float, **extra) -> dict:
    flops = costmodel.attention_flops(S(8192, 2, 16, 128, 2, False))
    base = {"algorithm": algorithm, "seq_len": 8192, "batch": 2, "heads": 16, "head_dim": 128, "dtype": "bfloat16",
            "causal": False, "status": "ok", "time_ms": time_ms, "tflops": flops / (time_ms * 1e-3) / 1e12,
            "bytes_moved": 270_000_000, "dram_read_bytes": None, "dram_write_bytes": None, "kernels": None}
    return {**base, **extra}


def test_roofline_points_use_counted_bytes_and_split_the_standard_kernels():
    kernels = [{"name": n, "time_ms": t, "dram_read_bytes": r, "dram_write_bytes": w, "l2_bytes": 0}
               for n, t, r, w in (("_scores_kernel", 2.0, 200, 8_600_000_000), ("_softmax_kernel", 2.5, 8e9, 4e9),
                                  ("_pv_kernel", 2.0, 4_300_000_000, 67_000_000))]
    records = [record("fa2", 2.3, dram_read_bytes=201_000_000, dram_write_bytes=58_000_000),
               record("naive", 7.2, kernels=kernels, bytes_moved=26_000_000_000),
               record("sdpa_flash", 3.1),  # no counters: the model's bytes, hollow marker
               record("torch_naive", 20.0), {**record("fa2", 1.0), "status": "oom", "tflops": None}]
    points = {p.label: p for p in story.roofline_points(records, viz.theme.short_labels())}
    assert list(points) == ["flash (ours)", *story.NAIVE_KERNEL_LABELS, "SDPA flash"]
    flash = points["flash (ours)"]
    assert flash.counted and flash.hbm_bytes == 259_000_000
    assert flash.intensity == pytest.approx(costmodel.attention_flops(S(8192, 2, 16, 128, 2, False)) / 259e6)
    assert flash.tflops == pytest.approx(records[0]["tflops"])
    scores = points["standard: S = QKᵀ"]
    assert scores.flops == 2 * 32 * 8192**2 * 128 and scores.hbm_bytes == 8_600_000_200 and scores.time_ms == 2.0
    assert not points["SDPA flash"].counted and points["SDPA flash"].hbm_bytes == 270_000_000


def test_roofline_y_ticks_stay_readable_when_the_points_share_one_decade():
    # past the wall only the fast kernels are left: 300–600 TFLOPS under a 685 TFLOPS roof
    fast = [story.RoofPoint("flash (ours)", "fa2", 1.1e12, 70e6, 2.2, True).as_dict()]
    axis = viz.roofline.roofline_figure(fast, PEAK, COPY).layout.yaxis
    lo, hi = (10 ** v for v in axis.range)
    assert list(axis.tickvals) == [v for v in (100, 200, 500, 1000, 2000) if lo <= v <= hi]
    assert len(axis.tickvals) >= 3
    wide = [*fast, story.RoofPoint("standard: softmax", "naive", 1e10, 1e10, 3.0, True).as_dict()]
    assert viz.roofline.roofline_figure(wide, PEAK, COPY).layout.yaxis.dtick == 1  # decades are enough


def test_verdicts_place_points_left_or_right_of_the_ridge():
    points = [story.RoofPoint("memory", "naive", 1e12, 10**10, 10.0, True),   # 100 FLOPs/byte < ridge 165
              story.RoofPoint("compute", "fa2", 1e12, 10**8, 2.0, True)]    # 10,000 FLOPs/byte
    memory, compute = story.roofline_verdicts(points, PEAK, COPY)
    assert "memory-bound" in memory and f"{100 / (COPY * 100 / 1000):.0%}" in memory  # 100 TFLOPS of 425
    assert "compute-bound" in compute and f"{500 / PEAK:.0%}" in compute


def test_roofline_figure_puts_points_where_their_records_say():
    points = [story.RoofPoint("flash (ours)", "fa2", 1.1e12, 259_000_000, 2.3, True).as_dict(),
              story.RoofPoint("SDPA flash", "sdpa_flash", 1.1e12, 270_000_000, 3.1, False).as_dict()]
    fig = viz.roofline.roofline_figure(points, PEAK, COPY, l2_gbps=9000.0)
    markers = {t.name: t for t in fig.data if t.mode == "markers"}
    assert markers["flash (ours)"].x[0] == pytest.approx(1.1e12 / 259e6)
    assert markers["flash (ours)"].y[0] == pytest.approx(1.1e12 / 2.3e-3 / 1e12)
    roof = fig.data[0]
    assert roof.y[0] == pytest.approx(COPY * 1e9 * roof.x[0] / 1e12) and max(roof.y) == PEAK
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    ridge = [s for s in fig.layout.shapes if s.label and "ridge" in s.label.text][0]
    assert ridge.x0 == pytest.approx(costmodel.ridge_point(PEAK, COPY))
    assert markers["SDPA flash"].marker.color != markers["flash (ours)"].marker.color  # hollow: modelled bytes
    assert math.isclose(fig.data[1].y[0], 9000e9 * fig.data[1].x[0] / 1e12)


def _markers_and_labels(fig):
    """Each point's marker (its trace, in drawing order) and the label whose leader line ends on it, by name."""
    markers = [t for t in fig.data if t.mode == "markers"]
    labels = {a.text: a for a in fig.layout.annotations if a.showarrow}
    return markers, labels


def _overlapping(fig, markers):
    """Pairs of markers that cover each other where the scene draws the figure (1800 × its height design px: the plot
    area's place measured in chromium, viz.roofline's PLOT_* constants)."""
    from viz import roofline
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    width, height = roofline._plot_px([t.name for t in fig.data], 1800, fig.layout.height)
    at = {t.name: ((math.log10(t.x[0]) - x0) / (x1 - x0) * width, (y1 - math.log10(t.y[0])) / (y1 - y0) * height)
          for t in markers}
    return [(a, b) for i, a in enumerate(markers) for b in markers[i + 1:]
            if math.dist(at[a.name], at[b.name]) < (a.marker.size + b.marker.size) / 2]


def test_roofline_markers_on_one_spot_each_stay_visible_and_named():
    """At 8K the recording's FA-4, FA-3 style and SDPA default sit within a few pixels of ours (FA-4 and FA-3 style on
    one pixel): each marker keeps its true place, differs in size from every marker it overlaps, is drawn before the
    smaller ones (so it shows as a ring around them), and has a label whose leader line ends on it."""
    records = [r for r in RECORDED.records if (r["seq_len"], r["batch"], r["heads"], r["head_dim"], r["causal"]) ==
               (8192, 2, 16, 128, False) and r.get("config") is None and r["dtype"] == "bfloat16"
               and r.get("pass", "prefill") == "prefill"]
    points = story.roofline_points(records, viz.theme.short_labels())
    facts = RECORDED.facts
    fig = viz.roofline.roofline_figure([p.as_dict() for p in points], facts["matmul_tflops"], facts["copy_gbps"],
                                       facts["l2_gbps"], height=472)
    markers, labels = _markers_and_labels(fig)
    for point in points:  # every point where its record says, whatever its marker
        (trace,) = [t for t in markers if t.name == point.label]
        assert trace.x[0] == pytest.approx(point.intensity) and trace.y[0] == pytest.approx(point.tflops)
    overlapping = _overlapping(fig, markers)
    crowded = {t.name for pair in overlapping for t in pair}
    assert {"FA-4 (the authors')", "FA-3 style (ours)", "SDPA default", "flash (ours)"} <= crowded
    for first, second in overlapping:
        assert first.marker.size > second.marker.size, f"{second.name} is hidden under {first.name}"
    for name in crowded:
        (trace,) = [t for t in markers if t.name == name]
        label = labels[name]
        assert (label.x, label.y) == pytest.approx((math.log10(trace.x[0]), math.log10(trace.y[0])))
        assert label.standoff == trace.marker.size / 2  # the leader line stops at the marker's edge
    # the legend keeps the points' order, ours last, whatever order the markers are drawn in
    ranked = sorted(markers, key=lambda t: t.legendrank)
    assert [t.name for t in ranked][-1] == "flash (ours)"
    assert [t.name for t in ranked][:-1] == [p.label for p in points if p.algorithm != "fa2"]


def test_roofline_labels_stand_apart_and_in_the_plot():
    """Five kernels on one spot: five labels a row apart, top to bottom as their points are (no two leader lines
    cross), inside the plot."""
    from viz import roofline
    points = [story.RoofPoint(name, key, 1.1e12, 270_000_000, ms, True).as_dict()
              for name, key, ms in (("flash (ours)", "fa2", 2.0), ("FA-4 (the authors')", "fa4_authors", 1.6),
                                    ("FA-3 style (ours)", "fa3", 1.61), ("SDPA default", "sdpa_default", 1.7),
                                    ("SDPA flash", "sdpa_flash", 2.1))]
    fig = viz.roofline.roofline_figure(points, PEAK, COPY, height=472)
    markers, labels = _markers_and_labels(fig)
    assert len(labels) == 5 and len({t.marker.size for t in markers if t.name in ("FA-4 (the authors')",
                                                                                   "FA-3 style (ours)")}) == 2
    height = roofline._plot_px([t.name for t in fig.data], 1800, 472)[1]
    (y0, y1) = fig.layout.yaxis.range
    ends = sorted(((y1 - label.y) / (y1 - y0) * height + label.ay, (y1 - label.y) / (y1 - y0) * height)
                  for label in labels.values())  # (the label's height, its point's) in plot px, top down
    assert all(b[0] - a[0] >= roofline.LABEL_ROW_PX - 0.01 for a, b in zip(ends, ends[1:]))
    assert [point for _, point in ends] == sorted(point for _, point in ends), "leader lines do not cross"
    assert all(0 <= label <= height for label, _ in ends)


# -- on the shipped recording: the page's claims agree with each other ---------------------------------

from bench.results import load_results  # noqa: E402  (torch-free)
from story import oom_text  # noqa: E402
from fmt import fmt_ms# noqa: E402

RECORDED = load_results("h200.json")
SCENE = {key: number for number, key in enumerate(
    ("headline", "hierarchy", "problem", "compare", "roofline", "tiling", "seqlen", "evolution", "timeline",
     "takeaways"), start=1)}
COMBOS = sorted({(r["head_dim"], r["causal"]) for r in RECORDED.records})


def recorded(head_dim: int, causal: bool, algorithms=("fa2", "naive")) -> list[dict]:
    return [r for r in RECORDED.records if r["head_dim"] == head_dim and r["causal"] == causal
            and r["algorithm"] in algorithms and r["batch"] == 2 and r["heads"] == 16
            and r.get("config") is None  # not a step of the ablation (bench --ladder: its own scene)
            and r.get("pass", "prefill") == "prefill"]  # nor a backward (its own scene)


@pytest.mark.parametrize(("head_dim", "causal"), COMBOS)
def test_at_8k_the_traffic_ratio_explains_the_measured_speedup(head_dim, causal):
    records = recorded(head_dim, causal)
    panels = story.traffic_panels(S(8192, 2, 16, head_dim, 2, causal), records, RECORDED.facts)
    numbers = story.headline(records, S(8192, 2, 16, head_dim, 2, False))
    speedup = float(numbers.speedup.rstrip("×"))
    assert speedup > 1.5
    assert story.hbm_bytes(panels, records, 8192).ratio >= speedup


@pytest.mark.parametrize(("head_dim", "causal"), COMBOS)
def test_past_the_wall_every_claim_says_out_of_memory_with_the_same_bytes(head_dim, causal):
    records = recorded(head_dim, causal)
    wall = story.first_out_of_memory(records)
    assert wall is not None
    for seq_len in sorted({r["seq_len"] for r in records if r["seq_len"] >= wall["seq_len"]}):
        numbers = story.headline(records, S(seq_len, 2, 16, head_dim, 2, False))
        naive = story.record_at(records, "naive", seq_len)
        assert numbers.speedup == ("refused" if story.refused(naive) else story.OUT_OF_MEMORY)  # the card's word
        assert oom_text(naive) in numbers.speedup_why
        assert story.oom_word(naive) in numbers.speedup_why
        panels = story.traffic_panels(S(seq_len, 2, 16, head_dim, 2, causal), records, RECORDED.facts)
        at_length = recorded(head_dim, causal, specs.keys(roofline=True))
        points = story.takeaways(story.Evidence(records, at_length, panels, RECORDED.facts, "H200"),
                                 S(seq_len, 2, 16, head_dim, 2, causal), SCENE)
        text = "\n".join(points)
        assert "n/a" not in text and "standard moves" not in text
        assert f"{story.oom_word(naive)} ({oom_text(naive)})" in text  # refused before any launch: said so
        assert oom_text(wall) in text  # the wall's own bytes, the same words as on the memory chart


@pytest.mark.parametrize(("head_dim", "causal"), COMBOS)
def test_headline_times_read_as_milliseconds_at_every_length(head_dim, causal):
    records = recorded(head_dim, causal)
    for seq_len in sorted({r["seq_len"] for r in records}):
        why = story.headline(records, S(seq_len, 2, 16, head_dim, 2, False)).speedup_why
        assert "e+" not in why and "e-" not in why, why  # never 2.08e+03 ms
        flash = story.record_at(records, "fa2", seq_len)
        if flash is not None and flash["status"] == "ok":
            assert fmt_ms(flash["time_ms"]) in why


def test_takeaways_quote_the_scenes_by_their_numbers():
    records = recorded(128, False)
    panels = story.traffic_panels(S(8192, 2, 16, 128, 2, False), records, RECORDED.facts)
    evidence = story.Evidence(records, recorded(128, False, specs.keys(roofline=True)), panels, RECORDED.facts,
                              "H200", 1e-3, 256)
    text = "\n".join(story.takeaways(evidence, S(8192, 2, 16, 128, 2, False), {**SCENE, "compare": 44}))
    assert "scene 44" in text and f"scene {SCENE['tiling']}" in text



@pytest.mark.parametrize(("head_dim", "causal"), COMBOS)
def test_the_fa3_takeaway_quotes_it_against_pytorchs_default_and_our_fa2(head_dim, causal):
    """The FA-3 slide says what the kernel beats, from the same records the evolution scene draws: its ratio to
    SDPA's default (cuDNN on the H200) and to our FA-2-order kernel, at the talk's length."""
    algorithms = ("fa2", "naive", "fa3", "sdpa_default")
    records = [r for r in RECORDED.records if r["head_dim"] == head_dim and r["causal"] == causal
               and r["batch"] == 2 and r["heads"] == 16 and r.get("config") is None and r["dtype"] == "bfloat16"
               and r.get("pass", "prefill") == "prefill"]  # the talk's setting (the file also holds FP8, backward)
    at_length = [r for r in records if r["algorithm"] in algorithms]
    panels = story.traffic_panels(S(8192, 2, 16, head_dim, 2, causal), recorded(head_dim, causal), RECORDED.facts)
    slides = story.takeaway_slides(story.Evidence(recorded(head_dim, causal), at_length, panels, RECORDED.facts),
                                   S(8192, 2, 16, head_dim, 2, causal), SCENE)
    (fa3,) = [s for s in slides if s.title == "FA-3 style, ours"]
    v3, sdpa, flash = (story.record_at(at_length, a, 8192) for a in ("fa3", "sdpa_default", "fa2"))
    assert fa3.number == f"{v3['tflops']:,.0f} TFLOPS"
    assert f"{v3['tflops'] / sdpa['tflops']:.2f}× SDPA's default" in fa3.line
    assert f"{v3['tflops'] / flash['tflops']:.2f}× our FA-2-order kernel" in fa3.line
    assert v3["tflops"] > sdpa["tflops"]  # the recording's claim: ours beats the library's default here
    # the popover's words carry the same card: every slide has its sentence
    points = story.takeaways(story.Evidence(recorded(head_dim, causal), at_length, panels, RECORDED.facts),
                             S(8192, 2, 16, head_dim, 2, causal), SCENE)
    (said,) = [p for p in points if p.startswith("**FA-3 style, ours.**")]
    assert f"{v3['tflops']:,.0f} TFLOPS" in said and f"{v3['tflops'] / sdpa['tflops']:.2f}× SDPA's default" in said
    assert f"{v3['tflops'] / flash['tflops']:.2f}× our FA-2-order kernel" in said and f"scene {SCENE['evolution']}" in said
    assert len(points) >= len(slides)

def test_without_a_residency_the_l2_model_assumes_one_program_per_sm_and_says_so():
    """Given no residency the L2-aware model takes one program per SM, says it is assumed, and is what the bench
    wrote as bytes_moved (the bench passes none). That it then meets the counters at 256K is a coincidence the
    recorded timeline contradicts (2 per SM): tests/test_story_truth.py pins the model at the measured residency."""
    (record,) = [r for r in recorded(128, False) if r["algorithm"] == "fa2" and r["seq_len"] == 262144]
    panels = story.traffic_panels(S(262144, 2, 16, 128, 2, False), recorded(128, False), RECORDED.facts)
    assert panels.flash_bytes == record["bytes_moved"]  # the bench wrote the same model
    assert panels.machine.programs_in_flight == RECORDED.facts["sm_count"]
    assert "1 per SM, assumed: no timeline" in panels.machine.how


def test_the_ring_takeaway_is_the_ring_scenes_own_numbers():
    """The ring slide and sentence quote what the ring scene shows (story.ring): our fastest layout at the most GPUs
    and the longest length timed on one GPU too, its parallel efficiency and its speed over PyTorch's
    context_parallel; without ring runs there is neither."""
    from story import ring
    records = recorded(128, False)
    panels = story.traffic_panels(S(8192, 2, 16, 128, 2, False), records, RECORDED.facts)
    scenes = {**SCENE, "ring": 9}
    runs = tuple(RECORDED.ring)
    evidence = story.Evidence(records, recorded(128, False, specs.keys(roofline=True)), panels, RECORDED.facts, "H200",
                              ring=runs)
    (slide,) = [s for s in story.takeaway_slides(evidence, S(8192, 2, 16, 128, 2, False), scenes)
                if s.title == "Past one GPU"]
    world = ring.pick_world(list(runs), 0)
    shape = ring.pick_shape(list(runs), world)
    longest = max(n for n in ring.ring_lengths(list(runs), world, shape)
                  if ring.efficiency(ring.best_ours(list(runs), world, shape, n)) is not None)
    best = ring.best_ours(list(runs), world, shape, longest)
    assert slide.number == f"{ring.efficiency(best):.0%} efficient" and slide.scene == 9
    assert f"{ring.vs_peer(list(runs), best):.2f}× PyTorch's context_parallel" in slide.line
    text = "\n".join(story.takeaways(evidence, S(8192, 2, 16, 128, 2, False), scenes))
    assert "**Past one GPU.**" in text and f"{ring.efficiency(best):.0%}" in text and "scene 9" in text
    bare = story.Evidence(records, recorded(128, False, specs.keys(roofline=True)), panels, RECORDED.facts, "H200")
    assert not any(s.title == "Past one GPU" for s in story.takeaway_slides(bare, S(8192, 2, 16, 128, 2, False),
                                                                             scenes))
    assert "Past one GPU" not in "\n".join(story.takeaways(bare, S(8192, 2, 16, 128, 2, False), scenes))
