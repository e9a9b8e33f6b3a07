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
    """(O, LSE) in float64. q, k, v: (batch, heads, seq_len, head_dim); O like q, LSE (batch, heads, seq_len),
    natural log. sm_scale defaults to 1/sqrt(head_dim)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    q, k, v = (t.detach().to(device or t.device, torch.float64) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) * scale  # (B, H, N, N)
    if causal:
        n = scores.shape[-1]
        above = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (NaN anywhere gives NaN, which no tolerance passes)."""
    out = out.detach().to(ref.device, torch.float64)
    return ((out - ref).norm() / ref.norm()).item()
