"""The tile-by-tile animation of the flash forward pass, from the kernel's recorded trace.

One plotly frame per kernel step (Q block i with K/V tile j in SRAM). Each frame updates four
panels on one shared step clock: (a) the N×N score matrix as a grid of tiles (done / in SRAM /
pending / skipped by the causal mask), (b) the running max m, running sum l and rescale factor α of
the current Q block's rows, (c) a sample of the block's output rows as they accumulate, drawn over
what they will be once the block is done, and (d) HBM bytes moved so far by flash versus standard
attention doing the same tiles; a caption above says the step.

Built to play at 20–30 frames per second even where the browser draws without a GPU. Plotly can
update a frame two ways: `redraw: True` re-renders the whole figure (~300 ms here, software-rendered),
`redraw: False` updates only scatter and bar traces in place. Even then every frame re-reads the whole
figure's defaults (each axis costs about a millisecond) and restyles every marker it touches one by
one (a coloured marker costs ~0.2 ms in Streamlit's plotly.js). So frames never redraw, and:
- what never changes is drawn once and never listed in a frame: pending and skipped tiles (shapes),
  tile borders, the causal diagonal, the legend (an annotation), the axes (fixed ranges);
- done tiles are one bar per Q block growing along the keys, plus one bar for the tile in SRAM;
- the three running statistics are lanes of one panel (one pair of axes, each lane labelled in its own
  units), α a stepped area rather than a bar per row;
- the output rows are curves over the head dims (one SVG path, not a marker per value), each on its
  own baseline, with the block's final rows in grey behind them;
- the step caption is a text trace (a layout title only updates on a redraw), as are the byte labels
  (bar labels are measured in the page every frame);
- the slider stops at MAX_SLIDER_STEPS steps at most.
"""

from __future__ import annotations

import base64

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from viz.marks import linear_bytes_axis
from costmodel import (Step, dtype_bytes, fa1_schedule, fa1_step_traffic, k_tiles_per_q_block, n_blocks,
                       step_traffic, tile_schedule)
from viz.theme import BASE_FONT_PX, PALETTE, style, surface
from fmt import fmt_bytes

MAX_TILES_PER_SIDE = 64  # beyond this the grid stops being readable and the figure grows too large
SPEEDS = (0.5, 1.0, 2.0, 4.0, 8.0)  # play-button speed factors over the base frame duration
MAX_OUT_ROWS = 8  # output curves: rows of the Q block shown
MAX_OUT_DIMS = 32  # head dims along each curve
OUT_SWING = 0.45  # an output curve's reach from its baseline at the largest |O| shown, in row pitches
OUT_UNITS = 1000  # output curve heights travel as int16 in thousandths of a row pitch: a third of float32's
OUT_HIDDEN = -32000  # the height of rows past seq_len: far below the panel, never drawn
LANE_GAP = 0.45  # between the running statistics' lanes, in lane heights
STAT_LANES = ("alpha", "row_sum", "row_max")  # bottom to top: α's lane starts at 0, where its area fills to
STAT_TITLES = {
    "row_max": "running max m (nats)",
    "row_sum": "running sum l",
    "alpha": "rescale α = exp(m_old − m_new)",
}
MAX_SLIDER_STEPS = 64  # plotly re-reads every slider step in every frame, ~15 µs each
CAPTION_PX = 130  # the top margin: the tile legend's line, then two caption lines over a blank one
CONTROLS_PX = 180  # the bottom margin: the x axes' tick labels and titles, then the play buttons and the slider
AXIS_TITLES_PX = 96  # the x axes' tick labels and titles take this much under the plot area; the controls go below
DEFAULT_HEIGHT_PX = 740  # with the app's scene header, the whole figure fits a 1080-pixel-high screen
PANEL_GAP_X, PANEL_GAP_Y = 0.08, 0.12  # between panels, as shares of the plot area

TILE_STATES = ("done", "current", "pending", "skipped")  # legend order
STATE_NAMES = {
    "skipped": "skipped (causal mask)",
    "pending": "pending",
    "done": "done",
    "current": "in SRAM now",
}
STATE_COLORS = {
    "skipped": PALETTE["skipped"],
    "pending": PALETTE["pending"],
    "done": PALETTE["done"],
    "current": PALETTE["highlight"],
}
# The kernels' loop orders (kernels/trace.py ORDERS): their step order and names on screen.
ORDER_SCHEDULES = {"fa2": tile_schedule, "fa1": fa1_schedule}
ORDER_NAMES = {"fa2": "FA2 order", "fa1": "FA1 order"}
REQUIRED_KEYS = (
    "seq_len", "head_dim", "block_m", "block_n", "causal", "dtype",
    "steps", "row_max", "row_sum", "alpha", "out_rows", "max_abs_err",
)  # fmt: skip

# trace order in the figure (later traces draw on top within a trace type: heatmaps, then bars, then
# scatters); frames update exactly ANIMATED_TRACES
(TILES, TILE_BORDERS, BANDS, ROW_MAX, ROW_SUM, ALPHA, OUT_FINAL, OUT_ROWS, HBM_BYTES, HBM_LABELS, CAPTION) = range(11)
ANIMATED_TRACES = [TILES, BANDS, ROW_MAX, ROW_SUM, ALPHA, OUT_FINAL, OUT_ROWS, HBM_BYTES, HBM_LABELS, CAPTION]


def _typed(values: np.ndarray) -> dict[str, str]:
    """A NumPy array as plotly's base64 typed-array spec: the JSON plotly.py writes for the array anyway,
    but handed over already encoded, plotly.py skips its per-array checks, half the build of 1024 frames."""
    values = np.ascontiguousarray(values)
    return {"dtype": values.dtype.str.lstrip("<>|="), "bdata": base64.b64encode(values.tobytes()).decode("ascii")}


def _translucent(color: str, alpha: float = 0.35) -> str:
    red, green, blue = plotly.colors.hex_to_rgb(color)
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _output_sample(block_m: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows and head dims the output panel shows: every k-th row ending on the last one (the row that
    meets its largest score late, see kernels.trace), and the first MAX_OUT_DIMS dims."""
    stride = -(-block_m // MAX_OUT_ROWS)
    return np.arange(block_m - 1, -1, -stride)[::-1], np.arange(min(head_dim, MAX_OUT_DIMS))


def _output_title(rows: np.ndarray, block_m: int, dims: np.ndarray, head_dim: int) -> tuple[str, str]:
    """The output panel's title, and its x axis' title saying which part of O it shows."""
    shown = [f"head dims 0–{len(dims) - 1} of {head_dim}" if len(dims) < head_dim else "head dim"]
    if len(rows) < block_m:
        shown.append(f"1 row in {-(-block_m // len(rows))}")
    return "O = acc / l, rows scaled (grey: final)", ", ".join(shown)


def _output_curves(values: np.ndarray) -> np.ndarray:
    """Output values (T, rows, dims) as curve heights in OUT_UNITS per row pitch: row i of R on the
    baseline R − 1 − i (the first row on top), each row scaled so its largest |O| over the animation
    reaches OUT_SWING of a pitch (a row that meets one dominant key has outputs ten times the others').
    Rows past seq_len (NaN) sit at OUT_HIDDEN. Returns int16 (T, rows × (dims + 1)), row-major as the
    curves' x positions, whose NaN after each row breaks the line (the height there is 0)."""
    num_rows = values.shape[-2]
    baselines = (num_rows - 1 - np.arange(num_rows))[:, None]
    finite = np.where(np.isfinite(values), np.abs(values), 0.0)
    limits = finite.max(axis=(0, 2))[:, None]  # per row
    curves = np.round((baselines + OUT_SWING * values / np.where(limits > 0, limits, 1.0)) * OUT_UNITS)
    curves = np.where(np.isfinite(curves), curves, OUT_HIDDEN)
    breaks = np.zeros((*curves.shape[:-1], 1))
    return np.concatenate([curves, breaks], axis=-1).reshape(*values.shape[:-2], -1).astype(np.int16)


def _nice_ticks(lo: float, hi: float, count: float = 2.5) -> np.ndarray:
    """Two or three round values inside [lo, hi]: a step of 1, 2, 2.5 or 5 times a power of ten, the
    one nearest (span / count) on a log scale."""
    raw = (hi - lo) / count
    power = 10.0 ** np.floor(np.log10(raw))
    step = min((power * factor for factor in (1, 2, 2.5, 5, 10)), key=lambda step: abs(np.log(step / raw)))
    ticks = np.arange(np.ceil(lo / step) * step, hi + step * 1e-9, step)
    return np.round(ticks, 12) + 0.0  # + 0.0: no "-0" label


def _stat_lanes(arrays: dict[str, np.ndarray]) -> dict[str, dict]:
    """Each running statistic's lane in the statistics panel: its bottom on the panel's y axis, its tick
    values and their heights, and its (T, block_m) curve; a lane spans a value range fixed for the whole
    animation."""
    ranges = {
        "row_max": _finite_range(arrays["row_max"]),
        "row_sum": _finite_range(arrays["row_sum"], floor=0.0),
        "alpha": [0.0, 1.05],
    }
    lanes = {}
    for index, name in enumerate(STAT_LANES):
        (lo, hi), bottom = ranges[name], index * (1 + LANE_GAP)
        ticks = _nice_ticks(lo, hi)
        lanes[name] = {
            "bottom": bottom,
            "ticks": ticks,
            "positions": bottom + (ticks - lo) / (hi - lo),
            "curves": (bottom + (arrays[name] - lo) / (hi - lo)).astype(np.float32),
        }
    return lanes


def _finite_range(values: np.ndarray, floor: float | None = None, pad: float = 0.08) -> list[float]:
    """[lo, hi] of the finite values padded by `pad` of the span; fixed for the whole animation."""
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if floor is not None:
        lo = min(lo, floor)
    span = hi - lo or 1.0
    return [lo - pad * span, hi + pad * span]


def _tile_edges(seq_len: int, block: int) -> np.ndarray:
    """Tile edges in tokens, the last one at seq_len: partial tiles look partial."""
    return np.minimum(np.arange(n_blocks(seq_len, block) + 1) * block, seq_len)


def _tile_bars(steps: np.ndarray, num_q: int, block_m: int, block_n: int, seq_len: int) -> dict[str, np.ndarray]:
    """The done tiles and the tile in SRAM before each step as horizontal bars, int32 (T, num_q + 1) each:
    bar i < num_q is Q block i's done tiles, one run from key 0 (a Q block visits its K/V tiles from the
    first one up, the order _validated checks); the last bar is the tile in SRAM. A bar is block_m
    tokens thick around its centre y, runs from key `base` for `x` keys; bars past seq_len are clipped.
    """
    num_steps = len(steps)
    visits = np.zeros((num_steps, num_q), dtype=np.int32)
    visits[np.arange(num_steps), steps[:, 0]] = 1
    done_tiles = np.cumsum(visits, axis=0) - visits  # visits before the step
    centres = np.arange(num_q) * block_m + block_m // 2
    current_left = steps[:, 1] * block_n
    current_width = np.minimum(current_left + block_n, seq_len) - current_left
    return {
        "x": np.column_stack([np.minimum(done_tiles * block_n, seq_len), current_width]).astype(np.int32),
        "y": np.column_stack([np.tile(centres, (num_steps, 1)), centres[steps[:, 0]]]).astype(np.int32),
        "base": np.column_stack([np.zeros_like(done_tiles), current_left]).astype(np.int32),
    }


def _row_runs(left: np.ndarray | int, right: np.ndarray | int, y_edges: np.ndarray) -> str:
    """An SVG path (in tokens) of one rectangle per Q block row, from key `left` to key `right` (empty
    ones left out)."""
    left, right = np.broadcast_to(left, len(y_edges) - 1), np.broadcast_to(right, len(y_edges) - 1)
    return "".join(
        f"M{x0},{y0}H{x1}V{y1}H{x0}Z" for x0, x1, y0, y1 in zip(left, right, y_edges[:-1], y_edges[1:]) if x1 > x0
    )


def _tile_legend(causal: bool) -> str:
    """The tile states as one line of coloured squares and names (a legend of traces costs time every frame)."""
    names = [name for name in TILE_STATES if causal or name != "skipped"]
    swatch = '<span style="color:{};font-size:{}px">■</span> {}'
    return "   ".join(swatch.format(STATE_COLORS[name], BASE_FONT_PX + 8, STATE_NAMES[name]) for name in names)


def _grid_lines(x_edges: np.ndarray, y_edges: np.ndarray) -> dict[str, list[float | None]]:
    """Every tile border as one broken line (x, y in tokens)."""
    x: list[float | None] = []
    y: list[float | None] = []
    for edge in x_edges:
        x += [edge, edge, None]
        y += [y_edges[0], y_edges[-1], None]
    for edge in y_edges:
        x += [x_edges[0], x_edges[-1], None]
        y += [edge, edge, None]
    return {"x": x, "y": y}


def _validated(trace: dict) -> dict:
    """The trace's arrays as NumPy float32, after checking them against the documented tile order."""
    missing = [key for key in REQUIRED_KEYS if key not in trace]
    if missing:
        raise ValueError(f"flash trace is missing {missing} (see docs/data-contracts.md)")
    steps = np.asarray(trace["steps"], dtype=np.int64).reshape(-1, 2)
    order = trace.get("order", "fa2")
    if order not in ORDER_SCHEDULES:
        raise ValueError(f"trace order must be one of {tuple(ORDER_SCHEDULES)}, got {order!r}")
    schedule = ORDER_SCHEDULES[order](trace["seq_len"], trace["block_m"], trace["block_n"], trace["causal"])
    expected = np.array([(step.q_block, step.k_block) for step in schedule], dtype=np.int64)
    if steps.shape != expected.shape or not np.array_equal(steps, expected):
        raise ValueError(
            f"trace steps ({len(steps)}) differ from the documented tile order ({len(expected)} steps, "
            f"costmodel.{ORDER_SCHEDULES[order].__name__}): the animation's byte counts would not match the kernel"
        )
    arrays = {key: np.asarray(trace[key], dtype=np.float32) for key in ("row_max", "row_sum", "alpha", "out_rows")}
    for key, values in arrays.items():
        if values.shape[:2] != (len(steps), trace["block_m"]):
            expected_shape = f"({len(steps)}, {trace['block_m']}, …)"
            raise ValueError(f"trace[{key!r}] has shape {values.shape}, expected {expected_shape}")
    return {"steps": steps, "schedule": schedule, "order": order, **arrays}


def flash_step_bytes(order: str, seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool,
                     dtype_bytes: int) -> np.ndarray:
    """Cumulative HBM bytes (read + written) after each step of a loop order's kernel, by the cost model."""
    if order == "fa1":
        return fa1_step_traffic(seq_len, head_dim, block_m, block_n, causal, dtype_bytes)["flash_v1_bytes"]
    return step_traffic(seq_len, head_dim, block_m, block_n, causal, dtype_bytes)["flash_bytes"]


def _step_title(t: int, num_steps: int, step: Step, alpha: np.ndarray, order: str = "fa2") -> str:
    valid = alpha[np.isfinite(alpha)]
    if step.first:
        alpha_text = "α = 0 (first tile: nothing to rescale)"
    else:
        alpha_text = f"α ∈ [{valid.min():.3f}, {valid.max():.3f}]" if valid.size else "α n/a"
    mask_text = " (masked)" if step.masked else ""
    return (f"step {t + 1}/{num_steps} · {ORDER_NAMES[order]} · Q block {step.q_block} · K/V tile {step.k_block}"
            f"{mask_text}<br>{alpha_text}")


def _band_outlines(step: Step, seq_len: int, block_m: int, block_n: int) -> dict[str, list[float | None]]:
    """Outlines (x, y in tokens) of the current Q row band and K/V column band, as one broken line."""
    q_rows = (step.q_block * block_m, min((step.q_block + 1) * block_m, seq_len))
    k_cols = (step.k_block * block_n, min((step.k_block + 1) * block_n, seq_len))
    x: list[float | None] = []
    y: list[float | None] = []
    for (x0, x1), (y0, y1) in (((0, seq_len), q_rows), (k_cols, (0, seq_len))):
        x += [x0, x1, x1, x0, x0, None]
        y += [y0, y0, y1, y1, y0, None]
    return {"x": x, "y": y}


def _panel_domains() -> dict[str, tuple[list[float], list[float]]]:
    """(x, y) domains of the panels in the plot area: the tile grid on the left, the running statistics
    in the middle (three lanes on one pair of axes: every axis costs time in every frame), the output
    rows over the HBM bytes on the right."""
    widths = np.array([0.4, 0.3, 0.3]) * (1 - 2 * PANEL_GAP_X)
    lefts = np.concatenate([[0.0], np.cumsum(widths + PANEL_GAP_X)[:-1]])
    grid, stats, right = ([float(left), float(left + width)] for left, width in zip(lefts, widths))
    height = (1 - 2 * PANEL_GAP_Y) / 3
    top, middle, bottom = ([1 - height - i * (height + PANEL_GAP_Y), 1 - i * (height + PANEL_GAP_Y)] for i in range(3))
    return {
        "grid": (grid, [0.0, 1.0]),
        "stats": (stats, [0.0, 1.0]),
        "out": (right, [middle[0], 1.0]),
        "bytes": (right, [0.0, bottom[1] - 0.16]),  # room for its title under the output panel's axis title
    }


def tiling_figure(
    trace: dict, theme: str = "light", frame_ms: int = 250, start_step: int = 0, height: int = DEFAULT_HEIGHT_PX
) -> go.Figure:
    """The tile-by-tile animation of one (batch, head) of the flash forward pass.

    trace: a FlashTrace dict (docs/data-contracts.md); its steps must follow its order's schedule
    (costmodel.tile_schedule for "fa2", the default; costmodel.fa1_schedule for "fa1").
    frame_ms: duration of one step at 1× speed, in milliseconds. start_step: the step shown before play.
    Returns a figure with exactly one frame per step, named "0".."T-1", fixed axis ranges, play/pause
    buttons at 0.5×–8× speed and a slider over the steps.
    """
    seq_len, head_dim = int(trace["seq_len"]), int(trace["head_dim"])
    block_m, block_n, causal = int(trace["block_m"]), int(trace["block_n"]), bool(trace["causal"])
    num_q, num_k = n_blocks(seq_len, block_m), n_blocks(seq_len, block_n)
    if max(num_q, num_k) > MAX_TILES_PER_SIDE:
        raise ValueError(
            f"{num_q}×{num_k} tiles is too many to animate (at most {MAX_TILES_PER_SIDE} per side): "
            "use a smaller seq_len or larger tiles"
        )
    arrays = _validated(trace)
    steps, schedule = arrays["steps"], arrays["schedule"]
    num_steps = len(steps)
    if not 0 <= start_step < num_steps:
        raise ValueError(f"start_step must be in [0, {num_steps}), got {start_step}")
    flash_bytes = flash_step_bytes(arrays["order"], seq_len, head_dim, block_m, block_n, causal,
                                   dtype_bytes(trace["dtype"]))
    traffic = step_traffic(seq_len, head_dim, block_m, block_n, causal, dtype_bytes(trace["dtype"]))
    tile_bars = _tile_bars(steps, num_q, block_m, block_n, seq_len)
    lanes = _stat_lanes(arrays)
    out_rows, out_dims = _output_sample(block_m, head_dim)
    out_title, out_axis_title = _output_title(out_rows, block_m, out_dims, head_dim)
    out_values = arrays["out_rows"][:, out_rows][:, :, out_dims]  # (T, rows shown, dims shown)
    out_curves = _output_curves(out_values)
    block_done = {step.q_block: t for t, step in enumerate(schedule)}  # each Q block's last step
    out_final = out_curves[[block_done[step.q_block] for step in schedule]]
    colors = surface(theme)

    def frame_data(t: int) -> list[dict]:
        """Only what changes from step to step, in ANIMATED_TRACES order."""
        moved = [int(flash_bytes[t]), int(traffic["naive_bytes"][t])]
        caption = _step_title(t, num_steps, schedule[t], arrays["alpha"][t], arrays["order"])
        if t == num_steps - 1:
            caption += f" · done: max |O_flash − O_standard| = {float(trace['max_abs_err']):.2e}"
        return [
            dict(type="bar", **{key: _typed(values[t]) for key, values in tile_bars.items()}),
            dict(type="scatter", **_band_outlines(schedule[t], seq_len, block_m, block_n)),
            dict(type="scatter", y=_typed(lanes["row_max"]["curves"][t])),
            dict(type="scatter", y=_typed(lanes["row_sum"]["curves"][t])),
            dict(type="scatter", y=_typed(lanes["alpha"]["curves"][t])),
            dict(type="scatter", y=_typed(out_final[t])),
            dict(type="scatter", y=_typed(out_curves[t])),
            dict(type="bar", y=moved),
            dict(type="scatter", y=moved, text=[fmt_bytes(b) for b in moved]),
            dict(type="scatter", text=[caption + "<br> "]),
        ]

    start = dict(zip(ANIMATED_TRACES, frame_data(start_step)))
    domains = _panel_domains()
    plot_px = height - CAPTION_PX - CONTROLS_PX
    fig = go.Figure()

    # (a) the tile grid: pending and skipped tiles never change (shapes under the traces); done tiles and
    # the tile in SRAM are bars over them, then the tile borders and the current bands
    x_edges, y_edges = _tile_edges(seq_len, block_n), _tile_edges(seq_len, block_m)
    tile_colors = [STATE_COLORS["done"]] * num_q + [STATE_COLORS["current"]]
    fig.add_trace(go.Bar(**start[TILES], width=block_m, orientation="h", marker=dict(color=tile_colors, line_width=0),
                         hoverinfo="skip", showlegend=False))
    grid_gap = 2 if max(num_q, num_k) <= 32 else 1  # tile borders, in pixels
    fig.add_trace(go.Scatter(**_grid_lines(x_edges, y_edges), mode="lines", hoverinfo="skip", showlegend=False,
                             line=dict(color=colors["background"], width=grid_gap)))
    fig.add_trace(go.Scatter(**start[BANDS], mode="lines", line=dict(color=colors["foreground"], width=4),
                             hoverinfo="skip", showlegend=False))
    visited_extents = np.minimum(k_tiles_per_q_block(seq_len, block_m, block_n, causal) * block_n, seq_len)
    for name, (left, right) in (("pending", (0, visited_extents)), ("skipped", (visited_extents, seq_len))):
        fig.add_shape(type="path", path=_row_runs(left, right, y_edges), fillcolor=STATE_COLORS[name],
                      line_width=0, layer="below")
    if causal:
        fig.add_shape(type="line", x0=0, y0=0, x1=seq_len, y1=seq_len,
                      line=dict(color=colors["foreground"], width=2, dash="dot"))

    # (b) the running statistics of the Q block's rows, one lane each on one pair of axes (x2, y2);
    # the values are in the figure as lane heights, their units on each lane's tick labels
    row_index = np.arange(block_m)
    for index, color in ((ROW_MAX, PALETTE["flash"]), (ROW_SUM, PALETTE["sdpa_flash"])):
        fig.add_trace(go.Scatter(**start[index], x=row_index, xaxis="x2", yaxis="y2", mode="lines",
                                 line=dict(color=color, width=3), hoverinfo="skip", showlegend=False))
    # α as one stepped area, not a bar per row: one SVG element to update instead of block_m
    fig.add_trace(go.Scatter(**start[ALPHA], x=row_index, xaxis="x2", yaxis="y2", mode="lines",
                             line=dict(color=PALETTE["highlight"], shape="hvh", width=3), fill="tozeroy",
                             fillcolor=_translucent(PALETTE["highlight"]), hoverinfo="skip", showlegend=False))

    # (c) the output rows as curves over the head dims, the block's final rows in grey behind them
    curve_x = np.tile(np.append(out_dims, np.nan), len(out_rows)).astype(np.float32)
    fig.add_trace(go.Scatter(**start[OUT_FINAL], x=_typed(curve_x), xaxis="x3", yaxis="y3", mode="lines",
                             line=dict(color=PALETTE["pending"], width=5), hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(**start[OUT_ROWS], x=_typed(curve_x), xaxis="x3", yaxis="y3", mode="lines",
                             line=dict(color=PALETTE["flash"], width=2), hoverinfo="skip", showlegend=False))

    # (d) HBM traffic so far; the labels are a text trace: bar labels are measured in the page every frame
    bytes_x = ["flash" if arrays["order"] == "fa2" else "flash (FA1)", "standard"]
    fig.add_trace(go.Bar(**start[HBM_BYTES], x=bytes_x, xaxis="x4", yaxis="y4", showlegend=False,
                         marker_color=[PALETTE["flash" if arrays["order"] == "fa2" else "flash_v1"],
                                       PALETTE["naive"]],
                         hovertemplate="%{x}: %{y:,} bytes<extra></extra>"))
    fig.add_trace(go.Scatter(**start[HBM_LABELS], x=bytes_x, xaxis="x4", yaxis="y4", mode="text",
                             textposition="top center", cliponaxis=False, hoverinfo="skip", showlegend=False,
                             textfont=dict(size=BASE_FONT_PX - 2, color=colors["foreground"])))

    # the caption: a text trace standing on the tile grid's top left corner, in the top margin; its last
    # line is blank, to clear the panel titles (a point outside the axis ranges would not be drawn, and
    # an axis pair of its own costs more time every frame than the whole caption)
    fig.add_trace(go.Scatter(**start[CAPTION], x=[0], y=[0], mode="text", textposition="top right",
                             textfont=dict(size=BASE_FONT_PX + 2, color=colors["foreground"]), cliponaxis=False,
                             hoverinfo="skip", showlegend=False))

    # Fixed ranges: frames never rescale an axis, so the eye only follows what changes.
    lanes_top = lanes[STAT_LANES[-1]]["bottom"] + 1
    out_baselines = len(out_rows) - 1 - np.arange(len(out_rows))
    labelled = np.arange(len(out_rows))[::-2]  # every other row labelled, the last one among them
    fig.update_layout(
        xaxis=dict(domain=domains["grid"][0], anchor="y", range=[0, seq_len],
                   title_text="key index: scores S, tile by tile",
                   showgrid=False, constrain="domain", constraintoward="left"),  # the tiles have borders
        yaxis=dict(domain=domains["grid"][1], anchor="x", range=[seq_len, 0], title_text="query index",
                   scaleanchor="x", showgrid=False, constrain="domain", constraintoward="top"),
        xaxis2=dict(domain=domains["stats"][0], anchor="y2", range=[-0.5, block_m - 0.5],
                    title_text="row r in the Q block"),
        yaxis2=dict(domain=domains["stats"][1], anchor="x2", range=[-0.04, lanes_top + 0.04], zeroline=False,
                    tickvals=np.concatenate([lane["positions"] for lane in lanes.values()]),
                    ticktext=[f"{tick:g}" for lane in lanes.values() for tick in lane["ticks"]]),
        xaxis3=dict(domain=domains["out"][0], anchor="y3", range=[-0.5, len(out_dims) - 0.5],
                    title_text=out_axis_title, title_standoff=4),
        yaxis3=dict(domain=domains["out"][1], anchor="x3", title_text="row r", zeroline=False,
                    range=[(-0.5 - OUT_SWING / 2) * OUT_UNITS, (len(out_rows) - 0.5 + OUT_SWING / 2) * OUT_UNITS],
                    tickvals=out_baselines[labelled] * OUT_UNITS,
                    ticktext=[str(row) for row in out_rows[labelled]]),  # each row's baseline is its zero: a grid line
        xaxis4=dict(domain=domains["bytes"][0], anchor="y4", range=[-0.5, 1.5]),
        yaxis4=dict(domain=domains["bytes"][1], anchor="x4",
                    **linear_bytes_axis(1.3 * max(traffic["naive_bytes"][-1], flash_bytes[-1]), max_ticks=2)),
    )  # fmt: skip
    titles = {"out": out_title, "bytes": "HBM bytes so far"}
    for panel, text in titles.items():  # the right column's titles end at its right edge: never cut off there
        (x0, x1), (_, y1) = domains[panel]
        anchor = "right" if panel == "out" else "center"
        fig.add_annotation(text=text, x=x1 if anchor == "right" else (x0 + x1) / 2, y=y1, xref="paper", yref="paper",
                           xanchor=anchor, align=anchor, yanchor="bottom", showarrow=False, font_size=BASE_FONT_PX - 2)
    (x0, x1), (y0, y1) = domains["stats"]
    for name, lane in lanes.items():  # each lane's title over its top edge, in the panel's y units
        fig.add_annotation(text=STAT_TITLES[name], x=(x0 + x1) / 2, y=lane["bottom"] + 1, xref="paper", yref="y2",
                           xanchor="center", yanchor="bottom", showarrow=False, font_size=BASE_FONT_PX - 2)
    # the tile legend on the top margin's first line, at its right end
    fig.add_annotation(text=_tile_legend(causal), xref="paper", yref="paper", x=1, y=1 + (CAPTION_PX - 6) / plot_px,
                       xanchor="right", yanchor="top", showarrow=False, align="right", font_size=BASE_FONT_PX - 2)

    fig.frames = [dict(name=str(t), data=frame_data(t), traces=ANIMATED_TRACES) for t in range(num_steps)]
    style(fig, theme)
    durations = {speed: int(round(frame_ms / speed)) for speed in SPEEDS}
    fig.update_layout(
        height=height,
        margin=dict(t=CAPTION_PX, b=CONTROLS_PX),
        showlegend=False,
        barmode="overlay",  # the tile in SRAM sits on its row's done bar, not beside it
        updatemenus=[_play_buttons(durations, colors, y=-(AXIS_TITLES_PX + 10) / plot_px)],
        sliders=[_step_slider(num_steps, start_step, colors, y=-AXIS_TITLES_PX / plot_px)],
    )
    return fig


def _animate_args(duration_ms: int) -> dict:
    # no redraw: plotly updates the animated scatter and bar traces in place; transition 0: the pace
    # is set by the frame duration alone
    return {
        "frame": {"duration": duration_ms, "redraw": False},
        "transition": {"duration": 0},
        "mode": "immediate",
    }


def _play_buttons(durations: dict[float, int], colors: dict[str, str], y: float) -> dict:
    play = [
        dict(label=f"▶ {speed:g}×", method="animate", args=[None, {**_animate_args(ms), "fromcurrent": True}])
        for speed, ms in durations.items()
    ]
    pause = dict(label="❚❚ pause", method="animate", args=[[None], _animate_args(0)])
    return dict(
        type="buttons",
        direction="left",
        buttons=[*play, pause],
        x=0,
        y=y,
        xanchor="left",
        yanchor="top",
        pad=dict(t=10, r=10),
        showactive=False,  # plotly's active highlight is near-white and would hide light text
        bgcolor=colors["grid"],
        bordercolor=colors["foreground"],
        font=dict(size=BASE_FONT_PX - 2, color=colors["foreground"]),
    )


def _slider_positions(num_steps: int, start_step: int) -> list[int]:
    """The steps the slider stops at: all of them up to MAX_SLIDER_STEPS, else every k-th; always the
    first, the last and the start step (the app's step buttons reach the others)."""
    stride = -(-num_steps // MAX_SLIDER_STEPS)
    return sorted({*range(0, num_steps, stride), start_step, num_steps - 1})


def _step_slider(num_steps: int, start_step: int, colors: dict[str, str], y: float) -> dict:
    # one label per step is unreadable past a few dozen steps: hide the tick labels and let the
    # current-value readout say the step
    positions = _slider_positions(num_steps, start_step)
    tick_color = colors["foreground"] if len(positions) <= 24 else "rgba(0,0,0,0)"
    return dict(
        active=positions.index(start_step),
        steps=[dict(method="animate", label=str(t + 1), args=[[str(t)], _animate_args(0)]) for t in positions],
        x=0.42,
        len=0.58,
        y=y,
        xanchor="left",
        yanchor="top",
        pad=dict(t=10),
        currentvalue=dict(prefix="step ", font=dict(size=BASE_FONT_PX, color=colors["foreground"])),
        font=dict(color=tick_color),
        transition=dict(duration=0),
    )


def tiling_html(fig: go.Figure) -> str:
    """A standalone HTML page of the animation (plotly.js inlined): plays offline, no server needed. The page
    takes the figure's background, so a dark figure fills a dark screen."""
    page = fig.to_html(include_plotlyjs=True, full_html=True, auto_play=False)
    background = fig.layout.paper_bgcolor or fig.layout.template.layout.paper_bgcolor or "white"  # the theme's
    return page.replace("<head>", f"<head><style>body {{ background: {background}; margin: 0; }}</style>", 1)
