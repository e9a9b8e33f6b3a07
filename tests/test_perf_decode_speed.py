"""perf.h200.decode_speed: how its goal and paged tables keep their comparison fair. Right after seconds of
full-bandwidth work the first calls timed run slow for a few hundred milliseconds (BENCHMARKS.md §1b), so every peer
of a shape is timed in interleaved rounds, each round in another order, and each keeps its median."""
from __future__ import annotations

import perf.h200.decode_speed as decode_speed


def test_the_peers_of_a_shape_take_turns_and_keep_their_median(monkeypatch):
    # each call returns its next "time"; the first call of the first round is the slow one
    times = {"ours": [9.0, 1.0, 1.2], "cuDNN": [1.1, 1.1, 1.0], "FA2": [2.0, 2.2, 2.1]}
    order: list[str] = []

    def call(name):
        order.append(name)
        return times[name][sum(n == name for n in order) - 1]

    monkeypatch.setattr(decode_speed, "bench_us", lambda fn, rep_ms: fn())
    calls = {name: (lambda name=name: call(name)) for name in times}
    medians = decode_speed.time_rounds(calls, 3, rep_ms=1.0)
    assert order == ["ours", "cuDNN", "FA2", "cuDNN", "FA2", "ours", "FA2", "ours", "cuDNN"]
    assert medians == {"ours": 1.2, "cuDNN": 1.1, "FA2": 2.1}  # the slow first call is not ours' time
