"""Small drawing helpers shared by the figure builders: log ranges, power-of-two axes, reference lines.

Shapes on log axes take data values, but annotations take log10 values (a long-standing plotly.js
quirk), so every labelled reference line here is a shape with its own `label`, never an annotation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import plotly.graph_objects as go

from viz.theme import BASE_FONT_PX, SMALLEST_TEXT_PX, surface
from fmt import fmt_bytes, fmt_tokens

MAX_TICKS = 8  # more labels than this crowd a log axis at projector font sizes


def positive(values: Iterable[float | None]) -> list[float]:
    """The finite, positive values (what a log axis can show)."""
    return [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def log_range(values: Iterable[float | None], pad: float = 2.0) -> list[float]:
    """Axis range [log10(lo / pad), log10(hi · pad)] covering the positive values; a log axis wants log10."""
    shown = positive(values)
    if not shown:
        return [0.0, 1.0]
    return [math.log10(min(shown) / pad), math.log10(max(shown) * pad)]


def _power_of_two_axis(values: Iterable[float | None], label: Callable[[int], str], pad: float) -> dict:
    """Log-axis settings with ticks at powers of two, the stride a round number so labels align
    (1 KiB, 1 MiB, 1 GiB for bytes; 1K, 4K, 16K for tokens)."""
    shown = positive(values) or [1.0]
    lo = max(0, math.floor(math.log2(min(shown) / pad)))  # no fractional bytes or tokens
    hi = math.ceil(math.log2(max(shown) * pad))
    stride = next(s for s in (1, 2, 5, 10, 20, 40) if (hi - lo) // s + 1 <= MAX_TICKS)
    first = -(-lo // stride) * stride  # round up to a multiple of the stride
    ticks = [2**e for e in range(first, hi + 1, stride)]
    return dict(
        type="log",
        tickvals=ticks,
        ticktext=[label(t) for t in ticks],
        range=[math.log10(min(shown) / pad), math.log10(max(shown) * pad)],
    )


def token_axis(values: Iterable[float | None], pad: float = 1.3) -> dict:
    """Log axis settings for sequence lengths, ticks labelled "1K", "128K"."""
    return _power_of_two_axis(values, fmt_tokens, pad)


def bytes_axis(values: Iterable[float | None], pad: float = 2.0) -> dict:
    """Log axis settings for byte counts, ticks labelled in binary units ("1 MiB", "32 GiB")."""
    return _power_of_two_axis(values, lambda n: fmt_bytes(n, digits=0), pad)


DECIMAL_RATES = ((1e15, "PB/s"), (1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"))


def fmt_bandwidth(bytes_per_second: float, digits: int = 1) -> str:
    """A bandwidth in decimal units, as bandwidths are quoted (1 TB/s = 10¹² bytes/s): 3.35e13 → "33.5 TB/s",
    9.5e11 → "950.0 GB/s"; digits=0 for round tick labels ("10 TB/s"). Sizes stay binary (fmt.fmt_bytes).
    (The one bandwidth formatter of the page: it belongs with fmt.py's.)"""
    for scale, unit in DECIMAL_RATES:
        if bytes_per_second >= scale:
            value = bytes_per_second / scale
            return f"{value:,.{digits}f} {unit}" if digits else f"{value:g} {unit}"
    return f"{bytes_per_second:g} B/s"


def bandwidth_axis(values: Iterable[float | None], pad: float = 2.0) -> dict:
    """Log-axis settings for bandwidths in bytes/s, labelled in decimal units: ticks at the powers of ten, and at
    3× them while the range spans at most three decades (1, 3, 10, 30 TB/s)."""
    shown = positive(values) or [1e9]
    lo, hi = min(shown) / pad, max(shown) * pad
    steps = (1, 3) if hi / lo <= 1000 else (1,)
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    ticks = [m * 10.0**k for k in decades for m in steps if lo <= m * 10.0**k <= hi]
    return dict(type="log", tickvals=ticks, ticktext=[fmt_bandwidth(t, 0) for t in ticks],
                range=[math.log10(lo), math.log10(hi)])


def bytes_curve(seq_lens: np.ndarray, sizes: list[int], name: str, line: dict) -> go.Scatter:
    """A line of byte counts over sequence lengths (tokens); hover reads in binary units."""
    return go.Scatter(
        x=seq_lens,
        y=np.array(sizes, dtype=np.float64),  # float: byte counts past 2**53 are not exact anyway
        mode="lines",
        name=name,
        line=line,
        text=[fmt_bytes(size) for size in sizes],
        hovertemplate="N = %{x}: %{text}<extra></extra>",
    )


def linear_bytes_axis(top: float, max_ticks: int = 6) -> dict:
    """Linear axis settings from 0 to top bytes, ticks at round multiples of one binary unit ("0", "2 GiB", …)."""
    exponent = max(0, int(math.log(top, 1024))) if top > 0 else 0
    unit, unit_name = 1024**exponent, fmt_bytes(1024**exponent, digits=0).split()[1]
    span = top / unit
    steps = (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
    step = next(s for s in steps if span / s <= max_ticks - 1 and (exponent or s >= 1))  # no fractional bytes
    ticks = np.arange(0, span + step / 2, step)
    return dict(
        range=[0, top],
        tickvals=ticks * unit,
        ticktext=["0"] + [f"{t:g} {unit_name}" for t in ticks[1:]],
    )


def vertical_marker(fig: go.Figure, x: float, text: str, theme: str, color: str | None = None,
                    at_right_end: bool = False, at_bottom: bool = False, **where) -> None:
    """A dashed vertical line across the plot at data x, labelled at its top (at its bottom when at_bottom):
    right of the line, or left of it when at_right_end (x is the last value the axis shows, where a label on
    the right would be cut off). `where`: row=, col=."""
    fig.add_shape(
        type="line",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        yref="y domain",
        line=dict(color=color or surface(theme)["foreground"], width=3, dash="dash"),
        label=dict(text=text, textposition="start" if at_bottom else "end", textangle=0,
                   xanchor="right" if at_right_end else "left", **({"yanchor": "bottom"} if at_bottom else {}),
                   font=dict(size=SMALLEST_TEXT_PX)),
        **where,
    )


def horizontal_marker(fig: go.Figure, y: float, text: str, theme: str, color: str | None = None, **where) -> None:
    """A dotted horizontal line across the plot at data y, labelled above its left end. `where`: row=, col=."""
    fig.add_shape(
        type="line",
        x0=0,
        x1=1,
        xref="x domain",
        y0=y,
        y1=y,
        line=dict(color=color or surface(theme)["muted"], width=3, dash="dot"),
        label=dict(text=text, textposition="start", yanchor="bottom", font=dict(size=SMALLEST_TEXT_PX)),
        **where,
    )


def note(fig: go.Figure, text: str, theme: str, y: float = 0.5) -> None:
    """A centred message over the plot area (paper coordinates), e.g. why a chart is empty."""
    fig.add_annotation(
        text=text,
        xref="paper",
        yref="paper",
        x=0.5,
        y=y,
        showarrow=False,
        font=dict(size=BASE_FONT_PX, color=surface(theme)["muted"]),
    )
