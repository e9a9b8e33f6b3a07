"""What N viewers opening new animations at the same moment wait, on the CPU path.

One `streamlit run app.py` (Triton's interpreter, FLASH_LIVE_BACKEND=interpreter); N browser contexts (N
sessions) open the tiling scene at the same moment, each with its own seed, so every one needs a new kernel
trace. The interpreter runs one kernel at a time for the whole server (kernels.runtime.kernel_launch_lock):
the viewers queue. For each viewer: seconds from navigation to its animation's caption, whether the page
told it that it was queued, and whether its animation came without an error. The server is warmed first
(torch and Triton imported, one animation built), so the figures are the queue, not the start-up.

    python -m perf.local.viewers_wait [--viewers 1,2,4] [--trace-len 256] [--block 64]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.parse
from contextlib import contextmanager

from perf.local.tiling_fps import CHROMIUM, CHROMIUM_ARGS, PROJECTOR, app_server

WATCH_QUEUE_NOTE = """() => {
    window.__queued = false;
    new MutationObserver(() => {
        if (document.body && document.body.innerText.includes('Queued behind')) window.__queued = true;
    }).observe(document, {childList: true, subtree: true, characterData: true});
}"""
CAPTION = "text=/^\\d+ steps of \\d+×\\d+ tiles/"


@contextmanager
def app_and_browser():
    """`streamlit run app.py` on the CPU path and a headless chromium: (server process, its URL, browser)."""
    from playwright.sync_api import sync_playwright  # here: the module imports without Playwright
    os.environ["FLASH_LIVE_BACKEND"] = "interpreter"
    process, server = app_server()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            yield process, server, browser
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)


def url(server: str, seed: int, trace_len: int, block: int) -> str:
    query = {"scene": "tiling", "seed": seed, "trace_len": trace_len, "block_m": block, "block_n": block,
             "source": "recorded"}
    return f"{server}/?{urllib.parse.urlencode(query)}"


def one_round(browser, server: str, viewers: int, seed0: int, trace_len: int, block: int) -> list[dict]:
    sessions = []
    for _ in range(viewers):
        context = browser.new_context(viewport=PROJECTOR)
        context.add_init_script(script=f"({WATCH_QUEUE_NOTE})()")
        sessions.append((context, context.new_page()))
    started = []
    for i, (_, page) in enumerate(sessions):  # all navigations start before any is awaited
        started.append(time.perf_counter())
        page.goto(url(server, seed0 + i, trace_len, block), wait_until="commit")
    rows = []
    for (context, page), start in zip(sessions, started):
        page.locator(CAPTION).wait_for(timeout=600_000)
        waited = time.perf_counter() - start
        errors = page.get_by_test_id("stException").count() + page.get_by_text("InterpreterError").count()
        rows.append({"seconds": waited, "queued_note": page.evaluate("window.__queued"), "errors": errors})
    for context, _ in sessions:
        context.close()
    return sorted(rows, key=lambda row: row["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.local.viewers_wait", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--viewers", default="1,2,4", help="comma-separated viewer counts (default 1,2,4)")
    parser.add_argument("--trace-len", type=int, default=256)
    parser.add_argument("--block", type=int, default=64)
    args = parser.parse_args(argv)
    with app_and_browser() as (_, server, browser):
        one_round(browser, server, 1, 10_000, args.trace_len, args.block)  # warm-up: imports, first trace
        seed = 20_000
        print(f"N viewers open /?scene=tiling (trace_len {args.trace_len}, {args.block}×{args.block} tiles, "
              f"new seeds) at once; seconds until each sees its animation:")
        for viewers in (int(v) for v in args.viewers.split(",")):
            rows = one_round(browser, server, viewers, seed, args.trace_len, args.block)
            seed += 100
            times = [row["seconds"] for row in rows]
            print(f"  N={viewers}: " + ", ".join(f"{t:.1f}" for t in times)
                  + f"  (median {statistics.median(times):.1f} s, last {times[-1]:.1f} s; told they were "
                    f"queued: {sum(row['queued_note'] for row in rows)}/{viewers}; errors: "
                    f"{sum(row['errors'] for row in rows)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
