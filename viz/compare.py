"""Standard versus flash side by side: HBM reads and writes of each kernel, from the cost model's traffic."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.marks import bytes_axis, linear_bytes_axis
from viz.theme import BASE_FONT_PX, algorithm_color, style, surface
from fmt import fmt_bytes, fmt_ratio

# each panel in the colour of the algorithm it models
PANEL_ALGORITHMS = {"naive": "naive", "flash_no_cache": "fa2", "flash_l2": "fa2"}


def _two_lines(label: str, width: int = 14) -> str:
    """Break a long category label at the space nearest its middle, so it fits under its bar unrotated."""
    spaces = [i for i, char in enumerate(label) if char == " "]
    if len(label) <= width or not spaces:
        return label
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "<br>" + label[cut + 1 :]


def compare_figure(panels: list[dict], theme: str = "light", log_y: bool = False, height: int = 620) -> go.Figure:
    """HBM reads and writes (bytes) per kernel or phase, one panel per model, on one shared y axis.

    panels: dicts with "key" ("naive", "flash_no_cache" or "flash_l2": its colour), "title", "parts"
    (costmodel.Traffic list: name, reads, writes) and "counted" (bytes counted by hardware counters, or
    None). The first panel is the baseline: the others' titles say how many times less they move.
    Linear axis: reads and writes stacked, so bar heights compare honestly. log_y: side by side instead.
    """
    moved = [sum(part.total for part in panel["parts"]) for panel in panels]
    titles = []
    for index, (panel, total) in enumerate(zip(panels, moved)):
        title = f"{panel['title']}<br>{fmt_bytes(total)}"
        if index and total:
            title += f" ({fmt_ratio(moved[0] / total)} less)"
        if panel.get("counted"):
            title += f"<br>counted: {fmt_bytes(panel['counted'])}"
        titles.append(title)
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.03)
    background = surface(theme)["background"]  # stripes in the background colour mark the writes
    values = [getattr(part, kind) for panel in panels for part in panel["parts"] for kind in ("reads", "writes")]
    floor = min((v for v in values if v > 0), default=1)
    for col, panel in enumerate(panels, start=1):
        parts = panel["parts"]
        steps = [_two_lines(part.name) for part in parts]
        color = algorithm_color(PANEL_ALGORITHMS.get(panel["key"], panel["key"]))
        for kind, pattern in (("reads", ""), ("writes", "/")):
            fig.add_trace(
                go.Bar(
                    x=steps,
                    y=np.array([getattr(part, kind) for part in parts], dtype=np.float64),
                    name=f"{kind} ({'hatched' if pattern else 'solid'})",
                    legendgroup=kind,
                    showlegend=col == 1,
                    marker=dict(color=color, pattern=dict(shape=pattern, fgcolor=background, fillmode="overlay")),
                    text=[fmt_bytes(getattr(part, kind)) for part in parts],
                    hovertemplate="%{x}<br>" + kind + ": %{text}<extra></extra>",
                    textposition="none",
                ),
                row=1,
                col=col,
            )
        step_totals = [part.total for part in parts]
        fig.add_trace(
            go.Scatter(
                x=steps,
                # a zero total is labelled at the axis floor: a log axis has no 0
                y=np.array([t or floor for t in step_totals], dtype=np.float64),
                mode="text",
                text=[fmt_bytes(t) if t else "" for t in step_totals],
                textposition="top center",
                showlegend=False,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
    peak = max((part.total for panel in panels for part in panel["parts"]), default=1)
    if log_y:
        fig.update_yaxes(**bytes_axis(values))
        fig.update_layout(barmode="group")
    else:
        fig.update_yaxes(**linear_bytes_axis(peak * 1.2))
        fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="HBM bytes", row=1, col=1)
    style(fig, theme)  # the scene's heading says what this is; the panel titles carry the numbers
    fig.update_annotations(font_size=BASE_FONT_PX)  # the subplot titles
    fig.update_xaxes(tickangle=0)
    fig.update_layout(
        height=height,
        margin=dict(t=150),
        legend=dict(orientation="h", x=1, xanchor="right", yref="container", y=1, yanchor="top"),
    )
    return fig
