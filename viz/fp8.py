"""FA-3's third idea, FP8: error against speed. One marker per variant (story/fp8.py points): x the speed gained over
bf16 (bf16 time ÷ its time, measured in one run), y its relative RMS error against float64 (log axis); bf16 at 1×.
Where nothing was timed (the CPU emulation), the x axis is the variants instead and its title says "no speed".
The rotation the presenter chose is outlined, its numbers named ("per-head 0.108"); the other is faint.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from fmt import plotly_text
from viz.theme import algorithm_color, style, surface

SYMBOL = {False: "circle", True: "diamond"}


def _tick(name: str) -> str:
    """A variant's tick, short (five share a popover's width): "tensor", "tensor<br>+ rot.", …, "bf16" (the sentence
    above the chart and the hover name each in full)."""
    return plotly_text(name.removeprefix("FP8 per-")).replace(" + rotation", "<br>+ rot.")


def _short(point: dict) -> str:
    """A timed marker's name beside its number: "per-tensor", "per-head + rot.", "bf16" (its markers overlap others',
    so a number alone would not say whose it is)."""
    if point["scaling"] is None:
        return "bf16"
    return f"per-{point['scaling']}" + (" + rot." if point["rotation"] else "")


def _label(point: dict, head: dict | None) -> str:
    """A timed, strongly drawn marker's label: its name and number; per-tensor's names per-head's too (drawn on the
    same spot), per-head's is then empty."""
    if head is not None and point is head:
        return ""
    text = f"{_short(point)} {point['rel_rms']:.3f}"
    if head is not None and point["scaling"] == "tensor":
        text += f"<br>{_short(head)} {head['rel_rms']:.3f}"
    return text


def _side(point: dict) -> str:
    """Where a timed marker's label goes: per-tensor's (which names per-head's too, _label) left of it, where the
    plot has room; the others' right (bf16's at the left edge; per-head's only where no per-tensor point shares its
    rotation)."""
    return "middle left" if point["scaling"] == "tensor" else "middle right"


def fp8_figure(points: list[dict], rotation: bool, theme: str = "light", height: int = 500, width: int | None = None,
               source_label: str = "") -> go.Figure:
    """The points (name, scaling, rotation, rel_rms, speedup), the chosen rotation's drawn strong."""
    for p in points:
        if not p["rel_rms"] or p["rel_rms"] <= 0:
            raise ValueError(f"{p['name']}: a relative error must be positive for the log axis; got {p['rel_rms']!r}")
    colors = surface(theme)
    timed = bool(points) and all(p["speedup"] is not None for p in points)
    fig = go.Figure()
    # timed, per-tensor and per-head sit on one spot: one label left of them names both (right of them it is cut off
    # at a popover's edge)
    head = next((p for p in points if p["scaling"] == "head" and p["rotation"] == rotation), None) if timed else None
    for p in points:
        strong = p["scaling"] is None or p["rotation"] == rotation
        x = p["speedup"] if timed else _tick(p["name"])
        fig.add_trace(go.Scatter(
            x=[x], y=[p["rel_rms"]], mode="markers+text", name=plotly_text(p["name"]),
            marker=dict(size=26 if strong else 16, symbol=SYMBOL[bool(p["rotation"])],
                        color=algorithm_color("fa2" if p["scaling"] is None else "fa3"),
                        opacity=1.0 if strong else 0.3,
                        line=dict(color=colors["foreground"] if strong else "rgba(0,0,0,0)", width=3)),
            # timed, the variants sit nearly on one spot: only the chosen rotation's numbers (the sentence gives the
            # other's), per-tensor's left of it and the others' right
            text=[_label(p, head) if timed and strong else "" if timed else f"{p['rel_rms']:.3f}"],
            textposition=_side(p) if timed else "top center", cliponaxis=False,
            hovertemplate=f"{plotly_text(p['name'])}: %{{y:.4f}}<extra></extra>"))
    label = plotly_text(source_label)
    fig.update_layout(height=height, width=width, margin=dict(l=110, r=40, t=30, b=90), showlegend=False)
    if points:  # room above the highest marker for its number (drawn above it when untimed), below the lowest
        logs = [math.log10(p["rel_rms"]) for p in points]
        fig.update_yaxes(range=[min(logs) - 0.3, max(logs) + (0.45 if timed else 0.7)])
    fig.update_yaxes(type="log", dtick=1, title_text="rel. error")  # (the sentence: relative RMS error)
    fig.update_xaxes(tickangle=0)
    fig.update_xaxes(title_text="speed ÷ bf16, measured" if timed  # (the source: the caption above the chart)
                     else f"{label}: errors only, no speed")
    return style(fig, theme)
