"""One measurement of one attention setting → one record, the way kernel engineers measure.

Time: median and 20th/80th percentiles of CUDA-event timings after warm-up, with the L2 cache flushed
before each run. Memory: the peak of device memory beyond the inputs, from the caching allocator's
statistics, measured in its own run outside the timing loop. A GPU out-of-memory is a result
(status "oom" with the bytes it tried to allocate), after which the allocator is back at its baseline.
GPU work is serialized by one process-wide lock, so concurrent app sessions never time each other.

On the interpreter path the same kernels run on the CPU: the record says so (timing_kind
"interpreter", CPU wall time), and claims no memory, TFLOPS or bandwidth it cannot measure there.
"""
from __future__ import annotations

import functools
import gc
import math
import re
import statistics
import threading
import time
from dataclasses import dataclass

import torch

import costmodel
from costmodel import DTYPE_BYTES, HEAD_DIMS as SUPPORTED_HEAD_DIMS

from kernels.flash import config_for, flash_attention
from kernels.flash_v1 import FLASH_V1_TIMED_MAX_SEQ_LEN, config_for_v1, flash_attention_v1
from kernels.inputs import DTYPES_BY_NAME
from kernels.naive import naive_attention
from kernels.record import ALGORITHMS, OURS, Record
from kernels.runtime import DEVICE, INTERPRET, device_facts, kernel_launch_lock

# The interpreter costs ~10 ms per tile; beyond this the CPU path would keep a viewer waiting.
INTERPRETER_MAX_SEQ_LEN = 512
MAX_SEQ_LEN = 1 << 20

GPU_LOCK = threading.Lock()
GPU_LOCK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Setting:
    algorithm: str
    seq_len: int
    batch: int = 1
    heads: int = 16
    head_dim: int = 128
    dtype: str = "bfloat16"
    causal: bool = False

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}: choose one of {ALGORITHMS}")
        for name in ("seq_len", "batch", "heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.seq_len > MAX_SEQ_LEN:
            raise ValueError(f"seq_len {self.seq_len} is above the supported {MAX_SEQ_LEN}")
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"unsupported head_dim {self.head_dim!r}: supported are {SUPPORTED_HEAD_DIMS}")
        if self.dtype not in DTYPES_BY_NAME:
            raise ValueError(f"unsupported dtype {self.dtype!r}: use one of {tuple(DTYPES_BY_NAME)}")
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be True or False, got {self.causal!r}")

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]




def attention_flops(s: Setting) -> float:
    """Matmul FLOPs of the forward pass (costmodel.attention_flops)."""
    return costmodel.attention_flops(s.seq_len, s.batch, s.heads, s.head_dim, s.causal)


def flash_tiles(s: Setting) -> tuple[int, int] | None:
    """(block_m, block_n) our flash kernel runs this setting with; None for the other algorithms."""
    if s.algorithm == "flash_v1":
        config = config_for_v1(s.head_dim, DTYPES_BY_NAME[s.dtype])
        return config.block_m, config.block_n
    if s.algorithm != "flash":
        return None
    config = config_for(s.head_dim, DTYPES_BY_NAME[s.dtype], s.causal)
    return config.block_m, config.block_n


def bytes_moved(s: Setting, machine: costmodel.Machine | None = None) -> int:
    """HBM bytes the algorithm moves by the cost model (costmodel.traffic): flash with the tiles it runs,
    L2-aware on `machine` (else the no-cache bound); naive with its softmax's passes on this path."""
    tiles = flash_tiles(s) or (None, None)
    return costmodel.total_bytes(costmodel.traffic(s.algorithm, s.seq_len, s.batch, s.heads, s.head_dim,
                                                   s.dtype_bytes, s.causal, *tiles, machine=machine,
                                                   interpreter=INTERPRET))


def model_extra_bytes(s: Setting) -> int:
    """Device memory the algorithm needs beyond its inputs, by its design (costmodel.extra_bytes)."""
    return costmodel.extra_bytes(s.algorithm, s.seq_len, s.batch, s.heads, s.head_dim, s.dtype_bytes)


# -- the algorithms ------------------------------------------------------------------------------

def torch_naive_attention(q, k, v, causal: bool, sm_scale: float):
    """Standard attention in PyTorch eager, the same math as our naive kernels: fp32 scores and softmax,
    P rounded to the input dtype, O = PV."""
    batch, heads, n, d = q.shape
    q3, k3, v3 = (t.reshape(batch * heads, n, d) for t in (q, k, v))  # (B·H, N, D)
    s = torch.bmm(q3, k3.transpose(1, 2), out_dtype=torch.float32)  # (B·H, N, N) fp32
    s.mul_(sm_scale)
    if causal:
        s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)  # (B·H, N, N)
    del s
    return torch.bmm(p, v3).reshape(batch, heads, n, d)


def _runner(s: Setting, q, k, v):
    scale = 1.0 / math.sqrt(s.head_dim)
    if s.algorithm == "flash":
        return lambda: flash_attention(q, k, v, causal=s.causal)
    if s.algorithm == "naive":
        return lambda: naive_attention(q, k, v, causal=s.causal)
    if s.algorithm == "flash_v1":
        if s.seq_len > FLASH_V1_TIMED_MAX_SEQ_LEN:  # an "error" record, not minutes of GPU time
            raise ValueError(f"the FA1-order kernel runs one program per head: past {FLASH_V1_TIMED_MAX_SEQ_LEN} "
                             f"tokens one call takes seconds, so it is not timed there")
        return lambda: flash_attention_v1(q, k, v, causal=s.causal)
    if s.algorithm == "torch_naive":
        return lambda: torch_naive_attention(q, k, v, s.causal, scale)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    if s.algorithm == "sdpa_flash":
        def run_sdpa_flash():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return sdpa(q, k, v, is_causal=s.causal)
        return run_sdpa_flash
    return lambda: sdpa(q, k, v, is_causal=s.causal)


# -- measuring -----------------------------------------------------------------------------------

_OOM_BYTES = re.compile(r"Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def oom_bytes(message: str) -> int | None:
    """The size of the allocation that failed, read from PyTorch's out-of-memory message."""
    match = _OOM_BYTES.search(message)
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def _result(s: Setting, status: str, device: str, timing_kind: str, times_ms: list[float] | None = None,
            peak: int | None = None, needed: int | None = None, message: str = "") -> Record:
    median = p20 = p80 = tflops = gbps = None
    moved = bytes_moved(s, _machine() if timing_kind == "cuda" else None)
    if times_ms:
        ordered = sorted(times_ms)
        median = statistics.median(ordered)
        p20 = ordered[int(0.2 * (len(ordered) - 1))]
        p80 = ordered[int(math.ceil(0.8 * (len(ordered) - 1)))]
        if timing_kind == "cuda":
            tflops = attention_flops(s) / (median * 1e-3) / 1e12
            gbps = moved / (median * 1e-3) / 1e9
    block_m, block_n = flash_tiles(s) or (None, None)
    return Record(s.algorithm, s.seq_len, s.batch, s.heads, s.head_dim, s.dtype, s.causal, status, median, p20,
                  p80, tflops, gbps, moved, peak, needed, message, device, timing_kind, block_m, block_n,
                  counters="not counted: hardware counters are read by `python -m kernels.counters`")


@functools.cache
def _machine() -> costmodel.Machine | None:
    """This GPU for the L2-aware flash model (its L2 and SM count)."""
    return costmodel.machine_from_facts(device_facts())


def _inputs(s: Setting, seed: int):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    shape = (s.batch, s.heads, s.seq_len, s.head_dim)
    dtype = DTYPES_BY_NAME[s.dtype]
    return tuple(torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype) for _ in range(3))


def time_cuda(fn, warmup_ms: float, rep_ms: float, max_reps: int = 200) -> list[float]:
    """CUDA-event times (ms) of `fn` after warm-up, the L2 flushed before each run (bench and perf/ use it)."""
    flush = torch.empty(4 * _machine().l2_bytes, dtype=torch.int8, device="cuda")  # 4× the L2 (device facts)
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    estimate_ms = max((time.perf_counter() - start) * 1e3, 1e-3)
    for _ in range(int(warmup_ms / estimate_ms)):
        fn()
    reps = max(3, min(max_reps, int(rep_ms / estimate_ms)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for begin, end in events:
        flush.zero_()
        begin.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [begin.elapsed_time(end) for begin, end in events]


def _measure_cuda(s: Setting, seed: int, warmup_ms: float, rep_ms: float) -> Record:
    device = torch.cuda.get_device_name(0)
    q = k = v = None
    try:
        q, k, v = _inputs(s, seed)
        fn = _runner(s, q, k, v)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        if not torch.isfinite(out).all():
            return _result(s, "error", device, "cuda", message="output has NaN or Inf")
        del out
        times = time_cuda(fn, warmup_ms, rep_ms)
        return _result(s, "ok", device, "cuda", times, peak=peak)
    except torch.OutOfMemoryError as exc:
        message = str(exc).split("\n")[0]
        return _result(s, "oom", device, "cuda", needed=oom_bytes(message) or model_extra_bytes(s), message=message)
    except Exception as exc:  # a failing kernel is a result to show, not a crash of the app
        return _result(s, "error", device, "cuda", message=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        del q, k, v
        gc.collect()
        torch.cuda.empty_cache()


def _measure_interpreter(s: Setting, seed: int) -> Record:
    if s.algorithm not in OURS:
        raise ValueError(f"{s.algorithm} is PyTorch's CUDA kernel: it needs a GPU (interpreter path is active)")
    if s.seq_len > INTERPRETER_MAX_SEQ_LEN:
        raise ValueError(f"seq_len {s.seq_len} is too large for the CPU interpreter "
                         f"(at most {INTERPRETER_MAX_SEQ_LEN}); the recorded H200 results cover larger N")
    q, k, v = _inputs(s, seed)
    fn = _runner(s, q, k, v)
    with kernel_launch_lock():  # time the run, not the wait for other sessions' interpreter runs
        start = time.perf_counter()
        fn()
        elapsed_ms = (time.perf_counter() - start) * 1e3
    return _result(s, "ok", "CPU (Triton interpreter)", "interpreter", [elapsed_ms])


def measure(setting: Setting, seed: int = 0, warmup_ms: float = 50.0, rep_ms: float = 300.0) -> Record:
    """Measure one setting; never raises for an out-of-memory or a kernel failure (see the record's status).

    Raises ValueError for a setting the active path cannot run (e.g. large N on the interpreter),
    and TimeoutError if the GPU lock stays held by other sessions for GPU_LOCK_TIMEOUT_S.
    """
    if not isinstance(setting, Setting):
        raise TypeError(f"measure() takes a Setting, got {type(setting).__name__}")
    if INTERPRET:
        return _measure_interpreter(setting, seed)
    if not GPU_LOCK.acquire(timeout=GPU_LOCK_TIMEOUT_S):
        raise TimeoutError(f"the GPU stayed busy for {GPU_LOCK_TIMEOUT_S:.0f} s (other sessions are measuring)")
    try:
        return _measure_cuda(setting, seed, warmup_ms, rep_ms)
    finally:
        GPU_LOCK.release()
