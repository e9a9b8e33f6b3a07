"""The roofline: achieved TFLOPS against arithmetic intensity (FLOPs per HBM byte), log–log, under the
device's two roofs, the memory-bandwidth slope and the compute ceiling, both measured on that GPU.

A kernel left of the ridge point can go no faster than bandwidth × intensity: it is memory-bound; right of
it, the matmul rate caps it. Points come in as plain dicts (story.roofline_points builds them).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from costmodel import attainable_tflops, ridge_point
from viz.theme import PALETTE, algorithm_color, style, surface


# the standard kernels share a colour; their shapes tell them apart
SYMBOLS = {"standard: S = QKᵀ": "square", "standard: softmax": "triangle-up", "standard: O = PV": "diamond"}
SUBJECT = "fa2"  # the kernel the talk is about: drawn on top, named on the chart


def _roof(x: np.ndarray, peak_tflops: float, bandwidth_gbps: float) -> np.ndarray:
    return np.array([attainable_tflops(float(v), peak_tflops, bandwidth_gbps) for v in x])


def _log_ticks(lo: float, hi: float) -> dict:
    """Ticks of a log axis from lo to hi: the powers of ten, and 2× and 5× them where the range spans too few
    powers to read a value off (past the wall only the fast kernels are left, all within one decade)."""
    if hi / lo >= 100:
        return {"dtick": 1}
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    values = [m * 10.0 ** k for k in decades for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    return {"tickmode": "array", "tickvals": values, "ticktext": [f"{v:g}" for v in values]}


def roofline_figure(points: list[dict], peak_tflops: float, bandwidth_gbps: float, l2_gbps: float | None = None,
                    theme: str = "light", height: int = 620, title: str = "Roofline") -> go.Figure:
    """points: dicts with "label", "algorithm" (its colour), "intensity" (FLOPs/byte), "tflops" (achieved),
    "counted" (bytes from hardware counters, else the cost model: hollow marker). peak_tflops: the measured
    matmul rate; bandwidth_gbps: the measured HBM copy rate; l2_gbps: the measured L2 read rate (a dotted roof)."""
    shown = [p for p in points if p.get("intensity") and p.get("tflops")]
    ridge = ridge_point(peak_tflops, bandwidth_gbps)
    xs = [p["intensity"] for p in shown] + [ridge]
    lo = 10 ** math.floor(math.log10(min(xs) / 3))
    hi = 10 ** math.ceil(math.log10(max(xs) * 3))
    x = np.geomspace(lo, hi, 200)
    fig = go.Figure()
    colors = surface(theme)
    fig.add_trace(go.Scatter(x=x, y=_roof(x, peak_tflops, bandwidth_gbps), mode="lines",
                             name=f"roofs: HBM {bandwidth_gbps / 1000:,.2f} TB/s,<br>matmul {peak_tflops:,.0f} TFLOPS",
                             line=dict(color=colors["foreground"], width=4), hoverinfo="skip"))
    if l2_gbps:
        fig.add_trace(go.Scatter(x=x, y=_roof(x, peak_tflops, l2_gbps), mode="lines",
                                 name=f"L2 roof: {l2_gbps / 1000:,.1f} TB/s", hoverinfo="skip",
                                 line=dict(color=PALETTE["l2"], width=3, dash="dot")))
    # the talk's subject, our FA-2 kernel, drawn last (on top of the peers near it) and larger, with its name beside it
    subject = [p for p in shown if p["algorithm"] == SUBJECT]
    for point in [p for p in shown if p["algorithm"] != SUBJECT] + subject:
        color = algorithm_color(point["algorithm"])
        fig.add_trace(go.Scatter(
            x=[point["intensity"]], y=[point["tflops"]], mode="markers", name=point["label"],
            marker=dict(size=30 if point["algorithm"] == SUBJECT else 20,
                        color=color if point.get("counted") else colors["background"],
                        line=dict(width=4, color=color), symbol=SYMBOLS.get(point["label"], "circle")),
            hovertemplate=(f"{point['label']}<br>%{{x:,.1f}} FLOPs/byte, %{{y:,.1f}} TFLOPS<br>"
                           f"{'counted bytes' if point.get('counted') else 'modelled bytes'}<extra></extra>"),
            showlegend=True))
    for point in subject:
        fig.add_annotation(x=math.log10(point["intensity"]), y=math.log10(point["tflops"]), text=point["label"],
                           showarrow=True, arrowhead=0, ax=0, ay=70, font=dict(color=colors["foreground"]),
                           bgcolor=colors["background"])
    fig.add_vline(x=ridge, line=dict(color=colors["muted"], width=2, dash="dash"),
                  label=dict(text=f"ridge {ridge:,.0f} FLOPs/byte", textposition="start", textangle=0,
                             xanchor="left", yanchor="bottom"))
    style(fig, theme, title=title)
    tops = [p["tflops"] for p in shown] + [peak_tflops]
    fig.update_xaxes(type="log", range=[math.log10(lo), math.log10(hi)], dtick=1,
                     title_text="arithmetic intensity (FLOPs per HBM byte)")
    y_lo, y_hi = min(tops) / 3, peak_tflops * 2.2
    fig.update_yaxes(type="log", range=[math.log10(y_lo), math.log10(y_hi)], title_text="achieved TFLOPS",
                     **_log_ticks(y_lo, y_hi))
    # beside the plot: inside, its nine entries reach up to the compute roof, where flash and SDPA sit; it may
    # run a line past the plot's bottom rather than scroll (a side legend's default limit is the plot's height)
    fig.update_layout(height=height, legend=dict(x=1.01, y=1, xanchor="left", yanchor="top", maxheight=height))
    return fig
