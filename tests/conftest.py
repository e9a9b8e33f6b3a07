"""Shared test set-up: the repo root on sys.path, the `gpu` marker, shared fixtures (poisoned allocations, the\nbrowser tests' server, browser and tabs). Shared helper functions live in the tests/support_*.py and\ntests/browser_*.py modules; no test module imports another."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config, items):
    import kernels
    if kernels.backend() == "cuda":
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU Triton can drive ({kernels.backend_reason()})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _backend_choice_stays_put():
    """No test may leave FLASH_LIVE_BACKEND changed in this process's environment: every later subprocess (the ring
    bench, the app's servers) would take that backend. Importing bench.compile_check once set it to "aot" (compile,
    never launch): a test that imported it made the ring bench's outputs uninitialized memory in CI (2026-12-07)."""
    before = os.environ.get("FLASH_LIVE_BACKEND")
    yield
    after = os.environ.get("FLASH_LIVE_BACKEND")
    assert after == before, (f"this test left FLASH_LIVE_BACKEND={after!r} in the environment (was {before!r}); "
                             "set it with monkeypatch.setenv, which puts it back")


@pytest.fixture
def poisoned_allocations(monkeypatch):
    """Every torch.empty/empty_like during the test starts as NaN, so an output element the kernel never
    wrote fails the comparison; each allocation's (shape, dtype) is logged."""
    import torch
    log = []
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def poison(t):
        log.append((tuple(t.shape), t.dtype))
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poison(real_empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: poison(real_empty_like(*a, **kw)))
    return log


# -- the browser tests' server, browser and tabs (tests/browser_support.py starts them) ---------------------

@pytest.fixture(scope="module")
def server(request):
    """`streamlit run app.py` on a free local port, one per test module; its base URL."""
    from tests.browser_support import running_app
    with running_app(f"streamlit-{request.module.__name__.removeprefix('test_')}.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from tests.browser_support import launched_chromium, playwright_or_skip
    with launched_chromium(playwright_or_skip()) as chromium:
        yield chromium


@pytest.fixture
def page(browser):
    """A fresh tab (a new Streamlit session) at projector size; fails on an uncaught page error or an error
    in the console (plotly's pause rejection included: the page script handles it)."""
    from tests.browser_pages import PROJECTOR, STEP_MS
    context = browser.new_context(viewport=PROJECTOR)
    tab = context.new_page()
    tab.set_default_timeout(STEP_MS)
    errors = []
    tab.on("pageerror", lambda error: errors.append((f"uncaught: {error.message}", error.stack)))
    tab.on("console", lambda message: message.type == "error"
           and errors.append((f"console: {message.text}", str(message.location))))
    yield tab
    context.close()
    assert not errors, f"errors in the page: {_distinct(errors)}"


def _distinct(errors: list) -> str:
    """Each distinct error once, with how often it came and the first few lines of where it first came from (a
    loop that throws at every frame would otherwise print the same line a hundred times and never say where)."""
    first, count = {}, {}
    for message, where in errors:
        first.setdefault(message, " | ".join(str(where).splitlines()[:6]))
        count[message] = count.get(message, 0) + 1
    return "; ".join(f"{message} (x{count[message]}), first at: {first[message]}" for message in first)


@pytest.fixture(scope="module")
def tabs(browser):
    """One tab per canvas size, reused by every scene; each collects its page's errors."""
    from tests.browser_pages import SIZES, CANVAS_STEP_MS
    opened = {}
    for name, viewport in SIZES.items():
        tab = browser.new_context(viewport=viewport).new_page()
        tab.set_default_timeout(CANVAS_STEP_MS)
        tab.errors = []
        tab.on("pageerror", lambda error, tab=tab: tab.errors.append(f"uncaught: {error.message}"))
        tab.on("console", lambda message, tab=tab: message.type == "error"
               and tab.errors.append(f"console: {message.text}"))
        opened[name] = tab
    yield opened
