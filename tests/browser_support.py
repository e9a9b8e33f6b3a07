"""Where the real-browser tests find Debian's chromium, and what a missing one means.

On a developer's machine a missing browser (or Playwright) skips the browser tests. CI sets
FLASH_LIVE_REQUIRE_BROWSER=1 (.ci/run): there a missing browser fails the run instead of passing it silently.
FLASH_LIVE_CHROMIUM points the tests at another chromium binary (the test of this promise points it nowhere).
"""
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

CHROMIUM = Path(os.environ.get("FLASH_LIVE_CHROMIUM", "/usr/bin/chromium"))
REQUIRE_BROWSER = "FLASH_LIVE_REQUIRE_BROWSER"
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 90


def require_browser() -> None:
    """Call at the top of a browser test module: skip it without chromium or Playwright, or fail it when
    FLASH_LIVE_REQUIRE_BROWSER=1."""
    problem = None
    if not CHROMIUM.is_file():
        problem = f"no browser: {CHROMIUM} is missing (CI installs Debian's chromium package)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "Playwright for Python is not installed"
    if problem is None:
        return
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"{problem}, and {REQUIRE_BROWSER}=1: in CI a missing browser is a failure", pytrace=False)
    pytest.skip(problem, allow_module_level=True)


def playwright_or_skip():
    """require_browser(), then Playwright's sync API."""
    require_browser()
    from playwright import sync_api
    return sync_api


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
