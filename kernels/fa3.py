"""FlashAttention forward, FlashAttention-3 style, in Gluon for Hopper (sm_90): a warp-specialized kernel.

The teaching kernel (kernels/fa2.py) is one program per query block whose warps all do everything in turn:
wait for a K tile, multiply, softmax, multiply, wait again. On Hopper the tensor cores (async wgmma) and the copy
engine (TMA) run on their own, so FA-3 (Shah et al. 2024) splits the work between warps instead:

- a producer warp only issues TMA copies of the K and V tiles into a ring of shared-memory slots, each slot guarded
  by two mbarriers ("ready": the copy landed; "empty": every consumer is done with it);
- two consumer warpgroups (4 warps each; the count is a config, one for the ablation's step without ping-pong) own
  a query block of BLOCK_M rows each and do the math of the teaching kernel on it, reading every K/V tile the
  producer brings;
- ping-pong: the consumers take turns at the tensor cores. A consumer waits for its turn, issues its wgmma, passes
  the turn on, then runs its softmax while the other consumer's wgmma keeps the tensor cores busy. The turn is a
  hardware named barrier as in FA-3 (`bar.sync` to wait, `bar.arrive` to pass it on: one line of PTX each, since
  Gluon has no API for them; `named_turns`), or an mbarrier per consumer.
- softmax overlap inside a consumer: S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} are issued together, asynchronously;
  the consumer waits only for S_j, runs tile j's softmax while the tensor cores finish P_{j-1}·V_{j-1}, then waits
  for that, rescales O and keeps P_j in registers for the next round.
- the paired ring (`kv_paired`): entry j holds K_j and V_{j-1}, exactly what a consumer's round j reads, so a round
  waits on one mbarrier and frees one (instead of two and two, each free a partition-wide bar.sync).
- the conditional rescale (`lazy_rescale`, FlashAttention-4's): a row keeps its running max until a new score
  exceeds it by more than 2^8, so P stays ≤ 256, and a warp skips O's 64 multiplies per tile unless one of its rows
  moved (a warp vote, then a branch; in PTX, as Gluon has no warp-level branch). On most tiles nothing moves.
- the causal schedule: a program's work grows with its query block's index, so the last blocks are launched first
  and the light ones fill the tail: one head at a time, or (`lpt`, FA-3's scheduler) longest first across a group of
  heads whose K and V fit together in L2 (`costmodel.lpt_heads_per_group`).
- the tail split (`tail_split`, not causal; ours, in the spirit of stream-K): one program a query tile, as many at
  once as the GPU has SMs, leaves most SMs idle in the last wave when the tiles do not fill it; the tiles past the
  last whole wave are split along their keys into parts that fill that wave (or a few short waves, where a cost model
  says they finish first: `tail_plan`), each writing O and its LSE to scratch,
  and a small `tl` kernel merges them (the online softmax's ⊕, as split-KV decode does: `tail_plan`, `merge_tail`).
  One launch holds the whole tiles and the parts, so parts start as SMs free up.
- at head_dim 128 each consumer keeps its Q block in registers (loaded from shared memory once), so every tile's
  QKᵀ wgmma reads only K from shared memory: less data moved per score (+1–2 % measured on the H200, which runs
  every kernel at its 700 W power cap).

The numbers are those of the teaching kernel: the running row max m and row sum l in fp32, base-2 exponentials with
log2(e) folded into the scale, O divided by l once at the end, and the row log-sum-exp (natural log) written beside
O. Nothing of size N×N is allocated: the extra memory is O plus the LSE. K/V rows past seq_len load as zeros (the
4-D TMA descriptor's bounds are per head) and their scores are masked; O rows past seq_len are clipped on store.

FP8 (e4m3 Q, K, V; kernels/fp8.py holds the quantization, the scales and the library's entry): the same kernel, its
dtype-dependent lines chosen by the operands' dtype. wgmma's 8-bit K dimension is 32 (16 for 16-bit) and P goes to
the tensor cores as e4m3, rounded per tile (P ≤ 2^8 under the lazy rescale: under e4m3's 448, so the threshold
stays 8); P goes in the registers the scores left it in (`p_in_place`) and crosses into the round that issues its
P·V either in fp32, cast there (`p_late_cast`: an 8-bit loop value is carried one byte a register and packed again:
17 % of the D128 kernel's instructions), or at head_dim 64 and 128 through a shared-memory tile of the consumer's
(`p_smem`: stored where it is made, read there by the wgmma), which frees the registers a carried P holds for
256-key tiles (FA-3's e4m3 tile at 128 is 224 keys). wgmma reads 8-bit operands from shared memory
K-major only: for P·V that is Vᵀ (D × N, N contiguous). We take Vᵀ from the host (`v_transposed`, as Triton's
tutorial 06 does for fp8 on Hopper) rather than transpose V in shared memory (FA-3's way): it costs one extra read
and write of V in HBM (at B2 H16 16K d128 in e4m3: 2 × 64 MiB, ~30 µs at 4.3 TB/s, under 1 % of the attention's time
at FA-3's rates) and keeps the kernel's producer a plain TMA copy, with no transposing warps and no extra
shared-memory buffer. Q's and K's descales fold into the softmax scale; V's multiplies O once at the end; O is bf16,
staged for its TMA store in a buffer of its own (an 8-bit Q slot is too small for it). The fp8 wgmma accumulates in
fp32 with Triton's Hopper default (no extra promotion every few K steps, as FA-3): it keeps ~13 bits below the
largest term of each sum, which under an attention sink costs the small probabilities' share of O (perf/local/
fp8_accumulation.py models it); `pv_promote` sums each tile's P·V into a fresh accumulator and adds it to O in fp32.

Gluon kernels compile for a real GPU only: Triton's CPU interpreter does not run them, and only Hopper has wgmma
(sm_90; Blackwell's sm_100 has other tensor-core instructions). `v3_unavailable_reason()` says why it cannot run.
The version differences between triton 3.6 and 3.7.1 sit in kernels/gluon_compat.py.

How the file reads: one configuration value (`Fa3Config`, passed to the kernel as one constexpr) says which of the
ideas above a launch uses; the producer and the consumer are a function each, the consumer's round of the K/V loop
one more; `_ring` is the one place a ring slot and its mbarrier phase are computed; the PTX Gluon has no API for
(the named barriers, from `TURN_BARRIER_ID` on, the conditional rescale's warp vote, and the exponential on the
FMA units a candidate uses) is in kernels/ptx.py.
The shipped configurations (`SHIPPED`; `SHORT` at head_dim 64 where a wave model says fewer rows a program finish
first) and the ablation ladder (`LADDER`: FA-3's ideas one by one, each a configuration that runs) are named rows at
the end.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from kernels.runtime import AOT, INTERPRET, CachedLaunch, kernel_launch_lock, sm_count, tma_aligned, tma_ready  # first: it picks the backend before any decorator
import torch
import triton
import triton.language as tl

import costmodel
from kernels import gluon_compat as compat
from kernels.gluon_compat import fence_async_shared, gl, gluon, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
try:  # Proton's in-kernel scopes, used only by the PROFILE=True build (bench/phases.py)
    import triton.profiler.language as pl
except Exception:  # noqa: BLE001 - a Triton without Proton: the PROFILE build is unavailable, nothing else changes
    pl = None
from kernels.inputs import DTYPE_NAMES, check_attention_inputs
from kernels.ptx import (EPILOGUE_BARRIER_ID, EXP_FMA_EVERY, TURN_BARRIER_ID, exp2, grid_dependency_wait,
                         launch_dependents, named_barrier, rescale)

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)

if gluon is not None:
    _jit = gluon.jit
    _LN2 = gl.constexpr(costmodel.LN2)        # the LSE is a natural log; the kernel keeps m in log2 units
    _LOG2_E = gl.constexpr(costmodel.LOG2_E)  # exp(x) == exp2(x·log2 e)
else:  # no Gluon in this Triton: the functions below stay plain Python and are never launched
    def _jit(fn=None, **_kw):
        return fn if fn is not None else (lambda f: f)
    _LN2 = _LOG2_E = None


def _constexpr(value):
    return gl.constexpr(value) if gluon is not None else None


# -- the configuration: which of FA-3's ideas a launch uses --------------------------------------------------------

@dataclass(frozen=True)
class Fa3Config:
    block_m: int        # query rows per consumer warpgroup (wgmma's M: a multiple of 64)
    block_n: int        # keys per K/V tile
    num_consumers: int  # consumer warpgroups per program (2: the ping-pong pair; 3 at head_dim 64, as FA-3; 1: no
                        # ping-pong, the ablation's first step)
    kv_stages: int      # slots in the K/V ring
    consumer_regs: int  # registers per thread of a consumer warpgroup (setmaxnreg)
    producer_regs: int  # registers per thread of the producer warp
    overlap: bool = True  # a consumer runs its softmax while its own P·V wgmma is in flight (FA-3's third idea)
    q_in_regs: bool = False  # Q·Kᵀ's A operand from registers (loaded once) instead of shared memory per tile
    named_turns: bool = False  # the ping-pong hand-off through hardware named barriers instead of mbarriers
    kv_paired: bool = False  # one ring entry per round (K_j with V_{j-1}): one wait and one release per tile
    lazy_rescale: bool = False  # FA-4's conditional rescale: O is multiplied by α only when a row's max moved by > 2^8
    lpt: bool = False  # causal: query blocks in reverse, the longest first, across a group of heads whose K and V fit
    #                    in L2 (FA-3's scheduler); off: one head at a time, its query blocks in reverse
    p_in_place: bool = False  # 8-bit inputs: P goes to P·V from the registers the scores left it in; V's keys are
    #                           permuted on the host within each tile to match (v_transposed), so no shuffles (FA-3)
    p_late_cast: bool = False  # 8-bit inputs: P crosses into the next round (where its P·V is issued) in fp32 and is
    #                            cast to e4m3 at that wgmma: Triton carries an 8-bit loop value one byte a register
    #                            and packs the bytes again at the wgmma (PRMT); fp32 crosses whole. Same bits.
    exp_fma: int = 0  # 1 of P's exponentials in every exp_fma (4, 8, 16) by a cubic on the FMA units (FA-4's trick,
    #                   kernels/ptx.py exp2); 0: all on the special-function unit
    p_offset: int = 0  # 8-bit inputs: P made 2^p_offset larger before its e4m3 cast (FA-3's max offset, 8), so the
    #                    probabilities a dominant score (an attention sink) leaves small stay in e4m3's normal range
    #                    instead of flushing to zero; the conditional rescale's threshold drops to 8 − p_offset, so P
    #                    stays ≤ 2^8 (e4m3 holds 448). O = acc / l and the LSE (less p_offset) are unchanged
    pv_promote: bool = False  # 8-bit inputs: each tile's P·V into a fresh accumulator, added to O in fp32 after its
    #                           wait (the 8-bit wgmma sums into its accumulator keeping ~13 bits below the largest
    #                           term: once O is large, a later tile's small P·V loses its low bits; FA-3 leaves it so)
    p_smem: bool = False  # 8-bit inputs: P crosses into the round that issues its P·V through a shared-memory buffer
    #                       of the consumer's (cast to e4m3 and stored where it is made; the wgmma reads it there)
    #                       instead of registers, so S may take the registers a carried P held: 256-key tiles
    o_in_ring: bool = False  # 8-bit inputs: O (bf16) staged for its TMA store in a K slot of the ring, once both
    #                          consumers are done with the ring (a named barrier), not in a buffer of its own: the
    #                          64 KB it frees at head_dim 256 make room for 128-key tiles
    tail_split: bool = False  # not causal: the query tiles past the last whole wave of programs (one a program, as
    #                           many at once as the GPU has SMs) are split along the keys into parts that run in
    #                           one or a few short waves side by side, each writing its O and LSE to a scratch
    #                           buffer; a small kernel merges the parts by their LSE (tail_plan, launch_v3)
    pdl: bool = False  # programmatic dependent launch: the launch may begin (programs placed, barriers set up) while
    #                    the kernel before it on the stream finishes; each partition waits for that kernel before it
    #                    touches global memory (kernels/ptx.py grid_dependency_wait), and every program lets the next
    #                    such launch begin as it starts (launch_dependents)

    def __post_init__(self):  # checked once, where the configuration is made (a launch is a short call's hot path)
        if self.exp_fma not in (0, *EXP_FMA_EVERY):
            raise ValueError(f"Fa3Config.exp_fma is 0 or one of {EXP_FMA_EVERY}; got {self.exp_fma!r}")
        if isinstance(self.p_offset, bool) or not isinstance(self.p_offset, int) or not 0 <= self.p_offset <= 8:
            raise ValueError(f"Fa3Config.p_offset is an int from 0 to 8 (P ≤ 2^8 under e4m3's 448); got "
                             f"{self.p_offset!r}")
        if self.pv_promote and not self.p_in_place:
            raise ValueError("Fa3Config.pv_promote is for 8-bit inputs, whose configurations hand P over in place: it "
                             "needs p_in_place")
        if self.p_late_cast and not self.p_in_place:
            raise ValueError("Fa3Config.p_late_cast casts P where P·V is issued, in P in place's layout: it needs "
                             "p_in_place")
        if self.o_in_ring and (self.num_consumers != 2 or self.kv_stages < 2 or self.block_n < 2 * self.block_m):
            raise ValueError("Fa3Config.o_in_ring stages each of two consumers' O (bf16) in a K slot of its own: it "
                             "needs 2 consumers, 2 K/V slots and 8-bit K tiles of at least 2 × block_m keys")
        if self.p_smem and self.p_late_cast:
            raise ValueError("Fa3Config.p_smem hands P over in shared memory, p_late_cast in registers: one or the "
                             "other")

    @property
    def label(self) -> str:
        """e.g. "2×64×128 kv2 regs 240/24 q-regs": consumers × rows × keys, K/V slots, registers, and the options."""
        return (f"{self.num_consumers}×{self.block_m}×{self.block_n} kv{self.kv_stages} regs {self.consumer_regs}/"
                f"{self.producer_regs}{'' if self.overlap else ' no-overlap'}{' q-regs' if self.q_in_regs else ''}"
                f"{' named' if self.named_turns else ''}{' paired' if self.kv_paired else ''}"
                f"{' lazy' if self.lazy_rescale else ''}{' lpt' if self.lpt else ''}"
                f"{' p-in-place' if self.p_in_place else ''}{' late-cast' if self.p_late_cast else ''}"
                f"{f' exp-fma 1/{self.exp_fma}' if self.exp_fma else ''}"
                f"{f' p×2^{self.p_offset}' if self.p_offset else ''}{' pv-promote' if self.pv_promote else ''}"
                f"{' p-smem' if self.p_smem else ''}{' o-in-ring' if self.o_in_ring else ''}"
                f"{' tail-split' if self.tail_split else ''}{' pdl' if self.pdl else ''}")

    def mangle(self) -> str:
        """The configuration as an identifier: Triton names the compiled functions after their constexpr arguments."""
        flags = "".join(code for name, code in (("overlap", "o"), ("q_in_regs", "q"), ("named_turns", "n"),
                                                ("kv_paired", "k"), ("lazy_rescale", "l"), ("lpt", "t"),
                                                ("p_in_place", "p"), ("p_late_cast", "c"))
                        if getattr(self, name))
        return (f"Fa3Config_{self.num_consumers}x{self.block_m}x{self.block_n}_kv{self.kv_stages}_r{self.consumer_regs}"
                f"_{self.producer_regs}_{flags or 'plain'}{f'_e{self.exp_fma}' if self.exp_fma else ''}"
                f"{f'_s{self.p_offset}' if self.p_offset else ''}{'_pp' if self.pv_promote else ''}"
                f"{'_ps' if self.p_smem else ''}{'_or' if self.o_in_ring else ''}{'_ts' if self.tail_split else ''}"
                f"{'_pdl' if self.pdl else ''}")

    __repr__ = mangle  # Triton 3.6 mangles a constexpr argument by its repr

    @property
    def tile_m(self) -> int:
        """Query rows per program."""
        return self.block_m * self.num_consumers

    @property
    def num_warps(self) -> int:
        """Warps per program as launched: the consumers' warpgroups plus the producer's (1 warp, padded to 4)."""
        return 4 * (self.num_consumers + 1)

    @property
    def maxnreg(self) -> int:
        """The kernel-wide register cap: the register file (64K) shared by all warps, in steps of 8."""
        return 65536 // (32 * self.num_warps) // 8 * 8

    def smem_bytes(self, head_dim: int) -> int:
        return 2 * head_dim * (self.num_consumers * self.block_m + 2 * self.kv_stages * self.block_n)


# -- helpers: Proton scopes, the ring, the ping-pong turn ----------------------------------------------------------

@_jit
def _enter(NAME: gl.constexpr, PROFILE: gl.constexpr):
    # Proton scope around a phase, in the PROFILE build only (bench/phases.py); nothing otherwise
    if PROFILE:
        pl.enter_scope(NAME)


@_jit
def _exit(NAME: gl.constexpr, PROFILE: gl.constexpr):
    if PROFILE:
        pl.exit_scope(NAME)


@_jit
def _ring(j, STAGES: gl.constexpr):
    # round j's slot in a ring of STAGES entries, and the phase its mbarrier completes in that round (0, 1, 0, …)
    return j % STAGES, (j // STAGES) & 1


@_jit
def _turn_wait(turn, phase, CONSUMER: gl.constexpr, CFG: gl.constexpr):
    # -- ping-pong: wait for our turn at the tensor cores (a lone consumer has no one to take turns with) --
    if CFG.num_consumers == 1:
        pass
    elif CFG.named_turns:
        named_barrier(False, TURN_BARRIER_ID + CONSUMER)
    else:
        mbarrier.wait(turn.index(CONSUMER), phase)


@_jit
def _turn_pass(turn, NEXT: gl.constexpr, CFG: gl.constexpr):
    # -- ping-pong: our wgmmas are issued; the next consumer's turn --
    if CFG.num_consumers == 1:
        pass
    elif CFG.named_turns:
        named_barrier(True, TURN_BARRIER_ID + NEXT)
    else:
        mbarrier.arrive(turn.index(NEXT), count=1)


# -- the producer: one warp of TMA copies ---------------------------------------------------------------------------

@_jit
def _producer(loads, CFG: gl.constexpr, PROFILE: gl.constexpr):
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, off_b, off_h, m0, \
        n_kv, key0 = loads
    NUM_CONSUMERS: gl.constexpr = CFG.num_consumers
    KV_PAIRED: gl.constexpr = CFG.kv_paired
    BLOCK_M: gl.constexpr = CFG.block_m
    if CFG.pdl:  # the kernel before this launch done, before the first load (Fa3Config.pdl)
        grid_dependency_wait(1)
    # -- producer: each consumer's Q block, once (rows past seq_len read as zeros) --
    for c in gl.static_range(NUM_CONSUMERS):
        mbarrier.expect(q_ready.index(c), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [off_b, off_h, m0 + c * BLOCK_M, 0], q_ready.index(c),
                                        q_smem.index(c))
    if KV_PAIRED:
        _produce_paired(k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, off_b, off_h, n_kv, key0, CFG, PROFILE)
    else:
        _produce_split(k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, off_b, off_h, n_kv, key0,
                       CFG, PROFILE)


@_jit
def _produce_paired(k_desc, v_desc, k_smem, v_smem, kv_ready, kv_empty, off_b, off_h, n_kv, key0, CFG: gl.constexpr,
                    PROFILE: gl.constexpr):
    # -- producer, paired ring: entry j holds K_j and V_{j-1}, what a consumer's round j reads (entry 0: K_0 only,
    # entry n_kv: the last V only), under one ready and one empty mbarrier; tile j starts at key key0 + j·BLOCK_N --
    BLOCK_N: gl.constexpr = CFG.block_n
    KV_STAGES: gl.constexpr = CFG.kv_stages
    _enter("load", PROFILE)
    mbarrier.wait(kv_empty.index(0), 1)  # a fresh mbarrier counts its phase before 0 as complete
    mbarrier.expect(kv_ready.index(0), k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [off_b, off_h, key0, 0], kv_ready.index(0), k_smem.index(0))
    for j in range(1, n_kv):
        slot, phase = _ring(j, KV_STAGES)
        mbarrier.wait(kv_empty.index(slot), phase ^ 1)
        mbarrier.expect(kv_ready.index(slot), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [off_b, off_h, key0 + j * BLOCK_N, 0], kv_ready.index(slot),
                                        k_smem.index(slot))
        _load_v(v_desc, off_b, off_h, key0 + (j - 1) * BLOCK_N, kv_ready.index(slot), v_smem.index(slot))
    slot, phase = _ring(n_kv, KV_STAGES)
    mbarrier.wait(kv_empty.index(slot), phase ^ 1)
    mbarrier.expect(kv_ready.index(slot), v_desc.block_type.nbytes)
    _load_v(v_desc, off_b, off_h, key0 + (n_kv - 1) * BLOCK_N, kv_ready.index(slot), v_smem.index(slot))
    _exit("load", PROFILE)


@_jit
def _produce_split(k_desc, v_desc, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, off_b, off_h, n_kv, key0,
                   CFG: gl.constexpr, PROFILE: gl.constexpr):
    # -- producer: stream the K and V tiles through the ring; a slot is refilled once every consumer freed it --
    BLOCK_N: gl.constexpr = CFG.block_n
    KV_STAGES: gl.constexpr = CFG.kv_stages
    for j in range(n_kv):
        slot, phase = _ring(j, KV_STAGES)
        refill = phase ^ 1  # a fresh mbarrier counts its phase before 0 as complete
        # -- load the K tile (its copy signals k_ready when the bytes have landed) --
        _enter("load", PROFILE)
        mbarrier.wait(k_empty.index(slot), refill)
        mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [off_b, off_h, key0 + j * BLOCK_N, 0], k_ready.index(slot),
                                        k_smem.index(slot))
        # -- load the V tile --
        mbarrier.wait(v_empty.index(slot), refill)
        mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
        _load_v(v_desc, off_b, off_h, key0 + j * BLOCK_N, v_ready.index(slot), v_smem.index(slot))
        _exit("load", PROFILE)


@_jit
def _load_v(v_desc, off_b, off_h, key0, bar, dst):
    # one V tile from key key0 on: (BLOCK_N, D) rows of V, or with 8-bit inputs the (D, BLOCK_N) tile of Vᵀ
    if v_desc.dtype.is_fp8():
        tma.async_copy_global_to_shared(v_desc, [off_b, off_h, 0, key0], bar, dst)
    else:
        tma.async_copy_global_to_shared(v_desc, [off_b, off_h, key0, 0], bar, dst)


@_jit
def _v_operand(v_tile, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    # P·V's B operand, (BLOCK_N, D): V's tile as loaded, or with 8-bit inputs the Vᵀ tile seen transposed (K-major,
    # the only 8-bit layout wgmma reads)
    if v_tile.dtype.is_fp8():
        return v_tile.reshape([HEAD_DIM, BLOCK_N]).permute((1, 0))
    else:
        return v_tile.reshape([BLOCK_N, HEAD_DIM])


@_jit
def _issue_pv(p_a, v_op, acc, PROMOTE: gl.constexpr):
    # O += P·V, async; PROMOTE: P·V alone, into a fresh accumulator (_done_pv adds it to O in fp32)
    if PROMOTE:
        o_tok = warpgroup_mma(p_a, v_op, gl.zeros_like(acc), use_acc=False, is_async=True)
    else:
        o_tok = warpgroup_mma(p_a, v_op, acc, is_async=True)
    return o_tok


@_jit
def _done_pv(o_tok, p_a, acc, PROMOTE: gl.constexpr):
    # wait for _issue_pv's wgmma; O with this tile's P·V in it
    out, p_a = _wait_pv(o_tok, p_a)
    if PROMOTE:
        out = acc + out
    return out, p_a


@_jit
def _wait_pv(o_tok, p_op):
    # wait for every wgmma in flight: O += P·V done, and P's registers free again. Triton's wait can hold 16-bit
    # registers live until then, not 8-bit ones: with e4m3 P, ptxas alone keeps P's registers from reuse meanwhile
    if p_op.dtype.is_fp8():
        acc = warpgroup_mma_wait(0, deps=(o_tok,))
    else:
        acc, p_op = warpgroup_mma_wait(0, deps=(o_tok, p_op))
    return acc, p_op


# -- the consumer's math: masking, the online softmax, the (conditional) rescale ------------------------------------

@_jit
def _mask(s, j, offs_m, offs_n, seq_len, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    # keys past seq_len, and under a causal mask keys after the query, score -inf
    keys = j * BLOCK_N + offs_n
    keep = (keys < seq_len)[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= keys[None, :])
    return gl.where(keep, s, float("-inf"))


# FA-4's conditional rescale: a row's max moves only when the new max exceeds it by more than 8 (log2 units), so a
# P value is at most 2^8 = 256 (bf16 and the fp32 sums hold that) and O is rescaled only in the rare tiles that move it
# (kernels/ptx.py: rescale skips a warp whose rows all kept theirs). With P_OFFSET (Fa3Config.p_offset) P is made
# 2^P_OFFSET larger and the threshold is 8 − P_OFFSET: P ≤ 2^8 either way.
_LAZY_THRESHOLD = _constexpr(8.0)


@_jit
def _softmax(s, m_i, l_i, qk_scale, LAZY: gl.constexpr = False, EXP_FMA: gl.constexpr = 0, P_OFFSET: gl.constexpr = 0):
    # -- update m_i and l_i (online softmax, log2 units: one FMA per score, s·scale − m) --
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    if LAZY:  # keep the old max unless the new one is more than 2^(8 − P_OFFSET) larger (FA-4's conditional rescale)
        m_new = gl.where(m_new > m_i + (_LAZY_THRESHOLD - P_OFFSET), m_new, m_i)
    if P_OFFSET:  # P = 2^(s·scale − (m − P_OFFSET)): the shift is one subtraction a row, not one a score
        m_p = m_new - P_OFFSET
    else:
        m_p = m_new
    if EXP_FMA:  # 1 in EXP_FMA on the FMA units (a call only here: the others' PTX, and so their SASS, is unchanged)
        p = exp2(s * qk_scale - m_p[:, None], EXP_FMA)
    else:
        p = gl.exp2(s * qk_scale - m_p[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, m_new, l_i, alpha


# -- the consumer: one warpgroup, BLOCK_M query rows -------------------------------------------------------------------

@_jit
def _consumer(CONSUMER: gl.constexpr, work, CFG: gl.constexpr, CAUSAL: gl.constexpr, PROFILE: gl.constexpr):
    # -- consumer: one warpgroup, BLOCK_M query rows; the scores and O live in wgmma accumulator registers --
    o_desc, LSE, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, turn, qk_scale, seq_len, off_b, \
        off_h, off_bh, m0, n_kv, mask_from, o_smem, v_descale, p_smem, part, o2_desc, lse_ptr, row_limit = work
    # (CFG.tail_split: seq_len is the keys left from this program's first key on, and part ≥ 0 names this program's
    # scratch slot in o2_desc and lse_ptr; _fa3_fwd)
    if CFG.pdl and CONSUMER > 0:  # (consumer 0 waited in _fa3_fwd, before the partitions split)
        grid_dependency_wait(4)
    BLOCK_M: gl.constexpr = CFG.block_m
    BLOCK_N: gl.constexpr = CFG.block_n
    KV_STAGES: gl.constexpr = CFG.kv_stages
    NAMED_TURNS: gl.constexpr = CFG.named_turns
    KV_PAIRED: gl.constexpr = CFG.kv_paired
    LAZY: gl.constexpr = CFG.lazy_rescale
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[3]
    dtype: gl.constexpr = o_desc.dtype  # O's (bf16 for 8-bit inputs)
    in_dtype: gl.constexpr = q_smem.dtype  # the wgmma operands' (Q, K, V, P): 16-bit, or e4m3
    FP8: gl.constexpr = in_dtype.is_fp8()
    INSTR_K: gl.constexpr = 256 // in_dtype.primitive_bitwidth  # wgmma's K: 16 for 16-bit operands, 32 for 8-bit
    K_WIDTH: gl.constexpr = 32 // in_dtype.primitive_bitwidth  # A-operand values per 32-bit register
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, INSTR_K])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, INSTR_K])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=K_WIDTH)  # P from regs
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    o_row_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    NUM_CONSUMERS: gl.constexpr = CFG.num_consumers
    Q_IN_REGS: gl.constexpr = CFG.q_in_regs
    NEXT: gl.constexpr = (CONSUMER + 1) % NUM_CONSUMERS
    PROMOTE: gl.constexpr = FP8 and CFG.pv_promote
    P_SMEM: gl.constexpr = CFG.p_smem
    p_buf = p_smem.index(CONSUMER)
    row0 = m0 + CONSUMER * BLOCK_M
    offs_m = row0 + gl.arange(0, BLOCK_M, row_layout)
    offs_n = gl.arange(0, BLOCK_N, col_layout)
    q = q_smem.index(CONSUMER).reshape([BLOCK_M, HEAD_DIM])
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    s_init = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)  # ignored: the QKᵀ wgmma runs with use_acc=False
    mbarrier.wait(q_ready.index(CONSUMER), 0)
    if Q_IN_REGS:  # Q read from shared memory once, then fed to every QKᵀ wgmma from registers
        q = q.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=K_WIDTH))

    if NAMED_TURNS and NEXT == 0:  # the last consumer gives consumer 0 its first turn
        _turn_pass(turn, NEXT, CFG)

    # -- first K tile: compute qk, softmax (no P·V yet) --
    mbarrier.wait(k_ready.index(0), 0)  # (paired ring: entry 0 holds K_0 alone)
    # -- ping-pong hand-off: wait for our turn at the tensor cores, issue, pass the turn to the next consumer --
    _turn_wait(turn, 0, CONSUMER, CFG)
    k_t = k_smem.index(0).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
    s_tok = warpgroup_mma(q, k_t, s_init, use_acc=False, is_async=True)
    _turn_pass(turn, NEXT, CFG)
    s = warpgroup_mma_wait(0, deps=(s_tok,))
    mbarrier.arrive(k_empty.index(0), count=1)  # K_0 read: the producer may refill its slot
    if mask_from == 0:
        s = _mask(s, 0, offs_m, offs_n, seq_len, BLOCK_N, CAUSAL)
    p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, LAZY, CFG.exp_fma, FP8 * CFG.p_offset)
    p_op = _p_handover(p, m_i, p_buf, in_dtype, p_layout, CFG)  # e4m3 P: ≤ 2^8 (lazy)

    for j in range(1, n_kv):
        acc, m_i, l_i, alpha, p_op = _consumer_round(j, q, acc, m_i, l_i, alpha, p_op, s_init, k_smem, v_smem, k_ready,
                                                     k_empty, v_ready, v_empty, turn, qk_scale, seq_len, offs_m,
                                                     offs_n, mask_from, o_row_layout, p_layout, p_buf, CONSUMER, NEXT,
                                                     CFG, CAUSAL, PROFILE)

    # -- rescale the accumulator, then add P·V: the last tile's P·V --
    if KV_PAIRED:  # entry n_kv holds the last V alone
        last, last_phase = _ring(n_kv, KV_STAGES)
        mbarrier.wait(k_ready.index(last), last_phase)
    else:
        last, last_phase = _ring(n_kv - 1, KV_STAGES)
        mbarrier.wait(v_ready.index(last), last_phase)
    _turn_wait(turn, n_kv & 1, CONSUMER, CFG)
    acc = rescale(acc, alpha, o_row_layout, LAZY)
    p_a = _p_a(p_op, p_buf, in_dtype, P_SMEM)  # the operand (a cast only where P came late: p_late_cast)
    o_tok = _issue_pv(p_a, _v_operand(v_smem.index(last), BLOCK_N, HEAD_DIM), acc, PROMOTE)
    if not (NAMED_TURNS and NEXT == 0):  # named barriers count arrivals: the first turn's was given up front
        _turn_pass(turn, NEXT, CFG)
    acc, p_a = _done_pv(o_tok, p_a, acc, PROMOTE)
    if KV_PAIRED:
        mbarrier.arrive(k_empty.index(last), count=1)
    else:
        mbarrier.arrive(v_empty.index(last), count=1)

    # -- write O and the row log-sum-exp (natural log) once --
    _enter("epilogue", PROFILE)
    if FP8 and CFG.p_offset:  # l holds P's 2^p_offset
        lse = (m_i + gl.log2(l_i) - CFG.p_offset) * _LN2
    else:
        lse = (m_i + gl.log2(l_i)) * _LN2
    if CFG.tail_split:
        gl.store(lse_ptr + offs_m, lse, mask=offs_m < row_limit)
    else:
        gl.store(LSE + off_bh.to(gl.int64) * seq_len + offs_m, lse, mask=offs_m < seq_len)
    if FP8:  # V's descale applied once, to O
        o = acc * gl.convert_layout(v_descale / l_i, o_row_layout)[:, None]
    else:
        o = acc / gl.convert_layout(l_i, o_row_layout)[:, None]
    # Q is spent (its last wgmma is done): its slot stages O for the TMA store (8-bit Q: a bf16 buffer of its own, or
    # with o_in_ring the consumer's K slot of the ring, once both consumers are done with it)
    if FP8 and CFG.o_in_ring:
        named_barrier(False, EPILOGUE_BARRIER_ID)  # both consumers' last wgmmas done; every tile loaded was read
        o_smem = o_smem.index(CONSUMER)._reinterpret(dtype, o_desc.block_type.shape, o_desc.layout)
    else:
        o_smem = o_smem.index(CONSUMER)
    o_smem.reshape([BLOCK_M, HEAD_DIM]).store(o.to(dtype))
    fence_async_shared()
    if CFG.tail_split:
        if part >= 0:  # a part of a split tile: its scratch slot (part, 0, rows, D)
            tma.async_copy_shared_to_global(o2_desc, [part, 0, CONSUMER * BLOCK_M, 0], o_smem)
        else:
            tma.async_copy_shared_to_global(o_desc, [off_b, off_h, row0, 0], o_smem)
    else:
        tma.async_copy_shared_to_global(o_desc, [off_b, off_h, row0, 0], o_smem)  # rows past seq_len are clipped
    tma.store_wait(0)
    _exit("epilogue", PROFILE)


@_jit
def _p_handover(p, m_i, p_buf, dtype: gl.constexpr, p_layout: gl.constexpr, CFG: gl.constexpr):
    # P_j on its way to the round that issues P_j·V_j: in registers (_p_operand), or with 8-bit inputs and
    # CFG.p_smem cast and stored in the consumer's shared-memory tile (the P·V that read the tile before is done:
    # the round waited for it), the loop's P value then a placeholder (the row max it carries anyway)
    FP8: gl.constexpr = dtype.is_fp8()
    if CFG.p_smem:
        if FP8 and CFG.p_in_place:  # four keys a thread side by side: 4-byte stores (V's keys permuted to match)
            p = _p_operand(p, dtype, p_layout, True, False)
        p_buf.store(p.to(dtype))
        fence_async_shared()  # (Triton puts the partition's barrier between the stores and the wgmma that reads them)
        out = m_i
    else:
        out = _p_operand(p, dtype, p_layout, FP8 and CFG.p_in_place, FP8 and CFG.p_late_cast)
    return out


@_jit
def _p_a(p_op, p_buf, dtype: gl.constexpr, P_SMEM: gl.constexpr):
    # P·V's A operand: the tile in shared memory, or the carried registers (cast to the operand type: a cast only
    # where P came late, p_late_cast)
    if P_SMEM:
        out = p_buf
    else:
        out = p_op.to(dtype)
    return out


@_jit
def _p_operand(p, dtype: gl.constexpr, p_layout: gl.constexpr, IN_PLACE: gl.constexpr, LATE: gl.constexpr):
    # P (the scores' accumulator layout) as P·V's A operand from registers. 16-bit P converts with few shuffles.
    # 8-bit P: a thread holds columns 2t, 2t+1 (+8i) of the accumulator, but wgmma's 8-bit A operand wants 4t … 4t+3
    # (+16i): IN_PLACE reads column c = c0 + 2c1 + 4c2 + 8c3 + 16h as k = c0 + 2c3 + 4c1 + 8c2 + 16h (a relabelling
    # the registers already satisfy), and V's rows were permuted on the host the same way (v_transposed), so P'·V' =
    # P·V with no data moved between threads.
    # The relabelling is done on the fp32 values (register renaming only), and the cast to 8 bits after it, so the
    # cast packs each register's four bytes from the right four values. LATE: no cast here; the round that issues
    # P·V casts it (Fa3Config.p_late_cast).
    if IN_PLACE:
        M: gl.constexpr = p.shape[0]
        N: gl.constexpr = p.shape[1]
        p = p.reshape([M, N // 16, 2, 2, 2, 2]).permute((0, 1, 3, 4, 2, 5)).reshape([M, N])
        out = gl.convert_layout(p, p_layout)
        if not LATE:
            out = out.to(dtype)
    else:
        out = gl.convert_layout(p.to(dtype), p_layout)
    return out


@_jit
def _consumer_round(j, q, acc, m_i, l_i, alpha, p_op, s_init, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty,
                    turn, qk_scale, seq_len, offs_m, offs_n, mask_from, o_row_layout: gl.constexpr,
                    p_layout: gl.constexpr, p_buf, CONSUMER: gl.constexpr, NEXT: gl.constexpr, CFG: gl.constexpr,
                    CAUSAL: gl.constexpr, PROFILE: gl.constexpr):
    # one round of the K/V loop: S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} issued together, then tile j's softmax
    BLOCK_N: gl.constexpr = CFG.block_n
    KV_STAGES: gl.constexpr = CFG.kv_stages
    KV_PAIRED: gl.constexpr = CFG.kv_paired
    OVERLAP: gl.constexpr = CFG.overlap
    LAZY: gl.constexpr = CFG.lazy_rescale
    HEAD_DIM: gl.constexpr = acc.type.shape[1]
    OP_DTYPE: gl.constexpr = v_smem.dtype  # the wgmma operands' (P's too): 16-bit, or e4m3
    FP8: gl.constexpr = OP_DTYPE.is_fp8()
    PROMOTE: gl.constexpr = FP8 and CFG.pv_promote
    slot, phase = _ring(j, KV_STAGES)
    prev, prev_phase = _ring(j - 1, KV_STAGES)
    # -- load the K tile (TMA landed?) and the previous V tile --
    _enter("wait", PROFILE)
    mbarrier.wait(k_ready.index(slot), phase)  # (paired ring: the entry holds V_{j-1} too)
    if KV_PAIRED:
        v_slot = slot
    else:
        mbarrier.wait(v_ready.index(prev), prev_phase)
        v_slot = prev
    # -- ping-pong hand-off: our turn at the tensor cores; compute qk: S_j = Q·K_jᵀ, async --
    _turn_wait(turn, j & 1, CONSUMER, CFG)
    _exit("wait", PROFILE)
    _enter("qk", PROFILE)  # issue QKᵀ and P·V, wait for QKᵀ
    k_t = k_smem.index(slot).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
    s_tok = warpgroup_mma(q, k_t, s_init, use_acc=False, is_async=True)
    # -- rescale the accumulator (while S_j runs), then add P·V: O += P_{j-1}·V_{j-1}, async --
    acc = rescale(acc, alpha, o_row_layout, LAZY)
    p_a = _p_a(p_op, p_buf, OP_DTYPE, CFG.p_smem)  # P_{j-1} as the operand
    o_tok = _issue_pv(p_a, _v_operand(v_smem.index(v_slot), BLOCK_N, HEAD_DIM), acc, PROMOTE)
    _turn_pass(turn, NEXT, CFG)  # the other consumer issues while we run the softmax
    if OVERLAP:
        # -- softmax overlap: wait for S_j only; P_{j-1}·V_{j-1} keeps the tensor cores busy meanwhile --
        s = warpgroup_mma_wait(1, deps=(s_tok,))
        if not KV_PAIRED:
            mbarrier.arrive(k_empty.index(slot), count=1)
    else:  # ping-pong only: both products done before the softmax (fewer live registers)
        if FP8:
            s = warpgroup_mma_wait(1, deps=(s_tok,))
            acc, p_a = _done_pv(o_tok, p_a, acc, PROMOTE)
        else:
            s, acc, p_a = warpgroup_mma_wait(0, deps=(s_tok, o_tok, p_a))
        mbarrier.arrive(k_empty.index(slot), count=1)  # (paired ring: K_j and V_{j-1} freed at once)
        if not KV_PAIRED:
            mbarrier.arrive(v_empty.index(prev), count=1)
    _exit("qk", PROFILE)
    _enter("softmax", PROFILE)
    if j >= mask_from:
        s = _mask(s, j, offs_m, offs_n, seq_len, BLOCK_N, CAUSAL)
    p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, LAZY, CFG.exp_fma, FP8 * CFG.p_offset)
    _exit("softmax", PROFILE)
    _enter("pv", PROFILE)  # wait for P·V (in flight since the qk phase), hand P_j over
    if OVERLAP:
        # Never taken (seq_len ≥ 1): a branch here ends the basic block, so ptxas cannot hoist the wait below
        # above the softmax (within one block it does, and the overlap is lost: seen in the SASS).
        if seq_len < 0:
            tma.store_wait(0)
        acc, p_a = _done_pv(o_tok, p_a, acc, PROMOTE)
        if KV_PAIRED:
            mbarrier.arrive(k_empty.index(slot), count=1)  # K_j and V_{j-1} both read
        else:
            mbarrier.arrive(v_empty.index(prev), count=1)
    p_op = _p_handover(p, m_i, p_buf, OP_DTYPE, p_layout, CFG)  # P_j where P_{j-1}·V_{j-1} freed it
    _exit("pv", PROFILE)
    return acc, m_i, l_i, alpha, p_op


# -- the kernel: shared memory, mbarriers, and the warp-specialized partitions -------------------------------------

@_jit(do_not_specialize=["seq_len", "heads", "heads_per_group", "main_tiles", "splits", "per_split"])
def _fa3_fwd(q_desc, k_desc, v_desc, o_desc, LSE, DESCALE, sm_scale, seq_len, heads, heads_per_group,
             o2_desc, LSE2, main_tiles, splits, per_split,
             CFG: gl.constexpr, CAUSAL: gl.constexpr, PROFILE: gl.constexpr):
    # Q, K, V, O: 4-D TMA descriptors over (B, H, N, D); Q and O boxes are [1, 1, BLOCK_M, D], K and V [1, 1, BLOCK_N, D].
    # 8-bit (e4m3) Q, K, V: V's descriptor is over Vᵀ (B, H, D, N), boxes [1, 1, D, BLOCK_N]; DESCALE holds float32
    # descales (3, B·H): Q's, K's, V's per head (None for 16-bit inputs); O is bf16.
    # One program per (block of num_consumers·block_m query rows, batch·head); causal: heads_per_group heads (see
    # costmodel.lpt_heads_per_group) take their query blocks in turn, the longest first.
    # CFG.tail_split (not causal): a 1-D grid; programs below main_tiles take query tile `pid` in (batch·head, tile)
    # order with every key; the rest are parts: part p takes part p % splits (per_split key tiles) of tile
    # main_tiles + p // splits, and writes its O to o2_desc's slot p and its LSE to LSE2's row p (tail_plan).
    NUM_CONSUMERS: gl.constexpr = CFG.num_consumers
    KV_STAGES: gl.constexpr = CFG.kv_stages
    BLOCK_N: gl.constexpr = CFG.block_n
    TILE_M: gl.constexpr = NUM_CONSUMERS * CFG.block_m
    if CFG.pdl:  # let the next launch begin; wait for the one before (the default partition: consumer 0's warps)
        launch_dependents(4)
        grid_dependency_wait(4)
    if CAUSAL:  # the last query blocks see the most keys: launch them first so the light ones fill the tail
        # programs start in launch order (program_id(0) fastest): the i-th of a group of heads takes query block
        # n_tiles − 1 − i // heads, of head i % heads (one head at a time, unless lpt: a group whose K, V fit in L2)
        n_tiles = gl.num_programs(0)
        pid = gl.program_id(1) * n_tiles + gl.program_id(0)
        first_bh = pid // (heads_per_group * n_tiles) * heads_per_group
        group = gl.minimum(heads_per_group, gl.num_programs(1) - first_bh)  # the last group may be short
        rank = pid - first_bh * n_tiles
        tile = n_tiles - 1 - rank // group
        off_bh = first_bh + rank % group
    elif CFG.tail_split:
        pid = gl.program_id(0)
        if pid < main_tiles:
            flat = pid
            part = pid * 0 - 1
        else:
            part = pid - main_tiles
            flat = main_tiles + part // splits
        n_tiles = gl.cdiv(seq_len, TILE_M)
        tile = flat % n_tiles
        off_bh = flat // n_tiles
    else:
        tile = gl.program_id(0)
        off_bh = gl.program_id(1)
    off_b = off_bh // heads
    off_h = off_bh % heads
    m0 = tile * TILE_M
    # Key tiles from mask_from on need a mask: the causal diagonal (and beyond it, inside this block) or the seq_len tail.
    if CAUSAL:
        hi = gl.minimum(seq_len, m0 + TILE_M)
        mask_from = m0 // BLOCK_N
    else:
        hi = seq_len
        mask_from = seq_len // BLOCK_N
    n_kv = gl.cdiv(hi, BLOCK_N)
    if CFG.tail_split:  # a part walks key tiles kv_lo … kv_lo + n_kv − 1; the consumers count keys from kv_lo·BLOCK_N
        gl.static_assert(not CAUSAL, "Fa3Config.tail_split is for the non-causal kernel")
        if part >= 0:
            kv_lo = (part % splits) * per_split
            n_kv = gl.minimum(n_kv - kv_lo, per_split)
            lse_ptr = LSE2 + part * TILE_M - m0  # + a row's index: the part's LSE row
            row_limit = m0 + TILE_M
        else:
            kv_lo = part * 0
            lse_ptr = LSE + off_bh.to(gl.int64) * seq_len
            row_limit = seq_len
        key0 = kv_lo * BLOCK_N
        mask_from = mask_from - kv_lo
        key_len = seq_len - key0
    else:
        part = -1
        key0 = 0
        lse_ptr = LSE
        row_limit = seq_len
        key_len = seq_len
    qk_scale = sm_scale * _LOG2_E
    if q_desc.dtype.is_fp8():  # Q's and K's descales fold into the softmax scale; V's multiplies O at the end
        if CFG.tail_split:  # a 1-D grid: the host passes batch·heads as heads_per_group (unused when not causal)
            bh = heads_per_group
        else:
            bh = gl.num_programs(1)
        qk_scale = qk_scale * gl.load(DESCALE + off_bh) * gl.load(DESCALE + bh + off_bh)
        v_descale = gl.load(DESCALE + 2 * bh + off_bh)
    else:
        v_descale = sm_scale  # unused

    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [KV_STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [KV_STAGES] + v_desc.block_type.shape, v_desc.layout)
    if dtype.is_fp8() and CFG.o_in_ring:  # O staged in the ring's K slots (_consumer's epilogue)
        o_smem = k_smem
    elif dtype.is_fp8():  # O (bf16) does not fit an 8-bit Q slot: its own staging buffer
        o_smem = gl.allocate_shared_memory(o_desc.dtype, [NUM_CONSUMERS] + o_desc.block_type.shape, o_desc.layout)
    else:
        o_smem = q_smem
    if CFG.p_smem:  # each consumer's P tile, e4m3, as P·V's A operand (K-major: P's keys contiguous)
        gl.static_assert(dtype.is_fp8(), "Fa3Config.p_smem is for 8-bit inputs")
        p_smem = gl.allocate_shared_memory(dtype, [NUM_CONSUMERS, CFG.block_m, BLOCK_N],
                                           gl.NVMMASharedLayout.get_default_for([CFG.block_m, BLOCK_N], dtype))
    else:
        p_smem = o_smem  # (unused)
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(NUM_CONSUMERS):
        mbarrier.init(q_ready.index(c), count=1)
        mbarrier.init(turn.index(c), count=1)
    for i in gl.static_range(KV_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)  # freed once every consumer arrived
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)
    mbarrier.arrive(turn.index(0), count=1)  # consumer 0 has the first turn at the tensor cores

    # what every consumer works on, and what the producer loads (the consumer's index and the constexprs are written
    # into each partition's arguments: a tuple built beforehand would turn them into run-time integers)
    work = (o_desc, LSE, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, turn, qk_scale, key_len,
            off_b, off_h, off_bh, m0, n_kv, mask_from, o_smem, v_descale, p_smem, part, o2_desc, lse_ptr, row_limit)
    loads = (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, k_empty, v_ready, v_empty, off_b, off_h,
             m0, n_kv, key0)
    # consumer 0 is the default partition (the kernel's num_warps=4 warps); the other consumers and the producer are
    # workers
    if NUM_CONSUMERS == 1:  # no ping-pong: the lone consumer and the producer
        gl.warp_specialize([(_consumer, (0, work, CFG, CAUSAL, PROFILE)), (_producer, (loads, CFG, PROFILE))],
                           [1], [CFG.producer_regs])
    elif NUM_CONSUMERS == 2:
        gl.warp_specialize([(_consumer, (0, work, CFG, CAUSAL, PROFILE)), (_consumer, (1, work, CFG, CAUSAL, PROFILE)),
                            (_producer, (loads, CFG, PROFILE))],
                           [4, 1], [CFG.consumer_regs, CFG.producer_regs])
    else:
        gl.static_assert(NUM_CONSUMERS == 3, "the FA-3 kernel runs 1, 2 or 3 consumer warpgroups")
        gl.warp_specialize([(_consumer, (0, work, CFG, CAUSAL, PROFILE)), (_consumer, (1, work, CFG, CAUSAL, PROFILE)),
                            (_consumer, (2, work, CFG, CAUSAL, PROFILE)), (_producer, (loads, CFG, PROFILE))],
                           [4, 4, 1], [CFG.consumer_regs, CFG.consumer_regs, CFG.producer_regs])


# -- the shipped configurations, and FA-3's ideas one by one ----------------------------------------------------------

# Per (head_dim, causal); fp16 and bf16 share them. Measured on the H200 (perf/h200/fa3_speed.py; BENCHMARKS.md).
SHIPPED: dict[tuple[int, bool], Fa3Config] = {
    # head_dim 64: three consumers of 64 rows (as FA-3); O rescaled only when a row's max moved by more than 2^8.
    # Not causal, the in-warpgroup overlap off (on, it measured 0.96-0.99×); causal, the overlap on with the longest
    # query blocks first across an L2-sized group of heads (lpt): 1.052-1.074× at 8K, 1.003-1.018× at 16K,
    # 0.995-1.016× at 32K in two runs (BENCHMARKS.md §3c)
    # Not causal, the tail split (Fa3Config.tail_split: the tiles past the last whole wave split along their keys),
    # timed against the same config without it (an H100, 2026-12-05 22:18, perf/h200/tail_split.py): head_dim 64 8K
    # 1.032× (56 tiles left of 1,376), 16K 1.005× (nothing split); 128 16K 1.048× (4 left: 32 parts), 32K 1.036×;
    # with tail_plan's parts over a few short waves (H100s, 2026-12-06 04:27 and 04:44): 128 8K 1.030×, 1.003× (68
    # left: 5 parts over 3 short waves; the one-wave rule split nothing there), 256 16K B2 H8 1.034×, 1.072× (7 parts)
    (64, False): Fa3Config(64, 128, 3, 4, 160, 32, overlap=False, lazy_rescale=True, tail_split=True),
    (64, True): Fa3Config(64, 128, 3, 4, 160, 32, lazy_rescale=True, lpt=True),
    # head_dim 128: the ping-pong pair; Q·Kᵀ's A operand from registers (32 of the 240; no spills); the hand-off
    # through named barriers, one K/V ring entry per round and the conditional rescale; causal with a third ring
    # slot (224 KB of shared memory) and the longest query blocks first across an L2-sized group of heads (lpt:
    # 1.022-1.028× at 8K, 0.990 at 16K, 1.009 at 32K; BENCHMARKS.md §3c)
    (128, False): Fa3Config(64, 128, 2, 2, 240, 24, q_in_regs=True, named_turns=True, kv_paired=True,
                            lazy_rescale=True, tail_split=True),
    (128, True): Fa3Config(64, 128, 2, 3, 240, 24, q_in_regs=True, named_turns=True, kv_paired=True,
                           lazy_rescale=True, lpt=True),
    # head_dim 256: the ping-pong pair with 64-key tiles (FA-3 takes 80; a Gluon arange wants a power of two) in two
    # paired ring slots: Q 64 KB + K/V 128 KB = 192 KB of shared memory (128-key tiles would need 320 KB). O alone
    # is 128 of a consumer's 240 registers, so Q·Kᵀ reads Q from shared memory (in registers it would take 64 more).
    # Measured (H200, 2026-12-04, BENCHMARKS.md §3b): 719.4 / 727.4 TFLOPS at B2 H8 8K / 16K, 1.028–1.053× FA-4.
    (256, False): Fa3Config(64, 64, 2, 2, 240, 24, named_turns=True, kv_paired=True, lazy_rescale=True,
                            tail_split=True),
    (256, True): Fa3Config(64, 64, 2, 2, 240, 24, named_turns=True, kv_paired=True, lazy_rescale=True, lpt=True),
}

# The ablation ladder at head_dim 128, not causal: each row adds one idea to the row before, and each is a
# configuration of this kernel that runs (the last is the shipped one). FA-2 order (kernels/fa2.py) stands before
# the first row: TMA and wgmma with a producer warp but one consumer warpgroup (the FA-3 paper's step without
# ping-pong; 64 query rows a program, as a warpgroup's 240 registers hold no more), then the ping-pong pair.
LADDER: dict[str, Fa3Config] = {
    "producer warp, 1 consumer (no ping-pong)": Fa3Config(64, 128, 1, 2, 240, 24, overlap=False),
    "producer warp, 2 consumers in ping-pong": Fa3Config(64, 128, 2, 2, 240, 24, overlap=False),
    "+ softmax overlapped with the next QKᵀ": Fa3Config(64, 128, 2, 2, 240, 24),
    "+ Q in registers": Fa3Config(64, 128, 2, 2, 240, 24, q_in_regs=True),
    "+ named-barrier hand-off, paired K/V ring": Fa3Config(64, 128, 2, 2, 240, 24, q_in_regs=True, named_turns=True,
                                                          kv_paired=True),
    "+ conditional rescale (FA-4)": SHIPPED[(128, False)],
}


_FWD_LAUNCH = CachedLaunch(_fa3_fwd)  # a short call is host-bound: launch without the JIT's dispatch


# Short sequences at head_dim 64: the shipped three consumers run 192 query rows a program, one program an SM (≥ 147 KB
# of shared memory; 168 registers × 384 threads fill the register file), so at 1K tokens B2 H16 the grid is 6 × 32 =
# 192 programs on 132 SMs: two waves of 192 rows. Two consumers of 64 rows (head_dim 128's design, with head_dim
# 128's options) make 256 programs: two waves of 128 rows. Measured on the H200 (GPU alone, B2 H16, BENCHMARKS.md
# §1b): ÷ the shipped config 1.31 / 1.28 / 0.96 / 0.97× at 512 / 1K / 2K / 4K not causal, 1.40 / 1.36 / 1.07 / 1.01×
# causal. A wave model says which wins: time ∝ waves × rows a program, a 128-row program covering its rows at
# SHORT_ROW_RATE of the shipped one's speed (fitted at 4K, where both fill the waves evenly; the model then gives
# 1.29 / 1.29 / 0.97 at 512 / 1K / 2K not causal, as measured).
# Two K/V slots (the first version had four, as §3c's head_dim 64 candidate): a program at 1K walks 8 tiles, and the
# smaller ring (82 KB of shared memory, not 147) measured 1.004-1.027x the 4-slot one at every length it runs
# (BENCHMARKS.md §1b, its variants).
# Programmatic dependent launch (pdl): a short call's launch begins while the kernel before it finishes. Measured on
# an H100 (2026-12-06, perf/h200/pdl.py, B2 H16 1K, back to back, the same config without it ÷ with): 1.043× (24.6 →
# 23.6 µs) not causal, 1.077× causal; bit for bit the same outputs, in a chain of dependent calls and a CUDA graph.
SHORT: dict[tuple[int, bool], Fa3Config] = {
    (64, False): Fa3Config(64, 128, 2, 2, 240, 24, q_in_regs=True, named_turns=True, kv_paired=True,
                           lazy_rescale=True, pdl=True),
    (64, True): Fa3Config(64, 128, 2, 2, 240, 24, q_in_regs=True, named_turns=True, kv_paired=True,
                          lazy_rescale=True, lpt=True, pdl=True),
}
SHORT_ROW_RATE = {False: 0.86, True: 0.90}
HOPPER_SMS = 132  # an H100 SXM's or an H200's SMs: what tiles_for plans for off Hopper (a launch asks its GPU)


def _waves_by_rows(config: Fa3Config, seq_len: int, batch_heads: int, sms: int) -> int:
    """Rows of queries one SM walks: the waves of query tiles (one tile a program, `sms` at a time) × the tile's rows."""
    tiles = triton.cdiv(seq_len, config.tile_m) * batch_heads
    return triton.cdiv(tiles, sms) * config.tile_m


def config_for_v3(head_dim: int, causal: bool, seq_len: int | None = None, batch_heads: int | None = None,
                  sms: int = HOPPER_SMS) -> Fa3Config:
    """The config the kernel runs: SHIPPED's for the head_dim and mask, or, given the shape's length and batch ×
    heads on `sms` SMs, SHORT's where the wave model says it finishes first; and given the shape, the tail split
    only where tail_plan splits something (elsewhere the same config without it: the 2-D grid, and the library's
    fast path)."""
    shipped = SHIPPED[(head_dim, causal)]
    short = SHORT.get((head_dim, causal))
    if seq_len is None or batch_heads is None:
        return shipped
    if short is not None and _waves_by_rows(short, seq_len, batch_heads, sms) < SHORT_ROW_RATE[causal] * _waves_by_rows(
            shipped, seq_len, batch_heads, sms):
        return short
    return tail_split_where_it_splits(shipped, seq_len, batch_heads, sms)


def tail_split_where_it_splits(config: Fa3Config, seq_len: int, batch_heads: int, sms: int = HOPPER_SMS) -> Fa3Config:
    """`config`, without its tail split where tail_plan splits nothing at this shape (the 1-D grid would only cost:
    the 2-D grid and the library's fast path run instead). 16-bit (config_for_v3) and e4m3 (config_for_fp8)."""
    if config.tail_split and tail_plan(triton.cdiv(seq_len, config.tile_m) * batch_heads,
                                       triton.cdiv(seq_len, config.block_n), sms)[1] == 1:
        return dataclasses.replace(config, tail_split=False)
    return config


def _config_for(q: torch.Tensor, causal: bool) -> Fa3Config:
    batch, heads, seq_len, head_dim = q.shape
    return config_for_v3(head_dim, causal, seq_len, batch * heads, sm_count(q.device))


# -- availability ----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def v3_unavailable_reason(device: torch.device | str | int | None = None, dtype: torch.dtype | None = None,
                           head_dim: int | None = None) -> str | None:
    """None when the FA-3 style kernel can run here (and on `dtype`, `head_dim` when given); otherwise one sentence
    a presenter can read out saying why not. Asked once per (device, dtype, head_dim): a short call is host-bound."""
    if gluon is None or compat.GLUON_IMPORT_ERROR:
        return (f"FA-3 style kernel needs Triton's Gluon, which this Triton ({triton.__version__}) lacks "
                f"({compat.GLUON_IMPORT_ERROR})")
    if dtype is not None and dtype not in SUPPORTED_DTYPES:
        name = DTYPE_NAMES.get(dtype, str(dtype))
        return f"FA-3 style kernel runs on float16 and bfloat16 inputs, not {name} (its wgmma reads 16-bit tiles)"
    if head_dim is not None and head_dim not in SUPPORTED_HEAD_DIMS:
        return f"FA-3 style kernel supports head_dim 64, 128 and 256, not {head_dim}"
    if INTERPRET:
        return "Gluon kernels do not run in Triton's CPU interpreter: the FA-3 style kernel needs a Hopper GPU"
    if AOT:
        return "ahead-of-time mode (FLASH_LIVE_BACKEND=aot) compiles the FA-3 style kernel but launches nothing"
    if not torch.cuda.is_available():
        return "FA-3 style kernel needs a CUDA GPU (Hopper, sm_90); none is visible"
    device = torch.device("cuda") if device is None else torch.device(device)
    if device.type != "cuda":
        return f"FA-3 style kernel runs on a CUDA GPU, not on {device.type}"
    major, minor = torch.cuda.get_device_capability(device)
    if major != 9:
        return f"FA-3 style kernel needs Hopper (sm_90); this GPU is sm_{major}{minor}"
    return None


# -- wrapper ---------------------------------------------------------------------------------------

def p_in_place_order(block_n: int) -> list[int]:
    """The key order of a tile of V that P·V reads when P stays where the scores left it (Fa3Config.p_in_place):
    position k holds key c(k) = k0 + 8·k1 + 2·k2 + 4·k3 + 16·(k >> 4) (the kernel's _p_operand says why)."""
    if block_n % 16:
        raise ValueError(f"P in place needs tiles of a multiple of 16 keys; got {block_n}")
    return [(k & 1) | ((k >> 1) & 1) << 3 | ((k >> 2) & 1) << 1 | ((k >> 3) & 1) << 2 | (k >> 4) << 4
            for k in range(block_n)]


@triton.jit
def _v_transposed_kernel(V, OUT, seq_len, padded, heads, s_b, s_h, s_n, s_d, o_bh, o_d,
                         HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, IN_PLACE: tl.constexpr):
    # one tile of BLOCK keys of one (batch, head): rows of V read (position k takes key c(k) under IN_PLACE), written
    # as columns of Vᵀ; keys past seq_len (the padding) are written as zeros
    tile = tl.program_id(0)
    bh = tl.program_id(1)
    k = tl.arange(0, BLOCK)
    if IN_PLACE:  # p_in_place_order
        c = (k & 1) | (((k >> 1) & 1) << 3) | (((k >> 2) & 1) << 1) | (((k >> 3) & 1) << 2) | ((k >> 4) << 4)
    else:
        c = k
    src = tile * BLOCK + c
    d = tl.arange(0, HEAD_DIM)
    rows = V + (bh // heads).to(tl.int64) * s_b + (bh % heads).to(tl.int64) * s_h
    x = tl.load(rows + src[:, None].to(tl.int64) * s_n + d[None, :] * s_d, mask=src[:, None] < seq_len, other=0)
    dst = tile * BLOCK + k
    tl.store(OUT + bh.to(tl.int64) * o_bh + d[:, None].to(tl.int64) * o_d + dst[None, :], tl.trans(x),
             mask=dst[None, :] < padded)


def v_transposed(v: torch.Tensor, p_in_place_block: int | None = None) -> torch.Tensor:
    """Vᵀ as the 8-bit kernel reads it: (B, H, D, N) with N contiguous, padded with zeros to a multiple of 16 keys
    (TMA's row strides are multiples of 16 bytes); the padding's keys are masked like any key past seq_len. With
    p_in_place_block (the config's block_n, when p_in_place), padded to whole tiles and each tile's keys in
    p_in_place_order. One pass of a Triton kernel over V (a strided PyTorch copy of 1-byte elements took 8-16 % of
    the e4m3 call on the H200)."""
    batch, heads, seq_len, head_dim = v.shape
    block = p_in_place_block or 128
    padded = -(-seq_len // (p_in_place_block or 16)) * (p_in_place_block or 16)
    raw = v.view(torch.uint8) if v.element_size() == 1 else v
    out = torch.empty((batch, heads, head_dim, padded), dtype=raw.dtype, device=v.device)
    with kernel_launch_lock():
        _v_transposed_kernel[(triton.cdiv(padded, block), batch * heads)](
            raw, out, seq_len, padded, heads, *raw.stride(), out.stride(1), out.stride(2),
            HEAD_DIM=head_dim, BLOCK=block, IN_PLACE=p_in_place_block is not None, num_warps=4)
    return out.view(v.dtype) if v.element_size() == 1 else out


TAIL_PART_COST = 0.03  # a part's fixed cost in program-times: its Q load, pipeline fill, store, share of the merge
TAIL_MAX_COST = 0.8  # split only where the model's tail takes at most this much of the unsplit tail's time: the part
#                      cost is an estimate, and a smaller gain (under a fifth of one program's time) is noise


@functools.lru_cache(maxsize=1024)
def tail_plan(tiles: int, key_tiles: int, sms: int) -> tuple[int, int, int]:
    """(main_tiles, splits, per_split) for Fa3Config.tail_split: `tiles` query tiles of `key_tiles` key tiles each,
    one a program, `sms` programs at a time. The whole waves' tiles run whole; the rest (fewer than sms) would leave
    SMs idle for a whole program's time at the end, so each is split along its keys into `splits` parts of
    `per_split` key tiles: the count that finishes the tail first by a cost model in program-times, ⌈rest·k ÷ sms⌉
    short waves × (per_split ÷ key_tiles + TAIL_PART_COST), against 1 for the unsplit tail (split only at
    ≤ TAIL_MAX_COST). Often that is one short wave (k × rest ≤ sms); where one cannot hold two parts of each tile
    (rest > sms ÷ 2: bf16 D128 8K, 68 left of 2,048) more short waves can (5 parts over 3). splits 1: no k pays, or
    nothing to split. Fewer tiles than SMs (short or few-head calls: host-bound, and not measured) are not split.
    Timed on H100s (2026-12-06, perf/h200/tail_split.py), split ÷ unsplit where only this rule splits: D256 B2 H8 16K
    1.034×, 1.072×; bf16 D128 8K 1.030× and 1.013× (B1 H32) at 04:27, 1.003× and 0.993× at 04:44 (level to +3 %)."""
    rest = tiles % sms
    if not rest or tiles < sms:
        return tiles, 1, key_tiles
    best, plan = TAIL_MAX_COST + 1e-9, (tiles, 1, key_tiles)
    for k in range(2, min(key_tiles, sms) + 1):
        per = -(-key_tiles // k)
        parts = -(-key_tiles // per)
        cost = -(-(rest * parts) // sms) * (per / key_tiles + TAIL_PART_COST)
        if cost < best - 1e-9:
            best, plan = cost, (tiles - rest, parts, per)
    return plan


@triton.jit
def _merge_tail_kernel(O, LSE, OP, LP, main_tiles, n_tiles, seq_len, splits, TILE_M: tl.constexpr,
                       HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    # split tile i (main_tiles + i in (batch·head, tile) order), rows BLOCK·pid(1) …: its parts' O (normalized,
    # bf16, OP (parts, TILE_M, D)) and LSE (LP (parts, TILE_M)) merged: LSE = log Σ e^lse_s, O = Σ e^(lse_s − LSE) O_s
    i = tl.program_id(0)
    flat = main_tiles + i
    bh = flat // n_tiles
    local = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    rows = (flat % n_tiles) * TILE_M + local
    d = tl.arange(0, HEAD_DIM)
    first = i * splits
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for s in range(splits):
        m = tl.maximum(m, tl.load(LP + (first + s) * TILE_M + local))
    den = tl.zeros([BLOCK], tl.float32)
    acc = tl.zeros([BLOCK, HEAD_DIM], tl.float32)
    for s in range(splits):
        w = tl.exp(tl.load(LP + (first + s) * TILE_M + local) - m)
        o = tl.load(OP + ((first + s) * TILE_M + local)[:, None].to(tl.int64) * HEAD_DIM + d[None, :])
        den += w
        acc += w[:, None] * o.to(tl.float32)
    keep = rows < seq_len
    out = bh.to(tl.int64) * seq_len + rows
    tl.store(LSE + out, m + tl.log(den), mask=keep)
    tl.store(O + out[:, None] * HEAD_DIM + d[None, :], (acc / den[:, None]).to(O.dtype.element_ty),
             mask=keep[:, None])


def launch_v3(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
              config: Fa3Config, profile: bool = False, descale: torch.Tensor | None = None,
              v_is_transposed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch. 8-bit (e4m3) q, k, v need `descale`: float32 (3, batch·heads), the descales of Q, K and V per
    head; V is transposed here (v_transposed) unless v_is_transposed (v is then v_transposed's output for this
    config: the kernel alone is timed, perf/h200/fp8_speed.py), and O comes back in bf16."""
    batch, heads, seq_len, head_dim = q.shape  # (B, H, N, D)
    if batch * heads > 65535:  # the grid's second dimension
        raise ValueError(f"batch × heads must be at most 65535 for the FA-3 kernel's grid; got {batch * heads}")
    fp8 = q.dtype == torch.float8_e4m3fn
    if config.tail_split and causal:
        raise ValueError("Fa3Config.tail_split is for the non-causal kernel (a causal launch orders its programs "
                         "longest first instead: lpt)")
    if (config.p_smem or config.o_in_ring) and not fp8:
        raise ValueError(f"Fa3Config.p_smem and o_in_ring (P, O through shared memory) are for 8-bit inputs; got "
                         f"{q.dtype}")
    if v_is_transposed and (not fp8 or v.shape[:3] != (batch, heads, head_dim) or v.shape[3] < seq_len):
        raise ValueError(f"v_is_transposed takes v_transposed(v) of 8-bit inputs, (B, H, D, ≥ N); got "
                         f"{tuple(v.shape)} {v.dtype}")
    if fp8 and (descale is None or descale.shape != (3, batch * heads) or descale.dtype != torch.float32):
        raise ValueError(f"8-bit inputs need descale, float32 of shape (3, {batch * heads}); got "
                         f"{None if descale is None else (tuple(descale.shape), descale.dtype)}")
    q, k, v = (tma_ready(t) for t in (q, k, v))
    o = torch.empty(q.shape, dtype=torch.bfloat16 if fp8 else q.dtype, device=q.device)  # (B, H, N, D)
    lse = torch.empty((batch, heads, seq_len), dtype=torch.float32, device=q.device)  # (B, H, N)
    q_desc, o_desc = (compat.make_descriptor(t, [1, 1, config.block_m, head_dim]) for t in (q, o))
    k_desc = compat.make_descriptor(k, [1, 1, config.block_n, head_dim])
    if fp8:  # wgmma reads 8-bit B operands K-major only: P·V takes Vᵀ (kernel docstring: why on the host)
        vt = v if v_is_transposed else v_transposed(v, config.block_n if config.p_in_place else None)
        v_desc = compat.make_descriptor(vt, [1, 1, head_dim, config.block_n])
        descale = descale.contiguous()
    else:
        v_desc = compat.make_descriptor(v, [1, 1, config.block_n, head_dim])
        descale = None
    grid, key, group, options = _launch_plan(q, config, causal, profile)
    o_part, lse_part, o2_desc, main, splits, per, parts = o, lse, o_desc, 0, 1, 0, 0  # (no split: unused)
    if config.tail_split:
        tiles = grid[0] * grid[1]
        main, splits, per = tail_plan(tiles, triton.cdiv(seq_len, config.block_n),
                                      sm_count(q.device) if q.device.type == "cuda" else HOPPER_SMS)
        parts = (tiles - main) * splits if splits > 1 else 0
        grid = (main + parts,)
        group = batch * heads  # the 1-D grid's kernel reads batch·heads here (heads_per_group: causal only)
        # the parts' scratch: O (parts, 1, tile rows, D) in O's dtype and the LSE (parts, tile rows)
        o_part = torch.empty((max(parts, 1), 1, config.tile_m, head_dim), dtype=o.dtype, device=q.device)
        lse_part = torch.empty((max(parts, 1), config.tile_m), dtype=torch.float32, device=q.device)
        o2_desc = compat.make_descriptor(o_part, [1, 1, config.block_m, head_dim])
    with kernel_launch_lock():
        _FWD_LAUNCH(key, grid, None, (q_desc, k_desc, v_desc, o_desc, lse, descale, sm_scale, seq_len, heads, group,
                                      o2_desc, lse_part, main, splits, per), options)
        if parts:
            merge_tail(o, lse, o_part, lse_part, main, splits)
    return o, lse


def merge_tail(o: torch.Tensor, lse: torch.Tensor, o_part: torch.Tensor, lse_part: torch.Tensor, main_tiles: int,
               splits: int) -> None:
    """Into o (B, H, N, D, contiguous) and lse (B, H, N): each split tile's parts merged by their LSE. o_part
    (parts, 1, tile rows, D) and lse_part (parts, tile rows) hold part p of tile main_tiles + p // splits, counting
    tiles in (batch·head, query tile) order; the caller holds the launch lock."""
    tile_m, head_dim = o_part.shape[2], o_part.shape[3]  # (tile rows: consumers × a multiple of 64)
    _merge_tail_kernel[(o_part.shape[0] // splits, tile_m // 64)](
        o, lse, o_part, lse_part, main_tiles, triton.cdiv(o.shape[2], tile_m), o.shape[2], splits, TILE_M=tile_m,
        HEAD_DIM=head_dim, BLOCK=64, num_warps=4)


def _launch_plan(q: torch.Tensor, config: Fa3Config, causal: bool, profile: bool) -> tuple[tuple, tuple, int, dict]:
    """(grid, the launch's key, the heads that take their query blocks in turn, the constexprs and options) of a launch
    on inputs like q: what launch_v3 and fast_launcher hand _FWD_LAUNCH."""
    batch, heads, seq_len, head_dim = q.shape
    grid = (triton.cdiv(seq_len, config.tile_m), batch * heads)
    group = (costmodel.lpt_heads_per_group(batch * heads, seq_len, head_dim, q.element_size())
             if config.lpt and causal else 1)
    # the key fixes the specialization: every int is do_not_specialize, the descriptors' type is (dtype, box)
    key = (q.dtype, head_dim, config, causal, profile, q.dtype == torch.float8_e4m3fn)
    options = dict(CFG=config, CAUSAL=causal,
                   PROFILE=profile,  # Proton scopes on the phases (bench/phases.py); off in every shipped call
                   num_warps=4, maxnreg=config.maxnreg)
    if config.pdl:
        options["launch_pdl"] = True
    return grid, key, group, options


def fast_launcher(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float):
    """For the library's fast path (kernels/attention.py): a function (q, k, v, need_lse) -> (O, LSE or None) for
    calls whose inputs have these inputs' shape, strides, dtype, device and 16-byte alignment, with this causal and
    scale, which skips
    what such a call has settled already (the checks, the config, the grid, the descriptors' checks); None where
    these inputs need the checked path (no Hopper, FP8, a copy to make them TMA-ready). The caller checks q, k, v as
    flash_attention_v3 does once (sm_scale is the checked scale), and then only that the next call's match."""
    from kernels.runtime import discard_buffer, install_encoding_cache
    if q.dtype not in SUPPORTED_DTYPES or v3_unavailable_reason(q.device, q.dtype, q.shape[-1]) is not None:
        return None
    if not all(tma_aligned(t) for t in (q, k, v)) or not q.shape == k.shape == v.shape:
        return None
    batch, heads, seq_len, head_dim = q.shape
    if batch * heads > 65535:
        return None
    scale = float(sm_scale)
    config = _config_for(q, causal)
    if config.tail_split:  # (only where something is split: config_for_v3) the checked path, launch_v3
        return None
    o0 = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    make_q, make_o = (compat.descriptor_template(t, [1, 1, config.block_m, head_dim]) for t in (q, o0))
    make_k, make_v = (compat.descriptor_template(t, [1, 1, config.block_n, head_dim]) for t in (k, v))
    install_encoding_cache()
    grid, key, group, options = _launch_plan(q, config, causal, False)
    shape, lse_shape, dtype, device = tuple(q.shape), (batch, heads, seq_len), q.dtype, q.device

    launch = _FWD_LAUNCH.repeat(key, grid, options)
    lse_floats = batch * heads * seq_len

    def run(q, k, v, need_lse=True):
        o = torch.empty(shape, dtype=dtype, device=device)
        # without need_lse the kernel writes the LSE where nothing reads it: one allocation fewer a call
        lse = torch.empty(lse_shape, dtype=torch.float32, device=device) if need_lse else \
            discard_buffer(device, lse_floats)
        o_desc = make_o(o)
        launch((make_q(q), make_k(k), make_v(v), o_desc, lse, None, scale, seq_len, heads, group, o_desc, lse, 0, 1,
                0))
        return o, (lse if need_lse else None)
    run.launch = launch  # (tests read what the launch keeps)
    return run


def flash_attention_v3(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                       sm_scale: float | None = None, return_lse: bool = False,
                       config: Fa3Config | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention output O = softmax(sm_scale · Q Kᵀ [causal mask]) V on a Hopper GPU, FA-3 style.

    q, k, v: (batch, heads, seq_len, head_dim), float16 or bfloat16, head_dim 64, 128 or 256, any seq_len ≥ 1, on a
    CUDA device of compute capability 9.x. sm_scale defaults to 1/sqrt(head_dim). Returns O (batch, heads, seq_len,
    head_dim) in the input dtype, and with return_lse=True also the row log-sum-exp (batch, heads, seq_len), float32,
    natural log. Extra device memory: O and the LSE. `config` overrides the shipped one.
    Raises (with v3_unavailable_reason's sentence) where the kernel cannot run.
    """
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, kernel="fa3")
    head_dim = q.shape[-1]
    reason = v3_unavailable_reason(q.device, q.dtype, head_dim)
    if reason is not None:
        if q.dtype not in SUPPORTED_DTYPES:
            raise TypeError(reason)
        if head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(reason)
        raise RuntimeError(reason)
    config = config or _config_for(q, causal)
    o, lse = launch_v3(q, k, v, causal, sm_scale, config)
    return (o, lse) if return_lse else o


# -- what the house needs of this kernel (its spec in kernels/specs.py names these) ----------------------------

def tiles_for(shape) -> tuple[int, int] | None:
    """(query rows per program, keys per K/V tile) for a shape (costmodel.Shape): its consumer warpgroups' rows
    together, as the grid runs; None where it does not run the shape's head_dim."""
    if (shape.head_dim, shape.causal) not in SHIPPED:
        return None
    here = v3_unavailable_reason() is None  # a Hopper GPU: the launch plans for its SMs; else for an H200's
    config = config_for_v3(shape.head_dim, shape.causal, shape.seq_len, shape.batch * shape.heads,
                           sm_count(torch.device("cuda")) if here else HOPPER_SMS)
    return config.tile_m, config.block_n


def unavailable_for(shape, device: torch.device | None = None) -> str | None:
    """Why the kernel cannot run this shape (costmodel.Shape) here, on `device` when given (None when it can)."""
    from kernels.inputs import DTYPES_BY_NAME
    return v3_unavailable_reason(device, dtype=DTYPES_BY_NAME[shape.dtype], head_dim=shape.head_dim)


def proton_launcher(head_dim: int, causal: bool, dtype: torch.dtype):
    """(launch(q, k, v, causal, scale, profile), its config as plain data, the warps Proton samples, its language) for
    bench/phases.py: one warp per consumer warpgroup, and every warp of the last warpgroup (the producer's is there)."""
    config = dataclasses.replace(config_for_v3(head_dim, causal), tail_split=False)  # (one program's inside)

    def launch(q, k, v, causal, scale, profile=False):
        return launch_v3(q, k, v, causal, scale, config, profile=profile)
    producer_group = 4 * config.num_consumers
    return (launch, {**config.__dict__, "tile_m": config.tile_m},
            [4 * i for i in range(config.num_consumers)] + list(range(producer_group, producer_group + 4)), "gluon")


def shipped_launches():
    """Every shipped configuration and every row of the ladder, fp16 and bf16, as (label, targets, launch) for the
    ahead-of-time compile check (Hopper only: wgmma)."""
    from kernels.inputs import example_qkv
    rows = [("", d, c, config) for (d, c), config in sorted(SHIPPED.items())]
    rows += [("where nothing is split: ", d, c, dataclasses.replace(config, tail_split=False))
             for (d, c), config in sorted(SHIPPED.items()) if config.tail_split]
    rows += [("short sequences: ", d, c, config) for (d, c), config in sorted(SHORT.items())]
    rows += [(f"ladder: {name}: ", 128, False, config) for name, config in LADDER.items()
             if config not in SHIPPED.values()]
    launches = []
    from kernels.fp8 import PV_PROMOTE_FITS, config_for_fp8, fp8_candidates
    fp8_rows = [("", d, c, config_for_fp8(d, c)) for d, c in sorted(SHIPPED)]
    fp8_rows += [("fp8 where nothing is split: ", d, c, dataclasses.replace(config_for_fp8(d, c), tail_split=False))
                 for d, c in sorted(SHIPPED) if config_for_fp8(d, c).tail_split]
    fp8_rows += [("fp8 precise_pv: ", d, c, config_for_fp8(d, c, True)) for d, c in sorted(PV_PROMOTE_FITS)
                 if config_for_fp8(d, c, True) != config_for_fp8(d, c)]
    fp8_rows += [(f"fp8 candidate: {name}: ", d, c, config) for name, (d, c, config) in fp8_candidates().items()]
    for where, head_dim, causal, config in fp8_rows:  # 8-bit inputs (kernels/fp8.py): e4m3 Q, K, Vᵀ, per-head descales
        q, k, v = (t.to(torch.float8_e4m3fn) for t in example_qkv(head_dim, torch.float32, seq_len=1000))
        descale = torch.ones(3, q.shape[0] * q.shape[1])
        launches.append((f"{where}D={head_dim} float8_e4m3fn {'causal' if causal else 'full'} {config.label}", ("sm_90",),
                         lambda q=q, k=k, v=v, c=causal, g=config, d=descale: launch_v3(q, k, v, c, 0.125, g,
                                                                                        descale=d)))
    for where, head_dim, causal, config in rows:
        for dtype in SUPPORTED_DTYPES:
            q, k, v = example_qkv(head_dim, dtype, seq_len=1000)
            launches.append((f"{where}D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} {config.label}",
                             ("sm_90",), lambda q=q, k=k, v=v, c=causal, g=config: launch_v3(q, k, v, c, 0.125, g)))
    return launches
