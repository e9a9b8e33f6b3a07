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

import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
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


def tma_aligned(t: torch.Tensor) -> bool:
    """Whether a tensor descriptor (TMA copies) can take `t` as it lies: rows of unit stride, a 16-byte aligned base,
    every other stride a positive multiple of 16 bytes. Not cached: a cache keyed by tensors would keep each alive."""
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all(s > 0 and s * t.element_size() % 16 == 0 for s in t.stride()[:-1]))


def tma_ready(t: torch.Tensor) -> torch.Tensor:
    """`t` as a tensor descriptor takes it: itself where tma_aligned, else a fresh contiguous copy (a fresh one: a
    contiguous view whose base is not 16-byte aligned is its own `.contiguous()`)."""
    return t if tma_aligned(t) else t.clone(memory_format=torch.contiguous_format)


@functools.lru_cache(maxsize=None)
def tma_device(device: torch.device) -> bool:
    """Whether tensor descriptors (TMA copies) run on `device`: a Hopper-or-newer GPU, or the interpreter, which
    emulates them (so the CPU runs what the H200 runs). Asked once per device: a short call is bound by the host."""
    return INTERPRET or (device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9)


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """The SMs of `device` (1 off CUDA: the interpreter runs one program at a time). Asked once per device."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


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


_NO_LOCK = nullcontext()  # on the GPU: nothing to hold (a generator per launch would cost a short call ~2 µs)


def kernel_launch_lock(on_wait: Callable[[int], None] | None = None):
    """Hold around every kernel launch: serializes the interpreter, no-op on the GPU (measure's GPU_LOCK
    serializes timing there, and CUDA launches from several threads are safe).

    on_wait(ahead) is called, in the caller's thread, when the interpreter is busy and this caller queues:
    `ahead` other threads hold or wait for it (the app tells a viewer so)."""
    return _interpreter_lock(on_wait) if INTERPRET else _NO_LOCK


@contextmanager
def _interpreter_lock(on_wait: Callable[[int], None] | None) -> Iterator[None]:
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


# -- launching a compiled kernel without the JIT's per-call dispatch ----------------------------------------------

# A short call (a decode step, attention at 1K) is bound by the host: Triton's `kernel[grid](...)` binds every
# argument, builds the specialization key and looks the compiled kernel up on each launch. CachedLaunch keeps the
# compiled kernel under a key the caller builds from what decides the specialization (shapes, strides, dtypes, flags,
# pointer alignment) and calls it the way the JIT itself does after its lookup (`kernel.run(grid…, stream, …)`, the
# same in triton 3.6 and 3.7). A miss, the interpreter, or a launch hook (Proton) takes the JIT's own path.
FAST_LAUNCH = os.environ.get("FLASH_LIVE_FAST_LAUNCH", "1") != "0"


class CachedLaunch:
    """launcher = CachedLaunch(kernel); launcher(key, grid, where, args, constexprs_and_options).

    args: every runtime parameter, in order (the kernel's constexpr parameters must all come after them);
    constexprs_and_options: a dict of the constexpr parameters by name, num_warps / num_stages. `key` must determine the
    JIT's specialization but for the tensors' alignment (added here): the values of the integers the JIT specializes
    (1, multiples of 16), the width (32 or 64 bits) of those it does not, what is None, the tensors' dtypes, the
    descriptors' types, the constexprs and options. The kernel's device and the tensors' data-pointer alignment
    (16 bytes) are added to the key here."""

    MAX_KERNELS = 4096  # keys kept (a key names a compiled kernel the JIT also keeps); past it, start afresh

    def __init__(self, fn):
        self.fn = fn
        self.kernels: dict = {}
        self.tensor_positions: dict = {}
        # the interpreter's function runs the source itself; ahead of time (AOT) nothing launches
        self.fast = BACKEND.name == "cuda" and hasattr(fn, "params")
        if not self.fast:
            return
        names = list(fn.arg_names)
        constexprs = [p.name for p in fn.params if p.is_constexpr]
        first = min((names.index(n) for n in constexprs), default=len(names))
        if names[first:] != constexprs:
            raise ValueError(f"{fn.__name__}: constexpr parameters must come last for CachedLaunch")
        self.runtime_count, self.constexprs = first, constexprs

    def __call__(self, key, grid, where, args: tuple, kwargs: dict):
        """Launch fn[grid](*args, **kwargs). where: stream_key(device) of the launch's tensors (the caller has it
        already), or None."""
        if not (self.fast and FAST_LAUNCH) or _launch_hooked():
            return self.fn[grid](*args, **kwargs)
        driver = _triton_driver()
        device = driver.get_current_device() if where is None else where[0]
        positions = self.tensor_positions.get(key)
        hit = None
        if positions is not None:
            full_key = (key, device, tuple([args[i].data_ptr() % 16 == 0 for i in positions]))
            hit = self.kernels.get(full_key)
        if hit is None:
            compiled = self.fn[grid](*args, **kwargs)
            if len(args) == self.runtime_count:
                if len(self.kernels) >= self.MAX_KERNELS:
                    self.kernels.clear()
                positions = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
                self.tensor_positions[key] = positions
                full_key = (key, device, tuple([args[i].data_ptr() % 16 == 0 for i in positions]))
                self.kernels[full_key] = (compiled, tuple(kwargs[name] for name in self.constexprs))
            return compiled
        compiled, tail = hit
        stream = driver.get_current_stream(device) if where is None else where[1]
        g0, g1, g2 = (tuple(grid) + (1, 1))[:3]
        knobs = _triton_knobs()
        compiled.run(g0, g1, g2, stream, compiled.function, compiled.packed_metadata, None,
                     knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args, *tail)
        return compiled

    def repeat(self, key, grid, kwargs: dict):
        """launch(args): self(key, grid, None, args, kwargs) for a launch made again and again with one key, grid and
        constexprs (the library's fast path, kernels/fa3.py). Past its first launch it keeps the compiled kernel, the
        device and the tensors' alignment, so a launch asks only for the current device and stream, checks the
        tensors' 16-byte alignment and that no launch hook is installed, and launches; anything else (another
        device, a misaligned tensor, a hook, FAST_LAUNCH off) goes through self(...), which handles it."""
        if not self.fast:
            return lambda args: self(key, grid, None, args, kwargs)
        g0, g1, g2 = (tuple(grid) + (1, 1))[:3]
        kept: list = []  # [compiled, constexpr values, device, tensor positions, direct], after the first launch
        driver = _triton_driver()
        runtime_knobs = _triton_knobs().runtime

        def launch(args):
            if kept and FAST_LAUNCH:
                compiled, tail, device, positions, direct = kept
                if (driver.get_current_device() == device and not _hook_calls(runtime_knobs.launch_enter_hook)
                        and not _hook_calls(runtime_knobs.launch_exit_hook)
                        and all(args[i].data_ptr() % 16 == 0 for i in positions)):
                    if direct is not None and DIRECT_LAUNCH:
                        direct(driver.get_current_stream(device), args)
                    else:
                        compiled.run(g0, g1, g2, driver.get_current_stream(device), compiled.function,
                                     compiled.packed_metadata, None, None, None, *args, *tail)
                    return compiled
            compiled = self(key, grid, None, args, kwargs)
            positions = self.tensor_positions.get(key)
            if not kept and positions is not None and all(args[i].data_ptr() % 16 == 0 for i in positions):
                tail = tuple(kwargs[name] for name in self.constexprs)
                kept[:] = [compiled, tail, driver.get_current_device(), positions,
                           direct_launcher(compiled, (g0, g1, g2), tail)]
            return compiled
        launch.kept = kept  # (tests read it)
        return launch

    def jit_kernel(self, grid, *args, **kwargs):
        """The compiled kernel the JIT itself picks for these arguments (no launch): tests compare it with ours."""
        return self.fn.run(*args, grid=grid, warmup=True, **kwargs)


# -- the launch itself, without the launcher's Python layers ------------------------------------------------------

# A compiled kernel's launcher (`compiled.run`, Triton's CudaLauncher) is two Python layers over a C function: its
# __call__ allocates the scratch the kernel asks for (ours ask for none) and wraps the arguments; a kernel taking host
# TMA descriptors adds `wrap_handle_tensordesc`'s `inner`, which walks every argument to expand each descriptor into
# the C function's (encoded map, shape, strides). At 1K tokens those layers were ~40 % of the library call's host time
# (perf/h200/logs/host-call-2026-12-04f.log). direct_launcher calls the C function itself with the same arguments:
# the descriptors expanded by the same `make_tensordesc_arg` (so install_encoding_cache's cache serves them), the rest
# as they are, in the argument order of the Triton in use. Triton 3.6 and 3.7 order the C function's arguments
# differently; a launcher this module does not know (another version) is called as before.
DIRECT_LAUNCH = os.environ.get("FLASH_LIVE_DIRECT_LAUNCH", "1") != "0"

# The call each known CudaLauncher.__call__ makes (its source, whitespace removed), and the layout it names.
_LAUNCHER_CALLS = {
    "self.launch(gridX,gridY,gridZ,stream,function,self.launch_cooperative_grid,self.launch_pdl,global_scratch,"
    "profile_scratch,*args)": "3.6",
    "self.launch(gridX,gridY,gridZ,stream,function,self.launch_cooperative_grid,self.launch_pdl,kernel_metadata,"
    "launch_metadata,launch_enter_hook,launch_exit_hook,global_scratch,profile_scratch,self.arg_annotations,"
    "self.kernel_signature,args)": "3.7",
}


@functools.lru_cache(maxsize=1)
def launcher_layout() -> str | None:
    """"3.6" or "3.7": the argument order of Triton's C launch function, read from CudaLauncher.__call__'s source;
    None where it is neither (direct_launcher then declines)."""
    import inspect
    try:
        import triton.backends.nvidia.driver as drv
        source = "".join(inspect.getsource(drv.CudaLauncher.__call__).split())
    except Exception:  # noqa: BLE001 - no NVIDIA backend, or no source to read
        return None
    found = [layout for call, layout in _LAUNCHER_CALLS.items() if call in source]
    return found[0] if len(found) == 1 else None


def descriptor_expander(desc_positions, metas, tail: tuple):
    """expand(args) -> the kernel's argument list as Triton's `inner` (wrap_handle_tensordesc) hands it to the C
    launch: each descriptor at desc_positions (ascending) replaced by make_tensordesc_arg(descriptor, its metadata),
    the other arguments as they are, then the constexprs' values (`tail`: the C function skips them, as it does the
    JIT's)."""
    import triton.backends.nvidia.driver as drv
    cuts = []
    start = 0
    for position, meta in zip(desc_positions, metas):
        cuts.append((start, position, meta))
        start = position + 1
    rest = start

    def expand(args):
        out = []
        make = drv.make_tensordesc_arg  # looked up per call: install_encoding_cache may replace it
        for begin, position, meta in cuts:
            out += args[begin:position]
            out += make(args[position], meta)
        out += args[rest:]
        out += tail
        return out
    return expand


def direct_launcher(compiled, grid: tuple, tail: tuple):
    """launch(stream, args): `compiled` launched on `grid` as compiled.run(grid…, stream, compiled.function,
    compiled.packed_metadata, None, None, None, *args, *tail) launches it, calling Triton's C launch function
    directly; None where that cannot be done the same way (an unknown launcher layout, a kernel that needs scratch
    memory, not Triton's CUDA launcher)."""
    layout = launcher_layout()
    run = compiled.run
    if layout is None or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    launch = run.launch
    names = getattr(getattr(launch, "__code__", None), "co_freevars", ())
    if "launcher" in names:  # wrap_handle_tensordesc's `inner`: the C function and the descriptors are in its closure
        cells = dict(zip(names, (cell.cell_contents for cell in launch.__closure__)))
        raw, positions = cells["launcher"], sorted(cells["tensordesc_indices"])
        metas = cells["tensordesc_meta"] or [None] * len(positions)
    elif hasattr(launch, "__code__"):  # a Python function we do not know
        return None
    else:  # the C function itself: no descriptors
        raw, positions, metas = launch, [], []
    expand = descriptor_expander(positions, metas, tail)
    g0, g1, g2 = grid
    function, metadata = compiled.function, compiled.packed_metadata
    cooperative, pdl = run.launch_cooperative_grid, run.launch_pdl
    if layout == "3.6":
        def direct(stream, args):
            raw(g0, g1, g2, stream, function, cooperative, pdl, None, None, metadata, None, None, None, *expand(args))
    else:
        annotations, signature = run.arg_annotations, run.kernel_signature

        def direct(stream, args):
            raw(g0, g1, g2, stream, function, cooperative, pdl, metadata, None, None, None, None, None, annotations,
                signature, expand(args))
    return direct


# An output a kernel must write and nobody reads (the LSE of a forward whose caller did not ask for it): one float32
# buffer per device, shared by every such launch, so a short call skips an allocation. Launches on two streams may
# write it at once: nothing reads it, so that is harmless. A buffer outgrown is kept, not freed: a launch still queued
# on another stream may write it, and freed memory would go to a tensor that is read.
_DISCARDED: dict = {}
_OUTGROWN: list = []


def discard_buffer(device: torch.device, floats: int) -> torch.Tensor:
    """A float32 tensor of at least `floats` elements on `device` for a kernel's output that is never read."""
    held = _DISCARDED.get(device)
    if held is None or held.numel() < floats:
        if held is not None:
            _OUTGROWN.append(held)
        held = _DISCARDED[device] = torch.empty(max(floats, 2 * (0 if held is None else held.numel()), 1024),
                                                dtype=torch.float32, device=device)
    return held


# -- tiles that fit the GPU's shared memory ------------------------------------------------------------------------
# The tiles are tuned on a Hopper (232,448 bytes of shared memory a block). An A100 gives a block 166,912 and the
# consumer Ampere, Ada and Blackwell cards 101,376, and Triton refuses a launch whose build asks for more
# (OutOfResources, raised before the kernel runs). fit_shared_memory then runs the launch again with smaller tiles,
# and remembers, per device and launch, the tiles that fitted.
_FITTED: dict = {}


def fit_shared_memory(run: Callable, config, shrink: Callable, key: tuple, what: str):
    """run(config), or where the GPU lacks the shared memory the config's build needs, run(shrink(config)),
    run(shrink(shrink(config))), … until one fits. key: what, besides the config, decides the build (device, dtype,
    head_dim, mask, …). Where shrink has nothing smaller (None), a ValueError names the tiles tried and the GPU's
    limit. A config that fitted is remembered under (key, config) for later calls."""
    from triton.runtime.errors import OutOfResources
    first = config
    config = _FITTED.get((key, first), first)
    tried = []
    while True:
        try:
            result = run(config)
        except OutOfResources as exc:
            if exc.name != "shared memory":
                raise
            tried.append(f"{config} ({exc.required:,} bytes)")
            smaller = shrink(config)
            if smaller is None or smaller == config:
                raise ValueError(f"{what}: no tile shape fits this GPU's {exc.limit:,} bytes of shared memory per "
                                 f"block; tried {'; '.join(tried)}") from exc
            config = smaller
            continue
        if config != first:
            _FITTED[(key, first)] = config
        return result


def fitted_config(key: tuple, config):
    """The config fit_shared_memory ran in config's place for this key (config itself where it fitted, or before
    its first launch)."""
    return _FITTED.get((key, config), config)


def stream_key(device: torch.device) -> tuple:
    """(device, the current stream's handle) on the GPU, (device, 0) elsewhere: what a per-stream workspace is kept
    under (work on one stream runs in order; two streams may run at once)."""
    if device.type != "cuda":
        return (device, 0)
    driver = _triton_driver()
    index = device.index if device.index is not None else driver.get_current_device()
    return (index, driver.get_current_stream(index))


_TRITON: dict = {}  # triton.runtime.driver and triton.knobs, imported on first use (after the backend is chosen)


def _triton_driver():
    driver = _TRITON.get("driver")
    if driver is None:
        from triton.runtime import driver as driver_module
        driver = _TRITON["driver"] = driver_module
    return driver.active


def _triton_knobs():
    knobs = _TRITON.get("knobs")
    if knobs is None:
        from triton import knobs
        _TRITON["knobs"] = knobs
    return knobs


def _hook_calls(hook) -> bool:
    """A launch hook that will be called (Proton keeps an idle hook whose `calls` is False)."""
    return hook is not None and getattr(hook, "calls", True)


def _launch_hooked() -> bool:
    """A launch hook is installed (Proton's profiler, a user's): it wants the JIT's launch metadata."""
    runtime_knobs = _triton_knobs().runtime
    return _hook_calls(runtime_knobs.launch_enter_hook) or _hook_calls(runtime_knobs.launch_exit_hook)


# -- host tensor descriptors without re-running their checks -----------------------------------------------------

_DESCRIPTOR_TEMPLATES: dict = {}


def quick_descriptor(cls, t: torch.Tensor, block_shape, **extra):
    """cls(base=t, shape=t.shape, strides=t.stride(), block_shape=block_shape, **extra): a host TMA descriptor
    (Triton's, or Gluon's with its layout in `extra`). Its constructor checks the box, the dtype and the alignment
    on every call, which costs a short call microseconds per descriptor; here a descriptor of the same class, dtype,
    rank, box and extras that passed those checks once lends its fields, and only base, shape and strides change.
    The caller must have checked what varies: a 16-byte aligned base, strides that are multiples of 16 bytes but the
    last (1), every size at least 1 (the kernels' own TMA checks do)."""
    key = (cls, t.dtype, t.dim(), tuple(block_shape), tuple(extra.items()))
    fields = _DESCRIPTOR_TEMPLATES.get(key)
    if fields is None:
        desc = cls(base=t, shape=list(t.shape), strides=list(t.stride()), block_shape=list(block_shape), **extra)
        _DESCRIPTOR_TEMPLATES[key] = {**vars(desc), "base": None}  # no reference to the tensor is kept
        return desc
    desc = cls.__new__(cls)
    vars(desc).update(fields)
    desc.base, desc.shape, desc.strides = t, list(t.shape), list(t.stride())
    return desc


class DescriptorTemplate:
    """Host TMA descriptors over tensors of one shape, strides and dtype, one class, box and extras, for a call made
    again and again (the library's fast path, kernels/attention.py): built and checked once on the first tensor;
    each call then only sets the base. The caller must pass tensors of the first one's shape, strides and dtype,
    16-byte aligned. Descriptors it makes also carry `_encoding_key`, under which Triton's launcher keeps the
    encoded descriptor of each base address (install_encoding_cache)."""
    _serial = itertools.count()

    def __init__(self, cls, t: torch.Tensor, block_shape, **extra):
        desc = cls(base=t, shape=list(t.shape), strides=list(t.stride()), block_shape=list(block_shape), **extra)
        self.cls = cls
        self.fields = {**vars(desc), "base": None, "_encoding_key": next(self._serial)}

    def __call__(self, t: torch.Tensor):
        desc = self.cls.__new__(self.cls)
        vars(desc).update(self.fields)
        desc.base = t
        return desc


_ENCODED: dict = {}
MAX_ENCODED = 1024  # encoded descriptors kept (128 bytes each and their Python lists); past it, start afresh


def install_encoding_cache() -> bool:
    """Keep what Triton's launcher encodes for a host TMA descriptor made by a DescriptorTemplate, per (template,
    base address, kernel's descriptor metadata): a call on a tensor at an address seen before (a loop; PyTorch's
    allocator hands the same blocks back) skips cuTensorMapEncodeTiled and its argument lists. The encoding is a
    function of exactly these (the template fixes shape, strides, dtype, box and layout), so a hit is the same
    descriptor. Other descriptors pass through untouched. Returns whether the cache is installed (False where
    Triton's launcher is not the one check() knows)."""
    if check_encoding_hook():
        return False
    import triton.backends.nvidia.driver as drv
    original = drv.make_tensordesc_arg
    if getattr(original, "flash_live_cache", False):
        return True

    def make_tensordesc_arg(arg, metadata):
        key = getattr(arg, "_encoding_key", None)
        if key is None or metadata is None:
            return original(arg, metadata)
        full = (key, arg.base.data_ptr(), id(metadata))
        hit = _ENCODED.get(full)
        if hit is not None and hit[0] is metadata:
            return hit[1]
        made = original(arg, metadata)
        if len(_ENCODED) >= MAX_ENCODED:
            _ENCODED.clear()
        _ENCODED[full] = (metadata, made)  # the metadata is held, so its id is not reused while the entry lives
        return made
    make_tensordesc_arg.flash_live_cache = True
    drv.make_tensordesc_arg = make_tensordesc_arg
    return True


def check_encoding_hook() -> list[str]:
    """What install_encoding_cache needs of Triton's NVIDIA launcher and does not find (empty: all there)."""
    import inspect
    try:
        import triton.backends.nvidia.driver as drv
    except Exception as exc:  # noqa: BLE001 - a Triton without the NVIDIA backend
        return [f"triton.backends.nvidia.driver ({type(exc).__name__})"]
    missing = []
    fn = getattr(drv, "make_tensordesc_arg", None)
    if fn is None or list(inspect.signature(fn).parameters)[:2] != ["arg", "metadata"]:
        missing.append("triton.backends.nvidia.driver.make_tensordesc_arg(arg, metadata)")
    wrap = getattr(drv, "wrap_handle_tensordesc", None)
    if wrap is None or "make_tensordesc_arg(arg, " not in inspect.getsource(wrap):
        missing.append("wrap_handle_tensordesc calling make_tensordesc_arg per descriptor at launch")
    return missing


def check() -> list[str]:
    """What CachedLaunch and quick_descriptor need of Triton's internals and do not find (empty: all there):
    tests/test_private_apis.py fails loudly when an upgrade moves one. Both use only what the JIT itself does after
    its cache lookup: `kernel.run(grid…, stream, kernel.function, kernel.packed_metadata, launch_metadata, enter hook,
    exit hook, *args)` (the same in triton 3.6 and 3.7)."""
    import dataclasses
    import inspect
    import triton
    from triton import knobs
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction
    from triton.tools.tensor_descriptor import TensorDescriptor
    missing = []
    run_source = inspect.getsource(JITFunction.run)
    if "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata" not in run_source:
        missing.append("JITFunction.run no longer launches with kernel.run(grid…, stream, function, packed_metadata…)")
    if "warmup" not in inspect.signature(JITFunction.run).parameters:
        missing.append("JITFunction.run(warmup=...)")
    if not isinstance(getattr(CompiledKernel, "run", None), property):
        missing.append("CompiledKernel.run")
    kernel_source = inspect.getsource(CompiledKernel)
    missing += [f"CompiledKernel.{name}" for name in ("function", "packed_metadata")
                if f"self.{name} = " not in kernel_source and f"self.{name}, " not in kernel_source]
    for hook in ("launch_enter_hook", "launch_exit_hook"):
        if not hasattr(getattr(knobs.runtime, hook, None), "calls"):
            missing.append(f"triton.knobs.runtime.{hook}.calls")

    @triton.jit
    def probe(x, N: triton.language.constexpr):
        pass
    if not (hasattr(probe, "arg_names") and all(hasattr(p, "is_constexpr") for p in getattr(probe, "params", []))):
        missing.append("JITFunction.arg_names / params[].is_constexpr")
    fields = {f.name for f in dataclasses.fields(TensorDescriptor)}
    missing += [f"TensorDescriptor.{name}" for name in ("base", "shape", "strides", "block_shape") if name not in fields]
    return missing + check_encoding_hook() + check_direct_launch()


def check_direct_launch() -> list[str]:
    """What direct_launcher needs of Triton's NVIDIA launcher and does not find (empty: all there)."""
    try:
        import triton.backends.nvidia.driver as drv
    except Exception as exc:  # noqa: BLE001 - a Triton without the NVIDIA backend
        return [f"triton.backends.nvidia.driver ({type(exc).__name__})"]
    import inspect
    missing = []
    if launcher_layout() is None:
        missing.append("CudaLauncher.__call__'s launch call, in an argument order direct_launcher knows (3.6, 3.7)")
    init_source = inspect.getsource(drv.CudaLauncher.__init__)
    missing += [f"CudaLauncher.{name}" for name in ("global_scratch_size", "profile_scratch_size",
                                                    "launch_cooperative_grid", "launch_pdl", "launch")
                if f"self.{name} = " not in init_source]
    inner = drv.wrap_handle_tensordesc(lambda *a: None, {0: "tensordesc<bf16[64, 64]>"}, None)
    if not {"launcher", "tensordesc_indices", "tensordesc_meta"} <= set(inner.__code__.co_freevars):
        missing.append("wrap_handle_tensordesc's inner closing over launcher, tensordesc_indices, tensordesc_meta")
    return missing
