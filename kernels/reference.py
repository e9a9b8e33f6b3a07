"""The one float64 reference attention every kernel is checked against (tests, GPU checks, perf scripts).

Plain softmax(sm_scale · Q Kᵀ [causal mask]) V in float64 on the inputs as given (already rounded to their
dtype), on the inputs' device unless `device` says otherwise. Imports torch only: no Triton, no kernel.
"""
from __future__ import annotations

import math

import torch


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        sm_scale: float | None = None, device: torch.device | str | None = None,
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, LSE) in float64. q: (batch, heads, q_len, head_dim); k, v: (batch, heads_kv, kv_len, head_dim) with
    heads a multiple of heads_kv (GQA: query head h reads K/V head h // (heads / heads_kv)); O like q, LSE
    (batch, heads, q_len), natural log. Causal is aligned bottom-right: query i sees keys 0 .. kv_len − q_len + i
    (the usual lower triangle when q_len == kv_len); a query that sees no key gets NaN. sm_scale defaults to
    1/sqrt(head_dim)."""
    q, k, v = (t.detach().to(device or t.device, torch.float64) for t in (q, k, v))
    return _attention64(q, k, v, causal, sm_scale)


def _attention64(q, k, v, causal, sm_scale):
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    if k.shape[1] != q.shape[1]:  # GQA / MQA: each K/V head serves a group of query heads
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    scores = q @ k.transpose(-1, -2) * scale  # (B, H, q_len, kv_len)
    if causal:
        n_q, n_k = scores.shape[-2:]
        above = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).triu(1 + n_k - n_q)
        scores = scores.masked_fill(above, float("-inf"))
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


def reference_gradients(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, causal: bool = False,
                        sm_scale: float | None = None, device: torch.device | str | None = None,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) in float64: float64 autograd through reference_attention's O for the upstream gradient do, on
    the inputs as given (already rounded to their dtype)."""
    q, k, v = (t.detach().to(device or t.device, torch.float64).requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out, _ = _attention64(q, k, v, causal, sm_scale)
        return torch.autograd.grad(out, (q, k, v), do.detach().to(out.device, torch.float64))


def reference_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     cache_seqlens: torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                     causal: bool = True, sm_scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, LSE) in float64 on the CPU of attention against a KV cache, laid out as kernels.decode takes it: each
    sequence's first L keys gathered (through block_table when paged) and passed to reference_attention. A query
    that sees no key gets O = 0 and LSE = −inf (the decode kernel's definition)."""
    q, k_cache, v_cache = (t.detach().cpu() for t in (q, k_cache, v_cache))
    paged = block_table is not None
    capacity = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[2]
    outs, lses = [], []
    for b in range(q.shape[0]):
        length = capacity if cache_seqlens is None else int(cache_seqlens[b])
        if paged:
            pages = block_table[b].cpu().long()[:(length + k_cache.shape[1] - 1) // k_cache.shape[1]]
            k, v = (t[pages].flatten(0, 1)[:length].permute(1, 0, 2)[None] for t in (k_cache, v_cache))
        else:
            k, v = k_cache[b:b + 1, :, :length], v_cache[b:b + 1, :, :length]
        out, lse = reference_attention(q[b:b + 1], k, v, causal, sm_scale, device="cpu")
        outs.append(torch.where(torch.isneginf(lse)[..., None], 0.0, out))
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (NaN anywhere gives NaN, which no tolerance passes)."""
    out = out.detach().to(ref.device, torch.float64)
    return ((out - ref).norm() / ref.norm()).item()
