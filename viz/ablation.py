"""FA-3, idea by idea: a bar per step of our ablation ladder (TFLOPS measured side by side in one run), each step ÷
the one before on its bar, cuDNN as the reference, and the FA-3 paper's published steps (another GPU) as ranges
beside the bars they correspond to.

Data in (story.chart_data builds it): {"categories": [str, ...] in order, "ours": [{"category", "name", "tflops"
(None: no number, "note" says why), "vs_before", "kind": "fa2" | "fa3" | "reference", "selected"}], "published":
[{"category", "low", "high", "text", "note"}]}.
"""
from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go

from fmt import plotly_text
from viz.marks import note
from viz.theme import PALETTE, algorithm_color, style, surface, translucent

TICK_CHARS = 8  # a tick's line: 8 characters at 24 px side by side in a chart column of 8 steps
KIND_COLOR = {"fa2": "fa2", "fa3": "fa3", "reference": "sdpa_default"}


def _tick(category: str, ratio: float | None = None) -> str:
    """A category's tick: its name wrapped, and under it (bold) its step ÷ the step before, when there is one."""
    lines = [plotly_text(line) for line in textwrap.wrap(category, TICK_CHARS)]
    return "<br>".join(lines + ([f"<b>{ratio:.2f}×</b>"] if ratio else []))


def ablation_figure(data: dict, theme: str = "light", height: int = 600, width: int | None = None,
                    measured_label: str = "measured on this GPU", published_label: str = "published") -> go.Figure:
    """The ladder's bars (ours), the published ranges beside them, the selected step outlined."""
    categories, ours, published = data["categories"], data["ours"], data["published"]
    unknown = [c for c in [o["category"] for o in ours] + [p["category"] for p in published] if c not in categories]
    if unknown:
        raise ValueError(f"categories {unknown} are not among the chart's categories {categories}")
    colors = surface(theme)
    ratios = {o["category"]: o["vs_before"] for o in ours}
    ticks = {c: _tick(c, ratios.get(c)) for c in categories}
    fig = go.Figure()
    # every category keeps its place on the axis, a step without a number too (plotly shows only those with data)
    fig.add_trace(go.Scatter(x=[ticks[c] for c in categories], y=np.zeros(len(categories)), mode="markers",
                             marker=dict(opacity=0), showlegend=False, hoverinfo="skip"))
    known = [o for o in ours if o["tflops"]]
    if known:
        fig.add_trace(go.Bar(
            x=[ticks[o["category"]] for o in known], y=np.array([o["tflops"] for o in known], dtype=np.float64),
            marker=dict(color=[algorithm_color(KIND_COLOR[o["kind"]]) for o in known],
                        line=dict(color=[colors["foreground"] if o["selected"] else "rgba(0,0,0,0)" for o in known],
                                  width=5)),
            text=[f"<b>{o['tflops']:,.0f}</b>" for o in known],
            textposition="outside", cliponaxis=False, name=plotly_text(measured_label),
            customdata=[plotly_text(o["name"]) for o in known],
            hovertemplate="%{customdata}: %{y:,.1f} TFLOPS<extra></extra>"))
    missing = [o for o in ours if not o["tflops"]]
    if missing and known:  # a step without a number keeps its place, its reason written there (in our bar's half of
        # the place, left of the published range beside it, if one stands there)
        lows = {p["category"]: p["low"] for p in published}
        fig.add_trace(go.Scatter(
            x=[ticks[o["category"]] for o in missing],
            y=np.array([lows.get(o["category"], 0.0) for o in missing], dtype=np.float64), mode="text",
            text=["<br>".join(plotly_text(line) for line in textwrap.wrap(o["note"], TICK_CHARS)) for o in missing],
            textposition=["middle left" if o["category"] in lows else "top center" for o in missing], textfont=dict(color=colors["muted"]), showlegend=False, hoverinfo="skip"))
    if published:  # beside our bar of the same idea (grouped), the range the paper gives as an error bar
        mids = np.array([(p["low"] + p["high"]) / 2 for p in published], dtype=np.float64)
        fig.add_trace(go.Bar(
            x=[ticks[p["category"]] for p in published], y=mids,
            marker=dict(color=translucent(PALETTE["published"], 0.25), line=dict(color=PALETTE["published"], width=3)),
            error_y=dict(type="data", symmetric=False, array=np.array([p["high"] for p in published]) - mids,
                         arrayminus=mids - np.array([p["low"] for p in published]), thickness=3, width=10,
                         color=PALETTE["published"]),
            text=[plotly_text(p["text"]) for p in published], textposition="inside", textangle=-90,
            insidetextanchor="end",
            textfont=dict(color=colors["muted"]), name=plotly_text(published_label),
            customdata=[plotly_text(p["note"]) for p in published], hovertemplate="%{customdata}<extra></extra>"))
    top = max([o["tflops"] for o in known] + [p["high"] for p in published] + [1.0])
    style(fig, theme)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=[ticks[c] for c in categories],
                     tickangle=0)
    fig.update_yaxes(title_text="TFLOPS", range=[0, top * 1.3])
    fig.update_layout(height=height, barmode="group", bargap=0.25, bargroupgap=0.05, margin=dict(t=20, l=90, r=20),
                      legend=dict(orientation="h", x=0, y=1.0, xanchor="left", yanchor="bottom"),
                      **({"width": width} if width else {}))
    if not known:
        note(fig, "no ladder records in this recording: the published steps only", theme, y=0.96)
    return fig
