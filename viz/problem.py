"""The N×N problem: bytes of the attention score matrix versus sequence length."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from costmodel import SEQ_LENS, Shape, scores_bytes

from viz.marks import bytes_axis, bytes_curve, horizontal_marker, token_axis, vertical_marker
from viz.theme import PALETTE, REDDISH_PURPLE, VERMILLION, style
from fmt import fmt_bytes, fmt_tokens, plotly_text

DTYPES = ((4, "fp32 (4 bytes)", REDDISH_PURPLE), (2, "bf16 / fp16 (2 bytes)", VERMILLION))


def scores_memory_figure(
    seq_len: int,
    heads: int,
    dtype_bytes: int,
    hbm_bytes: int | None = None,
    theme: str = "light",
    height: int = 600,
    wall: dict | None = None,
) -> go.Figure:
    """Bytes of the N×N scores (N·N·bytes·heads, batch 1) vs N (tokens), log-log, for fp32 and 2-byte
    dtypes; the current (seq_len, heads, dtype_bytes) point is annotated, device memory is a line.

    wall: where the standard kernels stop fitting the device at the talk's setting, as the story says it
    (story.standard_wall: "seq_len", "label" for the dashed line, "text" under the title); None: no wall.
    The figure computes no wall of its own."""
    seq_lens = np.array(sorted({*SEQ_LENS, seq_len, *([wall["seq_len"]] if wall else [])}), dtype=np.int64)
    current = scores_bytes(Shape(seq_len, 1, heads), dtype_bytes)
    fig = go.Figure()
    plotted: list[float] = [current] + ([hbm_bytes] if hbm_bytes else [])
    for element_bytes, name, color in DTYPES:
        curve = [scores_bytes(Shape(int(n), 1, heads), element_bytes) for n in seq_lens]
        plotted += curve
        width = 6 if element_bytes == dtype_bytes else 3  # the current dtype's line is the thick one
        fig.add_trace(bytes_curve(seq_lens, curve, name, dict(color=color, width=width)))
    head_text = f"{heads} head" + ("s" if heads != 1 else "")
    fig.add_trace(
        go.Scatter(
            x=[seq_len],
            y=[float(current)],
            mode="markers",
            marker=dict(size=22, color=PALETTE["highlight"], line=dict(width=2, color=VERMILLION)),
            name="this setting",
            hoverinfo="skip",
        )
    )
    # the setting in words, in the plot's empty top-left corner (the curves rise to the right): beside the point
    # it ran off the plot at small N and into the title at large N
    fig.add_annotation(x=0.01, y=0.99, xref="x domain", yref="y domain", xanchor="left", yanchor="top",
                       showarrow=False, align="left",
                       text=f"this setting: {fmt_tokens(seq_len)} tokens · {head_text} · {dtype_bytes} B → "
                            f"<b>{fmt_bytes(current)}</b>")
    if hbm_bytes:
        horizontal_marker(fig, hbm_bytes, f"device memory {fmt_bytes(hbm_bytes)}", theme)
    title = "The N×N score matrix grows as N²<br><sup>one sequence (batch 1), S only</sup>"
    if wall:
        # its label at the bottom, left of the line: the curves rise to the right, above it
        vertical_marker(fig, wall["seq_len"], plotly_text(wall["label"]), theme, color=VERMILLION,
                        at_right_end=True, at_bottom=True)
        title += f"<br><sup>{plotly_text(wall['text'])}</sup>"
    style(fig, theme, title=title)
    fig.update_xaxes(title_text="sequence length N (tokens)", **token_axis(seq_lens))
    fig.update_yaxes(title_text="bytes of S", **bytes_axis(plotted))
    # bottom right stays empty: every curve rises to the right
    fig.update_layout(height=height, legend=dict(x=0.99, y=0.02, xanchor="right", yanchor="bottom"))
    if wall:  # a third title line
        fig.update_layout(margin_t=160)
    return fig
