"""What every animated view of a kernel trace shares: the loop orders it can show, the trace's check against
its order's schedule, frames as typed arrays, the play buttons and step slider, and the standalone page.

The views (viz/tiling.py, viz/hbm.py, viz/source_view.py; viz/rereads.py checks its trace here too) play one
plotly frame per kernel step. Built to play at 20–30 frames per second even where the browser draws without a
GPU: frames never redraw (`redraw: False` updates scatter and bar traces in place; a redraw re-renders the
whole figure, ~300 ms software-rendered), carry their arrays already base64-encoded (`typed`), and the slider
stops at MAX_SLIDER_STEPS steps at most (plotly re-reads every slider step in every frame).
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go

from costmodel import Shape, n_blocks
from kernels import specs
from viz.plotly_private import share_frames
from viz.theme import BASE_FONT_PX, SMALLEST_TEXT_PX, order_label  # noqa: F401 (order_label: the views' import)

SPEEDS = (0.5, 1.0, 2.0, 4.0, 8.0)  # play-button speed factors over the base frame duration
MAX_SLIDER_STEPS = 64  # plotly re-reads every slider step in every frame, ~15 µs each
MAX_TILES_PER_SIDE = 64  # beyond this the grid stops being readable and the figure grows too large
REQUIRED_KEYS = (
    "seq_len", "head_dim", "block_m", "block_n", "causal", "dtype",
    "steps", "row_max", "row_sum", "alpha", "out_rows", "max_abs_err",
)  # fmt: skip
STATE_KEYS = ("row_max", "row_sum", "alpha", "out_rows")  # per step and Q block row


def loop_orders() -> dict[str, specs.Trace]:
    """The kernels a trace can come from (the specs with a trace facet, kernels/specs.py), each with its loop order
    by the cost model: the steps in the order the kernel runs them (`schedule`), the cumulative bytes after each step
    (`step_traffic`: keys "<key>_read", "_written", "_bytes"; and "naive_…" for standard attention at the same tiles,
    where the model has them) and its HBM traffic by phase with no cache (`traffic`)."""
    return {spec.key: spec.trace for spec in specs.with_facet("trace")}


def loop(order: str) -> specs.Trace:
    orders = loop_orders()
    if order not in orders:
        raise ValueError(f"trace order must be one of {tuple(orders)}, got {order!r}")
    return orders[order]


def trace_shape(trace: dict) -> Shape:
    """The one (batch, head) a trace ran, as the cost model's shape."""
    return Shape(int(trace["seq_len"]), 1, 1, int(trace["head_dim"]), str(trace["dtype"]), bool(trace["causal"]))


def step_bytes(order: str, shape: Shape, block_m: int, block_n: int) -> np.ndarray:
    """Cumulative HBM bytes (read + written) after each step of a loop order's kernel, by the cost model."""
    return loop(order).step_traffic(shape, block_m, block_n)[f"{order}_bytes"]


def check_tiles(seq_len: int, block_m: int, block_n: int) -> None:
    """Refuse a grid too large to animate."""
    num_q, num_k = n_blocks(seq_len, block_m), n_blocks(seq_len, block_n)
    if max(num_q, num_k) > MAX_TILES_PER_SIDE:
        raise ValueError(
            f"{num_q}×{num_k} tiles is too many to animate (at most {MAX_TILES_PER_SIDE} per side): "
            "use a smaller seq_len or larger tiles"
        )


def check_start_step(start_step: int, num_steps: int) -> None:
    if not 0 <= start_step < num_steps:
        raise ValueError(f"start_step must be in [0, {num_steps}), got {start_step}")


def validated(trace: dict) -> dict:
    """The trace's steps (int64 (T, 2)), schedule (costmodel Steps), order, and its per-step state arrays as
    NumPy float32 (STATE_KEYS), after checking them against the documented tile order of its loop order."""
    missing = [key for key in REQUIRED_KEYS if key not in trace]
    if missing:
        raise ValueError(f"flash trace is missing {missing} (see docs/data-contracts.md)")
    steps = np.asarray(trace["steps"], dtype=np.int64).reshape(-1, 2)
    order = specs.canonical(trace.get("order", "fa2"))
    make_schedule = loop(order).schedule
    schedule = make_schedule(trace["seq_len"], trace["block_m"], trace["block_n"], trace["causal"])
    expected = np.array([(step.q_block, step.k_block) for step in schedule], dtype=np.int64)
    if steps.shape != expected.shape or not np.array_equal(steps, expected):
        raise ValueError(
            f"trace steps ({len(steps)}) differ from the documented tile order ({len(expected)} steps, "
            f"costmodel.{make_schedule.__name__}): the animation's byte counts would not match the kernel"
        )
    arrays = {key: np.asarray(trace[key], dtype=np.float32) for key in STATE_KEYS}
    for key, values in arrays.items():
        if values.shape[:2] != (len(steps), trace["block_m"]):
            expected_shape = f"({len(steps)}, {trace['block_m']}, …)"
            raise ValueError(f"trace[{key!r}] has shape {values.shape}, expected {expected_shape}")
    return {"steps": steps, "schedule": schedule, "order": order, **arrays}


def typed(values: np.ndarray) -> dict[str, str]:
    """A NumPy array as plotly's base64 typed-array spec: the JSON plotly.py writes for the array anyway,
    but handed over already encoded, plotly.py skips its per-array checks, half the build of 1024 frames."""
    values = np.ascontiguousarray(values)
    return {"dtype": values.dtype.str.lstrip("<>|="), "bdata": base64.b64encode(values.tobytes()).decode("ascii")}


def frames(frame_data: Callable[[int], list[dict]], num_steps: int, traces: list[int]) -> list[dict]:
    """One frame per step, named "0".."T-1", each updating exactly `traces` with frame_data(t)."""
    return [dict(name=str(t), data=frame_data(t), traces=traces) for t in range(num_steps)]


def frame_args(duration_ms: int) -> dict:
    """plotly.animate's options: no redraw (the animated scatter and bar traces update in place), no
    transition (the frame duration alone sets the pace)."""
    return {
        "frame": {"duration": duration_ms, "redraw": False},
        "transition": {"duration": 0},
        "mode": "immediate",
    }


def play_buttons(frame_ms: int, colors: dict[str, str], y: float) -> dict:
    """Play at each of SPEEDS (frame_ms a step at 1×) and pause, in a row at the plot's left, `y` below it
    in plot heights."""
    play = [
        dict(label=f"▶ {speed:g}×", method="animate",
             args=[None, {**frame_args(int(round(frame_ms / speed))), "fromcurrent": True}])
        for speed in SPEEDS
    ]
    pause = dict(label="❚❚ pause", method="animate", args=[[None], frame_args(0)])
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
        font=dict(size=SMALLEST_TEXT_PX, color=colors["foreground"]),
    )


def slider_positions(num_steps: int, start_step: int) -> list[int]:
    """The steps the slider stops at: all of them up to MAX_SLIDER_STEPS, else every k-th; always the
    first, the last and the start step (the app's step buttons reach the others)."""
    stride = -(-num_steps // MAX_SLIDER_STEPS)
    return sorted({*range(0, num_steps, stride), start_step, num_steps - 1})


def step_slider(num_steps: int, start_step: int, colors: dict[str, str], y: float) -> dict:
    """A slider over the steps (slider_positions), right of the play buttons, starting at start_step."""
    # one label per step is unreadable past a few dozen steps: hide the tick labels and let the
    # current-value readout say the step
    positions = slider_positions(num_steps, start_step)
    tick_color = colors["foreground"] if len(positions) <= 24 else "rgba(0,0,0,0)"
    return dict(
        active=positions.index(start_step),
        steps=[dict(method="animate", label=str(t + 1), args=[[str(t)], frame_args(0)]) for t in positions],
        x=0.42,
        len=0.56,  # its last tick label stays inside the figure at 720p
        y=y,
        xanchor="left",
        yanchor="top",
        pad=dict(t=10),
        currentvalue=dict(prefix="step ", font=dict(size=BASE_FONT_PX, color=colors["foreground"])),
        font=dict(color=tick_color),
        transition=dict(duration=0),
    )


def controls(frame_ms: int, num_steps: int, start_step: int, colors: dict[str, str], buttons_y: float,
             slider_y: float) -> dict:
    """The layout's play buttons and step slider (update_layout(**controls(...)))."""
    return dict(updatemenus=[play_buttons(frame_ms, colors, buttons_y)],
                sliders=[step_slider(num_steps, start_step, colors, slider_y)])


def _merge(into: dict, update: dict) -> None:
    """What plotly does with a frame's trace: nested attributes merge (a frame that sets marker.size keeps the
    marker's colour), everything else (arrays, text) is replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def at_step(fig: go.Figure, step: int) -> go.Figure:
    """An animation as if built at `step`: its animated traces as that step's frame draws them, its step slider
    there; a new figure that shares `fig`'s frames (the cache keeps one figure per trace and view, not one per
    step a viewer stops at). `fig` is not changed."""
    if not fig.frames:
        return fig
    check_start_step(step, len(fig.frames))
    data = [trace.to_plotly_json() for trace in fig.data]
    frame = fig.frames[step]
    for index, update in zip(frame.traces, frame.data):
        _merge(data[index], update.to_plotly_json())
    layout = fig.layout.to_plotly_json()
    for slider in layout.get("sliders", ()):
        positions = slider_positions(len(fig.frames), step)
        slider["steps"] = [dict(method="animate", label=str(t + 1), args=[[str(t)], frame_args(0)])
                           for t in positions]
        slider["active"] = positions.index(step)
    return share_frames(fig, go.Figure(data=data, layout=layout, skip_invalid=False))  # the same frames, not a copy


def standalone_html(fig: go.Figure) -> str:
    """A standalone HTML page of an animation (plotly.js inlined): plays offline, no server needed. The page
    takes the figure's background, so a dark figure fills a dark screen."""
    page = fig.to_html(include_plotlyjs=True, full_html=True, auto_play=False)
    background = fig.layout.paper_bgcolor or fig.layout.template.layout.paper_bgcolor or "white"  # the theme's
    return page.replace("<head>", f"<head><style>body {{ background: {background}; margin: 0; }}</style>", 1)
