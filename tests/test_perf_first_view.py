"""perf.local.first_view's reading of the server's notes (--server-times): which message the page took in as the
chart, from the server's log of one session's first run and the page's websocket log."""
from __future__ import annotations

import json

from perf.local.first_view import SERVER_TIMES, server_timeline


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
