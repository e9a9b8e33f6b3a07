"""The kernels a user would pick instead of ours, behind the same call as ours: `fn(q, k, v, causal=...)` with q, k,
v (batch, heads, seq_len, head_dim). Their specs (kernels/specs.py) name them; the bench times them beside ours.

- `sdpa_default`: PyTorch's scaled_dot_product_attention as it picks its backend (cuDNN on an H200);
- `sdpa_flash`: the same, held to its FlashAttention-2 backend;
- `torch_naive`: standard attention in PyTorch eager, the same math as our naive kernels.
"""
from __future__ import annotations

import math

import torch


def _grouped(q, k) -> dict:
    """SDPA's keyword for K/V heads fewer than the query heads (grouped-query attention); none otherwise."""
    return {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}


def sdpa_default(q, k, v, causal: bool = False):
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    return sdpa(q, k, v, is_causal=causal, **_grouped(q, k))


def sdpa_flash(q, k, v, causal: bool = False):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return sdpa(q, k, v, is_causal=causal, **_grouped(q, k))


def torch_naive(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """Standard attention in PyTorch eager, the same math as our naive kernels: fp32 scores and softmax,
    P rounded to the input dtype, O = PV."""
    batch, heads, n, d = q.shape
    scale = 1.0 / math.sqrt(d) if sm_scale is None else sm_scale
    q3, k3, v3 = (t.reshape(batch * heads, n, d) for t in (q, k, v))  # (B·H, N, D)
    s = torch.bmm(q3, k3.transpose(1, 2), out_dtype=torch.float32)  # (B·H, N, N) fp32
    s.mul_(scale)
    if causal:
        s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)  # (B·H, N, N)
    del s
    return torch.bmm(p, v3).reshape(batch, heads, n, d)
