"""How a scene's body is shared on the 1920×1080 canvas: a scene says what it shows, top to bottom, and the chart
gets the height that is left.

A scene makes a `Body`, says each thing it shows through it (a sentence, the slider, a row of cards, a caption
below the chart…) and asks `body.chart_px(below=…)` for its chart's height: the scene body's height (SCENE_BODY_PX)
less each row's height as drawn in chromium at 1920×1080 (ROW_PX; text by its lines at the body's width, estimated
from its characters' widths), less Streamlit's gap between rows, less a margin for a line that wraps one word
sooner than estimated. Everything is in design px and scales with the window, so what fits 1080p fits 720p.
No pixel budget lives in a scene.
"""
from __future__ import annotations

import math
import re

import streamlit as st

from page.script import BODY_WIDTH_PX, DESIGN_PX_PER_REM, SCENE_BODY_PX
from viz.fit import text_px

# Each kind of row a scene shows, as tall as drawn in chromium at 1920×1080 (design px; measured on every
# scene: the slider with its label, the segmented tabs, the tiling scene's row of controls, a row of bordered
# metric cards with and without the line under their number, a closed expander).
ROW_PX = {"slider": 104.4, "tabs": 48.0, "controls": 60.0, "cards": 198.0, "cards_plain": 154.0, "expander": 60.0,
          "tabs_and_slider": 96.0}  # the last: tabs beside a select slider whose value stands over its thumb
LINE_PX = 1.6 * DESIGN_PX_PER_REM  # one line of text (1rem type, 1.6 line height): 38.4 px
GAP_PX = 0.6 * DESIGN_PX_PER_REM   # between two rows (the page's style): 14.4 px
TEXT_PX = DESIGN_PX_PER_REM        # the page's body text
MARGIN_PX = 24.0                   # a line that wraps a word sooner than its estimate still fits
NOTE_PADDING_PX = 2 * DESIGN_PX_PER_REM  # a note's box (st.warning) around its lines
_MARKUP = re.compile(r"\*\*|__|`|\[([^\]]*)\]\([^)]*\)")


def lines(text: str, width_px: float = BODY_WIDTH_PX) -> int:
    """How many lines a paragraph of markdown text takes at the body's width (its markup not counted; Arial's
    advance widths, which run wider than the page's Source Sans: an estimate on the safe side)."""
    plain = _MARKUP.sub(lambda m: m.group(1) or "", text)
    return sum(_wrapped(part, width_px) for part in plain.split("\n") if part.strip())


def _wrapped(paragraph: str, width_px: float) -> int:
    """Lines of one paragraph as a browser wraps it: word by word, a word that does not fit starting the next line
    (the space a long word leaves at a line's end counts; a paragraph's width ÷ the line's did not: a caption of
    3.0 lines by that sum took 4 on screen)."""
    space = text_px(" ", TEXT_PX)
    rows, used = 1, 0.0
    for word in paragraph.split():
        width = text_px(word, TEXT_PX)
        if used and used + space + width > width_px:
            rows, used = rows + 1, 0.0
        if width > width_px:  # a word wider than the line: the browser breaks it where it must
            rows += math.ceil(width / width_px) - 1
            width = width % width_px
        used = used + space + width if used else width
    return rows


def text_rows_px(text: str, width_px: float = BODY_WIDTH_PX) -> float:
    return lines(text, width_px) * LINE_PX


_FRAME_PX = "layout_frame_px"  # session state: design px the frame's notes took above the scene, this run


def note_px(text: str) -> float:
    """The height of a note's box (st.warning) holding this text across the body's width, in design px."""
    return text_rows_px(text, BODY_WIDTH_PX - 2 * NOTE_PADDING_PX) + NOTE_PADDING_PX


def set_frame_px(px: float) -> None:
    """What the frame drew above the scene this run (0: nothing); every run sets it before the scene runs."""
    try:
        st.session_state[_FRAME_PX] = px
    except Exception:  # no Streamlit session (a bare call): nothing to carry to the scene
        pass


def frame_px() -> float:
    try:
        return float(st.session_state.get(_FRAME_PX, 0) or 0)
    except Exception:
        return 0.0


class Body:
    """The rows a scene shows, as it says them; `chart_px` is what is left for its chart."""

    def __init__(self) -> None:
        self.rows: list[float] = []
        self.add_px(frame_px())  # the frame's notes above the scene this run (a bad link's)

    def row(self, kind: str) -> None:
        """A row of a known kind (ROW_PX), drawn by the scene."""
        self.rows.append(ROW_PX[kind])

    def add_px(self, px: float) -> None:
        """A row the page machinery drew and measured itself (a note's line: frame.recording_coverage); none if 0."""
        if px:
            self.rows.append(px)

    def say(self, text: str) -> None:
        """A sentence of the scene (markdown), drawn and counted."""
        st.markdown(text)
        self.rows.append(text_rows_px(text))

    def warn(self, text: str) -> None:
        """A note in a warning box, drawn and counted."""
        st.warning(text)
        self.rows.append(note_px(text))

    def chart_px(self, below: tuple[float, ...] = ()) -> int:
        """The chart's height: the scene body less the rows above it and `below` it (their heights: ROW_PX[kind] or
        text_rows_px(caption)), and a gap between every two."""
        taken = sum(self.rows) + sum(below) + GAP_PX * (len(self.rows) + len(below))
        return int(SCENE_BODY_PX - taken - MARGIN_PX)
