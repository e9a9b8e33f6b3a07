"""The L2 cache's read bandwidth, measured with a kernel that reads an L2-sized buffer over and over.

A copy through PyTorch of a buffer small enough to stay in L2 takes a few microseconds, so launch
overhead would dominate its timing. Here each program reads its slice of a buffer `repeats` times in
one launch and stores one sum (so the loads cannot be dropped): the bytes read, over the time, are the
rate at which L2 feeds the SMs.
"""
from __future__ import annotations

from kernels.runtime import INTERPRET  # first: it sets TRITON_INTERPRET before @triton.jit runs below
import torch
import triton
import triton.language as tl

BLOCK = 4096


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


def measure_l2_read_gbps(buffer_bytes: int | None = None, repeats: int = 64) -> float:
    """GB/s of reads served by L2: a buffer of a quarter of the L2, read `repeats` times by 4 programs per SM."""
    if INTERPRET:
        raise ValueError("the L2 bandwidth is a GPU measurement")
    props = torch.cuda.get_device_properties(0)
    programs = 4 * props.multi_processor_count
    buffer_bytes = buffer_bytes or props.L2_cache_size // 4
    slice_elems = max(BLOCK, buffer_bytes // 2 // programs // BLOCK * BLOCK)  # fp16 elements per program
    x = torch.randn(programs * slice_elems, device="cuda", dtype=torch.float16)
    out = torch.empty(programs, device="cuda", dtype=torch.float32)
    run = lambda: _read_repeatedly[(programs,)](x, out, slice_elems, repeats, BLOCK=BLOCK, num_warps=8)  # noqa: E731
    ms = triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median")
    return x.numel() * 2 * repeats / (ms * 1e-3) / 1e9
