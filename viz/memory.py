"""Extra device memory versus sequence length: the quadratic wall of standard attention, the linear
line of flash. Formula curves from the cost model, measured peaks and out-of-memory results from records;
what an out-of-memory record needs and the wall's words come from the story (story/records.py), as given.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from costmodel import SEQ_LENS, Shape, flash_extra_bytes, naive_extra_bytes
from fmt import fmt_bytes, fmt_tokens, plotly_text
from viz.fit import FIXED_MARGIN_KEY, bottom_legend_margins
from viz.marks import bytes_axis, bytes_curve, horizontal_marker, token_axis, vertical_marker
from viz.theme import PALETTE, algorithm_color, algorithm_label, style, surface

DEFAULT_SEQ_LENS = (SEQ_LENS[0], SEQ_LENS[-1])  # the slider's span (tokens), always on the x axis
_DTYPE_OF_BYTES = {2: "bfloat16", 4: "float32"}  # the formulas need the element's size only
FORMULAS = {
    "naive": (naive_extra_bytes, "S (fp32) + P + O"),
    "fa2": (flash_extra_bytes, "O + LSE"),
}


def _oom_wall(fig: go.Figure, seq_len: int, x_max: float) -> None:
    """Shade everything right of the first out-of-memory sequence length; its words are under the title (a
    label inside the plot would cross the curves)."""
    fig.add_shape(
        type="rect",
        x0=seq_len,
        x1=x_max,
        y0=0,
        y1=1,
        yref="y domain",
        fillcolor=PALETTE["oom"],
        opacity=0.15,
        line=dict(color=PALETTE["oom"], width=3),
        layer="below",
    )


def _add_formulas_and_peaks(fig: go.Figure, records: list[dict], curve_x: np.ndarray, shape: Shape,
                            edge: str, formulas: dict) -> list[float]:
    """Per algorithm of `formulas`: its formula curve over curve_x at the shape (its N aside), and its measured peaks;
    returns the bytes plotted."""
    plotted: list[float] = []
    for algorithm, (formula, parts) in formulas.items():
        curve = [formula(shape.at(seq_len=int(n), kv_len=int(n))) for n in curve_x]
        plotted += curve
        name = f"{algorithm_label(algorithm)}: {parts} (formula)"
        fig.add_trace(bytes_curve(curve_x, curve, name, dict(color=algorithm_color(algorithm), width=3, dash="dot")))
        measured = sorted(
            (r for r in records if r["algorithm"] == algorithm and r["status"] == "ok" and r.get("peak_extra_bytes")),
            key=lambda r: r["seq_len"],
        )
        if measured:
            peaks = [r["peak_extra_bytes"] for r in measured]
            plotted += peaks
            fig.add_trace(
                go.Scatter(
                    x=np.array([r["seq_len"] for r in measured]),
                    y=np.array(peaks, dtype=np.float64),
                    mode="markers",
                    name=f"{algorithm_label(algorithm)}, measured peak",
                    marker=dict(color=algorithm_color(algorithm), size=16, line=dict(width=2, color=edge)),
                    text=[fmt_bytes(p) for p in peaks],
                    hovertemplate="N = %{x}: %{text}<extra>measured</extra>",
                )
            )
    return plotted


def _add_oom_markers(fig: go.Figure, oom: list[dict]) -> list[float]:
    """An ✕ at what each out-of-memory record needs (its `need_bytes`; none where None), its `failure` text on
    hover; returns the bytes plotted."""
    for record in oom:
        if "need_bytes" not in record or "failure" not in record:
            raise ValueError(f"the out-of-memory {record['algorithm']} record at N = {record['seq_len']} needs its "
                             "'need_bytes' (story.oom_need) and 'failure' (story.failure_text) to be drawn")
    with_need = [r for r in oom if r["need_bytes"]]
    fig.add_trace(
        go.Scatter(
            x=np.array([r["seq_len"] for r in with_need]),
            y=np.array([r["need_bytes"] for r in with_need], dtype=np.float64),
            mode="markers",
            name=OOM_MARKS,
            marker=dict(symbol="x", size=20, color=PALETTE["oom"], line=dict(width=2)),
            text=[plotly_text(f"{algorithm_label(r['algorithm'])} {r['failure']}") for r in with_need],
            hovertemplate="N = %{x}: %{text}<extra></extra>",
        )
    )
    return [r["need_bytes"] for r in with_need]


def memory_figure(
    records: list[dict],
    batch: int,
    heads: int,
    head_dim: int,
    dtype_bytes: int,
    seq_len_marker: int | None = None,
    theme: str = "light",
    hbm_bytes: int | None = None,
    height: int = 620,
    wall: dict | None = None,
    width: float | None = None,
    formulas: dict | None = None,
    title: str | None = None,
    legend_right: bool = False,
) -> go.Figure:
    """Log-log extra device memory (bytes) vs sequence length (tokens) for standard and flash attention.

    records: measurement records (docs/data-contracts.md); "ok" records of "naive"/"fa2" with a
    peak_extra_bytes become measured markers; "oom" records an ✕ at their `need_bytes` (the bytes the algorithm
    needs there, story.oom_need; None: no ✕) with their `failure` text (story.failure_text) on hover.
    batch, heads, head_dim, dtype_bytes: the setting the formula curves are drawn for.
    hbm_bytes: device memory, drawn as a horizontal line. seq_len_marker: the slider's N, a vertical line.
    wall: {"seq_len": the first out-of-memory N, "text": its words (story.wall_text)}: shaded from seq_len on,
    its text under the title; None: no wall.
    width: how wide the chart is drawn at the design size (px): its left and bottom margins then hold its tick
    labels and legend (viz.fit), so plotly draws it once; None: plotly grows them (a second draw).
    formulas: {algorithm: (costmodel formula of a Shape, what it counts)} drawn with that algorithm's measured peaks;
    None: FORMULAS (inference: standard's S + P + O, flash's O + LSE). title: None: "Extra memory beyond Q, K, V".
    legend_right: the legend in a column right of the plot, not in rows under it (a scene with little height: five
    rows there left the plot a few pixels tall): the curves, one entry for every measured dot (each has its curve's
    colour: MEASURED_DOTS) and the out-of-memory mark.
    """
    # The default span is always included: a lone marker (no records) must not collapse the curves to a point.
    seq_lens = [r["seq_len"] for r in records] + ([seq_len_marker] if seq_len_marker else []) + list(DEFAULT_SEQ_LENS)
    lo, hi = min(seq_lens), max(seq_lens)
    curve_x = np.unique(np.geomspace(lo, hi, 64).round().astype(np.int64))
    fig = go.Figure()
    edge = surface(theme)["background"]  # a ring in the background colour separates overlapping markers
    plotted: list[float] = [hbm_bytes] if hbm_bytes else []
    shape = Shape(seq_len_marker or lo, batch, heads, head_dim, _DTYPE_OF_BYTES[dtype_bytes])
    plotted += _add_formulas_and_peaks(fig, records, curve_x, shape, edge, formulas or FORMULAS)
    oom = [r for r in records if r["status"] == "oom"]
    if oom:
        plotted += _add_oom_markers(fig, oom)
    if wall:
        _oom_wall(fig, wall["seq_len"], x_max=hi * 2)
    if hbm_bytes:
        horizontal_marker(fig, hbm_bytes, f"device memory {fmt_bytes(hbm_bytes)}", theme)
    if seq_len_marker:
        vertical_marker(fig, seq_len_marker, f"N = {fmt_tokens(seq_len_marker)}", theme,
                        at_right_end=seq_len_marker >= hi)

    title = f"{title or 'Extra memory beyond Q, K, V'} · batch {batch} × {heads} heads, d = {head_dim}"
    if wall:  # the wall in words, under the title: a label inside the plot would cross the curves
        title += f"<br><sup>{plotly_text(wall['text'])}</sup>"
    style(fig, theme, title=title)
    fig.update_xaxes(title_text="sequence length N (tokens)", **token_axis([lo, hi]))
    fig.update_yaxes(title_text="extra memory", **bytes_axis(plotted))
    # the legend at the figure's foot, under the axis title at any height: as many rows as its entries need
    # a second title line (the wall) needs room above the "N = …" marker's label
    fig.update_layout(height=height, margin_b=150, margin_t=150 if wall else 110,
                      legend=dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom"))
    if width:
        _fit_margins(fig, width)
    if legend_right:  # the plot keeps the height; the width gives room to the labels (plotly grows the margin)
        _one_entry_for_the_dots(fig, theme)
        # the column may run past the plot's foot into the margin under it, rather than scroll (a side legend's
        # default limit is the plot's height, which a short plot's four entries pass)
        fig.update_layout(margin_b=110, legend=dict(orientation="v", x=1.02, xanchor="left", yref="paper", y=1,
                                                   yanchor="top", maxheight=height))
    return fig


MEASURED_DOTS = "measured peaks (dots, in their curve's colour)"
# the ✕ marks: true of a kernel our library refused before any launch and of one the allocator could not hold; each
# ✕ says which on hover (its record's failure text)
OOM_MARKS = "did not fit (what it needs)"


def _one_entry_for_the_dots(fig: go.Figure, theme: str) -> None:
    """The measured dots under one legend entry, not one per curve (a column of five entries is taller than a short
    plot): each dot keeps its curve's colour, and the entry, a dot in the neutral colour, says what dots are."""
    dots = [trace for trace in fig.data if (trace.name or "").endswith("measured peak")]
    if not dots:
        return
    for trace in dots:
        trace.showlegend = False
    entry = go.Scatter(x=[None], y=[None], mode="markers", name=MEASURED_DOTS, hoverinfo="skip",
                       marker=dict(color=surface(theme)["muted"], size=16, line=dict(width=2,
                                                                                   color=surface(theme)["background"])))
    index = list(fig.data).index(dots[-1]) + 1  # after the curves and their dots, before the out-of-memory mark
    fig.add_trace(entry)
    fig.data = (*fig.data[:index], fig.data[-1], *fig.data[index:-1])


def _fit_margins(fig: go.Figure, width: float) -> None:
    """The left and bottom margins that hold the y tick labels and the legend at this width (viz.fit)."""
    themed = fig.layout.template.layout  # viz.theme's sizes: tick labels, legend, margins
    legend = [trace.name for trace in fig.data if trace.showlegend is not False and trace.name]
    margins = bottom_legend_margins(list(fig.layout.yaxis.ticktext or ()),
                                    legend if len(legend) > 1 else [],  # plotly shows no legend for one trace
                                    tick_px=themed.yaxis.tickfont.size, legend_px=themed.legend.font.size,
                                    width_px=width, right_px=fig.layout.margin.r or themed.margin.r)
    fig.update_layout(margin_l=margins["l"], margin_b=margins["b"], meta={FIXED_MARGIN_KEY: margins[FIXED_MARGIN_KEY]})
