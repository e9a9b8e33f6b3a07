"""flash_attention with q and k/v of different lengths and grouped K/V heads (GQA): the split-KV kernel, causal aligned
bottom-right, against the float64 reference, on random inputs at lengths that are no multiple of any tile."""
from __future__ import annotations

import pytest
import torch

from kernels import flash_attention
from kernels.reference import reference_attention, relative_error


@pytest.mark.parametrize(("heads", "kv_heads", "q_len", "kv_len", "causal"),
                         [(4, 1, 1, 200, True), (8, 2, 5, 77, True), (4, 4, 3, 130, False), (6, 3, 33, 33, True),
                          (2, 2, 17, 300, True)])
def test_grouped_and_ragged_inputs_match_float64(heads, kv_heads, q_len, kv_len, causal):
    gen = torch.Generator().manual_seed(heads * 100 + kv_len)
    q = torch.randn(2, heads, q_len, 32, generator=gen)
    k, v = (torch.randn(2, kv_heads, kv_len, 32, generator=gen) for _ in range(2))
    out, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = reference_attention(q, k, v, causal=causal)
    assert relative_error(out, ref) < 1e-5
    assert torch.allclose(lse.double(), ref_lse, atol=1e-4)


def test_a_prefill_kernel_asked_for_by_name_says_it_needs_one_shape():
    q = torch.randn(1, 4, 3, 32)
    k = v = torch.randn(1, 2, 40, 32)
    with pytest.raises(ValueError, match="kernel='fa2' needs q, k and v of one shape"):
        flash_attention(q, k, v, kernel="fa2")
    with pytest.raises(ValueError, match="multiple"):
        flash_attention(q, torch.randn(1, 3, 40, 32), torch.randn(1, 3, 40, 32))  # 4 heads over 3 K/V heads
