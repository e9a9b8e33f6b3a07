"""The tiling scene's loop orders in a real browser: each order's HBM ↔ SRAM animation plays (0.5×) and
pauses where it stands, the paused step going into the link (fixtures: tests/conftest.py; helpers: tests/browser_pages.py)."""
import re

import pytest

from tests.browser_support import require_browser

require_browser()  # skips without chromium or Playwright; fails instead in CI (FLASH_LIVE_REQUIRE_BROWSER=1)
from tests.browser_pages import ORDERS, PLOTLY_SLIDER_VALUE, animation_caption, chart, choose, expect, open_app, \
    query, settle, snap  # noqa: E402

pytestmark = pytest.mark.browser
PICTURE = {"scene": "tiling", "trace_len": "128", "block_m": "16", "block_n": "32", "causal": "true"}
STEPS = 20  # 8 Q blocks of 16 rows, 4 K/V tiles of 32 keys, causal


@pytest.mark.parametrize("order", ORDERS)
def test_each_order_plays_and_pauses(page, server, order):
    open_app(page, server, **PICTURE)
    choose(page, order)
    choose(page, "HBM ↔ SRAM")
    expect(animation_caption(page)).to_contain_text(f"/{STEPS} · {order}")
    slider = page.locator(PLOTLY_SLIDER_VALUE)
    expect(slider).to_have_count(1)
    # 0.5×: the 20 steps take 10 s, so a busy CI core still presses pause long before the last frame
    chart(page).locator(".updatemenu-button").filter(has_text="0.5×").click()
    expect(slider).not_to_have_text("step 1")
    chart(page).locator(".updatemenu-button").filter(has_text="pause").click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('step') !== '0'")  # the paused step
    settle(page)
    paused_at = int(query(page)["step"]) + 1  # the link holds the step from 0, the slider counts from 1
    # the rerun the paused step starts may show the old chart beside the new a moment: a list of one text waits for
    # exactly one slider, and it must show the step the link holds
    expect(slider).to_have_text([re.compile(rf"^step {paused_at}$")])
    expect(animation_caption(page)).to_contain_text(f"step {paused_at}/{STEPS} · {order}")
    snap(page, f"picture-{order.split()[0].lower()}-paused")
