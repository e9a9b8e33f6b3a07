"""Which path runs the kernels: a CUDA GPU Triton can drive, or Triton's interpreter on the CPU.

The choice is made once, at import, before any ``@triton.jit`` decorator runs: Triton reads
``TRITON_INTERPRET`` when it decorates a kernel, so this module must be imported before
``kernels.fa2``, ``kernels.naive`` and the other kernel modules (``kernels/__init__.py`` does that).

``FLASH_LIVE_BACKEND=interpreter`` forces the interpreter even on a GPU machine (tests, demos).
``FLASH_LIVE_BACKEND=aot`` (ahead of time) leaves TRITON_INTERPRET unset and launches nothing: the kernels are
real ``@triton.jit`` / Gluon functions that ``bench.compile_check`` compiles for a GPU target (sm_90, sm_80)
on a machine without one.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

# Triton's tl.dot needs tensor cores of Ampere or newer for bf16; older GPUs are refused up front
# rather than failing later with a compile trace in front of an audience.
MIN_COMPUTE_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Backend:
    name: str    # "cuda" | "interpreter" | "aot" (compile only, no launches)
    reason: str  # one sentence a presenter can read out


def choose_backend() -> Backend:
    forced = os.environ.get("FLASH_LIVE_BACKEND", "").strip().lower()
    if forced == "interpreter":
        return Backend("interpreter", "interpreter forced by FLASH_LIVE_BACKEND=interpreter")
    if forced == "aot":
        return Backend("aot", "ahead-of-time compilation only (FLASH_LIVE_BACKEND=aot): nothing is launched")
    if os.environ.get("TRITON_INTERPRET", "") == "1":
        return Backend("interpreter", "interpreter forced by TRITON_INTERPRET=1")
    if not torch.cuda.is_available():
        build = "a CPU-only PyTorch build" if torch.version.cuda is None else "no CUDA device visible"
        return Backend("interpreter", f"no CUDA GPU ({build}): kernels run in Triton's CPU interpreter")
    major, minor = torch.cuda.get_device_capability(0)
    name = torch.cuda.get_device_name(0)
    if (major, minor) < MIN_COMPUTE_CAPABILITY:
        return Backend("interpreter", f"CUDA GPU {name} (sm_{major}{minor}) is older than Triton's "
                       f"bf16 tensor-core path needs (sm_80): using the CPU interpreter")
    try:
        from triton.runtime import driver as triton_driver
        triton_driver.active.get_current_target()
    except Exception as exc:  # a broken driver/toolchain must not take the app down
        return Backend("interpreter", f"CUDA GPU {name} found but Triton cannot drive it ({exc}): "
                       f"using the CPU interpreter")
    return Backend("cuda", f"CUDA GPU {name} (sm_{major}{minor}) driven by Triton")


BACKEND = choose_backend()
if BACKEND.name == "interpreter":
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRET = BACKEND.name == "interpreter"
AOT = BACKEND.name == "aot"
DEVICE = torch.device("cuda") if BACKEND.name == "cuda" else torch.device("cpu")


def backend() -> str:
    """'cuda' when kernels run on the GPU, 'interpreter' when they run in Triton's CPU interpreter ('aot' when
    they are only compiled ahead of time)."""
    return BACKEND.name


def backend_reason() -> str:
    return BACKEND.reason


# Triton's interpreter patches triton.language process-wide while it runs a kernel, so two threads in it
# at once corrupt each other ("y >= grid_dim[1]"). One re-entrant lock queues interpreter launches; a caller
# may hold it across several launches (a trace runs flash, then naive) and the launches inside re-enter it.
_INTERPRETER_LOCK = threading.RLock()
_queue_guard = threading.Lock()
_queue: dict[int, int] = {}  # thread id -> nesting depth, for threads holding or waiting for the lock


def _fresh_locks_after_fork() -> None:
    """In a forked child: new locks and an empty queue. The child has one thread; a lock another thread of the parent
    held at the fork (inside a launch) would stay held in the child forever, with no thread to release it."""
    global _INTERPRETER_LOCK, _queue_guard, _queue
    _INTERPRETER_LOCK, _queue_guard, _queue = threading.RLock(), threading.Lock(), {}


os.register_at_fork(after_in_child=_fresh_locks_after_fork)


@contextmanager
def kernel_launch_lock(on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
    """Hold around every kernel launch: serializes the interpreter, no-op on the GPU (measure's GPU_LOCK
    serializes timing there, and CUDA launches from several threads are safe).

    on_wait(ahead) is called, in the caller's thread, when the interpreter is busy and this caller queues:
    `ahead` other threads hold or wait for it (the app tells a viewer so)."""
    if not INTERPRET:
        yield
        return
    me = threading.get_ident()
    with _queue_guard:
        _queue[me] = _queue.get(me, 0) + 1
        ahead = len(_queue) - 1
    try:
        if not _INTERPRETER_LOCK.acquire(blocking=False):
            if on_wait is not None:
                on_wait(ahead)
            _INTERPRETER_LOCK.acquire()
        try:
            yield
        finally:
            _INTERPRETER_LOCK.release()
    finally:
        with _queue_guard:
            _queue[me] -= 1
            if not _queue[me]:
                del _queue[me]


def interpreter_queue() -> int:
    """How many threads hold or wait for the interpreter now (0: a new launch starts at once)."""
    with _queue_guard:
        return len(_queue)
