"""The kernel behind the L2 bandwidth roof (bench/device.py measures with it): each program reads its slice of an
L2-resident buffer `repeats` times in one launch and stores one sum, so the loads cannot be dropped and launch
overhead does not dominate (a copy of a buffer small enough to stay in L2 takes a few microseconds).
"""
from __future__ import annotations

from kernels.runtime import INTERPRET  # noqa: F401  first: it sets TRITON_INTERPRET before @triton.jit runs below
import torch
import triton
import triton.language as tl

L2_BLOCK = 4096


@triton.jit
def _read_repeatedly(X, OUT, slice_elems, repeats, BLOCK: tl.constexpr):
    program = tl.program_id(0)
    base = X + program.to(tl.int64) * slice_elems
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for repeat in range(repeats):
        for start in range(0, slice_elems, BLOCK):
            # each pass starts one block further on, so no pass repeats the last one's addresses in order
            # and the compiler cannot hoist the loads out of the repeat loop
            rotated = (start + repeat * BLOCK) % slice_elems
            total += tl.load(base + rotated + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(OUT + program, tl.sum(total))


def read_repeatedly(x: torch.Tensor, out: torch.Tensor, slice_elems: int, repeats: int) -> None:
    """One launch: len(out) programs, each reading its `slice_elems` fp16 elements of x `repeats` times."""
    _read_repeatedly[(out.numel(),)](x, out, slice_elems, repeats, BLOCK=L2_BLOCK, num_warps=8)
