"""Which SM ran which program when: the flash kernel's grid laid out over time, from %globaltimer stamps.

Coloured by Q block, causal attention shows its imbalance: late Q blocks visit more K/V tiles, so
their programs run longer and the last wave leaves SMs idle.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from viz.marks import note
from viz.theme import style

COLOR_BY = {"q_block": "Q block", "wave": "wave"}
MAX_PROGRAMS_DRAWN = 20000  # bars a browser still draws quickly; the statistics count every program
COLOR_BINS = 32  # one filled trace per colour: a few SVG paths instead of one element per program
BAR = 0.8  # a bar's thickness, in SM rows


def _program_times(timeline: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sm_id, t_start_ns, t_end_ns) as int64 arrays of shape (P,)."""
    return tuple(np.asarray(timeline[key], dtype=np.int64) for key in ("sm_id", "t_start_ns", "t_end_ns"))


def _shown_programs(sm_id: np.ndarray, max_programs: int) -> np.ndarray:
    """Indices of the programs to draw: every program of the lowest-numbered SMs that fit in
    max_programs, so each drawn SM row is complete rather than thinned at random."""
    if sm_id.size <= max_programs:
        return np.arange(sm_id.size)
    per_sm = np.bincount(sm_id)
    shown_sms = max(1, int(np.searchsorted(np.cumsum(per_sm), max_programs, side="right")))
    return np.flatnonzero(sm_id < shown_sms)[:max_programs]


def _span(values: np.ndarray) -> str:
    low, high = int(values.min()), int(values.max())
    return f"{low}" if low == high else f"{low}–{high}"


def _program_traces(sm: np.ndarray, base_us: np.ndarray, length_us: np.ndarray, colors: np.ndarray,
                    color_name: str) -> list[go.Scatter]:
    """The programs as filled rectangles, one Scatter trace per colour (at most COLOR_BINS, from the Cividis scale:
    perceptually uniform and colour-blind safe), and an empty trace that carries the colour bar.

    One Bar trace draws one SVG element per program: about 1 s more before the first chart in a browser at 2,048
    programs (perf/local/first_view.py, 2026-12-04); a filled trace is one path for all its rectangles. Hovering a
    rectangle names its colour's programs (hovering each program's numbers would need an element per program again)."""
    low, high = int(colors.min()), int(colors.max())
    span = max(high - low, 1)
    bins = np.minimum((colors - low) * COLOR_BINS // (span + 1), COLOR_BINS - 1)
    traces = []
    for b in np.unique(bins):
        pick = np.flatnonzero(bins == b)
        value = float(colors[pick].mean())
        x0, x1 = base_us[pick], base_us[pick] + length_us[pick]
        y0, y1 = sm[pick] - BAR / 2, sm[pick] + BAR / 2
        gap = np.full(pick.size, np.nan)
        xs = np.stack([x0, x1, x1, x0, x0, gap], axis=1).ravel()
        ys = np.stack([y0, y0, y1, y1, y0, gap], axis=1).ravel()
        traces.append(go.Scatter(
            x=xs.astype(np.float32), y=ys.astype(np.float32), mode="lines", fill="toself", line=dict(width=0),
            fillcolor=sample_colorscale("Cividis", [(value - low) / span])[0], hoveron="fills",
            name=f"{color_name} {_span(colors[pick])}: {pick.size:,} program{'s' * (pick.size > 1)}", showlegend=False))
    traces.append(go.Scatter(  # the colour bar: beside the ticks, never over the top one
        x=[None], y=[None], mode="markers", hoverinfo="skip", showlegend=False,
        marker=dict(color=[low, high], colorscale="Cividis", cmin=low, cmax=high, showscale=True,
                    colorbar=dict(title=dict(text=color_name, side="right")))))
    return traces


def sm_timeline_figure(
    timeline: dict,
    stats: dict,
    theme: str = "light",
    height: int = 640,
) -> go.Figure:
    """Programs on SMs over time: y = SM id, x = time (µs), one bar per program (filled traces, one per colour).

    timeline: the SM-timeline dict of docs/data-contracts.md. Bars are coloured by Q block when causal (to
    show the imbalance), else by wave (rank of the program's start / (SMs × programs resident per SM)).
    stats: the timeline's statistics as the story counts them (story.timeline_stats: "programs", "waves",
    "makespan_us", "utilization"), said in the title; they count every program, even when only
    MAX_PROGRAMS_DRAWN are drawn.
    """
    color_by = "q_block" if timeline.get("causal") else "wave"
    sm_id, start, end = _program_times(timeline)
    sm_count = int(timeline["sm_count"])
    fig = go.Figure()
    title = "Programs on SMs over time"
    if sm_id.size:
        origin = start.min()
        waves = np.empty(sm_id.size, dtype=np.int64)
        # a wave is as many programs as the SMs hold at once (story's count: SMs × programs resident per SM)
        waves[np.argsort(start, kind="stable")] = np.arange(sm_id.size) // (sm_count * max(stats["max_per_sm"], 1))
        colors = waves if color_by == "wave" else np.asarray(timeline["q_block"], dtype=np.int64)
        shown = _shown_programs(sm_id, MAX_PROGRAMS_DRAWN)
        for trace in _program_traces(sm_id[shown], (start[shown] - origin) / 1e3, (end[shown] - start[shown]) / 1e3,
                                     colors[shown], COLOR_BY[color_by]):
            fig.add_trace(trace)
        title += (
            f"<br><sup>{stats['programs']:,} programs on {sm_count} SMs · ≈{stats['waves']:.1f} waves · "
            f"makespan {stats['makespan_us']:,.1f} µs · SM utilization {stats['utilization']:.0%}</sup>"
        )
        if shown.size < sm_id.size:
            last_sm = int(sm_id[shown].max())
            title += f"<br><sup>drawn: SMs 0–{last_sm}, {shown.size:,} of {sm_id.size:,} programs</sup>"
    else:
        note(fig, "no programs recorded", theme)
    style(fig, theme, title=title)
    fig.update_xaxes(title_text="time (µs)", range=[0, max(stats["makespan_us"], 1e-3)])
    fig.update_yaxes(title_text="SM id", range=[-0.5, sm_count - 0.5])
    fig.update_layout(height=height, margin=dict(t=150))
    return fig
