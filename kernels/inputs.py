"""Argument checks shared by the flash and naive wrappers: a clear error instead of a compile trace."""
from __future__ import annotations

import math
import os
from numbers import Real

import torch

from costmodel import HEAD_DIMS as SUPPORTED_HEAD_DIMS, LOG2_E
from kernels.runtime import DEVICE, INTERPRET

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
DTYPES_BY_NAME = {name: dtype for dtype, name in DTYPE_NAMES.items()}
# Offsets inside one head are 32-bit in the kernels; larger strides are made contiguous first.
_INT32_LIMIT = 2**31


# 8-bit inputs: only the FA-3 style kernel takes them, on Hopper (kernels/fp8.py), with their descales
FP8_DTYPES = (torch.float8_e4m3fn,)


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                           sm_scale: float | None, fp8: bool = False, kernel: str | None = None,
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """Validate (q, k, v, causal, sm_scale); return kernel-ready q, k, v and the softmax scale.

    q, k, v: (batch, heads, seq_len, head_dim), dense, one dtype of fp16/bf16/fp32 (with fp8=True: float8_e4m3fn
    only, the FP8 path's), on the active device.
    kernel: the kernel these inputs are for when it has no backward pass: then tensors that require grad are refused
    while autograd is on (no gradient would flow), naming the kernels that have one; None: no such check (the
    caller records the call for autograd, kernels/autograd.py).
    Non-contiguous inputs are accepted (strides are passed to the kernels); a last dimension that is
    not unit-stride, or strides too large for 32-bit in-head offsets, are copied to contiguous memory.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.is_nested or t.layout != torch.strided:
            kind = "a nested tensor" if t.is_nested else f"a {t.layout} tensor"
            raise TypeError(f"{name} is {kind}: the kernels read dense (strided) tensors; pass {name}.to_dense()")
        if kernel is not None and t.requires_grad and torch.is_grad_enabled():
            from kernels.autograd import no_backward_message
            raise ValueError(no_backward_message(kernel, name))
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq_len, head_dim); got shape {tuple(t.shape)}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError(f"q, k and v must have the same shape (batch, heads, seq_len, head_dim); got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype; got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if fp8 and q.dtype not in FP8_DTYPES:
        raise TypeError(f"the FP8 path takes torch.float8_e4m3fn q, k, v (kernels.fp8.quantize_fp8 makes them); got "
                        f"{q.dtype}")
    if not fp8 and q.dtype in FP8_DTYPES:
        raise TypeError(f"{q.dtype} inputs run only on the FA-3 style kernel on Hopper, with their scales: "
                        f"flash_attention(q, k, v, descale_q=..., descale_k=..., descale_v=...) with kernel 'auto' "
                        f"or 'fa3' (kernels.fp8.quantize_fp8 makes the values and the descales)")
    if not fp8 and q.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {q.dtype}: use torch.float16, torch.bfloat16 or torch.float32")
    batch, heads, seq_len, head_dim = q.shape
    if seq_len == 0:
        raise ValueError("empty sequence: seq_len is 0, attention needs at least one token")
    if batch == 0 or heads == 0:
        raise ValueError(f"batch and heads must be at least 1; got batch {batch}, heads {heads}")
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"unsupported head_dim {head_dim}: supported are {SUPPORTED_HEAD_DIMS}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v are on different devices: q {q.device}, k {k.device}, v {v.device}")
    if q.device.type != DEVICE.type:
        path = "Triton's CPU interpreter" if INTERPRET else "the CUDA GPU path"
        raise ValueError(f"tensors are on {q.device} but {path} is active: move them to {DEVICE.type}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    else:
        sm_scale = checked_sm_scale(sm_scale)
    return (*(_kernel_ready(t, seq_len) for t in (q, k, v)), float(sm_scale))


# The kernels take sm_scale as an fp32 scalar and multiply it by log2(e) (exp(x) == exp2(x·log2 e)): the scale, and
# that product, must be normal fp32 numbers. Below, fp32 rounds it to 0 or a subnormal the kernels' asserts refuse;
# above, the product is +inf and every score NaN.
_FP32 = torch.finfo(torch.float32)
SM_SCALE_RANGE = (_FP32.tiny, _FP32.max / LOG2_E)  # 1.2e-38 … 2.4e38


def checked_sm_scale(sm_scale) -> float:
    """sm_scale as the float the kernels take, or ValueError naming it: a real number, positive, finite, and in the
    range an fp32 scale times log2(e) can hold (SM_SCALE_RANGE)."""
    # a scale of 0 or below turns the masked scores' −inf into NaN (−inf · 0) or +inf in the kernels:
    # softmax(s · x) for x ≤ 0 is not what anyone calling attention means, so it is refused, not computed
    low, high = SM_SCALE_RANGE
    why = f"sm_scale must be a positive finite number (or None for 1/sqrt(head_dim)); got {sm_scale!r}"[:200]
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, Real):
        raise ValueError(why)
    try:
        value = float(sm_scale)  # 10**400 is a Real that no float holds
    except (OverflowError, ValueError):
        raise ValueError(f"{why}: too large for a float") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(why)
    if not low <= value <= high:
        raise ValueError(f"{why}, outside {low:.3g} … {high:.3g}: the kernels take it as an fp32 number and multiply "
                         f"it by log2(e), which fp32 cannot hold past that range (0 or a subnormal below it, "
                         f"infinity above)")
    return value


def _kernel_ready(t: torch.Tensor, seq_len: int) -> torch.Tensor:
    if t.stride(-1) != 1 or t.stride(2) * seq_len >= _INT32_LIMIT:
        return t.contiguous()
    return t


def example_qkv(head_dim: int, dtype: torch.dtype, seq_len: int = 128, batch: int = 1, heads: int = 2):
    """Small random CPU tensors q, k, v of a shape class: what the ahead-of-time compile check launches with (a
    launcher reads only shapes, strides, dtypes and, for alignment, data pointers)."""
    return tuple(torch.randn(batch, heads, seq_len, head_dim).to(dtype) for _ in range(3))


def dot_modes(dtype: torch.dtype) -> tuple[bool, str]:
    """(upcast operands to fp32 before tl.dot, tl.dot input_precision) for this dtype and path.

    The interpreter's tl.dot gives wrong numbers on bf16, so it gets fp32 operands (rounded to the input
    dtype first, so the numbers match the GPU's). fp32 inputs use IEEE products, not TF32, on the GPU.
    """
    return INTERPRET, ("ieee" if dtype == torch.float32 else "tf32")


_BINARY = ("B", "KiB", "MiB", "GiB", "TiB")


def _binary(nbytes: int) -> str:
    value, unit = float(nbytes), 0
    while value >= 1024 and unit < len(_BINARY) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.2f} {_BINARY[unit]}"


def device_memory_bytes(device: torch.device) -> int:
    """All the memory the device has: the GPU's (free or not), or this machine's RAM for the CPU interpreter."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(nbytes: int, device: torch.device, what: str) -> None:
    """Refuse up front buffers larger than all of the device's memory, as the allocator would refuse them later
    (torch.OutOfMemoryError, its message naming the bytes), instead of running until it does."""
    total = device_memory_bytes(device)
    if nbytes > total:
        raise torch.OutOfMemoryError(f"out of memory, refused before any launch: {what} need more memory than the device has: Tried to allocate "
                                     f"{_binary(nbytes)} ({nbytes} bytes); the device has {_binary(total)} in all")
