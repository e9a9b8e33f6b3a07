"""The stage: a 1920×1080 design canvas scaled to the window, the page's CSS, and the page's own script
(page/script.js: the window's size for the charts, Space to play and pause, the animation's paused step into
the link).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from viz.theme import scaled_figure

# Plotly's own toolbar exports any figure for slides; twice the pixels for a sharp PNG.
CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
# -- the stage: a 1920×1080 design canvas scaled to the window -----------------------------------------
# Every size on the page is given for a 1920×1080 screen ("design px") and scales with the window, so a
# scene that fits 1080p fits 720p (or 1080p at 150% zoom) the same way, only smaller. The page's text
# scales through the root font size (1rem = 24 design px = 1/45 of the height, the smallest text the
# audience reads); the charts are built in design px and scaled to the window the page script reports.
# (CSS `zoom` on the page would do both at once, but Streamlit sizes a plotly chart from its rendered
# width: under zoom 2/3 the charts came out 2/3 as wide as their column. See the stage report.)
DESIGN_WIDTH_PX, DESIGN_HEIGHT_PX = 1920, 1080
# Under the page frame (badges, navigation, the scene's title) a scene body has this much height, in
# design px, for everything it shows (text, controls, charts); scenes size their charts from it.
FRAME_PX = 170
SCENE_BODY_PX = DESIGN_HEIGHT_PX - FRAME_PX
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
[data-testid="stSidebarContent"] { height: 100vh; overflow-y: auto; }
/* Streamlit's header keeps only the sidebar's arrow (top left, over the page's left padding) */
[data-testid="stHeader"] { background: transparent; pointer-events: none; }
[data-testid="stHeader"] button { pointer-events: auto; }
</style>"""



# -- the page's style and script -------------------------------------------------------------------

PAGE_SCRIPT_KEY = "page_script"
_page_script = st.components.v2.component(
    "flash_live_page", js=(Path(__file__).with_name("script.js")).read_text(), isolate_styles=False)


def page_style_and_script(scenes: tuple[str, ...] = ()) -> None:
    """The stage's CSS, and the page script (page/script.js): the window's size for the charts; Space to play
    and pause; the animation's paused step into the link; ← / → and Page Up / Page Down gathered in the browser,
    so a held key or a fast clicker moves the chart at once and reruns the app once, where it landed (`scenes`:
    the talk's scene keys in order). Mounted in the sidebar: no row in the scene."""
    # style only: Streamlit applies it without adding a row to the page. --stage-window says which window
    # the charts were built for (tests wait for it after a resize).
    size = window_size()
    built_for = f"{size['width']}x{size['height']}" if size else "design"
    st.html(PAGE_STYLE.replace("</style>", f':root {{ --stage-window: "{built_for}"; }}\n</style>'))
    with st.sidebar:
        _page_script(key=PAGE_SCRIPT_KEY, data={"viewport": size, "scenes": list(scenes)}, height=0,
                     default={"viewport": None}, on_viewport_change=lambda: None)


MIN_WINDOW_PX, MAX_WINDOW_PX = 200, 16384  # what a browser window measures; anything else is not a window


def window_size() -> dict | None:
    """The browser window's inner size in CSS px, as the page script last reported it (None before, or when
    what came back is not a window's size: the browser is not trusted to send numbers)."""
    state = st.session_state.get(PAGE_SCRIPT_KEY)
    size = state.get("viewport") if hasattr(state, "get") else None
    if not isinstance(size, dict):
        return None
    width, height = size.get("width"), size.get("height")
    if not all(type(v) is int and MIN_WINDOW_PX <= v <= MAX_WINDOW_PX for v in (width, height)):
        return None
    return {"width": width, "height": height}


def stage_scale() -> float:
    """Screen px per design px: the window against the 1920×1080 canvas (1 until the page reports)."""
    size = window_size()
    if size is None:
        return 1.0
    scale = min(size["height"] / DESIGN_HEIGHT_PX, size["width"] / DESIGN_WIDTH_PX)
    return min(max(scale, 0.25), 4.0)




def chart(fig) -> None:
    """A figure built in design px (viz), scaled to the window; theme=None keeps viz's projector template."""
    st.plotly_chart(scaled_figure(fig, stage_scale()), theme=None, config=CHART_CONFIG)
