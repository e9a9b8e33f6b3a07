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

import datetime
import functools
import gc
import math
import statistics
import threading
import time
from dataclasses import dataclass

import torch

import costmodel
from costmodel import HEAD_DIMS as SUPPORTED_HEAD_DIMS, Shape
from fmt import bytes_after
from bench.device import device_facts
from bench.record import Record
from kernels import source, specs
from kernels.inputs import DTYPES_BY_NAME
from kernels.runtime import DEVICE, INTERPRET, kernel_launch_lock

# The interpreter costs ~10 ms per tile; beyond this the CPU path would keep a viewer waiting.
INTERPRETER_MAX_SEQ_LEN = 512
MAX_SEQ_LEN = 1 << 20

GPU_LOCK = threading.Lock()
GPU_LOCK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Setting:
    """What one measurement measures: an algorithm (a spec's key; an older name is read as today's) at a shape, and for
    a decode shape (pass "decode") the cache's page size (None: contiguous)."""
    algorithm: str
    shape: Shape
    page_size: int | None = None

    def __post_init__(self):
        if not isinstance(self.algorithm, str) or specs.canonical(self.algorithm) not in specs.SPECS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}: choose one of {tuple(specs.SPECS)}")
        object.__setattr__(self, "algorithm", specs.canonical(self.algorithm))
        if not isinstance(self.shape, Shape):
            raise ValueError(f"shape must be a costmodel.Shape, got {type(self.shape).__name__}")
        if max(self.shape.seq_len, self.shape.kv_len) > MAX_SEQ_LEN:
            raise ValueError(f"seq_len {max(self.shape.seq_len, self.shape.kv_len)} is above the supported "
                             f"{MAX_SEQ_LEN}")
        if self.shape.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"unsupported head_dim {self.shape.head_dim!r}: supported are {SUPPORTED_HEAD_DIMS}")

        if self.page_size is not None and (self.shape.pass_ != "decode" or isinstance(self.page_size, bool)
                                           or not isinstance(self.page_size, int) or self.page_size < 1):
            raise ValueError(f"page_size is a positive int of a decode setting; got {self.page_size!r}")
        if self.shape.pass_ == "decode" and not self.spec.kv_cache:
            raise ValueError(f"{self.algorithm} is not timed against a KV cache (its spec has no kv_cache)")
        if self.shape.pass_ == "backward" and self.algorithm not in backward_algorithms():
            raise ValueError(f"{self.algorithm} has no backward pass to time: the backward's algorithms are "
                             f"{', '.join(backward_algorithms())}")

    @property
    def spec(self) -> specs.Spec:
        return specs.spec(self.algorithm)

    @property
    def decode(self) -> bool:
        return self.shape.pass_ == "decode"

    @property
    def backward(self) -> bool:
        return self.shape.pass_ == "backward"


# PyTorch's differentiable attentions timed beside ours in a backward: SDPA's cuDNN (its default on Hopper) and FA-2
# backends, and standard attention's eager autograd (it keeps P, N² per head: its out-of-memory is a result).
BACKWARD_PEERS = ("sdpa_default", "sdpa_flash", "torch_naive")


def backward_algorithms() -> tuple[str, ...]:
    """What a backward setting may time: our kernels with a backward (their spec's `backward`), through autograd,
    and BACKWARD_PEERS."""
    return (*(spec.key for spec in specs.with_facet("backward") if spec.library), *BACKWARD_PEERS)


def attention_flops(s: Setting) -> float:
    """Matmul FLOPs of the forward pass (costmodel.attention_flops)."""
    return costmodel.attention_flops(s.shape)


def flash_tiles(s: Setting) -> tuple[int, int] | None:
    """(block_m, block_n) our kernel runs this setting with; None for algorithms without tiles we choose."""
    return s.spec.load("tiles")(s.shape) if s.spec.tiles else None


def bytes_moved(s: Setting, machine: costmodel.Machine | None = None) -> int:
    """HBM bytes the algorithm moves by the cost model (its spec's traffic): flash with the tiles it runs,
    L2-aware on `machine` (else the no-cache bound); naive with its softmax's passes on this path. A decode setting,
    whatever the algorithm: the least any decode moves, the cache's K and V read once with Q and O (its record's
    GB/s is then the bandwidth the algorithm reached on the work itself)."""
    if s.decode:
        return costmodel.total_bytes(costmodel.decode_traffic(s.shape, 1))
    if s.backward:  # the least any backward moves, as for decode: its GB/s is the bandwidth reached on that
        return costmodel.backward_least_bytes(s.shape)
    tiles = flash_tiles(s) or (None, None)
    return costmodel.total_bytes(specs.traffic(s.algorithm, s.shape, *tiles, machine=machine, interpreter=INTERPRET))


def model_extra_bytes(s: Setting) -> int:
    """Device memory the algorithm needs beyond its inputs, by its design (its spec's extra_bytes)."""
    return specs.extra_bytes(s.algorithm, s.shape)


def decode_runner(s: Setting, q, k, v):
    """(call, facts) to time a decode setting: its spec's kv_cache facet builds what the call needs (a paged cache,
    K/V expanded for a kernel without grouped heads) before the timing; facts: its page size and splits."""
    return s.spec.load("kv_cache")(q, k, v, s.page_size)


def runner(s: Setting, q, k, v):
    """The call to time for this setting's algorithm: ours through the library's face (kernels.flash_attention),
    the others as their spec names them. ValueError where it does not run (its spec says why)."""
    if s.decode:
        return decode_runner(s, q, k, v)[0]
    spec = s.spec
    why = spec.load("unavailable")(s.shape) if spec.unavailable else None
    if why:
        raise ValueError(why)
    if spec.max_seq_len and s.shape.seq_len > spec.max_seq_len:
        raise ValueError(f"the {spec.short} kernel is not timed past {spec.max_seq_len} tokens ({spec.max_seq_len_why})")
    causal = s.shape.causal
    if spec.library:
        from kernels.attention import flash_attention
        return lambda: flash_attention(q, k, v, causal=causal, kernel=spec.key)
    call = spec.load("call")
    return lambda: call(q, k, v, causal=causal)


# -- measuring -----------------------------------------------------------------------------------

def oom_bytes(message: str) -> int | None:
    """The size of the allocation that failed, read from PyTorch's out-of-memory message."""
    return bytes_after(message, "Tried to allocate")


def percentiles(times_ms: list[float]) -> tuple[float, float, float]:
    """(median, 20th, 80th percentile) of timings, as every record of ours states them."""
    ordered = sorted(times_ms)
    return (statistics.median(ordered), ordered[int(0.2 * (len(ordered) - 1))],
            ordered[int(math.ceil(0.8 * (len(ordered) - 1)))])


def make_record(s: Setting, status: str, device: str, timing_kind: str, times_ms: list[float] | None = None,
            peak: int | None = None, needed: int | None = None, message: str = "",
            num_splits: int | None = None, fwd_bwd_ms: float | None = None) -> Record:
    """The record of one measurement; a backward's TFLOPS count the backward's matmuls (costmodel.pass_flops:
    2.5 × the forward's), its fwd_bwd_ms the median of forward + backward."""
    median = p20 = p80 = tflops = gbps = None
    moved = bytes_moved(s, _machine() if timing_kind == "cuda" else None)
    if times_ms:
        median, p20, p80 = percentiles(times_ms)
        if timing_kind == "cuda":
            tflops = costmodel.pass_flops(s.shape) / (median * 1e-3) / 1e12
            gbps = moved / (median * 1e-3) / 1e9
    block_m, block_n = ((flash_tiles(s) or (None, None)) if (not s.decode or s.algorithm == "decode") and not s.backward
                        else (None, None))  # a backward runs its own tiles (kernels/fa2_bwd.py), not the forward's
    shape = s.shape
    return Record(s.algorithm, shape.seq_len, shape.batch, shape.heads, shape.head_dim, shape.dtype, shape.causal,
                  status, median, p20, p80, tflops, gbps, moved, peak, needed, message, device, timing_kind, block_m,
                  block_n, counters="not counted: hardware counters are read by `python -m bench.counters`",
                  kv_len=shape.kv_len, kv_heads=shape.kv_heads, pass_=shape.pass_, page_size=s.page_size,
                  num_splits=num_splits, fwd_bwd_ms=fwd_bwd_ms if status == "ok" else None,
                  recorded_at=recorded_now(), build=source.record_build(s.algorithm, shape.pass_, shape.dtype))


def recorded_now() -> str:
    """This minute in UTC, as a record's recorded_at says it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def provenance(section: str, entry: dict) -> dict:
    """recorded_at (this minute) and build (kernels/source.py entry_build: the code of ours it measured, None where
    none) of an entry of a results file's other sections measured now: an SM timeline, a phase recording, a ring
    run."""
    return {"recorded_at": recorded_now(), "build": source.entry_build(section, entry)}


@functools.cache
def _machine() -> costmodel.Machine | None:
    """This GPU for the L2-aware flash model (its L2 and SM count)."""
    return costmodel.machine_from_facts(device_facts())


def inputs(s: Setting, seed: int):
    """Random q, k, v of the setting's shape and dtype (never zeros), from `seed`, on the active device: q (batch,
    heads, seq_len, head_dim), k and v (batch, kv_heads, kv_len, head_dim)."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    shape = s.shape
    dtype = DTYPES_BY_NAME[shape.dtype]
    sizes = [(shape.batch, shape.heads, shape.seq_len, shape.head_dim)]
    sizes += [(shape.batch, shape.kv_heads, shape.kv_len, shape.head_dim)] * 2
    return tuple(torch.randn(size, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype) for size in sizes)


def time_interleaved(calls: dict, rounds: int, rep_ms: float, say=lambda line: None,
                     what: str = "") -> tuple[dict[str, list[float]], dict[str, str]]:
    """(times, failures) of calls (name → a function returning a tensor): each called once first (it compiles;
    one that raises, or returns NaN or Inf, is a failure: name → why, and not timed), then the rest timed in `rounds`
    rounds, the order rotated each round (time_cuda: the L2 flushed before every call). times: name → every round's
    repetitions, in ms."""
    failures: dict[str, str] = {}
    for name, fn in calls.items():
        try:
            if not torch.isfinite(fn()).all():
                failures[name] = "output has NaN or Inf"
        except Exception as exc:  # noqa: BLE001 - a failing call is a record to show, not a lost run
            failures[name] = f"{type(exc).__name__}: {exc}"[:500]
    names = [name for name in calls if name not in failures]
    times: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(rounds):
        shift = r % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            times[name] += time_cuda(calls[name], 25.0, rep_ms)
        say(f"{what}round {r + 1}/{rounds} done")
    return times, failures


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


def _failed(s: Setting, device: str, exc: Exception) -> Record:
    """The record of a run that raised: an out-of-memory (with the bytes it tried to allocate), or an error."""
    if isinstance(exc, torch.OutOfMemoryError):
        message = str(exc).split("\n")[0]
        return make_record(s, "oom", device, "cuda", needed=oom_bytes(message) or model_extra_bytes(s), message=message)
    return make_record(s, "error", device, "cuda", message=f"{type(exc).__name__}: {exc}"[:500])


def backward_inputs(s: Setting, seed: int):
    """q, k, v that require grad, and the upstream gradient dO (the output's shape), from `seed`."""
    q, k, v = (t.requires_grad_() for t in inputs(s, seed))
    gen = torch.Generator(device=DEVICE).manual_seed(seed + 1)
    do = torch.randn(q.shape, generator=gen, device=DEVICE, dtype=torch.float32).to(q.dtype)
    return q, k, v, do


def _measure_backward_cuda(s: Setting, seed: int, warmup_ms: float, rep_ms: float) -> Record:
    """A backward setting: peak memory of one forward + backward beyond q, k, v and dO; the backward alone timed
    (the graph of one forward done outside the timing, kept between runs); forward + backward timed."""
    device = torch.cuda.get_device_name(0)
    q = k = v = do = out = None
    try:
        q, k, v, do = backward_inputs(s, seed)
        fn = runner(s, q, k, v)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        grads = torch.autograd.grad(fn(), (q, k, v), do)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        if not all(torch.isfinite(g).all() for g in grads):
            return make_record(s, "error", device, "cuda", message="a gradient has NaN or Inf")
        del grads
        out = fn()
        times = time_cuda(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), warmup_ms, rep_ms)
        out = None
        both = time_cuda(lambda: torch.autograd.grad(fn(), (q, k, v), do), warmup_ms, rep_ms)
        return make_record(s, "ok", device, "cuda", times, peak=peak, fwd_bwd_ms=statistics.median(both))
    except Exception as exc:  # noqa: BLE001 - an out-of-memory or a failing kernel is a result, not a crash
        return _failed(s, device, exc)
    finally:
        del q, k, v, do, out
        gc.collect()
        torch.cuda.empty_cache()


def _measure_cuda(s: Setting, seed: int, warmup_ms: float, rep_ms: float) -> Record:
    if s.backward:
        return _measure_backward_cuda(s, seed, warmup_ms, rep_ms)
    device = torch.cuda.get_device_name(0)
    q = k = v = None
    try:
        q, k, v = inputs(s, seed)
        splits = None
        if s.decode:
            fn, facts = decode_runner(s, q, k, v)
            splits = facts.get("num_splits")
        else:
            fn = runner(s, q, k, v)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        if not torch.isfinite(out).all():
            return make_record(s, "error", device, "cuda", message="output has NaN or Inf")
        del out
        times = time_cuda(fn, warmup_ms, rep_ms)
        return make_record(s, "ok", device, "cuda", times, peak=peak, num_splits=splits)
    except Exception as exc:  # noqa: BLE001 - an out-of-memory or a failing kernel is a result, not a crash
        return _failed(s, device, exc)
    finally:
        del q, k, v
        gc.collect()
        torch.cuda.empty_cache()


def _measure_interpreter(s: Setting, seed: int) -> Record:
    if not s.spec.interpreter:
        raise ValueError(f"{s.algorithm} needs a GPU: it runs on CUDA only (the interpreter path is active)")
    if s.shape.seq_len > INTERPRETER_MAX_SEQ_LEN:
        raise ValueError(f"seq_len {s.shape.seq_len} is too large for the CPU interpreter "
                         f"(at most {INTERPRETER_MAX_SEQ_LEN}); the recorded H200 results cover larger N")
    if s.backward:
        return _measure_backward_interpreter(s, seed)
    q, k, v = inputs(s, seed)
    fn = runner(s, q, k, v)
    with kernel_launch_lock():  # time the run, not the wait for other sessions' interpreter runs
        start = time.perf_counter()
        fn()
        elapsed_ms = (time.perf_counter() - start) * 1e3
    return make_record(s, "ok", "CPU (Triton interpreter)", "interpreter", [elapsed_ms])


def _measure_backward_interpreter(s: Setting, seed: int) -> Record:
    """A backward on the CPU path: one forward, then its backward timed alone (CPU wall time), and forward +
    backward once more; no memory or TFLOPS (nothing of a GPU's is measured here)."""
    q, k, v, do = backward_inputs(s, seed)
    fn = runner(s, q, k, v)
    out = fn()
    start = time.perf_counter()
    torch.autograd.grad(out, (q, k, v), do)
    backward_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    torch.autograd.grad(fn(), (q, k, v), do)
    both_ms = (time.perf_counter() - start) * 1e3
    return make_record(s, "ok", "CPU (Triton interpreter)", "interpreter", [backward_ms], fwd_bwd_ms=both_ms)


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
