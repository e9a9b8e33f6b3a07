"""FA-3's third idea, FP8: error against speed. One marker per variant (story/fp8.py points): x the speed gained over
bf16 (bf16 time ÷ its time, measured in one run), y its relative RMS error against float64 (log axis); bf16 at 1×.
Where nothing was timed (the CPU emulation), the x axis is the variants instead and the title says "no speed".
The rotation the presenter chose is outlined; the other is faint.
"""
from __future__ import annotations

import plotly.graph_objects as go

from fmt import plotly_text
from viz.theme import algorithm_color, style, surface

SYMBOL = {False: "circle", True: "diamond"}


def fp8_figure(points: list[dict], rotation: bool, theme: str = "light", height: int = 500, width: int | None = None,
               source_label: str = "") -> go.Figure:
    """The points (name, scaling, rotation, rel_rms, speedup), the chosen rotation's drawn strong."""
    for p in points:
        if not p["rel_rms"] or p["rel_rms"] <= 0:
            raise ValueError(f"{p['name']}: a relative error must be positive for the log axis; got {p['rel_rms']!r}")
    colors = surface(theme)
    timed = bool(points) and all(p["speedup"] is not None for p in points)
    fig = go.Figure()
    for p in points:
        strong = p["scaling"] is None or p["rotation"] == rotation
        x = p["speedup"] if timed else plotly_text(p["name"].replace(" + ", "<br>+ "))
        fig.add_trace(go.Scatter(
            x=[x], y=[p["rel_rms"]], mode="markers+text", name=plotly_text(p["name"]),
            marker=dict(size=26 if strong else 16, symbol=SYMBOL[bool(p["rotation"])],
                        color=algorithm_color("fa2" if p["scaling"] is None else "fa3"),
                        opacity=1.0 if strong else 0.3,
                        line=dict(color=colors["foreground"] if strong else "rgba(0,0,0,0)", width=3)),
            text=[f"{p['rel_rms']:.3f}"], textposition="middle right" if timed else "top center",
            showlegend=timed, hovertemplate=f"{plotly_text(p['name'])}: %{{y:.4f}}<extra></extra>"))
    title = plotly_text(source_label) if timed else f"{plotly_text(source_label)}: errors only, no speed"
    fig.update_layout(height=height, width=width, title_text=title, margin=dict(l=110, r=40, t=70, b=90),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_yaxes(type="log", title_text="relative RMS error")
    if timed:
        fig.update_xaxes(title_text="speed ÷ bf16 (measured)")
    return style(fig, theme)
