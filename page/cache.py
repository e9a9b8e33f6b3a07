"""A process-wide cache bounded in bytes, for the page's large values (kernel traces, animations, uploads).

Streamlit's `cache_resource(max_entries=…)` bounds how many values it keeps, not how big they are: a
512-token animation of 16×16 tiles at head_dim 256 holds ~55 MB, a default one ~4 MB, so a count is
either too tight for the common case or unbounded for the worst. This one keeps values while their
sizes add up to at most `max_bytes`, dropping the least recently used first; what a value costs is
told by the caller (`size_of`). Sessions share it: two viewers asking for the same value at once
build it once (the second waits for the first), and a value larger than the whole budget is
returned without being kept.

No Streamlit import: it is plain Python, tested on its own.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class ByteBudgetCache(Generic[V]):
    def __init__(self, name: str, max_bytes: int):
        self.name, self.max_bytes = name, max_bytes
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._building: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()
        self._bytes = 0

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def bytes_held(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: Hashable, build: Callable[[], V], size_of: Callable[[V], int]) -> V:
        """The cached value for `key`, or `build()`'s, kept if it fits the budget. Exceptions of `build`
        reach the caller and nothing is kept."""
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key][0]
                pending = self._building.get(key)
                mine = pending is None
                if mine:
                    pending = self._building[key] = threading.Event()
            if mine:
                break
            pending.wait()  # another session builds it; then it is in the cache (or failed: try ourselves)
        try:
            value = build()
            size = max(int(size_of(value)), 0)
        except BaseException:
            with self._lock:
                del self._building[key]
            pending.set()
            raise
        with self._lock:
            del self._building[key]
            if size <= self.max_bytes:
                self._entries[key] = (value, size)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self._bytes -= dropped
        pending.set()
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
