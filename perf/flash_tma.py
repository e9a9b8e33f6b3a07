"""Experiment: the flash kernel with Q/K/V loads and the O store through 4-D tensor descriptors (TMA on
Hopper). The descriptor pads rows past seq_len with zeros and clips the store, so no load masks remain;
scores past seq_len are still masked to -inf. Compared against kernels/flash.py in perf/tune_tma.py."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_h, lo, hi, qk_scale, seq_len, offs_m, offs_n,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr,
           CAUSAL: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = ((start_n + offs_n) < seq_len)[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= (start_n + offs_n)[None, :])
            qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = desc_v.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_tma(desc_q, desc_k, desc_v, desc_o, sm_scale, seq_len, heads,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                  WARP_SPECIALIZE: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // heads
    off_h = off_bh % heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q = desc_q.load([off_b, off_h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        masked_lo = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
        masked_hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        masked_lo = seq_len // BLOCK_N * BLOCK_N
        masked_hi = seq_len
    acc, l_i, m_i = _inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_h, 0, masked_lo, qk_scale, seq_len,
                           offs_m, offs_n, BLOCK_M, BLOCK_N, HEAD_DIM, False, CAUSAL, WARP_SPECIALIZE)
    acc, l_i, m_i = _inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_h, masked_lo, masked_hi, qk_scale,
                           seq_len, offs_m, offs_n, BLOCK_M, BLOCK_N, HEAD_DIM, True, CAUSAL, False)
    o = (acc / l_i[:, None]).to(desc_o.dtype)
    desc_o.store([off_b, off_h, start_m * BLOCK_M, 0], o.reshape(1, 1, BLOCK_M, HEAD_DIM))


def flash_tma(q, k, v, causal, block_m=128, block_n=64, num_warps=8, num_stages=3, warp_specialize=False):
    batch, heads, seq_len, d = q.shape
    o = torch.empty_like(q)
    descs = [TensorDescriptor.from_tensor(t, [1, 1, block_m if t is q or t is o else block_n, d]) for t in (q, k, v, o)]
    grid = (triton.cdiv(seq_len, block_m), batch * heads)
    _attn_fwd_tma[grid](*descs, d ** -0.5, seq_len, heads, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
                        CAUSAL=causal, WARP_SPECIALIZE=warp_specialize, num_warps=num_warps, num_stages=num_stages)
    return o
