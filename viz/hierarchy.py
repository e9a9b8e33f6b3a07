"""The GPU memory hierarchy from the device facts: capacity and bandwidth of registers, on-chip SRAM, L2 and HBM."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from costmodel import REGISTER_BYTES_PER_SM, SMEM_BYTES_PER_CLOCK_PER_SM, datasheet, sram_bandwidth_gbps
from fmt import fmt_bytes, plotly_text
from viz.marks import bandwidth_axis, bytes_axis, fmt_bandwidth, positive
from viz.theme import PALETTE, SMALLEST_TEXT_PX, style, surface

NOT_MEASURED = "not measured"


def _levels(facts: dict) -> list[dict]:
    """Name, size and bandwidth (None when unknown), detail lines and colours of each level, fastest first."""
    sm_count, smem_per_sm = facts.get("sm_count"), facts.get("smem_per_sm_bytes")
    per_block, clock = facts.get("smem_per_block_bytes"), facts.get("sm_clock_mhz")
    if sm_count and smem_per_sm:
        sram_detail = f"{fmt_bytes(smem_per_sm)} per SM × {sm_count} SMs"
        if per_block:
            sram_detail += f" (≤ {fmt_bytes(per_block)} per block)"
    else:
        sram_detail = f"shared memory per SM × SMs: {NOT_MEASURED}"
    sram_gbps = sram_bandwidth_gbps(sm_count, clock) if sm_count and clock else None
    sheet = datasheet(facts.get("name"))
    return [
        dict(name="registers", size=sm_count * REGISTER_BYTES_PER_SM if sm_count else None,
             detail=f"{fmt_bytes(REGISTER_BYTES_PER_SM)} per SM (spec): a tile's S, P, O", gbps=None,
             how="spec: 64K 32-bit registers per SM", missing="no one rate: every instruction reads them",
             color=PALETTE["registers"]),
        dict(name="on-chip SRAM", size=sm_count * smem_per_sm if sm_count and smem_per_sm else None,
             detail=sram_detail, gbps=sram_gbps,
             how=f"derived from the spec: {SMEM_BYTES_PER_CLOCK_PER_SM} B/clock × {sm_count} SMs × {clock:,.0f} MHz"
             if sram_gbps
             else NOT_MEASURED, color=PALETTE["sram"]),
        dict(name="L2 cache", size=facts.get("l2_bytes"), detail="shared by all SMs", gbps=facts.get("l2_gbps"),
             how="measured: reads of an L2-resident buffer" if facts.get("l2_gbps") else NOT_MEASURED,
             color=PALETTE["l2"]),
        dict(name="HBM", size=facts.get("hbm_bytes"),
             detail="device memory" + (f" (datasheet: {sheet.hbm_tbps:g} TB/s)" if sheet else ""),
             gbps=facts.get("copy_gbps"), digits=2,  # the copy roof: to 10 GB/s, as the story and roofline quote it
             how="measured: device-to-device copy, read + write" if facts.get("copy_gbps") else NOT_MEASURED,
             color=PALETTE["hbm"]),
    ]  # fmt: skip


def _bandwidth_text(gbps: float | None, digits: int = 1) -> str:
    return fmt_bandwidth(gbps * 1e9, digits) if gbps else ""


def hierarchy_figure(facts: dict, theme: str = "light", height: int = 520) -> go.Figure:
    """Capacity (bytes, log scale, binary units) and bandwidth (bytes/s, log scale, decimal units) of the registers
    (spec, no bandwidth drawn), SRAM (shared memory per SM × SMs), L2 and HBM from device facts (docs/data-contracts.md), side by side; unknown values read
    "not measured".
    SRAM bandwidth is the spec width × SMs × max clock (labelled "derived from the spec"); L2 and HBM are measured."""
    levels = _levels(facts)
    categories = [f"<b>{level['name']}</b><br>{level['detail']}" for level in levels]
    sizes = [level["size"] for level in levels]
    rates = [level["gbps"] * 1e9 if level["gbps"] else None for level in levels]  # bytes/s
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("capacity", "bandwidth (bytes/s)"))
    for col, values, texts in ((1, sizes, [fmt_bytes(size) if size else "" for size in sizes]),
                               (2, rates, [_bandwidth_text(level["gbps"], level.get("digits", 1)) for level in levels])):
        fig.add_trace(
            go.Bar(
                y=categories,
                x=np.array(values, dtype=np.float64),  # None → NaN: no bar
                orientation="h",
                marker_color=[level["color"] for level in levels],
                text=texts,
                textposition="outside",  # right of its bar: a log-scale bar can be too short for its label
                textangle=0,
                constraintext="none",  # never shrunk to its bar's size
                cliponaxis=False,
                outsidetextfont=dict(color=surface(theme)["foreground"]),
                customdata=[level["how"] for level in levels] if col == 2 else None,
                hovertemplate="%{y}<br>%{text}" + ("<br>%{customdata}" if col == 2 else "") + "<extra></extra>",
                showlegend=False,
            ),
            row=1, col=col,
        )
        # sizes in binary units (KiB, MiB, GiB), bandwidths in decimal ones (GB/s, TB/s), as each is quoted
        if col == 1:
            # pad 8: room right of the longest bar for its label ("139.8 GiB" touched the next panel at 4)
            axis = bytes_axis(values, pad=8.0) if positive(values) else bytes_axis([2**20, 2**40])
        else:
            axis = bandwidth_axis(values, pad=4.0) if positive(values) else bandwidth_axis([1e9, 1e13])
        fig.update_xaxes(**axis, row=1, col=col)
        missing = [(category, level.get("missing", NOT_MEASURED) if col == 2 else NOT_MEASURED)
                   for category, level, value in zip(categories, levels, values) if not value]
        if missing:
            fig.add_trace(
                go.Scatter(
                    y=[category for category, _ in missing],
                    x=np.full(len(missing), 10 ** axis["range"][0] * 1.5),  # just right of the axis start
                    mode="text",
                    text=[why for _, why in missing],
                    textposition="middle right",
                    textfont=dict(color=surface(theme)["muted"]),
                    hoverinfo="skip",
                    showlegend=False,
                ),
                row=1, col=col,
            )
    name = plotly_text(facts.get("name") or "this GPU")  # a results file's text: shown, never drawn as HTML
    subtitle = "↑ smaller, faster, on chip · ↓ larger, slower · SRAM bandwidth: derived from the spec; L2, HBM: measured"
    style(fig, theme, title=f"{name}: memory hierarchy<br><sup>{subtitle}</sup>")
    fig.update_annotations(font_size=SMALLEST_TEXT_PX)  # the subplot titles (plotly's default is 16 px)
    fig.update_yaxes(categoryorder="array", categoryarray=categories[::-1])  # registers on top
    fig.update_layout(height=height, bargap=0.35, margin=dict(t=150))  # the subplot titles under the subtitle
    return fig
