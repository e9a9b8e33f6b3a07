"""Standard versus flash side by side: HBM reads and writes of each step, from schedule.traffic_totals."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.marks import bytes_axis, linear_bytes_axis
from viz.theme import BASE_FONT_PX, PALETTE, fmt_bytes, style, surface

SIDES = (("standard", "standard: 3 kernels through HBM"), ("flash", "flash: one fused kernel"))


def _two_lines(label: str, width: int = 14) -> str:
    """Break a long category label at the space nearest its middle, so it fits under its bar unrotated."""
    spaces = [i for i, char in enumerate(label) if char == " "]
    if len(label) <= width or not spaces:
        return label
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "<br>" + label[cut + 1 :]


def compare_figure(totals: dict, theme: str = "light", log_y: bool = False, height: int = 620) -> go.Figure:
    """Reads and writes (bytes) per step of standard and flash attention, on one shared y axis.

    totals: viz.schedule.traffic_totals(...). Linear axis: reads and writes stacked, so bar heights
    compare honestly. log_y: reads and writes side by side instead (stacking on a log axis misleads).
    """
    moved = {side: sum(row["reads"] + row["writes"] for row in totals[side]) for side, _ in SIDES}
    ratio = moved["standard"] / moved["flash"] if moved["flash"] else float("inf")
    titles = [f"{title}<br>{fmt_bytes(moved[side])} moved" for side, title in SIDES]
    titles[1] += f" ({ratio:,.1f}× less)"
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.04)
    background = surface(theme)["background"]  # stripes in the background colour mark the writes
    values = [row[kind] for side, _ in SIDES for row in totals[side] for kind in ("reads", "writes")]
    floor = min((v for v in values if v > 0), default=1)
    for col, (side, _) in enumerate(SIDES, start=1):
        rows = totals[side]
        steps = [_two_lines(row["step"]) for row in rows]
        color = PALETTE[side]
        for kind, pattern in (("reads", ""), ("writes", "/")):
            fig.add_trace(
                go.Bar(
                    x=steps,
                    y=np.array([row[kind] for row in rows], dtype=np.float64),
                    name=f"{kind} ({'hatched' if pattern else 'solid'})",
                    legendgroup=kind,
                    showlegend=col == 1,
                    marker=dict(color=color, pattern=dict(shape=pattern, fgcolor=background, fillmode="overlay")),
                    text=[fmt_bytes(row[kind]) for row in rows],
                    hovertemplate="%{x}<br>" + kind + ": %{text}<extra></extra>",
                    textposition="none",
                ),
                row=1,
                col=col,
            )
        step_totals = [row["reads"] + row["writes"] for row in rows]
        fig.add_trace(
            go.Scatter(
                x=steps,
                # a zero total is labelled at the axis floor: a log axis has no 0
                y=np.array([t or floor for t in step_totals], dtype=np.float64),
                mode="text",
                text=[fmt_bytes(t) for t in step_totals],
                textposition="top center",
                showlegend=False,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
    peak = max(row["reads"] + row["writes"] for side, _ in SIDES for row in totals[side])
    if log_y:
        fig.update_yaxes(**bytes_axis(values))
        fig.update_layout(barmode="group")
    else:
        fig.update_yaxes(**linear_bytes_axis(peak * 1.2))
        fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="HBM bytes", row=1, col=1)
    style(fig, theme, title="Where the bytes go: HBM traffic per step")
    fig.update_annotations(font_size=BASE_FONT_PX)  # the subplot titles
    fig.update_xaxes(tickangle=0)
    fig.update_layout(
        height=height,
        margin=dict(t=170),
        legend=dict(orientation="h", x=1, y=1.12, xanchor="right", yanchor="bottom"),
    )
    return fig
