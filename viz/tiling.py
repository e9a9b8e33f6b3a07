"""The tile-by-tile animation of the flash forward pass, from the kernel's recorded trace.

One plotly frame per kernel step (Q block i with K/V tile j in SRAM). Each frame updates four
panels on one shared step clock: (a) the N×N score matrix as a grid of tiles (done / in SRAM /
pending / skipped by the causal mask), (b) the running max m, running sum l and rescale factor α of
the current Q block's rows, (c) a sample of the block's output rows as they accumulate, drawn over
what they will be once the block is done, and (d) HBM bytes moved so far by flash versus standard
attention doing the same tiles; a caption above says the step.

Built to play at 20–30 frames per second even where the browser draws without a GPU (viz/animation.py:
frames never redraw). Even then every frame re-reads the whole figure's defaults (each axis costs about a
millisecond) and restyles every marker it touches one by one (a coloured marker costs ~0.2 ms in
Streamlit's plotly.js). So:
- what never changes is drawn once and never listed in a frame: pending and skipped tiles (shapes),
  tile borders, the causal diagonal, the legend (an annotation), the axes (fixed ranges);
- done tiles are one bar per Q block growing along the keys, plus one bar for the tile in SRAM;
- the three running statistics are lanes of one panel (one pair of axes, each lane labelled in its own
  units), α a stepped area rather than a bar per row;
- the output rows are curves over the head dims (one SVG path, not a marker per value), each on its
  own baseline, with the block's final rows in grey behind them;
- the step caption is a text trace (a layout title only updates on a redraw), as are the byte labels
  (bar labels are measured in the page every frame).

The figure is built in three parts: the numbers of every step (TilingData, from the trace and the cost
model), the static layers each panel draws once, and the layout (axes, titles, controls).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from costmodel import Step, k_tiles_per_q_block, n_blocks, step_traffic
from fmt import fmt_bytes, plotly_text
from viz.animation import (check_start_step, check_tiles, controls, frames, order_label, step_bytes, trace_shape,
                           typed, validated)
from viz.marks import linear_bytes_axis
from viz.theme import (BASE_FONT_PX, BLUE, BLUISH_GREEN, PALETTE, SMALLEST_TEXT_PX, algorithm_color, style, surface,
                        translucent)

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
INPUTS_LINE_PX = 30  # the top margin's first line: what the inputs are, left of the tile legend
CAPTION_PX = 130 + INPUTS_LINE_PX  # the top margin: that line, the tile legend's, then two caption lines over a blank one
CONTROLS_PX = 180  # the bottom margin: the x axes' tick labels and titles, then the play buttons and the slider
AXIS_TITLES_PX = 96  # the x axes' tick labels and titles take this much under the plot area; the controls go below
DEFAULT_HEIGHT_PX = 740  # with the app's scene header, the whole figure fits a 1080-pixel-high screen
PANEL_GAP_X = 0.08  # between panels, as shares of the plot area's width
OUT_BOTTOM_PX = 215  # the output rows' panel starts this high in the plot: the bytes panel and titles go under it
BYTES_CLEARANCE_PX = 130  # the output panel's tick labels and axis title, then the bytes panel's title

TILE_STATES = ("done", "current", "pending", "skipped")  # legend order
SWATCH_EM = (BASE_FONT_PX + 8) / SMALLEST_TEXT_PX  # a legend swatch, in the legend text's size (34 px at 24 px)
STATE_NAMES = {
    "skipped": "skipped",  # above the diagonal; a longer name ran into the inputs line (tests/test_canvas.py)
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

# trace order in the figure (later traces draw on top within a trace type: heatmaps, then bars, then
# scatters); frames update exactly ANIMATED_TRACES
(TILES, TILE_BORDERS, BANDS, ROW_MAX, ROW_SUM, ALPHA, OUT_FINAL, OUT_ROWS, HBM_BYTES, HBM_LABELS, CAPTION) = range(11)
ANIMATED_TRACES = [TILES, BANDS, ROW_MAX, ROW_SUM, ALPHA, OUT_FINAL, OUT_ROWS, HBM_BYTES, HBM_LABELS, CAPTION]


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
    first one up, the order animation.validated checks); the last bar is the tile in SRAM. A bar is block_m
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
    # the swatch's size relative to the legend's text (em), so that it scales with it (page.chart scales the text's px
    # with the window: 48 px at 4K, 96 px at 8K), where a size in px stayed 34 px
    swatch = '<span style="color:{};font-size:{:.3g}em">■</span> {}'
    return "   ".join(swatch.format(STATE_COLORS[name], SWATCH_EM, STATE_NAMES[name]) for name in names)


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


def _step_title(t: int, num_steps: int, step: Step, alpha: np.ndarray, order: str) -> str:
    valid = alpha[np.isfinite(alpha)]
    if step.first:
        alpha_text = "α = 0 (first tile: nothing to rescale)"
    else:
        alpha_text = f"α ∈ [{valid.min():.3f}, {valid.max():.3f}]" if valid.size else "α n/a"
    mask_text = " (masked)" if step.masked else ""
    return (f"step {t + 1}/{num_steps} · {order_label(order)} · Q block {step.q_block} · K/V tile {step.k_block}"
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


def _panel_domains(plot_px: int) -> dict[str, tuple[list[float], list[float]]]:
    """(x, y) domains of the panels in the plot area (plot_px high): the tile grid on the left, the running
    statistics in the middle (three lanes on one pair of axes: every axis costs time in every frame), the
    output rows over the HBM bytes on the right, laid out in pixels: the output panel starts OUT_BOTTOM_PX up,
    its tick labels and axis title and then the bytes panel's title take BYTES_CLEARANCE_PX under it."""
    widths = np.array([0.4, 0.3, 0.3]) * (1 - 2 * PANEL_GAP_X)
    lefts = np.concatenate([[0.0], np.cumsum(widths + PANEL_GAP_X)[:-1]])
    grid, stats, right = ([float(left), float(left + width)] for left, width in zip(lefts, widths))
    out_bottom = min(OUT_BOTTOM_PX / plot_px, 0.75)
    return {
        "grid": (grid, [0.0, 1.0]),
        "stats": (stats, [0.0, 1.0]),
        "out": (right, [out_bottom, 1.0]),
        # under the output panel's tick labels and axis title, then its own title
        "bytes": (right, [0.0, out_bottom - BYTES_CLEARANCE_PX / plot_px]),
    }


@dataclass(frozen=True)
class TilingData:
    """The numbers of every step the tiling figure shows, from the trace and the cost model."""
    seq_len: int
    head_dim: int
    block_m: int
    block_n: int
    causal: bool
    order: str
    schedule: list[Step]
    alpha: np.ndarray  # (T, block_m)
    flash_bytes: np.ndarray  # (T,) cumulative, the traced kernel's order
    naive_bytes: np.ndarray  # (T,) cumulative, standard attention at the same tiles
    tile_bars: dict[str, np.ndarray]  # _tile_bars
    lanes: dict[str, dict]  # _stat_lanes
    out_rows: np.ndarray  # the Q block rows the output panel shows
    out_dims: np.ndarray  # and their head dims
    out_curves: np.ndarray  # (T, …) int16, _output_curves
    out_final: np.ndarray  # (T, …) each step's Q block's curves once it is done
    max_abs_err: float  # max |O_flash − O_standard| of the traced run
    inputs: str | None = None  # what the traced inputs are (the trace's own sentence: kernels/trace.py)

    @property
    def num_steps(self) -> int:
        return len(self.schedule)

    @property
    def num_q(self) -> int:
        return n_blocks(self.seq_len, self.block_m)

    def frame(self, t: int) -> list[dict]:
        """Only what changes from step to step, in ANIMATED_TRACES order."""
        moved = [int(self.flash_bytes[t]), int(self.naive_bytes[t])]
        caption = _step_title(t, self.num_steps, self.schedule[t], self.alpha[t], self.order)
        if t == self.num_steps - 1:
            caption += f" · done: max |O_flash − O_standard| = {self.max_abs_err:.2e}"
        return [
            dict(type="bar", **{key: typed(values[t]) for key, values in self.tile_bars.items()}),
            dict(type="scatter", **_band_outlines(self.schedule[t], self.seq_len, self.block_m, self.block_n)),
            dict(type="scatter", y=typed(self.lanes["row_max"]["curves"][t])),
            dict(type="scatter", y=typed(self.lanes["row_sum"]["curves"][t])),
            dict(type="scatter", y=typed(self.lanes["alpha"]["curves"][t])),
            dict(type="scatter", y=typed(self.out_final[t])),
            dict(type="scatter", y=typed(self.out_curves[t])),
            dict(type="bar", y=moved),
            dict(type="scatter", y=moved, text=[fmt_bytes(b) for b in moved]),
            dict(type="scatter", text=[caption + "<br> "]),
        ]


def tiling_data(trace: dict) -> TilingData:
    """A FlashTrace dict (docs/data-contracts.md) checked (animation.validated) and turned into what the
    tiling figure draws."""
    seq_len, head_dim = int(trace["seq_len"]), int(trace["head_dim"])
    block_m, block_n, causal = int(trace["block_m"]), int(trace["block_n"]), bool(trace["causal"])
    check_tiles(seq_len, block_m, block_n)
    arrays = validated(trace)
    schedule = arrays["schedule"]
    out_rows, out_dims = _output_sample(block_m, head_dim)
    out_curves = _output_curves(arrays["out_rows"][:, out_rows][:, :, out_dims])  # (T, rows shown, dims shown)
    block_done = {step.q_block: t for t, step in enumerate(schedule)}  # each Q block's last step
    shape = trace_shape(trace)
    return TilingData(
        seq_len=seq_len, head_dim=head_dim, block_m=block_m, block_n=block_n, causal=causal,
        order=arrays["order"], schedule=schedule, alpha=arrays["alpha"],
        flash_bytes=step_bytes(arrays["order"], shape, block_m, block_n),
        naive_bytes=step_traffic(shape, block_m, block_n)["naive_bytes"],
        tile_bars=_tile_bars(arrays["steps"], n_blocks(seq_len, block_m), block_m, block_n, seq_len),
        lanes=_stat_lanes(arrays), out_rows=out_rows, out_dims=out_dims, out_curves=out_curves,
        out_final=out_curves[[block_done[step.q_block] for step in schedule]],
        max_abs_err=float(trace["max_abs_err"]), inputs=trace.get("inputs"),
    )


def _hidden(trace: go.Scatter | go.Bar) -> go.Scatter | go.Bar:
    return trace.update(hoverinfo="skip", showlegend=False)


def _add_tile_grid(fig: go.Figure, data: TilingData, start: dict[int, dict], colors: dict[str, str]) -> None:
    """(a) The tile grid: pending and skipped tiles never change (shapes under the traces); done tiles and
    the tile in SRAM are bars over them, then the tile borders and the current bands."""
    seq_len, num_q = data.seq_len, data.num_q
    x_edges, y_edges = _tile_edges(seq_len, data.block_n), _tile_edges(seq_len, data.block_m)
    tile_colors = [STATE_COLORS["done"]] * num_q + [STATE_COLORS["current"]]
    fig.add_trace(_hidden(go.Bar(**start[TILES], width=data.block_m, orientation="h",
                                 marker=dict(color=tile_colors, line_width=0))))
    grid_gap = 2 if max(len(x_edges), len(y_edges)) - 1 <= 32 else 1  # tile borders, in pixels
    fig.add_trace(_hidden(go.Scatter(**_grid_lines(x_edges, y_edges), mode="lines",
                                     line=dict(color=colors["background"], width=grid_gap))))
    fig.add_trace(_hidden(go.Scatter(**start[BANDS], mode="lines", line=dict(color=colors["foreground"], width=4))))
    visited = np.minimum(k_tiles_per_q_block(seq_len, data.block_m, data.block_n, data.causal) * data.block_n,
                         seq_len)
    for name, (left, right) in (("pending", (0, visited)), ("skipped", (visited, seq_len))):
        fig.add_shape(type="path", path=_row_runs(left, right, y_edges), fillcolor=STATE_COLORS[name],
                      line_width=0, layer="below")
    if data.causal:
        fig.add_shape(type="line", x0=0, y0=0, x1=seq_len, y1=seq_len,
                      line=dict(color=colors["foreground"], width=2, dash="dot"))


def _add_statistics(fig: go.Figure, data: TilingData, start: dict[int, dict]) -> None:
    """(b) The running statistics of the Q block's rows, one lane each on one pair of axes (x2, y2); the
    values are in the figure as lane heights, their units on each lane's tick labels."""
    row_index = np.arange(data.block_m)
    for index, color in ((ROW_MAX, BLUE), (ROW_SUM, BLUISH_GREEN)):
        fig.add_trace(_hidden(go.Scatter(**start[index], x=row_index, xaxis="x2", yaxis="y2", mode="lines",
                                         line=dict(color=color, width=3))))
    # α as one stepped area, not a bar per row: one SVG element to update instead of block_m
    fig.add_trace(_hidden(go.Scatter(**start[ALPHA], x=row_index, xaxis="x2", yaxis="y2", mode="lines",
                                     line=dict(color=PALETTE["highlight"], shape="hvh", width=3), fill="tozeroy",
                                     fillcolor=translucent(PALETTE["highlight"], 0.35))))


def _add_output(fig: go.Figure, data: TilingData, start: dict[int, dict]) -> None:
    """(c) The output rows as curves over the head dims, the block's final rows in grey behind them."""
    curve_x = typed(np.tile(np.append(data.out_dims, np.nan), len(data.out_rows)).astype(np.float32))
    for index, color, width in ((OUT_FINAL, PALETTE["pending"], 5), (OUT_ROWS, algorithm_color("fa2"), 2)):
        fig.add_trace(_hidden(go.Scatter(**start[index], x=curve_x, xaxis="x3", yaxis="y3", mode="lines",
                                         line=dict(color=color, width=width))))


def _add_bytes_and_caption(fig: go.Figure, data: TilingData, start: dict[int, dict], colors: dict[str, str]) -> None:
    """(d) HBM traffic so far, its labels a text trace (bar labels are measured in the page every frame); then
    the caption: a text trace standing on the tile grid's top left corner, in the top margin; its last line is
    blank, to clear the panel titles (a point outside the axis ranges would not be drawn, and an axis pair of
    its own costs more time every frame than the whole caption)."""
    bytes_x = ["flash" if data.order == "fa2" else "flash (FA1)", "standard"]
    fig.add_trace(go.Bar(**start[HBM_BYTES], x=bytes_x, xaxis="x4", yaxis="y4", showlegend=False,
                         marker_color=[algorithm_color(data.order), algorithm_color("naive")],
                         hovertemplate="%{x}: %{y:,} bytes<extra></extra>"))
    fig.add_trace(_hidden(go.Scatter(**start[HBM_LABELS], x=bytes_x, xaxis="x4", yaxis="y4", mode="text",
                                     textposition="top center", cliponaxis=False,
                                     textfont=dict(size=SMALLEST_TEXT_PX, color=colors["foreground"]))))
    fig.add_trace(_hidden(go.Scatter(**start[CAPTION], x=[0], y=[0], mode="text", textposition="top right",
                                     textfont=dict(size=BASE_FONT_PX + 2, color=colors["foreground"]),
                                     cliponaxis=False)))


def _tiling_axes(data: TilingData, domains: dict[str, tuple[list[float], list[float]]]) -> dict:
    """The four panels' axes, at fixed ranges: frames never rescale an axis, so the eye only follows what
    changes."""
    seq_len, lanes, num_rows = data.seq_len, data.lanes, len(data.out_rows)
    lanes_top = lanes[STAT_LANES[-1]]["bottom"] + 1
    out_baselines = num_rows - 1 - np.arange(num_rows)
    labelled = np.arange(num_rows)[::-2]  # every other row labelled, the last one among them
    top_bytes = 1.5 * max(data.naive_bytes[-1], data.flash_bytes[-1])
    return dict(
        xaxis=dict(domain=domains["grid"][0], anchor="y", range=[0, seq_len],
                   title_text="key index: scores S, tile by tile",
                   showgrid=False, constrain="domain", constraintoward="left"),  # the tiles have borders
        yaxis=dict(domain=domains["grid"][1], anchor="x", range=[seq_len, 0], title_text="query index",
                   scaleanchor="x", showgrid=False, constrain="domain", constraintoward="top"),
        xaxis2=dict(domain=domains["stats"][0], anchor="y2", range=[-0.5, data.block_m - 0.5],
                    title_text="row r in the Q block"),
        yaxis2=dict(domain=domains["stats"][1], anchor="x2", range=[-0.04, lanes_top + 0.04], zeroline=False,
                    tickvals=np.concatenate([lane["positions"] for lane in lanes.values()]),
                    ticktext=[f"{tick:g}" for lane in lanes.values() for tick in lane["ticks"]]),
        xaxis3=dict(domain=domains["out"][0], anchor="y3", range=[-0.5, len(data.out_dims) - 0.5],
                    title_text=_output_title(data.out_rows, data.block_m, data.out_dims, data.head_dim)[1],
                    title_standoff=4),
        yaxis3=dict(domain=domains["out"][1], anchor="x3", title_text="row r", zeroline=False,
                    range=[(-0.5 - OUT_SWING / 2) * OUT_UNITS, (num_rows - 0.5 + OUT_SWING / 2) * OUT_UNITS],
                    tickvals=out_baselines[labelled] * OUT_UNITS,
                    ticktext=[str(row) for row in data.out_rows[labelled]]),  # each row's baseline is its zero
        xaxis4=dict(domain=domains["bytes"][0], anchor="y4", range=[-0.5, 1.5]),
        yaxis4=dict(domain=domains["bytes"][1], anchor="x4", **linear_bytes_axis(top_bytes, max_ticks=2)),
    )  # fmt: skip


def _add_titles(fig: go.Figure, data: TilingData, domains: dict[str, tuple[list[float], list[float]]],
                plot_px: int, colors: dict[str, str]) -> None:
    """The right column's panel titles, each statistic lane's title, the tile legend, and what the inputs are."""
    out_title = _output_title(data.out_rows, data.block_m, data.out_dims, data.head_dim)[0]
    for panel, text in (("out", out_title), ("bytes", "HBM bytes so far (model)")):
        (x0, x1), (_, y1) = domains[panel]  # the right column's titles end at its right edge: never cut off there
        anchor = "right" if panel == "out" else "center"
        fig.add_annotation(text=text, x=x1 if anchor == "right" else (x0 + x1) / 2, y=y1, xref="paper", yref="paper",
                           xanchor=anchor, align=anchor, yanchor="bottom", showarrow=False,
                           font_size=SMALLEST_TEXT_PX)
    (x0, x1), _ = domains["stats"]
    for name, lane in data.lanes.items():  # each lane's title over its top edge, in the panel's y units
        fig.add_annotation(text=STAT_TITLES[name], x=(x0 + x1) / 2, y=lane["bottom"] + 1, xref="paper", yref="y2",
                           xanchor="center", yanchor="bottom", showarrow=False, font_size=SMALLEST_TEXT_PX)
    # the tile legend on the top margin's first line, at its right end
    fig.add_annotation(text=_tile_legend(data.causal), xref="paper", yref="paper", x=1,
                       y=1 + (CAPTION_PX - 6) / plot_px, xanchor="right", yanchor="top", showarrow=False,
                       align="right", font_size=SMALLEST_TEXT_PX)
    if data.inputs:  # the margin's top line, left of the legend: planted inputs, said as planted
        fig.add_annotation(text=plotly_text(data.inputs), xref="paper", yref="paper", x=0,
                           y=1 + (CAPTION_PX - 2) / plot_px, xanchor="left", yanchor="top", showarrow=False,
                           align="left", font=dict(size=SMALLEST_TEXT_PX, color=colors["muted"]))


def tiling_figure(
    trace: dict, theme: str = "light", frame_ms: int = 250, start_step: int = 0, height: int = DEFAULT_HEIGHT_PX
) -> go.Figure:
    """The tile-by-tile animation of one (batch, head) of the flash forward pass.

    trace: a FlashTrace dict (docs/data-contracts.md); its steps must follow its order's schedule
    (its spec's trace facet, animation.loop: costmodel.tile_schedule for "fa2", the default; costmodel.fa1_schedule
    for "fa1"). frame_ms: duration of one step at 1× speed, in milliseconds. start_step: the step shown
    before play. Returns a figure with exactly one frame per step, named "0".."T-1", fixed axis ranges,
    play/pause buttons at 0.5×–8× speed and a slider over the steps.
    """
    data = tiling_data(trace)
    check_start_step(start_step, data.num_steps)
    start = dict(zip(ANIMATED_TRACES, data.frame(start_step)))
    colors = surface(theme)
    plot_px = height - CAPTION_PX - CONTROLS_PX
    domains = _panel_domains(plot_px)
    fig = go.Figure()
    _add_tile_grid(fig, data, start, colors)
    _add_statistics(fig, data, start)
    _add_output(fig, data, start)
    _add_bytes_and_caption(fig, data, start, colors)
    fig.update_layout(**_tiling_axes(data, domains))
    _add_titles(fig, data, domains, plot_px, colors)
    fig.frames = frames(data.frame, data.num_steps, ANIMATED_TRACES)
    style(fig, theme)
    fig.update_layout(
        height=height,
        margin=dict(t=CAPTION_PX, b=CONTROLS_PX),
        showlegend=False,
        barmode="overlay",  # the tile in SRAM sits on its row's done bar, not beside it
        **controls(frame_ms, data.num_steps, start_step, colors, buttons_y=-(AXIS_TITLES_PX + 10) / plot_px,
                   slider_y=-AXIS_TITLES_PX / plot_px),
    )
    return fig
