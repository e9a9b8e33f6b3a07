"""Standard (naive) attention in Triton: three kernels, each a round trip through device memory.

    kernel 1  S = sm_scale · Q Kᵀ      writes S, (B, H, N, N) fp32, to HBM
    kernel 2  P = softmax(S)           reads S, applies the causal mask, writes P, (B, H, N, N) in the input dtype
    kernel 3  O = P V                  reads P and V, writes O

This is the algorithm the FlashAttention paper starts from. S and P really are materialized: that
is the memory the app measures, and at large N their allocation fails with a clean out-of-memory.
"""
from __future__ import annotations

from kernels.runtime import INTERPRET, fit_shared_memory, kernel_launch_lock  # first: it sets TRITON_INTERPRET before @triton.jit
import torch
import triton
import triton.language as tl

from costmodel import SOFTMAX_SINGLE_PASS_MAX, SOFTMAX_SINGLE_PASS_MAX_INTERPRETER
from kernels.inputs import check_attention_inputs, check_fits, dot_modes


@triton.jit
def _scores_kernel(Q, K, S, sm_scale, seq_len, heads,
                   stride_qb, stride_qh, stride_qn, stride_qd,
                   stride_kb, stride_kh, stride_kn, stride_kd,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr):
    start_m = tl.program_id(0)
    start_n = tl.program_id(1)
    off_bh = tl.program_id(2)
    # Tiles wholly above the diagonal are never read by the softmax kernel under a causal mask.
    if CAUSAL and start_n * BLOCK_N > (start_m + 1) * BLOCK_M - 1:
        return
    off_b = (off_bh // heads).to(tl.int64)
    off_h = (off_bh % heads).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                mask=offs_m[:, None] < seq_len, other=0.0)
    k = tl.load(K + off_b * stride_kb + off_h * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                mask=offs_n[None, :] < seq_len, other=0.0)  # (HEAD_DIM, BLOCK_N): Kᵀ tile
    if DOT_FP32:
        q = q.to(tl.float32)
        k = k.to(tl.float32)
    # -- compute S tile and write it to HBM --
    s = tl.dot(q, k, input_precision=PRECISION) * sm_scale
    s_ptrs = S + off_bh.to(tl.int64) * seq_len * seq_len + offs_m[:, None].to(tl.int64) * seq_len + offs_n[None, :]
    store = (offs_m[:, None] < seq_len) & (offs_n[None, :] < seq_len)
    if CAUSAL:  # only the scores the softmax reads: key ≤ query (costmodel.naive_traffic counts these)
        store = store & (offs_n[None, :] <= offs_m[:, None])
    tl.store(s_ptrs, s, mask=store)


@triton.jit
def _softmax_kernel(S, P, seq_len, total_rows,
                    ROWS: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, SINGLE_PASS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # global row index over (B·H·N)
    row_valid = rows < total_rows
    query = rows % seq_len
    row_base = rows.to(tl.int64) * seq_len
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        # -- the whole row fits one block: read S once, write P once --
        in_row = row_valid[:, None] & (cols[None, :] < seq_len)
        visible = in_row
        if CAUSAL:
            visible = visible & (cols[None, :] <= query[:, None])
        s = tl.load(S + row_base[:, None] + cols[None, :], mask=visible, other=float("-inf"))
        s = tl.where(row_valid[:, None], s, 0.0)  # rows past the end: finite, never stored
        m = tl.max(s, 1)
        p = tl.exp(s - m[:, None])
        p = p / tl.sum(p, 1)[:, None]
        tl.store(P + row_base[:, None] + cols[None, :], p.to(P.dtype.element_ty), mask=in_row)
    else:
        # -- pass 1: running max and sum over the row, chunk by chunk --
        m = tl.full([ROWS], float("-inf"), dtype=tl.float32)
        l = tl.zeros([ROWS], dtype=tl.float32)
        hi = seq_len
        if CAUSAL:
            hi = tl.minimum(tl.max(query) + 1, seq_len)
        for start in range(0, hi, BLOCK_N):
            visible = row_valid[:, None] & ((start + cols)[None, :] < seq_len)
            if CAUSAL:
                visible = visible & ((start + cols)[None, :] <= query[:, None])
            s = tl.load(S + row_base[:, None] + start + cols[None, :], mask=visible, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows not started yet stay at l = 0
            l = l * tl.exp(m - m_safe) + tl.sum(tl.exp(s - m_safe[:, None]), 1)
            m = m_new
        # -- pass 2: read S again, write P (zeros where the causal mask hides a key) --
        for start in range(0, seq_len, BLOCK_N):
            in_row = row_valid[:, None] & ((start + cols)[None, :] < seq_len)
            visible = in_row
            if CAUSAL:
                visible = visible & ((start + cols)[None, :] <= query[:, None])
            s = tl.load(S + row_base[:, None] + start + cols[None, :], mask=visible, other=float("-inf"))
            p = tl.exp(s - m[:, None]) / l[:, None]
            tl.store(P + row_base[:, None] + start + cols[None, :], p.to(P.dtype.element_ty), mask=in_row)


@triton.jit
def _pv_kernel(P, V, O, seq_len, heads,
               stride_vb, stride_vh, stride_vn, stride_vd,
               stride_ob, stride_oh, stride_on, stride_od,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // heads).to(tl.int64)
    off_h = (off_bh % heads).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    p_ptrs = P + off_bh.to(tl.int64) * seq_len * seq_len + offs_m[:, None].to(tl.int64) * seq_len + offs_n[None, :]
    v_ptrs = V + off_b * stride_vb + off_h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = seq_len
    if CAUSAL:  # P is zero right of the diagonal: those tiles add nothing
        hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        key_in_range = (start_n + offs_n) < seq_len
        load = (offs_m[:, None] < seq_len) & key_in_range[None, :]
        if CAUSAL:  # P is zero right of the diagonal: read only key ≤ query
            load = load & ((start_n + offs_n)[None, :] <= offs_m[:, None])
        p = tl.load(p_ptrs + start_n, mask=load, other=0.0)
        v = tl.load(v_ptrs + start_n * stride_vn, mask=key_in_range[:, None], other=0.0)
        if DOT_FP32:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = tl.dot(p, v, acc, input_precision=PRECISION)
    o_ptrs = O + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=offs_m[:, None] < seq_len)


# Rows of at most this many keys are softmaxed in one pass; longer rows take two passes over S.
_SINGLE_PASS_MAX = SOFTMAX_SINGLE_PASS_MAX_INTERPRETER if INTERPRET else SOFTMAX_SINGLE_PASS_MAX
_MULTI_PASS_BLOCK = 4096 if not INTERPRET else 1024


def _matmul_tiles(head_dim: int, dtype: torch.dtype) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for the two matmul kernels."""
    if INTERPRET:
        return 64, 64, 4, 1
    if head_dim >= 256 or dtype == torch.float32:
        return 64, 64, 4, 2
    return 128, 128, 8, 3


def smaller_matmul_tiles(tiles: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
    """The next (BLOCK_M, BLOCK_N, num_warps, num_stages) to try where the matmuls' builds need more shared memory than
    the GPU gives a block (runtime.fit_shared_memory): one stage fewer, down to 1; then half BLOCK_N, then half
    BLOCK_M, down to 16 (at most one warp per 16 rows). None: nothing smaller."""
    block_m, block_n, warps, stages = tiles
    if stages > 1:
        return block_m, block_n, warps, stages - 1
    if block_n > 16:
        return block_m, block_n // 2, warps, stages
    if block_m > 16:
        block_m //= 2
        return block_m, block_n, max(1, min(warps, block_m // 16)), stages
    return None


def _softmax_launch(seq_len: int) -> tuple[int, int, bool, int]:
    """(ROWS, BLOCK_N, single pass, num_warps) for the softmax kernel."""
    if seq_len <= _SINGLE_PASS_MAX:
        block_n = max(16, triton.next_power_of_2(seq_len))
        rows = max(1, (4096 if INTERPRET else 1024) // block_n)
        return rows, block_n, True, (4 if block_n <= 1024 else 8 if block_n <= 4096 else 16)
    return (16 if INTERPRET else 1), _MULTI_PASS_BLOCK, False, 8


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, return_intermediates: bool = False,
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard attention through HBM: S = sm_scale·QKᵀ (fp32), P = softmax(S) (input dtype), O = PV.

    q, k, v: (batch, heads, seq_len, head_dim), fp16/bf16/fp32, head_dim in 16, 32, 64, 128, 256,
    any seq_len ≥ 1. Returns O (batch, heads, seq_len, head_dim); with return_intermediates=True
    returns (O, S, P) with S, P of shape (batch, heads, seq_len, seq_len). Under a causal mask the
    part of S above the diagonal is never computed or written (its memory is still allocated: its values
    are undefined), and P holds zeros there.
    Raises torch.OutOfMemoryError when S and P do not fit on the GPU (before any launch when they are larger than
    all of its memory).
    """
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, kernel="naive")
    batch, heads, seq_len, head_dim = q.shape  # (B, H, N, D)
    check_fits(batch * heads * seq_len * seq_len * (4 + q.element_size()), q.device, "S (fp32) and P")
    s = torch.empty((batch, heads, seq_len, seq_len), dtype=torch.float32, device=q.device)  # (B, H, N, N)
    p = torch.empty((batch, heads, seq_len, seq_len), dtype=q.dtype, device=q.device)  # (B, H, N, N)
    o = torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, H, N, D)
    dot_fp32, precision = dot_modes(q.dtype)
    rows, softmax_block, single_pass, softmax_warps = _softmax_launch(seq_len)
    total_rows = batch * heads * seq_len

    def run(tiles):
        block_m, block_n, num_warps, num_stages = tiles
        n_m, n_n = triton.cdiv(seq_len, block_m), triton.cdiv(seq_len, block_n)
        _launch_three(q, k, v, s, p, o, sm_scale, causal, dot_fp32, precision, block_m, block_n, n_m, n_n, num_warps,
                      num_stages, rows, softmax_block, single_pass, softmax_warps, total_rows)

    tiles = _matmul_tiles(head_dim, q.dtype)
    if q.device.type == "cuda":  # tiles tuned on a Hopper may not fit a smaller GPU's shared memory: smaller ones
        fit_shared_memory(run, tiles, smaller_matmul_tiles, ("naive", q.device.index, q.dtype, head_dim, causal),
                          "the naive kernels")
    else:
        run(tiles)
    return (o, s, p) if return_intermediates else o


def _launch_three(q, k, v, s, p, o, sm_scale, causal, dot_fp32, precision, block_m, block_n, n_m, n_n, num_warps,
                  num_stages, rows, softmax_block, single_pass, softmax_warps, total_rows):
    batch, heads, seq_len, head_dim = q.shape
    with kernel_launch_lock():  # the interpreter runs one kernel at a time, process-wide
        _scores_kernel[(n_m, n_n, batch * heads)](
            q, k, s, sm_scale, seq_len, heads, *q.stride(), *k.stride(),
            HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
            DOT_FP32=dot_fp32, PRECISION=precision, num_warps=num_warps, num_stages=num_stages)
        _softmax_kernel[(triton.cdiv(total_rows, rows),)](
            s, p, seq_len, total_rows, ROWS=rows, BLOCK_N=softmax_block, CAUSAL=causal,
            SINGLE_PASS=single_pass, num_warps=softmax_warps)
        _pv_kernel[(n_m, batch * heads)](
            p, v, o, seq_len, heads, *v.stride(), *o.stride(),
            HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
            DOT_FP32=dot_fp32, PRECISION=precision, num_warps=num_warps, num_stages=num_stages)


def shipped_launches():
    """Every configuration the three kernels ship, as (label, targets, launch) for the ahead-of-time compile check:
    the softmax kernel's constexprs follow seq_len (one row block per power of two up to the single-pass limit, then
    the two-pass kernel), the matmuls' follow head_dim and dtype."""
    import costmodel
    from kernels.inputs import example_qkv
    seq_lens = [16 << i for i in range((costmodel.SOFTMAX_SINGLE_PASS_MAX // 16).bit_length())]
    seq_lens.append(costmodel.SOFTMAX_SINGLE_PASS_MAX + 16)
    launches = []
    for head_dim in costmodel.HEAD_DIMS:
        for dtype in (torch.bfloat16, torch.float32):
            for causal in (False, True):
                for seq_len in (seq_lens if head_dim == 64 else seq_lens[:1]):  # softmax: dtype, not head_dim
                    q, k, v = example_qkv(head_dim, dtype, seq_len=seq_len, heads=1)
                    label = f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} N={seq_len}"
                    launches.append((label, ("sm_90", "sm_80"),
                                     lambda q=q, k=k, v=v, c=causal: naive_attention(q, k, v, causal=c)))
    return launches
