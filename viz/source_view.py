"""The kernel's own source beside its trace: at each step, the lines of the phases that step ran light up.

The source arrives as plain data read from the kernel file at run time (kernels/source.py: its lines and,
per phase, the line span its phase comment opens) with, per trace step, the phases it ran. The listing is
the phases in the order they run, in two columns at a size the back of the room reads; a phase longer than
its share of the lines keeps its first lines and says how many it leaves out (hover a line for all of it).
Frames only recolour the highlight bars and the caption: nothing is redrawn.
"""

from __future__ import annotations

import plotly.colors
import plotly.graph_objects as go

from viz.theme import PALETTE, style, surface
from viz.tiling import ORDER_NAMES, SPEEDS, _play_buttons, _step_slider, _validated

TEXT_PX = 24  # 1/45 of a 1080-pixel screen
CODE_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
LINE_PX = 31  # a code line's pitch: TEXT_PX text draws ~29 px high
COLUMNS = 2
MAX_CHARS = 52  # a column's width in characters (after a 4-character line number) at TEXT_PX, 1800 design px wide
MIN_PHASE_LINES = 3  # the comment line, one line of code, and the "⋮" line
HEIGHT_PX = 700
CAPTION_PX = 100
CONTROLS_PX = 100
PHASE_COLORS = {
    "load_q": PALETTE["flash"], "load_k": PALETTE["flash"], "load_v": PALETTE["flash"], "load_kv": PALETTE["flash"],
    "qk": PALETTE["highlight"], "softmax": PALETTE["sdpa_flash"], "pv": PALETTE["flash_v1"],
    "write": PALETTE["naive"],
}
PHASE_TITLES = {
    "load_q": "load Q", "load_k": "load K", "load_v": "load V", "load_kv": "load K, V", "qk": "S = QKᵀ",
    "softmax": "new max, α, P = exp, l", "pv": "rescale O, add P·V", "write": "write to HBM",
}
NO_HIGHLIGHT = "rgba(0, 0, 0, 0)"
CAPTION, *HIGHLIGHTS = range(1 + COLUMNS)
ANIMATED = [CAPTION, *HIGHLIGHTS]


def _translucent(color: str, alpha: float = 0.32) -> str:
    red, green, blue = plotly.colors.hex_to_rgb(color)
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _fit(spans: dict[str, list[int]], budget: int) -> dict[str, int]:
    """Lines shown per phase: all of them while the listing fits `budget`, else the longest phases cut
    first, one line at a time, never below MIN_PHASE_LINES (the cut ones spend a line on "⋮")."""
    shown = {name: last - first + 1 for name, (first, last) in spans.items()}
    while sum(shown.values()) > budget:
        name = max(shown, key=lambda key: shown[key])
        if shown[name] <= MIN_PHASE_LINES:
            raise ValueError(f"the kernel's {len(spans)} phases do not fit {budget} lines")
        shown[name] -= 1
    return shown


def listing(source: dict, budget: int) -> list[dict]:
    """The lines the view shows, each {"phase", "number" (1-based line in the file, None for a "⋮"),
    "text" (cut at MAX_CHARS), "full"}: the phases in running order, dedented to their comment's indent."""
    lines, spans = source["lines"], source["phases"]
    shown = _fit(spans, budget)
    rows = []
    for name, (first, last) in spans.items():
        indent = len(lines[first - 1]) - len(lines[first - 1].lstrip(" "))
        total = last - first + 1
        keep = shown[name] if shown[name] == total else shown[name] - 1
        for number in range(first, first + keep):
            full = lines[number - 1][indent:].rstrip()
            text = full if len(full) <= MAX_CHARS else full[: MAX_CHARS - 1] + "…"
            rows.append({"phase": name, "number": number, "text": text, "full": full})
        if keep < total:
            rows.append({"phase": name, "number": None, "text": f"    ⋮ {total - keep} more lines (to {last})",
                         "full": ""})
    return rows


def kernel_source_figure(trace: dict, source: dict, phases_per_step: list[list[str]], theme: str = "light",
                         frame_ms: int = 250, start_step: int = 0, height: int = HEIGHT_PX) -> go.Figure:
    """The kernel's source (kernels/source.py's kernel_source of the trace's order), one frame per trace
    step, the lines of the phases the step ran highlighted in their phase's colour."""
    arrays = _validated(trace)
    order, schedule = arrays["order"], arrays["schedule"]
    if source.get("order") != order:
        raise ValueError(f"the source is of the {source.get('order')!r} kernel but the trace of {order!r}")
    num_steps = len(schedule)
    if len(phases_per_step) != num_steps:
        raise ValueError(f"{len(phases_per_step)} steps of phases for a trace of {num_steps} steps")
    unknown = {name for names in phases_per_step for name in names} - set(source["phases"])
    if unknown:
        raise ValueError(f"steps name phases the source does not have: {sorted(unknown)}")
    if not 0 <= start_step < num_steps:
        raise ValueError(f"start_step must be in [0, {num_steps}), got {start_step}")
    plot_px = height - CAPTION_PX - CONTROLS_PX
    per_column = plot_px // LINE_PX - 1  # a line's room stays free under the caption
    rows = listing(source, per_column * COLUMNS)
    columns = [rows[i * per_column:(i + 1) * per_column] for i in range(COLUMNS)]
    colors = surface(theme)

    def frame_data(t: int) -> list[dict]:
        running = set(phases_per_step[t])
        step = schedule[t]
        names = " → ".join(f'<span style="color:{PHASE_COLORS.get(name, colors["foreground"])}">'
                           f'{PHASE_TITLES.get(name, name)}</span>' for name in source["phases"] if name in running)
        caption = (f"step {t + 1}/{num_steps} · {ORDER_NAMES[order]} · Q block {step.q_block}, K/V tile "
                   f"{step.k_block}<br>ran: {names}")
        return [dict(type="scatter", text=[caption])] + [
            dict(type="bar", marker={"color": [_translucent(PHASE_COLORS.get(row["phase"], PALETTE["highlight"]))
                                               if row["phase"] in running else NO_HIGHLIGHT for row in column]})
            for column in columns]

    start = dict(zip(ANIMATED, frame_data(start_step)))
    fig = go.Figure()
    fig.add_trace(go.Scatter(**start[CAPTION], x=[0], y=[-1.5], mode="text", textposition="top right",
                             cliponaxis=False, hoverinfo="skip", showlegend=False,
                             textfont=dict(size=TEXT_PX, color=colors["foreground"])))
    for index, column in enumerate(columns):
        axis = "" if index == 0 else str(index + 1)
        slots = list(range(len(column)))
        fig.add_trace(go.Bar(**start[HIGHLIGHTS[index]], x=[1] * len(column), y=slots, orientation="h",
                             width=0.94, xaxis=f"x{axis}", yaxis=f"y{axis}", hoverinfo="skip", showlegend=False,
                             marker_line_width=0))
    for index, column in enumerate(columns):  # text over the highlights: scatters draw after bars
        axis = "" if index == 0 else str(index + 1)
        fig.add_trace(go.Scatter(
            x=[0.0] * len(column), y=list(range(len(column))), xaxis=f"x{axis}", yaxis=f"y{axis}", mode="text",
            text=[f"{row['number'] if row['number'] else '':>3} {row['text']}".replace(" ", "\u00a0")
                  for row in column],
            hovertext=[row["full"] or row["text"] for row in column], hoverinfo="text",
            textposition="middle right", cliponaxis=False, showlegend=False,
            textfont=dict(size=TEXT_PX, family=CODE_FONT,
                          color=[colors["muted"] if row["number"] is None else colors["foreground"]
                                 for row in column])))
    gap = 0.02
    width = (1 - gap * (COLUMNS - 1)) / COLUMNS
    axes = {}
    for index in range(COLUMNS):
        axis = "" if index == 0 else str(index + 1)
        axes[f"xaxis{axis}"] = dict(domain=[index * (width + gap), index * (width + gap) + width], range=[0, 1],
                                    visible=False, fixedrange=True, anchor=f"y{axis}")
        axes[f"yaxis{axis}"] = dict(domain=[0, 1], range=[per_column - 0.5, -1.5], visible=False,
                                    fixedrange=True, anchor=f"x{axis}")
    fig.add_annotation(text=f"{source['path']}, read when this page was built", x=1,
                       y=1 + (CAPTION_PX - 8) / plot_px, xref="paper", yref="paper", xanchor="right", yanchor="top",
                       showarrow=False, font_size=TEXT_PX)
    fig.frames = [dict(name=str(t), data=frame_data(t), traces=ANIMATED) for t in range(num_steps)]
    style(fig, theme)
    durations = {speed: int(round(frame_ms / speed)) for speed in SPEEDS}
    fig.update_layout(height=height, margin=dict(t=CAPTION_PX, b=CONTROLS_PX, l=10, r=10), showlegend=False,
                      font_size=TEXT_PX,
                      barmode="overlay", plot_bgcolor="rgba(0,0,0,0)", **axes,
                      updatemenus=[_play_buttons(durations, colors, y=-(CONTROLS_PX - 50) / plot_px)],
                      sliders=[_step_slider(num_steps, start_step, colors, y=-(CONTROLS_PX - 66) / plot_px)])
    return fig
