"""The ring scene, "Past one GPU: ring attention": its story (story/ring.py) at every state a recording can be in, its
three figures (viz/ring.py) on small inputs, and the scene in the app on an uploaded recording with and without ring
runs. The runs here are made up for the tests (their steps follow the cost model's plan, their times are chosen), and
checked by bench.results like a recorded file's."""
from __future__ import annotations

import json
import math

import pytest

import costmodel
import story
import viz
from bench import results
from fmt import fmt_tokens
from page import BODY_WIDTH_PX
from tests.support_app import (assert_no_exception, badges, element_places, metric_values, open_app, page_text,
                                plotly_specs, upload, uploaded_recording)

ring = story.ring
SHAPE = (1, 32, 128, "bfloat16", True)


def run(impl="ours", layout="zigzag", world=2, seq_len=1 << 18, time_ms=450.0, one_gpu_ms=860.0, status="ok",
        rotate=None, kv_step_ms=6.0, causal=True, per_block_ms=100.0, wait_ms=0.5, traced=True) -> dict:
    """A ring run as bench.ring writes it: ours traced step by step (a full block takes per_block_ms, a diagonal
    half of it; each step then waits wait_ms), PyTorch's without a trace."""
    finished = status == "ok"
    out = {"impl": impl, "layout": layout, "rotate": rotate or ("p2p" if impl == "ours" else "alltoall"),
           "kernel": "fa3" if impl == "ours" else "sdpa (default backend)", "world_size": world, "seq_len": seq_len,
           "batch": 1, "heads": 32, "head_dim": 128, "dtype": "bfloat16", "causal": causal, "status": status,
           "message": "" if finished else "CUDA out of memory", "device": "Test GPU", "timing_kind": "cuda",
           "time_ms": time_ms if finished else None, "time_ms_p20": time_ms if finished else None,
           "time_ms_p80": time_ms if finished else None}
    if impl != "ours":
        return out
    out.update(one_gpu_ms=one_gpu_ms, kv_step_ms=kv_step_ms, check_seq_len=800, check_err=0.009)
    if not (finished and traced):
        return out
    steps = []
    for rank in range(world):
        start = 0.0
        for step in range(world):
            blocks = costmodel.ring_blocks(world, rank, step, layout, causal)
            compute = per_block_ms * costmodel.ring_step_work(world, rank, step, layout, causal)
            steps.append({"rank": rank, "step": step, "src": costmodel.ring_source(world, rank, step),
                          "start_ms": start, "compute_ms": compute, "wait_ms": wait_ms,
                          "blocks": [list(b) for b in blocks]})
            start += compute + wait_ms
    out["steps"] = steps
    out["rank_compute_ms"] = [sum(s["compute_ms"] for s in steps if s["rank"] == r) for r in range(world)]
    out["rank_wait_ms"] = [sum(s["wait_ms"] for s in steps if s["rank"] == r) for r in range(world)]
    return out


def checked(runs: list[dict]) -> list[dict]:
    """The runs as the app reads them: through bench.results' checks."""
    doc = json.loads(uploaded_recording())
    doc["ring"] = runs
    return results.parse_results(json.dumps(doc).encode(), "test").ring


def recording(runs: list[dict]) -> bytes:
    doc = json.loads(uploaded_recording())
    doc["ring"] = runs
    return json.dumps(doc).encode()


TWO_GPUS = [run(layout="plain", time_ms=660.0, per_block_ms=200.0), run(layout="zigzag", time_ms=450.0),
            run("torch_cp", rotate="alltoall", time_ms=510.0), run("torch_cp", rotate="allgather", time_ms=500.0)]


# -- which runs, and the numbers derived from them ---------------------------------------------------------------

def test_the_derived_numbers_are_the_documented_ratios():
    runs = checked(TWO_GPUS)
    zigzag = runs[1]
    assert ring.efficiency(zigzag) == pytest.approx(860.0 / (2 * 450.0))
    assert ring.vs_peer(runs, zigzag) == pytest.approx(500.0 / 450.0)  # the faster rotation, all-gather
    assert ring.best_peer(runs, zigzag)["rotate"] == "allgather"
    assert ring.vs_peer(runs, runs[2]) is None  # PyTorch's own run has no ratio to itself
    shares = ring.comm_shares(zigzag)
    assert shares == [pytest.approx(w / (w + c)) for w, c in zip(zigzag["rank_wait_ms"], zigzag["rank_compute_ms"])]
    plain = runs[0]
    assert ring.measured_balance(plain) == pytest.approx(
        sum(plain["rank_compute_ms"]) / 2 / max(plain["rank_compute_ms"]))
    assert ring.model_balance(plain) == pytest.approx(2 / 3)  # world ÷ (2·world − 1)
    assert ring.model_balance(zigzag) == 1.0


def test_missing_numbers_stay_missing():
    alone = checked([run(one_gpu_ms=None), run("torch_cp", status="oom")])
    assert ring.efficiency(alone[0]) is None
    assert ring.vs_peer(alone, alone[0]) is None  # the peer ran out of memory
    assert ring.comm_shares(checked([run(traced=False)])[0]) is None


def test_the_gpu_count_is_the_links_where_recorded_else_the_most():
    runs = checked([*TWO_GPUS, run(world=4, time_ms=240.0, seq_len=1 << 18)])
    assert ring.ring_worlds(runs) == (2, 4)
    assert ring.pick_world(runs, 2) == 2
    assert ring.pick_world(runs, 0) == 4 and ring.pick_world(runs, 3) == 4
    assert ring.pick_world(checked([run(status="oom")]), 0) is None
    assert ring.pick_world([], 2) is None


def test_the_animation_takes_the_longest_traced_length_in_layout_order():
    runs = checked([run(layout="zigzag", seq_len=1 << 19, time_ms=1800.0), run(layout="plain", seq_len=1 << 19),
                    run(layout="zigzag", seq_len=1 << 20, traced=False)])
    seq_len, chosen = ring.traced(runs, 2, SHAPE)
    assert seq_len == 1 << 19 and list(chosen) == ["plain", "zigzag"]
    assert ring.traced(runs, 4, SHAPE) == (None, {})


# -- the sentences, at every state ------------------------------------------------------------------------------

def test_the_layout_sentence_says_what_zigzag_buys_measured_and_modelled():
    words = ring.layout_sentence(checked(TWO_GPUS), 2, SHAPE, 1 << 18)
    assert "plain 660 ms, zigzag 450 ms, zigzag 1.5× faster" in words
    assert "balance on 2 GPUs: 67%" in words and "(100%)" in words
    assert "mean ÷ most: plain 67%, zigzag 100%" in words  # the made-up trace follows the model exactly


def test_the_layout_sentence_with_one_layout_or_a_failure_or_no_mask():
    one = ring.layout_sentence(checked([run(layout="zigzag"), run(layout="plain", status="oom")]), 2, SHAPE, 1 << 18)
    assert "Only the zigzag layout finished at 256K tokens on 2 GPUs: 450 ms." in one
    assert "Ours, plain: out of memory." in one
    none = ring.layout_sentence(checked([run(status="oom")]), 2, SHAPE, 1 << 18)
    assert "Neither layout finished" in none
    full = ring.layout_sentence(checked([run(causal=False)]), 2, SHAPE[:4] + (False,), 1 << 18)
    assert "Without a causal mask" in full and "100%" in full and "idle" not in full


def test_the_handoff_sentence_compares_the_hop_with_the_compute_it_hides_behind():
    hidden = ring.handoff_sentence(checked([run(kv_step_ms=6.0)])[0])
    shard = costmodel.ring_kv_bytes_per_step(1 << 18, 2, 1, 32, 128, 2)
    assert "(2.0 GiB)" in hidden and f"{shard / 6.0 / 1e6:,.0f} GB/s" in hidden
    assert "computes for 200 ms, 33× as long: the hop hides behind the compute" in hidden
    exposed = ring.handoff_sentence(checked([run(kv_step_ms=500.0)])[0])
    assert "cannot hide behind it" in exposed and "hides behind" not in exposed
    slow = ring.handoff_sentence(checked([run(seq_len=64, kv_step_ms=26.0)])[0])  # a CPU run's hop: not "0 GB/s"
    assert "(20.2 MB/s)" in slow  # 32 tokens × 32 heads × 128 × 2 bytes, K and V, in 26 ms
    assert ring.rate_words(2.02e9) == "2.02 GB/s" and ring.rate_words(357.4e9) == "357 GB/s"
    untimed = ring.handoff_sentence(checked([run(kv_step_ms=None)])[0])
    assert "its hop alone was not timed" in untimed
    quiet = ring.handoff_sentence(checked([run(wait_ms=0.0)])[0])
    assert "at most" not in quiet and "is under 0.1% of every GPU's time." in quiet


def test_the_layer_sentence_at_every_data_state():
    full = ring.layer_sentence(checked(TWO_GPUS), 2, SHAPE)
    assert "one GPU 860 ms, ours on 2 GPUs 450 ms (zigzag), PyTorch's context_parallel 500 ms (all-gather)" in full
    assert "1.91× faster than one GPU: 96% parallel efficiency" in full
    assert "PyTorch's time ÷ ours: 1.11 (ours faster)" in full
    no_peer = ring.layer_sentence(checked([run()]), 2, SHAPE)
    assert "PyTorch's context_parallel was not timed at 256K tokens on 2 GPUs" in no_peer
    no_one = ring.layer_sentence(checked([run(one_gpu_ms=None)]), 2, SHAPE)
    assert "one GPU not timed" in no_one and "efficiency" not in no_one
    slower = ring.layer_sentence(checked([run(time_ms=500.0), run("torch_cp", time_ms=400.0)]), 2, SHAPE)
    assert "(PyTorch faster)" in slower
    peer_only = ring.layer_sentence(checked([run(status="oom"), run("torch_cp", time_ms=400.0)]), 2, SHAPE)
    assert peer_only.startswith("Ours did not finish on 2 GPUs") and "400 ms" in peer_only


def test_the_memory_walls_grow_with_the_gpus_and_fit_the_memory():
    hbm = 141 << 30
    walls = ring.memory_walls(SHAPE, hbm)
    assert [w.world for w in walls] == [1, 2, 4, 8]
    assert all(a.seq_len <= b.seq_len for a, b in zip(walls, walls[1:]))
    for wall in walls:
        assert costmodel.ring_memory(wall.seq_len, wall.world, 1, 32, 128, 2).total <= hbm
    assert ring.memory_walls(SHAPE, None) == []
    assert "lacks" in ring.memory_sentence([], None, "Test GPU")
    words = ring.memory_sentence(walls, hbm, "Test GPU", 1 << 19)
    assert f"O of {fmt_tokens(walls[0].seq_len)} tokens at this shape on one GPU" in words
    assert f"8 GPUs in a ring hold {fmt_tokens(walls[-1].seq_len)}" in words
    assert "what the ring buys first is time" in words
    # the distance is one GPU's wall's (the ring's 8-GPU wall is named before it), and a 2-GPU ring that holds about
    # what one GPU does is said to, with why
    assert f"One GPU's wall lies {walls[0].seq_len / (1 << 19):.0f}× past the longest length timed (512K)" in words
    assert walls[1].seq_len < 1.1 * walls[0].seq_len and "Two GPUs hold about what one does" in words
    assert "buys first" not in ring.memory_sentence(walls, hbm, "Test GPU", walls[0].seq_len)


def test_no_runs_says_how_to_make_them():
    line = ring.no_runs_line(True)
    assert "This recording has no ring runs" in line and ring.RING_COMMAND in line
    assert ring.RING_COMMAND == "torchrun --nproc-per-node=K -m bench.ring --out results/h200.json"


def test_the_length_series_take_the_faster_layout_and_rotation_per_length():
    runs = checked([*TWO_GPUS, run(layout="plain", seq_len=1 << 19, time_ms=2600.0, one_gpu_ms=3400.0),
                    run(layout="zigzag", seq_len=1 << 19, time_ms=1900.0, one_gpu_ms=3400.0)])
    series = {(s["kind"], s["world"]): s for s in ring.length_series(runs, SHAPE)}
    assert [(p["seq_len"], p["time_ms"]) for p in series[("one", 1)]["points"]] == [(1 << 18, 860.0), (1 << 19, 3400.0)]
    assert [(p["time_ms"], p["note"]) for p in series[("ours", 2)]["points"]] == [(450.0, "zigzag"), (1900.0, "zigzag")]
    assert [(p["time_ms"], p["note"]) for p in series[("torch_cp", 2)]["points"]] == [(500.0, "all-gather")]
    assert ("one", 1) not in {(s["kind"], s["world"]) for s in ring.length_series(checked([run(one_gpu_ms=None)]), SHAPE)}


def test_the_rows_carry_every_run_with_its_numbers():
    rows = ring.ring_rows(checked([*TWO_GPUS, run("torch_cp", rotate="allgather", status="oom", seq_len=1 << 18)][:4]
                                  + [run("torch_cp", rotate="alltoall", status="oom", seq_len=1 << 19)]),
                          2, SHAPE, 1 << 18)
    assert [r.label for r in rows] == ["ours, plain", "ours, zigzag", "PyTorch context_parallel, all-gather",
                                       "PyTorch context_parallel, all-to-all"]
    assert rows[1].efficiency == pytest.approx(860 / 900) and rows[1].vs_peer == pytest.approx(500 / 450)
    oom = ring.ring_rows(checked([run(status="oom")]), 2, SHAPE, 1 << 18)[0]
    assert oom.time_words == "out of memory" and oom.efficiency is None


# -- the figures ------------------------------------------------------------------------------------------------

def test_the_ring_animates_one_frame_per_step_from_the_measured_trace():
    runs = checked([run(layout="plain", world=4, per_block_ms=50.0), run(layout="zigzag", world=4)])
    fig = viz.ring_steps_figure(ring.animation_runs({r["layout"]: r for r in runs}), height=700, width_px=BODY_WIDTH_PX)
    per_run = viz.ring.TIMELINE_TRACES
    assert len(fig.frames) == 4 and len(fig.data) == 2 + 2 * per_run  # the two grids, then each run's timeline
    plain, faint, done, now, waits = fig.data[0], *fig.data[2:2 + per_run]
    steps = runs[0]["steps"]
    assert list(faint.base) == [s["start_ms"] for s in steps] and list(faint.x) == [s["compute_ms"] for s in steps]
    assert list(waits.base) == [s["start_ms"] + s["compute_ms"] for s in steps]
    blocks = [(s["step"], b) for s in steps for b in s["blocks"]]
    assert [(b[0], b[1]) for _, b in blocks] == list(zip(plain.y, plain.x))
    # each frame's trace says its type: plotly.js would play a bar without one as a scatter (lines, not bars)
    assert [d.type for d in fig.frames[0].data] == ["scatter"] * 2 + ["bar"] * 6
    assert fig.frames[0].traces == (0, 1, 3, 4, 5, 7, 8, 9)  # the faint bars never change
    for t, frame in enumerate(fig.frames):
        grid = frame.data[0].marker.opacity
        assert [o == 1.0 for o in grid] == [step == t for step, _ in blocks]
        done_x, now_x, wait_x = (frame.data[k].x for k in (2, 3, 4))
        assert [x is not None for x in done_x] == [s["step"] < t for s in steps]
        assert [x for x in now_x if x is not None] == [s["compute_ms"] for s in steps if s["step"] == t]
        assert [x is not None for x in wait_x] == [s["step"] <= t for s in steps]
    # a diagonal block is drawn as the triangle it computes; each GPU's colour is its own
    assert {sym for sym, (_, b) in zip(plain.marker.symbol, blocks) if b[2] == "causal"} == {"triangle-sw"}
    assert len(set(now.marker.color)) == 4
    time_axis = fig.layout[faint.xaxis.replace("x", "xaxis")]
    assert fig.layout[fig.data[2 + per_run].xaxis.replace("x", "xaxis")].matches == faint.xaxis  # one time axis
    assert time_axis.range[1] >= max(s["start_ms"] + s["compute_ms"] + s["wait_ms"] for s in steps)
    assert fig.layout.height == 700 and len(fig.layout.sliders[0].steps) == 4


def test_the_ring_thins_its_labels_where_they_would_crowd():
    """8 GPUs: 16 chunks on a grid a few hundred px wide, 8 lanes per timeline; every label keeps 24 px text apart."""
    runs = checked([run(layout="plain", world=8), run(layout="zigzag", world=8)])
    fig = viz.ring_steps_figure(ring.animation_runs({r["layout"]: r for r in runs}), height=560, width_px=BODY_WIDTH_PX)
    grid = fig.layout.yaxis2  # the zigzag grid's query chunks
    assert grid.tickvals[0] == 0 and 1 < grid.tickvals[1] - grid.tickvals[0] < 16
    lanes = fig.layout[fig.data[2].yaxis.replace("y", "yaxis")]
    assert lanes.tickvals[0] == 0 and len(lanes.tickvals) < 8 and lanes.ticktext[0] == "GPU 0"
    roomy = viz.ring_steps_figure(ring.animation_runs({"zigzag": checked([run(world=2)])[0]}), height=800, width_px=BODY_WIDTH_PX)
    assert list(roomy.layout.yaxis2.tickvals) == [0, 1] and list(roomy.layout.yaxis.tickvals) == [0, 1, 2, 3]
    # two runs of 2 GPUs: where a timeline has room for one label (480 px), it names both lanes, not "GPU 0" alone
    pairs = {h: viz.ring_steps_figure(ring.animation_runs({r["layout"]: r for r in checked(
        [run(layout="plain", world=2), run(layout="zigzag", world=2)])}), height=h, width_px=BODY_WIDTH_PX)
        for h in (480, 560)}
    lanes = {h: f.layout[f.data[2].yaxis.replace("y", "yaxis")] for h, f in pairs.items()}
    assert list(lanes[480].ticktext) == ["GPUs 0–1"] and list(lanes[480].tickvals) == [0.5]
    assert list(lanes[560].ticktext) == ["GPU 0", "GPU 1"] and list(lanes[560].tickvals) == [0, 1]


def test_a_short_place_gives_the_ring_its_least_height_not_an_error():
    fig = viz.ring_steps_figure(ring.animation_runs({"zigzag": checked([run()])[0]}), height=200, width_px=BODY_WIDTH_PX)
    assert fig.layout.height == viz.ring.TOP_PX + viz.ring.MIN_PLOT_PX + viz.ring.BOTTOM_PX
    assert fig.layout.updatemenus[0].y >= -2 and fig.layout.sliders[0].y >= -2


def test_the_ring_animation_refuses_runs_it_cannot_draw_side_by_side():
    two, four = checked([run(world=2), run(world=4, layout="plain")])
    with pytest.raises(ValueError, match="one GPU count"):
        viz.ring_steps_figure(ring.animation_runs({"zigzag": two, "plain": four}), width_px=BODY_WIDTH_PX)
    with pytest.raises(ValueError, match="no traced run"):
        viz.ring_steps_figure([], width_px=BODY_WIDTH_PX)
    with pytest.raises(ValueError, match="start_step"):
        viz.ring_steps_figure(ring.animation_runs({"zigzag": two}), start_step=2, width_px=BODY_WIDTH_PX)


def test_the_balance_bars_are_the_measured_compute_with_both_balances():
    runs = checked(TWO_GPUS[:2])
    fig = viz.ring_balance_figure(ring.balance_bars({r["layout"]: r for r in runs}), theme="dark")
    layouts = ["plain: mean ÷ most 67%, cost model 67%", "zigzag: mean ÷ most 100%, cost model 100%"]
    assert [t.name for t in fig.data] == ["GPU 0", "GPU 1"]  # a bar's colour is its GPU; its place, its layout
    for rank, trace in enumerate(fig.data):
        assert [list(level) for level in trace.x] == [layouts, [f"GPU {rank}"] * 2]
        assert list(trace.y) == [r["rank_compute_ms"][rank] for r in runs]
    assert fig.layout.xaxis.type == "multicategory" and fig.layout.barmode == "relative"


def test_a_colour_is_a_gpu_in_every_view_of_the_ring_and_the_legends_say_so():
    """The ring, step by step, colours each block and bar by its GPU; the balance view coloured its bars by layout in
    the same blue (and a near orange), so blue was GPU 0 in one view and zigzag in the next. Now a colour is a GPU in
    both, and each says so: the balance view's legend names the GPUs, the ring's title gives the colour of each."""
    for world in (2, 4):
        runs = checked([run(layout="plain", world=world, per_block_ms=200.0), run(layout="zigzag", world=world)])
        chosen = {r["layout"]: r for r in runs}
        steps = viz.ring_steps_figure(ring.animation_runs(chosen), width_px=BODY_WIDTH_PX)
        balance = viz.ring_balance_figure(ring.balance_bars(chosen))
        in_steps: dict[int, set[str]] = {}
        for grid, shown in zip(steps.data[:len(chosen)], ring.animation_runs(chosen)):
            ranks = [step["rank"] for step in shown["steps"] for _ in step["blocks"]]
            for rank, colour in zip(ranks, grid.marker.color):
                in_steps.setdefault(rank, set()).add(colour)
        assert all(len(colours) == 1 for colours in in_steps.values()) and len(in_steps) == world
        for trace in balance.data:
            (gpu,) = set(trace.x[1])
            rank = int(gpu.removeprefix("GPU "))
            assert trace.name == gpu and {trace.marker.color} == in_steps[rank], gpu
        assert "GPU" in balance.layout.legend.title.text and balance.layout.showlegend is not False
        for rank, colours in in_steps.items():
            assert f"color:{next(iter(colours))}'>■</span> GPU {rank}" in steps.layout.title.text


def test_the_length_chart_draws_measured_points_and_the_modelled_walls():
    runs = checked(TWO_GPUS)
    walls = [vars(w) for w in ring.memory_walls(SHAPE, 141 << 30)]
    fig = viz.ring_length_figure(ring.length_series(runs, SHAPE), walls, height=500)
    assert [t.name for t in fig.data] == ["ours on one GPU", "ours, ring on 2 GPUs", "PyTorch context_parallel, 2 GPUs"]
    assert [list(t.y) for t in fig.data] == [[860.0], [450.0], [500.0]]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    # 1 and 2 GPUs hold about as much (each GPU keeps the buffers in flight): one line, one label
    labels = [a.text for a in fig.layout.annotations]
    assert any(label.startswith("1 or 2 GPUs: ") for label in labels) and len(fig.layout.shapes) == 3
    low, high = fig.layout.yaxis.range
    assert all(low <= math.log10(v) <= high for v in fig.layout.yaxis.tickvals)
    assert "cost model" in fig.layout.xaxis.title.text


# -- the scene ----------------------------------------------------------------------------------------------------

def test_a_recording_without_ring_runs_says_how_to_make_them():
    app = upload(open_app(scene="ring"), uploaded_recording())
    assert_no_exception(app)
    assert "This recording has no ring runs" in page_text(app) and ring.RING_COMMAND in page_text(app)
    assert not plotly_specs(app)


@pytest.mark.parametrize("view, frames", [("ring", 2), ("balance", 0), ("length", 0)])
def test_each_view_draws_its_chart_and_says_its_numbers(view, frames):
    app = upload(open_app(scene="ring", ring=view), recording(TWO_GPUS))
    assert_no_exception(app)
    assert "animation from the recording" in badges(app) and "INTERPRETER" not in badges(app)
    (spec,) = plotly_specs(app)
    assert len(spec.get("frames", [])) == frames
    said = page_text(app)
    runs = checked(TWO_GPUS)
    expected = {"ring": ring.handoff_sentence(runs[1]), "balance": ring.layout_sentence(runs, 2, SHAPE, 1 << 18),
                "length": ring.layer_sentence(runs, 2, SHAPE)}[view]
    assert expected in said


def test_the_gpu_count_is_offered_where_several_were_recorded():
    runs = [*TWO_GPUS, run(world=4, time_ms=240.0), run(world=4, layout="plain", time_ms=330.0)]
    app = upload(open_app(scene="ring", ring="balance", gpus="2"), recording(runs))
    assert_no_exception(app)
    offered = [c for c in app.get("button_group")]
    assert offered, "the GPU count is a segmented control"
    assert "on 2 GPUs" in page_text(app) and "on 4 GPUs" not in page_text(app)
    app = upload(open_app(scene="ring", ring="balance", gpus="3"), recording(runs))  # not recorded: the most
    assert "on 4 GPUs" in page_text(app)


def test_a_recording_whose_ring_runs_all_failed_says_so():
    app = upload(open_app(scene="ring"), recording([run(status="oom"), run("torch_cp", status="oom")]))
    assert_no_exception(app)
    said = page_text(app)
    assert "Its runs did not finish: ours, zigzag: out of memory at 256K on 2 GPUs" in said


@pytest.mark.parametrize("view", ["ring", "balance", "length"])
def test_with_ring_runs_a_rerun_puts_every_element_in_the_same_place_and_charts_fill_the_width(view):
    """tests/test_first_view.py walks every scene on the shipped recording; this walks the ring scene's views on one
    that has ring runs (two GPU counts: the count's control shows too)."""
    from page import script
    runs = [*TWO_GPUS, run(world=4, time_ms=240.0), run(world=4, layout="plain", time_ms=330.0)]
    app = upload(open_app(scene="ring", ring=view), recording(runs)).run()  # past the upload's one note on the tiles
    assert_no_exception(app)
    first = element_places(app)
    assert first == element_places(app.run())
    assert [spec["layout"].get("width") for spec in plotly_specs(app)] == [script.BODY_WIDTH_PX]


def app_scenes():
    from app import SCENES
    return SCENES


def test_the_takeaways_carry_the_rings_number_from_the_shipped_recording():
    from story.takeaways import ring_evidence
    from bench.results import load_results
    app = open_app(scene="takeaways")
    assert_no_exception(app)
    best, efficiency, peer = ring_evidence(load_results("h200.json").ring)
    assert f"{efficiency:.0%} efficient" in metric_values(app)
    assert f"ring over {best['world_size']} GPUs" in page_text(app) and f"{peer:.2f}× PyTorch's" in page_text(app)
    assert f"scene {[s.key for s in app_scenes()].index('ring') + 1}" in page_text(app)
