"""What a presenter's held key and many heavy viewers do to the app's server, on the CPU path.

One `streamlit run app.py` (FLASH_LIVE_BACKEND=interpreter) and headless chromium (perf.local.viewers_wait's
app_and_browser). Not a timed test: it prints what it measured.

1. A held key. On `?scene=tiling&trace_len=64&block_m=16&block_n=16` (16 steps), once the page is drawn: 200 × →
   as fast as Playwright sends them, then (a fresh page) → held down for 200 key repeats; then 50 × Page Down
   from scene 1. For each: seconds from the first press until the link settles (and until the page has drawn
   where it landed: "Step ▶" disabled on the last step, the last scene's heading), where it landed, how many
   script runs the server did for it (counted from the server's own messages on the session's websocket:
   one `new_session` per run started, one `script_finished` per run that finished), and the latency of
   `/_stcore/health` polled every 100 ms from another thread meanwhile (median, max). The page script gathers
   the presses (page/script.js), so a key held down should land on the last step in a few reruns.
2. K heavy viewers and one light one. K = 4, 8, 16 browser contexts open one heavy animation (512 tokens,
   16×16 tiles: 1,024 steps; one seed per round, shared, so they share one trace and one figure) each at a
   different step, and one more context opens the headline at the same moment. Seconds from navigation to the
   light page's first chart and to each heavy viewer's animation (timed in the page: performance.now() when
   it appears), and the server's RSS before, once all are drawn, and after the contexts close. Each round
   uses a new seed, so it pays one trace and one figure build (page/pictures.py builds one figure at a time
   and keeps one per trace, view, theme and height, never one per step).

The server is warmed first (torch and Triton imported by the held-key page, the headline drawn once). A short
table comes last.

    python -m perf.local.server_load [--viewers 4,8,16] [--presses 200] [--heavy-len 512] [--heavy-block 16]
"""
from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import streamlit.logger
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from page.script import FIRST_VIEW_COMPLETE_JS, CANVAS_BUILT_FOR_JS
from perf.local.server_memory import rss_mib
from perf.local.tiling_fps import PROJECTOR
from perf.local.viewers_wait import CAPTION, app_and_browser

HELD = {"scene": "tiling", "trace_len": 64, "block_m": 16, "block_n": 16, "source": "recorded"}  # 16 steps
LIGHT = {"scene": "headline", "source": "recorded"}
HEALTH_EVERY_S = 0.1
SETTLE_TIMEOUT_MS = 300_000
DRAW_TIMEOUT_MS = 900_000  # 16 heavy pages on two cores, behind one interpreter trace and one figure build

IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# the page is ready for keys: the page script listens, the animation's frames are loaded, and the rerun the
# page script's first viewport report asks for has come and gone (the canvas says which window it was built for), and
# the first view is complete (its controls are drawn: page.script's first-view steps)
READY = (f"() => !!window.__flashLivePage && ({CANVAS_BUILT_FOR_JS})('1920x1080') "
         f"&& ({FIRST_VIEW_COMPLETE_JS})()")
HAS_FRAMES = """() => [...document.querySelectorAll('.js-plotly-plot')].some((plot) =>
    plot._transitionData && plot._transitionData._frames && plot._transitionData._frames.length > 0)"""
LINK_SAYS = """([key, value]) => new URL(location.href).searchParams.get(key) === value"""
LAST_STEP_DRAWN = """() => { const b = [...document.querySelectorAll('button')].find((x) => x.textContent.includes('Step ▶'));
    return !!b && b.disabled; }"""
# In every page: when its first chart and its first animation (a chart with play buttons) appear, in ms since
# the navigation started.
WATCH_CHARTS = """() => {
    window.__seen = {};
    // a chart on screen: drawn, with data, and not hidden (the app's first run hides a chart built for the
    // design window in a window of another size, page.script)
    const shown = (plot) => plot.querySelector('.main-svg') && plot.data && plot.data.length > 0
        && getComputedStyle(plot).visibility === 'visible';
    new MutationObserver(() => {
        if (!window.__seen.chart && [...document.querySelectorAll('.js-plotly-plot')].some(shown)) {
            window.__seen.chart = performance.now();
            performance.mark('first-chart');  // for a trace of the page (perf.local.first_view --trace)
        }
        if (!window.__seen.animation && document.querySelector('.js-plotly-plot .updatemenu-button'))
            window.__seen.animation = performance.now();
    }).observe(document, {childList: true, subtree: true});
}"""


# when the page's resources arrived (ms since navigation): the HTML, Streamlit's main bundle, plotly's chunk
RESOURCES = """() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const js = performance.getEntriesByType('resource').filter((r) => r.name.endsWith('.js'));
    const main = js.find((r) => /\\/index\\.[^/]*\\.js$/.test(r.name));
    const plotly = js.find((r) => r.name.includes('PlotlyChart'));
    return {html_ms: nav ? nav.responseEnd : null, dom_ms: nav ? nav.domContentLoadedEventEnd : null,
            main_js_ms: main ? main.responseEnd : null,
            plotly_asked_ms: plotly ? plotly.startTime : null, plotly_ms: plotly ? plotly.responseEnd : null,
            elements: document.querySelectorAll('[data-testid="stElementContainer"]').length};
}"""


def link(server: str, query: dict) -> str:
    return f"{server}/?{urllib.parse.urlencode(query)}"


# In every page: the Streamlit websocket's messages, each with its time (ms since the navigation started), its
# direction and size, and the bytes of the small ones (the runs' start and end; a delta can be megabytes), for
# script_runs to decode with Streamlit's own protobuf classes.
WATCH_SOCKET = """() => {
    const Native = window.WebSocket;
    const log = window.__socket = [];
    const record = (way, data) => {
        const bytes = data instanceof ArrayBuffer ? new Uint8Array(data)
            : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
        if (!bytes) return;
        log.push([performance.now(), way, bytes.length,
                  bytes.length <= 4096 ? btoa(String.fromCharCode(...bytes)) : null]);
    };
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('message', (event) => record('in', event.data));
        }
        send(data) { record('out', data); return super.send(data); }
    };
}"""


def socket_log(page) -> list[tuple[float, str, int, str]]:
    """The page's websocket messages so far: (ms since navigation, what, bytes) with `what` the ForwardMsg type
    received (`new_session` when a script run starts, `script_finished` when one ends: a run cut short by the next
    has none; `delta` an element) or the BackMsg type sent (`rerun_script`: the browser asks for a run)."""
    messages = []
    for ms, way, size, payload in page.evaluate("window.__socket || []"):
        kind = "delta"  # only deltas are large
        if payload is not None:
            message = ForwardMsg() if way == "in" else BackMsg()
            message.ParseFromString(base64.b64decode(payload))
            kind = message.WhichOneof("type") or "?"
        messages.append((ms, way, size, kind))
    return messages


def script_runs(messages, since_ms: float = 0.0) -> dict:
    """What the server did for this session after `since_ms`: runs started and finished, reruns the browser asked
    for, and the first run's start and end (ms since navigation) and its messages."""
    later = [m for m in messages if m[0] >= since_ms]
    starts = [m[0] for m in later if m[3] == "new_session"]
    ends = [m[0] for m in later if m[3] == "script_finished"]
    first_end = next((t for t in ends if starts and t >= starts[0]), None)
    asks = [m[0] for m in later if m[3] == "rerun_script"]
    return {"first_asked_ms": asks[0] if asks else None, "first_message_ms": later[0][0] if later else None,
            "started": len(starts), "finished": len(ends), "asked": sum(m[3] == "rerun_script" for m in later),
            "first_start_ms": starts[0] if starts else None, "first_end_ms": first_end,
            "first_run_messages": sum(1 for m in later if m[1] == "in" and starts and starts[0] <= m[0] <= (first_end or 1e12)),
            "first_run_bytes": sum(m[2] for m in later if m[1] == "in" and starts and starts[0] <= m[0] <= (first_end or 1e12)),
            "sent": [m for m in later if m[1] == "out"]}


def new_session_page(browser, viewport: dict | None = None):
    """A fresh browser context (its own Streamlit session, an empty HTTP cache) at projector size (or `viewport`),
    watching its websocket and when its charts appear."""
    context = browser.new_context(viewport=viewport or PROJECTOR)
    context.add_init_script(script=f"({WATCH_SOCKET})()")
    context.add_init_script(script=f"({WATCH_CHARTS})()")
    page = context.new_page()
    page.set_default_timeout(DRAW_TIMEOUT_MS)
    return context, page


class HealthPoller(threading.Thread):
    """GET /_stcore/health every HEALTH_EVERY_S from its own thread; each answer's latency in seconds (a poll
    starts HEALTH_EVERY_S after the last one started, or at once when the last one took longer)."""

    def __init__(self, server: str):
        super().__init__(daemon=True)
        self.url = f"{server}/_stcore/health"
        self.latencies: list[float] = []
        self.failures = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=120) as response:
                    response.read()
                self.latencies.append(time.perf_counter() - start)
            except (urllib.error.URLError, OSError):
                self.failures += 1
            self._done.wait(max(0.0, HEALTH_EVERY_S - (time.perf_counter() - start)))

    def stop(self) -> dict:
        self._done.set()
        self.join()
        lat = self.latencies or [float("nan")]
        return {"polls": len(self.latencies), "median_ms": 1000 * statistics.median(lat),
                "max_ms": 1000 * max(lat), "failures": self.failures}


def drawn_and_idle(page) -> None:
    page.locator(IDLE).wait_for(state="attached", timeout=SETTLE_TIMEOUT_MS)


def keys(browser, process, server: str, key: str, times: int, how: str, start: dict, landed: tuple[str, str],
         drawn: str) -> dict:
    """Open `start`, wait until it is drawn and ready, then send `key` `times` times (how: "press": press and
    release each time, as fast as Playwright sends them; "hold": key down, `times` repeats, key up). Seconds from
    the first press until the link says `landed` (key, value) and until the page shows it (`drawn`: a JS
    predicate) with no script running; the server's script runs meanwhile; /_stcore/health's latency."""
    context, page = new_session_page(browser)
    page.set_default_timeout(SETTLE_TIMEOUT_MS)
    page.goto(link(server, start))
    page.locator(".js-plotly-plot").first.wait_for()
    page.wait_for_function(READY)
    if start.get("scene") == "tiling":
        page.locator(CAPTION).wait_for()
        page.wait_for_function(HAS_FRAMES)
    drawn_and_idle(page)
    rss_before = rss_mib(process.pid)
    poller = HealthPoller(server)
    poller.start()
    first_ms = page.evaluate("performance.now()")
    first = time.perf_counter()
    if how == "press":
        for _ in range(times):
            page.keyboard.press(key)
    else:
        for _ in range(times):
            page.keyboard.down(key)  # the second and later downs are repeats (event.repeat), as a held key sends
        page.keyboard.up(key)
    sent_s = time.perf_counter() - first
    result = {"sent_s": sent_s, "landed_ok": True}
    try:
        page.wait_for_function(LINK_SAYS, arg=list(landed), timeout=SETTLE_TIMEOUT_MS)
        result["link_s"] = time.perf_counter() - first
        page.wait_for_function(drawn, timeout=SETTLE_TIMEOUT_MS)
        drawn_and_idle(page)
        result["drawn_s"] = time.perf_counter() - first
    except Exception as why:  # it never got there: say where it is
        result.update(landed_ok=False, link_s=float("nan"), drawn_s=float("nan"), why=type(why).__name__)
    health = poller.stop()
    runs = script_runs(socket_log(page), first_ms)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
    result.update(landed=query.get(landed[0]), health=health, rss_before=rss_before, rss_after=rss_mib(process.pid),
                  runs_started=runs["started"], runs_finished=runs["finished"], reruns_asked=runs["asked"])
    context.close()
    return result


def show_keys(what: str, r: dict) -> None:
    h = r["health"]
    print(f"  {what}: sent in {r['sent_s']:.2f} s; link settled at {r['link_s']:.2f} s, page drawn there and idle at "
          f"{r['drawn_s']:.2f} s; landed on {r['landed']!r}{'' if r['landed_ok'] else ' (NOT where expected: ' + r['why'] + ')'}; "
          f"script runs: {r['runs_started']} started, {r['runs_finished']} finished ({r['reruns_asked']} asked by the "
          f"browser); /_stcore/health over {h['polls']} polls: median {h['median_ms']:.0f} ms, max {h['max_ms']:.0f} ms"
          f"{', ' + str(h['failures']) + ' failed' if h['failures'] else ''}; server RSS {r['rss_before']:.0f} → "
          f"{r['rss_after']:.0f} MiB", flush=True)


def heavy_round(browser, process, server: str, viewers: int, seed: int, heavy: dict, steps: int) -> dict:
    """K heavy viewers (one seed, K different steps) and one light page, all navigating at once."""
    rss_before = rss_mib(process.pid)
    sessions = []
    for _ in range(viewers + 1):
        sessions.append(new_session_page(browser))
    poller = HealthPoller(server)
    poller.start()
    at = [i * steps // viewers for i in range(viewers)]
    for (_, page), step in zip(sessions, at):  # every navigation starts before any is awaited
        page.goto(link(server, {**heavy, "seed": seed, "step": step}), wait_until="commit")
    light = sessions[-1][1]
    light.goto(link(server, LIGHT), wait_until="commit")
    light.wait_for_function("() => window.__seen.chart")
    light_s = light.evaluate("window.__seen.chart") / 1000
    heavy_s, errors = [], 0
    for _, page in sessions[:-1]:
        page.wait_for_function("() => window.__seen.animation")
        heavy_s.append(page.evaluate("window.__seen.animation") / 1000)
        errors += page.get_by_test_id("stException").count()
    for _, page in sessions:
        drawn_and_idle(page)
    rss_drawn = rss_mib(process.pid)
    health = poller.stop()
    light_run = {**script_runs(socket_log(light)), **light.evaluate(RESOURCES)}
    for context, _ in sessions:
        context.close()
    return {"viewers": viewers, "steps": at, "light_s": light_s, "light_run": light_run, "heavy_s": heavy_s, "errors": errors,
            "health": health, "rss_before": rss_before, "rss_drawn": rss_drawn, "rss_closed": rss_mib(process.pid)}


def light_alone(browser, server: str) -> tuple[float, dict]:
    """The headline in a fresh session: seconds to its first chart, and its script runs."""
    context, page = new_session_page(browser)
    page.goto(link(server, LIGHT), wait_until="commit")
    page.wait_for_function("() => window.__seen.chart", timeout=SETTLE_TIMEOUT_MS)
    seconds = page.evaluate("window.__seen.chart") / 1000
    drawn_and_idle(page)
    runs = {**script_runs(socket_log(page)), **page.evaluate(RESOURCES)}
    context.close()
    return seconds, runs


def first_run(runs: dict) -> str:
    """The light page's first script run, as the server ran it: when it started and ended after navigation, and
    (where known) when the page had its HTML and Streamlit's code, asked for the run, and had plotly's code."""
    def s(key: str) -> str:
        return "—" if runs.get(key) is None else f"{runs[key] / 1000:.2f}"
    if runs["first_start_ms"] is None or runs["first_end_ms"] is None:
        return "its first script run: not seen"
    before = (f"HTML at {s('html_ms')}, Streamlit's JS at {s('main_js_ms')}, " if "html_ms" in runs else "")
    after = f", plotly's JS at {s('plotly_ms')} s" if "plotly_ms" in runs else ""
    return (f"{before}run asked at {s('first_asked_ms')}, its first script run {s('first_start_ms')} → "
            f"{s('first_end_ms')} s ({(runs['first_end_ms'] - runs['first_start_ms']) / 1000:.2f} s){after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.local.server_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--viewers", default="4,8,16", help="comma-separated heavy viewer counts (default 4,8,16)")
    parser.add_argument("--presses", type=int, default=200)
    parser.add_argument("--page-downs", type=int, default=50)
    parser.add_argument("--heavy-len", type=int, default=512, help="the heavy animation's N (default 512)")
    parser.add_argument("--heavy-block", type=int, default=16, help="its square tile size (default 16)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # as README's "What a server needs" says to start it
    streamlit.logger.set_log_level("error")  # app.py imported outside `streamlit run` warns of its caches
    from app import SCENE_KEYS, SCENES  # the talk's scenes, in order (what Page Down walks through)
    last_scene = SCENE_KEYS[-1]
    last_heading = f"{len(SCENES)}. {SCENES[-1].title}"
    steps_held = (-(-HELD["trace_len"] // HELD["block_m"])) ** 2
    heavy = {"scene": "tiling", "trace_len": args.heavy_len, "block_m": args.heavy_block,
             "block_n": args.heavy_block, "source": "recorded"}
    heavy_steps = (-(-args.heavy_len // args.heavy_block)) ** 2
    table = []
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; load average {os.getloadavg()[0]:.1f} (1 min) on "
          f"{os.cpu_count()} CPUs", flush=True)
    with app_and_browser() as (process, server, browser):
        print(f"server RSS at start {rss_mib(process.pid):.0f} MiB; warming up (torch, Triton, one animation)…",
              flush=True)
        start = time.perf_counter()
        warm = keys(browser, process, server, "ArrowRight", 1, "press", HELD, ("step", "1"),
                    "() => true")
        print(f"  warm-up: the {steps_held}-step animation drawn and one → in {time.perf_counter() - start:.1f} s; "
              f"server RSS {warm['rss_after']:.0f} MiB", flush=True)
        light_warm, runs = light_alone(browser, server)
        print(f"  headline alone (warm server): first chart at {light_warm:.2f} s; {first_run(runs)}", flush=True)

        print(f"\nA held key on ?{urllib.parse.urlencode(HELD)} ({steps_held} steps, from step 1 of {steps_held}):")
        last = ("step", str(steps_held - 1))
        pressed = keys(browser, process, server, "ArrowRight", args.presses, "press", HELD, last, LAST_STEP_DRAWN)
        show_keys(f"{args.presses} × → pressed", pressed)
        held = keys(browser, process, server, "ArrowRight", args.presses, "hold", HELD, last, LAST_STEP_DRAWN)
        show_keys(f"→ held for {args.presses} repeats", held)
        heading = f"() => [...document.querySelectorAll('h2')].some((h) => h.textContent.includes({last_heading!r}))"
        downs = keys(browser, process, server, "PageDown", args.page_downs, "press", LIGHT, ("scene", last_scene),
                     heading)
        show_keys(f"{args.page_downs} × Page Down from scene 1", downs)
        for what, r, target in ((f"{args.presses} × →", pressed, f"step {steps_held - 1}"),
                                ("→ held", held, f"step {steps_held - 1}"),
                                (f"{args.page_downs} × Page Down", downs, f"scene {len(SCENES)}")):
            landed = f"step {r['landed']}" if r["landed"] and r["landed"].isdigit() else f"scene {r['landed']}"
            if r["landed"] == last_scene:
                landed = f"scene {len(SCENES)} ({last_scene})"
            table.append((what, f"{r['drawn_s']:.2f} s", f"{landed} (want {target})",
                          f"{r['runs_started']}", f"{r['health']['median_ms']:.0f} / {r['health']['max_ms']:.0f} ms",
                          f"{r['rss_before']:.0f} → {r['rss_after']:.0f} MiB"))

        print(f"\nK heavy viewers (?scene=tiling&trace_len={args.heavy_len}&block_m={args.heavy_block}&block_n="
              f"{args.heavy_block}: {heavy_steps} steps, one new seed per round, each viewer at its own step) and one "
              f"light page (?scene=headline), all at once; seconds from navigation:")
        rounds = []
        for n, viewers in enumerate(int(v) for v in args.viewers.split(",")):
            r = heavy_round(browser, process, server, viewers, 7_000 + n, heavy, heavy_steps)
            rounds.append(r)
            h = r["health"]
            times = sorted(r["heavy_s"])
            print(f"  K={viewers}: light page's first chart {r['light_s']:.2f} s, {first_run(r['light_run'])}; heavy viewers' animations "
                  + ", ".join(f"{t:.1f}" for t in times)
                  + f" (median {statistics.median(times):.1f} s, last {times[-1]:.1f} s; errors {r['errors']}); "
                    f"/_stcore/health median {h['median_ms']:.0f} ms, max {h['max_ms']:.0f} ms; server RSS "
                    f"{r['rss_before']:.0f} before, {r['rss_drawn']:.0f} all drawn, {r['rss_closed']:.0f} MiB "
                    f"after the contexts closed", flush=True)
        light_after, runs = light_alone(browser, server)
        print(f"  headline alone afterwards: first chart at {light_after:.2f} s, {first_run(runs)}; server RSS "
              f"{rss_mib(process.pid):.0f} MiB", flush=True)

    print("\nSummary")
    print("| what | settled, drawn | landed | script runs | health median / max | server RSS |")
    print("|---|---|---|---|---|---|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    print(f"\n| heavy viewers | light page's first chart (alone: {light_warm:.2f} s) | its first script run, start → end "
          f"| heavy animations, median / last | health median / max | server RSS before → drawn → closed |")
    print("|---|---|---|---|---|---|")
    for r in rounds:
        times, run = sorted(r["heavy_s"]), r["light_run"]
        span = (f"{run['first_start_ms'] / 1000:.2f} → {run['first_end_ms'] / 1000:.2f} s"
                if run["first_start_ms"] is not None and run["first_end_ms"] is not None else "—")
        print(f"| {r['viewers']} | {r['light_s']:.2f} s | {span} | {statistics.median(times):.1f} / {times[-1]:.1f} s | "
              f"{r['health']['median_ms']:.0f} / {r['health']['max_ms']:.0f} ms | {r['rss_before']:.0f} → "
              f"{r['rss_drawn']:.0f} → {r['rss_closed']:.0f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
