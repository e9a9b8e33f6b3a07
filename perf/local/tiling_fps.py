"""Frames per second of the tiling animation in a browser, at each play speed (the goal: >= 20 frames/s at
the fastest one).

Two pages, at projector size in Debian's chromium through Playwright:
- the app itself (`--app`): starts `streamlit run app.py` and opens the tiling scene, as an audience sees it;
- the standalone page the app offers for download (viz.standalone_html), built here from a real kernel trace
  (kernels.trace.trace_flash: Triton's interpreter on CPU, or the GPU); also prints its build time and size.
For each play button, slowest first: starts from step 1, clicks the button and counts plotly's
`plotly_animatingframe` events for WINDOW_S seconds of wall time, or until the animation ends.

    python -m perf.local.tiling_fps [--app] [--head-dim 128] [--causal] [--theme dark]

The browser runs without a GPU (--disable-gpu), as on a CI box: a presenter's laptop draws faster.
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from viz.animation import loop_orders

if TYPE_CHECKING:  # Playwright is imported where a browser is driven: the module imports without it
    from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parents[2]  # the repository

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROJECTOR = {"width": 1920, "height": 1080}
SETTINGS = ((256, 64), (512, 32))  # (seq_len, square tile size): 16 and 256 steps
WINDOW_S = 4.0
GOAL_FPS = 20.0

PLAY_BUTTONS = ".js-plotly-plot .updatemenu-button"
LISTEN = """() => {
    const chart = [...document.querySelectorAll('.js-plotly-plot')].find((plot) => plot.querySelector('.updatemenu-button'));
    window.__frameTimes = [];
    window.__animationEnded = false;
    chart.on('plotly_animatingframe', () => window.__frameTimes.push(performance.now()));
    chart.on('plotly_animated', () => { window.__animationEnded = true; });
}"""
SETTLE_MS = 2000  # after the chart appears: Streamlit may still be laying out the page
WINDOW_OVER = """windowMs => window.__animationEnded
    || (window.__frameTimes.length > 0 && performance.now() - window.__frameTimes[0] >= windowMs)"""


def build_figure(view: str, trace: dict, theme: str):
    """One of the tiling scene's animated views of a trace, as the app builds it."""
    from viz import hbm_sram_figure, kernel_source_figure, tiling_figure
    if view == "hbm":
        return hbm_sram_figure(trace, 232448, "H200 (recorded)", theme=theme)
    if view == "source":
        from kernels import source
        kernel = source.kernel_source(trace["order"])
        phases = source.step_phases(trace["order"], trace["loads"], trace["stores"], kernel["phases"])
        return kernel_source_figure(trace, kernel, phases, theme=theme)
    return tiling_figure(trace, theme=theme)


def build_page(seq_len: int, block: int, head_dim: int, causal: bool, theme: str, folder: Path,
               view: str = "tiles", order: str = "fa2") -> tuple[str, str]:
    """The animation as a standalone page in `folder`; its URL and a line on steps, build time and size."""
    from kernels.trace import trace_flash  # imports torch and Triton: only for the standalone page
    from viz import standalone_html

    trace = trace_flash(seq_len, head_dim, block, block, causal, order=order).to_dict()
    start = time.perf_counter()
    fig = build_figure(view, trace, theme)
    build_s = time.perf_counter() - start
    json_mb = len(fig.to_json()) / 1e6
    path = folder / f"{view}-{order}-{seq_len}-{block}x{block}{'-causal' if causal else ''}.html"
    path.write_text(standalone_html(fig))
    summary = (f"{view} view, {order} order, N={seq_len}, {block}×{block} tiles, head_dim {head_dim}"
               f"{', causal' if causal else ''}: "
               f"{len(fig.frames)} steps, built in {build_s:.2f} s, {json_mb:.2f} MB of JSON")
    return path.as_uri(), summary


def app_server() -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free port, once it answers; the process and its address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                                "--server.port", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("streamlit did not start within 60 s")


def app_page(server: str, seq_len: int, block: int, head_dim: int, causal: bool, theme: str) -> tuple[str, str]:
    """The app's tiling scene at these settings: its URL and a line saying what it shows."""
    query = {"scene": "tiling", "trace_len": seq_len, "block_m": block, "block_n": block, "head_dim": head_dim,
             "causal": str(causal).lower(), "theme": theme}
    steps = (-(-seq_len // block)) ** 2 if not causal else None
    summary = (f"app, N={seq_len}, {block}×{block} tiles, head_dim {head_dim}{', causal' if causal else ''}"
               + (f": {steps} steps" if steps else ""))
    return f"{server}/?{urllib.parse.urlencode(query)}", summary


def frames_per_s(page: Page, url: str, button_index: int) -> tuple[float, int, bool]:
    """(frames/s, frames counted, whether the animation ended inside the window) for one play button,
    on a freshly loaded page (step 1)."""
    page.goto(url)
    page.locator(PLAY_BUTTONS).first.wait_for(timeout=180_000)
    page.wait_for_timeout(SETTLE_MS)
    page.evaluate(LISTEN)
    page.locator(PLAY_BUTTONS).filter(has_text="▶").nth(button_index).click()
    page.wait_for_function(WINDOW_OVER, arg=WINDOW_S * 1000, timeout=120_000)
    times, ended = page.evaluate("[window.__frameTimes, window.__animationEnded]")
    if not ended:  # (an ended animation's step goes into the app's link: the app redraws the chart)
        page.locator(PLAY_BUTTONS).filter(has_text="pause").first.click()
    rate = (len(times) - 1) / (times[-1] - times[0]) * 1000 if len(times) > 1 else 0.0
    return rate, len(times), ended


def measure(page: Page, url: str) -> list[tuple[str, float, float]]:
    """Time every play button in order; prints a line per button.
    Returns (label, speed factor, frames/s) per button."""
    page.goto(url)
    play = page.locator(PLAY_BUTTONS).filter(has_text="▶")
    play.first.wait_for(timeout=180_000)  # the app's first run computes the trace
    labels = [label.strip() for label in play.all_text_contents()]
    results = []
    for index, label in enumerate(labels):
        rate, frames, ended = frames_per_s(page, url, index)
        speed = float(re.search(r"[\d.]+", label)[0])
        note = " (the animation ended first)" if ended else ""
        print(f"  {label:>7}: {rate:5.1f} frames/s over {frames} frames{note}")
        results.append((label, speed, rate))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", action="store_true", help="time the app's own page, not the standalone one")
    parser.add_argument("--head-dim", type=int, default=128, help="the app's default is 128")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    parser.add_argument("--view", choices=("tiles", "hbm", "source"), default="tiles",
                        help="which of the tiling scene's animated views (standalone page only)")
    parser.add_argument("--order", choices=tuple(loop_orders()), default="fa2",
                        help="the kernel's loop order: flash (FA2 order) or flash_v1 (FA1 order)")
    args = parser.parse_args()
    server, address = app_server() if args.app else (None, "")
    try:
        from playwright.sync_api import sync_playwright
        with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=PROJECTOR)
            for seq_len, block in SETTINGS:
                settings = (seq_len, block, args.head_dim, args.causal, args.theme)
                url, summary = (app_page(address, *settings) if args.app
                                else build_page(*settings, Path(folder), args.view, args.order))
                print(summary)
                label, _, rate = max(measure(page, url), key=lambda result: result[1])
                verdict = "meets" if rate >= GOAL_FPS else "misses"
                print(f"  fastest ({label}): {rate:.1f} frames/s, {verdict} the goal of {GOAL_FPS:g}")
            browser.close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
