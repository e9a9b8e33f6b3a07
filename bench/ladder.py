"""FA-3, idea by idea: every step of the ablation ladder (kernels/ladder.py: FA-2 order, then each row of
kernels.fa3.LADDER) and cuDNN as the reference, timed side by side in one run at the FA-3 paper's ablation shape
(B2 H16, N = 8K, head_dim 128, not causal, bf16), as records that say which step they are (`config`).

`python -m bench --ladder [--phases] --out FILE [--merge-into]` writes them; the ablation scene times them live
through `time_ladder` (one call: the steps interleaved, round by round).
"""
from __future__ import annotations

import dataclasses

import torch

from bench.measure import GPU_LOCK, GPU_LOCK_TIMEOUT_S, Setting, inputs, make_record, time_interleaved
from costmodel import Shape
from kernels import specs

REFERENCE = "cuDNN (PyTorch's default), reference"  # the record's config of the reference's timing
REFERENCE_ALGORITHM = "sdpa_default"
SHAPE = Shape(8192, 2, 16, 128, "bfloat16", False)  # kernels.ladder.SHAPE, bf16
ROUNDS = 3


def step_names() -> tuple[str, ...]:
    """The ladder's steps in order, then the reference: the records' `config` values of one run."""
    from kernels import ladder
    return (*(s.name for s in ladder.steps()), REFERENCE)


def ladder_records(times_ms: dict[str, list[float]], algorithms: dict[str, str], shape: Shape, device: str,
                   timing_kind: str = "cuda", failures: dict[str, str] | None = None) -> list[dict]:
    """One record per step from its times (every round's repetitions, in ms), its `config` the step's name;
    a step that failed (failures: name → message) is an "error" record with no time."""
    records = []
    for name, algorithm in algorithms.items():
        setting = Setting(algorithm, shape)
        why = (failures or {}).get(name)
        if why is not None or not times_ms.get(name):
            record = make_record(setting, "error", device, timing_kind, message=why or "not timed")
        else:
            record = make_record(setting, "ok", device, timing_kind, times_ms[name])
        records.append(dataclasses.replace(record, config=name).to_dict())
    return records


def _calls(q, k, v) -> dict[str, tuple[str, object]]:
    from kernels import ladder
    calls = {s.name: (s.algorithm, lambda s=s: s.call(q, k, v, causal=False)) for s in ladder.steps()}
    reference = specs.spec(REFERENCE_ALGORITHM).load("call")
    calls[REFERENCE] = (REFERENCE_ALGORITHM, lambda: reference(q, k, v, causal=False))
    return calls


def time_ladder(shape: Shape = SHAPE, rounds: int = ROUNDS, rep_ms: float = 100.0, seed: int = 0,
                say=lambda line: None) -> list[dict]:
    """Every step and the reference on one set of random inputs, in `rounds` interleaved rounds (the order rotated
    each round, the L2 flushed before every call): one record per step. Raises RuntimeError where the ladder cannot
    run (no Hopper GPU), TimeoutError when other sessions hold the GPU."""
    from kernels import ladder
    why = ladder.unavailable_reason()
    if why:
        raise RuntimeError(why)
    if shape.causal or shape.head_dim != 128:
        raise ValueError(f"the ladder's rows are head_dim 128 configurations, not causal; got {shape}")
    if not GPU_LOCK.acquire(timeout=GPU_LOCK_TIMEOUT_S):
        raise TimeoutError(f"the GPU stayed busy for {GPU_LOCK_TIMEOUT_S:.0f} s (other sessions are measuring)")
    try:
        device = torch.cuda.get_device_name(0)
        q, k, v = inputs(Setting("fa3", shape), seed)
        calls = _calls(q, k, v)
        times, failures = time_interleaved({name: fn for name, (_, fn) in calls.items()}, rounds, rep_ms, say,
                                           "ladder ")
        return ladder_records(times, {name: algorithm for name, (algorithm, _) in calls.items()}, shape, device,
                              failures=failures)
    finally:
        GPU_LOCK.release()
        torch.cuda.empty_cache()


def print_ladder(records: list[dict], say=print) -> None:
    """The steps' TFLOPS and each step ÷ the one before (the reference ÷ the last step)."""
    say(f"{'step':48s} {'TFLOPS':>7s} {'÷ before':>9s}")
    before = None
    for r in records:
        tf = r.get("tflops")
        ratio = f"{tf / before:8.3f}×" if tf and before else "-"
        say(f"{str(r['config'])[:48]:48s} {tf if tf is not None else float('nan'):7.1f} {ratio:>9s}"
            + ("" if r["status"] == "ok" else f"  {r['status']}: {r['message'][:80]}"))
        if r["config"] != REFERENCE:
            before = tf
