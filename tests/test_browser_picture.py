"""The tiling scene's loop orders in a real browser: each order's HBM ↔ SRAM animation plays (0.5×: 10 s in all, the pause comes first) and
pauses where it stands, the paused step going into the link (fixtures and helpers: tests/test_browser.py)."""
import re

import pytest

from tests.test_browser import (PLOTLY_SLIDER_VALUE, animation_caption, browser, chart, expect, open_app,  # noqa: F401
                                page, query, server, settle, snap)

pytestmark = pytest.mark.browser
PICTURE = {"scene": "tiling", "trace_len": "128", "block_m": "16", "block_n": "32", "causal": "true"}
STEPS = 20  # 8 Q blocks of 16 rows, 4 K/V tiles of 32 keys, causal


def segment(page, label: str):
    return page.locator('[data-testid="stButtonGroup"] button').filter(has_text=label)


@pytest.mark.parametrize("order", ["FA1 order", "FA2 order"])
def test_each_order_plays_and_pauses(page, server, order):
    open_app(page, server, **PICTURE)
    for label in (order, "HBM ↔ SRAM"):
        segment(page, label).click()
        expect(segment(page, label)).to_have_attribute("aria-checked", "true")
        settle(page)
    expect(animation_caption(page)).to_contain_text(f"/{STEPS} · {order}")
    slider = page.locator(PLOTLY_SLIDER_VALUE)
    # the chart's own buttons, clicked where they are (a note above the chart may still move it down)
    chart(page).locator(".updatemenu-button").filter(has_text="0.5×").dispatch_event("click")
    expect(slider).not_to_have_text("step 1")
    chart(page).locator(".updatemenu-button").filter(has_text="pause").dispatch_event("click")
    # the paused step goes into the link, and the app reruns there
    page.wait_for_function("() => ![null, '0'].includes(new URLSearchParams(location.search).get('step'))")
    settle(page)
    paused_at = int(re.search(r"\d+", slider.text_content())[0])
    assert query(page)["step"] == str(paused_at - 1)
    expect(animation_caption(page)).to_contain_text(f"step {paused_at}/{STEPS} · {order}")
    snap(page, f"picture-{order.split()[0].lower()}-paused")
