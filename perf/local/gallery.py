"""The gallery: every scene of the app at 1920×1080, with the system in light and in dark mode, as PNGs in
docs/gallery/ (the README shows some), so a reader sees the product before installing it.

    python -m perf.local.gallery [--out docs/gallery] [--scenes headline,tiling]

Starts `streamlit run app.py` (the CPU path without a GPU: recorded numbers, the interpreter for the
animation), opens each scene's default link in headless chromium with the system's colour scheme set,
waits until the charts are drawn for the window, and saves a screenshot reduced to a 256-colour palette
(a few hundred KB at most; the charts are flat colours). Prints each file's size.
"""
from __future__ import annotations

import argparse
import io
import sys
import urllib.parse
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

from app import SCENE_KEYS as SCENES
from page.script import FIRST_VIEW_COMPLETE_JS, CANVAS_BUILT_FOR_JS
from perf.local.tiling_fps import CHROMIUM, CHROMIUM_ARGS, PROJECTOR, ROOT, app_server

OUT = ROOT / "docs" / "gallery"
COLOURS = 256
DRAWN = f"""size => ({CANVAS_BUILT_FOR_JS})(size) && ({FIRST_VIEW_COMPLETE_JS})()
    && document.querySelector('[data-testid="stApp"]').dataset.testScriptState === 'notRunning'
    && !document.querySelector('[data-testid=stSkeleton]')
    && [...document.querySelectorAll('[data-testid=stPlotlyChart]')].every((c) => c.querySelector('.main-svg'))"""


def small_png(png: bytes) -> bytes:
    """The screenshot with its colours reduced to a palette: the same picture at a fraction of the bytes."""
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(COLOURS, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def gallery_name(scene: str, scheme: str) -> str:
    return f"{SCENES.index(scene) + 1:02d}-{scene}-{scheme}.png"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--scenes", default=",".join(SCENES), help="comma-separated scene names")
    args = parser.parse_args()
    scenes = [scene for scene in args.scenes.split(",") if scene]
    unknown = sorted(set(scenes) - set(SCENES))
    if unknown:
        parser.error(f"unknown scenes {unknown}; the app has {', '.join(SCENES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    process, server = app_server()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            for scheme in ("light", "dark"):
                page = browser.new_context(viewport=PROJECTOR, color_scheme=scheme).new_page()
                for scene in scenes:
                    page.goto(f"{server}/?{urllib.parse.urlencode({'scene': scene})}")
                    page.wait_for_function(DRAWN, arg=f"{PROJECTOR['width']}x{PROJECTOR['height']}",
                                           timeout=180_000)
                    page.wait_for_timeout(500)  # plotly's last layout pass
                    path = args.out / gallery_name(scene, scheme)
                    path.write_bytes(small_png(page.screenshot()))
                    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    print(f"{shown}: {path.stat().st_size / 1024:.0f} KiB")
                page.context.close()
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
