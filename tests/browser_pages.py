"""What the browser tests share: helpers that drive and read the page in chromium through Playwright, and the
canvas's measurements (scrolling, the smallest text, overlapping or clipped chart texts). The server, browser and
tab fixtures are in conftest.py. Import this module only after `browser_support.require_browser()`.
"""
import re
import urllib.parse

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from page.script import FIRST_VIEW_COMPLETE_JS, CANVAS_BUILT_FOR_JS
from tests.browser_support import ARTIFACTS

PROJECTOR = {"width": 1920, "height": 1080}
STEP_MS = 45_000  # a rerun that may run the interpreter (a new animation setting) on a slow CI core
# expect() waits 5 s by default; a rerun that runs the interpreter on a busy CI core takes longer
expect.set_options(timeout=STEP_MS)
# The play controls' readout of the current frame ("step 7"), as opposed to the slider's tick labels.
PLOTLY_SLIDER_VALUE = ".js-plotly-plot .slider-group > .slider-label"

# -- the canvas: every scene at two window sizes ----------------------------------------------------------

SIZES = {"1080p": {"width": 1920, "height": 1080}, "720p": {"width": 1280, "height": 720}}
TEXT_SHARE = 1 / 45  # the smallest audience text, as a share of the window's height
CANVAS_STEP_MS = 60_000  # a first run imports torch and Triton, or runs the interpreter, on a slow CI core
OVERLAP_PX = 2  # boxes that share less than this (in both directions) only touch
# Everything measured in one pass in the page: scrolling, the smallest audience text, and the text boxes
# of every chart (in screen px), with what they are for the failure message.
MEASURE = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const presenterOnly = (el) => el.closest('button, .modebar, [data-testid="stSidebar"], .updatemenu-container,'
      + ' .slider-container');
  let smallest = {px: Infinity, text: ''};
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const el = node.parentElement;
    if (!node.textContent.trim() || presenterOnly(el)) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < smallest.px) smallest = {px, text: node.textContent.trim().slice(0, 60)};
  }
  const charts = [...main.querySelectorAll('.js-plotly-plot')].filter((c) => c.getBoundingClientRect().height > 0);
  const texts = charts.map((chart) => {
    const frame = chart.getBoundingClientRect();
    // the box a clip-path cuts a text to (a subplot's plot area, for shapes' labels and clipped data texts)
    const clipBox = (t) => {
      for (let el = t.parentElement; el && el !== chart; el = el.parentElement) {
        const ref = el.getAttribute('clip-path');
        if (!ref) continue;
        const id = (ref.match(/#([^)"']+)/) || [])[1];
        const rect = id && chart.querySelector(`[id="${id}"] rect`);
        if (!rect) return null;
        const [x, y, w, h] = ['x', 'y', 'width', 'height'].map((a) => parseFloat(rect.getAttribute(a)) || 0);
        const m = el.getScreenCTM();
        const a = new DOMPoint(x, y).matrixTransform(m), b = new DOMPoint(x + w, y + h).matrixTransform(m);
        return {x0: Math.min(a.x, b.x), y0: Math.min(a.y, b.y), x1: Math.max(a.x, b.x), y1: Math.max(a.y, b.y)};
      }
      return null;
    };
    const boxes = [...chart.querySelectorAll('svg text')]
      .filter((t) => t.textContent.trim() && !t.closest('.modebar, .updatemenu-container, .slider-container'))
      .map((t) => { const b = t.getBoundingClientRect();
                    return {text: t.textContent.trim().slice(0, 40), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom,
                            clip: clipBox(t)}; })
      .filter((b) => b.x1 - b.x0 > 0 && b.y1 - b.y0 > 0);
    // the presenter's controls drawn in the chart (play buttons, step slider) must not cover a chart text either
    for (const control of chart.querySelectorAll('.updatemenu-button, .slider-container')) {
      const b = control.getBoundingClientRect();
      if (b.width > 0 && b.height > 0)
        boxes.push({text: 'control: ' + control.textContent.trim().slice(0, 30), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom});
    }
    const rect = (el) => { const b = el.getBoundingClientRect();
                           return {x0: b.left, y0: b.top, x1: b.right, y1: b.bottom}; };
    // the data's markers, and the legend's box: a legend must not sit on the points it names
    const points = [...chart.querySelectorAll('.scatterlayer path.point')].map(rect)
      .filter((b) => b.x1 - b.x0 > 0 && b.y1 - b.y0 > 0);
    const legend = chart.querySelector('.legend .bg');
    return {frame: {x0: frame.left, y0: frame.top, x1: frame.right, y1: frame.bottom}, boxes, points,
            legend: legend ? rect(legend) : null};
  });
  return {scrollHeight: Math.max(document.scrollingElement.scrollHeight, main.scrollHeight),
          windowHeight: innerHeight, smallest, texts};
}"""


def overlaps(boxes: list[dict]) -> list[str]:
    """Pairs of text boxes that cover each other by more than OVERLAP_PX both ways."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            dx = min(a["x1"], b["x1"]) - max(a["x0"], b["x0"])
            dy = min(a["y1"], b["y1"]) - max(a["y0"], b["y0"])
            if dx > OVERLAP_PX and dy > OVERLAP_PX:
                found.append(f"{a['text']!r} × {b['text']!r}")
    return found


def covered_points(chart: dict) -> list[tuple[int, int]]:
    """Centres of the data markers that the chart's legend box covers by more than OVERLAP_PX both ways."""
    legend = chart.get("legend")
    if not legend:
        return []
    return [(round((p["x0"] + p["x1"]) / 2), round((p["y0"] + p["y1"]) / 2)) for p in chart["points"]
            if min(p["x1"], legend["x1"]) - max(p["x0"], legend["x0"]) > OVERLAP_PX
            and min(p["y1"], legend["y1"]) - max(p["y0"], legend["y0"]) > OVERLAP_PX]


def outside(frame: dict, boxes: list[dict]) -> list[str]:
    """Texts cut off: past the chart's frame, or past the clip-path (a plot area) that their group draws in."""
    def beyond(box: dict, edge: dict) -> bool:
        return (box["x0"] < edge["x0"] - 1 or box["x1"] > edge["x1"] + 1
                or box["y0"] < edge["y0"] - 1 or box["y1"] > edge["y1"] + 1)
    return [box["text"] for box in boxes if beyond(box, frame) or (box.get("clip") and beyond(box, box["clip"]))]



# -- driving the page -----------------------------------------------------------------------------------------

def app_url(server: str, **params: str) -> str:
    return f"{server}/?{urllib.parse.urlencode(params)}" if params else f"{server}/"


def query(page) -> dict[str, str]:
    """The address bar's query parameters (the app writes every setting there)."""
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))


def wait_for_query(page, **expected: str) -> None:
    """Wait until the URL carries these values (Streamlit rewrites it with history.replaceState)."""
    page.wait_for_function(
        "expected => { const params = new URLSearchParams(location.search);"
        " return Object.entries(expected).every(([key, value]) => params.get(key) === value); }",
        arg=expected)


def settle(page, timeout_ms: int = STEP_MS) -> None:
    """Wait for the script run to finish, then check that it raised nothing.

    Call it only after waiting for something the run produces: right after an input, the previous
    run's idle state is still showing.
    """
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(
        state="attached", timeout=timeout_ms)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def first_view_complete(page, timeout_ms: int = STEP_MS) -> None:
    """Wait until the session's first view has all its parts: the picture, then the controls (page.script), each
    with its code loaded (Streamlit shows a skeleton until then), and the run that brought them is over."""
    page.wait_for_function(
        f"() => ({FIRST_VIEW_COMPLETE_JS})()"
        " && document.querySelector('[data-testid=stApp]').dataset.testScriptState === 'notRunning'"
        " && !document.querySelector('[data-testid=stSkeleton]')", timeout=timeout_ms)


def open_app(page, server: str, **params: str) -> None:
    """Open a scene that has a chart, with these query parameters; wait until the run is done, drawn, and the
    controls have come."""
    page.goto(app_url(server, **params))
    chart(page).wait_for()
    first_view_complete(page)
    settle(page)


def first_chart_ms(page, server: str, timeout_ms: int, **params: str) -> float:
    """Open the app; ms from the start of navigation to the first plotly chart on screen (drawn, not hidden)."""
    page.goto(app_url(server, **params))
    elapsed = page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].some((plot) => plot.querySelector('.main-svg')"
        " && getComputedStyle(plot).visibility === 'visible') && performance.now()", polling="raf", timeout=timeout_ms)
    settle(page, timeout_ms)
    return round(elapsed.json_value())


def snap(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def open_sidebar(page):
    """The app starts with the sidebar collapsed (presentation layout); open it to reach the controls."""
    sidebar = page.get_by_test_id("stSidebar")
    if sidebar.get_attribute("data-collapsed") != "false":
        page.get_by_test_id("stExpandSidebarButton").click()
        expect(sidebar).to_have_attribute("data-collapsed", "false")
    return sidebar


def open_drawer(page) -> None:
    """Open the sidebar the way a presenter does (its arrow) and wait until it is drawn over the page."""
    sidebar = page.get_by_test_id("stSidebar")
    if sidebar.get_attribute("data-collapsed") != "false":
        page.get_by_test_id("stExpandSidebarButton").click()
    expect(sidebar).to_have_attribute("data-collapsed", "false")
    page.wait_for_function("() => { const s = document.querySelector('[data-testid=stSidebar]');"
                           " return s && s.getBoundingClientRect().left >= -1 && s.getBoundingClientRect().width > 100; }")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")


TALK_SETTINGS = re.compile(r"· batch \d+ ·")  # the popover beside the scene's title that holds the talk's setting


def _appears(locator, timeout_ms: int) -> bool:
    try:
        locator.first.wait_for(timeout=timeout_ms)
        return True
    except PlaywrightTimeout:
        return False


def control(page, role: str, name: str):
    """A widget by its role and label, wherever the app puts it: beside the scene, in the talk's setting (the
    popover beside the title), else in the sidebar."""
    beside_the_scene = page.get_by_test_id("stMain").get_by_role(role, name=name, exact=True)
    if beside_the_scene.count():
        return beside_the_scene
    popover = page.get_by_test_id("stPopover").filter(has_text=TALK_SETTINGS)
    if _appears(popover, 5_000):
        body = page.get_by_test_id("stPopoverBody")
        for _ in range(3):  # a rerun that lands meanwhile can redraw the popover closed: open it again
            if not body.count() or not body.first.is_visible():
                popover.get_by_role("button").first.click()
            if not _appears(body.first.get_by_text("Data type"), 20_000):  # its last control: all are drawn
                continue
            in_talk = body.get_by_role(role, name=name, exact=True)
            if _appears(in_talk, 3_000):
                return in_talk
            if body.first.is_visible():
                break  # open and drawn, and the control is not in it
        page.keyboard.press("Escape")
    return open_sidebar(page).get_by_role(role, name=name, exact=True)


def press(widget) -> None:
    """Click a switch or radio the way a person does: on its label (the input itself is visually hidden)."""
    widget.locator("xpath=ancestor::label[1]").click()


def chart(page):
    """The first plotly chart; its text is every label drawn in its SVG."""
    return page.locator(".js-plotly-plot").first


def paper_colour(page) -> str:
    """The background colour the first figure paints (plotly sets it on the chart's main SVG)."""
    return page.locator(".js-plotly-plot svg.main-svg").first.evaluate("svg => getComputedStyle(svg).backgroundColor")


def sole_text(locator) -> str:
    """The text of the one element `locator` finds. A rerun may show the old chart beside the new a moment (two
    matches, where reading one fails Playwright's strict mode): wait until exactly one is left, then read it."""
    for _ in range(20):
        expect(locator).to_have_count(1)
        texts = locator.all_text_contents()  # reads whatever matches now, never in strict mode
        if len(texts) == 1:
            return texts[0]
    raise AssertionError(f"{locator} kept matching more than one element")


def caption_step_count(page) -> int:
    caption = page.get_by_text(re.compile(r"^\d+ steps of \d+×\d+ tiles"))
    return int(re.match(r"\d+", sole_text(caption))[0])


def animation_caption(page):
    """The animation's caption over the tile grid, as the audience reads it: 'step 3/64 · Q block …'."""
    return chart(page).locator(".scatterlayer text").filter(has_text=re.compile(r"step \d+/\d+ ·"))


def animation_step(page) -> tuple[int, int]:
    """(step, steps) from the animation's caption."""
    step, steps = re.search(r"step (\d+)/(\d+)", sole_text(animation_caption(page))).groups()
    return int(step), int(steps)


def ms_from_key_to_text(page, key: str, target: str, text: str) -> float:
    """Press a key; ms (measured in the page) until the element at `target` shows `text`."""
    page.evaluate("() => document.addEventListener('keydown', () => { window.__keydownAt = performance.now(); },"
                  " {once: true, capture: true})")
    page.keyboard.press(key)
    elapsed = page.wait_for_function(
        "([target, text]) => { const el = document.querySelector(target);"
        " return el && el.textContent.includes(text) && performance.now() - window.__keydownAt; }",
        arg=[target, text], polling="raf")
    return round(elapsed.json_value())


# what each view's chart alone draws, to wait on: a choice's button flips before its run starts, and the
# previous run's chart stays on the page, marked stale, until the new run replaces it
VIEW_MARKS = {"Tiles": "key index: scores S", "HBM ↔ SRAM": "HBM: row", "Source": "read when this page was built",
              "Re-reads": "K/V tile loads over the whole run"}
ORDERS = ("FA1 order", "FA2 order")
FRESH_CHART = '[data-testid="stElementContainer"]:not([data-stale="true"]) .js-plotly-plot'


def segment(page, label: str):
    return page.locator('[data-testid="stButtonGroup"] button').filter(has_text=label)


def choose(page, label: str) -> None:
    """Pick a view or a loop order of the tiling scene; return once its run is drawn and done."""
    button = segment(page, label)
    if button.get_attribute("aria-checked") != "true":
        button.click()
        if label in ORDERS:  # every view but the re-reads heatmap names the order in its caption
            expect(page.locator(FRESH_CHART).first).to_contain_text(f"· {label}")
        else:
            expect(page.locator(FRESH_CHART).filter(has_text=VIEW_MARKS[label])).to_have_count(1)
    settle(page)
    expect(page.locator('[data-testid="stElementContainer"][data-stale="true"]')).to_have_count(0)
    expect(button).to_have_attribute("aria-checked", "true")


def close_drawer(page) -> None:
    """Close the sidebar if it is open (Streamlit remembers it across page loads): the presentation layout."""
    sidebar = page.get_by_test_id("stSidebar")
    if sidebar.count() and sidebar.get_attribute("data-collapsed") == "false":
        sidebar.hover()  # its collapse button shows on hover
        page.get_by_test_id("stSidebarCollapseButton").locator("button").first.click()
        expect(sidebar).to_have_attribute("data-collapsed", "true")


def show(page, server: str, **params: str) -> None:
    """Open the app at these settings, sidebar closed; wait until the run is done and the charts are built for
    this window."""
    page.goto(f"{server}/?{urllib.parse.urlencode(params)}")
    page.locator('[data-testid="stSidebar"]').wait_for(state="attached")
    close_drawer(page)
    size = page.viewport_size
    page.wait_for_function(CANVAS_BUILT_FOR_JS, arg=f"{size['width']}x{size['height']}")
    first_view_complete(page)
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(state="attached")
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    page.locator('[data-testid="stMain"] h2').wait_for()
    # plotly draws after the run (Streamlit shows a skeleton until its code has loaded): wait until every
    # chart on the page has its SVG, then for two more frames
    page.wait_for_function("() => !document.querySelector('[data-testid=stSkeleton]')"
                           " && [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                           ".every((c) => c.querySelector('.main-svg'))")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")


def check_canvas(page, scene: str) -> None:
    """The canvas's promises for what is on screen now: no scrolling, audience text at least 1/45 of the window
    height, no chart text over another or cut off, no legend over the data, no page error."""
    measured = page.evaluate(MEASURE)
    height = measured["windowHeight"]

    assert measured["scrollHeight"] <= height, f"{scene} needs scrolling: {measured['scrollHeight']} > {height} px"
    smallest = measured["smallest"]
    assert smallest["px"] >= height * TEXT_SHARE - 0.5, (
        f"{scene}: text {smallest['text']!r} is {smallest['px']:.1f} px, under {height * TEXT_SHARE:.1f}")
    for chart in measured["texts"]:
        assert not overlaps(chart["boxes"]), f"{scene}: overlapping texts {overlaps(chart['boxes'])}"
        assert not outside(chart["frame"], chart["boxes"]), f"{scene}: clipped texts {outside(chart['frame'], chart['boxes'])}"
        hidden = covered_points(chart)
        assert not hidden, f"{scene}: the legend covers data points at {hidden[:3]}"
        tiny = [box["text"] for box in chart["boxes"] if box["y1"] - box["y0"] < height * TEXT_SHARE - 0.5]
        assert not tiny, f"{scene}: chart texts under {height * TEXT_SHARE:.1f} px high: {tiny[:5]}"
    assert not page.errors, f"{scene}: {page.errors}"


def expect_slider_at(page, step: int) -> None:
    """Wait until the chart's step slider (one of them: a redraw briefly shows two) reads this 0-based step."""
    page.wait_for_function(
        "([selector, text]) => { const labels = [...document.querySelectorAll(selector)];"
        " return labels.length === 1 && labels[0].textContent === text; }",
        arg=[PLOTLY_SLIDER_VALUE, f"step {step + 1}"])


def step_in_link(page) -> int:
    return int(urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)["step"][0])


def shown_step(page) -> int:
    """The 0-based step on screen, from the animation's own caption ('step 7/64 · …')."""
    caption = page.locator(".js-plotly-plot .scatterlayer text").filter(has_text=re.compile(r"step \d+/\d+ ·"))
    return int(re.search(r"step (\d+)/", sole_text(caption))[1]) - 1


def play_then_pause(page, speed: str) -> int:
    """Play at this speed from the step on screen, pause after a few frames; the step the link then holds."""
    pause = page.locator(".updatemenu-button").filter(has_text="pause")
    expect(pause).to_have_count(1)  # a redraw at the paused step has finished
    before = shown_step(page)
    page.evaluate("""() => { const chart = document.querySelector('.js-plotly-plot');
        chart.__beforePause = true;
        window.__frames = []; chart.on('plotly_animatingframe', (f) => window.__frames.push(Number(f.name))); }""")
    page.locator(".updatemenu-button").filter(has_text=f"▶ {speed}").click()
    page.wait_for_function("() => window.__frames.length >= 3")
    pause.click()
    page.wait_for_function("before => new URLSearchParams(location.search).get('step') !== String(before)",
                           arg=before)
    # the app reruns at the paused step and draws the chart anew
    page.wait_for_function("() => { const chart = document.querySelector('.js-plotly-plot');"
                           " return chart && !chart.__beforePause && chart.querySelector('.updatemenu-button'); }")
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(state="attached")
    frames = page.evaluate("window.__frames")
    assert before <= frames[0] <= before + 1, f"Play started at step {frames[0]}, not at the paused step {before}"
    return step_in_link(page)


