"""The numbers and words the charts used to compute themselves, now the story's (story/): the speedup table,
the SM timeline's statistics, and what an out-of-memory record says. The charts draw them as given
(tests/test_viz.py); these are the assertions that moved with them."""

from __future__ import annotations

import pytest

import story
from bench.results import load_results
from costmodel import Shape, flash_extra_bytes, naive_extra_bytes
from fmt import fmt_bytes, fmt_ms


def S(seq_len, batch, heads, head_dim, dtype_bytes, causal):
    """The cost model's shape as these tests write it: (N, batch, heads, head_dim, bytes per element, causal)."""
    return Shape(seq_len, batch, heads, head_dim, {2: "bfloat16", 4: "float32"}[dtype_bytes], causal)


def measured(algorithm: str, seq_len: int, status: str = "ok", time_ms: float | None = None, **extra) -> dict:
    """A measurement record of batch 1 × 8 heads, head_dim 64, bfloat16, as kernels measure it."""
    return {"algorithm": algorithm, "seq_len": seq_len, "batch": 1, "heads": 8, "head_dim": 64, "dtype": "bfloat16",
            "causal": False, "status": status, "time_ms": time_ms, "needed_bytes": None,
            "message": "" if status == "ok" else "CUDA out of memory", "timing_kind": "cuda", **extra}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Flash and standard at 1K … 64K tokens; standard runs out of memory at 64K (its P allocation fails)."""
    rows = []
    for seq_len in (1024, 4096, 16384, 65536):
        rows.append(measured("fa2", seq_len, time_ms=seq_len**2 * 1e-9,
                             peak_extra_bytes=flash_extra_bytes(S(seq_len, 1, 8, 64, 2, False))))
        if seq_len < 65536:
            rows.append(measured("naive", seq_len, time_ms=seq_len**2 * 4e-9,
                                 peak_extra_bytes=naive_extra_bytes(S(seq_len, 1, 8, 64, 2, False))))
        else:
            rows.append(measured("naive", seq_len, "oom", needed_bytes=8 * seq_len * seq_len * 2))
    return rows


def test_speedup_table(records) -> None:
    table = story.speedup_table(records)
    assert [row["seq_len"] for row in table] == [1024, 4096, 16384, 65536]
    assert table[0]["speedup"] == pytest.approx(4.0)
    # 1 µs with no kernel times and no rate: possibly the launch, said as a possibility
    assert table[0]["note"] == f"flash under {story.LAUNCH_BOUND_MS} ms: the launch may be much of it"
    assert table[2]["note"] == ""  # 0.27 ms of GPU work: a time of the algorithm
    assert table[-1]["speedup"] is None and table[-1]["naive_ms"] is None
    assert "out of memory" in table[-1]["note"] and table[-1]["flash_ms"] == pytest.approx(65536**2 * 1e-9)


def test_interpreter_times_are_never_gpu_speed(records) -> None:
    cpu = [{**r, "timing_kind": "interpreter"} for r in records]
    assert all("interpreter" in row["note"] for row in story.speedup_table(cpu))


def test_the_walls_words(records) -> None:
    wall = story.first_wall(records)
    assert (wall["algorithm"], wall["seq_len"]) == ("naive", 65536)
    needed, failed = fmt_bytes(naive_extra_bytes(S(65536, 1, 8, 64, 2, False))), fmt_bytes(8 * 65536 * 65536 * 2)
    # the ✕ goes on the formula (S + P + O at that N); the failed allocation is said beside it
    assert story.oom_need(wall) == naive_extra_bytes(S(65536, 1, 8, 64, 2, False))
    assert story.wall_text(wall) == (f"out of memory at N = 64K (needs {needed} beyond Q, K, V; a {failed} allocation "
                                     f"failed)")
    assert story.failure_text(wall) == f"out of memory (needs {needed} beyond Q, K, V; a {failed} allocation failed)"
    assert story.first_wall([r for r in records if r["status"] == "ok"]) is None


def test_the_first_wall_is_standards_when_it_has_one(records) -> None:
    sdpa = measured("sdpa_default", 4096, "oom")
    assert story.first_wall([*records, sdpa])["algorithm"] == "naive"  # standard's wall, though SDPA failed first
    assert story.first_wall([r for r in records if r["algorithm"] != "naive"] + [sdpa]) == sdpa


def test_failed_records_carry_their_failure(records) -> None:
    error = measured("fa2", 2048, "error", message="illegal memory access")
    drawn = story.with_failures([*records, error])
    assert [r.get("failure") for r in drawn if r["status"] != "ok"] == [story.failure_text(records[-1]),
                                                                        "error: illegal memory access"]
    assert all("failure" not in r for r in drawn if r["status"] == "ok")
    assert "out of memory" in drawn[-2]["failure"]
    # the word beside each ✕ on the timing charts: the allocator's failure, an error; a refusal says it was refused
    assert [r["failure_mark"] for r in drawn if r["status"] != "ok"] == ["out of memory", "error"]
    refused = {**records[-1], "message": f"out of memory, {story.REFUSED_BEFORE_LAUNCH}: S (fp32) and P need more"}
    assert story.with_failures([refused])[0]["failure_mark"] == "refused"


def test_timeline_statistics() -> None:
    # SM 0 runs [0, 10) and [5, 15) ns (overlapping: busy 15), then [15, 20); SM 1 runs [0, 6): busy 6.
    timeline = {
        "sm_count": 2,
        "sm_id": [0, 0, 0, 1],
        "t_start_ns": [0, 5, 15, 0],
        "t_end_ns": [10, 15, 20, 6],
        "q_block": [0, 1, 2, 3],
        "causal": True,
    }
    stats = story.timeline_stats(timeline)
    # at most 2 programs at once on SM 0 ([5, 10)); the one starting at 15 as another ends does not overlap it.
    # Waves use that residency: 4 programs / (2 SMs × 2 at once) (viz's own count, 4 / 2 SMs, said 2.0).
    assert stats == {"programs": 4, "waves": 1.0, "makespan_us": 0.02, "utilization": (20 + 6) / (2 * 20),
                     "max_per_sm": 2}
    empty = {"sm_count": 132, "sm_id": [], "t_start_ns": [], "t_end_ns": [], "q_block": []}
    assert story.timeline_stats(empty)["programs"] == 0


def test_a_wall_our_library_refused_before_launch_is_not_called_a_failed_allocation(records) -> None:
    import inspect
    from kernels import inputs
    assert story.REFUSED_BEFORE_LAUNCH in inspect.getsource(inputs)  # the library's words, as the story reads them
    wall = {**story.first_wall(records), "message": "out of memory, refused before any launch: S (fp32) and P need "
            "more memory than the device has: Tried to allocate 192.00 GiB"}
    assert "refused before any launch" in story.wall_text(wall) and "allocation failed" not in story.wall_text(wall)
    shipped = story.first_wall(load_results("h200.json").records)
    # refused, not "ran out of memory" (issue 38, item 8): the kernel never launched
    assert story.wall_text(shipped).startswith("refused before any launch at N = 32K")
    assert story.wall_text(shipped).endswith("192.0 GiB for S and P)")
    assert story.failure_text(shipped).startswith("refused before any launch (needs")
    assert story.oom_word(shipped) == story.REFUSED and story.oom_word({**shipped, "message": "CUDA out of "
                                                                        "memory"}) == story.OUT_OF_MEMORY


def test_the_recordings_short_calls_are_said_to_be_their_launch_only_where_they_are() -> None:
    """A call under LAUNCH_BOUND_MS is mostly its launch only where its kernel took under half its time (Nsight
    Compute's kernel times in the record) or, uncounted, where it ran under half its own rate at other lengths: the
    recording's FA-2 call at 1K, head_dim 128 (kernel 0.040 of 0.161 ms) is; at 2K (0.143 of 0.158 ms, 435 TFLOPS)
    it is not, nor is cuDNN's call at 2K (564 TFLOPS) or our FA-2 at 4K causal, head_dim 64 (374 TFLOPS)."""
    shown = load_results("h200.json").records
    def at(algorithm, n, d, causal=False):
        return next(r for r in shown if r["algorithm"] == algorithm and r["seq_len"] == n and r["head_dim"] == d
                    and r["causal"] == causal and r["batch"] == 2 and r["heads"] == 16 and r["pass"] == "prefill"
                    and r["dtype"] == "bfloat16" and r.get("config") is None)
    setting = [r for r in shown if r["batch"] == 2 and r["heads"] == 16 and r["pass"] == "prefill"]
    short, fine = at("fa2", 1024, 128), at("fa2", 2048, 128)
    assert short["time_ms"] < story.LAUNCH_BOUND_MS and fine["time_ms"] < story.LAUNCH_BOUND_MS
    assert story.launch_bound(short, setting) and not story.launch_bound(fine, setting)
    table = {row["seq_len"]: row for row in story.speedup_table(
        [r for r in setting if r["head_dim"] == 128 and not r["causal"] and r["dtype"] == "bfloat16"])}
    kernel = sum(k["time_ms"] for k in short["kernels"])
    assert table[1024]["note"] == f"flash's kernel {fmt_ms(kernel)} of {fmt_ms(short['time_ms'])}, the rest its launch"
    assert "launch" not in table[2048]["note"]
    d128 = [r for r in setting if r["head_dim"] == 128 and not r["causal"] and r["dtype"] == "bfloat16"
            and r.get("config") is None]
    said = story.at_length_sentence(d128, Shape(1024, 2, 16, 128))
    assert f"flash's kernel {fmt_ms(kernel)} of {fmt_ms(short['time_ms'])}" in said and "launches" in said
    assert "launch" not in story.at_length_sentence(d128, Shape(2048, 2, 16, 128))
    assert not story.launch_bound(at("sdpa_default", 2048, 128), setting)
    causal_4k, causal_1k = at("fa2", 4096, 64, True), at("fa2", 1024, 64, True)
    assert not causal_4k.get("kernels") and not causal_1k.get("kernels")  # uncounted: the rate decides
    assert not story.launch_bound(causal_4k, setting) and story.launch_bound(causal_1k, setting)


def test_sentences_at_every_stop_say_slower_and_launch_bound_plainly(records) -> None:
    """Never "0.8× faster"; a time under LAUNCH_BOUND_MS is said to be mostly the launch (the recording's FA-2 call
    at 1K: 0.100 ms, of which Nsight Compute counts 0.028 ms in the kernel)."""
    assert story.speedup_words(0.8) == "1.2× slower" and story.speedup_words(1.84) == "1.8× faster"
    # near 1, two decimals: the recording's 1K is 1.04×, never "1.0× faster"
    assert story.speedup_words(0.167 / 0.161) == "1.04× faster" and story.speedup_words(0.97) == "1.03× slower"
    slow = [{**r, "time_ms": 0.0008} if r["algorithm"] == "naive" else r for r in records]  # flash: 0.00105 ms
    said = story.at_length_sentence(slow, Shape(1024, 1, 8, 64))
    assert "slower" in said and "faster" not in said and "can be as much the host launching it" in said
    said = story.at_length_sentence(records, Shape(16384, 1, 8, 64))
    assert "4.0× faster" in said and "launch" not in said
    said = story.at_length_sentence(records, Shape(65536, 1, 8, 64))
    assert "out of memory" in said and "flash " in said and "ms" in said
