"""After the run: how many times each K/V tile came from HBM, over all Q blocks (from the trace's `loads`).

FlashAttention-2's order loads every K and V tile once per Q block that needs it: the Θ(N²d²/M) term of
the paper's IO bound. The FA1 order loads each once and pays instead with O, m and l round trips. Beside
the counts, what the cost model says of them: the no-cache bound (costmodel.flash_traffic_no_cache) and the
L2-aware model (costmodel.flash_kv_reads_l2: programs of one head in flight share its K and V in L2), at
the traced N and at the talk's sequence length.
"""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go

from costmodel import IO_TENSORS, Machine, Shape, flash_kv_reads_l2, n_blocks
from fmt import fmt_bytes, fmt_tokens
from viz.animation import loop, loop_orders, order_label, trace_shape, validated
from viz.theme import PALETTE, SMALLEST_TEXT_PX, style, surface

HEIGHT_PX = 700
HOW_CHARS = 56  # the L2 model's machine in words, wrapped to the notes' width
MAX_CELL_LABELS = 16  # per side: beyond this, the counts are on hover only


def kv_loads(trace: dict) -> tuple[np.ndarray, np.ndarray]:
    """From the trace's `loads`: (loads, nth), both (n_q_blocks, n_k_tiles) int. loads: how many times the
    step of each (Q block, K/V tile) loaded the K tile; nth: how many times that tile had come from HBM by
    that step (0 where the step did not run)."""
    arrays = validated(trace)
    block_n = int(trace["block_n"])
    loads = np.asarray(trace["loads"], dtype=np.int64)
    k = IO_TENSORS.index("K")
    shape = (n_blocks(int(trace["seq_len"]), int(trace["block_m"])), n_blocks(int(trace["seq_len"]), block_n))
    counts, nth = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    so_far = np.zeros(shape[1], dtype=np.int64)
    for (q_block, k_block), (start, end) in zip(arrays["steps"], loads[:, k]):
        if end > start:
            counts[q_block, start // block_n] += 1
            so_far[start // block_n] += 1
        nth[q_block, k_block] = so_far[k_block]
    return counts, nth


def kv_bytes(order: str, shape: Shape, block_m: int, block_n: int) -> int:
    """K and V bytes one head's kernel of a loop order loads with no cache, by the cost model."""
    parts = loop(order).traffic(shape.one_head(), block_m, block_n)
    return next(p.reads for p in parts if "K, V" in p.name)


def _l2_line(shape: Shape, block_m: int, block_n: int, machine: Machine | None, device_label: str) -> str:
    seq_len = shape.seq_len
    no_cache = kv_bytes("fa2", shape, block_m, block_n)
    once = 2 * seq_len * shape.head_dim * shape.dtype_bytes
    # the tiles said with the bytes: the compare scene's numbers are at the timed kernel's tiles, these at the trace's
    head = (f"<b>N = {fmt_tokens(seq_len)}</b>, {order_label('fa2')}, {block_m}×{block_n} tiles, K and V of one "
            f"head:<br>  no cache {fmt_bytes(no_cache)} (K, V once: {fmt_bytes(once)})")
    if machine is None:
        return f"{head}<br>  what L2 catches needs the GPU's L2 size (unknown here)"
    l2 = flash_kv_reads_l2(shape.one_head(), block_m, block_n, machine.l2_bytes, machine.programs_in_flight)
    repeats = no_cache - once
    caught = (no_cache - l2) / repeats if repeats > 0 else 1.0
    return (f"{head}<br>  L2-aware model: {fmt_bytes(l2)} from HBM, {caught:.0%} of re-reads hit<br>"
            f"  the {fmt_bytes(machine.l2_bytes, 0)} L2 of {device_label}<br>  "
            + "<br>  ".join(textwrap.wrap(f"({machine.how})", HOW_CHARS)))


def rereads_figure(trace: dict, machine: Machine | None = None, device_label: str = "",
                   talk_seq_len: int | None = None, theme: str = "light", height: int = HEIGHT_PX) -> go.Figure:
    """A heatmap of K/V tile loads per (Q block, K/V tile) of the traced run, a bar of loads per tile, and
    the cost model's word on re-reads with and without L2 (at the traced N and at `talk_seq_len`)."""
    arrays = validated(trace)
    order = arrays["order"]
    seq_len = int(trace["seq_len"])
    block_m, block_n = int(trace["block_m"]), int(trace["block_n"])
    counts, nth = kv_loads(trace)
    per_tile = counts.sum(axis=0)
    num_q, num_k = counts.shape
    colors = surface(theme)
    fig = go.Figure()
    show_text = max(num_q, num_k) <= MAX_CELL_LABELS
    fig.add_trace(go.Heatmap(
        z=np.where(nth > 0, nth, np.nan), x=np.arange(num_k), y=np.arange(num_q), zmin=0,
        zmax=max(1, int(nth.max())), colorscale=[[0, PALETTE["done"]], [1, PALETTE["read"]]], showscale=False,
        xgap=2, ygap=2, text=np.where(nth > 0, nth.astype(str), "") if show_text else None,
        texttemplate="%{text}" if show_text else None, textfont=dict(size=SMALLEST_TEXT_PX),
        hovertemplate="Q block %{y} used K/V tile %{x}: its load number %{z} from HBM<extra></extra>"))
    fig.add_trace(go.Bar(x=np.arange(num_k), y=per_tile, xaxis="x2", yaxis="y2", marker_color=PALETTE["read"],
                         text=per_tile, textposition="outside", textfont=dict(size=SMALLEST_TEXT_PX), cliponaxis=False,
                         hovertemplate="K/V tile %{x}: loaded %{y} time(s)<extra></extra>", showlegend=False))
    total_loads = int(per_tile.sum())
    shape = trace_shape(trace)
    traced = kv_bytes(order, shape, block_m, block_n)
    other = next(name for name in loop_orders() if name != order)
    other_bytes = kv_bytes(other, shape, block_m, block_n)
    notes = [
        f"<b>{order_label(order)}</b>: {total_loads} K/V tile loads for {num_k} tiles,",
        f"{fmt_bytes(traced)} of K, V from HBM (no cache; {order_label(other)}: {fmt_bytes(other_bytes)})",
        "a cell: which load of its tile that Q block used",
        "FA2 re-reads each tile once per Q block that needs it:",
        "the N²d²/M term of the IO bound (M: SRAM size)",
        "",
        _l2_line(shape, block_m, block_n, machine, device_label),
    ]
    if talk_seq_len and talk_seq_len != seq_len:
        notes.append(_l2_line(shape.at(seq_len=talk_seq_len, kv_len=talk_seq_len), block_m, block_n, machine,
                              device_label))
    fig.add_annotation(text="<br>".join(notes), x=0.5, y=1.0, xref="paper", yref="paper", xanchor="left",
                       yanchor="top", align="left", showarrow=False, font_size=SMALLEST_TEXT_PX)
    style(fig, theme)
    fig.update_layout(
        height=height, margin=dict(t=60, b=80, l=90, r=20), showlegend=False, font_size=SMALLEST_TEXT_PX,
        title=dict(text=f"K/V tile loads over the whole run (N = {fmt_tokens(seq_len)}, "
                        f"{block_m}×{block_n} tiles{', causal' if shape.causal else ''})", font_size=SMALLEST_TEXT_PX + 2),
        xaxis=dict(domain=[0, 0.44], anchor="y", title_text="K/V tile", range=[-0.5, num_k - 0.5], dtick=1,
                   showgrid=False, tickfont_size=SMALLEST_TEXT_PX, title_font_size=SMALLEST_TEXT_PX),
        yaxis=dict(domain=[0, 0.68], anchor="x", title_text="Q block", range=[num_q - 0.5, -0.5], dtick=1,
                   showgrid=False, tickfont_size=SMALLEST_TEXT_PX, title_font_size=SMALLEST_TEXT_PX),
        xaxis2=dict(domain=[0, 0.44], anchor="y2", matches="x", showticklabels=False, showgrid=False),
        yaxis2=dict(domain=[0.76, 0.98], anchor="x2", range=[0, 1.35 * max(1, int(per_tile.max()))],
                    title_text="loads", showgrid=False, tickfont_size=SMALLEST_TEXT_PX,
                    title_font_size=SMALLEST_TEXT_PX),
        paper_bgcolor=colors["background"],
    )
    return fig
