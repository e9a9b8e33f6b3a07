"""Viewers at once and a hostile upload, in a real browser against one `streamlit run app.py`.

Two browser contexts are two Streamlit sessions on one server, the way two people in a room open the link:
each must get its own numbers and its own animation (Triton's interpreter is shared by the server, so the
kernels queue on kernels.runtime's lock). A bad results file must leave the uploader usable: the only way
out is to upload a good one.
"""
import json
import re

import pytest

from tests.browser_support import require_browser

require_browser()  # skips without chromium or Playwright; fails instead in CI (FLASH_LIVE_REQUIRE_BROWSER=1)
from tests.browser_pages import (STEP_MS, app_url, chart, expect, first_view_complete, open_sidebar, query,  # noqa: E402
                                 settle, snap)
from tests.support_app import uploaded_recording  # noqa: E402

pytestmark = pytest.mark.browser
PROJECTOR = {"width": 1920, "height": 1080}


def _session(browser):
    context = browser.new_context(viewport=PROJECTOR)
    page = context.new_page()
    page.set_default_timeout(STEP_MS * 2)  # two interpreter runs queue one behind the other
    return context, page


def _metric_values(page) -> list[str]:
    return page.get_by_test_id("stMetricValue").all_inner_texts()


def test_two_viewers_at_once_each_get_their_own_numbers_and_animation(browser, server):
    contexts = [_session(browser) for _ in range(2)]
    try:
        pages = [page for _, page in contexts]
        # the slider scenes: two lengths requested at the same moment
        for page, seq_len in zip(pages, ("2048", "131072")):
            page.goto(app_url(server, scene="headline", seq_len=seq_len, source="recorded"), wait_until="commit")
        for page, seq_len in zip(pages, ("2048", "131072")):
            chart(page).wait_for()
            first_view_complete(page, STEP_MS * 2)  # the cards come with the controls, a run after the picture
            settle(page)
            expect(page.get_by_test_id("stMetricValue")).to_have_count(3)
            assert query(page)["seq_len"] == seq_len
        assert _metric_values(pages[0]) != _metric_values(pages[1])
        # the animation: two new settings at once, both computed by the one interpreter of the server
        seeds = ("300", "301")
        for page, seed in zip(pages, seeds):
            page.goto(app_url(server, scene="tiling", seed=seed, trace_len="64", block_m="16", block_n="16",
                              source="recorded"), wait_until="commit")
        for page, seed in zip(pages, seeds):
            expect(page.get_by_text(re.compile(r"^\d+ steps of 16×16 tiles"))).to_be_visible()
            settle(page)
            expect(page.get_by_test_id("stAlert").filter(has_text=re.compile("Error|error"))).to_have_count(0)
            assert query(page)["seed"] == seed
            expect(page.get_by_text(re.compile(rf"· seed {seed}$")).first).to_be_visible()  # the controls' summary
        captions = [page.get_by_text(re.compile(r"max \|O_flash − O_standard\| = ")).inner_text() for page in pages]
        errors = [float(re.search(r"= ([-+.e\d]+)\.(?: |$)", text)[1]) for text in captions]
        assert max(errors) < 1e-2, captions  # bf16 rounding; two kernels corrupting each other give O(1)
        snap(pages[1], "12-second-viewer-animation")
    finally:
        for context, _ in contexts:
            context.close()


def test_after_a_bad_upload_the_uploader_still_takes_a_good_file(browser, server, tmp_path):
    context, page = _session(browser)
    try:
        page.goto(app_url(server, scene="timeline", source="recorded"))
        settle(page)
        bad = json.loads(uploaded_recording())
        bad["device"]["sm_count"] = "abc"
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        (tmp_path / "good.json").write_bytes(uploaded_recording())
        sidebar = open_sidebar(page)
        sidebar.locator('input[type="file"]').set_input_files(str(tmp_path / "bad.json"))
        expect(sidebar.get_by_text(re.compile("That file was not used.*sm_count"))).to_be_visible()
        settle(page)
        expect(page.get_by_role("heading", name=re.compile(r"^\d+\. Work on the SMs"))).to_be_visible()
        snap(page, "13-bad-upload")
        # the way out: the uploader is still there and takes a good file
        sidebar.locator('input[type="file"]').set_input_files(str(tmp_path / "good.json"))
        expect(page.locator(".stMarkdownBadge").filter(has_text="RECORDED on Test GPU")).to_be_visible()
        expect(sidebar.get_by_text("That file was not used")).to_have_count(0)
        page.get_by_role("button", name="Next ▶").click()
        expect(page.get_by_role("heading", name=re.compile(r"^\d+\. Inside one program"))).to_be_visible()
        settle(page)
    finally:
        context.close()


def test_a_gpu_name_with_links_and_tags_shows_as_text(browser, server, tmp_path):
    """Markdown links, bare addresses (GitHub-flavoured markdown links them by itself) and HTML tags in a file's
    text: none becomes a link or a tag, in badges, labels, notes or figure titles."""
    hostile = json.loads(uploaded_recording())
    hostile["device"]["name"] = "[click me](https://evil.example) <b>bold</b> www.evil.example me@evil.example"
    (tmp_path / "markup.json").write_text(json.dumps(hostile))
    context, page = _session(browser)
    try:
        for scene in ("headline", "hierarchy"):
            page.goto(app_url(server, scene=scene, seq_len="2048", source="recorded"))
            chart(page).wait_for()
            open_sidebar(page).locator('input[type="file"]').set_input_files(str(tmp_path / "markup.json"))
            expect(page.locator(".stMarkdownBadge").filter(has_text="[click me](https:")).to_be_visible()
            settle(page)
            assert page.locator('a[href*="evil"]').count() == 0, "no link to the file's addresses"
            assert page.locator("b", has_text="bold").count() == 0, "no tag from the file's text"
            if scene == "hierarchy":
                expect(chart(page)).to_contain_text("<b>bold</b>")  # the figure's title shows it, as text
            snap(page, f"14-markup-{scene}")
    finally:
        context.close()
