"""The byte-bounded cache behind the page's traces, animations and uploads."""
import threading
import time

import pytest

from page.cache import ByteBudgetCache


def test_keeps_values_within_the_byte_budget_dropping_the_least_recently_used():
    cache = ByteBudgetCache("test", max_bytes=100)
    for key in "abc":
        cache.get(key, lambda: key * 40, len)
    assert "a" not in cache and "b" in cache and "c" in cache and cache.bytes_held == 80
    cache.get("b", lambda: pytest.fail("b is cached"), len)  # a hit makes b the most recent
    cache.get("d", lambda: "d" * 40, len)
    assert "c" not in cache and {"b", "d"} <= {k for k in "abcd" if k in cache} and cache.bytes_held == 80


def test_a_value_larger_than_the_budget_is_returned_not_kept():
    cache = ByteBudgetCache("test", max_bytes=10)
    assert cache.get("big", lambda: "x" * 11, len) == "x" * 11
    assert "big" not in cache and cache.bytes_held == 0 and len(cache) == 0


def test_a_failed_build_keeps_nothing_and_raises():
    cache = ByteBudgetCache("test", max_bytes=10)
    with pytest.raises(ValueError):
        cache.get("k", lambda: (_ for _ in ()).throw(ValueError("bad")), len)
    assert cache.get("k", lambda: "ok", len) == "ok"


def test_two_sessions_asking_at_once_build_once():
    cache = ByteBudgetCache("test", max_bytes=100)
    builds, results = [], []
    start = threading.Barrier(4)

    def build():
        builds.append(1)
        time.sleep(0.2)
        return "value"

    def session():
        start.wait()
        results.append(cache.get("same", build, len))

    threads = [threading.Thread(target=session) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == ["value"] * 4 and len(builds) == 1
