"""The picture views of the tiling scene, against what the kernels did: HBM ↔ SRAM (frames replayed in NumPy
from the kernel semantics), the kernel source (phase comments found, every step on lines that exist), the
re-read heatmap, either loop order; bad input gets a clear message."""
from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pytest

import costmodel
from costmodel import IO_TENSORS
from kernels import source
from kernels.trace import trace_flash
from viz import hbm, rereads, source_view, tiling
from viz.animation import loop

CASES = [(100, 32, 16, False, "fa2"), (100, 32, 16, True, "fa1"), (64, 16, 32, True, "fa2"),
         (70, 16, 16, False, "fa1"), (130, 32, 32, True, "fa1")]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(map(str, c)))
def traced(request) -> dict:
    seq_len, block_m, block_n, causal, order = request.param
    return trace_flash(seq_len, 16, block_m, block_n, causal, dtype="float16", seed=1, order=order).to_dict()


def values(array) -> np.ndarray:
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def frame_trace(fig, t: int, index: int):
    frame = fig.frames[t]
    return frame.data[list(frame.traces).index(index)]


def replay_io(order: str, seq_len: int, block_m: int, block_n: int, causal: bool) -> list[dict]:
    """What each step moves between HBM and SRAM, replayed from the two kernels' loop structure: a dict per
    step of tensor → (rows read, rows written) as sets of row indices."""
    n_q, n_k = math.ceil(seq_len / block_m), math.ceil(seq_len / block_n)

    def visible(q: int, k: int) -> bool:
        return not causal or k * block_n <= min((q + 1) * block_m, seq_len) - 1

    rows = {q: set(range(q * block_m, min((q + 1) * block_m, seq_len))) for q in range(n_q)}
    cols = {k: set(range(k * block_n, min((k + 1) * block_n, seq_len))) for k in range(n_k)}
    tiles_of = {q: [k for k in range(n_k) if visible(q, k)] for q in range(n_q)}
    steps = []
    if order == "fa2":  # program per Q block: Q once, K and V per tile, O and LSE at the end
        for q in range(n_q):
            for k in tiles_of[q]:
                first, last = k == tiles_of[q][0], k == tiles_of[q][-1]
                steps.append({"Q": (rows[q] if first else set(), set()), "K": (cols[k], set()), "V": (cols[k], set()),
                              "O": (set(), rows[q] if last else set()), "LSE": (set(), rows[q] if last else set()),
                              "state": (set(), set())})
    else:  # one program: K, V once per tile, per Q block Q and the running O, m, l in, O, m, l (or O, LSE) out
        for k in range(n_k):
            for i, q in enumerate(q for q in range(n_q) if visible(q, k)):
                first, last = k == tiles_of[q][0], k == tiles_of[q][-1]
                steps.append({"Q": (rows[q], set()), "K": (cols[k] if i == 0 else set(), set()),
                              "V": (cols[k] if i == 0 else set(), set()),
                              "O": (set(), rows[q] if last else set()), "LSE": (set(), rows[q] if last else set()),
                              "state": (set() if first else rows[q], set() if last else rows[q])})
    return steps


def bar_rows(bars, column: int) -> set[int]:
    base, height = values(bars.base)[column], values(bars.y)[column]
    return set(range(int(base), int(base + height)))


def test_hbm_frames_replay_the_kernels_io(traced) -> None:
    fig = hbm.hbm_sram_figure(traced, 232448, "H200 (recorded)")
    seq_len, block_m, block_n, causal = traced["seq_len"], traced["block_m"], traced["block_n"], traced["causal"]
    order = traced["order"]
    expected = replay_io(order, seq_len, block_m, block_n, causal)
    assert len(fig.frames) == len(expected) == len(traced["steps"])
    columns = [name for name in IO_TENSORS if order == "fa1" or name != "state"]
    element = costmodel.dtype_bytes(traced["dtype"])
    row_bytes = {"Q": 16 * element, "K": 16 * element, "V": 16 * element, "O": 16 * element, "LSE": 4,
                 "state": (16 + 2) * 4}
    read_so_far = written_so_far = 0
    o_final: set[int] = set()
    for t, step in enumerate(expected):
        reads, writes = frame_trace(fig, t, hbm.READS), frame_trace(fig, t, hbm.WRITES)
        for column, name in enumerate(columns):
            assert bar_rows(reads, column) == step[name][0], (t, name, "read")
            assert bar_rows(writes, column) == step[name][1], (t, name, "written")
        # the counters of the kernel's own order: the bytes of the replayed rows, summed (the cost model's)
        read_so_far += sum(len(step[name][0]) * row_bytes[name] for name in IO_TENSORS)
        written_so_far += sum(len(step[name][1]) * row_bytes[name] for name in IO_TENSORS)
        row = hbm.COUNTER_ROWS.index(order)
        assert values(frame_trace(fig, t, hbm.READ_BARS).x)[row] == read_so_far
        assert values(frame_trace(fig, t, hbm.WRITTEN_BARS).x)[row] == written_so_far
        o_final |= step["O"][1]
        assert set(range(int(values(frame_trace(fig, t, hbm.O_DONE).y)[0]))) == o_final
        # an arrow per tensor moved, toward SRAM for reads, toward HBM for writes
        moved_in = sum(bool(step[name][0]) for name in columns)
        moved_out = sum(bool(step[name][1]) for name in columns)
        assert len(frame_trace(fig, t, hbm.READ_ARROWS).x) == 3 * moved_in
        assert len(frame_trace(fig, t, hbm.WRITE_ARROWS).x) == 3 * moved_out
    assert o_final == set(range(seq_len)), "every output row is written"


def test_hbm_counters_are_the_cost_model_at_every_step(traced) -> None:
    fig = hbm.hbm_sram_figure(traced)
    args = (costmodel.Shape(traced["seq_len"], 1, 1, 16, "bfloat16", traced["causal"]), traced["block_m"],
            traced["block_n"])
    fa2, fa1 = costmodel.step_traffic(*args), costmodel.fa1_step_traffic(*args)
    for t in range(len(fig.frames)):
        read = values(frame_trace(fig, t, hbm.READ_BARS).x)
        written = values(frame_trace(fig, t, hbm.WRITTEN_BARS).x)
        assert list(read) == [fa2["fa2_read"][t], fa1["fa1_read"][t], fa1["state_read"][t],
                              fa2["naive_read"][t]]
        assert list(written) == [fa2["fa2_written"][t], fa1["fa1_written"][t], fa1["state_written"][t],
                                 fa2["naive_written"][t]]
    # at the end the standard counters are naive_traffic's totals
    naive = costmodel.naive_traffic(args[0])
    assert read[-1] == sum(p.reads for p in naive) and written[-1] == sum(p.writes for p in naive)


def test_hbm_shared_memory_says_fits_or_not_or_unknown(traced) -> None:
    texts = lambda fig: " ".join(a.text for a in fig.layout.annotations)  # noqa: E731
    need = costmodel.smem_bytes(traced["block_m"], traced["block_n"], 16, 2)
    assert "fits" in texts(hbm.hbm_sram_figure(traced, need, "GPU X"))
    assert "does NOT fit" in texts(hbm.hbm_sram_figure(traced, need - 1, "GPU X"))
    assert "unknown" in texts(hbm.hbm_sram_figure(traced, None, ""))


def test_tiles_view_plays_either_order(traced) -> None:
    fig = tiling.tiling_figure(traced)
    schedule = loop(traced["order"]).schedule(traced["seq_len"], traced["block_m"], traced["block_n"],
                                                     traced["causal"])
    assert len(fig.frames) == len(schedule)
    for t, step in enumerate(schedule):  # the tile in SRAM is the step's, at the step's K/V tile
        bars = frame_trace(fig, t, tiling.TILES)
        assert values(bars.base)[-1] == step.k_block * traced["block_n"]
        done = values(bars.x)[:-1] // traced["block_n"]
        visits_before = [sum(1 for s in schedule[:t] if s.q_block == q) for q in range(len(done))]
        assert np.minimum(np.array(visits_before) * traced["block_n"], traced["seq_len"]).tolist() == \
            values(bars.x)[:-1].tolist()


# -- the kernel source ----------------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["fa2", "fa1"])
def test_every_phase_comment_is_in_the_kernel(order) -> None:
    kernel = source.kernel_source(order)
    phases = loop(order).phases
    for name, prefix, required in phases:
        if required:
            assert name in kernel["phases"], f"{kernel['path']} lost its phase comment {prefix!r}"
        if name in kernel["phases"]:
            first, last = kernel["phases"][name]
            assert 1 <= first <= last <= len(kernel["lines"])
            assert kernel["lines"][first - 1].strip().startswith(prefix)
            assert any(line.strip() and not line.strip().startswith("#")
                       for line in kernel["lines"][first:last]), f"phase {name} has no code"
    spans = sorted(kernel["phases"].values())
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), "phases do not overlap"


def test_a_missing_phase_comment_is_an_error() -> None:
    text = (source.KERNEL_DIR / "fa2.py").read_text().replace("# -- compute qk", "# compute the scores")
    with pytest.raises(ValueError, match="# -- compute qk"):
        source.kernel_source("fa2", text)
    with pytest.raises(ValueError, match="order"):
        source.kernel_source("fa3")


def test_every_step_maps_to_source_lines_that_exist(traced) -> None:
    order = traced["order"]
    kernel = source.kernel_source(order)
    per_step = source.step_phases(order, traced["loads"], traced["stores"], kernel["phases"])
    schedule = loop(order).schedule(traced["seq_len"], traced["block_m"], traced["block_n"], traced["causal"])
    tile_start = [t == 0 or schedule[t - 1].k_block != s.k_block for t, s in enumerate(schedule)]
    for t, (step, names) in enumerate(zip(schedule, per_step)):
        assert {"qk", "softmax", "pv"} <= set(names)
        if order == "fa2":
            assert ("load_q" in names) == step.first and ("write" in names) == step.last and "load_k" in names
        else:
            assert ("load_kv" in names) == tile_start[t] and {"load_q", "write"} <= set(names)
        for name in names:
            first, last = kernel["phases"][name]
            assert all(kernel["lines"][number - 1] is not None for number in range(first, last + 1))
    fig = source_view.kernel_source_figure(traced, kernel, per_step)
    per_column = (source_view.HEIGHT_PX - source_view.CAPTION_PX - source_view.CONTROLS_PX) // source_view.LINE_PX - 1
    shown = source_view.listing(kernel, source_view.COLUMNS * per_column)
    for t, names in enumerate(per_step):  # the highlighted lines are exactly the running phases' lines
        colors = [c for index in source_view.HIGHLIGHTS for c in frame_trace(fig, t, index).marker.color]
        lit = [row["phase"] for row, color in zip(shown, colors) if color != source_view.NO_HIGHLIGHT]
        assert set(lit) == set(names) and all(row["phase"] in names for row, color in zip(shown, colors)
                                              if color != source_view.NO_HIGHLIGHT)
    for row in shown:  # every line shown is the file's line, cut at most
        if row["number"]:
            assert kernel["lines"][row["number"] - 1].strip().startswith(row["full"].strip())


def test_source_listing_fits_and_says_what_it_leaves_out() -> None:
    kernel = source.kernel_source("fa2")
    rows = source_view.listing(kernel, 30)
    assert len(rows) == 30
    assert all(len(row["text"]) <= source_view.MAX_CHARS for row in rows)
    for name, (first, last) in kernel["phases"].items():
        mine = [row for row in rows if row["phase"] == name]
        assert mine[0]["number"] == first
        # every line of the phase is shown or named by the "⋮" row that stands in its place, in order
        covered = []
        for row in mine:
            if row["number"] is None:
                lo, hi = map(int, re.search(r"\((\d+) to (\d+)\)", row["text"]).groups())
                assert f"⋮ {hi - lo + 1} more line" in row["text"]
                covered += range(lo, hi + 1)
            else:
                covered.append(row["number"])
        assert covered == list(range(first, last + 1)), name


def test_source_of_the_other_order_is_refused(traced) -> None:
    other = "fa1" if traced["order"] == "fa2" else "fa2"
    kernel = source.kernel_source(other)
    with pytest.raises(ValueError, match="source is of"):
        source_view.kernel_source_figure(traced, kernel, [[]] * len(traced["steps"]))


# -- re-reads -------------------------------------------------------------------------------------------

def test_rereads_count_each_tile_load(traced) -> None:
    counts, nth = rereads.kv_loads(traced)
    schedule = loop(traced["order"]).schedule(traced["seq_len"], traced["block_m"], traced["block_n"],
                                                     traced["causal"])
    visitors = np.bincount([s.k_block for s in schedule], minlength=counts.shape[1])
    if traced["order"] == "fa2":  # once per Q block that needs the tile
        assert counts.sum(axis=0).tolist() == visitors.tolist()
        assert nth.max(axis=0).tolist() == visitors.tolist()
    else:  # once
        assert counts.sum(axis=0).tolist() == [1] * counts.shape[1]
    rows = np.minimum(traced["block_n"], traced["seq_len"] - np.arange(counts.shape[1]) * traced["block_n"])
    loaded = int((counts.sum(axis=0) * rows).sum()) * 2 * 16 * 2
    assert loaded == rereads.kv_bytes(traced["order"], costmodel.Shape(traced["seq_len"], 1, 1, 16, "bfloat16",
                                                                      traced["causal"]), traced["block_m"],
                                      traced["block_n"])
    machine = costmodel.machine_from_facts({"l2_bytes": 60 << 20, "sm_count": 132})
    fig = rereads.rereads_figure(traced, machine, "H200 (recorded)", talk_seq_len=16384)
    note = fig.layout.annotations[0].text
    assert "N = 16K" in note and "L2" in note
    assert "unknown" in rereads.rereads_figure(traced).layout.annotations[0].text


def test_bad_traces_get_clear_messages(traced) -> None:
    without_io = {**traced, "loads": None}
    with pytest.raises(ValueError, match="loaded and stored"):
        hbm.hbm_sram_figure(without_io)
    with pytest.raises(ValueError, match="order"):
        tiling.tiling_figure({**traced, "order": "fa3"})
    shuffled = {**traced, "steps": np.asarray(traced["steps"])[::-1]}
    if len(traced["steps"]) > 1:
        with pytest.raises(ValueError, match="tile order"):
            hbm.hbm_sram_figure(shuffled)
    with pytest.raises(ValueError, match="start_step"):
        hbm.hbm_sram_figure(traced, start_step=len(traced["steps"]))


def test_figures_travel_as_json(traced) -> None:
    for fig in (hbm.hbm_sram_figure(traced), rereads.rereads_figure(traced)):
        assert json.loads(fig.to_json())["layout"]["height"] > 0


def test_hbm_arrows_end_at_the_sram_box_whose_rows_name_their_buffers(traced) -> None:
    fig = hbm.hbm_sram_figure(traced, 232448, "H200 (recorded)")
    box = next(s for s in fig.layout.shapes if s.type == "rect" and s.xref == "paper")
    ends = set()
    for t in range(len(fig.frames)):
        for index, sram_end in ((hbm.READ_ARROWS, 1), (hbm.WRITE_ARROWS, 0)):  # reads point into SRAM, writes out
            xs = values(frame_trace(fig, t, index).x)
            ends |= {xs[i + sram_end] for i in range(0, len(xs), 3)}
    assert ends == {box.x0}, "every arrow touches the SRAM box's left edge, nothing left of it"
    assert not fig.layout.yaxis2.showticklabels  # names left of the box sat under the arrow heads
    texts = [a.text for a in fig.layout.annotations]
    for name in ("Q block", "K tile", "V tile", "S tile", "m, l", "O acc"):
        assert any(text.startswith(f"{name}: ") for text in texts), name
