"""FlashAttention backward, FlashAttention-3 style, in Gluon for Hopper (sm_90): a warp-specialized kernel.

The teaching backward (kernels/fa2_bwd.py) runs three `tl` kernels: Δ = rowsum(dO ∘ O), then one program per K/V
block for dK and dV, then one program per Q block for dQ, which recomputes S and P a second time (7 matrix products
a tile where the FLOP count has 5). On the H200 it reaches 0.66–0.88× cuDNN's backward (BENCHMARKS.md §1d). This
kernel takes FA-3's backward design (Shah et al. 2024, `hopper/mainloop_bwd_sm90_tma_gmma_ws.hpp`), in our words:

- one program per block of 128 keys of one (batch, head). Its K and V tiles are loaded once by TMA and stay in
  shared memory while the program walks every query block that sees those keys (under causal, from the diagonal on);
- a producer warp streams each query block's Q and dO tiles, and its rows' LSE (times log2 e) and Δ, through a ring
  of shared-memory slots (TMA copies, an mbarrier pair a slot, as in the forward);
- two consumer warpgroups own 64 keys each. Per query block each recomputes its Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (two async
  wgmmas issued together), Pᵀ = exp2(Sᵀ·scale·log2 e − LSE·log2 e), dSᵀ = Pᵀ ∘ (dPᵀ − Δ)·scale, and adds dV += Pᵀ dO
  and dK += dSᵀ Q with Pᵀ and dSᵀ fed to the tensor cores from registers. dK and dV stay in registers (64 × head_dim
  fp32 each) for the whole walk and are written once, by TMA. At head_dim 64 a consumer also holds its K and V
  rows in registers, the A operand of Sᵀ and dPᵀ, loaded once (1.04–1.11× reading them from shared memory each
  query block; at 128 they would spill);
- dQ is added from here, not by a pass of its own (5 products a tile, as counted). Each consumer writes its dSᵀ to
  shared memory (double-buffered) and multiplies it by K: as shipped (`dq_split` "cols", FA-3's way) the two meet
  at a hardware named barrier and each takes all of dS (64 query rows × 128 keys) times its half of K's columns;
  with "keys" (a candidate at 64) each takes its own 64 keys' dS times its own K rows, no barrier, twice the adds. The
  product goes to shared memory and the copy engine adds it into an fp32 dQ accumulator in global memory (a TMA
  reduce, `UTMAREDG.4D.ADD`, as FA-3 does; Gluon's Python API lacks it: kernels/gluon_compat.tma_reduce_add): the
  warpgroup goes on to the next query block while it is added. Adding from the registers by vector atomics
  (`RED.ADD.F32x2`) measured 1.22–1.42× slower on the H200, and a warp of its own adding from shared memory by
  16-byte atomics 0.59–1.07× (BENCHMARKS.md §1d). The accumulator is cast to the input dtype after the kernel (dS
  carries the softmax scale, so dQ = dS K as it stands).

The reduce makes dQ's low bits depend on the order the programs add in (the teaching backward's dQ pass is
deterministic). Memory beyond the inputs and gradients: Δ and the LSE in rows padded to whole query blocks, and the
fp32 dQ accumulator (twice dQ's bytes), freed when the backward returns.

Ragged lengths: K, V, Q and dO rows past seq_len load as zeros (TMA bounds). A query row past seq_len has LSE = +inf
(written so by `_bwd_rows`), so its P is 0. A key row past seq_len is masked to P = 0 (its dK and dV rows are clipped
by the store anyway, but exp(0 − LSE) overflows where an LSE is below −88). Causal: keys after a query get P = 0 in
the query blocks that cross a warpgroup's keys; blocks wholly before the program's keys are skipped, and a group of
heads takes its key blocks the longest first (lpt, as the forward).

Runs on 16-bit inputs (fp16, bf16), head_dim 64 and 128, q, k, v of one shape; anything else (head_dim 256, whose dK
and dV alone would fill a warpgroup's registers; fp32; another GPU; the interpreter) has `unavailable_reason` say
why; `backward` (kernel "fa3"'s backward pass) runs the teaching backward there. Checked against float64 on the
H200 (tests/test_fa3_bwd.py) and timed there beside cuDNN (perf/h200/backward_speed.py --only fa3; BENCHMARKS.md
§1d).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels.runtime import AOT, CachedLaunch, kernel_launch_lock, tma_ready  # first: it picks the backend
import torch
import triton
import triton.language as tl

import costmodel
from kernels import gluon_compat as compat
from kernels.gluon_compat import fence_async_shared, gl, gluon, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from kernels.fa2 import LOG2_E_KERNEL
from kernels.ptx import TURN_BARRIER_ID, named_barrier

SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
WG_KEYS = 64      # keys per consumer warpgroup (wgmma's M)
NUM_CONSUMERS = 2
BLOCK_N = WG_KEYS * NUM_CONSUMERS  # keys per program
BLOCK_M = 64      # query rows per step of the walk (Sᵀ: 64 keys × 64 queries a warpgroup)

if gluon is not None:
    _jit = gluon.jit
    _LOG2_E = gl.constexpr(costmodel.LOG2_E)
    _DS_BARRIER = gl.constexpr(TURN_BARRIER_ID.value)  # the two consumers meet here once a query block
    _BLOCK_N, _WG_KEYS, _NUM_CONSUMERS = gl.constexpr(BLOCK_N), gl.constexpr(WG_KEYS), gl.constexpr(NUM_CONSUMERS)
    _BLOCK_M = gl.constexpr(BLOCK_M)
else:  # no Gluon in this Triton: the functions below stay plain Python and are never launched
    def _jit(fn=None, **_kw):
        return fn if fn is not None else (lambda f: f)
    _LOG2_E = _DS_BARRIER = _BLOCK_N = _WG_KEYS = _NUM_CONSUMERS = _BLOCK_M = None


@dataclass(frozen=True)
class Fa3BwdConfig:
    stages: int         # Q/dO ring slots
    dq_split: str       # how the two consumers share dQ = dS K: "cols" (each multiplies all of dS by its half of
    #                     K's columns: the consumers meet at a named barrier once a block, FA-3's way), "keys" (its
    #                     own keys' dS by its own keys' K: no barrier, twice the adds, each over all of dQ's block)
    consumer_regs: int = 240  # registers per thread of a consumer warpgroup (setmaxnreg)
    producer_regs: int = 24   # registers per thread of the producer warp
    kv_regs: bool = False     # a consumer's K and V rows held in registers, the A operand of Sᵀ = K Qᵀ and
    #                           dPᵀ = V dOᵀ (those wgmmas then read only Qᵀ and dOᵀ from shared memory)

    def __post_init__(self):
        if self.dq_split not in ("cols", "keys"):
            raise ValueError(f"Fa3BwdConfig: dq_split is 'cols' or 'keys'; got {self.dq_split!r}")

    @property
    def label(self) -> str:
        return (f"2×64 keys, {self.stages} slots, dQ by {self.dq_split}, regs {self.consumer_regs}/"
                f"{self.producer_regs}" + (", K and V in registers" if self.kv_regs else ""))

    def mangle(self) -> str:
        return (f"Fa3BwdConfig_s{self.stages}_{self.dq_split}_r{self.consumer_regs}_{self.producer_regs}"
                + ("_kvregs" if self.kv_regs else ""))

    __repr__ = mangle  # Triton 3.6 mangles a constexpr argument by its repr

    num_warps = 4  # the default partition (consumer 0); the other consumer and the producer are workers

    @property
    def maxnreg(self) -> int:
        """The kernel-wide register cap: 64K registers over 12 warps (two consumer warpgroups, the producer's
        padded to a warpgroup)."""
        return 65536 // (32 * 12) // 8 * 8

    def dq_part(self, head_dim: int) -> tuple[int, int]:
        """The block of dQ a consumer adds a query block: (rows, columns)."""
        return BLOCK_M, head_dim // 2 if self.dq_split == "cols" else head_dim

    def smem_bytes(self, head_dim: int) -> int:
        """K and V tiles, the Q/dO ring, two dSᵀ buffers (16-bit), the ring's LSE and Δ rows and each consumer's dQ
        part for the reduce (fp32)."""
        rows, cols = self.dq_part(head_dim)
        return 2 * (2 * BLOCK_N * head_dim + 2 * self.stages * BLOCK_M * head_dim + 2 * BLOCK_N * BLOCK_M) \
            + 4 * (2 * self.stages * BLOCK_M + NUM_CONSUMERS * rows * cols)


# Measured on the H200 (2026-12-05, B2 H16 bf16, 4K–16K; BENCHMARKS.md §1d): with dQ added by the TMA reduce,
# head_dim 128 0.97–1.07× cuDNN's backward. dQ by columns won at both head_dims (at 64 1.00–1.04× dQ by keys in one
# run, at 128 keys lost 0.70–0.76× with the atomics). At 64, K and V held in registers as the A operand of Sᵀ and dPᵀ
# measured 1.04–1.11× the same kernel with them read from shared memory (H100, 2026-12-05, 8K/16K causal and not:
# 1.04–1.10× cuDNN's backward in the same run). Registers a consumer thread at 128: dK 64 + dV 64 + Sᵀ 32 + dPᵀ 32 +
# its dQ half 32 (K and V in registers there spill 344–368 bytes). Shared memory: 192 KB at 128, 128 KB at 64.
SHIPPED: dict[int, Fa3BwdConfig] = {
    64: Fa3BwdConfig(2, "cols", kv_regs=True),
    128: Fa3BwdConfig(2, "cols"),
}

# Beside the shipped configurations, timed in one run (perf/h200/backward_speed.py --only fa3), by head_dim: at 64,
# K and V read from shared memory (shipped until 2026-12-05: 0.90–0.96× K and V in registers) and dQ by keys (0.93–
# 0.98× dQ by columns, both read from shared memory); a third ring slot measured 0.98–1.01× at 64 and spilled at 128
# (BENCHMARKS.md, Tried and lost)
CANDIDATES: dict[int, dict[str, Fa3BwdConfig]] = {
    64: {"K, V from shared memory": Fa3BwdConfig(2, "cols"), "dQ by keys": Fa3BwdConfig(2, "keys")},
    128: {},
}


# -- the producer: K and V once, then Q and dO block after block -------------------------------------------------

@_jit
def _producer(q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem, do_smem, lse_smem,
              delta_smem, kv_ready, q_ready, q_empty, off_b, off_h, n0, m_begin, n_iter, CFG: gl.constexpr):
    STAGES: gl.constexpr = CFG.stages
    # -- load K and V: this program's 128 keys, one 64-row half per consumer --
    mbarrier.expect(kv_ready.index(0), 2 * k_desc.block_type.nbytes + 2 * v_desc.block_type.nbytes)
    for h in gl.static_range(_NUM_CONSUMERS):
        tma.async_copy_global_to_shared(k_desc, [off_b, off_h, n0 + h * _WG_KEYS, 0], kv_ready.index(0),
                                        k_smem.index(h))
        tma.async_copy_global_to_shared(v_desc, [off_b, off_h, n0 + h * _WG_KEYS, 0], kv_ready.index(0),
                                        v_smem.index(h))
    # -- stream Q, dO and the rows' LSE and Δ: a slot is refilled once both consumers freed it --
    for it in range(n_iter):
        slot = it % STAGES
        phase = (it // STAGES) & 1
        mbarrier.wait(q_empty.index(slot), phase ^ 1)  # a fresh mbarrier counts its phase before 0 as complete
        mbarrier.expect(q_ready.index(slot), q_desc.block_type.nbytes + do_desc.block_type.nbytes +
                        lse_desc.block_type.nbytes + delta_desc.block_type.nbytes)
        m0 = m_begin + it * _BLOCK_M
        tma.async_copy_global_to_shared(q_desc, [off_b, off_h, m0, 0], q_ready.index(slot), q_smem.index(slot))
        tma.async_copy_global_to_shared(do_desc, [off_b, off_h, m0, 0], q_ready.index(slot), do_smem.index(slot))
        tma.async_copy_global_to_shared(lse_desc, [off_b, off_h, m0], q_ready.index(slot), lse_smem.index(slot))
        tma.async_copy_global_to_shared(delta_desc, [off_b, off_h, m0], q_ready.index(slot), delta_smem.index(slot))


# -- a consumer: one warpgroup, 64 keys --------------------------------------------------------------------------

@_jit
def _consumer(W: gl.constexpr, work, CFG: gl.constexpr, CAUSAL: gl.constexpr):
    dk_desc, dv_desc, dq_desc, k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, ds_smem, dq_smem, kv_ready, \
        q_ready, q_empty, sm_scale, seq_len, off_b, off_h, n0, m_begin, n_iter = work
    STAGES: gl.constexpr = CFG.stages
    HEAD_DIM: gl.constexpr = dk_desc.block_type.shape[3]
    dtype: gl.constexpr = dk_desc.dtype
    SPLIT: gl.constexpr = CFG.dq_split
    DQ_D: gl.constexpr = HEAD_DIM // 2 if SPLIT == "cols" else HEAD_DIM  # our block of dQ: 64 rows × DQ_D
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, _BLOCK_M, 16])  # Sᵀ, dPᵀ: keys × queries
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, HEAD_DIM, 16])  # dK, dV: keys × head_dim
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, DQ_D, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)  # Pᵀ, dSᵀ from regs
    kv_op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)  # K, V (kv_regs)
    key_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    query_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    key0 = n0 + W * _WG_KEYS
    keys = key0 + gl.arange(0, _WG_KEYS, key_layout)
    dk = gl.zeros([_WG_KEYS, HEAD_DIM], gl.float32, kv_layout)
    dv = gl.zeros([_WG_KEYS, HEAD_DIM], gl.float32, kv_layout)
    s_init = gl.zeros([_WG_KEYS, _BLOCK_M], gl.float32, s_layout)  # ignored: use_acc=False
    dq_init = gl.zeros([_BLOCK_M, DQ_D], gl.float32, dq_layout)
    dq_col0: gl.constexpr = W * DQ_D if SPLIT == "cols" else 0
    k_w = k_smem.index(W).reshape([_WG_KEYS, HEAD_DIM])
    v_w = v_smem.index(W).reshape([_WG_KEYS, HEAD_DIM])
    k_0 = k_smem.index(0).reshape([_WG_KEYS, HEAD_DIM])  # dQ's B operand, a half of the keys at a time
    k_1 = k_smem.index(1).reshape([_WG_KEYS, HEAD_DIM])
    if SPLIT == "cols":  # our half of the columns
        k_0 = k_0.slice(dq_col0, DQ_D, dim=1)
        k_1 = k_1.slice(dq_col0, DQ_D, dim=1)
    dq_stage = dq_smem.index(W)
    mbarrier.wait(kv_ready.index(0), 0)
    if CFG.kv_regs:  # our K and V rows, once, as the A operand of every Sᵀ and dPᵀ
        k_a = k_w.load(kv_op_layout)
        v_a = v_w.load(kv_op_layout)
    else:
        k_a = k_w
        v_a = v_w

    for it in range(n_iter):
        slot = it % STAGES
        phase = (it // STAGES) & 1
        m0 = m_begin + it * _BLOCK_M
        mbarrier.wait(q_ready.index(slot), phase)
        q = q_smem.index(slot).reshape([_BLOCK_M, HEAD_DIM])
        do = do_smem.index(slot).reshape([_BLOCK_M, HEAD_DIM])
        # -- recompute Sᵀ = K Qᵀ and dPᵀ = V dOᵀ, issued together --
        s_tok = warpgroup_mma(k_a, q.permute((1, 0)), s_init, use_acc=False, is_async=True)
        dp_tok = warpgroup_mma(v_a, do.permute((1, 0)), s_init, use_acc=False, is_async=True)
        # the block's LSE (log2 units; +inf past seq_len: P = 0 there), from the slot, while Sᵀ is computed
        lse2 = lse_smem.index(slot).reshape([_BLOCK_M]).load(query_layout)
        if CFG.kv_regs:  # registers an async wgmma reads stay put until it is waited for
            s, k_a = warpgroup_mma_wait(1, deps=(s_tok, k_a))
        else:
            s = warpgroup_mma_wait(1, deps=(s_tok,))
        # -- Pᵀ = exp(S − LSE), the causal mask on blocks that cross our keys --
        p = gl.exp2(s * (sm_scale * _LOG2_E) - lse2[None, :])
        if CAUSAL:
            if m0 < key0 + _WG_KEYS:
                queries = m0 + gl.arange(0, _BLOCK_M, query_layout)
                p = gl.where(queries[None, :] >= keys[:, None], p, 0.0)
        elif key0 + _WG_KEYS > seq_len:  # keys past seq_len (zero rows): P = 0, not exp(−LSE), which overflows
            p = gl.where((keys < seq_len)[:, None], p, 0.0)  # for a row whose LSE is below −88
        delta = delta_smem.index(slot).reshape([_BLOCK_M]).load(query_layout)
        if CFG.kv_regs:
            dp, v_a = warpgroup_mma_wait(0, deps=(dp_tok, v_a))
        else:
            dp = warpgroup_mma_wait(0, deps=(dp_tok,))
        # -- dSᵀ = Pᵀ ∘ (dPᵀ − Δ), with the softmax scale (so dK = dSᵀ Q and dQ = dS K as they are) --
        ds = p * (dp - delta[None, :]) * sm_scale
        p_op = gl.convert_layout(p.to(dtype), op_layout)
        ds16 = ds.to(dtype)
        ds_op = gl.convert_layout(ds16, op_layout)
        # -- dV += Pᵀ dO, dK += dSᵀ Q: async, while dSᵀ goes to shared memory for dQ --
        dv_tok = warpgroup_mma(p_op, do, dv, is_async=True)
        dk_tok = warpgroup_mma(ds_op, q, dk, is_async=True)
        ds_buf = ds_smem.index(it % 2)  # (128 keys, 64 queries)
        ds_buf.slice(W * _WG_KEYS, _WG_KEYS, dim=0).store(ds16)
        fence_async_shared()
        if SPLIT == "keys":
            # -- dQ (our part) = dS K over our 64 keys: all of the block's columns --
            ds_w = ds_buf.slice(W * _WG_KEYS, _WG_KEYS, dim=0).permute((1, 0))  # (64 queries, our 64 keys)
            dq_tok = warpgroup_mma(ds_w, k_w, dq_init, use_acc=False, is_async=True)
        else:
            named_barrier(False, _DS_BARRIER)  # both halves of dSᵀ written (and the other buffer read by both)
            # -- dQ (our part) = dS K over all 128 keys (two products, a half of the keys each): our half of the
            # columns --
            ds_0 = ds_buf.slice(0, _WG_KEYS, dim=0).permute((1, 0))  # (64 queries, 64 keys)
            ds_1 = ds_buf.slice(_WG_KEYS, _WG_KEYS, dim=0).permute((1, 0))
            dq_tok = warpgroup_mma(ds_0, k_0, dq_init, use_acc=False, is_async=True)
            dq_tok = warpgroup_mma(ds_1, k_1, dq_tok, is_async=True)
        dv, dk, dq, p_op, ds_op = warpgroup_mma_wait(0, deps=(dv_tok, dk_tok, dq_tok, p_op, ds_op))
        mbarrier.arrive(q_empty.index(slot), count=1)  # Q and dO read: the producer may refill the slot
        # -- stage our part of dQ (once the copy engine has read the previous block's) and have the copy engine add
        # it to the accumulator (rows padded to whole blocks: nothing clipped) --
        tma.store_wait(0)
        dq_stage.reshape([_BLOCK_M, DQ_D]).store(dq)
        fence_async_shared()
        compat.tma_reduce_add(dq_desc, [off_b, off_h, m0, dq_col0], dq_stage)

    # -- write dK and dV once, staged in our halves of K's and V's tiles (once the other consumer is done reading
    # them: its dQ reads our K, but with dQ by keys) --
    if SPLIT != "keys":
        named_barrier(False, _DS_BARRIER)
    dk_smem = k_smem.index(W)
    dv_smem = v_smem.index(W)
    dk_smem.reshape([_WG_KEYS, HEAD_DIM]).store(dk.to(dtype))
    dv_smem.reshape([_WG_KEYS, HEAD_DIM]).store(dv.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(dk_desc, [off_b, off_h, key0, 0], dk_smem)  # rows past seq_len clipped
    tma.async_copy_shared_to_global(dv_desc, [off_b, off_h, key0, 0], dv_smem)
    tma.store_wait(0)


# -- the kernel ----------------------------------------------------------------------------------------------------

@_jit(do_not_specialize=["seq_len", "heads", "heads_per_group"])
def _fa3_bwd(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, lse_desc, delta_desc, dq_desc, sm_scale, seq_len,
             heads, heads_per_group, CFG: gl.constexpr, CAUSAL: gl.constexpr):
    # Q, dO: 4-D TMA descriptors over (B, H, N, D), boxes [1, 1, 64, D]; K, V, dK, dV boxes [1, 1, 64, D].
    # lse, delta: 3-D over (B, H, rows) fp32, boxes [1, 1, 64]: LSE·log2 e (+inf past seq_len) and Δ (0 past it);
    # dq: 4-D over the fp32 dQ accumulator (B, H, rows, D), zeroed, its box a consumer's part (Fa3BwdConfig.dq_part).
    # rows = N rounded up to whole query blocks.
    # One program per (block of 128 keys, batch·head). Causal: key block 0 sees the most query blocks; the programs
    # of a group of heads_per_group heads (whose Q and dO fit in L2 together) start key block by key block, the
    # longest first (lpt, as the forward); not causal, one head after another.
    STAGES: gl.constexpr = CFG.stages
    if CAUSAL:
        n_tiles = gl.num_programs(0)
        pid = gl.program_id(1) * n_tiles + gl.program_id(0)
        first_bh = pid // (heads_per_group * n_tiles) * heads_per_group
        group = gl.minimum(heads_per_group, gl.num_programs(1) - first_bh)  # the last group may be short
        rank = pid - first_bh * n_tiles
        tile = rank // group
        off_bh = first_bh + rank % group
    else:
        tile = gl.program_id(0)
        off_bh = gl.program_id(1)
    n0 = tile * _BLOCK_N
    off_b = off_bh // heads
    off_h = off_bh % heads
    if CAUSAL:  # queries before n0 see none of our keys
        m_begin = n0 // _BLOCK_M * _BLOCK_M
    else:
        m_begin = n0 * 0
    n_iter = gl.cdiv(seq_len, _BLOCK_M) - m_begin // _BLOCK_M

    dtype: gl.constexpr = q_desc.dtype
    k_smem = gl.allocate_shared_memory(dtype, [_NUM_CONSUMERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [_NUM_CONSUMERS] + v_desc.block_type.shape, v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES] + q_desc.block_type.shape, q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES] + do_desc.block_type.shape, do_desc.layout)
    lse_smem = gl.allocate_shared_memory(gl.float32, [STAGES] + lse_desc.block_type.shape, lse_desc.layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [STAGES] + delta_desc.block_type.shape, delta_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([_BLOCK_N, _BLOCK_M], dtype)
    ds_smem = gl.allocate_shared_memory(dtype, [2, _BLOCK_N, _BLOCK_M], ds_layout)  # dSᵀ of two query blocks
    dq_smem = gl.allocate_shared_memory(gl.float32, [_NUM_CONSUMERS] + dq_desc.block_type.shape, dq_desc.layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready.index(0), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=_NUM_CONSUMERS)  # freed once both consumers arrived

    work = (dk_desc, dv_desc, dq_desc, k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, ds_smem, dq_smem,
            kv_ready, q_ready, q_empty, sm_scale, seq_len, off_b, off_h, n0, m_begin, n_iter)
    gl.warp_specialize([(_consumer, (0, work, CFG, CAUSAL)), (_consumer, (1, work, CFG, CAUSAL)),
                        (_producer, (q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem, q_smem,
                                     do_smem, lse_smem, delta_smem, kv_ready, q_ready, q_empty, off_b, off_h, n0,
                                     m_begin, n_iter, CFG))],
                       [4, 1], [CFG.consumer_regs, CFG.producer_regs])


# -- before the kernel: Δ, and the LSE in log2 units, in rows padded to whole query blocks --------------------------

@triton.jit(do_not_specialize=["seq_len", "rows_p"])
def _bwd_rows(O, DO, LSE, DELTA_P, LSE2_P, seq_len, rows_p, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    # O, dO: contiguous (B·H, N, D); LSE: (B·H, N) natural log; DELTA_P, LSE2_P: (B·H, rows_p) fp32
    off_bh = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < seq_len
    # -- compute Δ = rowsum(dO ∘ O) (0 past seq_len) and LSE·log2 e (+inf past seq_len: P = 0 there) --
    ptrs = off_bh * seq_len * HEAD_DIM + offs[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    o = tl.load(O + ptrs, mask=inside[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=inside[:, None], other=0.0).to(tl.float32)
    lse = tl.load(LSE + off_bh * seq_len + offs, mask=inside, other=float("inf"))
    tl.store(DELTA_P + off_bh * rows_p + offs, tl.sum(o * do, 1), mask=offs < rows_p)
    tl.store(LSE2_P + off_bh * rows_p + offs, lse * LOG2_E_KERNEL, mask=offs < rows_p)


# a short backward is bound by the host: launch without the JIT's dispatch once a key's kernel is compiled
_ROWS_LAUNCH, _BWD_LAUNCH = CachedLaunch(_bwd_rows), CachedLaunch(_fa3_bwd)


# -- availability and the wrapper ----------------------------------------------------------------------------------

def unavailable_reason(q: torch.Tensor, k: torch.Tensor | None = None, v: torch.Tensor | None = None) -> str | None:
    """None when this backward runs these inputs here; otherwise why not, in one sentence: its own limits (head_dim,
    one shape, the grid), then the forward kernel's (kernels.fa3.v3_unavailable_reason: Gluon, dtype, a Hopper GPU;
    ahead-of-time mode compiles it)."""
    from kernels.fa3 import v3_unavailable_reason
    if q.dim() != 4 or q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        return (f"the FA-3 style backward supports head_dim 64 and 128, not {q.shape[-1]} (at 256 dK and dV alone "
                f"would fill a warpgroup's registers)")
    if any(t is not None and t.shape != q.shape for t in (k, v)):
        return "the FA-3 style backward takes q, k and v of one shape (no grouped K/V heads, no q_len ≠ kv_len)"
    if q.shape[0] * q.shape[1] > 65535:
        return "the FA-3 style backward's grid takes at most 65535 batch × heads"
    reason = v3_unavailable_reason(q.device, q.dtype)
    if AOT and reason is not None and not (gluon is None or compat.GLUON_IMPORT_ERROR or q.dtype not in
                                           SUPPORTED_DTYPES):
        return None  # compiled ahead of time, launched nowhere
    return reason


def launch_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                    do: torch.Tensor, causal: bool, sm_scale: float, config: Fa3BwdConfig | None = None,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) of O = attention(q, k, v) for the upstream gradient dO, from the forward's O and LSE (natural log,
    fp32, (B, H, N)), as kernels.fa2_bwd.launch_backward takes them. Raises ValueError with unavailable_reason's
    sentence where this kernel cannot run them."""
    reason = unavailable_reason(q, k, v)
    if reason is not None:
        raise ValueError(reason)
    batch, heads, seq_len, head_dim = q.shape
    config = config or SHIPPED[head_dim]
    sm_scale = float(sm_scale)  # an int would compile another kernel under the same launch key
    q, k, v = (tma_ready(t) for t in (q, k, v))
    o, do = o.contiguous(), tma_ready(do.contiguous().to(q.dtype))
    lse = lse.contiguous()
    dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (k, v))
    bh = batch * heads
    rows = triton.cdiv(seq_len, BLOCK_M) * BLOCK_M
    delta, lse2 = (torch.empty((batch, heads, rows), dtype=torch.float32, device=q.device) for _ in range(2))
    dq_acc = torch.zeros((batch, heads, rows, head_dim), dtype=torch.float32, device=q.device)
    q_desc, do_desc = (compat.make_descriptor(t, [1, 1, BLOCK_M, head_dim]) for t in (q, do))
    k_desc, v_desc, dk_desc, dv_desc = (compat.make_descriptor(t, [1, 1, WG_KEYS, head_dim]) for t in (k, v, dk, dv))
    lse_desc, delta_desc = (compat.make_descriptor(t, [1, 1, BLOCK_M]) for t in (lse2, delta))
    dq_desc = compat.make_descriptor(dq_acc, [1, 1, *config.dq_part(head_dim)])
    group = costmodel.lpt_heads_per_group(bh, seq_len, head_dim, q.element_size()) if causal else 1
    # the keys fix the JIT's specialization: every int is do_not_specialize, the descriptors' type is (dtype, box)
    with kernel_launch_lock():
        _ROWS_LAUNCH((q.dtype, o.dtype, head_dim), (rows // BLOCK_M, bh), None,
                     (o, do, lse, delta, lse2, seq_len, rows), dict(HEAD_DIM=head_dim, BLOCK=BLOCK_M))
        _BWD_LAUNCH((q.dtype, head_dim, config, causal), (triton.cdiv(seq_len, BLOCK_N), bh), None,
                    (q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, lse_desc, delta_desc, dq_desc, sm_scale,
                     seq_len, heads, group),
                    dict(CFG=config, CAUSAL=causal, num_warps=config.num_warps, maxnreg=config.maxnreg))
    dq = dq_acc[:, :, :seq_len].to(q.dtype)
    return dq, dk, dv


def backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, do: torch.Tensor,
             causal: bool, sm_scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Kernel "fa3"'s backward pass (its spec's `backward`, which kernels/autograd.py runs): this kernel where it runs
    the inputs, the teaching backward (kernels/fa2_bwd.py) where it does not (head_dim 256, for one)."""
    if unavailable_reason(q, k, v) is None:
        return launch_backward(q, k, v, o, lse, do, causal, sm_scale)
    from kernels.fa2_bwd import launch_backward as teaching
    return teaching(q, k, v, o, lse, do, causal, sm_scale)


def shipped_launches(subset: str = "all"):
    """Each shipped configuration, fp16 and bf16, causal and not, as (label, targets, launch) for the ahead-of-time
    compile check (Hopper only: wgmma), in every subset but "candidates" (8 builds of a few seconds: CI's
    "representative" takes them all); "candidates": CANDIDATES, bf16, causal and not."""
    from kernels.inputs import example_qkv
    if subset not in ("all", "representative", "candidates"):
        raise ValueError(f"subset must be 'all', 'representative' or 'candidates', got {subset!r}")
    launches = []
    if subset == "candidates":
        rows = [(d, f"candidate {name}: ", config, (torch.bfloat16,)) for d, configs in sorted(CANDIDATES.items())
                for name, config in configs.items()]
    else:
        rows = [(d, "", config, SUPPORTED_DTYPES) for d, config in sorted(SHIPPED.items())]
    for head_dim, where, config, dtypes in rows:
        for dtype in dtypes:
            for causal in (False, True):
                q, k, v = example_qkv(head_dim, dtype, seq_len=1000)
                lse = torch.zeros(q.shape[:3], dtype=torch.float32)
                launches.append((f"fa3 backward {where}D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} "
                                 f"{config.label}", ("sm_90",),
                                 lambda q=q, k=k, v=v, lse=lse, c=causal, g=config:
                                 launch_backward(q, k, v, q, lse, q, c, 0.125, g)))
    return launches
