"""How much memory the app's server holds as viewers come and go (its caches are bounded in bytes).

Starts `streamlit run app.py` on the CPU path, then, one browser session after another (each closed before
the next, as viewers leave): the headline, a default animation, uploads of large results files, and the
worst-case animation links (512 tokens, 16×16 tiles, head_dim 256, fp32: ~30 s of interpreter each). Prints
the server's resident memory (VmRSS) after each. The byte-bounded caches (ANIMATION_CACHE_BYTES in
page/pictures.py, UPLOAD_CACHE_BYTES in page/stage.py) should make it level off instead of growing with every
new link.

    python -m perf.local.server_memory [--worst 4] [--uploads 4]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.parse
from pathlib import Path

from perf.local.tiling_fps import PROJECTOR
from perf.local.viewers_wait import app_and_browser

WORST = {"scene": "tiling", "trace_len": 512, "block_m": 16, "block_n": 16, "head_dim": 256, "dtype": "float32",
         "source": "recorded"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def big_results_file(path: Path, programs: int, salt: int) -> None:
    """A valid results file of ~17 MB: the shipped recording plus one long SM timeline."""
    from bench.results import RESULTS_DIR
    doc = json.loads((RESULTS_DIR / "h200.json").read_text())
    timeline = dict(doc["timelines"][0])
    timeline.update(seq_len=1 << 20, block_m=16, heads=64, batch=64, sm_id=[i % 132 for i in range(programs)],
                    t_start_ns=[salt + i for i in range(programs)], t_end_ns=[salt + i + 7 for i in range(programs)],
                    q_block=[i % 4096 for i in range(programs)], bh=[i % 4096 for i in range(programs)])
    doc["timelines"] = [timeline]
    path.write_text(json.dumps(doc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.local.server_memory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worst", type=int, default=4, help="worst-case animation links, one after another")
    parser.add_argument("--uploads", type=int, default=4, help="large uploads, one after another")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp())
    with app_and_browser() as (process, server, browser):
        def visit(what: str, query: dict, upload: Path | None = None, wait: str = ".js-plotly-plot") -> None:
            context = browser.new_context(viewport=PROJECTOR)
            page = context.new_page()
            page.set_default_timeout(300_000)
            page.goto(f"{server}/?{urllib.parse.urlencode(query)}")
            page.locator(wait).first.wait_for()
            if upload:
                page.get_by_test_id("stExpandSidebarButton").click()
                page.locator('input[type="file"]').set_input_files(str(upload))
                page.wait_for_function(  # the uploaded file's timeline is on screen
                    "() => document.body.innerText.includes('batch 64, 64 heads')")
            context.close()
            print(f"  {what:58s} server RSS {rss_mib(process.pid):7.0f} MiB", flush=True)

        visit("headline (the recording loaded; torch not yet)", {"scene": "headline", "source": "recorded"})
        visit("default animation (torch, Triton loaded)", {"scene": "tiling", "source": "recorded"})
        for i in range(args.uploads):
            path = folder / f"big-{i}.json"
            big_results_file(path, 600_000, salt=i)
            visit(f"upload {i + 1}: {path.stat().st_size / 1e6:.1f} MB results file",
                  {"scene": "timeline", "source": "recorded"}, upload=path)
        for i in range(args.worst):
            visit(f"worst-case animation link {i + 1} (seed {i + 1})", {**WORST, "seed": i + 1})
    return 0


if __name__ == "__main__":
    sys.exit(main())
