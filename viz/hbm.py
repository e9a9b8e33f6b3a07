"""The HBM ↔ SRAM picture of the flash kernel, step by step, from its trace.

Left, HBM: Q, K, V, O and the LSE as N-row columns (and, for the FlashAttention-1 loop order, the fp32 O,
m and l it keeps there between steps). At each step the rows the kernel loaded light up in the read colour
and the rows it stored in the write colour, with arrows to and from the SRAM box (the trace's `loads` and
`stores`, kernels/trace.py). Right, on chip: the buffers one program holds (costmodel.on_chip_buffers), in
two boxes: shared memory (the Q block, the K and V tiles), against the device's shared memory per block, and
registers (the S tile, m, l and the O accumulator, in fp32); those the step filled from HBM or wrote back
marked. Below, the
bytes read and written so far by both loop orders and by standard attention at the same step, all from
the cost model (costmodel.step_traffic, costmodel.fa1_step_traffic): the numbers never come from here.

Animated like viz/tiling.py (viz/animation.py): one frame per step, scatter and bar traces restyled in place,
nothing redrawn. Built in three parts: the numbers of every step (HbmData), the static layers, the layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from costmodel import IO_TENSORS, REGISTERS, SHARED_MEMORY, Step, dtype_bytes, on_chip_buffers, smem_bytes
from fmt import fmt_bytes
from viz.animation import (check_start_step, check_tiles, controls, frames, loop_orders, order_label, trace_shape,
                           validated)
from viz.theme import PALETTE, SMALLEST_TEXT_PX, algorithm_color, style, surface

COLUMN_NAMES = {"Q": "Q", "K": "K", "V": "V", "O": "O", "LSE": "LSE", "state": "O, m, l"}
# which SRAM buffer each HBM tensor is loaded into or stored from (the state's m and l go to "m, l" as well)
TENSOR_BUFFER = {"Q": "Q block", "K": "K tile", "V": "V tile", "O": "O acc", "LSE": "m, l", "state": "O acc"}
READ_COLOR, WRITE_COLOR = PALETTE["read"], PALETTE["write"]
HEIGHT_PX = 700
CAPTION_PX = 100
CONTROLS_PX = 100
KINDS = ("read", "written")
COUNTER_ROWS = ("fa2", "fa1", "fa1_state", "naive")
COUNTER_NAMES = {"fa2": f"flash, {order_label('fa2')}", "fa1": f"flash, {order_label('fa1')}",
                 "fa1_state": "of it O, m, l trips", "naive": "standard"}
COUNTER_COLORS = {"fa2": algorithm_color("fa2"), "fa1": algorithm_color("fa1"),
                  "fa1_state": algorithm_color("fa1"), "naive": algorithm_color("naive")}
HBM_DOMAIN = ([0.0, 0.36], [0.0, 1.0])
SRAM_DOMAIN = ([0.56, 1.0], [0.40, 0.84])  # under two title lines: what shared memory holds, and its limit
SRAM_BOX_PAD = 0.01  # paper units between the SRAM box's left edge and its bars
COUNTER_DOMAIN = ([0.56, 1.0], [0.0, 0.28])
# trace indices; frames update ANIMATED
(O_DONE, READS, WRITES, READ_ARROWS, WRITE_ARROWS, BUFFERS, READ_BARS, WRITTEN_BARS, COUNTER_LABELS,
 CAPTION) = range(10)
ANIMATED = [O_DONE, READS, WRITES, READ_ARROWS, WRITE_ARROWS, BUFFERS, READ_BARS, WRITTEN_BARS, COUNTER_LABELS,
            CAPTION]


def counters(shape, block_m: int, block_n: int) -> dict[tuple[str, str], np.ndarray]:
    """Cumulative bytes read and written per COUNTER_ROWS entry after each step, from the cost model: flash in
    either order, of FA1's the O, m, l round trips, and standard attention. The step index is the
    kernel's own; the other order's counter is at its own step of the same number (both visit the same
    tiles, so both end at their totals together)."""
    orders = loop_orders()
    traffic = {order: loop.step_traffic(shape, block_m, block_n) for order, loop in orders.items()}
    counts = {(order, kind): traffic[order][f"{order}_{kind}"] for order in orders for kind in KINDS}
    counts.update({("fa1_state", kind): traffic["fa1"][f"state_{kind}"] for kind in KINDS})
    counts.update({("naive", kind): traffic["fa2"][f"naive_{kind}"] for kind in KINDS})
    return {(row, kind): counts[(row, kind)] for row in COUNTER_ROWS for kind in KINDS}


def _row_label(rows: tuple[int, int]) -> str:
    return f"{rows[0]}–{rows[1] - 1}" if rows[1] - rows[0] > 1 else str(rows[0])


def _moved(ranges: np.ndarray, name: str) -> bool:
    start, end = ranges[IO_TENSORS.index(name)]
    return end > start


def _moved_words(ranges: np.ndarray, columns: list[str]) -> str:
    parts = [f"{COLUMN_NAMES[name]} [{_row_label(tuple(ranges[IO_TENSORS.index(name)]))}]"
             for name in columns if _moved(ranges, name)]
    return ", ".join(parts) if parts else "nothing"


def _buffers(block_m: int, block_n: int, head_dim: int, element_bytes: int) -> dict[str, dict[str, int]]:
    """One program's on-chip buffers by place (costmodel.on_chip_buffers), m and l as one row."""
    places = on_chip_buffers(block_m, block_n, head_dim, element_bytes)
    registers = {("m, l" if name in ("m", "l") else name): size for name, size in places[REGISTERS].items()}
    registers["m, l"] = places[REGISTERS]["m"] + places[REGISTERS]["l"]
    return {SHARED_MEMORY: dict(places[SHARED_MEMORY]), REGISTERS: registers}


@dataclass(frozen=True)
class HbmData:
    """The numbers of every step the HBM ↔ SRAM figure shows, and where its tensors and buffers sit."""
    order: str
    schedule: list[Step]
    seq_len: int
    columns: list[str]  # the HBM tensors shown, IO_TENSORS order
    loads: np.ndarray  # (T, len(IO_TENSORS), 2) rows [start, end) each step loaded
    stores: np.ndarray  # and stored
    counts: dict[tuple[str, str], np.ndarray]  # counters()
    places: dict[str, dict[str, int]]  # one program's on-chip buffers (bytes) by place: shared memory, registers
    need: int  # shared memory the kernel needs (Q + 2 stages of K, V)
    o_done: np.ndarray  # (T,) final O rows so far: a prefix in either order

    @property
    def num_steps(self) -> int:
        return len(self.schedule)

    @property
    def buffers(self) -> dict[str, int]:
        """Every on-chip buffer, shared memory's first: bytes."""
        return {name: size for place in self.places.values() for name, size in place.items()}

    @property
    def rows(self) -> dict[str, int]:
        """Each buffer's row on the on-chip axis, top down: shared memory's, then registers'."""
        return {name: index for index, name in enumerate(self.buffers)}

    @property
    def num_rows(self) -> int:
        return len(self.buffers)

    def column_paper_x(self, x: float) -> float:
        (x0, x1), _ = HBM_DOMAIN
        return x0 + (x + 0.5) / len(self.columns) * (x1 - x0)

    def row_paper_y(self, row: float) -> float:
        _, (y0, y1) = HBM_DOMAIN
        return y1 - row / self.seq_len * (y1 - y0)

    def buffer_paper_y(self, buffer: str) -> float:
        _, (y0, y1) = SRAM_DOMAIN
        return y1 - (self.rows[buffer] + 0.5) / self.num_rows * (y1 - y0)

    def arrows(self, ranges: np.ndarray, to_sram: bool) -> dict:
        """One arrow (paper coordinates) per tensor moved: from its rows in HBM to the SRAM box's left edge, at
        the row of the buffer it fills, or back."""
        x: list[float | None] = []
        y: list[float | None] = []
        size: list[int] = []
        sram_left = SRAM_DOMAIN[0][0] - SRAM_BOX_PAD  # the arrows end at the SRAM box, whose rows name their buffers
        for column, name in enumerate(self.columns):
            start, end = ranges[IO_TENSORS.index(name)]
            if end <= start:
                continue
            hbm = (self.column_paper_x(column + 0.38), self.row_paper_y((start + end) / 2))
            sram = (sram_left, self.buffer_paper_y(TENSOR_BUFFER[name]))
            tail, head = (hbm, sram) if to_sram else (sram, hbm)
            x += [tail[0], head[0], None]
            y += [tail[1], head[1], None]
            size += [0, 18, 0]
        return {"x": x, "y": y, "marker": {"size": size}}

    def bars(self, ranges: np.ndarray) -> dict:
        """The rows moved of each HBM column, as bars from `base`."""
        spans = [ranges[IO_TENSORS.index(name)] for name in self.columns]
        return {"base": [int(start) for start, _ in spans], "y": [int(end - start) for start, end in spans]}

    def buffer_colors(self, t: int) -> list[str]:
        """Each buffer written back this step in the write colour, each filled from HBM in the read colour."""
        def touched(ranges: np.ndarray) -> set[str]:
            names = {TENSOR_BUFFER[name] for name in self.columns if _moved(ranges, name)}
            return names | ({"m, l"} if "state" in self.columns and _moved(ranges, "state") else set())

        filled, stored = touched(self.loads[t]), touched(self.stores[t])
        return [WRITE_COLOR if name in stored else READ_COLOR if name in filled else PALETTE["sram"]
                for name in self.buffers]

    def frame(self, t: int) -> list[dict]:
        """Only what changes from step to step, in ANIMATED order."""
        read = [int(self.counts[(who, "read")][t]) for who in COUNTER_ROWS]
        written = [int(self.counts[(who, "written")][t]) for who in COUNTER_ROWS]
        own_read, own_written = self.counts[(self.order, "read")], self.counts[(self.order, "written")]
        read_now = int(own_read[t] - (own_read[t - 1] if t else 0))
        written_now = int(own_written[t] - (own_written[t - 1] if t else 0))
        step = self.schedule[t]
        caption = (f"step {t + 1}/{self.num_steps} · {order_label(self.order)} · Q block {step.q_block}, K/V tile "
                   f"{step.k_block}<br>read {_moved_words(self.loads[t], self.columns)} ({fmt_bytes(read_now)}) · "
                   f"wrote {_moved_words(self.stores[t], self.columns)} ({fmt_bytes(written_now)})")
        return [
            dict(type="bar", y=[int(self.o_done[t])]),
            dict(type="bar", **self.bars(self.loads[t])),
            dict(type="bar", **self.bars(self.stores[t])),
            dict(type="scatter", **self.arrows(self.loads[t], to_sram=True)),
            dict(type="scatter", **self.arrows(self.stores[t], to_sram=False)),
            dict(type="bar", marker={"color": self.buffer_colors(t)}),
            dict(type="bar", x=read),
            dict(type="bar", x=written, base=read),
            dict(type="scatter", x=[r + w for r, w in zip(read, written)],
                 text=[f" {fmt_bytes(r, 0)} + {fmt_bytes(w, 0)}" for r, w in zip(read, written)]),
            dict(type="scatter", text=[caption]),
        ]


def hbm_data(trace: dict) -> HbmData:
    """A FlashTrace dict with `loads` and `stores` (kernels/trace.py), checked, as what the figure draws."""
    arrays = validated(trace)
    order, schedule = arrays["order"], arrays["schedule"]
    seq_len, head_dim = int(trace["seq_len"]), int(trace["head_dim"])
    block_m, block_n = int(trace["block_m"]), int(trace["block_n"])
    check_tiles(seq_len, block_m, block_n)
    if trace.get("loads") is None or trace.get("stores") is None:
        raise ValueError("the trace says nothing of what each step loaded and stored (loads, stores): "
                         "record it with kernels.trace.trace_flash")
    loads = np.asarray(trace["loads"], dtype=np.int64)
    stores = np.asarray(trace["stores"], dtype=np.int64)
    if loads.shape != (len(schedule), len(IO_TENSORS), 2) or stores.shape != loads.shape:
        raise ValueError(f"trace loads/stores have shape {loads.shape}/{stores.shape}, expected "
                         f"({len(schedule)}, {len(IO_TENSORS)}, 2)")
    element_bytes = dtype_bytes(trace["dtype"])
    return HbmData(
        order=order, schedule=schedule, seq_len=seq_len,
        columns=[name for name in IO_TENSORS if loop_orders()[order].kv_outer or name != "state"],  # FA1: O, m, l
        loads=loads, stores=stores, counts=counters(trace_shape(trace), block_m, block_n),
        places=_buffers(block_m, block_n, head_dim, element_bytes),
        need=smem_bytes(block_m, block_n, head_dim, element_bytes),
        o_done=np.maximum.accumulate(stores[:, IO_TENSORS.index("O"), 1]),
    )


def _add_hbm(fig: go.Figure, data: HbmData, start: dict[int, dict], colors: dict[str, str]) -> None:
    """HBM: the tensors' outlines (static), the O rows final so far under the step's highlights, the rows read
    and written this step, and the arrows to and from SRAM (on an overlay axis pair spanning the plot area)."""
    positions = list(range(len(data.columns)))
    for x in positions:
        fig.add_shape(type="rect", x0=x - 0.38, x1=x + 0.38, y0=0, y1=data.seq_len, xref="x", yref="y",
                      layer="below", line=dict(color=colors["foreground"], width=2), fillcolor=colors["grid"])
    fig.add_trace(go.Bar(**start[O_DONE], x=[data.columns.index("O")], base=[0], width=0.76, hoverinfo="skip",
                         marker=dict(color=PALETTE["done"], line_width=0), showlegend=False))
    for index, color in ((READS, READ_COLOR), (WRITES, WRITE_COLOR)):
        fig.add_trace(go.Bar(**start[index], x=positions, width=0.76, hoverinfo="skip", showlegend=False,
                             marker=dict(color=color, line_width=0)))
    for index, color in ((READ_ARROWS, READ_COLOR), (WRITE_ARROWS, WRITE_COLOR)):
        first = {key: value for key, value in start[index].items() if key != "marker"}
        fig.add_trace(go.Scatter(**first, xaxis="x4", yaxis="y4", mode="lines+markers", hoverinfo="skip",
                                 showlegend=False, line=dict(color=color, width=4),
                                 marker=dict(**start[index]["marker"], symbol="arrow", angleref="previous",
                                             color=color)))


def _add_sram_and_counters(fig: go.Figure, data: HbmData, start: dict[int, dict], colors: dict[str, str]) -> None:
    """SRAM: the buffers one program holds, bytes against the shared memory per block; the counters: bytes so
    far, both orders and standard at the same step; the caption."""
    names = list(data.buffers)
    fig.add_trace(go.Bar(**start[BUFFERS], x=list(data.buffers.values()), y=[data.rows[name] for name in names],
                         orientation="h", xaxis="x2", yaxis="y2", customdata=names,
                         hovertemplate="%{customdata}: %{x:,} bytes<extra></extra>", showlegend=False))
    counter_names = [COUNTER_NAMES[who] for who in COUNTER_ROWS]
    row_colors = [COUNTER_COLORS[who] for who in COUNTER_ROWS]
    fig.add_trace(go.Bar(**start[READ_BARS], y=counter_names, orientation="h", xaxis="x3", yaxis="y3",
                         marker=dict(color=row_colors, line_width=0), showlegend=False,
                         hovertemplate="%{y} read %{x:,} bytes<extra></extra>"))
    fig.add_trace(go.Bar(**start[WRITTEN_BARS], y=counter_names, orientation="h", xaxis="x3", yaxis="y3",
                         marker=dict(color=colors["background"], line=dict(color=row_colors, width=2),
                                     pattern=dict(shape="/", fgcolor=row_colors, solidity=0.5)),
                         showlegend=False, hovertemplate="%{y} wrote %{x:,} bytes<extra></extra>"))
    text = dict(mode="text", cliponaxis=False, hoverinfo="skip", showlegend=False,
                textfont=dict(size=SMALLEST_TEXT_PX, color=colors["foreground"]))
    fig.add_trace(go.Scatter(**start[COUNTER_LABELS], y=counter_names, xaxis="x3", yaxis="y3",
                             textposition="middle right", **text))
    fig.add_trace(go.Scatter(**start[CAPTION], x=[0], y=[1], xaxis="x4", yaxis="y4", textposition="top right",
                             **text))


def _smem_text(data: HbmData, limit: int | None, device_label: str) -> str:
    if limit:
        verdict = "fits" if data.need <= limit else "does NOT fit"
        return f"Q + 2 stages of K, V need {fmt_bytes(data.need)}: {verdict} ({device_label})"
    return (f"Q + 2 stages of K, V need {fmt_bytes(data.need)}; per block: unknown "
            f"({device_label or 'no GPU facts'})")


def _paper_row_y(data: HbmData, row: float) -> float:
    """Paper y of a row edge or centre on the on-chip axis (rows run top down)."""
    _, (y0, y1) = SRAM_DOMAIN
    return y1 - (row + 0.5) / data.num_rows * (y1 - y0)


def _add_sram_notes(fig: go.Figure, data: HbmData, limit: int | None, device_label: str, colors: dict[str, str],
                    plot_px: int) -> None:
    """The two on-chip boxes (shared memory with its per-block limit, and registers, each titled with what one
    program holds there), the counters' title, each buffer's name and size at its bar's end, and the colours'
    legend in the top margin."""
    note = dict(xref="paper", yref="paper", showarrow=False, font_size=SMALLEST_TEXT_PX)
    shared = len(data.places[SHARED_MEMORY])
    if limit:  # the limit is shared memory's: its line spans that box's rows only
        fig.add_shape(type="line", x0=limit, x1=limit, y0=-0.5, y1=shared - 0.5, xref="x2", yref="y2",
                      line=dict(color=colors["foreground"], width=3, dash="dash"))
    sram_x, sram_y = SRAM_DOMAIN
    box = dict(type="rect", xref="paper", yref="paper", x0=sram_x[0] - SRAM_BOX_PAD, x1=sram_x[1] + 0.005,
               layer="below")
    split = _paper_row_y(data, shared - 0.5)  # between the last shared-memory row and the first register row
    fig.add_shape(**box, y0=split + 0.004, y1=sram_y[1] + 0.01, line=dict(color=PALETTE["sram"], width=3))
    fig.add_shape(**box, y0=sram_y[0] - 0.03, y1=split - 0.004, line=dict(color=colors["muted"], width=3, dash="dot"))
    smem, registers = (sum(data.places[place].values()) for place in (SHARED_MEMORY, REGISTERS))
    fig.add_annotation(text=f"on chip, one program · shared memory (SRAM): {fmt_bytes(smem)}<br>"
                            f"{_smem_text(data, limit, device_label)}", x=sum(sram_x) / 2,
                       y=sram_y[1] + 0.01, xanchor="center", yanchor="bottom", **note)
    # the registers' box is named inside, at its top right: its bars are short, and on the left
    fig.add_annotation(text=f"registers (fp32): {fmt_bytes(registers)}", x=sram_x[1], y=_paper_row_y(data, shared),
                       xanchor="right", yanchor="middle", **note)
    if limit:
        fig.add_annotation(text=f"{fmt_bytes(limit)} per block", x=limit, y=0, xref="x2", yref="y2", xanchor="right",
                           yanchor="middle", showarrow=False, font_size=SMALLEST_TEXT_PX, xshift=-8)
    fig.add_annotation(text="HBM bytes so far: read + written (cost model)", x=sum(COUNTER_DOMAIN[0]) / 2,
                       y=COUNTER_DOMAIN[1][1] + 0.02, xanchor="center", yanchor="bottom", **note)
    legend = (f'<span style="color:{READ_COLOR}">■</span> read from HBM   '
              f'<span style="color:{WRITE_COLOR}">■</span> written to HBM   '
              f'<span style="color:{PALETTE["done"]}">■</span> O final   '
              f'<span style="color:{PALETTE["sram"]}">■</span> on chip')
    fig.add_annotation(text=legend, x=1, y=1 + (CAPTION_PX - 8) / plot_px, xanchor="right", yanchor="top", **note)
    for name, size in data.buffers.items():  # each buffer's name and size at its bar's end
        fig.add_annotation(text=f"{name}: {fmt_bytes(size)}", x=size, y=data.rows[name], xref="x2", yref="y2",
                           xanchor="left", showarrow=False, font_size=SMALLEST_TEXT_PX)


def _hbm_axes(data: HbmData, limit: int | None) -> dict:
    """The four axis pairs: HBM's columns, SRAM's buffers, the counters, and the arrows' overlay."""
    sizes = list(data.buffers.values())
    x_max = 1.15 * max(sum(sizes), limit or 0, max(sizes))
    counter_max = max(int(data.counts[(who, "read")][-1] + data.counts[(who, "written")][-1]) for who in COUNTER_ROWS)
    hidden = dict(showgrid=False, showticklabels=False, ticks="")
    return dict(
        xaxis=dict(domain=HBM_DOMAIN[0], anchor="y", range=[-0.5, len(data.columns) - 0.5],
                   tickvals=list(range(len(data.columns))), ticktext=[COLUMN_NAMES[name] for name in data.columns],
                   showgrid=False, tickfont_size=SMALLEST_TEXT_PX, ticks=""),
        yaxis=dict(domain=HBM_DOMAIN[1], anchor="x", range=[data.seq_len, 0],
                   title_text="HBM: row (token) of one head", showgrid=False, zeroline=False,
                   tickfont_size=SMALLEST_TEXT_PX, title_font_size=SMALLEST_TEXT_PX),
        xaxis2=dict(domain=SRAM_DOMAIN[0], anchor="y2", range=[0, x_max], **hidden),
        # no tick labels: outside the box they sat under the arrows' heads; each bar's text names its buffer
        yaxis2=dict(domain=SRAM_DOMAIN[1], anchor="x2", range=[data.num_rows - 0.5, -0.5], **hidden),
        xaxis3=dict(domain=COUNTER_DOMAIN[0], anchor="y3", range=[0, 1.7 * counter_max], **hidden),
        yaxis3=dict(domain=COUNTER_DOMAIN[1], anchor="x3", range=[len(COUNTER_ROWS) - 0.5, -0.5],
                    tickfont_size=SMALLEST_TEXT_PX, ticksuffix=" ", showgrid=False),
        xaxis4=dict(domain=[0, 1], anchor="y4", range=[0, 1], visible=False, fixedrange=True),
        yaxis4=dict(domain=[0, 1], anchor="x4", range=[0, 1], visible=False, fixedrange=True),
    )


def hbm_sram_figure(trace: dict, smem_per_block_bytes: int | None = None, device_label: str = "",
                    theme: str = "light", frame_ms: int = 250, start_step: int = 0,
                    height: int = HEIGHT_PX) -> go.Figure:
    """One (batch, head) of the flash forward as HBM ↔ SRAM traffic, one frame per kernel step.

    trace: a FlashTrace dict with `loads` and `stores` (kernels/trace.py), either loop order.
    smem_per_block_bytes: the device's shared memory per thread block (device facts), None when unknown;
    device_label names where it comes from ("NVIDIA H200", "H200 (recorded)").
    """
    data = hbm_data(trace)
    check_start_step(start_step, data.num_steps)
    start = dict(zip(ANIMATED, data.frame(start_step)))
    colors = surface(theme)
    plot_px = height - CAPTION_PX - CONTROLS_PX
    fig = go.Figure()
    _add_hbm(fig, data, start, colors)
    _add_sram_and_counters(fig, data, start, colors)
    _add_sram_notes(fig, data, smem_per_block_bytes, device_label, colors, plot_px)
    fig.frames = frames(data.frame, data.num_steps, ANIMATED)
    style(fig, theme)
    fig.update_layout(
        # transparent plot areas: the arrows' axis pair spans the others, and its background would hide them
        plot_bgcolor="rgba(0,0,0,0)",
        height=height, margin=dict(t=CAPTION_PX, b=CONTROLS_PX, l=20, r=150), showlegend=False, barmode="overlay",
        font_size=SMALLEST_TEXT_PX, **_hbm_axes(data, smem_per_block_bytes),
        **controls(frame_ms, data.num_steps, start_step, colors, buttons_y=-(CONTROLS_PX - 44) / plot_px,
                   slider_y=-(CONTROLS_PX - 60) / plot_px),
    )
    return fig
