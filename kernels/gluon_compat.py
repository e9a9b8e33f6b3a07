"""The differences between the two Triton versions our Gluon kernel meets, in one place.

The H200 runs triton 3.6; requirements.txt pins 3.7.1. Both have what kernels/fa3.py uses (TMA copies,
mbarriers, async wgmma, warp_specialize) under the same names, except:

- the partition-wide barrier (bar.sync over the calling partition's warps) is `gl.thread_barrier()` in 3.6 and
  `gl.barrier()` in 3.7 (3.7 removed the old name);
- `gl.warp_specialize(partitions, worker_num_warps, worker_num_regs)`: 3.6 requires `worker_num_regs`, 3.7 makes it
  optional. We always pass it, so the one call works on both;
- `mbarrier.allocate_mbarrier` exists only in 3.7: we allocate barriers with `gl.allocate_shared_memory(gl.int64,
  [n, 1], mbarrier.MBarrierLayout())`, which both have;
- the host-side `TensorDescriptor` (triton.experimental.gluon.nvidia.hopper) gained a `round_f32_to_tf32` field in
  3.7; we build it with keywords both accept;
- neither exposes the TMA reduce (`cp.reduce.async.bulk.tensor`, FA-3's way of adding dQ) in its Python API, though
  both builders have the op: `tma_reduce_add` below calls it as hopper.tma's store calls its copy.

Importing this module never raises: on a Triton without Gluon (or one too old), `GLUON_IMPORT_ERROR` says why and
the names below are None. Gluon does not run in Triton's CPU interpreter; that is kernels.fa3's concern.
"""
from __future__ import annotations

import functools

# first: kernels.runtime sets TRITON_INTERPRET before Triton is imported (Triton reads it when it decorates its own
# library, e.g. tl.zeros; imported after, the interpreter cannot run a tl kernel that calls them)
from kernels import runtime  # noqa: F401

GLUON_IMPORT_ERROR: str | None = None
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except Exception as exc:  # an old Triton, a broken install: the FA-3 kernel reports it instead of failing import
    gluon = gl = fence_async_shared = mbarrier = tma = warpgroup_mma = warpgroup_mma_wait = None
    TensorDescriptor = None
    GLUON_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"

try:  # private: a Triton that moves it loses only tma_reduce_add (check() names it), not the rest of Gluon
    from triton.experimental.gluon.language._core import builtin as _builtin
except Exception:  # noqa: BLE001
    _builtin = None

tma_reduce_add = None
if _builtin is not None and gl is not None:
    @_builtin
    def tma_reduce_add(tensor_desc, coord, src, _semantic=None):
        """Add the shared-memory tile `src` into global memory at `coord` of `tensor_desc`, element by element, by the
        copy engine (`cp.reduce.async.bulk.tensor...add`; tracked like a TMA store: `tma.store_wait` waits until it
        has read `src`). Gluon's op builder has it (create_async_tma_reduce) in triton 3.6 and 3.7.1, its Python API
        does not: this is hopper.tma.async_copy_shared_to_global with the reduce op in place of the copy."""
        from triton._C.libtriton import ir
        coord = _semantic._convert_to_ir_values(coord, require_i64=False)
        _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)

# bar.sync over the warps of the calling partition (3.7: gl.barrier; 3.6: gl.thread_barrier)
partition_barrier = None
if gl is not None:
    partition_barrier = getattr(gl, "barrier", None) or getattr(gl, "thread_barrier", None)
    if partition_barrier is None:
        GLUON_IMPORT_ERROR = "this Triton's Gluon has neither gl.barrier nor gl.thread_barrier"


def check() -> list[str]:
    """What this module needs of Triton's experimental Gluon and does not find (empty: all there):
    tests/test_private_apis.py fails loudly when an upgrade moves it."""
    if GLUON_IMPORT_ERROR:
        return [GLUON_IMPORT_ERROR]
    wanted = {gl: ("warp_specialize", "allocate_shared_memory", "NVMMADistributedLayout", "DotOperandLayout",
                   "BlockedLayout", "SliceLayout", "NVMMASharedLayout", "inline_asm_elementwise"),
              mbarrier: ("init", "wait", "arrive", "expect", "MBarrierLayout"),
              tma: ("async_copy_global_to_shared", "async_copy_shared_to_global", "store_wait")}
    missing = [f"{module.__name__}.{name}" for module, names in wanted.items() for name in names
               if not hasattr(module, name)]
    if tma_reduce_add is None:
        missing.append("triton.experimental.gluon.language._core.builtin (for tma_reduce_add)")
    from triton._C import libtriton  # tma_reduce_add's private builder op and its reduce kind
    builder = getattr(getattr(libtriton, "gluon_ir", None), "GluonOpBuilder", None)
    if not hasattr(builder, "create_async_tma_reduce"):
        missing.append("gluon_ir.GluonOpBuilder.create_async_tma_reduce")
    if not hasattr(getattr(libtriton.ir, "DESCRIPTOR_REDUCE_KIND", None), "ADD"):
        missing.append("ir.DESCRIPTOR_REDUCE_KIND.ADD")
    return missing


@functools.lru_cache(maxsize=256)
def _shared_layout(torch_dtype, block_shape: tuple):
    """The widest-swizzle shared layout for a box (computed once per box and dtype: a short call is host-bound)."""
    dtype = {"torch.bfloat16": gl.bfloat16, "torch.float8_e4m3fn": gl.float8e4nv,
             "torch.float32": gl.float32}.get(str(torch_dtype), gl.float16)
    return gl.NVMMASharedLayout.get_default_for(list(block_shape), dtype)


def make_descriptor(t, block_shape: list[int]):
    """A host TMA descriptor over all of `t` (its shape and strides) with one `block_shape` box per copy, laid out
    in shared memory with the widest swizzle the box allows (what wgmma reads without bank conflicts)."""
    return runtime.quick_descriptor(TensorDescriptor, t, block_shape, layout=_shared_layout(t.dtype, tuple(block_shape)))


def descriptor_template(t, block_shape: list[int]) -> "runtime.DescriptorTemplate":
    """make_descriptor's descriptors for tensors of t's shape, strides and dtype, made again with only a new base
    (the library's fast path: runtime.DescriptorTemplate)."""
    return runtime.DescriptorTemplate(TensorDescriptor, t, list(block_shape),
                                      layout=_shared_layout(t.dtype, tuple(block_shape)))
