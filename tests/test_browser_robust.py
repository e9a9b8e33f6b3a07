"""Robustness, round 4 (issue 44), in a real browser: a mouse reaches the scene buttons under Streamlit's header, the
animation steps and resizes from the frame on screen while it plays, and a tiny window or a browser that refuses
history.replaceState still gets the whole first view. (The server runs the CPU path, as in tests/test_browser.py.)"""
import re

import pytest

pytestmark = pytest.mark.browser

from app import SCENE_KEYS as SCENES
from tests.browser_support import require_browser

require_browser()  # skips without chromium or Playwright; fails instead in CI (FLASH_LIVE_REQUIRE_BROWSER=1)
from page.script import CANVAS_BUILT_FOR_JS  # noqa: E402
from tests.browser_pages import STEP_MS, app_url, chart, expect, first_view_complete, open_app, settle, shown_step, \
    step_in_link, wait_for_query  # noqa: E402

ANIMATION = {"scene": "tiling", "trace_len": "256", "block_m": "32", "block_n": "32", "step": "20"}
# before the page script: the frame plotly last drew when a key is pressed or the window resized (listeners added
# first run first, and the page script stops the keys it handles from going further)
WATCH_FRAMES = """
window.__frames = [];
const lastFrame = () => window.__frames.length ? window.__frames[window.__frames.length - 1] : null;
window.addEventListener('keydown', (e) => { if (e.key === 'ArrowRight') window.__frameAtKey = lastFrame(); }, true);
window.addEventListener('resize', () => { if (window.__frameAtResize === undefined) window.__frameAtResize = lastFrame(); });
"""
REFUSING_REPLACE_STATE = """History.prototype.replaceState = function () {
    throw new DOMException('The operation is insecure.', 'SecurityError'); };"""
# what the mouse would hit at an element's centre: the element itself (or something inside it)
HIT_AT_CENTRE = """(el) => { const box = el.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return {x: box.left + box.width / 2, y: box.top + box.height / 2, hit: el.contains(hit),
            what: hit ? (hit.getAttribute('data-testid') || hit.tagName) : null}; }"""


def _play(page) -> None:
    """Play the animation at 1× from the link's step; return once it has drawn a few frames."""
    chart(page).evaluate("c => c.on('plotly_animatingframe', (f) => window.__frames.push(Number(f.name)))")
    page.locator(".updatemenu-button").filter(has_text="▶ 1×").click()
    page.wait_for_function("() => window.__frames.length >= 6")


# -- 1. the header bar lies over the navigation buttons: the mouse must reach them ---------------------------

@pytest.mark.parametrize("size", [(1920, 1080), (1280, 720), (1024, 768)], ids=["1080p", "720p", "1024x768"])
def test_a_mouse_click_reaches_previous_and_next_and_the_sidebar_arrow(page, server, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_app(page, server, scene="hierarchy")
    for label, scene in (("Next ▶", "problem"), ("◀ Previous", "hierarchy")):
        button = page.locator('[data-testid="stMain"] button').filter(has_text=label)
        where = button.evaluate(HIT_AT_CENTRE)
        assert where["hit"], f"{label} at {size}: the mouse lands on {where['what']}, not on the button"
        page.mouse.click(where["x"], where["y"])  # a real click at that point, not one sent to the element
        wait_for_query(page, scene=scene)
        expect(page.get_by_role("heading", name=f"{SCENES.index(scene) + 1}.", exact=False)).to_be_visible()
        settle(page)
    arrow = page.get_by_test_id("stExpandSidebarButton")
    where = arrow.evaluate(HIT_AT_CENTRE)
    assert where["hit"], f"the sidebar's arrow at {size}: the mouse lands on {where['what']}"
    page.mouse.click(where["x"], where["y"])
    expect(page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "false")


# -- 7. while the animation plays: → and a resize go on from the frame on screen -----------------------------

def test_right_arrow_while_playing_steps_from_the_frame_on_screen(page, server):
    page.add_init_script(WATCH_FRAMES)
    open_app(page, server, **ANIMATION)
    _play(page)
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => new URLSearchParams(location.search).get('step') !== '20'")
    at_key = page.evaluate("window.__frameAtKey")
    assert at_key is not None and at_key > 20
    assert step_in_link(page) == at_key + 1, f"→ at frame {at_key} went to {step_in_link(page)}, not {at_key + 1}"
    expect(page.get_by_role("button", name="◀ Step")).to_be_enabled()
    settle(page)
    # the chart is redrawn at the new step after the run is over (the browser's work): wait for its caption
    expect(page.locator(".js-plotly-plot .scatterlayer text").filter(
        has_text=re.compile(rf"step {at_key + 2}/\d+ ·"))).to_have_count(1)
    assert shown_step(page) == at_key + 1
    page.wait_for_timeout(600)  # a playing animation would have moved on by now (4 frames/s at 1×)
    assert step_in_link(page) == shown_step(page) == at_key + 1, "it stopped there"


def test_a_resize_while_playing_keeps_the_frame_on_screen_and_throws_nothing(page, server):
    """The page fixture fails the test on any uncaught page error: a resize during play threw 240–340 of plotly's
    "Cannot set properties of undefined (setting '_currentFrame')" and went back to the link's step."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.add_init_script(WATCH_FRAMES)
    open_app(page, server, **ANIMATION)
    _play(page)
    page.set_viewport_size({"width": 1600, "height": 900})
    page.wait_for_function(CANVAS_BUILT_FOR_JS, arg="1600x900")
    settle(page)
    at_resize = page.evaluate("window.__frameAtResize")
    assert at_resize is not None and at_resize > 20
    assert step_in_link(page) == at_resize, f"resized at frame {at_resize}, the link says {step_in_link(page)}"
    expect(chart(page).locator(".updatemenu-button").filter(has_text="pause")).to_have_count(1)
    assert shown_step(page) == at_resize
    page.wait_for_timeout(1000)  # plotly's loop, had it run on into the redrawn chart, throws at every frame


# what Plotly.react does to a chart that has frames (plotly.js, src/plot_api/plot_api.js): a new animation state,
# the frames added to it again, and nothing done to the loop that plays on the old one
REACT_GIVES_A_NEW_STATE = """() => { const chart = document.querySelector('.js-plotly-plot');
    const old = chart._transitionData;
    chart._transitionData = { _frames: old._frames, _frameHash: old._frameHash, _counter: old._counter,
                              _interruptCallbacks: [] }; }"""


def test_a_redraw_of_the_playing_chart_leaves_no_animation_loop_behind(page, server):
    """Streamlit redraws a chart with Plotly.react (a resize does), which gives it a new animation state and never
    stops the loop playing on the old one: that loop drew its old frames into the redrawn chart and, once the chart
    left the page, threw at every browser frame (CI saw 77 "e.emit is not a function" after one resize)."""
    page.add_init_script(WATCH_FRAMES)
    open_app(page, server, **ANIMATION)
    _play(page)
    page.evaluate(REACT_GIVES_A_NEW_STATE)
    drawn = page.evaluate("window.__frames.length")
    page.wait_for_timeout(1000)  # 4 frames a second at 1×
    assert page.evaluate("window.__frames.length") <= drawn + 1, "the old state's loop plays on into the chart"
    # it stopped there, and that frame went into the link as a pause's does
    page.wait_for_function("() => new URLSearchParams(location.search).get('step')"
                           " === String(window.__frames[window.__frames.length - 1])")
    settle(page)
    page.get_by_role("heading", name=f"{SCENES.index('tiling') + 1}.", exact=False).click()
    page.keyboard.press("PageDown")
    wait_for_query(page, scene=SCENES[SCENES.index("tiling") + 1])
    settle(page)
    page.wait_for_timeout(1000)  # the page fixture fails the test on what a loop left behind throws


# -- 8. a tiny window, and a browser that refuses history.replaceState --------------------------------------

@pytest.mark.parametrize("size", [(1280, 190), (190, 800)], ids=["1280x190", "190x800"])
def test_a_window_under_200_px_gets_its_whole_first_view(page, server, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(app_url(server, scene="hierarchy"))
    first_view_complete(page)
    settle(page)
    page.wait_for_function(CANVAS_BUILT_FOR_JS, arg=f"{size[0]}x{size[1]}")
    expect(chart(page).locator(".main-svg").first).to_be_attached()
    expect(page.locator('[data-testid="stMain"] button').filter(has_text="Next ▶")).to_have_count(1)


def test_where_replace_state_throws_the_controls_still_come_and_navigation_works(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.add_init_script(REFUSING_REPLACE_STATE)
    page = context.new_page()
    page.set_default_timeout(STEP_MS)
    errors = []
    page.on("pageerror", lambda error: errors.append(error.message))
    try:
        page.goto(app_url(server, scene="hierarchy"))
        first_view_complete(page)
        settle(page)
        expect(page.get_by_role("dialog")).to_have_count(0)  # Streamlit's "Bad message format"
        page.locator('[data-testid="stMain"] button').filter(has_text="Next ▶").click()
        wait_for_query(page, scene="problem")
        settle(page)
        page.get_by_role("heading", name="3.", exact=False).click()  # focus on the page, not on a control
        page.keyboard.press("PageDown")
        wait_for_query(page, scene="compare")
        settle(page)
        assert not errors, errors
    finally:
        context.close()
