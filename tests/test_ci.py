"""CI's promise (.ci/run): with FLASH_LIVE_REQUIRE_BROWSER=1 a missing browser fails the browser tests; without
it they skip. Checked by collecting tests/test_browser.py in a child pytest with chromium pointed nowhere."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _collect_browser_tests(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "FLASH_LIVE_REQUIRE_BROWSER"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                           "tests/test_browser.py"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**clean, "FLASH_LIVE_CHROMIUM": "/nonexistent/chromium", **env})


def test_ci_fails_when_the_browser_is_missing():
    run = _collect_browser_tests(FLASH_LIVE_REQUIRE_BROWSER="1")
    assert run.returncode != 0, run.stdout[-2000:]
    assert "FLASH_LIVE_REQUIRE_BROWSER=1" in run.stdout and "/nonexistent/chromium is missing" in run.stdout


def test_a_developer_without_the_browser_gets_a_skip():
    run = _collect_browser_tests()
    assert run.returncode in (0, 5), run.stdout[-2000:]  # 5: nothing collected, the module skipped
    assert "no tests collected" in run.stdout or "skipped" in run.stdout


def test_ci_script_sets_the_flag_the_tests_read():
    script = (ROOT / ".ci" / "run").read_text()
    assert "export FLASH_LIVE_REQUIRE_BROWSER=1" in script


@pytest.mark.skipif(not Path("/usr/bin/chromium").is_file(), reason="needs the browser to be there")
def test_with_the_browser_present_the_flag_changes_nothing():
    run = _collect_browser_tests(FLASH_LIVE_REQUIRE_BROWSER="1", FLASH_LIVE_CHROMIUM="/usr/bin/chromium")
    assert run.returncode == 0, run.stdout[-2000:]
