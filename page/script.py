"""The canvas: a 1920×1080 design canvas scaled to the window, the page's CSS, the page's own script
(page/script.js: the window's size for the charts, Space to play and pause, the animation's paused step into
the link), and the order in which a session's first view arrives (the picture first, then the controls).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from page.cache import ByteBudgetCache
from page.pictures import FIGURE_BYTES_PER_JSON_BYTE
from page.settings import quoted
from viz.theme import scaled_figure

# Plotly's own toolbar exports any figure for slides; twice the pixels for a sharp PNG.
CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
# -- the canvas: a 1920×1080 design canvas scaled to the window -----------------------------------------
# Every size on the page is given for a 1920×1080 screen ("design px") and scales with the window, so a
# scene that fits 1080p fits 720p (or 1080p at 150% zoom) the same way, only smaller. The page's text
# scales through the root font size (1rem = 24 design px = 1/45 of the height, the smallest text the
# audience reads); the charts are built in design px and scaled to the window the page script reports.
# (CSS `zoom` on the page would do both at once, but Streamlit sizes a plotly chart from its rendered
# width: under zoom 2/3 the charts came out 2/3 as wide as their column. See the canvas report.)
DESIGN_WIDTH_PX, DESIGN_HEIGHT_PX = 1920, 1080
# Under the page frame (badges, navigation, the scene's title) a scene body has this much height, in
# design px, for everything it shows (text, controls, charts); scenes size their charts from it.
FRAME_PX = 170
SCENE_BODY_PX = DESIGN_HEIGHT_PX - FRAME_PX
DESIGN_PX_PER_REM = DESIGN_HEIGHT_PX / 45  # the root font size below: 1rem is 24 design px in any window
# Streamlit's own sizes are in rem: one root size scales them all. Text the audience reads is at
# least 1rem (max(1rem, 1em) lifts captions, labels, badges and table cells that Streamlit sets
# smaller); the frame's paddings shrink so the scene gets the height.
PAGE_STYLE = """<style>
html { font-size: min(calc(100vh / 45), calc(100vw / 80)) !important; }
[data-testid="stMainBlockContainer"] { padding: 0.5rem 2.5rem 0.25rem 2.5rem; max-width: none; }
[data-testid="stMain"] :is(p, span, div, label, li, td, th, a, code, small, summary, button, input) {
  font-size: max(1rem, 1em); }
[data-testid="stMain"] h2 { font-size: 1.75rem; padding: 0.25rem 0 0.25rem 0; }
[data-testid="stMain"] [data-testid="stMetricValue"] { font-size: 2rem; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
[data-testid="stMain"] .stMarkdownBadge { font-size: 1rem !important; }
/* the keys a clicker sends, in the buttons: readable, not a whisper (Streamlit draws them at 0.875em, 60%) */
[data-testid="stMain"] kbd { font-size: 1rem !important; opacity: 0.85; }
/* captions in the theme's own text colour: on a projector a grey caption vanishes */
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 1 !important; }
/* the sidebar is a drawer over the page, not a column beside it: opening it during a talk leaves every scene
   laid out as it was (nothing reflows, no chart shrinks); it closes the same way */
[data-testid="stSidebar"] { position: fixed !important; top: 0; left: 0; height: 100vh; z-index: 1000020;
  box-shadow: 0 0 2rem rgba(0, 0, 0, 0.35); }
/* wide enough that every scene's title is one line: the whole drawer, "Look" included, fits 1080 px unscrolled */
[data-testid="stSidebar"][data-collapsed="false"] { width: 30rem !important; min-width: 30rem !important; }
[data-testid="stSidebarContent"] { height: 100vh; overflow-y: auto; }
/* Streamlit's header keeps only the sidebar's arrow (top left, over the page's left padding): the rest of it, its
   toolbar included (which turns pointer events back on), lets a click through to the scene's buttons under it */
[data-testid="stHeader"] { background: transparent; }
[data-testid="stHeader"], [data-testid="stHeader"] :not(button, button *) { pointer-events: none !important; }
[data-testid="stHeader"] button { pointer-events: auto !important; }
/* the page script's row: none (its container and the wrapper Streamlit puts around it, which would keep a gap) */
[data-testid="stLayoutWrapper"]:has(> .st-key-page-script), .st-key-page-script { display: none; }
/* a held place (hold_place) is exactly as tall as it says */
[data-testid="stHtml"]:has(> .canvas-held) { margin: 0; padding: 0; }
</style>"""

# The main area's width in design px (PAGE_STYLE's paddings: 2.5rem each side), and how wide a column of
# st.columns(weights) is there: its share of the width, less an equal share of the 1rem gaps between the
# columns (Streamlit's "small" gap; the headline's [1, 3] columns measured 438 and 1338 px in chromium at 1920×1080)
BODY_WIDTH_PX = DESIGN_WIDTH_PX - 2 * 2.5 * DESIGN_PX_PER_REM


def column_px(weights: list[float], index: int) -> float:
    """How wide column `index` of st.columns(weights) is, in design px, in the main area."""
    gaps = (len(weights) - 1) * DESIGN_PX_PER_REM
    return BODY_WIDTH_PX * weights[index] / sum(weights) - gaps / len(weights)


def chart_width_px(design_px: float, scale: float) -> int:
    """The width in screen px that Streamlit measures for a chart whose place is `design_px` wide at this scale
    (the canvas's screen px per design px): the place's width, rounded down to whole px."""
    return max(int(design_px * scale + 1e-6), 1)


# -- the page's style and script -------------------------------------------------------------------

PAGE_SCRIPT_KEY = "page_script"  # the session's state: what the page script has reported ("viewport", "drawn")
# what the page script writes into the link, and the name of its state (page/script.js: the link, then popstate)
REPORTS = {"window": "viewport", "drawn": "drawn"}
# sent with every run whose data changed: without its comment lines (a third of its bytes)
_PAGE_JS = "\n".join(line for line in Path(__file__).with_name("script.js").read_text().splitlines()
                      if not line.lstrip().startswith("//"))
PAGE_SCRIPT_CLASS = "flash-live-page"  # the page script's element
_REPORTED_SIZE = re.compile(r"(\d{1,6})x(\d{1,6})")


def take_reports() -> list[str]:
    """What the page script reported through the link (`window=WxH`, `drawn=WxH`), into the session's state and out
    of the link, before anything reads either; a note for a value that is no size (not the page script's: a link
    typed or edited by hand), which is dropped. A size no browser window has is kept, and never used (_window)."""
    state = st.session_state.get(PAGE_SCRIPT_KEY)
    state = dict(state) if isinstance(state, dict) else {}
    notes = []
    for param, name in REPORTS.items():
        if param not in st.query_params:
            continue
        said = st.query_params.get(param)
        size = _REPORTED_SIZE.fullmatch(said)
        if size:
            state[name] = {"width": int(size[1]), "height": int(size[2])}
        else:
            notes.append(f"`{param}` is the page's own report of its window, as WIDTHxHEIGHT; "
                         f"{quoted(said)} is not one: ignored")
        del st.query_params[param]
    st.session_state[PAGE_SCRIPT_KEY] = state
    return notes


def page_script_html(data: dict) -> str:
    """The page script with the run's data, for st.html: JSON with every "<" escaped (DOMPurify, which Streamlit
    cleans HTML with, drops a script that has one before a letter, "/" or "!")."""
    said = json.dumps(data, sort_keys=True).replace("<", "\\u003c")
    return f'<script class="{PAGE_SCRIPT_CLASS}">{_PAGE_JS.strip()}({said});</script>'


def page_style_and_script(scenes: tuple[str, ...] = ()) -> list[str]:
    """The canvas's CSS, and the page script (page/script.js): the window's size for the charts; Space to play
    and pause; the animation's paused step into the link; ← / → and Page Up / Page Down gathered in the browser,
    so a held key or a fast clicker moves the chart at once and reruns the app once, where it landed (`scenes`:
    the talk's scene keys in order). Its row is hidden: no row in the scene. First in a run:
    it takes the page script's reports out of the link (take_reports), and returns its notes on them."""
    notes = take_reports()
    # style only: Streamlit applies it without adding a row to the page. --canvas-window says which window
    # the charts were built for (tests wait for it after a resize), --canvas-first-view which run of the
    # session's first view this is ("controls" once it is complete).
    st.session_state[_CHART_NUMBER] = 0
    size = window_size()
    built_for = f"{size['width']}x{size['height']}" if size else "design"
    places = "".join(f'[class*="st-key-control-{kind}-"] {{ min-height: {px / DESIGN_PX_PER_REM:.4g}rem; }}\n'
                     for kind, (px, _) in CONTROL_PLACES.items())
    st.html(PAGE_STYLE.replace("</style>", f':root {{ --canvas-window: "{built_for}"; '
                                           f'--canvas-first-view: "{first_view_step()}"; }}\n{places}</style>'))
    with st.container(key="page-script"):  # its row hidden (PAGE_STYLE)
        st.html(page_script_html({"viewport": size, "scenes": list(scenes), "first_view": first_view_step(),
                                  "design": {"width": DESIGN_WIDTH_PX, "height": DESIGN_HEIGHT_PX}}),
                unsafe_allow_javascript=True)
    return notes


# what a browser window measures; anything else is not a window. A window under 200 px one way (1280×190, 190×800)
# is one: refused, its first view never completed (the charts built for no window, no controls, no navigation)
MIN_WINDOW_PX, MAX_WINDOW_PX = 1, 16384


def _window(size) -> dict | None:
    """A size the page script sent, if it is a browser window's (the browser is not trusted to send numbers)."""
    if not isinstance(size, dict):
        return None
    width, height = size.get("width"), size.get("height")
    if not all(type(v) is int and MIN_WINDOW_PX <= v <= MAX_WINDOW_PX for v in (width, height)):
        return None
    return {"width": width, "height": height}


def _page_state(name: str):
    state = st.session_state.get(PAGE_SCRIPT_KEY)
    return state.get(name) if hasattr(state, "get") else None


def window_size() -> dict | None:
    """The browser window's inner size in CSS px, as the page script last reported it: its last "viewport", or,
    before any, the window its first picture was drawn in ("drawn"); None before either, or when what came back
    is not a window's size."""
    return _window(_page_state("viewport")) or _window(_page_state("drawn"))


def canvas_scale() -> float:
    """Screen px per design px: the window against the 1920×1080 canvas (1 until the page reports)."""
    size = window_size()
    if size is None:
        return 1.0
    scale = min(size["height"] / DESIGN_HEIGHT_PX, size["width"] / DESIGN_WIDTH_PX)
    return min(max(scale, 0.25), 4.0)




# A chart's figure built once per its inputs and shared by every session, bounded in bytes (README, "What a server
# needs"): on a warm server the headline's figure took 40-63 ms to build in each session's first run (plotly
# validates every property), the longest step of that run, and again at every slider stop seen before.
CHART_FIGURE_BYTES = 16 << 20
CHART_FIGURES: ByteBudgetCache = ByteBudgetCache("chart figures", CHART_FIGURE_BYTES)


def _plain(value):
    """A numpy scalar (a live measurement) as the Python number it holds, for the cache's key; anything else that
    JSON cannot say exactly (an array's repr is cut short) is not a key."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not plain data: {type(value).__name__}")


def built_figure(builder: Callable, **inputs):
    """`builder(**inputs)` (a viz figure function), built once per its inputs in this process (CHART_FIGURES). The
    inputs are plain data (records, numbers, strings), told apart by their JSON; inputs that are not are built
    every time, never mistaken for others. The figure is shared between sessions, so nothing may change it
    (chart() does not: scaled_figure makes a new one)."""
    try:
        key = (builder.__module__, builder.__qualname__, json.dumps(inputs, sort_keys=True, default=_plain))
    except TypeError:
        return builder(**inputs)
    return CHART_FIGURES.get(key, lambda: builder(**inputs),
                             lambda fig: FIGURE_BYTES_PER_JSON_BYTE * len(fig.to_json()))


def chart(fig, width: float = BODY_WIDTH_PX, modebar: bool = True) -> None:
    """A figure built in design px (viz), scaled to the window; theme=None keeps viz's projector template.
    `width`: how wide its place on the page is, in design px (the main area's width, or a column's, column_px).
    Each chart of a run stands in its own keyed container (`st-key-canvas-chart-N` in the page), where the page
    script sees whether the run's charts are drawn. Before the page has reported its window (a session's first
    run) the figure is built for the 1920×1080 design window: shown at once in a window of that size, hidden in
    any other (its place held at its height there) until the next run brings it built for that window. modebar:
    plotly's hover toolbar (off where it would cover the figure's own legend: the tiling animation, which has its
    own download)."""
    number = st.session_state.get(_CHART_NUMBER, 0)
    st.session_state[_CHART_NUMBER] = number + 1
    key = f"canvas-chart-{number}"
    scale = canvas_scale()
    scaled = scaled_figure(fig, scale)
    if scaled.layout.width is None:
        # the width Streamlit will measure for it: a new chart element is drawn first at its figure's own width
        # and hidden while that has none, then drawn again at the width measured; one draw when they agree
        # (chart_width_px)
        scaled.layout.width = chart_width_px(width, scale)
    with st.container(key=key):
        st.plotly_chart(scaled, theme=None, config=CHART_CONFIG if modebar else {**CHART_CONFIG, "displayModeBar": False})
        if first_view_step() == "window":
            height = fig.layout.height if fig.layout.height is not None else PLOTLY_DEFAULT_HEIGHT_PX
            st.html(f"<style>.st-key-{key} {{ visibility: hidden; overflow: hidden; "
                    f"max-height: {height / DESIGN_PX_PER_REM:.4g}rem; }}\n"
                    f"@media {DESIGN_WINDOW} {{ .st-key-{key} {{ visibility: visible; }} }}</style>")


# -- a session's first view: the picture first, then the controls ---------------------------------------------
# What makes the first chart late (perf.local.first_view, BENCHMARKS.md): the browser loads every control's own
# code (one chunk per kind: radio, slider, select, uploader, popover …) and renders it on the one thread that must
# also evaluate plotly's 4.7 MB bundle before any chart is drawn; and the server learns the window only when the
# page script reports it. So a session's first view comes in steps, one run each:
#   "window":   the frame, the text and the charts built for the 1920×1080 design window (right
#               in a window of that scale, hidden in any other); each control's place held. In a design window
#               the page script waits for the charts to be drawn and sends "drawn" with the window's size
#               (straight to "controls", in one rerun: two values set one after the other would make two, the
#               first cut short, which can redraw a chart the presenter has started playing); in any other it
#               reports the window at once;
#   "picture":  the charts built for that window; the controls' places still held. The page script sends
#               "drawn" (the window's size) when the charts are drawn;
#   "controls": everything (this and every later run). The headline's metric cards come here too, with the
#               controls (metric_cards_px): without Metric's code (9 JS chunks) the first chart came 0.17 s
#               sooner (25 fair rounds, BENCHMARKS.md).
# A held place is as tall as what fills it, in rem, which scales with the window as the charts do: the picture
# does not move when the controls arrive, and is never shown at another window's size. A session with no browser
# (AppTest) has no page script to report: everything at once, at the design size.
FIRST_VIEW_STEPS = ("window", "picture", "controls")
PLOTLY_DEFAULT_HEIGHT_PX = 450
# How a browser reads the canvas's state off the page (the CSS variables page_style_and_script sets), for the tests
# and perf/ to wait on, written here once: the charts were built for a window of SIZE ("WxH"); the session's first
# view is complete (its last step, the controls, has come).
CANVAS_BUILT_FOR_JS = ("size => getComputedStyle(document.documentElement).getPropertyValue('--canvas-window')"
                      ".includes(size)")
FIRST_VIEW_COMPLETE_JS = ("() => getComputedStyle(document.documentElement).getPropertyValue('--canvas-first-view')"
                          f".includes('{FIRST_VIEW_STEPS[-1]}')")
# the windows in which canvas_scale() is 1: a figure built for the design window is the right one there
DESIGN_WINDOW = (f"(height: {DESIGN_HEIGHT_PX}px) and (min-width: {DESIGN_WIDTH_PX}px), "
                 f"(width: {DESIGN_WIDTH_PX}px) and (min-height: {DESIGN_HEIGHT_PX}px)")
_CHART_NUMBER = "canvas_chart_number"  # charts drawn so far in this run (page_style_and_script starts it at 0)
# How tall each kind of control stands, label included, in design px (measured in chromium at 1920×1080: the
# segmented controls with their labels collapsed, as every scene draws them; a radio as the sidebar's horizontal
# one), and whether it fills its row or takes the width it needs. Its place is that tall before it comes and
# while its code loads (PAGE_STYLE), so nothing under it moves. (Selects, number inputs and radios stand only in
# the sidebar and in popovers, where no place is seen; they are here so that every control has one.)
CONTROL_PLACES = {"select_slider": (104, "stretch"), "segmented_control": (48, "content"), "toggle": (36, "content"),
                  "selectbox": (102, "stretch"), "radio": (133, "stretch"), "number_input": (102, "stretch")}


# A bordered metric card (st.metric with a one-line label and help), as tall as drawn in chromium at 1920×1080, in
# design px, and the gap between two cards in a column (PAGE_STYLE: 0.6rem)
METRIC_CARD_PX, CARD_GAP_PX = 154, 0.6 * DESIGN_PX_PER_REM


def metric_cards_px(cards: int) -> float:
    """How tall a column of `cards` metric cards stands, in design px: the place held for them in the first view."""
    return cards * METRIC_CARD_PX + (cards - 1) * CARD_GAP_PX


def _browser_connected() -> bool:
    """Whether a browser opened this session (its websocket's request has a Host): its page script will report. A
    session run outside the server (AppTest in a thread of its own, where Streamlit has no runtime and reading the
    headers raises) has no browser."""
    try:
        return bool(st.context.headers.get("Host"))
    except RuntimeError:  # "Runtime hasn't been created!"
        return False


def first_view_step() -> str:
    """Which run of the session's first view this is (FIRST_VIEW_STEPS)."""
    if _window(_page_state("drawn")) is not None or not _browser_connected():
        return "controls"
    return "picture" if window_size() is not None else "window"


def controls_ready() -> bool:
    """False while the session's first picture is on its way: a control's place is held instead."""
    return first_view_step() == "controls"


def hold_place(design_px: float) -> None:
    """An empty block as tall as the element that will fill it, in design px (scaled with the window)."""
    # st.html, not markdown: markdown with HTML in it has the browser fetch and run an HTML parser for markdown
    # (three more JS chunks on the first view) for an empty block
    st.html(f'<div class="canvas-held" style="height: {design_px / DESIGN_PX_PER_REM:.4g}rem"></div>')


@contextmanager
def control_place(kind: str, field: str):
    """The place of one control: a container as tall as it (CONTROL_PLACES), held empty until the session's first
    picture is drawn; yields whether to draw the control now."""
    height, width = CONTROL_PLACES[kind]
    with st.container(key=f"control-{kind}-{field}", width=width):
        ready = controls_ready()
        if not ready:
            hold_place(height)
        yield ready
