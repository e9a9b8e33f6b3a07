"""The tiling scene's loop orders in a real browser: each order's HBM ↔ SRAM animation plays (0.5×) and
pauses where it stands, the paused step going into the link (fixtures and helpers: tests/test_browser.py)."""
import re

import pytest

from tests.test_browser import (PLOTLY_SLIDER_VALUE, animation_caption, browser, chart, expect, open_app,  # noqa: F401
                                page, query, server, settle, snap)

pytestmark = pytest.mark.browser
PICTURE = {"scene": "tiling", "trace_len": "128", "block_m": "16", "block_n": "32", "causal": "true"}
STEPS = 20  # 8 Q blocks of 16 rows, 4 K/V tiles of 32 keys, causal


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


@pytest.mark.parametrize("order", ["FA1 order", "FA2 order"])
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
    paused_at = int(re.search(r"\d+", slider.text_content())[0])
    assert query(page)["step"] == str(paused_at - 1)
    expect(animation_caption(page)).to_contain_text(f"step {paused_at}/{STEPS} · {order}")
    snap(page, f"picture-{order.split()[0].lower()}-paused")
