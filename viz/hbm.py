"""The HBM ↔ SRAM picture of the flash kernel, step by step, from its trace.

Left, HBM: Q, K, V, O and the LSE as N-row columns (and, for the FlashAttention-1 loop order, the fp32 O,
m and l it keeps there between steps). At each step the rows the kernel loaded light up in the read colour
and the rows it stored in the write colour, with arrows to and from the SRAM box (the trace's `loads` and
`stores`, kernels/trace.py). Right, SRAM: the buffers one program holds (costmodel.sram_buffers) against
the device's shared memory per block, those the step filled from HBM or wrote back marked. Below, the
bytes read and written so far by both loop orders and by standard attention at the same step, all from
the cost model (costmodel.step_traffic, costmodel.fa1_step_traffic): the numbers never come from here.

Animated like viz/tiling.py: one frame per step, scatter and bar traces restyled in place, nothing redrawn.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from costmodel import IO_TENSORS, dtype_bytes, fa1_step_traffic, n_blocks, smem_bytes, sram_buffers, step_traffic
from viz.theme import PALETTE, style, surface
from fmt import fmt_bytes, fmt_tokens
from viz.tiling import (MAX_TILES_PER_SIDE, ORDER_NAMES, SPEEDS, _play_buttons, _step_slider, _typed,
                        _validated)

TEXT_PX = 24  # 1/45 of a 1080-pixel screen: the smallest text the back of the room reads
COLUMN_NAMES = {"Q": "Q", "K": "K", "V": "V", "O": "O", "LSE": "LSE", "state": "O, m, l"}
# which SRAM buffer each HBM tensor is loaded into or stored from
TENSOR_BUFFER = {"Q": "Q block", "K": "K tile", "V": "V tile", "O": "O acc", "LSE": "m, l", "state": "O acc"}
READ_COLOR, WRITE_COLOR = PALETTE["flash"], PALETTE["naive"]
HEIGHT_PX = 700
CAPTION_PX = 100
CONTROLS_PX = 100
COUNTER_ROWS = ("fa2", "fa1", "fa1_state", "naive")
COUNTER_NAMES = {"fa2": "flash, FA2 order", "fa1": "flash, FA1 order", "fa1_state": "of it O, m, l trips",
                 "naive": "standard"}
COUNTER_COLORS = {"fa2": PALETTE["flash"], "fa1": PALETTE["flash_v1"], "fa1_state": PALETTE["flash_v1"],
                  "naive": PALETTE["naive"]}
HBM_DOMAIN = ([0.0, 0.36], [0.0, 1.0])
SRAM_DOMAIN = ([0.56, 1.0], [0.55, 0.925])
SRAM_BOX_PAD = 0.01  # paper units between the SRAM box's left edge and its bars
COUNTER_DOMAIN = ([0.56, 1.0], [0.0, 0.28])
# trace indices; frames update ANIMATED
(O_DONE, READS, WRITES, READ_ARROWS, WRITE_ARROWS, BUFFERS, READ_BARS, WRITTEN_BARS, COUNTER_LABELS,
 CAPTION) = range(10)
ANIMATED = [O_DONE, READS, WRITES, READ_ARROWS, WRITE_ARROWS, BUFFERS, READ_BARS, WRITTEN_BARS, COUNTER_LABELS,
            CAPTION]


def counters(order: str, seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool,
             element_bytes: int) -> dict[tuple[str, str], np.ndarray]:
    """Cumulative bytes read and written per COUNTER_ROWS entry after each step, from the cost model: flash in
    either order, of FA1's the O, m, l round trips, and standard attention. The step index is the
    kernel's own; the other order's counter is at its own step of the same number (both visit the same
    tiles, so both end at their totals together)."""
    fa2 = step_traffic(seq_len, head_dim, block_m, block_n, causal, element_bytes)
    fa1 = fa1_step_traffic(seq_len, head_dim, block_m, block_n, causal, element_bytes)
    return {("fa2", "read"): fa2["flash_read"], ("fa2", "written"): fa2["flash_written"],
            ("fa1", "read"): fa1["flash_v1_read"], ("fa1", "written"): fa1["flash_v1_written"],
            ("fa1_state", "read"): fa1["state_read"], ("fa1_state", "written"): fa1["state_written"],
            ("naive", "read"): fa2["naive_read"], ("naive", "written"): fa2["naive_written"]}


def _columns(order: str) -> list[str]:
    return [name for name in IO_TENSORS if order == "fa1" or name != "state"]


def _row_label(rows: tuple[int, int]) -> str:
    return f"{rows[0]}–{rows[1] - 1}" if rows[1] - rows[0] > 1 else str(rows[0])


def _moved_words(ranges: np.ndarray, columns: list[str]) -> str:
    parts = [f"{name.replace('state', 'O, m, l')} [{_row_label(tuple(ranges[IO_TENSORS.index(name)]))}]"
             for name in columns if ranges[IO_TENSORS.index(name)][1] > ranges[IO_TENSORS.index(name)][0]]
    return ", ".join(parts) if parts else "nothing"


def hbm_sram_figure(trace: dict, smem_per_block_bytes: int | None = None, device_label: str = "",
                    theme: str = "light", frame_ms: int = 250, start_step: int = 0,
                    height: int = HEIGHT_PX) -> go.Figure:
    """One (batch, head) of the flash forward as HBM ↔ SRAM traffic, one frame per kernel step.

    trace: a FlashTrace dict with `loads` and `stores` (kernels/trace.py), either loop order.
    smem_per_block_bytes: the device's shared memory per thread block (device facts), None when unknown;
    device_label names where it comes from ("NVIDIA H200", "H200 (recorded)").
    """
    arrays = _validated(trace)
    order, schedule = arrays["order"], arrays["schedule"]
    seq_len, head_dim = int(trace["seq_len"]), int(trace["head_dim"])
    block_m, block_n, causal = int(trace["block_m"]), int(trace["block_n"]), bool(trace["causal"])
    if max(n_blocks(seq_len, block_m), n_blocks(seq_len, block_n)) > MAX_TILES_PER_SIDE:
        raise ValueError(f"too many tiles to animate (at most {MAX_TILES_PER_SIDE} per side): use larger tiles")
    if trace.get("loads") is None or trace.get("stores") is None:
        raise ValueError("the trace says nothing of what each step loaded and stored (loads, stores): "
                         "record it with kernels.trace.trace_flash")
    loads = np.asarray(trace["loads"], dtype=np.int64)
    stores = np.asarray(trace["stores"], dtype=np.int64)
    num_steps = len(schedule)
    if loads.shape != (num_steps, len(IO_TENSORS), 2) or stores.shape != loads.shape:
        raise ValueError(f"trace loads/stores have shape {loads.shape}/{stores.shape}, expected "
                         f"({num_steps}, {len(IO_TENSORS)}, 2)")
    if not 0 <= start_step < num_steps:
        raise ValueError(f"start_step must be in [0, {num_steps}), got {start_step}")
    element_bytes = dtype_bytes(trace["dtype"])
    counts = counters(order, seq_len, head_dim, block_m, block_n, causal, element_bytes)
    own_read, own_written = counts[(order, "read")], counts[(order, "written")]
    buffers = sram_buffers(block_m, block_n, head_dim, element_bytes)
    buffers = {("m, l" if name in ("m", "l") else name): size for name, size in buffers.items()}  # one row
    buffers["m, l"] = 2 * sram_buffers(block_m, block_n, head_dim, element_bytes)["m"]
    buffer_names = list(buffers)
    columns = _columns(order)
    column_x = {name: i for i, name in enumerate(columns)}
    colors = surface(theme)
    plot_px = height - CAPTION_PX - CONTROLS_PX

    # geometry in paper coordinates, for the arrows (one overlay axis pair spans the plot area)
    def column_paper_x(x: float) -> float:
        (x0, x1), _ = HBM_DOMAIN
        return x0 + (x + 0.5) / len(columns) * (x1 - x0)

    def row_paper_y(row: float) -> float:
        _, (y0, y1) = HBM_DOMAIN
        return y1 - row / seq_len * (y1 - y0)

    def buffer_paper_y(index: int) -> float:
        _, (y0, y1) = SRAM_DOMAIN
        return y1 - (index + 0.5) / len(buffer_names) * (y1 - y0)

    sram_left = SRAM_DOMAIN[0][0] - SRAM_BOX_PAD  # the arrows end at the SRAM box, whose rows name their buffers

    def arrows(ranges: np.ndarray, to_sram: bool) -> dict:
        x: list[float | None] = []
        y: list[float | None] = []
        size: list[int] = []
        for name in columns:
            start, end = ranges[IO_TENSORS.index(name)]
            if end <= start:
                continue
            hbm = (column_paper_x(column_x[name] + 0.38), row_paper_y((start + end) / 2))
            sram = (sram_left, buffer_paper_y(buffer_names.index(TENSOR_BUFFER[name])))
            tail, head = (hbm, sram) if to_sram else (sram, hbm)
            x += [tail[0], head[0], None]
            y += [tail[1], head[1], None]
            size += [0, 18, 0]
        return {"x": x, "y": y, "marker": {"size": size}}

    def bars(ranges: np.ndarray) -> dict:
        return {"base": [int(ranges[IO_TENSORS.index(name)][0]) for name in columns],
                "y": [int(ranges[IO_TENSORS.index(name)][1] - ranges[IO_TENSORS.index(name)][0]) for name in columns]}

    o_index = IO_TENSORS.index("O")
    o_done = np.maximum.accumulate(stores[:, o_index, 1])  # final O rows so far: a prefix in either order

    def frame_data(t: int) -> list[dict]:
        filled = {TENSOR_BUFFER[name] for name in columns if loads[t, IO_TENSORS.index(name), 1] >
                  loads[t, IO_TENSORS.index(name), 0]}
        stored = {TENSOR_BUFFER[name] for name in columns if stores[t, IO_TENSORS.index(name), 1] >
                  stores[t, IO_TENSORS.index(name), 0]}
        if "state" in columns and loads[t, IO_TENSORS.index("state"), 1] > loads[t, IO_TENSORS.index("state"), 0]:
            filled.add("m, l")
        if "state" in columns and stores[t, IO_TENSORS.index("state"), 1] > stores[t, IO_TENSORS.index("state"), 0]:
            stored.add("m, l")
        buffer_colors = [WRITE_COLOR if name in stored else READ_COLOR if name in filled else PALETTE["sram"]
                         for name in buffer_names]
        read = [int(counts[(who, "read")][t]) for who in COUNTER_ROWS]
        written = [int(counts[(who, "written")][t]) for who in COUNTER_ROWS]
        ends = [r + w for r, w in zip(read, written)]
        read_now = int(own_read[t] - (own_read[t - 1] if t else 0))
        written_now = int(own_written[t] - (own_written[t - 1] if t else 0))
        step = schedule[t]
        caption = (f"step {t + 1}/{num_steps} · {ORDER_NAMES[order]} · Q block {step.q_block}, K/V tile "
                   f"{step.k_block}<br>read {_moved_words(loads[t], columns)} ({fmt_bytes(read_now)}) · wrote "
                   f"{_moved_words(stores[t], columns)} ({fmt_bytes(written_now)})")
        return [
            dict(type="bar", y=[int(o_done[t])]),
            dict(type="bar", **bars(loads[t])),
            dict(type="bar", **bars(stores[t])),
            dict(type="scatter", **arrows(loads[t], to_sram=True)),
            dict(type="scatter", **arrows(stores[t], to_sram=False)),
            dict(type="bar", marker={"color": buffer_colors}),
            dict(type="bar", x=read),
            dict(type="bar", x=written, base=read),
            dict(type="scatter", x=ends,
                 text=[f" {fmt_bytes(r, 0)} + {fmt_bytes(w, 0)}" for r, w in zip(read, written)]),
            dict(type="scatter", text=[caption]),
        ]

    start = dict(zip(ANIMATED, frame_data(start_step)))
    fig = go.Figure()
    column_positions = list(range(len(columns)))
    # HBM: O rows final so far (under the step's highlights), then the rows read and written this step
    fig.add_trace(go.Bar(**start[O_DONE], x=[column_x["O"]], base=[0], width=0.76, hoverinfo="skip",
                         marker=dict(color=PALETTE["done"], line_width=0), showlegend=False))
    for index, color in ((READS, READ_COLOR), (WRITES, WRITE_COLOR)):
        fig.add_trace(go.Bar(**start[index], x=column_positions, width=0.76, hoverinfo="skip", showlegend=False,
                             marker=dict(color=color, line_width=0)))
    for index, color in ((READ_ARROWS, READ_COLOR), (WRITE_ARROWS, WRITE_COLOR)):
        first = {key: value for key, value in start[index].items() if key != "marker"}
        fig.add_trace(go.Scatter(**first, xaxis="x4", yaxis="y4", mode="lines+markers", hoverinfo="skip",
                                 showlegend=False, line=dict(color=color, width=4),
                                 marker=dict(**start[index]["marker"], symbol="arrow", angleref="previous",
                                             color=color)))
    # SRAM: the buffers one program holds, bytes against the shared memory per block
    sizes = [buffers[name] for name in buffer_names]
    fig.add_trace(go.Bar(**start[BUFFERS], x=sizes, y=list(range(len(buffer_names))), orientation="h", xaxis="x2",
                         yaxis="y2", customdata=buffer_names,
                         hovertemplate="%{customdata}: %{x:,} bytes<extra></extra>", showlegend=False))
    # counters: bytes so far, both orders and standard at the same step
    counter_names = [COUNTER_NAMES[who] for who in COUNTER_ROWS]
    row_colors = [COUNTER_COLORS[who] for who in COUNTER_ROWS]
    fig.add_trace(go.Bar(**start[READ_BARS], y=counter_names, orientation="h", xaxis="x3", yaxis="y3",
                         marker=dict(color=row_colors, line_width=0), showlegend=False,
                         hovertemplate="%{y} read %{x:,} bytes<extra></extra>"))
    fig.add_trace(go.Bar(**start[WRITTEN_BARS], y=counter_names, orientation="h", xaxis="x3", yaxis="y3",
                         marker=dict(color=colors["background"], line=dict(color=row_colors, width=2),
                                     pattern=dict(shape="/", fgcolor=row_colors, solidity=0.5)),
                         showlegend=False, hovertemplate="%{y} wrote %{x:,} bytes<extra></extra>"))
    fig.add_trace(go.Scatter(**start[COUNTER_LABELS], y=counter_names, xaxis="x3", yaxis="y3", mode="text",
                             textposition="middle right", cliponaxis=False, hoverinfo="skip", showlegend=False,
                             textfont=dict(size=TEXT_PX, color=colors["foreground"])))
    fig.add_trace(go.Scatter(**start[CAPTION], x=[0], y=[1], xaxis="x4", yaxis="y4", mode="text",
                             textposition="top right", cliponaxis=False, hoverinfo="skip", showlegend=False,
                             textfont=dict(size=TEXT_PX, color=colors["foreground"])))

    # static: the HBM tensors' outlines and names, the SRAM box, the shared-memory limit
    for name in columns:
        x = column_x[name]
        fig.add_shape(type="rect", x0=x - 0.38, x1=x + 0.38, y0=0, y1=seq_len, xref="x", yref="y", layer="below",
                      line=dict(color=colors["foreground"], width=2), fillcolor=colors["grid"])
    need = smem_bytes(block_m, block_n, head_dim, element_bytes)
    held = sum(sizes)
    limit = smem_per_block_bytes
    x_max = 1.15 * max(held, limit or 0, max(sizes))
    if limit:
        verdict = "fits" if need <= limit else "does NOT fit"
        smem_text = (f"shared memory per block, {device_label}: {fmt_bytes(limit)}<br>"
                     f"Q + 2 stages of K, V need {fmt_bytes(need)}: {verdict}")
        fig.add_shape(type="line", x0=limit, x1=limit, y0=-0.5, y1=len(buffer_names) - 0.5, xref="x2", yref="y2",
                      line=dict(color=colors["foreground"], width=3, dash="dash"))
    else:
        smem_text = (f"shared memory per block: unknown ({device_label or 'no GPU facts'})<br>"
                     f"Q + 2 stages of K, V need {fmt_bytes(need)}")
    sram_x, sram_y = SRAM_DOMAIN
    fig.add_shape(type="rect", xref="paper", yref="paper", x0=sram_x[0] - SRAM_BOX_PAD, x1=sram_x[1] + 0.005,
                  y0=sram_y[0] - 0.03, y1=sram_y[1] + 0.01, line=dict(color=PALETTE["sram"], width=3), layer="below")
    titles = [
        (sum(sram_x) / 2, sram_y[1] + 0.01, f"on chip: one program holds {fmt_bytes(held)}"),
        (sum(COUNTER_DOMAIN[0]) / 2, COUNTER_DOMAIN[1][1] + 0.02, "HBM bytes so far: read + written (cost model)"),
    ]
    for x, y, text in titles:
        fig.add_annotation(text=text, x=x, y=y, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                           showarrow=False, font_size=TEXT_PX)
    fig.add_annotation(text=smem_text, x=sram_x[1], y=sram_y[0] - 0.03, xref="paper", yref="paper",
                       xanchor="right", yanchor="top", showarrow=False, font_size=TEXT_PX, align="right")
    legend = (f'<span style="color:{READ_COLOR}">■</span> read from HBM   '
              f'<span style="color:{WRITE_COLOR}">■</span> written to HBM   '
              f'<span style="color:{PALETTE["done"]}">■</span> O final   '
              f'<span style="color:{PALETTE["sram"]}">■</span> on chip')
    fig.add_annotation(text=legend, x=1, y=1 + (CAPTION_PX - 8) / plot_px, xref="paper", yref="paper",
                       xanchor="right", yanchor="top", showarrow=False, font_size=TEXT_PX)

    fig.frames = [dict(name=str(t), data=frame_data(t), traces=ANIMATED) for t in range(num_steps)]
    counter_max = max(int(counts[(who, "read")][-1] + counts[(who, "written")][-1]) for who in COUNTER_ROWS)
    style(fig, theme)
    fig.update_layout(
        # transparent plot areas: the arrows' axis pair spans the others, and its background would hide them
        plot_bgcolor="rgba(0,0,0,0)",
        height=height, margin=dict(t=CAPTION_PX, b=CONTROLS_PX, l=20, r=150), showlegend=False, barmode="overlay",
        font_size=TEXT_PX,
        xaxis=dict(domain=HBM_DOMAIN[0], anchor="y", range=[-0.5, len(columns) - 0.5], tickvals=column_positions,
                   ticktext=[COLUMN_NAMES[name] for name in columns], showgrid=False, tickfont_size=TEXT_PX,
                   ticks=""),
        yaxis=dict(domain=HBM_DOMAIN[1], anchor="x", range=[seq_len, 0], title_text="HBM: row (token) of one head",
                   showgrid=False, zeroline=False, tickfont_size=TEXT_PX, title_font_size=TEXT_PX),
        xaxis2=dict(domain=sram_x, anchor="y2", range=[0, x_max], showgrid=False, showticklabels=False, ticks=""),
        # no tick labels: outside the box they sat under the arrows' heads; each bar's text names its buffer
        yaxis2=dict(domain=sram_y, anchor="x2", range=[len(buffer_names) - 0.5, -0.5], showticklabels=False,
                    ticks="", showgrid=False),
        xaxis3=dict(domain=COUNTER_DOMAIN[0], anchor="y3", range=[0, 1.7 * counter_max], showticklabels=False,
                    showgrid=False, ticks=""),
        yaxis3=dict(domain=COUNTER_DOMAIN[1], anchor="x3", range=[len(COUNTER_ROWS) - 0.5, -0.5],
                    tickfont_size=TEXT_PX, ticksuffix=" ", showgrid=False),
        xaxis4=dict(domain=[0, 1], anchor="y4", range=[0, 1], visible=False, fixedrange=True),
        yaxis4=dict(domain=[0, 1], anchor="x4", range=[0, 1], visible=False, fixedrange=True),
    )
    for row, (name, size) in enumerate(zip(buffer_names, sizes)):  # each buffer's name and size at its bar's end
        fig.add_annotation(text=f"{name}: {fmt_bytes(size)}", x=size, y=row, xref="x2", yref="y2", xanchor="left",
                           showarrow=False, font_size=TEXT_PX)
    durations = {speed: int(round(frame_ms / speed)) for speed in SPEEDS}
    fig.update_layout(updatemenus=[_play_buttons(durations, colors, y=-(CONTROLS_PX - 44) / plot_px)],
                      sliders=[_step_slider(num_steps, start_step, colors, y=-(CONTROLS_PX - 60) / plot_px)])
    return fig
