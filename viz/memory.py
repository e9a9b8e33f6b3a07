"""Extra device memory versus sequence length: the quadratic wall of standard attention, the linear
line of flash. Formula curves from the cost model, measured peaks and out-of-memory results from records.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from costmodel import SEQ_LENS, dtype_bytes, flash_extra_bytes, naive_extra_bytes

from viz.marks import bytes_axis, bytes_curve, horizontal_marker, token_axis, vertical_marker
from viz.theme import PALETTE, algorithm_color, algorithm_label, style, surface
from fmt import fmt_bytes, fmt_tokens

DEFAULT_SEQ_LENS = (SEQ_LENS[0], SEQ_LENS[-1])  # the slider's span (tokens), always on the x axis
FORMULAS = {
    "naive": (naive_extra_bytes, "S (fp32) + P + O"),
    "flash": (flash_extra_bytes, "O + LSE"),
}


def oom_need(record: dict) -> int | None:
    """Bytes the algorithm needs at the record's setting (its formula), else what the failed allocation asked."""
    if record["algorithm"] in FORMULAS:
        formula = FORMULAS[record["algorithm"]][0]
        return formula(record["seq_len"], record["batch"], record["heads"], record["head_dim"],
                       dtype_bytes(record["dtype"]))
    return record.get("needed_bytes")


def oom_text(record: dict) -> str:
    """"needs 192.0 GiB; a 64.0 GiB allocation failed": the model's total and what was measured. The one
    wording of the wall: the chart, the speedup table, the headline and the takeaways all use it."""
    parts = []
    need = oom_need(record)
    if need:
        parts.append(f"needs {fmt_bytes(need)}")
    if record.get("needed_bytes"):
        parts.append(f"a {fmt_bytes(record['needed_bytes'])} allocation failed")
    return "; ".join(parts)


def _first_wall(oom_records: list[dict]) -> dict:
    """The first out-of-memory record: standard's, if it has one."""
    naive = [r for r in oom_records if r["algorithm"] == "naive"]
    return min(naive or oom_records, key=lambda r: r["seq_len"])


def wall_text(record: dict) -> str:
    """"out of memory at N = 32K (needs 192.2 GiB; a 64.0 GiB allocation failed)"."""
    needed = f" ({oom_text(record)})" if oom_text(record) else ""
    return f"out of memory at N = {fmt_tokens(record['seq_len'])}{needed}"


def _oom_wall(fig: go.Figure, first: dict, x_max: float) -> None:
    """Shade everything right of the first out-of-memory sequence length; its words are in the legend (a label
    inside the plot would cross the curves)."""
    fig.add_shape(
        type="rect",
        x0=first["seq_len"],
        x1=x_max,
        y0=0,
        y1=1,
        yref="y domain",
        fillcolor=PALETTE["oom"],
        opacity=0.15,
        line=dict(color=PALETTE["oom"], width=3),
        layer="below",
    )


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
) -> go.Figure:
    """Log-log extra device memory (bytes) vs sequence length (tokens) for standard and flash attention.

    records: measurement records (docs/data-contracts.md); "ok" records of "naive"/"flash" with a
    peak_extra_bytes become measured markers, "oom" records an ✕ at the bytes the algorithm needs there
    (its formula; the failed allocation's size, which the record holds, goes in the label) and a shaded wall.
    batch, heads, head_dim, dtype_bytes: the setting the formula curves are drawn for.
    hbm_bytes: device memory, drawn as a horizontal line. seq_len_marker: the slider's N, a vertical line.
    """
    # The default span is always included: a lone marker (no records) must not collapse the curves to a point.
    seq_lens = [r["seq_len"] for r in records] + ([seq_len_marker] if seq_len_marker else []) + list(DEFAULT_SEQ_LENS)
    lo, hi = min(seq_lens), max(seq_lens)
    curve_x = np.unique(np.geomspace(lo, hi, 64).round().astype(np.int64))
    fig = go.Figure()
    edge = surface(theme)["background"]  # a ring in the background colour separates overlapping markers
    plotted: list[float] = [hbm_bytes] if hbm_bytes else []

    for algorithm, (formula, parts) in FORMULAS.items():
        curve = [formula(int(n), batch, heads, head_dim, dtype_bytes) for n in curve_x]
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

    oom = [r for r in records if r["status"] == "oom"]
    if oom:
        with_need = [r for r in oom if oom_need(r)]
        plotted += [oom_need(r) for r in with_need]
        fig.add_trace(
            go.Scatter(
                x=np.array([r["seq_len"] for r in with_need]),
                y=np.array([oom_need(r) for r in with_need], dtype=np.float64),
                mode="markers",
                name="out of memory (what it needs)",
                marker=dict(symbol="x", size=20, color=PALETTE["oom"], line=dict(width=2)),
                text=[f"{algorithm_label(r['algorithm'])} out of memory: {oom_text(r)}" for r in with_need],
                hovertemplate="N = %{x}: %{text}<extra></extra>",
            )
        )
        _oom_wall(fig, _first_wall(oom), x_max=hi * 2)
    if hbm_bytes:
        horizontal_marker(fig, hbm_bytes, f"device memory {fmt_bytes(hbm_bytes)}", theme)
    if seq_len_marker:
        vertical_marker(fig, seq_len_marker, f"N = {fmt_tokens(seq_len_marker)}", theme,
                        at_right_end=seq_len_marker >= hi)

    title = f"Extra memory beyond Q, K, V · batch {batch} × {heads} heads, d = {head_dim}"
    if oom:  # the wall in words, under the title: a label inside the plot would cross the curves
        title += f"<br><sup>{wall_text(_first_wall(oom))}</sup>"
    style(fig, theme, title=title)
    fig.update_xaxes(title_text="sequence length N (tokens)", **token_axis([lo, hi]))
    fig.update_yaxes(title_text="extra memory", **bytes_axis(plotted))
    # the legend at the figure's foot, under the axis title at any height: two rows of entries
    # a second title line (the wall) needs room above the "N = …" marker's label
    fig.update_layout(height=height, margin_b=150, margin_t=150 if oom else 110,
                      legend=dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom"))
    return fig
