"""perf.local.first_view: its reading of the server's notes (--server-times: which message the page took in as the
chart, from the server's log of one session's first run and the page's websocket log), and how it keeps its rounds
fair (each round in another order; each visit on a quiet machine)."""
from __future__ import annotations

import json

import perf.local.first_view as first_view
from perf.local.first_view import SERVER_TIMES, round_order, server_timeline


def _log(folder, *runs):
    (folder / SERVER_TIMES).write_text("".join(json.dumps(run) + "\n" for run in runs))


# the page's websocket log: (ms since navigation, way, bytes, kind)
MESSAGES = [(1000, "out", 86, "rerun_script"), (1010, "in", 440, "new_session"),
            (1060, "in", 4, "session_status_changed"), (1070, "in", 109, "page_config_changed"),
            (1075, "in", 2300, "delta"), (1080, "in", 300, "page_info_changed"), (1090, "in", 99, "delta"),
            (1300, "in", 8549, "delta"), (1310, "in", 44, "script_finished")]


def test_the_chart_is_the_message_the_server_sent_in_its_place(tmp_path):
    # sent: page config, a delta, page info, a delta, the chart (index 4): the page's 5th forwarded message
    _log(tmp_path, {"step": "window", "start_ms": 50_000.0, "sent_ms": [50_001, 50_002, 50_003, 50_004, 50_090],
                    "chart": 4},
         {"step": "controls", "start_ms": 51_000.0, "sent_ms": [51_001], "chart": 0})  # the visit before's, late
    row = {}
    server_timeline(row, MESSAGES, origin_ms=49_000.0, folder=tmp_path)
    assert row == {"server_start_ms": 1000.0, "server_chart_ms": 1090.0, "page_chart_ms": 1300}
    assert (tmp_path / SERVER_TIMES).read_text() == "", "read once: the next visit starts a new log"


def test_no_window_run_with_a_chart_says_nothing(tmp_path):
    _log(tmp_path, {"step": "controls", "start_ms": 1.0, "sent_ms": [2.0], "chart": 0},
         {"step": "window", "start_ms": 1.0, "sent_ms": [2.0], "chart": None})
    row = {}
    server_timeline(row, MESSAGES, origin_ms=0.0, folder=tmp_path)
    assert row == {}


def test_no_page_always_follows_the_same_one():
    names = ["app", "trivial", "app at HEAD"]
    orders = [round_order(names, n) for n in range(6)]
    assert orders[:3] == [["app", "trivial", "app at HEAD"], ["trivial", "app at HEAD", "app"],
                          ["app at HEAD", "app", "trivial"]]
    assert orders[3:] == orders[:3]
    # each page opens as many rounds as any; with two pages, each follows the other in every other round
    assert sorted(order[0] for order in orders) == sorted(names * 2)
    assert [round_order(["app", "trivial"], n) for n in range(3)] == [["app", "trivial"], ["trivial", "app"],
                                                                      ["app", "trivial"]]


def _machine(monkeypatch, busy_fractions):
    """/proc/stat as a machine whose CPUs are busy these fractions of each window, one after the other (100
    jiffies a window), and a clock that moves only as quiet() sleeps."""
    samples, busy, total = [], 0, 0
    for fraction in busy_fractions:
        samples += [(busy, total), (busy + round(fraction * 100), total + 100)]
        busy, total = busy + round(fraction * 100), total + 100
    clock = [0.0]
    monkeypatch.setattr(first_view, "_cpu_times", lambda: samples.pop(0))
    monkeypatch.setattr(first_view.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(first_view.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    return samples


def test_a_visit_waits_for_the_machine_to_go_quiet(monkeypatch):
    left = _machine(monkeypatch, [0.9, 0.5, 0.05, 0.9])
    assert first_view.quiet() == 3 * first_view.QUIET_WINDOW_S
    assert len(left) == 2, "it stopped at the first quiet window"


def test_a_machine_that_never_goes_quiet_is_waited_for_at_most_the_limit(monkeypatch):
    windows = int(first_view.QUIET_LIMIT_S / first_view.QUIET_WINDOW_S) + 5
    _machine(monkeypatch, [0.8] * windows)
    waited = first_view.quiet()
    assert first_view.QUIET_LIMIT_S <= waited < first_view.QUIET_LIMIT_S + 2 * first_view.QUIET_WINDOW_S


def test_the_cpu_times_are_this_machines():
    busy, total = first_view._cpu_times()
    assert 0 <= busy <= total and total > 0


def test_the_perf_modules_import_without_playwright():
    """The GPU machine has no Playwright: the pure parts of perf.local (what these tests call) must still import
    there, a browser being needed only to drive one."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['playwright'] = None; sys.modules['playwright.sync_api'] = None\n"
            "import perf.local.first_view, perf.local.tiling_fps, perf.local.viewers_wait, perf.local.server_load\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert run.returncode == 0, run.stderr[-2000:]
