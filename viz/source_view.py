"""The kernel's own source beside its trace: at each step, the lines of the phases that step ran light up.

The source arrives as plain data read from the kernel file at run time (kernels/source.py: its lines and,
per phase, the line span its phase comment opens) with, per trace step, the phases it ran. The listing is
the phases in the order they run, in two columns at a size the back of the room reads; a phase longer than
its share of the lines keeps its first lines and says which it leaves out (hover a line for all of it), but
online softmax's phase and the rescale by α are always shown whole: the other phases are cut first.
Frames only recolour the highlight bars and the caption: nothing is redrawn (viz/animation.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import plotly.graph_objects as go

from viz.animation import check_start_step, controls, frames, order_label, validated
from viz.theme import (BLUE, BLUISH_GREEN, MEDIUM_PURPLE, PALETTE, SMALLEST_TEXT_PX, VERMILLION, style, surface,
                       translucent)

CODE_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
LINE_PX = 31  # a code line's pitch: SMALLEST_TEXT_PX text draws ~29 px high
COLUMNS = 2
MAX_CHARS = 52  # a column's width in characters (after a 4-character line number) at SMALLEST_TEXT_PX, 1800 px
HEIGHT_PX = 700
CAPTION_PX = 100
CONTROLS_PX = 100
PHASE_COLORS = {
    "load_q": BLUE, "load_k": BLUE, "load_v": BLUE, "load_kv": BLUE,
    "qk": PALETTE["highlight"], "softmax": BLUISH_GREEN, "pv": MEDIUM_PURPLE, "write": VERMILLION,
}
PHASE_TITLES = {
    "load_q": "load Q", "load_k": "load K", "load_v": "load V", "load_kv": "load K, V", "qk": "S = QKᵀ",
    "softmax": "new max, α, P = exp, l", "pv": "rescale O, add P·V", "write": "write to HBM",
}
NO_HIGHLIGHT = "rgba(0, 0, 0, 0)"
CAPTION, *HIGHLIGHTS = range(1 + COLUMNS)
ANIMATED = [CAPTION, *HIGHLIGHTS]


# What the listing never cuts: online softmax's whole phase (new max, exp2, α, l), and anywhere the line that
# rescales the output by α (`acc = acc * alpha[:, None]`, `o = o * (l_i * alpha)[:, None]`) and the P·V it adds
# (`tl.dot(p, …)`); the other lines are cut first.
WHOLE_PHASES = ("softmax",)
KEPT_LINE = re.compile(r"\balpha\b|tl\.dot\(p\b")


def _kept(lines: list[str], name: str, first: int, last: int) -> set[int]:
    """The line numbers a phase keeps however short its share: its comment line, every line of a whole phase,
    and the rescale and P·V lines (KEPT_LINE)."""
    if name in WHOLE_PHASES:
        return set(range(first, last + 1))
    return {first} | {number for number in range(first + 1, last + 1) if KEPT_LINE.search(lines[number - 1])}


def _shown_lines(first: int, last: int, kept: set[int], extra: int) -> list[int]:
    """The lines a phase shows: what it keeps, and its first `extra` other lines from the top; a gap of a
    single line is shown rather than said (a "⋮" row costs as much)."""
    others = [number for number in range(first, last + 1) if number not in kept][:extra]
    shown = sorted(kept | set(others))
    filled = set(shown)
    for before, after in zip(shown, shown[1:]):
        if after - before == 2:
            filled.add(before + 1)
    if shown and last - shown[-1] == 1:
        filled.add(last)
    return sorted(filled)


def _rows(first: int, last: int, shown: list[int]) -> int:
    """Rows a phase takes: its lines shown and one "⋮" row per run of lines left out."""
    gaps = sum(1 for before, after in zip([first - 1, *shown], [*shown, last + 1]) if after - before > 1)
    return len(shown) + gaps


def _fit(lines: list[str], spans: dict[str, list[int]], budget: int) -> dict[str, list[int]]:
    """The lines shown per phase: all of them while the listing fits `budget` rows, else the longest phases
    cut first, one row at a time, down to what they keep (_kept: never the softmax phase or the rescale line),
    each run of lines left out costing a "⋮" row."""
    kept = {name: _kept(lines, name, first, last) for name, (first, last) in spans.items()}
    extra = {name: last - first + 1 - len(kept[name]) for name, (first, last) in spans.items()}

    def shown(name: str) -> list[int]:
        return _shown_lines(*spans[name], kept[name], extra[name])

    rows = {name: _rows(*spans[name], shown(name)) for name in spans}
    while sum(rows.values()) > budget:
        cuttable = [name for name in spans if extra[name] > 0]
        if not cuttable:
            raise ValueError(f"the kernel's {len(spans)} phases do not fit {budget} lines")
        name = max(cuttable, key=lambda key: rows[key])
        before = rows[name]
        while extra[name] > 0 and rows[name] >= before:  # one row less (a cut may first cost a "⋮" row)
            extra[name] -= 1
            rows[name] = _rows(*spans[name], shown(name))
    return {name: shown(name) for name in spans}


def listing(source: dict, budget: int) -> list[dict]:
    """The lines the view shows, each {"phase", "number" (1-based line in the file, None for a "⋮"),
    "text" (cut at MAX_CHARS), "full"}: the phases in running order, dedented to their comment's indent, each
    run of lines left out said by a "⋮" row with its line numbers."""
    lines, spans = source["lines"], source["phases"]
    shown = _fit(lines, spans, budget)
    rows = []
    for name, (first, last) in spans.items():
        indent = len(lines[first - 1]) - len(lines[first - 1].lstrip(" "))
        numbers = shown[name]
        for previous, number in zip([first - 1, *numbers], [*numbers, last + 1]):
            if number - previous > 1:
                left_out = number - previous - 1
                rows.append({"phase": name, "number": None, "full": "",
                             "text": f"    ⋮ {left_out} more line{'s' if left_out > 1 else ''} "
                                     f"({previous + 1} to {number - 1})"})
            if number <= last:
                full = lines[number - 1][indent:].rstrip()
                text = full if len(full) <= MAX_CHARS else full[: MAX_CHARS - 1] + "…"
                rows.append({"phase": name, "number": number, "text": text, "full": full})
    return rows


def _check(trace: dict, source: dict, phases_per_step: list[list[str]], start_step: int) -> dict:
    """The trace checked (animation.validated) against the source and the phases of its steps."""
    arrays = validated(trace)
    order, num_steps = arrays["order"], len(arrays["schedule"])
    if source.get("order") != order:
        raise ValueError(f"the source is of the {source.get('order')!r} kernel but the trace of {order!r}")
    if len(phases_per_step) != num_steps:
        raise ValueError(f"{len(phases_per_step)} steps of phases for a trace of {num_steps} steps")
    unknown = {name for names in phases_per_step for name in names} - set(source["phases"])
    if unknown:
        raise ValueError(f"steps name phases the source does not have: {sorted(unknown)}")
    check_start_step(start_step, num_steps)
    return arrays


def _frame_data(arrays: dict, source: dict, phases_per_step: list[list[str]], columns: list[list[dict]],
                colors: dict[str, str]) -> Callable[[int], list[dict]]:
    """Per step, only what changes, in ANIMATED order: the caption naming the phases the step ran, and each
    column's highlight colours (the lines of those phases lit in their phase's colour)."""
    schedule, num_steps = arrays["schedule"], len(arrays["schedule"])

    def frame(t: int) -> list[dict]:
        running = set(phases_per_step[t])
        step = schedule[t]
        names = " → ".join(f'<span style="color:{PHASE_COLORS.get(name, colors["foreground"])}">'
                           f'{PHASE_TITLES.get(name, name)}</span>' for name in source["phases"] if name in running)
        caption = (f"step {t + 1}/{num_steps} · {order_label(arrays['order'])} · Q block {step.q_block}, K/V tile "
                   f"{step.k_block}<br>ran: {names}")
        return [dict(type="scatter", text=[caption])] + [
            dict(type="bar", marker={"color": [translucent(PHASE_COLORS.get(row["phase"], PALETTE["highlight"]), 0.32)
                                               if row["phase"] in running else NO_HIGHLIGHT for row in column]})
            for column in columns]

    return frame


def _axis(index: int) -> str:
    return "" if index == 0 else str(index + 1)


def _add_listing(fig: go.Figure, columns: list[list[dict]], start: dict[int, dict], colors: dict[str, str]) -> None:
    """The caption, then per column the highlight bars (one per line) and the code over them: scatters draw
    after bars."""
    fig.add_trace(go.Scatter(**start[CAPTION], x=[0], y=[-1.5], mode="text", textposition="top right",
                             cliponaxis=False, hoverinfo="skip", showlegend=False,
                             textfont=dict(size=SMALLEST_TEXT_PX, color=colors["foreground"])))
    for index, column in enumerate(columns):
        fig.add_trace(go.Bar(**start[HIGHLIGHTS[index]], x=[1] * len(column), y=list(range(len(column))),
                             orientation="h", width=0.94, xaxis=f"x{_axis(index)}", yaxis=f"y{_axis(index)}",
                             hoverinfo="skip", showlegend=False, marker_line_width=0))
    for index, column in enumerate(columns):
        fig.add_trace(go.Scatter(
            x=[0.0] * len(column), y=list(range(len(column))), xaxis=f"x{_axis(index)}", yaxis=f"y{_axis(index)}",
            mode="text",
            text=[f"{row['number'] if row['number'] else '':>3} {row['text']}".replace(" ", "\u00a0")
                  for row in column],
            hovertext=[row["full"] or row["text"] for row in column], hoverinfo="text",
            textposition="middle right", cliponaxis=False, showlegend=False,
            textfont=dict(size=SMALLEST_TEXT_PX, family=CODE_FONT,
                          color=[colors["muted"] if row["number"] is None else colors["foreground"]
                                 for row in column])))


def _listing_axes(per_column: int) -> dict:
    """One hidden axis pair per column, side by side, a line per unit."""
    gap = 0.02
    width = (1 - gap * (COLUMNS - 1)) / COLUMNS
    axes = {}
    for index in range(COLUMNS):
        axis = _axis(index)
        axes[f"xaxis{axis}"] = dict(domain=[index * (width + gap), index * (width + gap) + width], range=[0, 1],
                                    visible=False, fixedrange=True, anchor=f"y{axis}")
        axes[f"yaxis{axis}"] = dict(domain=[0, 1], range=[per_column - 0.5, -1.5], visible=False,
                                    fixedrange=True, anchor=f"x{axis}")
    return axes


def kernel_source_figure(trace: dict, source: dict, phases_per_step: list[list[str]], theme: str = "light",
                         frame_ms: int = 250, start_step: int = 0, height: int = HEIGHT_PX) -> go.Figure:
    """The kernel's source (kernels/source.py's kernel_source of the trace's order), one frame per trace
    step, the lines of the phases the step ran highlighted in their phase's colour."""
    arrays = _check(trace, source, phases_per_step, start_step)
    num_steps = len(arrays["schedule"])
    plot_px = height - CAPTION_PX - CONTROLS_PX
    per_column = plot_px // LINE_PX - 1  # a line's room stays free under the caption
    rows = listing(source, per_column * COLUMNS)
    columns = [rows[i * per_column:(i + 1) * per_column] for i in range(COLUMNS)]
    colors = surface(theme)
    frame_data = _frame_data(arrays, source, phases_per_step, columns, colors)
    fig = go.Figure()
    _add_listing(fig, columns, dict(zip(ANIMATED, frame_data(start_step))), colors)
    fig.add_annotation(text=f"{source['path']}, read when this page was built", x=1,
                       y=1 + (CAPTION_PX - 8) / plot_px, xref="paper", yref="paper", xanchor="right", yanchor="top",
                       showarrow=False, font_size=SMALLEST_TEXT_PX)
    fig.frames = frames(frame_data, num_steps, ANIMATED)
    style(fig, theme)
    fig.update_layout(height=height, margin=dict(t=CAPTION_PX, b=CONTROLS_PX, l=10, r=10), showlegend=False,
                      font_size=SMALLEST_TEXT_PX, barmode="overlay", plot_bgcolor="rgba(0,0,0,0)",
                      **_listing_axes(per_column),
                      **controls(frame_ms, num_steps, start_step, colors, buttons_y=-(CONTROLS_PX - 56) / plot_px,
                                 slider_y=-(CONTROLS_PX - 72) / plot_px))
    return fig
