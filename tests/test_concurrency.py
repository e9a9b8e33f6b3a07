"""Several threads calling the kernels at once (what concurrent app sessions do) each get correct numbers.

Triton's interpreter keeps process-wide state: without the launch lock in kernels.runtime, threads running
kernels in it at the same time corrupt each other (InterpreterError "y >= grid_dim[1]", or wrong outputs).
"""
import threading

import pytest
import torch

from kernels import flash_attention, naive_attention, runtime
from kernels.fa1 import flash_attention_v1
from kernels.reference import reference_attention
from kernels.trace import late_max_inputs, trace_flash

THREADS = 6
ROUNDS = 2
INTERPRETER_ONLY = pytest.mark.skipif(runtime.backend() != "interpreter",
                                      reason="the interpreter path is the one with shared state")


def _reference(q, k, v, causal):
    return reference_attention(q, k, v, causal, device="cpu")[0]


def _run_together(work, threads: int = THREADS) -> list:
    """Run work(i) on `threads` threads released at the same moment; return results, re-raise any error."""
    start = threading.Barrier(threads)
    results, errors = [None] * threads, []

    def body(i):
        try:
            start.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below, with the thread's index
            errors.append((i, exc))

    pool = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in pool), "a thread never finished"
    assert not errors, f"{len(errors)} of {threads} threads failed: {errors[0][1]!r}"
    return results


def _kernel_on_many_threads(fn):
    """Every thread its own shape and mask (a mix-up of results cannot pass), each output against float64."""
    def work(i):
        gen = torch.Generator().manual_seed(100 + i)
        seq_len, causal = (40 + 13 * i, i % 2 == 1)
        q, k, v = (torch.randn((1, 2, seq_len, 32), generator=gen).to(runtime.DEVICE) for _ in range(3))
        expected = _reference(q, k, v, causal)
        errors = []
        for _ in range(ROUNDS):
            out = fn(q, k, v, causal=causal)
            errors.append(((out.cpu().double() - expected).abs().max() / expected.abs().max()).item())
        return max(errors)

    worst = _run_together(work)
    assert max(worst) < 1e-5, worst


@INTERPRETER_ONLY
@pytest.mark.parametrize("kernel", [naive_attention, flash_attention_v1], ids=["naive", "fa1"])
def test_kernel_on_many_threads_matches_float64(kernel):
    _kernel_on_many_threads(kernel)


@INTERPRETER_ONLY
def test_flash_and_naive_on_many_threads_match_float64():
    _kernel_on_many_threads(lambda q, k, v, causal: (flash_attention(q, k, v, causal=causal),
                                                     naive_attention(q, k, v, causal=causal))[0])


@INTERPRETER_ONLY
def test_traces_on_many_threads_are_each_correct():
    """What two viewers opening /?scene=tiling&seed=300 and &seed=301 at once do, with four viewers."""
    settings = [dict(seq_len=64 + 16 * (i % 3), head_dim=16, block_m=32, block_n=16, causal=i % 2 == 0,
                     dtype="float32", seed=300 + i, order=("fa2", "fa1")[i // 2]) for i in range(4)]
    traces = _run_together(lambda i: trace_flash(**settings[i]), threads=len(settings))
    for s, trace in zip(settings, traces):
        q, k, v = late_max_inputs(s["seq_len"], s["head_dim"], s["block_m"], s["causal"], torch.float32, s["seed"])
        expected = _reference(q, k, v, s["causal"])[0, 0].numpy()
        assert abs(trace.out_flash - expected).max() < 1e-5 and abs(trace.out_naive - expected).max() < 1e-5


def test_the_launch_lock_queues_and_counts_threads():
    if not runtime.INTERPRET:
        with runtime.kernel_launch_lock():
            assert runtime.interpreter_queue() == 0  # the GPU path does not queue here
        return
    holding, release = threading.Event(), threading.Event()

    waits = []

    def holder():
        with runtime.kernel_launch_lock(waits.append), runtime.kernel_launch_lock(waits.append):  # re-entrant
            holding.set()
            release.wait(10)

    waiter_done = threading.Event()

    def waiter():
        with runtime.kernel_launch_lock(on_wait=waits.append):
            waiter_done.set()

    first = threading.Thread(target=holder)
    first.start()
    holding.wait(10)
    assert runtime.interpreter_queue() == 1
    second = threading.Thread(target=waiter)
    second.start()
    for _ in range(1000):
        if runtime.interpreter_queue() == 2:
            break
        threading.Event().wait(0.005)
    assert runtime.interpreter_queue() == 2 and not waiter_done.is_set(), "the second thread must wait"
    assert waits == [1], "the waiter is told one thread is ahead of it; the holder, never"
    release.set()
    first.join(10)
    second.join(10)
    assert waiter_done.is_set() and runtime.interpreter_queue() == 0
