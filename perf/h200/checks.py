"""What the GPU scripts share: the "needs a GPU" exit, and every kernel against the one float64 reference
(kernels/reference.py) at lengths that are no multiple of any tile, before anything is timed.

Inputs are the bench's own (bench.measure.inputs: random, from a seed, in the setting's dtype); a kernel is the
bench's call for the setting's algorithm (its spec, kernels/specs.py) unless a `call(setting, q, k, v) -> O` is given.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from bench.measure import Setting, inputs, runner
from kernels.reference import reference_attention, relative_error
from kernels.runtime import backend, backend_reason

RAGGED = (1, 17, 257, 1000, 4097)
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}  # relative error of O against float64

Call = Callable[[Setting, object, object, object], object]


def require_gpu(script: str) -> None:
    """Exit with a clear message unless the kernels run on a CUDA GPU here."""
    if backend() != "cuda":
        sys.exit(f"python -m {script} needs a CUDA GPU: {backend_reason()}")


def describe(s: Setting, label: str | None = None) -> str:
    shape = s.shape
    return (f"{label or s.algorithm} {shape.dtype} d={shape.head_dim} {'causal' if shape.causal else 'full'} "
            f"N={shape.seq_len}")


def relative_error_of(s: Setting, call: Call | None = None, seed: int = 0) -> float:
    """‖O − O_float64‖ / ‖O_float64‖ of one kernel on the setting's random inputs."""
    q, k, v = inputs(s, seed)
    out = call(s, q, k, v) if call is not None else runner(s, q, k, v)()
    ref, _ = reference_attention(q, k, v, s.shape.causal)
    return relative_error(out, ref)


def sweep(settings: Iterable[Setting], call: Call | None = None, label: str | None = None, say=print) -> int:
    """Check each setting against float64; says every failure and a summary line, returns the failures."""
    checks = failures = 0
    for s in settings:
        checks += 1
        try:
            err = relative_error_of(s, call, seed=s.shape.seq_len + s.shape.head_dim)
        except Exception as exc:  # a config that does not fit or compile is a failure to report, not a crash
            failures += 1
            say(f"  FAILED {describe(s, label)}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not err < TOLERANCE[s.shape.dtype]:
            failures += 1
            say(f"  WRONG {describe(s, label)}: relative error {err:.2e}")
    say(f"{label or 'kernels'}: {checks} checks against float64, {failures} failures")
    return failures
