"""FlashAttention forward in FlashAttention-1's loop order (Dao et al. 2022, Algorithm 1), in Triton.

One program per (batch·head), as FlashAttention-1 launched one thread block per (batch, head), or, where
batch·heads would leave SMs idle, per part of one: FlashAttention-1's own split heuristic (its forward launch
from late 2022, costmodel.fa1_splits) divides a head's Q blocks among up to 30 programs. The outer
loop walks the K/V tiles: each K and V tile is loaded into SRAM once. The inner loop walks the Q blocks
that tile touches: it loads the Q block and the block's O, row max m and row sum l so far from HBM,
folds the tile in (online softmax), and writes O, m and l back to HBM, for every K/V tile. That round
trip of O, m and l per K/V tile is what FlashAttention-2 removed by swapping the loops (kernels/fa2.py:
one program per Q block, O kept in SRAM until the end).

O between steps is kept normalized (O = acc / l, as Algorithm 1 writes it) in an fp32 scratch buffer, so
the answer does not lose precision to a rounding per tile; at a Q block's last tile the kernel writes O in
the input dtype and the row log-sum-exp instead. Plain pointer loads and tl.dot only: it runs in Triton's
CPU interpreter and on any GPU Triton drives. The phase comments below are read by kernels/source.py and
shown beside the animation (its spec, kernels/specs.py, lists them): keep them as they are.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels.runtime import INTERPRET, fit_shared_memory, fitted_config, kernel_launch_lock  # first: it sets TRITON_INTERPRET before @triton.jit
import torch
import triton
import triton.language as tl

import costmodel
from kernels.fa2 import LN2, LN2_KERNEL, FlashConfig, smaller_tiles
from kernels.inputs import check_attention_inputs, dot_modes

@triton.jit(do_not_specialize=["seq_len", "heads", "n_q_blocks", "n_k_blocks", "q_per_split"])
def _attn_fwd_fa1(Q, K, V, O, LSE, O_ACC, M, L, TRACE_STATS, TRACE_OUT, TRACE_ORDER,
                  sm_scale, seq_len, heads, n_q_blocks, n_k_blocks, q_per_split,
                  stride_qb, stride_qh, stride_qn, stride_qd,
                  stride_kb, stride_kh, stride_kn, stride_kd,
                  stride_vb, stride_vh, stride_vn, stride_vd,
                  stride_ob, stride_oh, stride_on, stride_od,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr,
                  TRACE: tl.constexpr):
    # O_ACC (B·H, N, HEAD_DIM) fp32, M and L (B·H, N) fp32: the running O, m (log2 units) and l in HBM.
    # Program (batch·head, split): the split's Q blocks [q_first, q_end), all of them when the head is not split.
    off_bh = tl.program_id(0)
    q_first = tl.program_id(1) * q_per_split
    q_end = tl.minimum(n_q_blocks, q_first + q_per_split)
    off_b = off_bh // heads
    off_h = off_bh % heads
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_head = Q + off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
    k_head = K + off_b.to(tl.int64) * stride_kb + off_h.to(tl.int64) * stride_kh
    v_head = V + off_b.to(tl.int64) * stride_vb + off_h.to(tl.int64) * stride_vh
    o_head = O + off_b.to(tl.int64) * stride_ob + off_h.to(tl.int64) * stride_oh
    acc_head = O_ACC + off_bh.to(tl.int64) * seq_len * HEAD_DIM
    row_head = off_bh.to(tl.int64) * seq_len  # M, L and LSE rows of this head
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp(x) == exp2(x·log2 e)
    if CAUSAL:  # the K/V tiles up to the last key the split's last query sees
        k_end = tl.minimum(n_k_blocks, (tl.minimum(seq_len, q_end * BLOCK_M) + BLOCK_N - 1) // BLOCK_N)
    else:
        k_end = n_k_blocks
    step = 0
    for k_block in range(0, k_end):
        keys = k_block * BLOCK_N + offs_n
        key_in_range = keys < seq_len
        # -- load the K tile and the V tile once (BLOCK_N × HEAD_DIM each); they stay in SRAM for the Q sweep --
        k = tl.load(k_head + keys[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                    mask=key_in_range[:, None], other=0.0)
        v = tl.load(v_head + keys[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=key_in_range[:, None], other=0.0)
        if DOT_FP32:
            k = k.to(tl.float32)
        if CAUSAL:  # the split's first Q block with a query at or after this tile's first key
            q_lo = tl.maximum(q_first, (k_block * BLOCK_N) // BLOCK_M)
        else:
            q_lo = q_first
        for q_block in range(q_lo, q_end):
            rows = q_block * BLOCK_M + offs_m
            row_in_range = rows < seq_len
            if CAUSAL:  # the Q block's last tile: the one holding its last query's key
                last_k_block = tl.minimum(n_k_blocks, ((q_block + 1) * BLOCK_M - 1) // BLOCK_N + 1) - 1
            else:
                last_k_block = n_k_blocks - 1
            # -- load the Q block, and its O, m_i and l_i so far (nothing to load at its first tile) from HBM --
            q = tl.load(q_head + rows[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                        mask=row_in_range[:, None], other=0.0)
            earlier = row_in_range & (k_block > 0)
            m_i = tl.load(M + row_head + rows, mask=earlier, other=float("-inf"))
            l_i = tl.load(L + row_head + rows, mask=earlier, other=0.0)
            o = tl.load(acc_head + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=earlier[:, None], other=0.0)
            if DOT_FP32:
                q = q.to(tl.float32)
            # -- compute qk: raw scores of this tile (the scale is folded in below) --
            qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
            keep = key_in_range[None, :]
            if CAUSAL:
                keep = keep & (rows[:, None] >= keys[None, :])
            qk = tl.where(keep, qk, float("-inf"))
            # -- update m_i and l_i (online softmax, log2 units) --
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_new = l_i * alpha + tl.sum(p, 1)
            # -- rescale O, then add P·V (O = (l_i·α·O + P·V) / l_new: Algorithm 1 keeps O normalized) --
            p = p.to(v.dtype)
            if DOT_FP32:
                p = p.to(tl.float32)
                v_dot = v.to(tl.float32)
            else:
                v_dot = v
            o = o * (l_i * alpha)[:, None]
            o = tl.dot(p, v_dot, o, input_precision=PRECISION)
            o = o / l_new[:, None]
            # -- write O, m_i and l_i back to HBM (at the Q block's last tile: O in the input dtype and the LSE) --
            last = k_block == last_k_block
            more = row_in_range & (k_block != last_k_block)
            done = row_in_range & last
            tl.store(M + row_head + rows, m_new, mask=more)
            tl.store(L + row_head + rows, l_new, mask=more)
            tl.store(acc_head + rows[:, None] * HEAD_DIM + offs_d[None, :], o, mask=more[:, None])
            tl.store(LSE + row_head + rows, (m_new + tl.math.log2(l_new)) * LN2_KERNEL, mask=done)
            tl.store(o_head + rows[:, None] * stride_on + offs_d[None, :] * stride_od,
                     o.to(O.dtype.element_ty), mask=done[:, None])
            if TRACE:
                # record the step: m, l, alpha of the block's rows, its O so far, and when the step ran
                program = off_bh.to(tl.int64) * n_q_blocks + q_block
                at = program * n_k_blocks + k_block
                stats = TRACE_STATS + at * (3 * BLOCK_M)
                tl.store(stats + offs_m, m_new)
                tl.store(stats + BLOCK_M + offs_m, l_new)
                tl.store(stats + 2 * BLOCK_M + offs_m, alpha)
                tl.store(TRACE_OUT + at * (BLOCK_M * HEAD_DIM) + offs_m[:, None] * HEAD_DIM + offs_d[None, :], o)
                tl.store(TRACE_ORDER + at, step)
            step += 1
            # the next K/V tile reads back what this step wrote: make the stores visible to the whole program
            tl.debug_barrier()


# -- configs --------------------------------------------------------------------------------------

# The interpreter costs about 10 ms per tile whatever its size, so it gets large tiles.
_INTERPRETER_CONFIG = FlashConfig(block_m=64, block_n=64, num_warps=4, num_stages=1)


def config_for_v1(head_dim: int, dtype: torch.dtype) -> FlashConfig:
    """Tiles for the FA1-order kernel: the K and V tiles, the Q block and O all sit on chip at once. Tuned on an
    H200 (perf/h200/fa1_tune.py, BENCHMARKS.md) over 64/128-row Q blocks, 32/64/128-key tiles, 4/8 warps and
    1-3 stages: 64×128 with 4 warps is fastest at head_dim 128 in 16 bits, 64×256 at head_dim 64 (as
    FlashAttention-1's own kernel walked 128- and 256-key tiles with 4 warps), 64×128 at 256; in fp32 32×32
    (larger tiles spill: 10x slower); stages change nothing (the K/V tile is loaded once per outer step)."""
    if INTERPRET:
        return _INTERPRETER_CONFIG
    dtype_bytes = torch.empty((), dtype=dtype).element_size()
    if dtype_bytes != 2:
        return FlashConfig(32, 32, 4, 1)
    return FlashConfig(64, 256 if head_dim <= 64 else 128, 4, 1)


# -- wrapper --------------------------------------------------------------------------------------

@dataclass
class _TraceBuffersV1:
    stats: torch.Tensor  # (B·H, n_q_blocks, n_k_blocks, 3, BLOCK_M) fp32: m (log2 units), l, alpha
    out: torch.Tensor    # (B·H, n_q_blocks, n_k_blocks, BLOCK_M, HEAD_DIM) fp32: O after the step
    order: torch.Tensor  # (B·H, n_q_blocks, n_k_blocks) int32: the program's step number; -1 never ran


def splits_for(q: torch.Tensor, config: FlashConfig) -> int:
    """The programs the kernel divides one (batch, head) into on q's device (costmodel.fa1_splits): 1 in the
    interpreter, else FlashAttention-1's heuristic with the GPU's SMs × costmodel.FA1_PROGRAMS_PER_SM slots."""
    if INTERPRET or q.device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    return costmodel.fa1_splits(q.shape[0] * q.shape[1], triton.cdiv(q.shape[2], config.block_m),
                                sms * costmodel.FA1_PROGRAMS_PER_SM)


def launch_flash_v1(q, k, v, causal: bool, sm_scale: float, config: FlashConfig,
                     trace: _TraceBuffersV1 | None = None, splits: int = 1):
    """The kernel's launch on checked inputs: (O, LSE). On a GPU whose shared memory a block is less than config's
    build needs, smaller tiles (kernels.fa2.smaller_tiles, runtime.fit_shared_memory); with a trace, whose buffers
    config's tiles shape, none."""
    if trace is not None or q.device.type != "cuda":
        return _launch_flash_v1(q, k, v, causal, sm_scale, config, trace, splits)
    key = _fit_key(q.device.index, q.dtype, q.shape[-1], causal)
    return fit_shared_memory(lambda c: _launch_flash_v1(q, k, v, causal, sm_scale, c, None, splits), config,
                             smaller_tiles, key, "the FA-1 order kernel")


def _fit_key(device_index, dtype, head_dim: int, causal: bool) -> tuple:
    """What, besides the config, decides the build whose tiles fit_shared_memory remembers (launch_flash_v1,
    tiles_for)."""
    return ("fa1", device_index, dtype, head_dim, causal)


def _launch_flash_v1(q, k, v, causal: bool, sm_scale: float, config: FlashConfig, trace, splits: int):
    batch, heads, seq_len, head_dim = q.shape  # (B, H, N, D)
    o = torch.empty_like(q, memory_format=torch.contiguous_format)  # (B, H, N, D)
    lse = torch.empty((batch, heads, seq_len), dtype=torch.float32, device=q.device)  # (B, H, N)
    o_acc = torch.empty((batch * heads, seq_len, head_dim), dtype=torch.float32, device=q.device)  # (B·H, N, D)
    m = torch.empty((batch * heads, seq_len), dtype=torch.float32, device=q.device)  # (B·H, N)
    l = torch.empty_like(m)  # (B·H, N)
    n_q_blocks = triton.cdiv(seq_len, config.block_m)
    n_k_blocks = triton.cdiv(seq_len, config.block_n)
    q_per_split = triton.cdiv(n_q_blocks, splits)
    splits = triton.cdiv(n_q_blocks, q_per_split)  # no program without a Q block
    dot_fp32, precision = dot_modes(q.dtype)
    with kernel_launch_lock():  # the interpreter runs one kernel at a time, process-wide
        _attn_fwd_fa1[(batch * heads, splits)](
            q, k, v, o, lse, o_acc, m, l,
            trace.stats if trace is not None else lse,
            trace.out if trace is not None else lse,
            trace.order if trace is not None else lse,
            sm_scale, seq_len, heads, n_q_blocks, n_k_blocks, q_per_split,
            *q.stride(), *k.stride(), *v.stride(), *o.stride(),
            HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
            CAUSAL=causal, DOT_FP32=dot_fp32, PRECISION=precision, TRACE=trace is not None,
            num_warps=config.num_warps, num_stages=config.num_stages,
        )
    return o, lse


def flash_attention_v1(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                       sm_scale: float | None = None, return_lse: bool = False,
                       config: FlashConfig | None = None, splits: int | None = None,
                       ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention output O = softmax(sm_scale · Q Kᵀ [causal mask]) V in FlashAttention-1's loop order.

    Same contract as kernels.fa2.flash_attention: q, k, v (batch, heads, seq_len, head_dim) in fp16, bf16
    or fp32; head_dim in 16 … 256; any seq_len ≥ 1. Returns O in the input dtype (and with return_lse=True
    the fp32 natural-log row log-sum-exp (batch, heads, seq_len)). Beyond O and the LSE it allocates the
    fp32 running O, m and l in HBM (costmodel.fa1_extra_bytes). splits: the programs one (batch, head) is
    divided into along its Q blocks (None: FlashAttention-1's heuristic, `splits_for`).
    """
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, kernel="fa1")
    config = config or config_for_v1(q.shape[-1], q.dtype)
    costmodel.check_tiles(config.block_m, config.block_n)
    if splits is None:
        splits = splits_for(q, config)
    elif isinstance(splits, bool) or not isinstance(splits, int) or splits < 1:
        raise ValueError(f"splits must be a positive int or None, got {splits!r}")
    o, lse = launch_flash_v1(q, k, v, causal, sm_scale, config, splits=splits)
    return (o, lse) if return_lse else o


def flash_attention_v1_traced(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, block_m: int,
                              block_n: int, sm_scale: float | None = None,
                              ) -> tuple[torch.Tensor, torch.Tensor, _TraceBuffersV1]:
    """Run the FA1-order kernel in trace mode. Returns (O, LSE, trace): stats (B·H, n_q, n_k, 3, block_m)
    with m in natural-log units, l, alpha (NaN where no step ran), out (B·H, n_q, n_k, block_m, head_dim)
    and order (B·H, n_q, n_k) int32, the step number at which the program ran (q block, k block)."""
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, kernel="fa1")
    costmodel.check_tiles(block_m, block_n)
    batch, heads, seq_len, head_dim = q.shape
    n_q, n_k = triton.cdiv(seq_len, block_m), triton.cdiv(seq_len, block_n)
    bh = batch * heads
    trace = _TraceBuffersV1(
        stats=torch.full((bh, n_q, n_k, 3, block_m), float("nan"), dtype=torch.float32, device=q.device),
        out=torch.full((bh, n_q, n_k, block_m, head_dim), float("nan"), dtype=torch.float32, device=q.device),
        order=torch.full((bh, n_q, n_k), -1, dtype=torch.int32, device=q.device))
    config = FlashConfig(block_m, block_n, config_for_v1(head_dim, q.dtype).num_warps, 1)
    o, lse = launch_flash_v1(q, k, v, causal, sm_scale, config, trace)
    trace.stats[:, :, :, 0] *= LN2  # the kernel keeps m in log2 units
    return o, lse, trace


# -- what the house needs of this kernel (its spec in kernels/specs.py names these) ----------------------------

def tiles_for(shape) -> tuple[int, int]:
    """(block_m, block_n) the kernel runs a shape (costmodel.Shape) with."""
    from kernels.inputs import DTYPES_BY_NAME
    dtype = DTYPES_BY_NAME[shape.dtype]
    config = config_for_v1(shape.head_dim, dtype)
    if not INTERPRET and torch.cuda.is_available():  # smaller tiles where this GPU's shared memory took them
        config = fitted_config(_fit_key(torch.cuda.current_device(), dtype, shape.head_dim, shape.causal), config)
    return config.block_m, config.block_n


def shipped_launches():
    """Every configuration the kernel ships, as (label, targets, launch) for the ahead-of-time compile check."""
    from kernels.inputs import example_qkv
    launches = []
    for head_dim in costmodel.HEAD_DIMS:
        for dtype in (torch.bfloat16, torch.float32):
            for causal in (False, True):
                config = config_for_v1(head_dim, dtype)
                label = (f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} "
                         f"{config.block_m}x{config.block_n} w{config.num_warps}")
                q, k, v = example_qkv(head_dim, dtype)
                launches.append((label, ("sm_90", "sm_80"),
                                 lambda q=q, k=k, v=v, c=causal, g=config: launch_flash_v1(q, k, v, c, 0.125, g)))
    return launches
