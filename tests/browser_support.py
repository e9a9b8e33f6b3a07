"""What the real-browser test modules share: Debian's chromium through Playwright, and `streamlit run app.py`
on a free local port, one server per module.

Without the browser the modules skip, except where FLASH_LIVE_REQUIRE_BROWSER=1 (CI sets it): there a
missing browser or Playwright fails the run, so browser tests cannot pass by not running.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REQUIRE_BROWSER = "FLASH_LIVE_REQUIRE_BROWSER"
SERVER_START_S = 90


def playwright_or_skip():
    """Playwright's sync API, once the browser is known to be there; else skip the module (or fail it,
    when REQUIRE_BROWSER is set)."""
    required = os.environ.get(REQUIRE_BROWSER) == "1"
    problem = "" if CHROMIUM.is_file() else f"no browser: {CHROMIUM} is missing (Debian's chromium package)"
    if not problem:
        try:
            from playwright import sync_api
            return sync_api
        except ImportError:
            problem = "Playwright for Python is not installed"
    if required:
        pytest.fail(f"{problem}, and {REQUIRE_BROWSER}=1 says the browser tests must run", pytrace=False)
    pytest.skip(problem, allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_app(log_name: str = "streamlit.log"):
    """`streamlit run app.py` on the CPU path (recorded numbers, the interpreter for the animation, the same
    page on any machine); yields its base URL. Always stopped, with its children."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "FLASH_LIVE_BACKEND": "interpreter"}
    log_path = ARTIFACTS / log_name
    with open(log_path, "w") as log:
        # a session of its own, so that teardown can signal the whole process group
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.headless", "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _healthy(url):
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit was not healthy after {SERVER_START_S} s; see {log_path}")
            try:  # the poll's pause doubles as the check that the server is still alive
                process.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"streamlit exited with {process.returncode} before serving: {log_path.read_text()[-2000:]}")
        yield url
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    for sig, grace_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def launched_chromium(sync_api):
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
