"""The GPU memory hierarchy from the measured device facts: on-chip SRAM, L2, HBM, on a log scale."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz.marks import bytes_axis, positive
from viz.theme import PALETTE, fmt_bytes, style, surface

NOT_MEASURED = "not measured"


def _levels(facts: dict) -> list[dict]:
    """Name, size in bytes (None when unknown), detail line and colours of each level, fastest first."""
    sm_count, smem_per_sm = facts.get("sm_count"), facts.get("smem_per_sm_bytes")
    per_block = facts.get("smem_per_block_bytes")
    if sm_count and smem_per_sm:
        sram_detail = f"{fmt_bytes(smem_per_sm)} per SM × {sm_count} SMs"
        if per_block:
            sram_detail += f" (≤ {fmt_bytes(per_block)} per block)"
    else:
        sram_detail = f"shared memory per SM × SMs: {NOT_MEASURED}"
    copy_gbps = facts.get("copy_gbps")
    bandwidth = f"copy bandwidth {copy_gbps:,.0f} GB/s (measured)" if copy_gbps else f"copy bandwidth {NOT_MEASURED}"
    return [
        dict(name="on-chip SRAM", size=sm_count * smem_per_sm if sm_count and smem_per_sm else None,
             detail=sram_detail, color=PALETTE["sram"], text_color="#111111"),
        dict(name="L2 cache", size=facts.get("l2_bytes"), detail="shared by all SMs", color=PALETTE["l2"],
             text_color="#111111"),
        dict(name="HBM", size=facts.get("hbm_bytes"), detail=bandwidth, color=PALETTE["hbm"], text_color="#FFFFFF"),
    ]  # fmt: skip


def hierarchy_figure(facts: dict, theme: str = "light", height: int = 520) -> go.Figure:
    """Sizes (bytes, log scale) of SRAM (shared memory per SM × SMs), L2 and HBM from device facts
    (docs/data-contracts.md), each labelled with its number; None values read "not measured"."""
    levels = _levels(facts)
    categories = [f"<b>{level['name']}</b><br>{level['detail']}" for level in levels]
    sizes = [level["size"] for level in levels]
    axis = bytes_axis(sizes, pad=4.0) if positive(sizes) else bytes_axis([2**20, 2**40])
    fig = go.Figure(
        go.Bar(
            y=categories,
            x=np.array(sizes, dtype=np.float64),  # None → NaN: no bar
            orientation="h",
            marker_color=[level["color"] for level in levels],
            text=[fmt_bytes(size) if size else "" for size in sizes],
            textposition="inside",
            insidetextanchor="end",
            textfont=dict(color=[level["text_color"] for level in levels]),  # the higher-contrast of black/white
            hovertemplate="%{y}<br>%{x:,} bytes<extra></extra>",
            showlegend=False,
        )
    )
    missing = [category for category, size in zip(categories, sizes) if not size]
    if missing:
        fig.add_trace(
            go.Scatter(
                y=missing,
                x=np.full(len(missing), 10 ** axis["range"][0] * 1.5),  # just right of the axis start
                mode="text",
                text=[NOT_MEASURED] * len(missing),
                textposition="middle right",
                textfont=dict(color=surface(theme)["muted"]),
                hoverinfo="skip",
                showlegend=False,
            )
        )
    name = facts.get("name") or "this GPU"
    subtitle = "↑ smaller, faster, on chip · ↓ larger, slower"
    style(fig, theme, title=f"{name}: memory hierarchy<br><sup>{subtitle}</sup>")
    fig.update_xaxes(title_text="capacity (log scale)", **axis)
    fig.update_yaxes(categoryorder="array", categoryarray=categories[::-1])  # SRAM on top
    fig.update_layout(height=height, bargap=0.35)
    return fig
