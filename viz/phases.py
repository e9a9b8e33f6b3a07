"""Inside one program: what each warpgroup of a flash kernel does over time, one lane per warpgroup, one colour per
phase (the same colours as the source view's phases), the kernels stacked on one time axis.

Data in (story.phase_panels builds it from a results file's "phases"): panels of {"title", "lanes": [{"label",
"spans": [[phase, start_us, end_us], ...]}]}; every panel is drawn on the same microsecond axis, so the FA-2 and FA-3
programs compare at a glance.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fmt import plotly_text
from viz.theme import BLUE, BLUISH_GREEN, GREY, MEDIUM_PURPLE, ORANGE, SMALLEST_TEXT_PX, VERMILLION, style, surface

# the kernels' phase comments, in the order a K/V tile goes through them; colours as in viz/source_view.py
PHASES = {"load": ("load K, V (wait for the copy)", BLUE), "wait": ("wait (data, or the turn)", GREY),
          "qk": ("S = QKᵀ (issue, wait)", ORANGE), "softmax": ("softmax: max, exp, sum, rescale", BLUISH_GREEN),
          "pv": ("O += P·V", MEDIUM_PURPLE), "epilogue": ("write O, LSE", VERMILLION)}
LANE_PX = 70  # one warpgroup's lane
BOTTOM_MARGIN_PX = 150  # the time axis and the legend under it
TOP_MARGIN_PX = 90  # theme.style's top margin: the title


def phases_figure(panels: list[dict], theme: str = "light", height: int = 640, title: str = "") -> go.Figure:
    """One subplot per panel (kernel), stacked, on one shared time axis (µs); in each, one lane per warpgroup, its
    spans as bars coloured by phase. Spans of an unknown phase are refused (ValueError)."""
    if not panels:
        raise ValueError("phases_figure needs at least one panel")
    rows = [max(1, len(panel["lanes"])) for panel in panels]
    # the gap between panels holds the lower panel's title (about 1.8 lines of it), whatever the height
    plot_px = max(1, height - BOTTOM_MARGIN_PX - TOP_MARGIN_PX)
    spacing = min(0.3, max(0.08, 1.8 * (SMALLEST_TEXT_PX + 2) / plot_px)) if len(panels) > 1 else 0
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=spacing,
                        row_heights=[r / sum(rows) for r in rows],
                        subplot_titles=[plotly_text(panel["title"]) for panel in panels])
    shown = set()
    for row, panel in enumerate(panels, start=1):
        labels = [plotly_text(lane["label"]) for lane in panel["lanes"]]
        for phase, (name, color) in PHASES.items():
            starts, widths, lanes = [], [], []
            for label, lane in zip(labels, panel["lanes"]):
                for span in lane["spans"]:
                    if span[0] not in PHASES:
                        raise ValueError(f"unknown phase {span[0]!r}: the kernels' phases are {', '.join(PHASES)}")
                    if span[0] == phase:
                        starts.append(span[1])
                        widths.append(max(span[2] - span[1], 1e-3))
                        lanes.append(label)
            if not starts:
                continue
            fig.add_trace(go.Bar(x=np.array(widths), base=np.array(starts), y=lanes, orientation="h", name=name,
                                 marker=dict(color=color, line=dict(width=0)), legendgroup=phase,
                                 showlegend=phase not in shown, hovertemplate=f"{name}: %{{base:.2f}} µs + "
                                                                              f"%{{x:.2f}} µs<extra></extra>"),
                          row=row, col=1)
            shown.add(phase)
        fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], row=row, col=1)
    style(fig, theme, title=title or None)
    fig.update_layout(barmode="overlay", bargap=0.25, height=height,
                      legend=dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom"),
                      margin=dict(b=BOTTOM_MARGIN_PX))
    fig.update_xaxes(title_text="time in the program (µs, from its first record)", row=len(panels), col=1)
    for annotation in fig.layout.annotations:  # subplot titles at the text size the room reads
        annotation.font = dict(size=SMALLEST_TEXT_PX + 2, color=surface(theme)["foreground"])
    return fig
