"""Which SM ran which program when: the flash kernel's grid laid out over time, from %globaltimer stamps.

Coloured by Q block, causal attention shows its imbalance: late Q blocks visit more K/V tiles, so
their programs run longer and the last wave leaves SMs idle.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz.marks import note
from viz.theme import style

COLOR_BY = {"q_block": "Q block", "wave": "wave"}
MAX_PROGRAMS_DRAWN = 20000  # bars a browser still draws quickly; the statistics count every program


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


def sm_timeline_figure(
    timeline: dict,
    stats: dict,
    theme: str = "light",
    height: int = 640,
) -> go.Figure:
    """Programs on SMs over time: y = SM id, x = time (µs), one bar per program (a single Bar trace).

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
        fig.add_trace(
            go.Bar(
                y=sm_id[shown],
                base=((start[shown] - origin) / 1e3).astype(np.float32),
                x=((end[shown] - start[shown]) / 1e3).astype(np.float32),
                orientation="h",
                width=0.8,
                marker=dict(
                    color=colors[shown],
                    colorscale="Cividis",  # perceptually uniform and colour-blind safe
                    colorbar=dict(title=dict(text=COLOR_BY[color_by], side="right")),  # beside the ticks, never over the top one
                    line=dict(width=0),
                ),
                customdata=colors[shown],
                hovertemplate="SM %{y}: %{base:.1f} µs + %{x:.1f} µs<br>"
                + COLOR_BY[color_by]
                + " %{customdata}<extra></extra>",
                showlegend=False,
            )
        )
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
    fig.update_layout(height=height, barmode="overlay", margin=dict(t=150))
    return fig
