"""Every view of the tiling scene, in either loop order, fits the screen and reads from the back of the room:
the canvas's checks (tests/browser_pages.py) on the views behind the scene's view and order controls."""
import pytest

from tests.browser_support import require_browser

require_browser()  # skips without chromium or Playwright; fails instead in CI (FLASH_LIVE_REQUIRE_BROWSER=1)
from tests.browser_pages import MEASURE, SIZES, TEXT_SHARE, choose, outside, overlaps, show  # noqa: E402

pytestmark = pytest.mark.browser
VIEWS = ("HBM ↔ SRAM", "Source", "Re-reads")  # "Tiles": tests/test_canvas.py measures the default view
PICTURE = {"scene": "tiling", "trace_len": "256", "block_m": "64", "block_n": "32", "causal": "true", "step": "5"}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("order", ["FA2 order", "FA1 order"])
def test_every_view_fits_and_reads(tabs, server, order, size):
    page = tabs[size]
    page.errors.clear()
    show(page, server, **PICTURE)
    choose(page, order)
    for view in VIEWS:
        choose(page, view)
        measured = page.evaluate(MEASURE)
        height = measured["windowHeight"]
        where = f"{view}, {order}, {size}"
        assert measured["scrollHeight"] <= height, f"{where} needs scrolling: {measured['scrollHeight']} > {height}"
        smallest = measured["smallest"]
        assert smallest["px"] >= height * TEXT_SHARE - 0.5, f"{where}: {smallest['text']!r} is {smallest['px']} px"
        for chart in measured["texts"]:
            assert not overlaps(chart["boxes"]), f"{where}: overlapping texts {overlaps(chart['boxes'])}"
            clipped = outside(chart["frame"], chart["boxes"])
            assert not clipped, f"{where}: clipped texts {clipped}"
            tiny = [box["text"] for box in chart["boxes"] if box["y1"] - box["y0"] < height * TEXT_SHARE - 0.5]
            assert not tiny, f"{where}: chart texts under {height * TEXT_SHARE:.1f} px: {tiny[:5]}"
    assert not page.errors, page.errors
