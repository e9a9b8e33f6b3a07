"""The tile-by-tile animation of the flash forward pass, from the kernel's recorded trace.

One plotly frame per kernel step (Q block i with K/V tile j in SRAM). Each frame updates five
panels on one shared step clock: (a) the N×N score matrix as a grid of tiles (done / in SRAM /
pending / skipped by the causal mask), (b) the running max m, running sum l and rescale factor α of
the current Q block's rows, (c) the block's output rows as they accumulate, and (d) HBM bytes moved
so far by flash versus standard attention doing the same tiles.
"""

from __future__ import annotations

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.marks import linear_bytes_axis
from viz.schedule import Step, bytes_per_element, n_blocks, step_traffic, tile_schedule
from viz.theme import BASE_FONT_PX, PALETTE, fmt_bytes, style, surface

MAX_TILES_PER_SIDE = 64  # beyond this the grid stops being readable and the figure grows too large
SPEEDS = (0.5, 1.0, 2.0, 4.0)  # play-button speed factors over the base frame duration
TILE_STATES = ("skipped", "pending", "done", "current")  # heatmap codes 0..3
SKIPPED, PENDING, DONE, CURRENT = range(len(TILE_STATES))
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
REQUIRED_KEYS = (
    "seq_len", "head_dim", "block_m", "block_n", "causal", "dtype",
    "steps", "row_max", "row_sum", "alpha", "out_rows", "max_abs_err",
)  # fmt: skip

OUT_LEVELS = 255  # the output heatmap travels as 8-bit colour codes: a colour map shows no more shades

# trace order in the figure; frames update exactly these
TILE_GRID, BANDS, ROW_MAX, ROW_SUM, ALPHA, OUT_ROWS, HBM_BYTES = range(7)
ANIMATED_TRACES = list(range(7))


def _discrete_colorscale(colors: list[str]) -> list[list[float | str]]:
    """A stepped colorscale giving integer code c in 0..len-1 exactly colors[c] (with zmin=0, zmax=len-1)."""
    edges = np.linspace(0.0, 1.0, len(colors) + 1)
    scale: list[list[float | str]] = []
    for color, lo, hi in zip(colors, edges[:-1], edges[1:]):
        scale += [[float(lo), color], [float(hi), color]]
    return scale


def _output_codes(out_rows: np.ndarray, limit: float) -> np.ndarray:
    """Output values in [-limit, limit] as uint8 colour codes 1..OUT_LEVELS; 0 marks rows past seq_len (NaN).

    A quarter of the float32 size: at N = 512 with 16-token tiles this keeps the figure near 4 MB.
    """
    finite = np.isfinite(out_rows)
    unit = np.clip(np.where(finite, out_rows, 0.0) / limit, -1.0, 1.0)  # in [-1, 1]
    codes = 1 + np.round((unit + 1) / 2 * (OUT_LEVELS - 1))
    return np.where(finite, codes, 0).astype(np.uint8)


def _output_colorscale(background: str) -> list[list[float | str]]:
    """Colour-blind-safe red–blue for codes 1..OUT_LEVELS; code 0 (no such row) takes the background."""
    first = 1 / OUT_LEVELS
    stops = plotly.colors.diverging.RdBu
    scale: list[list[float | str]] = [[0.0, background], [first / 2, background]]
    scale += [[first + (1 - first) * i / (len(stops) - 1), color] for i, color in enumerate(stops)]
    return scale


def _finite_range(values: np.ndarray, floor: float | None = None, pad: float = 0.08) -> list[float]:
    """[lo, hi] of the finite values padded by `pad` of the span; fixed for the whole animation."""
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if floor is not None:
        lo = min(lo, floor)
    span = hi - lo or 1.0
    return [lo - pad * span, hi + pad * span]


def _tile_states(steps: np.ndarray, num_q: int, num_k: int) -> np.ndarray:
    """Tile state codes for every step, uint8 array (T, num_q, num_k)."""
    order = np.full((num_q, num_k), -1)  # step at which each tile is visited; -1: never (masked)
    order[steps[:, 0], steps[:, 1]] = np.arange(len(steps))
    clock = np.arange(len(steps))[:, None, None]
    states = np.where(order < clock, DONE, np.where(order == clock, CURRENT, PENDING))
    return np.where(order < 0, SKIPPED, states).astype(np.uint8)


def _validated(trace: dict) -> dict:
    """The trace's arrays as NumPy float32, after checking them against the documented tile order."""
    missing = [key for key in REQUIRED_KEYS if key not in trace]
    if missing:
        raise ValueError(f"flash trace is missing {missing} (see docs/data-contracts.md)")
    steps = np.asarray(trace["steps"], dtype=np.int64).reshape(-1, 2)
    schedule = tile_schedule(trace["seq_len"], trace["block_m"], trace["block_n"], trace["causal"])
    expected = np.array([(step.q_block, step.k_block) for step in schedule], dtype=np.int64)
    if steps.shape != expected.shape or not np.array_equal(steps, expected):
        raise ValueError(
            f"trace steps ({len(steps)}) differ from the documented tile order ({len(expected)} steps, "
            "viz.schedule.tile_schedule): the animation's byte counts would not match the kernel"
        )
    arrays = {key: np.asarray(trace[key], dtype=np.float32) for key in ("row_max", "row_sum", "alpha", "out_rows")}
    for key, values in arrays.items():
        if values.shape[:2] != (len(steps), trace["block_m"]):
            expected_shape = f"({len(steps)}, {trace['block_m']}, …)"
            raise ValueError(f"trace[{key!r}] has shape {values.shape}, expected {expected_shape}")
    return {"steps": steps, "schedule": schedule, **arrays}


def _step_title(t: int, num_steps: int, step: Step, alpha: np.ndarray) -> str:
    valid = alpha[np.isfinite(alpha)]
    if step.first:
        alpha_text = "α = 0 (first tile: nothing to rescale)"
    else:
        alpha_text = f"α ∈ [{valid.min():.3f}, {valid.max():.3f}]" if valid.size else "α n/a"
    mask_text = " (masked tile)" if step.masked else ""
    return f"step {t + 1}/{num_steps} · Q block {step.q_block} · K/V tile {step.k_block}{mask_text} · {alpha_text}"


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


def tiling_figure(
    trace: dict, theme: str = "light", frame_ms: int = 250, start_step: int = 0, height: int = 860
) -> go.Figure:
    """The tile-by-tile animation of one (batch, head) of the flash forward pass.

    trace: a FlashTrace dict (docs/data-contracts.md); its steps must follow viz.schedule.tile_schedule.
    frame_ms: duration of one step at 1× speed, in milliseconds. start_step: the step shown before play.
    Returns a figure with exactly one frame per step, named "0".."T-1", fixed axis ranges, play/pause
    buttons at 0.5×–4× speed and a slider with one position per step.
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
    traffic = step_traffic(seq_len, head_dim, block_m, block_n, causal, bytes_per_element(trace["dtype"]))
    states = _tile_states(steps, num_q, num_k)
    out_values = arrays["out_rows"]
    out_limit = float(np.nanmax(np.abs(out_values))) if np.isfinite(out_values).any() else 1.0
    out_codes = _output_codes(out_values, out_limit or 1.0)
    colors = surface(theme)

    def frame_data(t: int) -> list[dict]:
        """Only what changes from step to step, in ANIMATED_TRACES order."""
        moved = [int(traffic["flash_bytes"][t]), int(traffic["standard_bytes"][t])]
        return [
            dict(type="heatmap", z=states[t]),
            dict(type="scatter", **_band_outlines(schedule[t], seq_len, block_m, block_n)),
            dict(type="scatter", y=arrays["row_max"][t]),
            dict(type="scatter", y=arrays["row_sum"][t]),
            dict(type="bar", y=arrays["alpha"][t]),
            dict(type="heatmap", z=out_codes[t]),
            dict(type="bar", y=moved, text=[fmt_bytes(b) for b in moved]),
        ]

    def frame_title(t: int) -> str:
        title = _step_title(t, num_steps, schedule[t], arrays["alpha"][t])
        if t == num_steps - 1:
            title += f"<br>done: max |O_flash − O_standard| = {float(trace['max_abs_err']):.2e}"
        return title

    fig = make_subplots(
        rows=3,
        cols=3,
        specs=[[{"rowspan": 3}, {}, {"rowspan": 2}], [None, {}, None], [None, {}, {}]],
        column_widths=[0.4, 0.3, 0.3],
        horizontal_spacing=0.08,
        vertical_spacing=0.1,
        subplot_titles=(
            "scores S, tile by tile",
            "running max m (nats)",
            "output rows O = acc / l (row × head dim)",
            "running sum l",
            "rescale α = exp(m_old − m_new)",
            "HBM bytes so far",
        ),
    )
    start = frame_data(start_step)
    row_index = np.arange(block_m)
    grid_gap = 2 if max(num_q, num_k) <= 32 else 1  # tile borders, in pixels
    fig.add_trace(
        go.Heatmap(
            **start[TILE_GRID],
            x=np.minimum(np.arange(num_k + 1) * block_n, seq_len),  # tile edges in tokens: partial tiles look partial
            y=np.minimum(np.arange(num_q + 1) * block_m, seq_len),
            zmin=0,
            zmax=len(TILE_STATES) - 1,
            colorscale=_discrete_colorscale([STATE_COLORS[name] for name in TILE_STATES]),
            showscale=False,
            xgap=grid_gap,
            ygap=grid_gap,
            hovertemplate="query %{y:.0f} · key %{x:.0f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(**start[BANDS], mode="lines", line=dict(color=colors["foreground"], width=4),
                   hoverinfo="skip", showlegend=False),
        row=1,
        col=1,
    )  # fmt: skip
    for index, row, color in ((ROW_MAX, 1, PALETTE["flash"]), (ROW_SUM, 2, PALETTE["sdpa_flash"])):
        fig.add_trace(
            go.Scatter(**start[index], x=row_index, mode="lines+markers", line=dict(color=color),
                       marker=dict(size=8), showlegend=False, hovertemplate="row %{x}: %{y:.4g}<extra></extra>"),
            row=row,
            col=2,
        )  # fmt: skip
    fig.add_trace(
        go.Bar(**start[ALPHA], x=row_index, marker_color=PALETTE["highlight"], showlegend=False,
               hovertemplate="row %{x}: α = %{y:.4f}<extra></extra>"),
        row=3,
        col=2,
    )  # fmt: skip
    out_bottom, out_top = fig.get_subplot(1, 3).yaxis.domain
    fig.add_trace(
        go.Heatmap(
            **start[OUT_ROWS],
            x=np.arange(head_dim),
            y=row_index,
            zmin=0,
            zmax=OUT_LEVELS,
            colorscale=_output_colorscale(colors["background"]),
            colorbar=dict(
                title="O",
                thickness=14,
                len=out_top - out_bottom,
                y=(out_top + out_bottom) / 2,
                x=1.01,
                tickvals=[1, (OUT_LEVELS + 1) / 2, OUT_LEVELS],
                ticktext=[f"{-out_limit:.2f}", "0", f"{out_limit:.2f}"],
            ),
            hovertemplate="row %{y}, dim %{x}<extra></extra>",
        ),
        row=1,
        col=3,
    )
    fig.add_trace(
        go.Bar(**start[HBM_BYTES], x=["flash", "standard"], marker_color=[PALETTE["flash"], PALETTE["standard"]],
               textposition="outside", cliponaxis=False, showlegend=False,
               hovertemplate="%{x}: %{y:,} bytes<extra></extra>"),
        row=3,
        col=3,
    )  # fmt: skip
    # legend swatches for the tile states (static, never animated)
    for name in TILE_STATES:
        if name == "skipped" and not causal:
            continue
        fig.add_trace(
            go.Scatter(x=[None], y=[None], mode="markers", name=STATE_NAMES[name],
                       marker=dict(symbol="square", size=18, color=STATE_COLORS[name])),
            row=1,
            col=1,
        )  # fmt: skip
    if causal:
        fig.add_shape(
            type="line", x0=0, y0=0, x1=seq_len, y1=seq_len, row=1, col=1,
            line=dict(color=colors["foreground"], width=2, dash="dot"),
        )  # fmt: skip

    # Fixed ranges: frames never rescale an axis, so the eye only follows what changes.
    fig.update_xaxes(range=[0, seq_len], title_text="key index", row=1, col=1)
    fig.update_yaxes(range=[seq_len, 0], title_text="query index", scaleanchor="x", row=1, col=1)
    fig.update_yaxes(range=_finite_range(arrays["row_max"]), row=1, col=2)
    fig.update_yaxes(range=_finite_range(arrays["row_sum"], floor=0.0), row=2, col=2)
    fig.update_yaxes(range=[0, 1.05], row=3, col=2)
    for row in (1, 2, 3):
        fig.update_xaxes(range=[-0.5, block_m - 0.5], row=row, col=2)
    fig.update_xaxes(title_text="row r in the Q block", row=3, col=2)
    fig.update_xaxes(range=[-0.5, head_dim - 0.5], row=1, col=3)
    fig.update_yaxes(range=[block_m - 0.5, -0.5], title_text="row r", row=1, col=3)
    fig.update_xaxes(range=[-0.5, 1.5], row=3, col=3)
    fig.update_yaxes(**linear_bytes_axis(1.3 * traffic["standard_total"], max_ticks=4), row=3, col=3)

    fig.frames = [
        dict(name=str(t), data=frame_data(t), traces=ANIMATED_TRACES, layout=dict(title=dict(text=frame_title(t))))
        for t in range(num_steps)
    ]
    style(fig, theme, title=frame_title(start_step))
    fig.update_annotations(font_size=BASE_FONT_PX - 2)  # the subplot titles
    durations = {speed: int(round(frame_ms / speed)) for speed in SPEEDS}
    fig.update_layout(
        height=height,
        margin=dict(t=130, b=230),
        legend=dict(orientation="h", x=0, y=-0.15, xanchor="left", yanchor="top"),
        updatemenus=[_play_buttons(durations, colors)],
        sliders=[_step_slider(num_steps, start_step, colors)],
    )
    return fig


def _animate_args(duration_ms: int, redraw: bool = True) -> dict:
    # transition 0: pace is set by the frame duration alone; heatmaps only update with redraw
    return {"frame": {"duration": duration_ms, "redraw": redraw}, "transition": {"duration": 0}, "mode": "immediate"}


def _play_buttons(durations: dict[float, int], colors: dict[str, str]) -> dict:
    play = [
        dict(label=f"▶ {speed:g}×", method="animate", args=[None, {**_animate_args(ms), "fromcurrent": True}])
        for speed, ms in durations.items()
    ]
    pause = dict(label="❚❚ pause", method="animate", args=[[None], _animate_args(0, redraw=False)])
    return dict(
        type="buttons",
        direction="left",
        buttons=[*play, pause],
        x=0,
        y=-0.28,
        xanchor="left",
        yanchor="top",
        pad=dict(t=10, r=10),
        showactive=False,  # plotly's active highlight is near-white and would hide light text
        bgcolor=colors["grid"],
        bordercolor=colors["foreground"],
        font=dict(size=BASE_FONT_PX - 2, color=colors["foreground"]),
    )


def _step_slider(num_steps: int, start_step: int, colors: dict[str, str]) -> dict:
    # one label per step is unreadable past a few dozen steps: hide the tick labels and let the
    # current-value readout say the step
    tick_color = colors["foreground"] if num_steps <= 24 else "rgba(0,0,0,0)"
    return dict(
        active=start_step,
        steps=[
            dict(method="animate", label=str(t + 1), args=[[str(t)], _animate_args(0)]) for t in range(num_steps)
        ],
        x=0.42,
        len=0.58,
        y=-0.24,
        xanchor="left",
        yanchor="top",
        pad=dict(t=10),
        currentvalue=dict(prefix="step ", font=dict(size=BASE_FONT_PX, color=colors["foreground"])),
        font=dict(color=tick_color),
        transition=dict(duration=0),
    )


def tiling_html(fig: go.Figure) -> str:
    """A standalone HTML page of the animation (plotly.js inlined): plays offline, no server needed."""
    return fig.to_html(include_plotlyjs=True, full_html=True, auto_play=False)
