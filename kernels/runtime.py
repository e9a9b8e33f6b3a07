"""Which path runs the kernels: a CUDA GPU Triton can drive, or Triton's interpreter on the CPU.

The choice is made once, at import, before any ``@triton.jit`` decorator runs: Triton reads
``TRITON_INTERPRET`` when it decorates a kernel, so this module must be imported before
``kernels.flash`` and ``kernels.naive`` (``kernels/__init__.py`` does that).

``FLASH_LIVE_BACKEND=interpreter`` forces the interpreter even on a GPU machine (tests, demos).
``FLASH_LIVE_BACKEND=aot`` (ahead of time) leaves TRITON_INTERPRET unset and launches nothing: the kernels are
real ``@triton.jit`` / Gluon functions that ``kernels.compile_check`` compiles for a GPU target (sm_90, sm_80)
on a machine without one.
"""
from __future__ import annotations

import os
import platform
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


def _choose_backend() -> Backend:
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


BACKEND = _choose_backend()
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


def versions() -> dict:
    import triton
    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }


def _nvidia_smi(field: str) -> str | None:
    """One field of `nvidia-smi --query-gpu` for GPU 0, or None where nvidia-smi cannot tell."""
    try:
        import subprocess
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _max_sm_clock_mhz() -> float | None:
    value = _nvidia_smi("clocks.max.sm")
    try:
        return float(value) if value else None
    except ValueError:
        return None


def measure_copy_gbps(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (median of runs)."""
    import triton.testing
    src = torch.empty(nbytes // 2, dtype=torch.float16, device="cuda").uniform_(-1, 1)
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (ms * 1e-3) / 1e9


def measure_matmul_tflops(size: int = 8192) -> float:
    """Dense bf16 matrix product rate through PyTorch (cuBLAS), TFLOPS, on random data: the compute roof."""
    import triton.testing
    a, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ms = triton.testing.do_bench(lambda: a @ b, warmup=50, rep=300, return_mode="median")
    del a, b
    torch.cuda.empty_cache()
    return 2 * size**3 / (ms * 1e-3) / 1e12


def device_facts(measure_bandwidth: bool = False) -> dict:
    """The memory hierarchy of the GPU in use (docs/data-contracts.md, "Device facts").

    On the interpreter path there is no GPU: the values are None and the name says so.
    """
    facts = {"name": "CPU (Triton interpreter)", "sm_count": None, "smem_per_sm_bytes": None,
             "smem_per_block_bytes": None, "l2_bytes": None, "hbm_bytes": None, "copy_gbps": None,
             "compute_capability": None, "driver": None, "matmul_tflops": None, "l2_gbps": None,
             "sm_clock_mhz": None, **versions()}
    if INTERPRET:
        return facts
    props = torch.cuda.get_device_properties(0)
    facts.update(
        name=props.name,
        sm_count=props.multi_processor_count,
        smem_per_sm_bytes=getattr(props, "shared_memory_per_multiprocessor", None),
        smem_per_block_bytes=getattr(props, "shared_memory_per_block_optin", None),
        l2_bytes=getattr(props, "L2_cache_size", None),
        hbm_bytes=props.total_memory,
        compute_capability=f"{props.major}.{props.minor}",
        driver=_nvidia_smi("driver_version"),
        sm_clock_mhz=_max_sm_clock_mhz(),
    )
    if measure_bandwidth:  # the roofs of the roofline and the hierarchy's bandwidths, measured on this GPU
        facts["copy_gbps"] = measure_copy_gbps()
        from kernels.bandwidth import measure_l2_read_gbps
        facts["l2_gbps"] = measure_l2_read_gbps()
        facts["matmul_tflops"] = measure_matmul_tflops()
    return facts
