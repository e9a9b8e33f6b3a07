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
# the same phases named short, for a lanes figure in a narrow column (legend_per_row)
SHORT = {"load": "load K, V", "wait": "wait", "qk": "S = QKᵀ", "softmax": "softmax", "pv": "O += P·V",
         "epilogue": "write O"}
LANE_PX = 70  # one warpgroup's lane
BOTTOM_MARGIN_PX = 150  # the time axis and the legend under it
TOP_MARGIN_PX = 90  # theme.style's top margin: the title


LEGEND_ROW_PX = 34  # one row of the legend under the time axis
AXIS_TITLE_PX = 105  # the time axis' ticks and title


def phases_figure(panels: list[dict], theme: str = "light", height: int = 640, title: str = "",
                  legend_per_row: int | None = None) -> go.Figure:
    """One subplot per panel (kernel), stacked, on one shared time axis (µs); in each, one lane per warpgroup, its
    spans as bars coloured by phase. Spans of an unknown phase are refused (ValueError).

    legend_per_row: for a narrow column, the legend's entries this many to a row (each an equal share of the width)
    and the bottom margin made to hold its rows, so the legend never grows up into the lanes; None: as wide as the
    figure lets plotly wrap them (a full-width figure)."""
    if not panels:
        raise ValueError("phases_figure needs at least one panel")
    rows = [max(1, len(panel["lanes"])) for panel in panels]
    bottom = BOTTOM_MARGIN_PX if legend_per_row is None else (
        AXIS_TITLE_PX + LEGEND_ROW_PX * -(-len(PHASES) // max(1, legend_per_row)))
    # the gap between panels holds the lower panel's title (about 1.8 lines of it), whatever the height
    plot_px = max(1, height - bottom - TOP_MARGIN_PX)
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
            fig.add_trace(go.Bar(x=np.array(widths), base=np.array(starts), y=lanes, orientation="h",
                                 name=name if legend_per_row is None else SHORT[phase],
                                 marker=dict(color=color, line=dict(width=0)), legendgroup=phase,
                                 showlegend=phase not in shown, hovertemplate=f"{name}: %{{base:.2f}} µs + "
                                                                              f"%{{x:.2f}} µs<extra></extra>"),
                          row=row, col=1)
            shown.add(phase)
        # every lane named: left to itself plotly drops every other category label when the lanes are thin
        fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], tickmode="array", tickvals=labels,
                         ticktext=labels, row=row, col=1)
    style(fig, theme, title=title or None)
    legend = dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom")
    fig.update_layout(barmode="overlay", bargap=0.25, height=height, legend=legend, margin=dict(b=bottom))
    if legend_per_row is not None:  # a narrow column: the key as text lines, legend_per_row phases to a line
        keys = [f'<span style="color:{color}">■</span> {SHORT[phase]}' for phase, (_, color) in PHASES.items()
                if phase in shown]
        lines = ["   ".join(keys[i:i + legend_per_row]) for i in range(0, len(keys), legend_per_row)]
        fig.update_layout(showlegend=False)
        fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0, y=0, yshift=-AXIS_TITLE_PX,
                           xanchor="left", yanchor="top", align="left", showarrow=False,
                           font=dict(size=SMALLEST_TEXT_PX))
    fig.update_xaxes(title_text="time in the program (µs, from its first record)" if legend_per_row is None
                     else "µs in the program", row=len(panels), col=1)
    for annotation in fig.layout.annotations:  # subplot titles at the text size the room reads
        annotation.font = dict(size=SMALLEST_TEXT_PX + 2, color=surface(theme)["foreground"])
    return fig
