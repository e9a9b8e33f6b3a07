"""FlashAttention forward in Triton (FlashAttention-2 style), also runnable in Triton's CPU interpreter.

One program per (query block, batch·head). It loads its Q block once, streams the K/V tiles through
on-chip memory, keeps the running row max m and row sum l in fp32 (online softmax in base 2, with
log2(e) folded into the scale), rescales the accumulator when the max grows, and writes O once.
Nothing of size N×N is allocated: the extra memory is O plus the row log-sum-exp (LSE).

Two ways to move tiles, one constexpr apart (USE_TMA): fp16/bf16 on Hopper go through 4-D tensor
descriptors (TMA copies, no pointer tensors in registers, which is what lets 4 warps hold a 128×128
fp32 accumulator); fp32, older GPUs and unaligned strides use pointer loads. The interpreter runs the
descriptor path too. Causal launches query blocks longest-first, so short ones fill the tail.

Its instrumentation stays out of the math a learner reads: one line each, all compiled out unless asked for.
The trace mode (TRACE) records per (query block, key block) step the running max, sum and rescale factor of the
block's rows and the block's output so far (`_record_step`); RECORD_SM records per program the SM it ran on with
start and end timestamps (GPU only); PROFILE adds Proton scopes on the phases (bench/phases.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kernels.runtime import INTERPRET, CachedLaunch, fit_shared_memory, fitted_config, kernel_launch_lock, quick_descriptor, tma_aligned, tma_device  # first: it sets TRITON_INTERPRET before @triton.jit runs below
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import costmodel
from kernels.autograd import attention as autograd_attention, needs_grad
from kernels.inputs import check_attention_inputs, dot_modes

try:  # Proton's in-kernel scopes, compiled in only when PROFILE is on (bench/phases.py)
    import triton.profiler.language as pl
except Exception:  # noqa: BLE001 - a Triton without Proton: the PROFILE build is unavailable, nothing else changes
    pl = None

LN2 = costmodel.LN2  # the kernel keeps m in log2 units; its LSE and the trace are natural logs
# the same constants inside kernels (a kernel may read a global only when it is a constexpr); fa1.py uses them too
LN2_KERNEL: tl.constexpr = tl.constexpr(costmodel.LN2)
LOG2_E_KERNEL: tl.constexpr = tl.constexpr(costmodel.LOG2_E)


@triton.jit
def _sm_id():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _global_timer_ns():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _enter(NAME: tl.constexpr, PROFILE: tl.constexpr):
    # Proton scope around a phase, in the PROFILE build only (bench/phases.py); nothing otherwise
    if PROFILE:
        pl.enter_scope(NAME)


@triton.jit
def _exit(NAME: tl.constexpr, PROFILE: tl.constexpr):
    if PROFILE:
        pl.exit_scope(NAME)


@triton.jit
def _record_step(trace_stats, trace_out, start_n, m_i, l_i, alpha, acc, offs_d,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, TRACE: tl.constexpr):
    # the trace mode's record of one step: m, l, alpha of the block's rows and its normalized output so far
    if TRACE:
        step = start_n // BLOCK_N
        stats = trace_stats + step * (3 * BLOCK_M)
        tl.store(stats + tl.arange(0, BLOCK_M), m_i)
        tl.store(stats + BLOCK_M + tl.arange(0, BLOCK_M), l_i)
        tl.store(stats + 2 * BLOCK_M + tl.arange(0, BLOCK_M), alpha)
        out = trace_out + step * (BLOCK_M * HEAD_DIM)
        rows = tl.arange(0, BLOCK_M)
        tl.store(out + rows[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_src, v_src, stride_kn, stride_vn, off_b, off_h,
                    lo, hi, qk_scale, seq_len, offs_m, offs_n,
                    trace_stats, trace_out, offs_d,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                    MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                    DOT_FP32: tl.constexpr, PRECISION: tl.constexpr, TRACE: tl.constexpr,
                    USE_TMA: tl.constexpr, PROFILE: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        _enter("load", PROFILE)
        # -- load the K tile (transposed, HEAD_DIM × BLOCK_N; keys past seq_len read as zeros) into SRAM --
        if USE_TMA:
            k = tl.trans(k_src.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM))
        elif MASKED:
            k = tl.load(k_src + start_n * stride_kn, mask=((start_n + offs_n) < seq_len)[None, :], other=0.0)
        else:
            k = tl.load(k_src + start_n * stride_kn)
        if DOT_FP32:
            k = k.to(tl.float32)
        _exit("load", PROFILE)
        _enter("qk", PROFILE)
        # -- compute qk: raw scores of this tile (the scale is folded in below) --
        qk = tl.dot(q, k, input_precision=PRECISION)
        if MASKED:
            keep = ((start_n + offs_n) < seq_len)[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= (start_n + offs_n)[None, :])
            qk = tl.where(keep, qk, float("-inf"))
        _exit("qk", PROFILE)
        _enter("softmax", PROFILE)
        # -- update m_i and l_i (online softmax, log2 units: one FMA per score, qk·scale − m) --
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        _exit("softmax", PROFILE)
        _enter("pv", PROFILE)
        # -- rescale the accumulator, then add P·V --
        if USE_TMA:
            v = v_src.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        elif MASKED:
            v = tl.load(v_src + start_n * stride_vn, mask=((start_n + offs_n) < seq_len)[:, None], other=0.0)
        else:
            v = tl.load(v_src + start_n * stride_vn)
        p = p.to(v.dtype)
        if DOT_FP32:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p, v, acc, input_precision=PRECISION)
        m_i = m_new
        _exit("pv", PROFILE)
        _record_step(trace_stats, trace_out, start_n, m_i, l_i, alpha, acc, offs_d, BLOCK_M, BLOCK_N, HEAD_DIM, TRACE)
    return acc, l_i, m_i


@triton.jit
def causal_program(heads_per_group):
    # (block, batch·head) of this program under causal, where programs start in launch order (program_id(0)
    # fastest) and block 0 is the longest: the i-th program of a group of heads_per_group heads (see
    # costmodel.lpt_heads_per_group; the last group may be short) takes block i // group of head i % group, so the
    # group's longest programs start first and the short ones fill the tail (FA-3's longest-processing-time-first
    # order; one head after another left the last heads' longest programs to start when most work was done). The
    # forward below and the backward (kernels/fa2_bwd.py) both launch this way.
    n_blocks = tl.num_programs(0)
    pid = tl.program_id(1) * n_blocks + tl.program_id(0)
    first_bh = pid // (heads_per_group * n_blocks) * heads_per_group
    group = tl.minimum(heads_per_group, tl.num_programs(1) - first_bh)
    rank = pid - first_bh * n_blocks
    return rank // group, first_bh + rank % group


@triton.jit(do_not_specialize=["seq_len", "heads", "heads_per_group", "n_k_blocks"])
def _attn_fwd(Q, K, V, O, LSE, TRACE_STATS, TRACE_OUT, TRACE_SM,
              sm_scale, seq_len, heads, heads_per_group, n_k_blocks,
              stride_qb, stride_qh, stride_qn, stride_qd,
              stride_kb, stride_kh, stride_kn, stride_kd,
              stride_vb, stride_vh, stride_vn, stride_vd,
              stride_ob, stride_oh, stride_on, stride_od,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr,
              USE_TMA: tl.constexpr, TRACE: tl.constexpr, RECORD_SM: tl.constexpr, PROFILE: tl.constexpr):
    # Q, K, V, O: 4-D tensor descriptors (B, H, N, D) when USE_TMA (TMA copies on Hopper: rows past seq_len
    # load as zeros, stores are clipped), else plain pointers with masked loads and stores.
    n_q_blocks = tl.num_programs(0)
    if CAUSAL:  # the last query blocks see the most keys: launched first (lpt across a head group)
        rank, off_bh = causal_program(heads_per_group)
        start_m = n_q_blocks - 1 - rank
    else:
        start_m, off_bh = tl.program_id(0), tl.program_id(1)
    if RECORD_SM:
        t_start = _global_timer_ns()
    off_b = off_bh // heads
    off_h = off_bh % heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # -- load the Q block once; it stays in SRAM for the whole K/V sweep --
    if USE_TMA:
        q = Q.load([off_b, off_h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
        k_src = K
        v_src = V
    else:
        b64, h64 = off_b.to(tl.int64), off_h.to(tl.int64)
        q_ptrs = Q + b64 * stride_qb + h64 * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
        k_src = K + b64 * stride_kb + h64 * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
        v_src = V + b64 * stride_vb + h64 * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        q = tl.load(q_ptrs, mask=offs_m[:, None] < seq_len, other=0.0)
    if DOT_FP32:
        q = q.to(tl.float32)
    qk_scale = sm_scale * LOG2_E_KERNEL  # exp(x) == exp2(x·log2 e)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    program = off_bh * n_q_blocks + start_m
    trace_stats = TRACE_STATS + program.to(tl.int64) * n_k_blocks * 3 * BLOCK_M
    trace_out = TRACE_OUT + program.to(tl.int64) * n_k_blocks * BLOCK_M * HEAD_DIM
    # Key tiles split into a part no row of the block needs masked (full tiles left of the diagonal,
    # or all full tiles when not causal) and a masked part (the diagonal tiles, or the seq_len tail).
    if CAUSAL:
        masked_lo = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
        masked_hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    else:
        masked_lo = seq_len // BLOCK_N * BLOCK_N
        masked_hi = seq_len
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_src, v_src, stride_kn, stride_vn, off_b, off_h,
                                    0, masked_lo, qk_scale, seq_len, offs_m, offs_n,
                                    trace_stats, trace_out, offs_d,
                                    BLOCK_M, BLOCK_N, HEAD_DIM, False, CAUSAL, DOT_FP32, PRECISION, TRACE,
                                    USE_TMA, PROFILE)
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_src, v_src, stride_kn, stride_vn, off_b, off_h,
                                    masked_lo, masked_hi, qk_scale, seq_len, offs_m, offs_n,
                                    trace_stats, trace_out, offs_d,
                                    BLOCK_M, BLOCK_N, HEAD_DIM, True, CAUSAL, DOT_FP32, PRECISION, TRACE,
                                    USE_TMA, PROFILE)
    _enter("epilogue", PROFILE)
    # -- write O and the row log-sum-exp (natural log) once --
    row_in_range = offs_m < seq_len
    lse = (m_i + tl.math.log2(l_i)) * LN2_KERNEL
    tl.store(LSE + off_bh.to(tl.int64) * seq_len + offs_m, lse, mask=row_in_range)
    o = acc / l_i[:, None]
    if USE_TMA:
        O.store([off_b, off_h, start_m * BLOCK_M, 0], o.to(O.dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))
    else:
        o_ptrs = (O + off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
                  + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od)
        tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=row_in_range[:, None])
    _exit("epilogue", PROFILE)
    if RECORD_SM:  # which SM ran this program, and when (the SM timeline)
        record = TRACE_SM + program.to(tl.int64) * 3
        tl.store(record, _sm_id().to(tl.int64))
        tl.store(record + 1, t_start)
        tl.store(record + 2, _global_timer_ns())


# -- configs --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FlashConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


# Chosen per (head_dim, dtype bytes, causal) on an H200 at B=2, H=16, N=8192 (head dims 64 and 128, 16-bit:
# perf/h200/flash_speed.py, descriptor path, fp16 + bf16 time; head dims 16, 32, 256 in bf16 and 64 in fp32:
# perf/h200/tune_rest.py, pointer path; each candidate checked against float64 first; figures in BENCHMARKS.md).
# A shape class not listed (fp32 at head dims 16, 32, 128, 256) falls back to `_default_config`, checked for
# correctness on the H200 but not tuned.
TUNED_CONFIGS: dict[tuple[int, int, bool], FlashConfig] = {
    (16, 2, False): FlashConfig(64, 128, 4, 3),
    (16, 2, True): FlashConfig(64, 128, 4, 3),
    (32, 2, False): FlashConfig(64, 128, 4, 3),
    (32, 2, True): FlashConfig(64, 128, 4, 3),
    (64, 2, False): FlashConfig(128, 64, 4, 3),
    (64, 2, True): FlashConfig(64, 64, 4, 2),  # the tutorial's causal tile: +3.5% over 128×64 w4 s3
    (128, 2, False): FlashConfig(128, 64, 4, 2),
    (128, 2, True): FlashConfig(128, 64, 4, 2),
    (256, 2, False): FlashConfig(128, 32, 8, 3),
    (256, 2, True): FlashConfig(128, 32, 8, 3),
    (64, 4, False): FlashConfig(64, 128, 8, 3),
    (64, 4, True): FlashConfig(64, 128, 8, 3),
}

# The interpreter costs about 10 ms per tile whatever its size, so it gets large tiles.
_INTERPRETER_CONFIG = FlashConfig(block_m=64, block_n=64, num_warps=4, num_stages=1)


def _default_config(head_dim: int, dtype_bytes: int) -> FlashConfig:
    if head_dim <= 64:
        return FlashConfig(128, 64, 4, 3)
    if head_dim == 128:
        return FlashConfig(128, 64, 8, 3) if dtype_bytes == 2 else FlashConfig(64, 32, 4, 2)
    return FlashConfig(64, 32, 4, 2) if dtype_bytes == 2 else FlashConfig(32, 32, 4, 1)


def smaller_tiles(config: FlashConfig) -> FlashConfig | None:
    """The next tiles to try where config's build needs more shared memory than the GPU gives a block
    (runtime.fit_shared_memory): one stage fewer, down to 1; then half the keys a step, down to 16; then half the
    query rows a program, down to 16, with at most one warp per 16 rows. None: nothing smaller."""
    if config.num_stages > 1:
        return replace(config, num_stages=config.num_stages - 1)
    if config.block_n > costmodel.MIN_TILE:
        return replace(config, block_n=config.block_n // 2)
    if config.block_m > costmodel.MIN_TILE:
        block_m = config.block_m // 2
        return replace(config, block_m=block_m, num_warps=max(1, min(config.num_warps, block_m // 16)))
    return None


def config_for(head_dim: int, dtype: torch.dtype, causal: bool) -> FlashConfig:
    """The tile shape and launch settings used for this shape class (tuned once, kept in the package)."""
    if INTERPRET:
        return _INTERPRETER_CONFIG
    dtype_bytes = torch.empty((), dtype=dtype).element_size()
    return TUNED_CONFIGS.get((head_dim, dtype_bytes, causal), _default_config(head_dim, dtype_bytes))


# -- wrapper --------------------------------------------------------------------------------------

@dataclass
class _TraceBuffers:
    stats: torch.Tensor  # (B·H, n_q_blocks, n_k_blocks, 3, BLOCK_M) fp32: m (log2 units), l, alpha
    out: torch.Tensor    # (B·H, n_q_blocks, n_k_blocks, BLOCK_M, HEAD_DIM) fp32: acc / l
    sm: torch.Tensor     # (B·H, n_q_blocks, 3) int64: SM id, start ns, end ns


def tma_capable(*tensors: torch.Tensor) -> bool:
    """Whether the kernel reads and writes these tensors through 4-D tensor descriptors (TMA copies).

    Yes for fp16/bf16 on a Hopper-or-newer GPU (and in the interpreter, which emulates descriptors, so the
    CPU runs what the H200 runs) with unit-stride rows and 16-byte aligned base and strides. fp32 keeps
    pointer loads: its IEEE products run on the FMA units, and there TMA measured 1.55× slower (D=64, H200).
    """
    if tensors[0].element_size() != 2:
        return False
    if not tma_device(tensors[0].device):
        return False
    return all(tma_aligned(t) for t in tensors)


_FWD_LAUNCH = CachedLaunch(_attn_fwd)  # a short call is host-bound: launch without the JIT's dispatch


def launch_flash(q, k, v, causal: bool, sm_scale: float, config: FlashConfig,
                 trace: _TraceBuffers | None = None, trace_sm: torch.Tensor | None = None,
                 use_tma: bool | None = None, profile: bool = False):
    """The kernel's launch on checked inputs (flash_attention checks them): (O, LSE). trace / trace_sm: the trace
    mode's buffers; use_tma: None picks as the shipped kernel does; profile: the Proton-scoped build
    (bench/phases.py), a separate compile that no shipped call uses. On a GPU whose shared memory a block is less
    than config's build needs (tiles tuned on a Hopper, run on an A100 or a consumer card), smaller tiles
    (smaller_tiles, runtime.fit_shared_memory); the trace modes' buffers are shaped by config's tiles: no fallback."""
    use_tma = tma_capable(q, k, v, q) if use_tma is None else use_tma
    if trace is not None or trace_sm is not None or q.device.type != "cuda":
        return _launch_flash(q, k, v, causal, sm_scale, config, trace, trace_sm, use_tma, profile)
    key = _fit_key(q.device.index, q.dtype, q.shape[-1], causal, use_tma, profile)
    return fit_shared_memory(lambda c: _launch_flash(q, k, v, causal, sm_scale, c, None, None, use_tma, profile),
                             config, smaller_tiles, key, "the FA-2 order kernel")


def _fit_key(device_index, dtype, head_dim: int, causal: bool, use_tma: bool, profile: bool) -> tuple:
    """What, besides the config, decides the build whose tiles fit_shared_memory remembers (launch_flash, tiles_for)."""
    return ("fa2", device_index, dtype, head_dim, causal, use_tma, profile)


def _launch_flash(q, k, v, causal: bool, sm_scale: float, config: FlashConfig, trace, trace_sm, use_tma: bool,
                  profile: bool):
    batch, heads, seq_len, head_dim = q.shape  # (B, H, N, D)
    o = torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, H, N, D)
    lse = torch.empty((batch, heads, seq_len), dtype=torch.float32, device=q.device)  # (B, H, N)
    n_q_blocks = triton.cdiv(seq_len, config.block_m)
    n_k_blocks = triton.cdiv(seq_len, config.block_n)
    dot_fp32, precision = dot_modes(q.dtype)
    q_arg, k_arg, v_arg, o_arg = q, k, v, o
    if use_tma:  # the descriptor pads rows past seq_len with zeros on load and clips them on store
        q_arg, o_arg = (quick_descriptor(TensorDescriptor, t, [1, 1, config.block_m, head_dim]) for t in (q, o))
        k_arg, v_arg = (quick_descriptor(TensorDescriptor, t, [1, 1, config.block_n, head_dim]) for t in (k, v))
    grid = (n_q_blocks, batch * heads)
    group = costmodel.lpt_heads_per_group(batch * heads, seq_len, head_dim, q.element_size()) if causal else 1
    with kernel_launch_lock():  # the interpreter runs one kernel at a time, process-wide
        key = (q.dtype, head_dim, config, causal, use_tma, trace is not None, trace_sm is not None, profile,
               tuple(q.stride()), tuple(k.stride()), tuple(v.stride()), tuple(o.stride()))
        _FWD_LAUNCH(key, grid, None, (
            q_arg, k_arg, v_arg, o_arg, lse,
            trace.stats if trace is not None else lse,
            trace.out if trace is not None else lse,
            trace_sm if trace_sm is not None else lse,
            sm_scale, seq_len, heads, group, n_k_blocks,
            *q.stride(), *k.stride(), *v.stride(), *o.stride()), dict(
            HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
            CAUSAL=causal, DOT_FP32=dot_fp32, PRECISION=precision,
            USE_TMA=use_tma, TRACE=trace is not None, RECORD_SM=trace_sm is not None, PROFILE=profile,
            num_warps=config.num_warps, num_stages=config.num_stages))
    return o, lse


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, return_lse: bool = False,
                    config: FlashConfig | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention output O = softmax(sm_scale · Q Kᵀ [causal mask]) V, computed tile by tile.

    q, k, v: (batch, heads, seq_len, head_dim) in fp16, bf16 or fp32; head_dim in 16, 32, 64, 128, 256;
    any seq_len ≥ 1. sm_scale defaults to 1/sqrt(head_dim). Returns O (batch, heads, seq_len, head_dim)
    in the input dtype, and with return_lse=True also the row log-sum-exp (batch, heads, seq_len), fp32,
    natural log. Differentiable: with autograd on and an input that requires grad, the call is recorded and its
    backward is kernels/fa2_bwd.py (the forward saves O and the LSE, no N×N matrix; the LSE returned is detached).
    `config` overrides the tuned tile shape.
    """
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale)
    if needs_grad(q, k, v):
        if config is not None:
            raise ValueError("config is for the forward alone: a call recorded for autograd runs the shipped tiles")
        return autograd_attention(q, k, v, causal, sm_scale, "fa2", return_lse)
    config = config or config_for(q.shape[-1], q.dtype, causal)
    costmodel.check_tiles(config.block_m, config.block_n)
    o, lse = launch_flash(q, k, v, causal, sm_scale, config)
    return (o, lse) if return_lse else o


def flash_attention_traced(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, block_m: int,
                           block_n: int, sm_scale: float | None = None, record_sm: bool = False,
                           ) -> tuple[torch.Tensor, torch.Tensor, _TraceBuffers]:
    """Run the flash kernel in trace mode. Returns (O, LSE, trace) where trace holds NumPy-ready tensors:

    stats (B·H, n_q_blocks, n_k_blocks, 3, block_m): m in natural-log units, l, alpha; NaN where the kernel
    did not run the step (causal skipping). out (B·H, n_q_blocks, n_k_blocks, block_m, head_dim).
    sm (B·H, n_q_blocks, 3) int64 (SM id, start ns, end ns) when record_sm (GPU only), else None.
    """
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, kernel="fa2 traced")
    costmodel.check_tiles(block_m, block_n)
    if record_sm and INTERPRET:
        raise ValueError("SM ids and timestamps exist only on a GPU; the interpreter path cannot record them")
    batch, heads, seq_len, head_dim = q.shape
    n_q, n_k = triton.cdiv(seq_len, block_m), triton.cdiv(seq_len, block_n)
    bh = batch * heads
    stats = torch.full((bh, n_q, n_k, 3, block_m), float("nan"), dtype=torch.float32, device=q.device)
    out = torch.full((bh, n_q, n_k, block_m, head_dim), float("nan"), dtype=torch.float32, device=q.device)
    sm = torch.full((bh, n_q, 3), -1, dtype=torch.int64, device=q.device) if record_sm else None
    base = config_for(head_dim, q.dtype, causal)
    config = FlashConfig(block_m, block_n, base.num_warps, min(base.num_stages, 2))
    o, lse = launch_flash(q, k, v, causal, sm_scale, config, _TraceBuffers(stats, out, sm), sm)
    stats[:, :, :, 0] *= LN2  # the kernel keeps m in log2 units
    return o, lse, _TraceBuffers(stats, out, sm)


def flash_attention_sm_timeline(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                                sm_scale: float | None = None, config: FlashConfig | None = None,
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the flash kernel recording only, per program, its SM and start/end timestamps (GPU only).

    Returns (O, sm) with sm (B·H, n_q_blocks, 3) int64: SM id, start ns, end ns (%globaltimer).
    """
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, kernel="fa2 SM timeline")
    if INTERPRET:
        raise ValueError("SM ids and timestamps exist only on a GPU; the interpreter path cannot record them")
    config = config or config_for(q.shape[-1], q.dtype, causal)
    batch, heads, seq_len, _ = q.shape
    sm = torch.full((batch * heads, triton.cdiv(seq_len, config.block_m), 3), -1, dtype=torch.int64,
                    device=q.device)
    o, _ = launch_flash(q, k, v, causal, sm_scale, config, trace_sm=sm)
    return o, sm


# -- what the house needs of this kernel (its spec in kernels/specs.py names these) ----------------------------

def tiles_for(shape) -> tuple[int, int]:
    """(block_m, block_n) the kernel runs a shape (costmodel.Shape) with."""
    from kernels.inputs import DTYPES_BY_NAME
    dtype = DTYPES_BY_NAME[shape.dtype]
    config = config_for(shape.head_dim, dtype, shape.causal)
    if not INTERPRET and torch.cuda.is_available():  # smaller tiles where this GPU's shared memory took them
        device = torch.cuda.current_device()
        use_tma = dtype.itemsize == 2 and tma_device(torch.device("cuda", device))
        config = fitted_config(_fit_key(device, dtype, shape.head_dim, shape.causal, use_tma, False), config)
    return config.block_m, config.block_n


def proton_launcher(head_dim: int, causal: bool, dtype: torch.dtype):
    """(launch(q, k, v, causal, scale, profile), its config as plain data, the warps Proton samples, its language) for
    bench/phases.py: one sampled warp per warpgroup, since every warpgroup runs the whole loop."""
    config = config_for(head_dim, dtype, causal)

    def launch(q, k, v, causal, scale, profile=False):
        return launch_flash(q, k, v, causal, scale, config, profile=profile)
    return launch, {**config.__dict__, "tile_m": config.block_m}, list(range(0, config.num_warps, 4)), "triton"


def shipped_launches():
    """Every configuration the kernel ships, as (label, targets, launch) for the ahead-of-time compile check
    (bench/compile_check.py): each tuned or default shape class, on the TMA and pointer paths (16-bit inputs on
    Hopper take TMA; fp32 and older GPUs pointers), and the SM timeline's recording build."""
    from kernels.inputs import example_qkv
    launches = []
    classes = {(d, b, c) for d in costmodel.HEAD_DIMS for b in (2, 4) for c in (False, True)} | set(TUNED_CONFIGS)
    for head_dim, dtype_bytes, causal in sorted(classes):
        dtype = torch.bfloat16 if dtype_bytes == 2 else torch.float32
        config = config_for(head_dim, dtype, causal)
        tuned = "tuned" if (head_dim, dtype_bytes, causal) in TUNED_CONFIGS else "default"
        base = (f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} {config.block_m}x{config.block_n} "
                f"w{config.num_warps} s{config.num_stages} ({tuned})")
        paths = [(("sm_90",), True), (("sm_90", "sm_80"), False)] if dtype_bytes == 2 else [(("sm_90", "sm_80"), False)]
        for targets, use_tma in paths:
            q, k, v = example_qkv(head_dim, dtype)
            launches.append((f"{base} {'tma' if use_tma else 'pointers'}", targets,
                             lambda q=q, k=k, v=v, c=causal, g=config, t=use_tma: launch_flash(q, k, v, c, 0.125, g,
                                                                                                use_tma=t)))
        if dtype_bytes == 2:  # the SM timeline on the H200 (flash_attention_sm_timeline)
            q, k, v = example_qkv(head_dim, dtype)
            sm = torch.empty((2, 1, 3), dtype=torch.int64)
            launches.append((f"{base} sm-timeline", ("sm_90",),
                             lambda q=q, k=k, v=v, c=causal, g=config, sm=sm: launch_flash(q, k, v, c, 0.125, g,
                                                                                            trace_sm=sm, use_tma=True)))
    return launches
