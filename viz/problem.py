"""The N×N problem: the memory the standard kernels hold at the talk's setting versus sequence length, and where it
no longer fits the device."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from costmodel import SEQ_LENS, Shape, scores_bytes, standard_device_bytes

from viz.marks import bytes_axis, bytes_curve, horizontal_marker, token_axis, vertical_marker
from viz.theme import PALETTE, REDDISH_PURPLE, VERMILLION, style
from fmt import fmt_bytes, fmt_tokens, plotly_text

WHOLE = "the standard kernels: Q, K, V, S (fp32), P, O"
MATRICES = "of it, the N×N matrices: S (fp32) and P"


def scores_memory_figure(shape: Shape, hbm_bytes: int | None = None, theme: str = "light", height: int = 600,
                         wall: dict | None = None) -> go.Figure:
    """Device memory the standard kernels hold at the talk's shape (its batch × heads, head_dim, dtype) vs N, log-log:
    all of it (the quantity that meets the device's memory: costmodel.standard_device_bytes) and of it the N×N
    matrices S and P; the talk's N is a point on the first curve, device memory a line.

    wall: where that memory stops fitting the device, as the story says it (story.standard_wall: "seq_len", "label"
    for the dashed line, "text" under the title); None: no wall. The figure computes no wall of its own."""
    seq_len = shape.seq_len
    seq_lens = np.array(sorted({*SEQ_LENS, seq_len, *([wall["seq_len"]] if wall else [])}), dtype=np.int64)
    at = [shape.at(seq_len=int(n), kv_len=int(n)) for n in seq_lens]
    whole = [standard_device_bytes(s) for s in at]
    matrices = [scores_bytes(s, 4) + scores_bytes(s) for s in at]
    current = standard_device_bytes(shape)
    fig = go.Figure()
    fig.add_trace(bytes_curve(seq_lens, whole, WHOLE, dict(color=VERMILLION, width=6)))
    fig.add_trace(bytes_curve(seq_lens, matrices, MATRICES, dict(color=REDDISH_PURPLE, width=3, dash="dot")))
    fig.add_trace(go.Scatter(x=[seq_len], y=[float(current)], mode="markers", name="this setting", hoverinfo="skip",
                             marker=dict(size=22, color=PALETTE["highlight"], line=dict(width=2, color=VERMILLION))))
    setting = (f"batch {shape.batch} × {shape.heads} head{'s' if shape.heads != 1 else ''}, head_dim "
               f"{shape.head_dim}, {shape.dtype}")
    # the setting in words, in the plot's empty top-left corner (the curves rise to the right)
    fig.add_annotation(x=0.01, y=0.99, xref="x domain", yref="y domain", xanchor="left", yanchor="top",
                       showarrow=False, align="left",
                       text=f"this setting: {fmt_tokens(seq_len)} tokens · {setting} → <b>{fmt_bytes(current)}</b>")
    if hbm_bytes:
        horizontal_marker(fig, hbm_bytes, f"device memory {fmt_bytes(hbm_bytes)}", theme)
    title = f"The standard kernels' memory grows as N²<br><sup>the talk's setting: {plotly_text(setting)}</sup>"
    if wall:
        # its label at the bottom, left of the line: the curves rise to the right, above it
        vertical_marker(fig, wall["seq_len"], plotly_text(wall["label"]), theme, color=VERMILLION,
                        at_right_end=True, at_bottom=True)
        title += f"<br><sup>{plotly_text(wall['text'])}</sup>"
    style(fig, theme, title=title)
    plotted = whole + matrices + ([hbm_bytes] if hbm_bytes else [])
    fig.update_xaxes(title_text="sequence length N (tokens)", **token_axis(seq_lens))
    fig.update_yaxes(title_text="device memory", **bytes_axis(plotted))
    # bottom right stays empty: every curve rises to the right
    fig.update_layout(height=height, legend=dict(x=0.99, y=0.02, xanchor="right", yanchor="bottom"))
    if wall:  # a third title line
        fig.update_layout(margin_t=160)
    return fig
