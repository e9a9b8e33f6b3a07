"""Where the real-browser tests find Debian's chromium, and what a missing one means.

On a developer's machine a missing browser (or Playwright) skips the browser tests. CI sets
FLASH_LIVE_REQUIRE_BROWSER=1 (.ci/run): there a missing browser fails the run instead of passing it silently.
FLASH_LIVE_CHROMIUM points the tests at another chromium binary (the test of this promise points it nowhere).
"""
import os
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("FLASH_LIVE_CHROMIUM", "/usr/bin/chromium"))
REQUIRE_BROWSER = "FLASH_LIVE_REQUIRE_BROWSER"


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
