"""A table of words and numbers as a figure, at the height its scene gives (the sequence-length scene's speedup table).

Streamlit's own table sizes itself: its columns wrap their text at a width of their own choosing, so the rows' height
was whatever the notes made it (with causal on, 1,128 px of page in a 1,080 px window). Here each column is as wide as
its widest cell, the last (the notes) takes the rest of the width and wraps only what does not fit it, and every row's
height is counted in lines: `table_layout` says how tall the table is (a test holds it within the place the scene's
`Body` leaves its charts). Text is the page's smallest audience size (24 design px), and the figure scales with the
window like the charts.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from fmt import plotly_text
from viz.fit import text_px
from viz.theme import SMALLEST_TEXT_PX, style, surface, translucent

CELL_PAD_PX = 12        # plotly.js's padding on each side of a cell's text (its tables' default)
SLACK_PX = 12           # a column a little wider than its text as estimated (Arial's widths): plotly never wraps it
# A row's height as plotly.js draws it (measured in chromium): a row of one line as tall as asked (ROW_PX, which scales
# with the window); a row of wrapped text its lines at 1.3 × the font size and a padding of 12 px that does not scale
# (so in a smaller window it is a little taller than its share: SCALE_SLACK_PX holds that down to half the design size)
ROW_PX = 34
LINE_SPACING_PX = 1.3 * SMALLEST_TEXT_PX
WRAPPED_PAD_PX = 12
SCALE_SLACK_PX = 12
TOP_PX = 4              # above the header: the table starts at the figure's top
# under the last row: a table a rounding taller than its place would scroll (a row 22.67 px high at 1280×720 is drawn
# 23): a pixel a row, at the smallest scale (2/3)
BOTTOM_PX = 2
ROUNDING_PX = 1.5


@dataclass(frozen=True)
class TableLayout:
    columns: tuple[str, ...]
    widths: tuple[float, ...]          # px, in order, summing to the width given
    cells: tuple[tuple[str, ...], ...]  # per column, each row's text with "<br>" where it wraps (escaped for plotly)
    lines: tuple[int, ...]             # per row: its most lines
    height_px: float                   # the header, every row, and the space above and below: what it needs


def _wrapped(text: str, width: float) -> list[str]:
    """A cell's text in lines no wider than `width` px at the table's size, broken between words."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_px(f"{lines[-1]} {word}", SMALLEST_TEXT_PX) <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines or [""]


def table_layout(rows: list[dict[str, str]], width: float, columns: tuple[str, ...] = ()) -> TableLayout:
    """Where a table's text goes at this width (px): each column but the last as wide as its widest cell, the last
    the rest, its cells wrapped to it; and how tall that makes the table. columns: in order (the rows' keys where
    not given; a table without rows shows its header)."""
    columns = columns or (tuple(rows[0]) if rows else ())
    need = [max(text_px(str(value), SMALLEST_TEXT_PX) for value in [name, *(row[name] for row in rows)])
            + 2 * CELL_PAD_PX + SLACK_PX for name in columns]
    widths = [*need[:-1], max(width - sum(need[:-1]), 2 * CELL_PAD_PX)] if columns else []
    wrapped = [[_wrapped(str(row[name]), w - 2 * CELL_PAD_PX) for row in rows] for name, w in zip(columns, widths)]
    lines = tuple(max((len(column[i]) for column in wrapped), default=1) for i in range(len(rows)))
    cells = tuple(tuple("<br>".join(plotly_text(line) for line in cell) for cell in column) for column in wrapped)
    return TableLayout(columns, tuple(widths), cells, lines, TOP_PX + ROW_PX + sum(_row_px(n) for n in lines)
                       + _bottom_px(len(rows)))


def _bottom_px(rows: int) -> float:
    return BOTTOM_PX + ROUNDING_PX * (rows + 1)


def _row_px(lines: int) -> float:
    return ROW_PX if lines == 1 else LINE_SPACING_PX * lines + WRAPPED_PAD_PX + SCALE_SLACK_PX


def table_figure(rows: list[dict[str, str]], theme: str = "light", width: float = 1800,
                 align: tuple[str, ...] = (), columns: tuple[str, ...] = ()) -> go.Figure:
    """rows: one dict a row, its keys the columns in order, its values the text shown (the story's numbers, as
    written). The figure is as tall as its table (`table_layout`): a figure shorter than its table would scroll it and
    hide rows (tests/test_app.py holds it within the place the scene has). width: the figure's at the design size
    (px). align: each column's ("left", "right"). columns: in order (the rows' keys where not given)."""
    layout = table_layout(rows, width, columns)
    colors = surface(theme)
    fig = go.Figure(go.Table(
        columnwidth=list(layout.widths),
        # the header plain, on its own fill: a marked-up (bold) cell is laid out as wrapped text, taller than asked
        header=dict(values=[plotly_text(name) for name in layout.columns], height=ROW_PX,
                    align=list(align) or "left", font=dict(size=SMALLEST_TEXT_PX, color=colors["foreground"]),
                    fill_color=translucent(colors["grid"], 0.35), line_color=colors["grid"]),
        cells=dict(values=[list(column) for column in layout.cells], height=ROW_PX, align=list(align) or "left",
                   font=dict(size=SMALLEST_TEXT_PX, color=colors["foreground"]), fill_color=colors["background"],
                   line_color=colors["grid"])))
    style(fig, theme)
    # the rounding's pixels inside the table's place (under its last row), not in the margin: plotly rounds the place
    fig.update_layout(height=layout.height_px, margin=dict(l=0, r=0, t=TOP_PX, b=BOTTOM_PX))
    return fig
