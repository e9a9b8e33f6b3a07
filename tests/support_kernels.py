"""Shared helpers of the kernel tests: random inputs (never zeros), the float64 reference, the tolerances.

The reference itself is the project's one (kernels/reference.py); this adds the tests' calling convention:
inputs moved to the CPU, outputs compared as a relative error. The `poisoned_allocations` fixture is in
conftest.py.
"""
import torch

from kernels.reference import reference_attention, relative_error
from kernels.runtime import DEVICE

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def random_qkv(shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen).to(dtype).to(DEVICE) for _ in range(3))


def reference(q, k, v, causal, sm_scale):
    """(O, LSE) of plain attention in float64 on the (already rounded) inputs, on the CPU."""
    return reference_attention(q, k, v, causal, sm_scale, device="cpu")


def rel_error(out, ref):
    return relative_error(out, ref)


FAST_CALLS: list = []


def counting_fast_launcher(q, k, v, causal, sm_scale):
    """A spec's `fast` facet for the library's fast path on the CPU: fa2 behind a launcher that counts its calls."""
    from kernels.fa2 import flash_attention as fa2_call
    made_for = (tuple(q.shape), tuple(q.stride()), causal, sm_scale)

    def run(q, k, v, need_lse=True):
        FAST_CALLS.append(made_for)
        o, lse = fa2_call(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True)
        return o, (lse if need_lse else None)
    return run
