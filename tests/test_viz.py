"""The figure builders (viz/) on small inputs: what each figure shows, not how it looks."""

from __future__ import annotations

import ast
import base64
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import plotly.graph_objects as go
import pytest

import story
import viz
from viz import sm_timeline
from viz.evolution import PUBLISHED
from viz.memory import OOM_MARKS
import costmodel
from costmodel import Shape, flash_extra_bytes, naive_extra_bytes, step_traffic, tile_schedule
from kernels import specs
from viz.animation import MAX_SLIDER_STEPS, loop_orders
from viz import fit
from viz.theme import PALETTE, SMALLEST_TEXT_PX, algorithm_color, algorithm_label, algorithm_order, look, \
    scaled_figure, surface
import fmt
from fmt import fmt_bytes, fmt_ms, fmt_ratio
from viz.tiling import (
    ALPHA,
    ANIMATED_TRACES,
    BANDS,
    CAPTION,
    HBM_BYTES,
    HBM_LABELS,
    LANE_GAP,
    MAX_OUT_DIMS,
    MAX_OUT_ROWS,
    OUT_FINAL,
    OUT_HIDDEN,
    OUT_ROWS,
    OUT_SWING,
    OUT_UNITS,
    ROW_MAX,
    ROW_SUM,
    STAT_LANES,
    TILE_BORDERS,
    TILES,
)

GiB = 2**30
FACTS = {
    "name": "NVIDIA H200",
    "sm_count": 132,
    "smem_per_sm_bytes": 228 * 1024,
    "smem_per_block_bytes": 227 * 1024,
    "l2_bytes": 60 * 2**20,
    "hbm_bytes": 141 * GiB,
    "copy_gbps": 3900.0,
}


def replay_online_softmax(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, block_m: int, block_n: int, causal: bool, sm_scale: float
) -> dict:
    """A FlashTrace dict (docs/data-contracts.md) from a NumPy replay of the flash forward loop.

    q, k, v: (N, d) float64. Walks Q blocks and, within each, K/V tiles up to the causal limit,
    keeping the running max m, running sum l and accumulator exactly as the kernel does.
    """
    seq_len, head_dim = q.shape
    records: dict[str, list] = {"steps": [], "row_max": [], "row_sum": [], "alpha": [], "out_rows": []}
    out_flash = np.zeros((seq_len, head_dim))
    for q_block in range(-(-seq_len // block_m)):
        rows = np.arange(q_block * block_m, (q_block + 1) * block_m)
        valid = rows < seq_len
        q_tile = np.full((block_m, head_dim), np.nan)  # rows past seq_len stay NaN, as in the contract
        q_tile[valid] = q[rows[valid]]
        m = np.full(block_m, -np.inf)
        l = np.zeros(block_m)  # noqa: E741 (the paper's name)
        acc = np.zeros((block_m, head_dim))
        for k_block in range(-(-seq_len // block_n)):
            if causal and k_block * block_n > (q_block + 1) * block_m - 1:
                break
            cols = np.arange(k_block * block_n, min((k_block + 1) * block_n, seq_len))
            scores = sm_scale * q_tile @ k[cols].T
            if causal:
                scores = np.where(cols[None, :] > rows[:, None], -np.inf, scores)
            m_new = np.maximum(m, scores.max(axis=1))
            alpha = np.exp(m - m_new)
            p = np.exp(scores - m_new[:, None])
            l = alpha * l + p.sum(axis=1)  # noqa: E741
            acc = alpha[:, None] * acc + p @ v[cols]
            m = m_new
            for key, value in zip(records, ((q_block, k_block), m, l, alpha, acc / l[:, None])):
                records[key].append(value)
        out_flash[rows[valid]] = (acc / l[:, None])[valid]
    scores = sm_scale * q @ k.T
    if causal:
        scores = np.where(np.triu(np.ones((seq_len, seq_len), dtype=bool), 1), -np.inf, scores)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    out_naive = (weights / weights.sum(axis=1, keepdims=True)) @ v
    return {
        "seq_len": seq_len,
        "head_dim": head_dim,
        "block_m": block_m,
        "block_n": block_n,
        "causal": causal,
        "sm_scale": sm_scale,
        "dtype": "float32",
        "backend": "numpy replay",
        **{key: np.array(values) for key, values in records.items()},
        "out_flash": out_flash,
        "out_naive": out_naive,
        "max_abs_err": float(np.abs(out_flash - out_naive).max()),
        "scores": scores,
    }


def make_trace(seq_len: int, block_m: int, block_n: int, causal: bool, head_dim: int = 16, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((seq_len, head_dim)) for _ in range(3))  # random, never all zeros
    return replay_online_softmax(q, k, v, block_m, block_n, causal, head_dim**-0.5)


def record(algorithm: str, seq_len: int, status: str = "ok", time_ms: float | None = None, **extra) -> dict:
    """A measurement record as kernels/measure.py writes it (docs/data-contracts.md)."""
    base = {
        "algorithm": algorithm,
        "seq_len": seq_len,
        "batch": 1,
        "heads": 8,
        "head_dim": 64,
        "dtype": "bfloat16",
        "causal": False,
        "status": status,
        "time_ms": time_ms,
        "time_ms_p20": time_ms * 0.9 if time_ms else None,
        "time_ms_p80": time_ms * 1.1 if time_ms else None,
        "tflops": 4 * 8 * seq_len**2 * 64 / (time_ms * 1e-3) / 1e12 if time_ms else None,
        "gbps": None,
        "bytes_moved": 0,
        "peak_extra_bytes": None,
        "needed_bytes": None,
        "message": "" if status == "ok" else "CUDA out of memory",
        "device": "NVIDIA H200",
        "timing_kind": "cuda",
    }
    return {**base, **extra}


OOM_NEED = naive_extra_bytes(Shape(65536, 1, 8, 64))  # what standard needs at 64K: S + P + O
OOM_FAILURE = f"out of memory (needs {fmt_bytes(OOM_NEED)}; a {fmt_bytes(8 * 65536 * 65536 * 2)} allocation failed)"
WALL = {"seq_len": 65536, "text": f"out of memory at N = 64K (needs {fmt_bytes(OOM_NEED)}; …)"}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Flash and standard over four lengths, standard out of memory at the last, as the page hands them to the
    charts: the failed record with what it needs and its failure in words (the story's to say)."""
    rows = []
    for seq_len in (1024, 4096, 16384, 65536):
        flash_peak = flash_extra_bytes(Shape(seq_len, 1, 8, 64))
        rows.append(record("fa2", seq_len, time_ms=seq_len**2 * 1e-9, peak_extra_bytes=flash_peak))
        if seq_len < 65536:
            naive_peak = naive_extra_bytes(Shape(seq_len, 1, 8, 64))
            rows.append(record("naive", seq_len, time_ms=seq_len**2 * 4e-9, peak_extra_bytes=naive_peak))
        else:
            rows.append(record("naive", seq_len, "oom", needed_bytes=8 * seq_len * seq_len * 2,  # P failed
                               need_bytes=OOM_NEED, failure=OOM_FAILURE, failure_mark="out of memory"))
    return rows


# -- the replay helper itself ------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_replay_matches_standard_attention(causal: bool) -> None:
    trace = make_trace(100, 32, 16, causal)
    assert trace["max_abs_err"] < 1e-12
    assert len(trace["steps"]) == len(tile_schedule(100, 32, 16, causal))


# -- tiling animation --------------------------------------------------------------------------


def values(array) -> np.ndarray:
    """A figure array as NumPy: tiling frames carry plotly's base64 typed-array specs."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def frame_trace(fig: go.Figure, t: int, index: int):
    """Frame t's update of the figure trace `index`."""
    frame = fig.frames[t]
    return frame.data[list(frame.traces).index(index)]


def caption(fig: go.Figure, t: int) -> str:
    return frame_trace(fig, t, CAPTION).text[0]


def rectangles(path: str) -> list[tuple[float, float, float, float]]:
    """(x0, x1, y0, y1) of each "M x0,y0 H x1 V y1 H x0 Z" rectangle in a shape path."""
    found = re.findall(r"M([\d.]+),([\d.]+)H([\d.]+)V([\d.]+)H[\d.]+Z", path)
    return [(float(x0), float(x1), float(y0), float(y1)) for x0, y0, x1, y1 in found]


def tile_states(fig: go.Figure, trace: dict, t: int) -> np.ndarray:
    """The state each tile shows at step t, read off what the figure draws: the skipped shape, the
    done bars and the bar of the tile in SRAM; every other tile is pending."""
    def centres(block: int) -> np.ndarray:  # tile centres in tokens; the last tile may be partial
        edges = np.minimum(np.arange(0, trace["seq_len"] + block, block), trace["seq_len"])
        return (edges[:-1] + edges[1:]) / 2

    centre_x, centre_y = centres(trace["block_n"]), centres(trace["block_m"])
    num_q, num_k = len(centre_y), len(centre_x)
    states = np.full((num_q, num_k), "pending", dtype=object)
    skipped = [shape for shape in fig.layout.shapes if shape.fillcolor == PALETTE["skipped"]]
    for x0, x1, y0, y1 in (box for shape in skipped for box in rectangles(shape.path)):
        states[np.ix_((centre_y > y0) & (centre_y < y1), (centre_x > x0) & (centre_x < x1))] = "skipped"
    bars = frame_trace(fig, t, TILES)
    for k, (x, y, base) in enumerate(zip(values(bars.x), values(bars.y), values(bars.base))):
        rows = np.abs(centre_y - y) < trace["block_m"] / 2
        cols = (centre_x > base) & (centre_x < base + x)
        states[np.ix_(rows, cols)] = "current" if k == num_q else "done"
    return states


@pytest.fixture(scope="module", params=[(100, 32, 16, True), (100, 32, 16, False), (64, 16, 16, True)])
def tiling(request) -> tuple[dict, go.Figure]:
    trace = make_trace(*request.param)
    return trace, viz.tiling_figure(trace, frame_ms=200)


def test_one_frame_per_step(tiling) -> None:
    trace, fig = tiling
    schedule = tile_schedule(trace["seq_len"], trace["block_m"], trace["block_n"], trace["causal"])
    assert len(fig.frames) == len(schedule)
    assert [frame.name for frame in fig.frames] == [str(t) for t in range(len(schedule))]
    assert len(schedule) <= MAX_SLIDER_STEPS  # so the slider stops at every step
    assert [list(step.args[0]) for step in fig.layout.sliders[0].steps] == [[str(t)] for t in range(len(schedule))]


def test_frames_update_only_what_changes(tiling) -> None:
    _, fig = tiling
    assert all(list(frame.traces) == ANIMATED_TRACES for frame in fig.frames)
    assert all(len(frame.data) == len(ANIMATED_TRACES) for frame in fig.frames)
    assert TILE_BORDERS not in ANIMATED_TRACES  # drawn once
    assert {trace.type for trace in fig.data} <= {"scatter", "bar"}  # plotly updates these without a redraw


def test_tile_states_follow_the_clock(tiling) -> None:
    trace, fig = tiling
    schedule = tile_schedule(trace["seq_len"], trace["block_m"], trace["block_n"], trace["causal"])
    num_tiles = -(-trace["seq_len"] // trace["block_m"]) * -(-trace["seq_len"] // trace["block_n"])
    for t, step in enumerate(schedule):
        states = tile_states(fig, trace, t)
        assert list(zip(*np.nonzero(states == "current"))) == [(step.q_block, step.k_block)]
        assert (states == "done").sum() == t
        assert (states == "pending").sum() == len(schedule) - t - 1
        assert (states == "skipped").sum() == num_tiles - len(schedule)


def test_bytes_and_caption_per_frame(tiling) -> None:
    trace, fig = tiling
    shape = Shape(trace["seq_len"], 1, 1, trace["head_dim"], "float32", trace["causal"])
    traffic = step_traffic(shape, trace["block_m"], trace["block_n"])
    for t in range(len(fig.frames)):
        moved = [traffic["fa2_bytes"][t], traffic["naive_bytes"][t]]
        assert list(frame_trace(fig, t, HBM_BYTES).y) == moved
        labels = frame_trace(fig, t, HBM_LABELS)
        assert list(labels.y) == moved and list(labels.text) == [fmt_bytes(b) for b in moved]
        assert caption(fig, t).startswith(f"step {t + 1}/{len(fig.frames)}")
    error_text = f"max |O_flash − O_standard| = {trace['max_abs_err']:.2e}"
    assert error_text in caption(fig, len(fig.frames) - 1)
    assert all("max |O_flash" not in caption(fig, t) for t in range(len(fig.frames) - 1))


def lane_readers(fig: go.Figure) -> dict[str, np.poly1d]:
    """Per running statistic, the map from its lane's height to its value, read off the lane's own tick
    labels as the audience reads them (two labelled ticks fix a linear scale)."""
    axis = fig.layout.yaxis2
    readers = {}
    for index, name in enumerate(STAT_LANES):
        bottom = index * (1 + LANE_GAP)
        ticks = [(pos, float(text)) for pos, text in zip(axis.tickvals, axis.ticktext) if bottom <= pos <= bottom + 1]
        assert len(ticks) >= 2, f"the {name} lane has fewer than two labelled ticks"
        readers[name] = np.poly1d(np.polyfit(*zip(*ticks), 1))
    return readers


def test_running_statistics_per_frame(tiling) -> None:
    trace, fig = tiling
    read = lane_readers(fig)
    for t in (0, len(fig.frames) // 2, len(fig.frames) - 1):
        for index, name in ((ROW_MAX, "row_max"), (ROW_SUM, "row_sum"), (ALPHA, "alpha")):
            shown = read[name](values(frame_trace(fig, t, index).y).astype(np.float64))
            np.testing.assert_allclose(shown, trace[name][t], rtol=1e-5, atol=1e-5, err_msg=f"{name} at step {t}")
    assert "α = 0 (first tile" in caption(fig, 0)  # m_old = −inf: nothing to rescale


def test_statistic_lanes_do_not_overlap(tiling) -> None:
    _, fig = tiling
    for t in range(len(fig.frames)):
        for lane, index in enumerate((ALPHA, ROW_SUM, ROW_MAX)):  # bottom to top
            heights = values(frame_trace(fig, t, index).y)
            heights = heights[np.isfinite(heights)]
            bottom = lane * (1 + LANE_GAP)
            assert ((heights >= bottom) & (heights <= bottom + 1)).all(), (t, STAT_LANES[lane])


def test_axis_ranges_are_fixed(tiling) -> None:
    trace, fig = tiling
    layout = fig.layout.to_plotly_json()
    axes = [name for name in layout if name.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 8  # 4 panels, one pair of axes each: every axis costs time in every frame
    assert all(layout[name].get("range") is not None for name in axes)
    assert layout["xaxis"]["range"] == [0, trace["seq_len"]] and layout["yaxis"]["range"] == [trace["seq_len"], 0]
    assert all(not frame.layout.to_plotly_json() for frame in fig.frames)  # frames move no axis, nor anything else


def test_play_controls() -> None:
    fig = viz.tiling_figure(make_trace(64, 16, 16, False), frame_ms=200)
    buttons = fig.layout.updatemenus[0].buttons
    play = [b for b in buttons if b.args[0] is None]
    assert [b.args[1]["frame"]["duration"] for b in play] == [400, 200, 100, 50, 25]  # 0.5×, 1×, 2×, 4×, 8×
    assert [b.label for b in play] == ["▶ 0.5×", "▶ 1×", "▶ 2×", "▶ 4×", "▶ 8×"]
    # no redraw (the figure's traces update in place), no transition (the frame duration sets the pace)
    assert all(not b.args[1]["frame"]["redraw"] and b.args[1]["transition"]["duration"] == 0 for b in play)
    assert any(b.args[0] is not None and list(b.args[0]) == [None] for b in buttons)  # pause
    assert all(not step.args[1]["frame"]["redraw"] for step in fig.layout.sliders[0].steps)
    app_fastest = viz.tiling_figure(make_trace(64, 16, 16, False)).layout.updatemenus[0].buttons[len(play) - 1]
    assert 1000 / app_fastest.args[1]["frame"]["duration"] >= 20  # the fastest speed asks for ≥ 20 frames/s


def test_initial_data_shows_the_start_step() -> None:
    trace = make_trace(100, 32, 16, True)
    for start in (0, 5):
        fig = viz.tiling_figure(trace, start_step=start)
        for index, update in zip(fig.frames[start].traces, fig.frames[start].data):
            shown, update = fig.data[index].to_plotly_json(), update.to_plotly_json()
            for key in ("x", "y", "base", "text"):
                if key in update:
                    np.testing.assert_array_equal(values(shown[key]), values(update[key]))
            if "marker" in update:
                np.testing.assert_array_equal(values(shown["marker"]["color"]), values(update["marker"]["color"]))
        assert fig.layout.sliders[0].active == start
        assert fig.data[CAPTION].text == frame_trace(fig, start, CAPTION).text


def test_slider_of_a_long_animation() -> None:
    trace = make_trace(512, 16, 16, False)  # 1024 steps
    fig = viz.tiling_figure(trace, start_step=333)
    steps = [int(step.args[0][0]) for step in fig.layout.sliders[0].steps]
    assert len(fig.frames) == 1024 and len(steps) <= MAX_SLIDER_STEPS + 2
    assert steps == sorted(steps) and {0, 333, 1023} <= set(steps)
    assert steps[fig.layout.sliders[0].active] == 333
    assert all(0 <= step < 1024 for step in steps)


def output_curves(fig: go.Figure, index: int, t: int) -> np.ndarray:
    """Frame t's output curves (rows shown × dims shown) as heights over each row's baseline, in row
    pitches; NaN where a row is not drawn (below the panel's range)."""
    dims = values(fig.data[index].x)
    num_dims = int(np.argmax(np.isnan(dims)))  # each row's curve ends in a break: x is NaN there
    assert np.isnan(dims.reshape(-1, num_dims + 1)[:, -1]).all()
    heights = values(frame_trace(fig, t, index).y).reshape(-1, num_dims + 1)[:, :-1].astype(np.float64)
    heights[heights < fig.layout.yaxis3.range[0]] = np.nan
    num_rows = len(heights)
    return heights / OUT_UNITS - (num_rows - 1 - np.arange(num_rows))[:, None]  # row 0 on top


def test_output_rows_are_a_sample_ending_on_the_last_row() -> None:
    trace = make_trace(100, 32, 16, False)  # last Q block holds rows 96..99 only
    fig = viz.tiling_figure(trace)
    last = output_curves(fig, OUT_ROWS, len(fig.frames) - 1)
    num_rows, num_dims = last.shape
    assert num_rows <= MAX_OUT_ROWS and num_dims <= MAX_OUT_DIMS
    assert fig.layout.yaxis3.ticktext[0] == "31"  # the row that meets its largest score late, labelled
    stride = -(-32 // num_rows)  # every stride-th row of the block, ending on the last
    rows = np.arange(31, -1, -stride)[::-1]
    assert len(rows) == num_rows
    assert np.isnan(last[rows >= 4]).all() and np.isfinite(last[rows < 4]).all()  # rows past seq_len: no curve
    # every curve is its row's output over the first head dims, to one scale per row for the whole animation
    out = np.asarray(trace["out_rows"])[:, rows, :num_dims]
    curves = np.stack([output_curves(fig, OUT_ROWS, t) for t in range(len(fig.frames))])
    scale = np.nanmax(np.abs(out), axis=(0, 2)) / OUT_SWING
    np.testing.assert_allclose(curves * scale[:, None], out, atol=0.5 / OUT_UNITS * scale.max())  # int16 rounding
    assert np.nanmax(np.abs(curves)) == pytest.approx(OUT_SWING, abs=1 / OUT_UNITS)  # no curve leaves its row
    assert OUT_HIDDEN < fig.layout.yaxis3.range[0]


@pytest.mark.parametrize("causal", [False, True])
def test_output_rows_meet_their_final_value_when_the_block_is_done(causal: bool) -> None:
    trace = make_trace(100, 32, 16, causal)
    fig = viz.tiling_figure(trace)
    schedule = tile_schedule(100, 32, 16, causal)
    for t, step in enumerate(schedule):
        done_at = max(u for u, later in enumerate(schedule) if later.q_block == step.q_block)
        final = output_curves(fig, OUT_FINAL, t)
        np.testing.assert_array_equal(final, output_curves(fig, OUT_ROWS, done_at))  # grey: the block's result
        if t == done_at:
            np.testing.assert_array_equal(output_curves(fig, OUT_ROWS, t), final)
    first = [t for t, step in enumerate(schedule) if step.first and step.q_block == 0][0]
    assert not np.allclose(output_curves(fig, OUT_ROWS, first), output_curves(fig, OUT_FINAL, first))


def test_bands_outline_the_current_tile() -> None:
    trace = make_trace(100, 32, 16, True)
    fig = viz.tiling_figure(trace)
    step = tile_schedule(100, 32, 16, True)[-1]  # Q block 3 (rows 96..99), K/V tile 6 (keys 96..99)
    bands = frame_trace(fig, len(fig.frames) - 1, BANDS)
    assert (step.q_block, step.k_block) == (3, 6)
    assert {96, 100} <= set(y for y in bands.y if y is not None)
    assert {96, 100} <= set(x for x in bands.x if x is not None)


def test_trace_that_breaks_the_tile_order_is_rejected() -> None:
    trace = make_trace(64, 16, 16, True)
    trace["steps"] = trace["steps"][::-1]
    with pytest.raises(ValueError, match="tile order"):
        viz.tiling_figure(trace)


def test_too_many_tiles_is_rejected() -> None:
    trace = {**make_trace(64, 16, 16, False), "seq_len": 16 * 65}
    with pytest.raises(ValueError, match="too many"):
        viz.tiling_figure(trace)


def test_tiling_size_at_the_largest_setting() -> None:
    fig = viz.tiling_figure(make_trace(512, 16, 16, False, head_dim=64))
    assert len(fig.frames) == 32 * 32
    assert len(fig.to_json()) < 5_000_000  # bytes of JSON for 1024 frames


def test_standalone_html_takes_the_figure_background() -> None:
    for theme in ("light", "dark"):
        fig = viz.tiling_figure(make_trace(64, 16, 16, False), theme=theme)
        html = viz.standalone_html(fig)
        assert f"body {{ background: {surface(theme)['background']};" in html
    assert surface("dark")["background"] != surface("light")["background"]


def test_standalone_html_plays_offline() -> None:
    html = viz.standalone_html(viz.tiling_figure(make_trace(64, 16, 16, True)))
    assert html.lstrip().lower().startswith("<html")
    assert '<script src="https://cdn.plot.ly' not in html and "Plotly.newPlot" in html
    assert len(html) > 1_000_000  # plotly.js itself is inlined


# -- the other scenes --------------------------------------------------------------------------


def shape_labels(fig: go.Figure) -> list[str]:
    return [shape.label.text for shape in fig.layout.shapes if shape.label.text]


def test_memory_figure(records) -> None:
    fig = viz.memory_figure(records, 1, 8, 64, 2, seq_len_marker=4096, hbm_bytes=141 * GiB, wall=WALL)
    by_name = {trace.name: trace for trace in fig.data}
    naive_curve = next(t for name, t in by_name.items() if name.startswith("standard") and "formula" in name)
    np.testing.assert_allclose(naive_curve.y, [naive_extra_bytes(Shape(int(n), 1, 8, 64)) for n in naive_curve.x])
    flash_points = next(t for name, t in by_name.items() if name.startswith("flash") and "measured" in name)
    assert list(flash_points.x) == [1024, 4096, 16384, 65536]
    # ✕ at what the record needs (here the formula, S + P + O at that N), its failure on hover; the wall's words
    # under the title, not across the curves
    assert WALL["text"] in fig.layout.title.text
    oom = by_name[OOM_MARKS]
    assert list(oom.x) == [65536] and list(oom.y) == [naive_extra_bytes(Shape(65536, 1, 8, 64))]
    assert list(oom.text) == [f"standard (ours, 3 Triton kernels) {OOM_FAILURE}"]
    wall = next(shape for shape in fig.layout.shapes if shape.type == "rect")
    assert wall.x0 == 65536
    assert "device memory 141.0 GiB" in shape_labels(fig) and "N = 4K" in shape_labels(fig)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_memory_figure_with_only_a_marker_keeps_its_curves() -> None:
    fig = viz.memory_figure([], 2, 8, 128, 2, seq_len_marker=32768)
    curves = [trace for trace in fig.data if "formula" in (trace.name or "")]
    assert curves and all(len(trace.x) > 10 and min(trace.x) <= 1024 and max(trace.x) >= 262144 for trace in curves)


def test_memory_figure_without_records() -> None:
    fig = viz.memory_figure([], 1, 1, 64, 2)
    assert [t.mode for t in fig.data] == ["lines", "lines"]  # the two formula curves only
    assert not fig.layout.shapes


def test_memory_figure_draws_no_wall_it_is_not_given(records) -> None:
    fig = viz.memory_figure(records, 1, 8, 64, 2)
    assert not [shape for shape in fig.layout.shapes if shape.type == "rect"]
    assert "<br>" not in fig.layout.title.text
    assert list(next(t for t in fig.data if t.name == OOM_MARKS).x) == [65536]
    unknown = [{**r, "need_bytes": None} if r["status"] == "oom" else r for r in records]  # nothing to place it at
    assert not list(next(t for t in viz.memory_figure(unknown, 1, 8, 64, 2).data if t.mode == "markers"
                          and t.name == OOM_MARKS).x)


def test_every_kind_of_mark_on_the_memory_chart_has_a_legend_entry(records) -> None:
    """With its legend right of the plot (the backward scene's training-step chart), the measured dots keep their
    curves' colours under one entry that says what they are: a dot drawn with no entry of its kind is unexplained."""
    from viz.memory import MEASURED_DOTS
    for legend_right in (False, True):
        fig = viz.memory_figure(records, 1, 8, 64, 2, seq_len_marker=4096, legend_right=legend_right)
        drawn = [t for t in fig.data if t.mode == "markers" and any(x is not None for x in t.x)]
        entries = [t for t in fig.data if t.showlegend is not False and t.name]
        for trace in drawn:
            kind = [e for e in entries if e.mode == "markers" and e.marker.symbol == trace.marker.symbol]
            assert kind, f"no legend entry for {trace.name!r} (legend_right={legend_right})"
        assert len([t for t in drawn if t.name.endswith("measured peak")]) == 2
    named = [e.name for e in fig.data if e.showlegend is not False]
    assert MEASURED_DOTS in named and len(named) == 4  # the two curves, the dots, the out-of-memory mark
    assert named.index(MEASURED_DOTS) < named.index(OOM_MARKS)


# The legend entries' text as plotly laid it out in chromium (getComputedTextLength, 24 px, Liberation Sans)
LEGEND_TEXT_PX = {"standard (ours, 3 Triton kernels): S (fp32) + P + O (formula)": 630,
                  "standard (ours, 3 Triton kernels), measured peak": 519,
                  "flash (ours, Triton): O + LSE (formula)": 401, "flash (ours, Triton), measured peak": 372,
                  OOM_MARKS: 261}


def test_text_widths_are_arial_as_plotly_draws_them() -> None:
    for text, drawn in LEGEND_TEXT_PX.items():
        # a hair wider than drawn (no kerning): a margin from it is never short
        assert drawn <= fit.text_px(text, 24) <= drawn * 1.005, text
    assert fit.text_px("32 MiB", 48) == pytest.approx(2 * fit.text_px("32 MiB", 24))
    assert fit.text_px("✕", 24) > fit.text_px("M", 24)  # an unknown character counts as the widest


def test_legend_rows_follow_plotly() -> None:
    """All entries in one row where they fit; else columns as wide as the widest entry (measured in chromium:
    five rows at the headline's width, three in the sequence-length scene's, one for the two formula curves)."""
    names = list(LEGEND_TEXT_PX)
    assert fit.legend_rows(names, 24, 1338 - 125 - 40) == 5
    assert fit.legend_rows(names, 24, 1800 - 125 - 40) == 3
    assert fit.legend_rows(names[::2][:2], 24, 1338 - 125 - 40) == 1
    assert fit.legend_rows(names[:1], 24, 500) == 1 and fit.legend_rows([], 24, 500) == 0


def test_memory_figure_margins_hold_its_labels(records) -> None:
    """Given its width, the memory chart's margins hold its y labels and legend (viz.fit): more rows, more
    bottom margin; a narrower chart, more rows. Without a width, plotly sizes them (as before)."""
    oom = [r for r in records if r["status"] == "oom"]
    assert oom  # so that the legend has its five entries
    wide = viz.memory_figure(records, 2, 16, 128, 2, width=1800)
    narrow = viz.memory_figure(records, 2, 16, 128, 2, width=1338)
    formulas = viz.memory_figure([], 2, 16, 128, 2, width=1338)
    widest_label = max(fit.text_px(label, SMALLEST_TEXT_PX) for label in narrow.layout.yaxis.ticktext)
    assert narrow.layout.margin.l > widest_label + fit.Y_AXIS_EXTRA[0]
    assert formulas.layout.margin.b < wide.layout.margin.b < narrow.layout.margin.b
    assert narrow.layout.meta[fit.FIXED_MARGIN_KEY]["l"] == fit.Y_AXIS_EXTRA[0]
    plain = viz.memory_figure(records, 2, 16, 128, 2)
    assert plain.layout.margin.b == 150 and plain.layout.margin.l is None and plain.layout.meta is None


def test_scaling_keeps_a_margins_fixed_pixels(records) -> None:
    """plotly does not scale tick lengths and paddings with the fonts: scaled_figure scales only the rest."""
    fig = viz.memory_figure(records, 2, 16, 128, 2, width=1338)
    fixed = fig.layout.meta[fit.FIXED_MARGIN_KEY]
    small = scaled_figure(fig, 2 / 3)
    for side in ("l", "b"):
        given = fig.layout.margin[side]
        assert small.layout.margin[side] == pytest.approx(fixed[side] + (given - fixed[side]) * 2 / 3)
    assert scaled_figure(fig, 1).layout.margin.b == fig.layout.margin.b


def test_failed_records_without_their_words_are_refused(records) -> None:
    bare = [{key: value for key, value in r.items() if key not in ("need_bytes", "failure")} for r in records]
    with pytest.raises(ValueError, match="need_bytes"):
        viz.memory_figure(bare, 1, 8, 64, 2)
    with pytest.raises(ValueError, match="failure"):
        viz.timing_figure(bare)


def test_timing_figure(records) -> None:
    fig = viz.timing_figure(records, seq_len_marker=16384)
    lines = {t.name: t for t in fig.data if t.mode == "lines+markers"}
    assert set(lines) == {"flash (ours, Triton)", "standard (ours, 3 Triton kernels)"}
    naive = lines["standard (ours, 3 Triton kernels)"]
    assert np.isnan(naive.y[-1]) and not np.isnan(naive.y[:-1]).any()  # a gap at the OOM point
    failed = [t for t in fig.data if t.mode == "markers+text"]
    assert len(failed) == 1 and list(failed[0].x) == [65536] and list(failed[0].text) == ["out of memory"]
    assert list(failed[0].hovertext) == [OOM_FAILURE]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "GPU time" in fig.layout.title.text


def test_interpreter_times_are_never_gpu_speed(records) -> None:
    cpu = [{**r, "timing_kind": "interpreter"} for r in records]
    assert "interpreter" in viz.timing_figure(cpu).layout.title.text
    tflops = viz.tflops_figure(cpu)
    assert not [t for t in tflops.data if t.mode == "lines+markers"]
    assert any("GPU timings" in a.text for a in tflops.layout.annotations)


def test_tflops_figure(records) -> None:
    fig = viz.tflops_figure(records)
    flash = next(t for t in fig.data if t.name == "flash (ours, Triton)")
    np.testing.assert_allclose(flash.y, [r["tflops"] for r in records if r["algorithm"] == "fa2"])


def test_hierarchy_figure() -> None:
    facts = {**FACTS, "l2_gbps": 7_000.0, "sm_clock_mhz": 1980.0}
    fig = viz.hierarchy_figure(facts)
    capacity, bandwidth = (t for t in fig.data if t.type == "bar")
    # registers (64K 32-bit per SM, spec), shared memory, L2, HBM
    assert list(capacity.x) == [132 * 256 * 1024, 132 * 228 * 1024, 60 * 2**20, 141 * GiB]
    assert list(capacity.text) == ["33.0 MiB", "29.4 MiB", "60.0 MiB", "141.0 GiB"]
    # registers: no bandwidth drawn; SRAM: the spec width (128 B per clock per SM) × 132 SMs × 1.98 GHz; L2 and HBM
    # as measured
    assert np.isnan(bandwidth.x[0]) and list(bandwidth.x[1:]) == [132 * 128 * 1980e6, 7_000e9, 3_900e9]
    assert list(bandwidth.text) == ["", "33.5 TB/s", "7.0 TB/s", "3.90 TB/s"]  # the copy roof to 10 GB/s, as quoted
    assert "derived from the spec" in bandwidth.customdata[1] and "measured" in bandwidth.customdata[2]
    assert "S, P, O" in capacity.y[0] and "132 SMs" in capacity.y[1]
    assert "datasheet: 4.8 TB/s" in capacity.y[3]  # the H200's spec beside its measured copy
    (note,) = [t for t in fig.data if t.type == "scatter"]
    assert list(note.text) == ["no one rate: every instruction reads them"]  # not "not measured": there is none
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log" and "NVIDIA H200" in fig.layout.title.text


def test_hierarchy_figure_with_missing_values() -> None:
    facts = {**FACTS, "smem_per_sm_bytes": None, "copy_gbps": None, "hbm_bytes": None}  # no L2 rate, no clock
    fig = viz.hierarchy_figure(facts)
    capacity, bandwidth = (t for t in fig.data if t.type == "bar")
    assert np.isnan(capacity.x[1]) and np.isnan(capacity.x[3]) and np.isnan(bandwidth.x).all()
    notes = [t for t in fig.data if t.type == "scatter"]
    assert [list(t.text) for t in notes] == [["not measured"] * 2,
                                             ["no one rate: every instruction reads them"] + ["not measured"] * 3]
    nothing = viz.hierarchy_figure({key: None for key in FACTS})
    assert [len(t.text) for t in nothing.data if t.type == "scatter"] == [4, 4]
    nothing.to_json()


def test_scores_memory_figure() -> None:
    shape = Shape(131072, 1, 1, 64, "bfloat16")
    fig = viz.scores_memory_figure(shape, hbm_bytes=141 * GiB)
    point = fig.data[-1]
    whole = 131072 * 131072 * (4 + 2) + 4 * 131072 * 64 * 2  # S (fp32), P, and Q, K, V, O
    assert list(point.x) == [131072] and list(point.y) == [whole]
    labels = [a.text for a in fig.layout.annotations if a.text and a.text.startswith("this setting")]
    assert len(labels) == 1 and fmt_bytes(whole) in labels[0]  # the setting in words, in the plot's empty corner
    curves = {t.name: t for t in fig.data[:-1]}
    assert set(curves) == {viz.problem.WHOLE, viz.problem.MATRICES}
    matrices = curves[viz.problem.MATRICES]
    assert matrices.x[0] == 1024 and matrices.x[-1] == 262144 and matrices.y[-1] == 262144**2 * 6
    assert any(label.startswith("device memory 141.0 GiB") for label in shape_labels(fig))


def compare_panels(seq_len: int, causal: bool) -> list[dict]:
    shape = Shape(seq_len, 2, 4, 128, "bfloat16", causal)
    return [{"key": "naive", "title": "standard", "parts": costmodel.naive_traffic(shape), "counted": 123 << 20},
            {"key": "flash_no_cache", "title": "flash, no cache", "parts": specs.traffic("fa2", shape, 128, 64)},
            {"key": "flash_l2", "title": "flash, L2", "counted": None,
             "parts": specs.traffic("fa2", shape, 128, 64, machine=costmodel.Machine(60 << 20, 132, ""))}]


def test_compare_figure() -> None:
    panels = compare_panels(4096, False)
    fig = viz.compare_figure(panels)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [list(b.y) for b in bars] == [
        [getattr(part, kind) for part in panel["parts"]] for panel in panels for kind in ("reads", "writes")
    ]
    standard, no_cache, l2 = (costmodel.total_bytes(panel["parts"]) for panel in panels)
    titles = [a.text for a in fig.layout.annotations]
    assert fmt_bytes(standard) in titles[0] and "counted: 123.0 MiB" in titles[0]
    assert f"{fmt_ratio(standard / no_cache)} less" in titles[1] and f"{fmt_ratio(standard / l2)} less" in titles[2]
    assert fig.layout.barmode == "stack"
    log = viz.compare_figure(panels, log_y=True)
    assert log.layout.barmode == "group" and log.layout.yaxis.type == "log"


def test_published_entries_are_cited() -> None:
    assert [entry["short"] for entry in PUBLISHED] == ["FA1", "FA2", "FA3", "FA4"]
    for entry in PUBLISHED:
        assert {"gpu", "dtype", "tflops", "measures", "year", "citation", "url", "note"} <= set(entry)
        assert "arXiv:" in entry["citation"] and entry["url"].startswith("https://arxiv.org/abs/")
        if entry["tflops_kind"] == "derived":
            assert "derived" in entry["note"]


def test_evolution_figure() -> None:
    measured = [
        {"label": "ours (Triton)", "tflops": 500.0, "gpu": "H200", "algorithm": "fa2"},
        {"label": "PyTorch SDPA", "tflops": None, "gpu": "H200"},
    ]
    fig = viz.evolution_figure(measured)
    ours = next(t for t in fig.data if t.name == "measured on this GPU")
    assert list(ours.y) == [500.0] and ours.marker.color[0] == algorithm_color("fa2")
    gap = next(t for t in fig.data if t.customdata is not None and "not measured" in t.customdata)
    assert list(gap.x) == ["PyTorch<br>SDPA"] and list(gap.text) == ["not<br>measured"]  # wrapped like its label
    categories = list(fig.layout.xaxis.categoryarray)
    assert categories[0].startswith("FA1 (2022)") and categories[-1] == "PyTorch<br>SDPA"
    # measured ticks: short lines, so neighbouring labels stay apart; the GPU is the legend's to say
    assert categories[-2] == "ours<br>(Triton)" and not any("H200" in c for c in categories[-2:])
    assert "measured on this GPU" in fig.layout.title.text
    assert any("no measurement" in a.text for a in viz.evolution_figure([]).layout.annotations)
    # a kernel past its memory wall says so where its point would be
    wall = viz.evolution_figure([{"label": "standard", "tflops": None, "note": "out of memory"}])
    assert any(t.customdata is not None and list(t.customdata) == ["out of memory"] and list(t.text) ==
               ["out of<br>memory"] for t in wall.data)
    # a label with a word longer than a tick's line is not cut inside the word: its spec's short name instead
    authors = viz.evolution_figure([{"label": algorithm_label("fa4_authors"), "tflops": 677.0, "gpu": "H200",
                                     "algorithm": "fa4_authors"}])
    tick = list(authors.layout.xaxis.categoryarray)[-1]
    assert tick == "FA-4 (the<br>authors')" and "FlashAttent<br>" not in tick


def test_a_table_figure_is_as_tall_as_its_rows_counted_in_lines() -> None:
    """Each column as wide as its widest cell, the last the rest with its text wrapped to it; the figure as tall as
    the header and the rows (a wrapped row: its lines), so that nothing scrolls inside it; a smaller window scales the
    rows with the fonts."""
    from viz import table
    rows = [{"N": "1K", "flash": "0.161 ms", "note": "the launch " * 40}, {"N": "2K", "flash": "0.158 ms", "note": ""}]
    layout = table.table_layout(rows, 1000)
    assert sum(layout.widths) == pytest.approx(1000) and layout.lines[1] == 1 and layout.lines[0] > 1
    note = layout.cells[-1][0].split("<br>")
    assert len(note) == layout.lines[0] and " ".join(note) == rows[0]["note"].strip()
    assert all(fit.text_px(line, SMALLEST_TEXT_PX) <= layout.widths[-1] - 2 * table.CELL_PAD_PX for line in note)
    assert all(fit.text_px(text, SMALLEST_TEXT_PX) < width - 2 * table.CELL_PAD_PX  # numbers never wrap
               for column, width in zip(layout.cells[:-1], layout.widths) for text in column)
    fig = viz.table_figure(rows, width=1000)
    wrapped = table.LINE_SPACING_PX * layout.lines[0] + table.WRAPPED_PAD_PX + table.SCALE_SLACK_PX
    assert fig.layout.height == layout.height_px == pytest.approx(
        table.TOP_PX + 2 * table.ROW_PX + wrapped + table.BOTTOM_PX + 3 * table.ROUNDING_PX)
    assert list(fig.data[0].header.values) == ["N", "flash", "note"]
    empty = viz.table_figure([], columns=("N", "note"))
    assert list(empty.data[0].header.values) == ["N", "note"], "no rows: the header still says what would be there"
    small = scaled_figure(fig, 2 / 3)
    assert small.data[0].cells.height == pytest.approx(table.ROW_PX * 2 / 3)
    assert small.data[0].header.height == pytest.approx(table.ROW_PX * 2 / 3)


def test_an_arrows_tail_scales_with_the_window_where_it_is_placed_in_pixels() -> None:
    fig = go.Figure()
    fig.add_annotation(x=1, y=1, text="px", ax=-60, ay=30, standoff=10)
    fig.add_annotation(x=1, y=1, text="on the axis", ax=3, ay=2, axref="x", ayref="y")
    small = scaled_figure(fig, 0.5)
    pixel, axis = small.layout.annotations
    assert (pixel.ax, pixel.ay, pixel.standoff) == (-30, 15, 5) and (axis.ax, axis.ay) == (3, 2)


def test_the_evolution_title_names_only_what_is_drawn() -> None:
    """A setting where none of the measured entries has a number (a model preset the recording lacks) draws the
    published points alone: the title names no recording of ours, though the scene passes where they would be from."""
    missing = [{"label": "ours (Triton)", "tflops": None, "note": "not recorded", "algorithm": "fa2"}]
    fig = viz.evolution_figure(missing, measured_label="recorded on NVIDIA H200, 2026-12-05")
    assert "H200" not in fig.layout.title.text and "ours" not in fig.layout.title.text
    assert not [t for t in fig.data if t.name == "recorded on NVIDIA H200, 2026-12-05"]
    drawn = viz.evolution_figure([{**missing[0], "tflops": 500.0, "note": None}],
                                 measured_label="recorded on NVIDIA H200, 2026-12-05")
    assert "ours recorded on NVIDIA H200, 2026-12-05" in drawn.layout.title.text


def test_timeline_figure_draws_the_programs_and_says_the_statistics_it_is_given() -> None:
    # SM 0 runs [0, 10), [5, 15) and [15, 20) ns, SM 1 [0, 6); the statistics are the story's to count
    timeline = {"sm_count": 2, "sm_id": [0, 0, 0, 1], "t_start_ns": [0, 5, 15, 0], "t_end_ns": [10, 15, 20, 6],
                "q_block": [0, 1, 2, 3], "causal": True}
    stats = {"programs": 4, "waves": 1.0, "makespan_us": 0.02, "utilization": 0.65, "max_per_sm": 2}
    fig = viz.sm_timeline_figure(timeline, stats)
    *rects, bar = fig.data
    assert bar.marker.showscale and (bar.marker.cmin, bar.marker.cmax) == (0, 3)  # causal: coloured by Q block
    assert [t.type for t in rects] == ["scatter"] * 4 and all(t.fill == "toself" for t in rects)  # one per colour
    assert len({t.fillcolor for t in rects}) == 4 and [t.name for t in rects][0] == "Q block 0: 1 program"
    drawn = sorted((min(x for x in t.x if x == x), max(x for x in t.x if x == x), min(y for y in t.y if y == y))
                   for t in rects)  # (start, end, bottom) of each rectangle, µs from the first start
    assert [v for row in drawn for v in row] == pytest.approx(
        [0.0, 0.006, 0.6, 0.0, 0.01, -0.4, 0.005, 0.015, -0.4, 0.015, 0.02, -0.4], abs=1e-6)
    assert "SM utilization 65%" in fig.layout.title.text and "4 programs on 2 SMs" in fig.layout.title.text
    assert "≈1.0 waves" in fig.layout.title.text and fig.layout.xaxis.range == (0, 0.02)


def test_timeline_draws_whole_sms_under_the_cap(monkeypatch) -> None:
    sm_id = np.repeat(np.arange(10), 10)  # 10 programs on each of 10 SMs
    start = np.tile(np.arange(10) * 100, 10)
    timeline = {"sm_count": 10, "sm_id": sm_id, "t_start_ns": start, "t_end_ns": start + 90, "q_block": sm_id}
    monkeypatch.setattr(sm_timeline, "MAX_PROGRAMS_DRAWN", 35)
    stats = {"programs": 100, "waves": 10.0, "makespan_us": 0.99, "utilization": 0.9, "max_per_sm": 1}
    fig = viz.sm_timeline_figure(timeline, stats)
    corners = np.concatenate([np.asarray(t.y, dtype=float) for t in fig.data[:-1]])
    drawn = np.round(corners[~np.isnan(corners)][::5] + 0.4).astype(int)  # each rectangle's first corner: its SM
    assert len(drawn) == 30 and set(drawn) == {0, 1, 2}
    assert "100 programs" in fig.layout.title.text and "30 of 100" in fig.layout.title.text


def test_empty_timeline() -> None:
    empty = {"sm_count": 132, "sm_id": [], "t_start_ns": [], "t_end_ns": [], "q_block": []}
    fig = viz.sm_timeline_figure(empty, {"programs": 0, "waves": 0.0, "makespan_us": 0.0, "utilization": 0.0,
                                         "max_per_sm": 0})
    assert not fig.data and any("no programs" in a.text for a in fig.layout.annotations)


# -- every builder: both themes, valid JSON, projector fonts -----------------------------------


TIMELINE_STATS = {"programs": 5, "waves": 1.25, "makespan_us": 0.09, "utilization": 230 / 360, "max_per_sm": 1}


def all_figures(theme: str, records: list[dict]) -> dict[str, go.Figure]:
    timeline = {"sm_count": 4, "sm_id": [0, 1, 2, 3, 0], "t_start_ns": [0, 0, 0, 0, 50],
                "t_end_ns": [50, 40, 30, 20, 90], "q_block": [3, 2, 1, 0, 4], "causal": False}  # fmt: skip
    return {
        "tiling": viz.tiling_figure(make_trace(64, 16, 16, True), theme=theme),
        "memory": viz.memory_figure(records, 1, 8, 64, 2, seq_len_marker=4096, theme=theme),
        "timing": viz.timing_figure(records, theme=theme),
        "tflops": viz.tflops_figure(records, theme=theme),
        "hierarchy": viz.hierarchy_figure(FACTS, theme=theme),
        "problem": viz.scores_memory_figure(Shape(4096, 1, 8), theme=theme),
        "compare": viz.compare_figure(compare_panels(1024, True), theme=theme),
        "evolution": viz.evolution_figure([], theme=theme),
        "ablation": viz.ablation_figure(story.chart_data(story.bars([])), theme=theme),
        "fp8": viz.fp8_figure([{"name": "FP8 per-tensor", "scaling": "tensor", "rotation": False, "rel_rms": 0.15,
                                "speedup": 0.94}, {"name": "bf16", "scaling": None, "rotation": False,
                                                   "rel_rms": 0.012, "speedup": 1.0}], False, theme=theme),
        "sm_timeline": viz.sm_timeline_figure(timeline, TIMELINE_STATS, theme=theme),
    }


@pytest.mark.parametrize("theme", fmt.THEMES)
def test_every_builder_in_every_theme(theme: str, records) -> None:
    for name, fig in all_figures(theme, records).items():
        spec = json.loads(fig.to_json())
        template = spec["layout"]["template"]["layout"]
        assert template["paper_bgcolor"] == surface(theme)["background"], name
        assert template["font"]["size"] >= 18, name
        assert len(fig.to_json()) < 1_000_000, name


FONT_KEYS = ("font", "textfont", "tickfont", "insidetextfont", "outsidetextfont", "grouptitlefont")


def font_sizes(node, parent: str = "") -> list[float]:
    """Every font size set in a figure's JSON, its template's included."""
    sizes = []
    if isinstance(node, list):
        return [size for item in node for size in font_sizes(item, parent)]
    if isinstance(node, dict):
        if parent in FONT_KEYS and isinstance(node.get("size"), (int, float)):
            sizes.append(node["size"])
        sizes += [size for key, value in node.items() for size in font_sizes(value, key)]
    return sizes


def test_no_text_below_the_smallest_size(records) -> None:
    for name, fig in all_figures("light", records).items():
        sizes = font_sizes(json.loads(fig.to_json()))
        assert sizes and min(sizes) >= SMALLEST_TEXT_PX, (name, sorted(set(sizes)))


def relative_luminance(color: str) -> float:
    channels = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def contrast(a: str, b: str) -> float:
    light, dark = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_one_look_per_algorithm() -> None:
    looks = {key: look(key) for key in algorithm_order()}
    assert set(looks) == {"fa2", "naive", "sdpa_default", "sdpa_flash", "torch_naive", "fa1", "fa3", "decode",
                          "fa4_authors"}
    colors = [found.color for found in looks.values()]
    labels = [found.label for found in looks.values()]
    assert len(set(colors)) == len(colors) and len(set(labels)) == len(labels)
    assert PALETTE["published"] not in colors  # grey stays the papers' (and any unknown algorithm's)
    assert not set(PALETTE) & set(looks)  # the palette holds what is not an algorithm
    for key in ("fa1", "fa3", "fa4_authors"):  # the colours picked for this house: 3:1 on both backgrounds
        for theme in fmt.THEMES:
            assert contrast(looks[key].color, surface(theme)["background"]) >= 3, (key, theme)
    assert algorithm_label("fa3") == "flash, FA-3 style (ours, Gluon)"
    assert algorithm_color("nope") == PALETTE["published"] and algorithm_label("nope") == "nope"


def test_loop_orders_are_the_algorithms_with_an_order_name() -> None:
    orders = loop_orders()
    assert set(orders) == {key for key in algorithm_order() if look(key).order_label} == {"fa2", "fa1"}
    assert [look(key).order_label for key in orders] == ["FA2 order", "FA1 order"]


VIZ = pathlib.Path(viz.__file__).parent
MAX_FUNCTION_LINES = 80


def test_viz_modules_keep_the_house_rules() -> None:
    """No viz module takes another's private name, and no function runs over MAX_FUNCTION_LINES lines."""
    for path in sorted(VIZ.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("viz", "fmt"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.name} takes {private} from {node.module}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= MAX_FUNCTION_LINES, f"{path.name}: {node.name} is {lines} lines"


def test_unknown_theme_is_rejected() -> None:
    with pytest.raises(ValueError, match="theme"):
        viz.hierarchy_figure(FACTS, theme="neon")


def test_viz_imports_no_app_or_gpu_stack() -> None:
    code = "import sys, viz; print(sorted({'streamlit', 'torch', 'triton'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_fmt_ms_reads_as_milliseconds() -> None:
    assert [fmt_ms(v) for v in (0.1234, 7.234, 99.94, 100.0, 2412.4, 2080.0)] == [
        "0.123 ms", "7.23 ms", "99.9 ms", "100 ms", "2,412 ms", "2,080 ms"]
    assert fmt_ms(None) == "—"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_figure_styled_from_the_shared_template_cannot_change_the_next(theme):
    """The theme's template is built once (viz.theme.template is cached): what one figure does to its own template
    does not reach the next figure, and each theme keeps its own colours."""
    from viz.theme import style, template
    first = style(go.Figure(go.Scatter(y=[1, 2])), theme)
    first.layout.template.layout.font.size = 99
    first.layout.template.layout.paper_bgcolor = "#123456"
    second = style(go.Figure(go.Scatter(y=[1, 2])), theme)
    assert second.layout.template.layout.font.size != 99
    assert second.layout.template.layout.paper_bgcolor == surface(theme)["background"] != "#123456"
    assert template(theme) is template(theme), "built once per theme"
    other = "dark" if theme == "light" else "light"
    assert style(go.Figure(), other).layout.template.layout.paper_bgcolor == surface(other)["background"]


def test_lanes_in_a_narrow_column_carry_their_key_below_the_axis_and_it_scales() -> None:
    """legend_per_row: no plotly legend (its entries would wrap one to a row and grow up into the lanes); the phases
    as a key of text lines under the time axis, legend_per_row to a line, that moves down with the figure's scale."""
    from viz import phases
    from viz.theme import scaled_figure
    lanes = [{"label": "consumer 0", "spans": [["qk", 0.0, 1.0], ["softmax", 1.0, 2.0], ["pv", 2.0, 3.0]]},
             {"label": "producer", "spans": [["load", 0.0, 3.0]]}]
    wide = viz.phases_figure([{"title": "", "lanes": lanes}])
    assert wide.layout.showlegend is not False and not wide.layout.annotations
    narrow = viz.phases_figure([{"title": "", "lanes": lanes}], legend_per_row=2)
    (key,) = [a for a in narrow.layout.annotations if "■" in a.text]
    assert narrow.layout.showlegend is False and key.text.count("<br>") == 1  # 4 phases drawn, 2 to a line
    assert all(phases.SHORT[p] in key.text for p in ("qk", "softmax", "pv", "load")) and "write" not in key.text
    assert narrow.layout.margin.b == phases.AXIS_TITLE_PX + 3 * phases.LEGEND_ROW_PX  # room for every phase's row
    assert key.yshift == -phases.AXIS_TITLE_PX
    assert scaled_figure(narrow, 0.5).layout.annotations[0].yshift == -phases.AXIS_TITLE_PX / 2  # negative: kept


def test_phases_figure_names_every_lane_however_thin():
    """Plotly drops every other category label on its own when lanes are thin (the inside scene's FA-3 panel showed
    "consumer 0" and the producer, not "consumer 1"): the lanes' names are the ticks, all of them."""
    lanes = [{"label": name, "spans": [["qk", 0.0, 1.0]]} for name in ("consumer 0", "consumer 1", "producer")]
    fig = viz.phases_figure([{"title": "a", "lanes": lanes[:1]}, {"title": "b", "lanes": lanes}], height=300)
    axes = [fig.layout.yaxis, fig.layout.yaxis2]
    assert [list(a.ticktext) for a in axes] == [["consumer 0"], ["consumer 0", "consumer 1", "producer"]]
    assert all(a.tickmode == "array" and list(a.tickvals) == list(a.ticktext) for a in axes)
