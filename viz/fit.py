"""Margins that already hold a figure's labels and legend, so that plotly draws it once.

With `automargin` on (viz.theme's axes), plotly.js draws a figure, measures its tick labels, axis titles and
legend, and when they need more room than the margins give, grows the margins and draws the whole figure
again. The headline's chart paid for that second draw on every first view and every slider stop: its first
draw took 225 ms in chromium with the margins plotly grows to, against 141-171 ms when they are given up front
(BENCHMARKS.md, "One draw, no magic"). automargin stays on: a margin given too small costs the
second draw, never a clipped label.

The text widths are Arial's: viz.theme's font family is "Source Sans Pro, Arial, sans-serif", and the page
loads Streamlit's own font under another name, so plotly draws in Arial (Liberation Sans on Linux, the same
metrics). What plotly adds around the text was measured in chromium 156 with Streamlit 1.67's plotly.js on the
memory chart at scales 0.5-1.5 (`_fullLayout._pushmargin` and the legend's height): a part that scales with
the figure's fonts, and a part in fixed pixels that does not (tick lengths, paddings). A figure says how many
fixed pixels each margin holds in `layout.meta` (FIXED_MARGIN_KEY), and viz.theme.scaled_figure keeps them
fixed when it scales the rest; tests/test_browser.py checks in chromium that plotly keeps the margins given.
"""

from __future__ import annotations

import math

# Arial's advance widths, in thousandths of an em, for printable ASCII (canvas measureText in chromium 156,
# Liberation Sans); any other character counts as the widest of them (the page's text is mostly ASCII)
_ARIAL_WIDTHS = dict(zip(
    " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
    (278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
     *(556,) * 10, 278, 278, 584, 584, 584, 556, 1015,
     667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722,
     667, 944, 667, 667, 611, 278, 278, 278, 469, 556, 333,
     556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556,
     500, 722, 500, 500, 500, 334, 260, 334, 584)))
_WIDEST = max(_ARIAL_WIDTHS.values())

FIXED_MARGIN_KEY = "fixed_margin_px"  # in layout.meta: the px of each margin that do not scale with the fonts

# What plotly puts around the labels, as (fixed px, px per px of font size), fitted to the measurements at font
# sizes 16-36 px (each within 0.1 px; at 12 px, half the design size, up to 1 px short):
# left of the plot, beyond the widest y tick label (the tick, the gaps, the rotated axis title)
Y_AXIS_EXTRA = (18.0, 1.284)
# under the plot: the x tick labels and the axis title
X_AXIS_BELOW = (17.0, 2.535)
# a legend: its paddings, and each row of entries
LEGEND_PADDING = (10.5, 0.0)
LEGEND_ROW = (2.9, 1.3)
# a horizontal legend's entry: its symbol and gaps beside its text (at the design size)
LEGEND_ENTRY_PX = 43.0
SLACK_PX = 1.0  # plotly rounds: a margin a pixel short of what it wants costs the second draw


def text_px(text: str, size_px: float) -> float:
    """How wide `text` is in Arial at `size_px`."""
    return sum(_ARIAL_WIDTHS.get(char, _WIDEST) for char in text) * size_px / 1000


def legend_rows(names: list[str], size_px: float, plot_width_px: float) -> int:
    """Rows of a horizontal legend (plotly.js): all entries in one row where they fit, else a grid of columns
    as wide as the widest entry."""
    if len(names) < 2:
        return 0 if not names else 1
    widths = [text_px(name, size_px) + LEGEND_ENTRY_PX for name in names]
    if sum(widths) <= plot_width_px:
        return 1
    per_row = max(1, int(plot_width_px // max(widths)))
    return math.ceil(len(names) / per_row)


def _part(measured: tuple[float, float], font_px: float) -> tuple[float, float]:
    """(fixed px, px that scale) of one measured piece at this font size."""
    fixed, per_font_px = measured
    return fixed, per_font_px * font_px


def bottom_legend_margins(y_labels: list[str], legend_names: list[str], tick_px: float, legend_px: float,
                          width_px: float, right_px: float) -> dict:
    """The left and bottom margins (design px) that hold a figure's y tick labels (with the axis title beside
    them) and, under its x axis, a horizontal legend at the figure's foot; and the fixed px in each, for
    layout.meta[FIXED_MARGIN_KEY]. width_px: how wide the chart is drawn at the design size; right_px: its
    right margin."""
    fixed_l, scaled_l = _part(Y_AXIS_EXTRA, tick_px)
    scaled_l += max((text_px(label, tick_px) for label in y_labels), default=0.0)
    left = math.ceil(fixed_l + scaled_l + SLACK_PX)
    rows = legend_rows(legend_names, legend_px, width_px - left - right_px)
    pieces = [_part(X_AXIS_BELOW, tick_px)]
    if rows:
        pieces += [_part(LEGEND_PADDING, legend_px)] + [_part(LEGEND_ROW, legend_px)] * rows
    fixed_b = sum(fixed for fixed, _ in pieces)
    bottom = math.ceil(fixed_b + sum(scaled for _, scaled in pieces) + SLACK_PX)
    return {"l": left, "b": bottom, FIXED_MARGIN_KEY: {"l": fixed_l, "b": fixed_b}}
