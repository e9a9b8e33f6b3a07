"""The app's first view against a trivial one-chart Streamlit page, and the animation's frame rate, as ratios to
their goals (first view ≤ 1.1× the trivial page; ≥ 20 frames/s at 8×). Not a timed test.

Two warm servers started with the same helper and settings (perf.local.tiling_fps.app_server, the app's own
.streamlit/config.toml): `streamlit run app.py` on the CPU path, and a one-chart page written to a temporary
folder. Then, interleaved (app, trivial, then trivial, app, …: each round starts one page later), each visit on a
quiet machine (quiet(): the last visit's server and browser done) and in a fresh browser context (a new session, an
empty HTTP cache) with a window of --window (the projector's 1920×1080 by default): milliseconds from the start of
navigation to the first chart on screen (performance.now() in the page when a `.js-plotly-plot` with data has its
SVG and is not hidden: the app's first run hides a chart built for the design window in a window of another size,
page.script), and where that time went, from the page itself: the HTML, the websocket, the server's first script
run (`new_session` → `script_finished` on the websocket), how many messages and bytes it sent, and when plotly's
bundle arrived.

With --breakdown, the same interleaved rounds also time pages in between (temporary copies, nothing of app.py,
page/ or viz/ edited): the trivial page with the app's stylesheet and page script (page.script), the trivial
page drawing the app's own first figure (its JSON as the app sent it), and both at once. With --experiments, the
app itself through a wrapper that changes one thing (APP_EXPERIMENTS: a one-trace chart sent first, an upper
bound on any reordering; --only TEXT picks those whose name contains TEXT). With --trace N, N visits each of the
app and the trivial page under chromium's tracing: how the page's main thread spent the time before the first
chart (JS modules, React, style and layout). With --against REV, the app as it was at git revision REV (a
temporary worktree, `streamlit run app.py` there with its own settings) in the same rounds: an A/B of a change.
With --server-times, the app once more through a wrapper that notes when the server sent each message of the
session's first run: how long the server took to send the chart, and how long the page took to take it in (the
browser reads the websocket on the same main thread that renders the elements before it).

Last, the tiling animation's frame rate at the fastest play speed in the app, through tiling_fps.frames_per_s.

    python -m perf.local.first_view [--rounds 7] [--window 1920x1080] [--breakdown] [--experiments [--only TEXT]]
                                    [--against REV] [--server-times] [--trace 3] [--fps-runs 3] [--no-fps]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

import streamlit.logger

import perf.local.tiling_fps as tiling_fps
from perf.local.server_load import RESOURCES, link, new_session_page, script_runs, socket_log
from perf.local.server_memory import rss_mib
from perf.local.tiling_fps import GOAL_FPS, PLAY_BUTTONS, ROOT, app_page, app_server, frames_per_s
from perf.local.viewers_wait import app_and_browser

GOAL_RATIO = 1.1
FIRST_SCENE = {"scene": "headline", "source": "recorded"}  # what a newcomer's `streamlit run app.py` opens first
TIMEOUT_MS = 180_000
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'

TRIVIAL = '''import plotly.graph_objects as go
import streamlit as st

st.plotly_chart(go.Figure(go.Scatter(y=[1, 3, 2])))
'''
# The trivial page with the app's stylesheet and page script (its CSS, and its script in an st.html)
WITH_STAGE = '''import sys
sys.path.insert(0, {root!r})
import plotly.graph_objects as go
import streamlit as st
from page.script import page_style_and_script

st.set_page_config(layout="wide", initial_sidebar_state="collapsed")
page_style_and_script({scenes!r})
st.plotly_chart(go.Figure(go.Scatter(y=[1, 3, 2])))
'''
# The trivial page drawing the app's first figure, as the app sent it
WITH_FIGURE = '''from pathlib import Path
import plotly.io
import streamlit as st

st.set_page_config(layout="wide", initial_sidebar_state="collapsed")
st.plotly_chart(plotly.io.from_json(Path(__file__).with_name("figure.json").read_text()), theme=None,
                config={{"displaylogo": False}})
'''
BOTH = '''import sys
sys.path.insert(0, {root!r})
from pathlib import Path
import plotly.io
import streamlit as st
from page.script import page_style_and_script

st.set_page_config(layout="wide", initial_sidebar_state="collapsed")
page_style_and_script({scenes!r})
st.plotly_chart(plotly.io.from_json(Path(__file__).with_name("figure.json").read_text()), theme=None,
                config={{"displaylogo": False}})
'''
# The app itself, run through a wrapper in a temporary folder that changes one thing for the experiment (no file of
# the app is edited): page.present looks these names up in the `page` package at each run.
APP_WRAPPER = '''import sys
sys.path.insert(0, {root!r})
import streamlit as st
import page
import page.script
{change}
import app
app.main()
'''
APP_EXPERIMENTS = {
    # an upper bound, not the app: a one-trace chart as the run's very first element, the app after it
    "app, a chart first": '''import plotly.graph_objects as _go
if not page.script.controls_ready():
    st.plotly_chart(_go.Figure(_go.Scatter(y=[1, 3, 2])))''',
}
# --server-times: the wrapper notes, for each run, when it started and when each message left for the browser (every
# element, the page's config and info: what ScriptRunContext.enqueue passes on), and which of them was the first
# chart, one JSON line per run in SERVER_TIMES next to the wrapper (wall-clock ms: the page's performance.timeOrigin
# turns them into ms since its navigation)
SERVER_TIMES = "server-times.jsonl"
SERVER_TIMED = '''import json, time
from pathlib import Path
import streamlit.runtime.scriptrunner_utils.script_run_context as _context
_Context = _context.ScriptRunContext
if not hasattr(_Context, "_timed_runs"):  # once per server: each session's run finds its own notes by its context
    _Context._timed_runs = {{}}
    def _enqueue(self, msg, _real=_Context.enqueue):
        run = _Context._timed_runs.get(id(self))
        if run is not None:
            if run["chart"] is None and msg.WhichOneof("type") == "delta" \\
                    and msg.delta.new_element.WhichOneof("type") == "plotly_chart":
                run["chart"] = len(run["sent_ms"])
            run["sent_ms"].append(time.time() * 1000)
        return _real(self, msg)
    _Context.enqueue = _enqueue
_key = id(_context.get_script_run_ctx())
_Context._timed_runs[_key] = _run = {{"step": page.script.first_view_step(), "start_ms": time.time() * 1000,
                                     "sent_ms": [], "chart": None}}
try:
    import app
    app.main()
finally:
    _Context._timed_runs.pop(_key, None)
    with (Path(__file__).with_name({times!r})).open("a") as _log:
        _log.write(json.dumps(_run) + "\\n")
st.stop()'''


def server_timeline(row: dict, messages: list, origin_ms: float, folder: Path) -> None:
    """From the server's notes of the session's first run (SERVER_TIMED): ms since navigation when the server
    started it and sent its first chart, and when the page took that message in (the same message by its place:
    the run's elements, config and info come in the order they were sent, after its new_session)."""
    runs = [json.loads(line) for line in (folder / SERVER_TIMES).read_text().splitlines() if line.strip()]
    (folder / SERVER_TIMES).write_text("")
    # the visit's session's first run: a "window" run (a new session's first); the last one logged, since a run of
    # the visit before may have ended after its log was read
    first = next((run for run in reversed(runs) if run["step"] == "window" and run["chart"] is not None), None)
    starts = [i for i, m in enumerate(messages) if m[1] == "in" and m[3] == "new_session"]
    if first is None or not starts:
        return
    forwarded = [m for m in messages[starts[0] + 1:]
                 if m[1] == "in" and m[3] in ("delta", "page_config_changed", "page_info_changed")]
    row["server_start_ms"] = first["start_ms"] - origin_ms
    row["server_chart_ms"] = first["sent_ms"][first["chart"]] - origin_ms
    if first["chart"] < len(forwarded):
        row["page_chart_ms"] = forwarded[first["chart"]][0]


# the JS chunks the page fetched once its websocket spoke (Streamlit loads each element's code when one first
# appears): how many, and when the last arrived
CHUNKS = """since => { const js = performance.getEntriesByType('resource')
    .filter((r) => r.name.endsWith('.js') && r.startTime >= since);
    return {chunks: js.length, last_chunk_ms: js.length ? Math.max(...js.map((r) => r.responseEnd)) : null}; }"""


@contextmanager
def checkout_server(tree: Path):
    """`streamlit run app.py` in `tree` with the settings there (its .streamlit): the same helper that starts the
    app (tiling_fps.app_server, pointed at this folder). For another checkout of the app (--against), this is
    how a presenter starts it: through APP_WRAPPER its app.py would be imported once, where Streamlit compiles
    the script it runs again for each new session, and it would take this checkout's settings."""
    with mock.patch.object(tiling_fps, "ROOT", tree):
        process, server = app_server()
    try:
        yield process, server
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def page_server(folder: Path, script: str):
    """`streamlit run app.py` in `folder` with `script` as its app.py and the app's own server settings."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "app.py").write_text(script)
    shutil.copytree(ROOT / ".streamlit", folder / ".streamlit", dirs_exist_ok=True)
    with checkout_server(folder) as served:
        yield served


QUIET_BUSY = 0.10  # the machine is quiet when its CPUs are busy less than this over QUIET_WINDOW_S
QUIET_WINDOW_S, QUIET_LIMIT_S = 0.2, 10.0


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def quiet() -> float:
    """Wait until the machine is quiet (QUIET_BUSY), at most QUIET_LIMIT_S; seconds waited. A visit ends when its
    chart is drawn, while its server starts the next run (the controls) and the browser tears the context down:
    the next visit, to another page, would pay for that on the same CPUs. Without this, whichever page came after
    the app in a round was timed on a busier machine."""
    start = time.monotonic()
    while time.monotonic() - start < QUIET_LIMIT_S:
        busy0, total0 = _cpu_times()
        time.sleep(QUIET_WINDOW_S)
        busy1, total1 = _cpu_times()
        if total1 > total0 and (busy1 - busy0) / (total1 - total0) < QUIET_BUSY:
            break
    return time.monotonic() - start


def round_order(names: list[str], n: int) -> list[str]:
    """The pages in round n's order: each round starts one page later (app, trivial; trivial, app; …)."""
    shift = n % len(names)
    return names[shift:] + names[:shift]


def visit(browser, server: str, query: dict | None = None, viewport: dict | None = None,
          timed: Path | None = None) -> dict:
    """One first view in a fresh context: ms to the first chart on screen, and the page's own timeline; with
    `timed` (the folder of a SERVER_TIMED wrapper), the server's side of its first run too (server_timeline)."""
    context, page = new_session_page(browser, viewport)
    address = link(server, query) if query else f"{server}/"
    page.goto(address, wait_until="commit")
    try:
        page.wait_for_function("() => window.__seen.chart", timeout=TIMEOUT_MS)
        page.locator(IDLE).wait_for(state="attached", timeout=TIMEOUT_MS)
    except Exception as why:
        raise RuntimeError(f"{address}: no chart drawn ({type(why).__name__}); the page says: "
                           f"{page.locator('body').inner_text()[:400]!r}") from why
    row = {"chart_ms": page.evaluate("window.__seen.chart"), **page.evaluate(RESOURCES)}
    messages = socket_log(page)
    runs = script_runs(messages)
    asks = [m[0] for m in messages if m[3] == "rerun_script"]
    row.update(page.evaluate(CHUNKS, messages[0][0] if messages else 0))
    row.update(second_run_ms=asks[1] if len(asks) > 1 else None, ws_first_ms=messages[0][0] if messages else None, run_start_ms=runs["first_start_ms"],
               run_end_ms=runs["first_end_ms"], run_messages=runs["first_run_messages"],
               run_bytes=runs["first_run_bytes"], runs=runs["started"])
    if timed is not None:
        server_timeline(row, messages, page.evaluate("performance.timeOrigin"), timed)
    context.close()
    return row


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink", "loading",
                    "blink.user_timing"]


def main_thread_work(browser, server: str, query: dict | None, path: Path) -> dict:
    """One visit under chromium's tracing: how the page's main thread (CrRendererMain) spent the time from
    navigation to the first chart, in ms: busy at all; evaluating JS modules (Streamlit's and plotly's code);
    React's work (calls into react-dom: rendering and committing the elements); style and layout."""
    context, page = new_session_page(browser)
    browser.start_tracing(page=page, path=str(path), categories=TRACE_CATEGORIES)
    page.goto(link(server, query) if query else f"{server}/", wait_until="commit")
    page.wait_for_function("() => window.__seen.chart", timeout=TIMEOUT_MS)
    chart_ms = page.evaluate("window.__seen.chart")
    page.locator(IDLE).wait_for(state="attached", timeout=TIMEOUT_MS)
    browser.stop_tracing()
    context.close()
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    timed = [e for e in events if e.get("ph") == "X" and "dur" in e
             and threads.get((e.get("pid"), e.get("tid"))) == "CrRendererMain"]
    if not timed:
        return {"chart_ms": chart_ms}
    # the page's own mark when the chart appeared (server_load.WATCH_CHARTS) says which thread and when
    marks = [e for e in events if e.get("name") == "first-chart"]
    if not marks:
        return {"chart_ms": chart_ms}
    mark = marks[-1]
    end = mark["ts"]
    timed = sorted((e for e in timed if e["pid"] == mark["pid"] and e["ts"] >= end - chart_ms * 1000),
                   key=lambda e: (e["ts"], -e["dur"]))
    work = Counter()
    stack: list[dict] = []
    for event in timed:
        if event["ts"] > end:
            break
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= event["ts"]:
            stack.pop()
        spent = min(event["dur"], end - event["ts"]) / 1000
        outer = [e["name"] for e in stack]
        if not stack:
            work["busy"] += spent
        script = event["name"] in ("v8.evaluateModule", "EvaluateScript", "FunctionCall")
        if script and not any(name in ("v8.evaluateModule", "EvaluateScript", "FunctionCall") for name in outer):
            url = (event.get("args", {}).get("data", {}) or {}).get("url", "")
            key = ("modules" if event["name"] != "FunctionCall" else
                   "react" if "react-dom" in url else "other JS")
            work[key] += spent
        if event["name"] in ("Document::recalcStyle", "UpdateLayoutTree", "LocalFrameView::performLayout", "Layout") \
                and not any(name in ("Document::recalcStyle", "UpdateLayoutTree", "LocalFrameView::performLayout",
                                     "Layout") for name in outer):
            work["style and layout"] += spent
        stack.append(event)
    return {"chart_ms": chart_ms, **work}


def app_figure_json(browser, server: str) -> str:
    """The app's first figure as the app sends it (plotly's JSON out of the chart's element in the page)."""
    context, page = new_session_page(browser)
    page.goto(link(server, FIRST_SCENE))
    page.wait_for_function("() => window.__seen.chart", timeout=TIMEOUT_MS)
    page.locator(IDLE).wait_for(state="attached", timeout=TIMEOUT_MS)
    figure = page.evaluate("""() => { const plot = document.querySelector('.js-plotly-plot');
        return JSON.stringify({data: plot.data, layout: plot.layout}); }""")
    context.close()
    return figure


def median(rows: list[dict], key: str) -> float | None:
    values = [row[key] for row in rows if row.get(key) is not None]
    return statistics.median(values) if values else None


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def timeline(name: str, rows: list[dict]) -> str:
    def at(key: str) -> str:
        return ms(median(rows, key))
    run = [row["run_end_ms"] - row["run_start_ms"] for row in rows
           if row["run_start_ms"] is not None and row["run_end_ms"] is not None]
    return (f"| {name} | {at('html_ms')} | {at('main_js_ms')} | {at('ws_first_ms')} | {at('run_start_ms')} → "
            f"{at('run_end_ms')} ({ms(statistics.median(run)) if run else '—'}) | {at('run_messages')} msgs, "
            f"{(median(rows, 'run_bytes') or 0) / 1024:.0f} KiB | {at('plotly_asked_ms')} → {at('plotly_ms')} | "
            f"{at('chunks')}, last at {at('last_chunk_ms')} | {at('second_run_ms')} | {at('elements')} | "
            f"**{at('chart_ms')}** |")


def fastest_fps(browser, server: str, runs: int) -> list[tuple[str, str, list[float]]]:
    """Frames/s at the fastest play button, `runs` freshly loaded pages per animation (tiling_fps.frames_per_s):
    tiling_fps's two animations and the browser suite's (256 tokens, 32×32 tiles: 64 steps)."""
    settings = [*tiling_fps.SETTINGS, (256, 32)]
    context = browser.new_context(viewport=tiling_fps.PROJECTOR)
    page = context.new_page()
    results = []
    for seq_len, block in settings:
        url, summary = app_page(server, seq_len, block, 128, False, "light")
        page.goto(url)
        play = page.locator(PLAY_BUTTONS).filter(has_text="▶")
        play.first.wait_for(timeout=TIMEOUT_MS)
        labels = [label.strip() for label in play.all_text_contents()]
        fastest = max(range(len(labels)), key=lambda i: float(re.search(r"[\d.]+", labels[i])[0]))
        rates = [frames_per_s(page, url, fastest)[0] for _ in range(runs)]
        results.append((summary, labels[fastest], rates))
        print(f"  {summary}, {labels[fastest]}: " + ", ".join(f"{r:.1f}" for r in rates)
              + f" frames/s (median {statistics.median(rates):.1f}, {statistics.median(rates) / GOAL_FPS:.2f}× the "
                f"goal of {GOAL_FPS:g})", flush=True)
    context.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.local.first_view", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (at least 5; default 7)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the trivial page with the app's stylesheet and script, and with its figure")
    parser.add_argument("--experiments", action="store_true",
                        help="also time the app with one thing changed in a wrapper (APP_EXPERIMENTS)")
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="with --experiments, only those whose name contains TEXT")
    parser.add_argument("--against", metavar="REV", default="",
                        help="also time the app as it was at this git revision (a temporary worktree): an A/B")
    parser.add_argument("--server-times", action="store_true",
                        help="also time the app through a wrapper that notes when the server sent the first chart")
    parser.add_argument("--trace", type=int, default=0, metavar="N",
                        help="after the rounds, N traced visits each of the app and the trivial page: how the "
                             "browser's main thread spent the time before the first chart")
    parser.add_argument("--fps-runs", type=int, default=3, help="page loads per animation for the frame rate")
    parser.add_argument("--no-fps", action="store_true")
    parser.add_argument("--window", default="1920x1080", metavar="WxH",
                        help="the browser window's inner size for the first views (default 1920x1080, the projector)")
    args = parser.parse_args(argv)
    if args.rounds < 5:
        parser.error("--rounds: at least 5")
    try:
        width, height = (int(part) for part in args.window.lower().split("x"))
    except ValueError:
        parser.error(f"--window: WIDTHxHEIGHT in px, like 1280x720 (got {args.window!r})")
    if not (200 <= width <= 8192 and 200 <= height <= 8192):
        parser.error(f"--window: each side 200-8192 px (got {args.window!r})")
    window = {"width": width, "height": height}
    streamlit.logger.set_log_level("error")  # app.py imported outside `streamlit run` warns of its caches
    from app import SCENE_KEYS  # the talk's scene keys, for the page script in the breakdown's pages
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; load average {os.getloadavg()[0]:.1f} (1 min) on "
          f"{os.cpu_count()} CPUs; window {width}x{height}", flush=True)
    with ExitStack() as stack:
        app_process, app, browser = stack.enter_context(app_and_browser())
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        pages = {"app": (app, FIRST_SCENE)}
        _, trivial = stack.enter_context(page_server(folder / "trivial", TRIVIAL))
        pages["trivial"] = (trivial, None)
        # a fresh server's first view (imports, the recording read), then each server warmed once
        cold = visit(browser, app, FIRST_SCENE, window)
        torch_loaded = "libtorch" in Path(f"/proc/{app_process.pid}/maps").read_text()
        print(f"app on a fresh server: first chart at {cold['chart_ms']:.0f} ms (its first script run "
              f"{cold['run_start_ms']:.0f} → {cold['run_end_ms']:.0f} ms); torch loaded in the server: "
              f"{torch_loaded}; server RSS {rss_mib(app_process.pid):.0f} MiB", flush=True)
        if args.breakdown:
            figure = app_figure_json(browser, app)
            for name, script in (("trivial + app's CSS and page script", WITH_STAGE),
                                 ("trivial + app's figure", WITH_FIGURE), ("trivial + both", BOTH)):
                where = folder / re.sub(r"\W+", "-", name)
                where.mkdir(parents=True)
                (where / "figure.json").write_text(figure)
                _, server = stack.enter_context(page_server(where, script.format(root=str(ROOT),
                                                                                 scenes=tuple(SCENE_KEYS))))
                pages[name] = (server, None)
            print(f"the app's first figure: {len(figure) / 1024:.0f} KiB of JSON, "
                  f"{len(json.loads(figure)['data'])} traces", flush=True)
        if args.experiments:
            for name, change in APP_EXPERIMENTS.items():
                if args.only not in name:
                    continue
                where = folder / re.sub(r"\W+", "-", name)
                _, server = stack.enter_context(page_server(where, APP_WRAPPER.format(root=str(ROOT), change=change)))
                pages[name] = (server, FIRST_SCENE)
        if args.against:
            tree = folder / "against"
            made = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.against],
                                  capture_output=True, text=True)
            if made.returncode:
                parser.error(f"--against {args.against}: {made.stderr.strip()}")
            stack.callback(subprocess.run, ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True)
            _, server = stack.enter_context(checkout_server(tree))
            pages[f"app at {args.against}"] = (server, FIRST_SCENE)
        timed: dict[str, Path] = {}
        if args.server_times:
            where = folder / "server-timed"
            # it runs the app itself and stops (st.stop: the wrapper's own `import app` below it is not run again)
            script = APP_WRAPPER.format(root=str(ROOT), change=SERVER_TIMED.format(times=SERVER_TIMES))
            _, server = stack.enter_context(page_server(where, script))
            pages["app, server timed"] = (server, FIRST_SCENE)
            timed["app, server timed"] = where
        for name, (server, query) in pages.items():
            visit(browser, server, query, window, timed.get(name))
        rows: dict[str, list[dict]] = {name: [] for name in pages}
        print(f"\n{args.rounds} interleaved rounds, a fresh browser context per visit; ms from navigation to the "
              f"first chart drawn:", flush=True)
        waits = []
        for n in range(args.rounds):
            # each round starts one page later (no page always comes first), each visit on a quiet machine
            for name in round_order(list(pages), n):
                waits.append(quiet())
                server, query = pages[name]
                rows[name].append(visit(browser, server, query, window, timed.get(name)))
            print(f"  round {n + 1}: " + ", ".join(f"{name} {rows[name][-1]['chart_ms']:.0f}" for name in pages)
                  + f" (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"  before each visit the machine was let go quiet (CPUs < {QUIET_BUSY:.0%} busy over "
              f"{QUIET_WINDOW_S:g} s): waited {statistics.median(waits):.1f} s (median), {max(waits):.1f} s at most",
              flush=True)
        medians = {name: statistics.median(row["chart_ms"] for row in rows[name]) for name in pages}
        best = {name: min(row["chart_ms"] for row in rows[name]) for name in pages}  # the least disturbed visit
        ratio = medians["app"] / medians["trivial"]
        per_round = [a["chart_ms"] / t["chart_ms"] for a, t in zip(rows["app"], rows["trivial"])]
        traced = {"app": [], "trivial": []}
        for n in range(args.trace):
            for name in traced:
                server, query = pages[name]
                traced[name].append(main_thread_work(browser, server, query, folder / f"trace-{name}-{n}.json"))
        fps = fastest_fps(browser, app, args.fps_runs) if not args.no_fps else []

    print("\nWhere the time goes (medians, ms since navigation):")
    print("| page | HTML | Streamlit's JS | first websocket message | first script run, start → end (run) | "
          "its messages | plotly's chunk asked → arrived | JS chunks after the socket opened | second run asked | "
          "elements | first chart |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in pages:
        print(timeline(name, rows[name]))
    for name in timed:
        done = [row for row in rows[name] if "server_chart_ms" in row]
        if not done:
            continue
        def spent(a: str, b: str) -> str:
            gaps = [row[b] - row[a] for row in done if a in row and b in row]
            return f"{statistics.median(gaps):.0f}" if gaps else "—"
        print(f"\n{name}, the session's first run ({len(done)} visits; medians, ms): the server sent the chart "
              f"{spent('server_start_ms', 'server_chart_ms')} ms after the run started; the page took it in "
              f"{spent('server_chart_ms', 'page_chart_ms')} ms after it was sent, and asked for plotly's code "
              f"{spent('page_chart_ms', 'plotly_asked_ms')} ms after that; the chart was drawn "
              f"{spent('server_start_ms', 'chart_ms')} ms after the run started")
    if args.trace:
        print(f"\nThe browser's main thread before the first chart (chromium's trace, {args.trace} visit(s) each; ms, "
              f"medians): busy · evaluating JS modules · React (react-dom) · other JS · style and layout")
        for name, visits in traced.items():
            def at(key: str) -> str:
                return f"{statistics.median(v.get(key, 0) for v in visits):.0f}"
            print(f"  {name}: first chart {at('chart_ms')}; busy {at('busy')} · modules {at('modules')} · React "
                  f"{at('react')} · other JS {at('other JS')} · style and layout {at('style and layout')}")
    print("\nSummary")
    print("| | measured | goal | ratio to the goal |")
    print("|---|---|---|---|")
    for name in pages:
        if name not in ("app", "trivial"):
            print(f"| {name}: first chart, median of {args.rounds} (best) | {medians[name]:.0f} ms "
                  f"({best[name]:.0f}); {medians[name] / medians['trivial']:.2f}× trivial "
                  f"({best[name] / best['trivial']:.2f}×) | | |")
    print(f"| app's first chart (headline), median of {args.rounds} (best) | {medians['app']:.0f} ms "
          f"({best['app']:.0f}) | | |")
    print(f"| trivial one-chart page, median of {args.rounds} (best) | {medians['trivial']:.0f} ms "
          f"({best['trivial']:.0f}) | | |")
    print(f"| app ÷ trivial, medians | **{ratio:.2f}×** (per round {min(per_round):.2f}–{max(per_round):.2f}×, "
          f"median of rounds {statistics.median(per_round):.2f}×; best ÷ best {best['app'] / best['trivial']:.2f}×) | "
          f"≤ {GOAL_RATIO}× | {'met' if ratio <= GOAL_RATIO else 'missed'} |")
    for summary, label, rates in fps:
        rate = statistics.median(rates)
        print(f"| {summary}, {label} | **{rate:.1f} frames/s** (runs {min(rates):.1f}–{max(rates):.1f}) | "
              f"≥ {GOAL_FPS:g} | {rate / GOAL_FPS:.2f}× ({'met' if rate >= GOAL_FPS else 'missed'}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
