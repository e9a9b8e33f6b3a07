"""FlashAttention backward in Triton (FlashAttention-2 order), the teaching kernel's backward; runs in the interpreter.

The forward (kernels/fa2.py) saved only O and the row log-sum-exp (LSE, natural log, fp32): no N×N matrix. The
backward recomputes the scores S = Q Kᵀ · scale and the probabilities P = exp(S − LSE) tile by tile from them, in
three kernels:

1. `_bwd_preprocess`: Δ = rowsum(dO ∘ O), one number per query row (it equals rowsum(P ∘ dP), which the softmax's
   derivative needs, without any P).
2. `_bwd_dkdv`: one program per K/V block. dK and dV stay in registers while the program walks every Q block that
   sees its keys (under causal, only the blocks on and below the diagonal): P = exp(S − LSE), dV += Pᵀ dO,
   dP = dO Vᵀ, dS = P ∘ (dP − Δ), dK += dSᵀ Q · scale. Written once at the end.
3. `_bwd_dq`: one program per Q block, walking the K/V blocks as the forward does: dQ += dS K · scale.

dQ gets its own pass (computing S, P and dP a second time) instead of atomic adds from the dK/dV programs: no atomics,
so the gradients are deterministic (the same bits every run) and every kernel runs in Triton's CPU interpreter. The
cost is the second recompute of S and dP: seven tile products per (Q block, K/V block) pair where an atomic dQ (FA-2
and FA-3 use atomics) needs five, 2/5 more matrix FLOPs than the 2.5 × forward the TFLOPS figures count.

Causal: blocks above the diagonal are skipped, the diagonal blocks masked, and the programs with the most blocks
start first across a group of heads whose re-read tensors fit in L2 (lpt, as the FA-3 forward does; one head after
another left the last heads' longest programs for the end: lpt measured 1.05-1.24× at 4K-8K on the H200, level at
16K; BENCHMARKS.md §1a). Ragged seq_len: the edge blocks masked.
The exponentials are base 2 with log2(e) folded into the scale, as in the forward. Tiles come by pointer loads, or,
on Hopper for the shape classes in TMA_CONFIGS (BENCHMARKS.md §1d), Q, K, V and dO through 4-D tensor descriptors as
the forward reads them there (TMA copies: rows past seq_len load as zeros; the interpreter emulates them). At head_dim
128 causal the dK/dV pass also keeps K and V, and the dQ pass Q and dO, in registers for the whole walk (BackwardConfig
kv_regs, qdo_regs): every tile product then reads its first operand from registers, not shared memory.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kernels.runtime import INTERPRET, fit_shared_memory, kernel_launch_lock, quick_descriptor, tma_aligned  # first: TRITON_INTERPRET
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import costmodel
from kernels.fa2 import LOG2_E_KERNEL, causal_program, tma_capable as forward_tma_capable
from kernels.inputs import dot_modes


@triton.jit
def _bwd_preprocess(O, DO, DELTA, seq_len, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    # O, dO: contiguous (B·H, N, D); Δ: (B·H, N) fp32
    off_bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < seq_len
    # -- compute Δ = rowsum(dO ∘ O) --
    ptrs = off_bh * seq_len * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(O + ptrs, mask=rows[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=rows[:, None], other=0.0).to(tl.float32)
    tl.store(DELTA + off_bh * seq_len + offs_m, tl.sum(o * do, 1), mask=rows)


@triton.jit
def _in_registers(x):
    # An identity the compiler cannot see through (a move per 32-bit pair): a loop-invariant tile that then feeds
    # tl.dot as its first operand stays in registers (Hopper's wgmma reads A from registers) instead of being
    # re-read from shared memory at every step. Not in the interpreter (no inline assembly there).
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=x.dtype, is_pure=True, pack=2)


@triton.jit
def _dkdv_inner(dk, dv, k, v, q_src, do_src, lse_src, delta_src, lo, hi, qk_scale, seq_len, offs_n, offs_m0,
                BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                DOT_FP32: tl.constexpr, PRECISION: tl.constexpr, stride_qn, off_b, off_h, USE_TMA: tl.constexpr):
    # q_src, do_src point at a (HEAD_DIM × BLOCK_M) transposed tile of rows 0..BLOCK_M (USE_TMA: they are Q's and
    # dO's descriptors, (B, H, N, D) in blocks of BLOCK_M rows); lse_src, delta_src at row 0
    if USE_TMA:
        in_dtype = q_src.dtype
    else:
        in_dtype = q_src.dtype.element_ty
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + offs_m0
        # -- load the Q block and its dO, LSE and Δ (transposed: HEAD_DIM × BLOCK_M) --
        if USE_TMA:  # rows past seq_len come as zeros
            qT = tl.trans(q_src.load([off_b, off_h, start_m, 0]).reshape(BLOCK_M, HEAD_DIM))
            doT = tl.trans(do_src.load([off_b, off_h, start_m, 0]).reshape(BLOCK_M, HEAD_DIM))
            if MASKED:
                lse = tl.load(lse_src + offs_m, mask=offs_m < seq_len, other=0.0)
                delta = tl.load(delta_src + offs_m, mask=offs_m < seq_len, other=0.0)
            else:
                lse = tl.load(lse_src + offs_m)
                delta = tl.load(delta_src + offs_m)
        elif MASKED:
            in_range = offs_m < seq_len
            qT = tl.load(q_src + start_m * stride_qn, mask=in_range[None, :], other=0.0)
            doT = tl.load(do_src + start_m * HEAD_DIM, mask=in_range[None, :], other=0.0)
            lse = tl.load(lse_src + offs_m, mask=in_range, other=0.0)
            delta = tl.load(delta_src + offs_m, mask=in_range, other=0.0)
        else:
            qT = tl.load(q_src + start_m * stride_qn)
            doT = tl.load(do_src + start_m * HEAD_DIM)
            lse = tl.load(lse_src + offs_m)
            delta = tl.load(delta_src + offs_m)
        if DOT_FP32:
            qT = qT.to(tl.float32)
            doT = doT.to(tl.float32)
        # -- recompute Sᵀ and Pᵀ = exp(Sᵀ − LSE) from the forward's LSE (base 2, log2 e folded in) --
        sT = tl.dot(k, qT, input_precision=PRECISION)
        pT = tl.math.exp2(sT * qk_scale - (lse * LOG2_E_KERNEL)[None, :])
        if MASKED:
            keep = (offs_m < seq_len)[None, :]
            if CAUSAL:
                keep = keep & (offs_m[None, :] >= offs_n[:, None])
            pT = tl.where(keep, pT, 0.0)
        # -- dV += Pᵀ dO --
        p_in = pT.to(in_dtype)  # rounded to the input dtype, as the forward rounds P
        if DOT_FP32:
            p_in = p_in.to(tl.float32)
        dv = tl.dot(p_in, tl.trans(doT), dv, input_precision=PRECISION)
        # -- dPᵀ = V dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − Δ) --
        dpT = tl.dot(v, doT, input_precision=PRECISION)
        dsT = pT * (dpT - delta[None, :])
        ds_in = dsT.to(in_dtype)
        if DOT_FP32:
            ds_in = ds_in.to(tl.float32)
        # -- dK += dSᵀ Q (the scale is applied once, at the end) --
        dk = tl.dot(ds_in, tl.trans(qT), dk, input_precision=PRECISION)
    return dk, dv


@triton.jit(do_not_specialize=["seq_len", "heads", "heads_per_group"])
def _bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, seq_len, heads, heads_per_group,
              stride_qb, stride_qh, stride_qn, stride_qd,
              stride_kb, stride_kh, stride_kn, stride_kd,
              stride_vb, stride_vh, stride_vn, stride_vd,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
              DOT_FP32: tl.constexpr, PRECISION: tl.constexpr, USE_TMA: tl.constexpr, REGS: tl.constexpr = False,
              TAIL_FIRST: tl.constexpr = False):
    # One program per K/V block (BLOCK_N keys) of one batch·head. dO, dK, dV: contiguous (B, H, N, D). USE_TMA: Q, K,
    # V and dO are 4-D tensor descriptors (B, H, N, D), Q's and dO's in blocks of BLOCK_M rows, K's and V's of BLOCK_N.
    if CAUSAL:  # the first key blocks are seen by the most query blocks: launched first (lpt across a head group)
        key_block, off_bh = causal_program(heads_per_group)
    else:
        key_block, off_bh = tl.program_id(0), tl.program_id(1)
    start_n = key_block * BLOCK_N
    off_b = (off_bh // heads).to(tl.int64)
    off_h = (off_bh % heads).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    keys = offs_n < seq_len
    # -- load the K and V block once; it stays in SRAM with dK and dV for the whole Q sweep --
    if USE_TMA:
        tb, th = off_b.to(tl.int32), off_h.to(tl.int32)  # the descriptors' coordinates
        k = K.load([tb, th, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = V.load([tb, th, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    else:
        tb, th = off_b, off_h
        k = tl.load(K + off_b * stride_kb + off_h * stride_kh + offs_n[:, None] * stride_kn
                    + offs_d[None, :] * stride_kd, mask=keys[:, None], other=0.0)
        v = tl.load(V + off_b * stride_vb + off_h * stride_vh + offs_n[:, None] * stride_vn
                    + offs_d[None, :] * stride_vd, mask=keys[:, None], other=0.0)
    if DOT_FP32:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    if REGS:  # K and V as the register operand of Sᵀ = K Qᵀ and dPᵀ = V dOᵀ
        k = _in_registers(k)
        v = _in_registers(v)
    bh_rows = off_bh.to(tl.int64) * seq_len
    if USE_TMA:
        q_src = Q
        do_src = DO
    else:
        q_src = (Q + off_b * stride_qb + off_h * stride_qh + offs_m0[None, :] * stride_qn
                 + offs_d[:, None] * stride_qd)
        do_src = DO + bh_rows * HEAD_DIM + offs_m0[None, :] * HEAD_DIM + offs_d[:, None]
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * LOG2_E_KERNEL
    # Query blocks split as the forward's key tiles are: masked ones (the diagonal under causal, the ragged tail)
    # and full ones no row of which needs a mask. Under causal no query before start_n sees these keys.
    # TAIL_FIRST (not causal; BackwardConfig.tail_first): the ragged tail before the full blocks. With the full blocks
    # first, triton 3.6's PTX of this kernel makes ptxas issue every wgmma of the Hopper (TMA) builds alone and wait
    # for it (C7515: an accumulator written between a wgmma's issue and its wait); with the tail first they go in
    # groups, as the pinned Triton's do in either order. Measured under 3.6 (BENCHMARKS.md §1d): 1.10× at head_dim 128,
    # but 0.76× at 64, whose build is faster serialized; so only the head_dim 128 tiles take it.
    full_hi = seq_len // BLOCK_M * BLOCK_M
    if CAUSAL:
        diag_hi = tl.minimum(start_n + BLOCK_N, seq_len)
        dk, dv = _dkdv_inner(dk, dv, k, v, q_src, do_src, LSE + bh_rows, DELTA + bh_rows, start_n, diag_hi,
                             qk_scale, seq_len, offs_n, offs_m0, BLOCK_M, HEAD_DIM, True, True, DOT_FP32, PRECISION,
                             stride_qn, tb, th, USE_TMA)
        full_lo = start_n + BLOCK_N
    else:
        if TAIL_FIRST:
            dk, dv = _dkdv_inner(dk, dv, k, v, q_src, do_src, LSE + bh_rows, DELTA + bh_rows, full_hi, seq_len,
                                 qk_scale, seq_len, offs_n, offs_m0, BLOCK_M, HEAD_DIM, True, False, DOT_FP32,
                                 PRECISION, stride_qn, tb, th, USE_TMA)
        full_lo = 0
    dk, dv = _dkdv_inner(dk, dv, k, v, q_src, do_src, LSE + bh_rows, DELTA + bh_rows, full_lo, full_hi,
                         qk_scale, seq_len, offs_n, offs_m0, BLOCK_M, HEAD_DIM, False, CAUSAL, DOT_FP32, PRECISION,
                         stride_qn, tb, th, USE_TMA)
    if CAUSAL or not TAIL_FIRST:  # the ragged tail last
        dk, dv = _dkdv_inner(dk, dv, k, v, q_src, do_src, LSE + bh_rows, DELTA + bh_rows,
                             tl.maximum(full_hi, full_lo), seq_len, qk_scale, seq_len, offs_n, offs_m0,
                             BLOCK_M, HEAD_DIM, True, CAUSAL, DOT_FP32, PRECISION, stride_qn, tb, th, USE_TMA)
    # -- write dK (times the scale) and dV once --
    out = bh_rows * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(DK + out, (dk * sm_scale).to(DK.dtype.element_ty), mask=keys[:, None])
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=keys[:, None])


@triton.jit
def _dq_inner(dq, q, do, lse2, delta, k_src, v_src, stride_kn, stride_vn, lo, hi, qk_scale, seq_len, offs_m, offs_n0,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
              DOT_FP32: tl.constexpr, PRECISION: tl.constexpr, off_b, off_h, USE_TMA: tl.constexpr):
    # k_src, v_src point at a (HEAD_DIM × BLOCK_N) transposed tile of keys 0..BLOCK_N (USE_TMA: they are K's and V's
    # descriptors, (B, H, N, D) in blocks of BLOCK_N rows)
    if USE_TMA:
        in_dtype = k_src.dtype
    else:
        in_dtype = k_src.dtype.element_ty
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + offs_n0
        # -- load the K tile and the V tile (transposed: HEAD_DIM × BLOCK_N) --
        if USE_TMA:  # keys past seq_len come as zeros
            kT = tl.trans(k_src.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, k_src.block_shape[3]))
            vT = tl.trans(v_src.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, v_src.block_shape[3]))
        elif MASKED:
            kT = tl.load(k_src + start_n * stride_kn, mask=(offs_n < seq_len)[None, :], other=0.0)
            vT = tl.load(v_src + start_n * stride_vn, mask=(offs_n < seq_len)[None, :], other=0.0)
        else:
            kT = tl.load(k_src + start_n * stride_kn)
            vT = tl.load(v_src + start_n * stride_vn)
        if DOT_FP32:
            kT = kT.to(tl.float32)
            vT = vT.to(tl.float32)
        # -- recompute S and P = exp(S − LSE) --
        s = tl.dot(q, kT, input_precision=PRECISION)
        p = tl.math.exp2(s * qk_scale - lse2[:, None])
        if MASKED:
            keep = (offs_n < seq_len)[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(keep, p, 0.0)
        # -- dP = dO Vᵀ, dS = P ∘ (dP − Δ), dQ += dS K --
        dp = tl.dot(do, vT, input_precision=PRECISION)
        ds = (p * (dp - delta[:, None])).to(in_dtype)
        if DOT_FP32:
            ds = ds.to(tl.float32)
        dq = tl.dot(ds, tl.trans(kT), dq, input_precision=PRECISION)
    return dq


@triton.jit(do_not_specialize=["seq_len", "heads", "heads_per_group"])
def _bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, seq_len, heads, heads_per_group,
            stride_qb, stride_qh, stride_qn, stride_qd,
            stride_kb, stride_kh, stride_kn, stride_kd,
            stride_vb, stride_vh, stride_vn, stride_vd,
            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
            DOT_FP32: tl.constexpr, PRECISION: tl.constexpr, USE_TMA: tl.constexpr, REGS: tl.constexpr = False):
    # One program per Q block (BLOCK_M query rows) of one batch·head, walking the K/V blocks it sees. USE_TMA: Q, K,
    # V and dO are 4-D tensor descriptors (B, H, N, D), Q's and dO's in blocks of BLOCK_M rows, K's and V's of BLOCK_N.
    if CAUSAL:  # the last query blocks see the most keys: launched first (lpt across a head group)
        rank, off_bh = causal_program(heads_per_group)
        start_m = tl.num_programs(0) - 1 - rank
    else:
        start_m, off_bh = tl.program_id(0), tl.program_id(1)
    off_b = (off_bh // heads).to(tl.int64)
    off_h = (off_bh % heads).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < seq_len
    bh_rows = off_bh.to(tl.int64) * seq_len
    # -- load the Q block, its dO, LSE and Δ once --
    if USE_TMA:
        tb, th = off_b.to(tl.int32), off_h.to(tl.int32)  # the descriptors' coordinates
        q = Q.load([tb, th, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
        do = DO.load([tb, th, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    else:
        tb, th = off_b, off_h
        q = tl.load(Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qn
                    + offs_d[None, :] * stride_qd, mask=rows[:, None], other=0.0)
        do = tl.load(DO + bh_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None],
                     other=0.0)
    lse2 = tl.load(LSE + bh_rows + offs_m, mask=rows, other=0.0) * LOG2_E_KERNEL
    delta = tl.load(DELTA + bh_rows + offs_m, mask=rows, other=0.0)
    if DOT_FP32:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    if REGS:  # Q and dO as the register operand of S = Q Kᵀ and dP = dO Vᵀ
        q = _in_registers(q)
        do = _in_registers(do)
    if USE_TMA:
        k_src = K
        v_src = V
    else:
        k_src = K + off_b * stride_kb + off_h * stride_kh + offs_n0[None, :] * stride_kn + offs_d[:, None] * stride_kd
        v_src = V + off_b * stride_vb + off_h * stride_vh + offs_n0[None, :] * stride_vn + offs_d[:, None] * stride_vd
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * LOG2_E_KERNEL
    # key tiles split as in the forward: full ones left of the diagonal (or all full ones), then the masked ones
    if CAUSAL:
        masked_lo = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
        masked_hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        masked_lo = seq_len // BLOCK_N * BLOCK_N
        masked_hi = seq_len
    dq = _dq_inner(dq, q, do, lse2, delta, k_src, v_src, stride_kn, stride_vn, 0, masked_lo, qk_scale, seq_len,
                   offs_m, offs_n0, BLOCK_N, False, CAUSAL, DOT_FP32, PRECISION, tb, th, USE_TMA)
    dq = _dq_inner(dq, q, do, lse2, delta, k_src, v_src, stride_kn, stride_vn, masked_lo, masked_hi, qk_scale,
                   seq_len, offs_m, offs_n0, BLOCK_N, True, CAUSAL, DOT_FP32, PRECISION, tb, th, USE_TMA)
    # -- write dQ (times the scale) once --
    tl.store(DQ + bh_rows * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=rows[:, None])


# -- configs --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BackwardConfig:
    block_m1: int   # query rows per step of a dK/dV program
    block_n1: int   # keys per dK/dV program (a multiple of block_m1)
    block_m2: int   # query rows per dQ program (a multiple of block_n2)
    block_n2: int   # keys per step of a dQ program
    num_warps: int
    num_stages: int
    tma: bool = False  # Q, K, V and dO through 4-D tensor descriptors (TMA copies; 16-bit inputs, Hopper or the
    #                    interpreter) instead of pointer loads: TMA_CONFIGS, where a GPU takes them.
    kv_regs: bool = False  # the dK/dV pass keeps K and V in registers, the first operand of Sᵀ and dPᵀ (not re-read
    #                    from shared memory each step; GPU only: the interpreter runs it as False, the same arithmetic)
    qdo_regs: bool = False  # the dQ pass keeps Q and dO in registers, likewise
    dkdv_warps: int | None = None  # the dK/dV pass's warps where they differ from num_warps (then the dQ pass's)
    tail_first: bool = False  # not causal: a dK/dV program walks the ragged tail of query blocks before the full ones
    #                    (under triton 3.6 that keeps the Hopper build's wgmmas in groups: _bwd_dkdv)
    dkdv_maxnreg: int | None = None  # the dK/dV build's registers a thread at most (ptxas's cap; GPU builds only):
    #                    128 lets two programs of 8 warps share an SM's 64K registers


# Tutorial 06's split (dK/dV programs of 128 keys stepping 32 query rows, dQ programs of 128 rows stepping 32 keys) at
# head_dim ≤ 64, larger steps and 8 warps at 128, halved at 256 and for fp32 (registers). Timed beside CANDIDATES on
# the H200 (2026-12-04, B2 H16 8K bf16, BENCHMARKS.md §1d): only head_dim 128 causal gained, 1.15× with 32-row steps
# and 8 warps at 3 stages (the shipped 64-row steps spilled; non-causal they are 1.23× faster than the 32-row ones).
# At 128 causal the dQ pass steps 64 keys at a time: 1.025-1.082× 32 keys in two runs on H100s (2026-12-07).
def _gpu_config(head_dim: int, dtype_bytes: int, causal: bool = False) -> BackwardConfig:
    if dtype_bytes == 4:
        if head_dim == 256:  # 64×16 steps at 2 stages need 168 KB of shared memory: more than sm_80 has
            return BackwardConfig(16, 32, 32, 16, 4, 1)
        return BackwardConfig(16, 64, 64, 16, 4, 2) if head_dim == 128 else BackwardConfig(32, 64, 64, 32, 4, 2)
    if head_dim <= 64:
        return BackwardConfig(32, 128, 128, 32, 4, 3)
    if head_dim == 128:
        return BackwardConfig(32, 128, 128, 64, 8, 3) if causal else BackwardConfig(64, 128, 128, 64, 8, 2)
    return BackwardConfig(32, 64, 64, 32, 8, 1)


# The interpreter costs about 10 ms per tile whatever its size, so it gets large tiles.
_INTERPRETER_CONFIG = BackwardConfig(64, 64, 64, 64, 4, 1)
WALK_CONFIG = _INTERPRETER_CONFIG  # the scene's tile walk (visit_order's default): square tiles, both passes alike


# Q, K, V and dO by TMA copies (16-bit, Hopper and newer; the classes below): the copies free the registers the
# pointer loads' addresses held, which a third stage (head_dim 128) or 8 warps (64) then use. Timed ÷ the pointer
# tiles on H100s (B2 H16 bf16, 4K / 8K / 16K, gradients bit for bit equal; BENCHMARKS.md §1d): 2026-12-06 d128 1.065 /
# 1.011 / 1.020 and 1.091 / 1.041 / 1.013, d64 1.021 / 1.023 / 0.999 and 1.026 / 1.022 / 1.027; as shipped 2026-12-07
# d128 1.070 / 1.020 / 1.037 and 1.070 / 1.020 / 1.050, d64 1.015 / 1.017 / 1.012 and 1.014 / 1.042 / 1.017. With the
# causal mask TMA lost at d128 (0.95-0.99) and drew at d64 (0.98-1.01). At d64 the dQ pass then took 64-key steps
# (BENCHMARKS.md §1d, H100s 2026-12-07, ÷ 32-key steps): not causal 1.067-1.088× in two runs; causal on TMA tiles
# 1.081-1.096× the pointer tiles (whose 64-key build spills 112 bytes). d128 causal took TMA tiles with K and V (dK/dV)
# and Q and dO (dQ) in registers, every wgmma's first operand read from registers instead of shared memory: 1.036 /
# 1.037 / 1.114 and 1.036 / 1.012 / 1.061 its pointer tiles at 4K / 8K / 16K in two runs (H100s, 2026-12-07, bit for
# bit; without the register operands TMA lost there). The same operands lost 0.67-0.77× at d64 and at d128 not causal
# (which then needs 32-row steps: 0.87-0.90×); the dQ pass's alone at d128 not causal drew (1.002-1.042×).
# d128 not causal walks the ragged tail of query blocks first (tail_first): 1.10× under triton 3.6 (an H100, 2026-12-08;
# it keeps that build's wgmmas in groups), where the same order lost 0.76× at d64 (BENCHMARKS.md §1d).
TMA_CONFIGS: dict[tuple[int, bool], BackwardConfig] = {
    (64, False): BackwardConfig(32, 128, 128, 64, 8, 3, tma=True),
    (128, False): BackwardConfig(64, 128, 128, 64, 8, 3, tma=True, tail_first=True),
    (64, True): BackwardConfig(32, 128, 128, 64, 4, 3, tma=True),
    (128, True): BackwardConfig(32, 128, 128, 64, 8, 3, tma=True, kv_regs=True, qdo_regs=True),
}


def smaller_tiles(config: BackwardConfig) -> BackwardConfig | None:
    """The next tiles to try where config's builds need more shared memory than the GPU gives a block
    (runtime.fit_shared_memory): one stage fewer, down to 1; then half the steps (the dK/dV pass's query rows and
    the dQ pass's keys), down to 16; then half the programs' keys and rows, down to 16, the steps no larger than
    them. At most one warp per 16 of a program's rows. None: nothing smaller."""
    c = config
    if c.num_stages > 1:
        return replace(c, num_stages=c.num_stages - 1)
    if c.block_m1 > costmodel.MIN_TILE or c.block_n2 > costmodel.MIN_TILE:
        return replace(c, block_m1=max(costmodel.MIN_TILE, c.block_m1 // 2),
                       block_n2=max(costmodel.MIN_TILE, c.block_n2 // 2))
    if c.block_n1 > costmodel.MIN_TILE or c.block_m2 > costmodel.MIN_TILE:
        n1, m2 = max(costmodel.MIN_TILE, c.block_n1 // 2), max(costmodel.MIN_TILE, c.block_m2 // 2)
        return replace(c, block_n1=n1, block_m2=m2, block_m1=min(c.block_m1, n1), block_n2=min(c.block_n2, m2),
                       num_warps=max(1, min(c.num_warps, min(n1, m2) // 16)),
                       dkdv_warps=c.dkdv_warps and max(1, min(c.dkdv_warps, n1 // 16)))
    return None


def config_for(head_dim: int, dtype: torch.dtype, causal: bool = False, tma: bool = False) -> BackwardConfig:
    """The backward's tile shapes and launch settings for this shape class; tma: the inputs can go through tensor
    descriptors (tma_capable), so a shape class in TMA_CONFIGS takes its TMA tiles."""
    if INTERPRET:
        return _INTERPRETER_CONFIG
    size = torch.empty((), dtype=dtype).element_size()
    if tma and size == 2 and (head_dim, causal) in TMA_CONFIGS:
        return TMA_CONFIGS[(head_dim, causal)]
    return _gpu_config(head_dim, size, causal)


def tma_capable(*tensors: torch.Tensor) -> bool:
    """Whether these inputs can go through the backward's TMA tiles on the GPU they are on (16-bit, sm_90+, rows of unit
    stride with 16-byte aligned strides): what launch_backward asks before it picks TMA_CONFIGS."""
    return all(t.is_cuda for t in tensors) and forward_tma_capable(*tensors)


def _check_config(config: BackwardConfig) -> None:
    costmodel.check_tiles(config.block_m1, config.block_n1)
    costmodel.check_tiles(config.block_m2, config.block_n2)
    if config.block_n1 % config.block_m1 or config.block_m2 % config.block_n2:
        raise ValueError(f"the backward's dK/dV program must hold whole query steps (block_n1 a multiple of "
                         f"block_m1) and its dQ program whole key steps (block_m2 a multiple of block_n2); got "
                         f"{config}")


# -- the walk, for the scene -----------------------------------------------------------------------

def visit_order(seq_len: int, causal: bool, config: BackwardConfig | None = None) -> dict[str, list[tuple[int, int]]]:
    """The (Q block, K/V block) tiles each pass recomputes S and P for, in the order one head's programs visit them
    (program by program, each program's steps in its loop order), in tiles of the dK/dV pass's sizes and the dQ
    pass's: {"dkdv": [(query step, key block), ...], "dq": [(query block, key step), ...]}. Derived from the
    launch grids and loop bounds of _bwd_dkdv and _bwd_dq above, not traced: tests/test_backward_walk.py pins the
    tiles of each pass to the ones the kernels read. Programs run in parallel on a GPU; the order within one is the
    loop's."""
    c = config or WALK_CONFIG
    _check_config(c)
    dkdv = []
    for pid in range(triton.cdiv(seq_len, c.block_n1)):
        start_n = pid * c.block_n1
        full_hi = seq_len // c.block_m1 * c.block_m1
        ranges = []
        if causal:  # the diagonal, the full blocks below it, the ragged tail
            full_lo = start_n + c.block_n1
            ranges += [(start_n, min(full_lo, seq_len)), (full_lo, full_hi), (max(full_hi, full_lo), seq_len)]
        elif c.tail_first:  # the ragged tail first, then the full blocks
            ranges += [(full_hi, seq_len), (0, full_hi)]
        else:  # the full blocks, then the ragged tail
            ranges += [(0, full_hi), (full_hi, seq_len)]
        dkdv += [(m // c.block_m1, pid) for lo, hi in ranges for m in range(lo, hi, c.block_m1)]
    dq = []
    n_q = triton.cdiv(seq_len, c.block_m2)
    for pid in range(n_q):
        start_m = n_q - 1 - pid if causal else pid
        if causal:
            masked_lo = (start_m * c.block_m2) // c.block_n2 * c.block_n2
            masked_hi = min((start_m + 1) * c.block_m2, seq_len)
        else:
            masked_lo, masked_hi = seq_len // c.block_n2 * c.block_n2, seq_len
        dq += [(start_m, n // c.block_n2) for lo, hi in ((0, masked_lo), (masked_lo, masked_hi))
               for n in range(lo, hi, c.block_n2)]
    return {"dkdv": dkdv, "dq": dq}


# -- wrapper --------------------------------------------------------------------------------------

def launch_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                    do: torch.Tensor, causal: bool, sm_scale: float, config: BackwardConfig | None = None,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) of O = attention(q, k, v) for the upstream gradient dO, from the forward's O and LSE (natural log,
    fp32, (B, H, N)). q, k, v as the forward took them (checked, (B, H, N, D), any strides with unit last stride);
    o and do are made contiguous. The gradients come back contiguous in the input dtype. Memory beyond the inputs and
    gradients: Δ, one fp32 per row. Without a config, config_for's, with TMA tiles where tma_capable(q, k, v, dO). On
    a GPU whose shared memory a block is less than config's builds need, smaller tiles (smaller_tiles,
    runtime.fit_shared_memory)."""
    head_dim = q.shape[-1]
    o, do = o.contiguous(), do.contiguous().to(q.dtype)
    config = config or config_for(head_dim, q.dtype, causal, tma=tma_capable(q, k, v, do))
    _check_config(config)
    lse = lse.contiguous()
    if q.device.type != "cuda":
        return _launch_backward(q, k, v, o, lse, do, causal, sm_scale, config)
    key = ("fa2_bwd", q.device.index, q.dtype, head_dim, causal)
    return fit_shared_memory(lambda c: _launch_backward(q, k, v, o, lse, do, causal, sm_scale, c), config,
                             smaller_tiles, key, "the teaching backward")


def _launch_backward(q, k, v, o, lse, do, causal: bool, sm_scale: float, config: BackwardConfig):
    batch, heads, seq_len, head_dim = q.shape
    dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    delta = torch.empty((batch, heads, seq_len), dtype=torch.float32, device=q.device)
    dot_fp32, precision = dot_modes(q.dtype)
    bh = batch * heads
    group = costmodel.lpt_heads_per_group(bh, seq_len, head_dim, q.element_size()) if causal else 1
    common = dict(HEAD_DIM=head_dim, CAUSAL=causal, DOT_FP32=dot_fp32, PRECISION=precision, USE_TMA=config.tma,
                  num_stages=config.num_stages)
    strides = (*q.stride(), *k.stride(), *v.stride())
    dkdv_args = dq_args = (q, k, v, do)
    if config.tma:  # the same tensors as descriptors, in each kernel's blocks (rows past seq_len load as zeros)
        _check_tma(q, k, v, do)
        dkdv_args, dq_args = ([quick_descriptor(TensorDescriptor, t, [1, 1, rows, head_dim])
                               for t, rows in zip((q, k, v, do), (m, n, n, m))]
                              for m, n in ((config.block_m1, config.block_n1), (config.block_m2, config.block_n2)))
    with kernel_launch_lock():  # the interpreter runs one kernel at a time, process-wide
        _bwd_preprocess[(triton.cdiv(seq_len, config.block_m2), bh)](o, do, delta, seq_len, HEAD_DIM=head_dim,
                                                                       BLOCK_M=config.block_m2)
        _bwd_dkdv[(triton.cdiv(seq_len, config.block_n1), bh)](
            *dkdv_args, lse, delta, dk, dv, sm_scale, seq_len, heads, group, *strides,
            BLOCK_M=config.block_m1, BLOCK_N=config.block_n1, REGS=config.kv_regs and not INTERPRET,
            TAIL_FIRST=config.tail_first and not causal, num_warps=config.dkdv_warps or config.num_warps,
            **({"maxnreg": config.dkdv_maxnreg} if config.dkdv_maxnreg and not INTERPRET else {}), **common)
        _bwd_dq[(triton.cdiv(seq_len, config.block_m2), bh)](
            *dq_args, lse, delta, dq, sm_scale, seq_len, heads, group, *strides,
            BLOCK_M=config.block_m2, BLOCK_N=config.block_n2, REGS=config.qdo_regs and not INTERPRET,
            num_warps=config.num_warps, **common)
    return dq, dk, dv


def _check_tma(*tensors: torch.Tensor) -> None:
    """BackwardConfig.tma's inputs: 16-bit, on a Hopper-or-newer GPU (or the interpreter, or the CPU for an
    ahead-of-time compile), rows of unit stride with 16-byte aligned base and strides (what a tensor descriptor
    takes)."""
    t0 = tensors[0]
    if t0.element_size() != 2:
        raise ValueError(f"the backward's TMA tiles take fp16 or bf16 inputs; got {t0.dtype}")
    if t0.device.type == "cuda" and torch.cuda.get_device_capability(t0.device)[0] < 9:
        raise ValueError("the backward's TMA tiles need a Hopper-or-newer GPU (sm_90+)")
    for t in tensors:
        if not tma_aligned(t):
            raise ValueError("the backward's TMA tiles need rows of unit stride and 16-byte aligned strides; got "
                             f"strides {tuple(t.stride())} of {t.dtype}")


# Candidates beside the shipped configs, 16-bit inputs, by (head_dim, causal), for one timing run on a GPU
# (perf/h200/backward_speed.py times each ÷ the shipped config; bench/compile_check.py --backward candidates compiles
# them). Decided: of the tile candidates timed on 2026-12-04 one won and shipped, and the causal launch order across
# a head group (lpt) measured 0.985-1.242× and shipped (BENCHMARKS.md §1a); dQ added from the dK/dV programs, by
# scalar atomics (0.69-0.99×) or by TMA reduce-adds (0.60-0.98×), lost (BENCHMARKS.md, Tried and lost); Q, K, V and
# dO by TMA copies shipped (TMA_CONFIGS). The sweep of 2026-12-07 (BENCHMARKS.md §1d, two rounds, predicted
# before each) shipped 64-key steps in the dQ pass at d64 and at d128 causal; larger dK/dV steps (0.84-0.99×), 8
# warps on d64's causal tiles (0.80-0.82×), 64-row dQ programs (0.69-0.82×), d64's 2 stages (0.974-1.100×, with the
# machine) and a 128-register cap on d64's dK/dV kernel (level) lost. Register operands (kv_regs, qdo_regs) shipped
# at d128 causal and lost elsewhere (TMA_CONFIGS). Kept beside them: the tiles d128 causal replaced (so a run
# re-measures the gain), and the dQ pass's register operands at d128 not causal (1.002-1.042×: a third run decides).
# Added 2026-12-07 after Nsight Compute's profile of d64's dK/dV kernel (BENCHMARKS.md §1d: its tensor pipe 42 %
# busy, 31 % of warp samples waiting on wgmma, one program of two warpgroups an SM): dK/dV programs of one warpgroup
# over 64 keys (dkdv_warps=4), two or three programs an SM, each warpgroup waiting only on its own products.
# Added 2026-12-07 (evening) from the sm_90 builds' registers (BENCHMARKS.md §1d, "head_dim 256"): the shipped d256
# tiles (one stage) spill 784-864 bytes a thread in the dK/dV kernel and 328-416 in the dQ kernel under both
# Tritons; the same tiles at two stages spill 16-80 and none, by pointer loads or TMA copies (131 KB of shared
# memory: Hopper's 227 KB takes it, an A100's 163 KB too). Never timed.
CANDIDATES: dict[tuple[int, bool], dict[str, BackwardConfig]] = {
    # the shipped tiles held to 128 registers (two programs an SM: 3.7.1's build takes 132 without the cap, 3.6's
    # 126), and with the tail first too (3.6's grouped build took 135 and lost 0.76×: §1d), 124-128 with the cap
    (64, False): {"128 regs": replace(TMA_CONFIGS[(64, False)], dkdv_maxnreg=128),
                  "tail first 128 regs": replace(TMA_CONFIGS[(64, False)], tail_first=True, dkdv_maxnreg=128),
                  "64 keys 4w": BackwardConfig(64, 64, 128, 64, 8, 3, tma=True, dkdv_warps=4),
                  "64 keys 4w regs": BackwardConfig(64, 64, 128, 64, 8, 3, tma=True, kv_regs=True, dkdv_warps=4),
                  "64x32 4w": BackwardConfig(32, 64, 128, 64, 8, 3, tma=True, dkdv_warps=4)},
    (64, True): {"64 keys 4w": BackwardConfig(64, 64, 128, 64, 4, 3, tma=True),
                 "64x32 4w": BackwardConfig(32, 64, 128, 64, 4, 3, tma=True)},
    (128, False): {"dq regs": replace(TMA_CONFIGS[(128, False)], qdo_regs=True),
                   "64x32 4w": BackwardConfig(32, 64, 128, 64, 8, 3, tma=True, dkdv_warps=4),
                   "64 keys 4w": BackwardConfig(64, 64, 128, 64, 8, 2, tma=True, dkdv_warps=4)},
    (128, True): {"pointer (before)": _gpu_config(128, 2, True)},
    (256, False): {"2 stages": BackwardConfig(32, 64, 64, 32, 8, 2),
                   "tma 2 stages": BackwardConfig(32, 64, 64, 32, 8, 2, tma=True),
                   "tma 2 stages dq 16": BackwardConfig(32, 64, 64, 16, 8, 2, tma=True)},
    (256, True): {"2 stages": BackwardConfig(32, 64, 64, 32, 8, 2),
                  "tma 2 stages": BackwardConfig(32, 64, 64, 32, 8, 2, tma=True),
                  "tma 2 stages dq 16": BackwardConfig(32, 64, 64, 16, 8, 2, tma=True)}}

# The compile check's subset of the shipped launches (CI's time): both 16-bit head_dims the bench measures, causal
# and not, and one fp32 build (head_dim 64: fp32 at 128 causal took 37 s a target to compile here, the rest 1-6 s);
# every backward kernel is in it.
REPRESENTATIVE = ((64, torch.bfloat16, False), (64, torch.bfloat16, True), (128, torch.bfloat16, False),
                  (128, torch.bfloat16, True), (64, torch.float32, False))


def _launch(head_dim, dtype, causal, config, label, targets=("sm_90", "sm_80")):
    from kernels.inputs import example_qkv
    q, k, v = example_qkv(head_dim, dtype)
    lse = torch.zeros(q.shape[:3], dtype=torch.float32)
    g = config
    dkdv = ((f" w{g.dkdv_warps}" if g.dkdv_warps else "") + (" tail first" if g.tail_first and not causal else "")
            + (f" r{g.dkdv_maxnreg}" if g.dkdv_maxnreg else ""))  # the dK/dV build's own settings
    label = (f"{label} D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} "
             f"dkdv {g.block_n1}x{g.block_m1}{dkdv} dq {g.block_m2}x{g.block_n2} w{g.num_warps} s{g.num_stages}")
    return (label, targets, lambda: launch_backward(q, k, v, q, lse, q, causal, 0.125, config))


def shipped_launches(subset: str = "all"):
    """The configurations the backward ships, as (label, targets, launch) for the ahead-of-time compile check
    (bench/compile_check.py): with subset "all" each head_dim, 16-bit and fp32, causal and not; "representative"
    the few in REPRESENTATIVE (CI); "candidates" the shipped 16-bit tiles and the tile candidates (CANDIDATES) at
    their head_dims, bf16, causal and not, sm_90 (registers and spills side by side). "all" and "representative" add
    the TMA tiles (TMA_CONFIGS), sm_90 only."""
    if subset == "all":
        cases = [(d, dtype, causal) for d in costmodel.HEAD_DIMS for dtype in (torch.bfloat16, torch.float32)
                 for causal in (False, True)]
    elif subset == "representative":
        cases = list(REPRESENTATIVE)
    elif subset == "candidates":
        return [_launch(d, torch.bfloat16, causal, config, f"candidate {name}", ("sm_90",))
                for (d, causal), configs in CANDIDATES.items()
                for name, config in {"shipped": config_for(d, torch.bfloat16, causal, tma=True), **configs}.items()]
    else:
        raise ValueError(f"subset must be 'all', 'representative' or 'candidates', got {subset!r}")
    return ([_launch(d, dtype, causal, config_for(d, dtype, causal), "backward") for d, dtype, causal in cases]
            + [_launch(d, torch.bfloat16, causal, config, "backward tma", ("sm_90",))
               for (d, causal), config in TMA_CONFIGS.items()])
