"""Decoding against a KV cache: split-KV flash-decoding in Triton (issue 39), also runnable in the CPU interpreter.

At decode time a step has one new query per sequence (or a short chunk, q_len rows) and a long cache of keys and
values. One program per query block, as the prefill kernel launches, would leave most SMs idle (batch·heads programs,
each streaming the whole cache), so this kernel parallelizes over the cache instead:

- the split kernel: one program per (batch·K/V head, split, row block). It streams its split, a contiguous run of key
  blocks of one sequence's cache, ONCE for all the query heads that share that K/V head: the group's q_len × group
  query rows are packed into the rows of one tile (row r = g·q_len + i: query i of the group's head g; padded up to
  16 rows, the smallest tile tl.dot takes on a GPU). It keeps the online softmax's running row max m and row sum l
  (base 2, log2(e) folded into the scale, as kernels/fa2.py does) and writes its partial O, normalized by its own l,
  in fp32, with its LSE (natural log);
- the merge: the last split of each (batch·K/V head, row block) to finish (an int32 counter, an acq_rel atomic)
  combines the splits' (O_s, LSE_s) by their log-sum-exp: the ⊕ of two softmax states, the same algebra as the
  online softmax one level up. One launch whatever the split count (a decode step is bound by the host: each launch
  costs it more than the GPU's work at a few thousand keys); one split writes O and LSE directly.

The cache is contiguous (batch, heads_kv, max_len, head_dim) or paged (num_pages, page_size, heads_kv, head_dim) with
a block table mapping each sequence's logical page to a physical one (vLLM's and FlashAttention's layout). Keys are
read through TMA tensor descriptors for 16-bit caches on Hopper (contiguous, or paged with pages a whole number of
key blocks: one page per tile), else by pointer loads that gather each key's row through the block table.

A query row that sees no key (causal with a cache shorter than q_len, or a length of 0: refused when the lengths are
checked) gets O = 0 and LSE = −inf. Lengths and block tables on the GPU are not read on the host (no sync, so a call
can be captured in a CUDA graph): the kernel clamps a length outside [0, max_len] and never follows a page outside
the cache, and the rows they serve come out NaN. The split count, when left open, comes from
costmodel.decode_num_splits (flash-attn's wave rule, a single wave filled) on the GPU's SMs × 2 programs each,
rounded down to the merge's load width where that leaves at most 1 in 32 out (choose_num_splits). The trace mode
(TRACE) records per key block the packed rows' running m and l
and per split its final (m, l), so the page can animate the splits, then the merge, from the kernel's own numbers.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field, replace
from numbers import Real

from kernels.runtime import DEVICE, INTERPRET, CachedLaunch, fit_shared_memory, fitted_config, kernel_launch_lock, quick_descriptor, sm_count, stream_key, tma_device  # first: it sets TRITON_INTERPRET
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import costmodel
from triton.runtime.errors import OutOfResources
from kernels.inputs import DTYPES_BY_NAME, SUPPORTED_DTYPES, SUPPORTED_HEAD_DIMS, dot_modes

LN2 = costmodel.LN2
LN2_KERNEL: tl.constexpr = tl.constexpr(costmodel.LN2)
LOG2_E_KERNEL: tl.constexpr = tl.constexpr(costmodel.LOG2_E)
MAX_GRID_YZ = 65535  # CUDA's limit on the grid's 2nd and 3rd axes (splits, row blocks)


@triton.jit
def _record_step(trace, step, m_i, l_i, BLOCK_M: tl.constexpr, TRACE: tl.constexpr):
    # the trace mode's record of one step: the packed rows' running m (log2 units) and l
    if TRACE:
        rows = tl.arange(0, BLOCK_M)
        tl.store(trace + step * (2 * BLOCK_M) + rows, m_i)
        tl.store(trace + step * (2 * BLOCK_M) + BLOCK_M + rows, l_i)


@triton.jit
def _find_pages(BT, stride_bt1, start_n, keys, seq_len, num_pages, PAGE_SIZE: tl.constexpr, MASKED: tl.constexpr,
                USE_TMA: tl.constexpr):
    # paged cache: the physical page of each key (pointer gather), or of the whole tile (TMA: one page per tile),
    # and how many of them point outside the cache (a block table on the GPU is not read on the host: such a page
    # is never followed, and the rows it serves come out NaN)
    if PAGE_SIZE == 0:
        pages = 0
        bad = 0
    elif USE_TMA:  # TMA reads a box outside the tensor as zeros: no fault, only the NaN flag
        pages = tl.load(BT + (start_n // PAGE_SIZE) * stride_bt1)
        bad = ((pages < 0) | (pages >= num_pages)).to(tl.int32)
    else:
        if MASKED:  # block-table entries past the sequence may hold anything: never follow them
            pages = tl.load(BT + (keys // PAGE_SIZE) * stride_bt1, mask=keys < seq_len, other=0)
        else:
            pages = tl.load(BT + (keys // PAGE_SIZE) * stride_bt1)
        outside = (pages < 0) | (pages >= num_pages)
        bad = tl.sum(outside.to(tl.int32), 0)
        pages = tl.where(outside, 0, pages)
    return pages, bad


@triton.jit
def _load_tile(src, b, hkv, start_n, pages, keys, seq_len, s_outer, s_inner, s_head, offs_d,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
               MASKED: tl.constexpr, USE_TMA: tl.constexpr):
    # one (BLOCK_N, HEAD_DIM) tile of K or V; keys past the sequence's length read as zeros (the cache holds
    # anything there, NaN included, and 0 · NaN would leak into P·V)
    if USE_TMA:
        if PAGE_SIZE == 0:
            tile = src.load([b, hkv, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        else:
            tile = src.load([pages, start_n % PAGE_SIZE, hkv, 0]).reshape(BLOCK_N, HEAD_DIM)
        if MASKED:
            tile = tl.where((keys < seq_len)[:, None], tile, 0.0)
    else:
        if PAGE_SIZE == 0:  # (outer, inner) = (sequence, key)
            rows = b.to(tl.int64) * s_outer + keys.to(tl.int64) * s_inner
        else:               # (outer, inner) = (page, slot in the page)
            rows = pages.to(tl.int64) * s_outer + (keys % PAGE_SIZE) * s_inner
        ptrs = src + hkv.to(tl.int64) * s_head + rows[:, None] + offs_d[None, :]
        if MASKED:
            tile = tl.load(ptrs, mask=(keys < seq_len)[:, None], other=0.0)
        else:
            tile = tl.load(ptrs)
    return tile


@triton.jit
def _decode_inner(acc, l_i, m_i, bad, q, K, V, BT, stride_bt1, num_pages, trace, b, hkv, lo, hi, split_lo, seq_len,
                  last_key, qk_scale, offs_n, offs_d, stride_k0, stride_k1, stride_kh, stride_v0, stride_v1, stride_vh,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
                  MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr,
                  USE_TMA: tl.constexpr, TRACE: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        pages, bad_here = _find_pages(BT, stride_bt1, start_n, keys, seq_len, num_pages, PAGE_SIZE, MASKED, USE_TMA)
        bad += bad_here
        # -- load the K tile (BLOCK_N keys of this sequence, through the block table when paged) --
        k = _load_tile(K, b, hkv, start_n, pages, keys, seq_len, stride_k0, stride_k1, stride_kh, offs_d,
                       BLOCK_N, HEAD_DIM, PAGE_SIZE, MASKED, USE_TMA)
        if DOT_FP32:
            k = k.to(tl.float32)
        # -- compute qk: the packed rows' raw scores (the scale is folded in below) --
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        if MASKED:  # the cache's tail, and causal: query i sees keys up to last_key[i] = L − q_len + i
            keep = (keys < seq_len)[None, :]
            if CAUSAL:
                keep = keep & (keys[None, :] <= last_key[:, None])
            qk = tl.where(keep, qk, float("-inf"))
        # -- update m_i and l_i (online softmax, log2 units) --
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        m_ref = m_new
        if MASKED:  # a row that has seen no key yet keeps m = −inf; exponentiate against 0 instead of −inf
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(qk * qk_scale - m_ref[:, None])
        alpha = tl.math.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, 1)
        # -- rescale the accumulator, then add P·V --
        v = _load_tile(V, b, hkv, start_n, pages, keys, seq_len, stride_v0, stride_v1, stride_vh, offs_d,
                       BLOCK_N, HEAD_DIM, PAGE_SIZE, MASKED, USE_TMA)
        p = p.to(v.dtype)
        if DOT_FP32:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p, v, acc, input_precision=PRECISION)
        m_i = m_new
        _record_step(trace, (start_n - split_lo) // BLOCK_N, m_i, l_i, BLOCK_M, TRACE)
    return acc, l_i, m_i, bad


# num_splits, q_len and the lengths are not specialized: one compile serves every split count and cache length
@triton.jit(do_not_specialize=["q_len", "max_len", "heads_kv", "num_splits", "num_pages", "max_steps", "lse_offset",
                               "part_lse_offset"])
def _decode_split(Q, K, V, O, LSE, O_PART, COUNTERS, SEQLENS, BLOCK_TABLE, TRACE_STEPS, TRACE_SPLITS,
                  sm_scale, q_len, max_len, heads_kv, num_splits, num_pages, max_steps, lse_offset, part_lse_offset,
                  stride_qb, stride_qh, stride_qn, stride_qd,
                  stride_k0, stride_k1, stride_kh, stride_v0, stride_v1, stride_vh, stride_sl, stride_bt0, stride_bt1,
                  HEAD_DIM: tl.constexpr, GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, CAUSAL: tl.constexpr, HAS_SEQLENS: tl.constexpr,
                  USE_TMA: tl.constexpr, DOT_FP32: tl.constexpr, PRECISION: tl.constexpr, TRACE: tl.constexpr,
                  MERGE: tl.constexpr, MERGE_SPLITS: tl.constexpr, MERGE_ROWS: tl.constexpr):
    # K, V: 4-D tensor descriptors when USE_TMA, else pointers. Their strides come as (outer, inner, head):
    # (batch, key, head) for a contiguous cache, (page, slot, head) for a paged one; head_dim is unit-stride.
    # O, LSE (at LSE + lse_offset): the final (B, H, q_len, D) / (B, H, q_len), contiguous. MERGE (num_splits > 1):
    # each split writes its partial O (fp32) and LSE to O_PART (B, H, q_len, num_splits, D) and O_PART +
    # part_lse_offset (B, H, q_len, num_splits), then counts itself done in COUNTERS (one int32 per (batch·K/V head,
    # row block), zero between launches); the last split of its rows to finish merges them all into O and LSE and
    # sets its counter back to zero. One launch, no merge kernel.
    # SEQLENS, BLOCK_TABLE, TRACE_STEPS, TRACE_SPLITS: None where unused (no lengths, contiguous, no trace): a None
    # is a constant, not an argument the host packs on every launch.
    # A length outside [0, max_len] or a page outside the cache (GPU values the wrapper does not read) is clamped
    # for the addressing, and the rows it serves get O = NaN and LSE = NaN: never a plausible wrong answer.
    bh = tl.program_id(0)
    split = tl.program_id(1)
    row_block = tl.program_id(2)
    b = bh // heads_kv
    hkv = bh % heads_kv
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # -- this split's keys: an even share of this sequence's key blocks --
    if HAS_SEQLENS:
        seq_len = tl.load(SEQLENS + b * stride_sl)
        bad_len = (seq_len < 0) | (seq_len > max_len)
        seq_len = tl.minimum(tl.maximum(seq_len, 0), max_len)
    else:
        seq_len = max_len
        bad_len = False
    per_split = tl.cdiv(tl.cdiv(seq_len, BLOCK_N), num_splits)
    lo = split * per_split * BLOCK_N
    hi = tl.minimum(lo + per_split * BLOCK_N, seq_len)  # hi <= lo: an empty split (writes m = −inf, l = 0)
    # -- load the packed Q tile once: row r = g·q_len + i is query i of head hkv·GROUP + g --
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    g = rows // q_len
    i = rows % q_len
    row_ok = rows < GROUP * q_len
    head = (hkv * GROUP + g).to(tl.int64)
    q_ptrs = (Q + b.to(tl.int64) * stride_qb + head[:, None] * stride_qh + i[:, None] * stride_qn
              + offs_d[None, :] * stride_qd)
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    if DOT_FP32:
        q = q.to(tl.float32)
    qk_scale = sm_scale * LOG2_E_KERNEL  # exp(x) == exp2(x·log2 e)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if PAGE_SIZE > 0:
        BT = BLOCK_TABLE + b.to(tl.int64) * stride_bt0
    else:  # contiguous: no block table (None)
        BT = BLOCK_TABLE
    bad = 0  # block-table entries seen outside the cache
    program = (bh * num_splits + split) * tl.num_programs(2) + row_block
    if TRACE:
        trace = TRACE_STEPS + program.to(tl.int64) * max_steps * 2 * BLOCK_M
    else:  # no trace buffers (None)
        trace = TRACE_STEPS
    # causal, aligned bottom-right: query i sees keys 0 .. L − q_len + i. Key blocks below full_hi are seen whole
    # by every row (no mask); the rest (the diagonal, the cache's tail) are masked.
    last_key = seq_len - q_len + i
    if CAUSAL:
        full_hi = tl.maximum(seq_len - q_len + 1, 0) // BLOCK_N * BLOCK_N
    else:
        full_hi = seq_len // BLOCK_N * BLOCK_N
    acc, l_i, m_i, bad = _decode_inner(acc, l_i, m_i, bad, q, K, V, BT, stride_bt1, num_pages, trace, b, hkv, lo,
                                       tl.minimum(hi, full_hi), lo, seq_len, last_key, qk_scale, offs_n, offs_d,
                                  stride_k0, stride_k1, stride_kh, stride_v0, stride_v1, stride_vh,
                                  BLOCK_M, BLOCK_N, HEAD_DIM, PAGE_SIZE, False, CAUSAL, DOT_FP32, PRECISION,
                                  USE_TMA, TRACE)
    acc, l_i, m_i, bad = _decode_inner(acc, l_i, m_i, bad, q, K, V, BT, stride_bt1, num_pages, trace, b, hkv,
                                       tl.maximum(lo, full_hi), hi, lo, seq_len, last_key, qk_scale, offs_n, offs_d,
                                  stride_k0, stride_k1, stride_kh, stride_v0, stride_v1, stride_vh,
                                  BLOCK_M, BLOCK_N, HEAD_DIM, PAGE_SIZE, True, CAUSAL, DOT_FP32, PRECISION,
                                  USE_TMA, TRACE)
    if TRACE:
        _record_step(TRACE_SPLITS + program.to(tl.int64) * 2 * BLOCK_M, 0, m_i, l_i, BLOCK_M, TRACE)
    # -- write the split's partial O (normalized by its own l) and LSE (natural log; −inf where it saw no key) --
    lse = (m_i + tl.math.log2(l_i)) * LN2_KERNEL
    o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    poisoned = bad_len | (bad > 0)
    lse = tl.where(poisoned, float("nan"), lse)
    o = tl.where(poisoned, float("nan"), o)
    out_row = (b * heads_kv * GROUP + head) * q_len + i  # the row of (B, H, q_len)
    if MERGE:
        part_row = out_row * num_splits + split
        tl.store(O_PART + part_lse_offset + part_row, lse, mask=row_ok)
        tl.store(O_PART + part_row[:, None] * HEAD_DIM + offs_d[None, :], o, mask=row_ok[:, None])
        # -- the last split of these rows to finish merges them all (its partial stores above, every thread's, are
        #    released by the barrier and the counter's acq_rel add; the merge reads the others' through L2) --
        tl.debug_barrier()
        counter = COUNTERS + bh * tl.num_programs(2) + row_block
        done = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if done == num_splits - 1:
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")  # zero for the next launch
            _merge_splits(O_PART, part_lse_offset, O, LSE + lse_offset, b, hkv, row_block, heads_kv, q_len,
                          num_splits, GROUP, BLOCK_M, HEAD_DIM, MERGE_SPLITS, MERGE_ROWS)
    else:
        tl.store(LSE + lse_offset + out_row, lse, mask=row_ok)
        tl.store(O + out_row[:, None] * HEAD_DIM + offs_d[None, :], o.to(O.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _merge_splits(O_PART, part_lse_offset, O, LSE, b, hkv, row_block, heads_kv, q_len, num_splits,
                  GROUP: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, MERGE_SPLITS: tl.constexpr,
                  MERGE_ROWS: tl.constexpr):
    # fold the splits' (O_s, LSE_s) into one softmax state for each of this program's real rows (a decode step has
    # GROUP of them), MERGE_ROWS rows × MERGE_SPLITS splits per load: (m, l, acc) ⊕ (LSE_s, O_s), each split
    # weighted by l_s · 2^(m_s − m), the online softmax's algebra one level up. Wide loads keep the merge short: it
    # runs after every other split of the row block is done, each load an L2 round trip the next waits on (at B1
    # 32/8 heads 128K, with one row a load: merging split after split measured 3 % slower, splits 4 at a time 46 %
    # slower, H200, 2026-12-04; a K/V head's 4 query rows in one load instead of one after another 1.027×, 1.014× at
    # 256K, an H100, 2026-12-06)
    offs_s = tl.arange(0, MERGE_SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_r = tl.arange(0, MERGE_ROWS)
    first = row_block * BLOCK_M
    rows = tl.minimum(BLOCK_M, GROUP * q_len - first)
    for r0 in range(0, rows, MERGE_ROWS):
        row_ok = r0 + offs_r < rows
        packed = first + r0 + offs_r
        g = packed // q_len
        i = packed % q_len
        out_row = ((b * heads_kv + hkv) * GROUP + g).to(tl.int64) * q_len + i  # [MERGE_ROWS] rows of (B, H, q_len)
        m = tl.full([MERGE_ROWS], float("-inf"), dtype=tl.float32)
        l = tl.zeros([MERGE_ROWS], dtype=tl.float32)
        acc = tl.zeros([MERGE_ROWS, HEAD_DIM], dtype=tl.float32)
        nans = tl.zeros([MERGE_ROWS], dtype=tl.int32)
        for s0 in range(0, num_splits, MERGE_SPLITS):
            split = s0 + offs_s
            ok = row_ok[:, None] & (split < num_splits)[None, :]
            part = out_row[:, None] * num_splits + split[None, :]  # [rows, splits]
            lse_s = tl.load(O_PART + part_lse_offset + part, mask=ok, other=float("-inf"), cache_modifier=".cg")
            o_s = tl.load(O_PART + part[:, :, None] * HEAD_DIM + offs_d[None, None, :], mask=ok[:, :, None],
                          other=0.0, cache_modifier=".cg")
            nans += tl.sum((lse_s != lse_s).to(tl.int32), 1)
            lse_s = tl.where(lse_s != lse_s, float("-inf"), lse_s) * LOG2_E_KERNEL
            m_new = tl.maximum(m, tl.max(lse_s, 1))
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.math.exp2(m - m_ref)
            w = tl.math.exp2(lse_s - m_ref[:, None])
            l = l * alpha + tl.sum(w, 1)
            acc = acc * alpha[:, None] + tl.sum(w[:, :, None] * o_s, 1)
            m = m_new
        tl.store(LSE + out_row, tl.where(nans > 0, float("nan"), (m + tl.math.log2(l)) * LN2_KERNEL), mask=row_ok)
        o = tl.where(nans[:, None] > 0, float("nan"), acc / tl.where(l == 0.0, 1.0, l)[:, None])
        tl.store(O + out_row[:, None] * HEAD_DIM + offs_d[None, :], o.to(O.dtype.element_ty), mask=row_ok[:, None])


_SPLIT_LAUNCH = CachedLaunch(_decode_split)  # a decode step is host-bound: launch without the JIT's dispatch
_STATIC_ARGS: dict = {}  # (plan serial, TMA, trace, LSE returned) -> the launch's grid, integers and constexprs


# -- configs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DecodeConfig:
    block_n: int              # keys per tile
    num_warps: int
    num_stages: int
    max_block_m: int = 64     # most packed query rows per program; more (long chunks, big groups) get row blocks
    programs_per_sm: int = 2  # num_splits=None: the GPU's slots for the split heuristic are SMs × this (residency)
    tma: bool = True          # TMA tensor descriptors where the layout allows (16-bit, Hopper, aligned)
    merge_splits: int = 32    # splits the merge reads in one load (a power of two; more splits take more loads)
    merge_rows: int = 4       # rows the merge reads in that load (a power of two; a row block's rows take ⌈÷⌉ loads;
    #                           rows × splits × head_dim ÷ threads is the load's registers a thread: 128 at 4·32·128)

    def __post_init__(self):
        m = self.merge_splits
        if isinstance(m, bool) or not isinstance(m, int) or m < 2 or m & (m - 1):
            raise ValueError(f"DecodeConfig.merge_splits is a power of two from 2; got {m!r}")
        r = self.merge_rows
        if isinstance(r, bool) or not isinstance(r, int) or r < 1 or r & (r - 1):
            raise ValueError(f"DecodeConfig.merge_rows is a power of two from 1; got {r!r}")


# Tuned on the H200 (perf/h200/decode_speed.py sweeps tiles and split counts; BENCHMARKS.md §1b has the runs). A
# decode step streams the cache once: each stage holds a K and a V tile (32 KiB at head_dim 128, 16-bit), and three
# stages (~88 KiB of shared memory) leave room for 2 programs per SM, the residency the split heuristic assumes.
TUNED_DECODE_CONFIGS: dict[tuple[int, int], DecodeConfig] = {
    (64, 2): DecodeConfig(128, 4, 3),
    (128, 2): DecodeConfig(64, 4, 3),
    (256, 2): DecodeConfig(32, 4, 3, merge_rows=2),
}
# A paged cache (num_pages, page_size, heads_kv, head_dim) puts one key's heads side by side, so a head's tile is
# rows of head_dim elements a page's row apart. Gathered by pointer loads in tiles of 128 keys (two pages of 64),
# it measured 2.5-4 % slower than the contiguous cache; through TMA, one page per tile, 6-21 % (2026-12-04).
TUNED_PAGED_DECODE_CONFIGS: dict[tuple[int, int], DecodeConfig] = {
    (128, 2): DecodeConfig(128, 4, 3, tma=False),
}
# Below this many cache bytes a decode step's GPU work (~30 µs at the H200's ~4.3 TB/s) is shorter than the host's
# launch, and TMA's two host-side tensor descriptors cost the host ~14 µs a call (measured on the H200's host):
# such caches take pointer loads, with one more stage in flight.
HOST_BOUND_BYTES = 128 << 20
HOST_BOUND_DECODE_CONFIGS: dict[tuple[int, int], DecodeConfig] = {
    (128, 2): DecodeConfig(64, 4, 4, tma=False),
}
_INTERPRETER_DECODE_CONFIG = DecodeConfig(64, 4, 1)  # ~10 ms per tile whatever its size: few, large tiles


def _default_decode_config(head_dim: int, dtype_bytes: int) -> DecodeConfig:
    if dtype_bytes == 4:  # fp32's IEEE dot runs on the FMA units from registers: small key tiles keep it unspilled
        return DecodeConfig(16 if head_dim >= 128 else 64, 8 if head_dim == 256 else 4, 2)
    return DecodeConfig(128 if head_dim <= 64 else 64 if head_dim == 128 else 32, 4, 3)


def config_for_decode(head_dim: int, dtype: torch.dtype, page_size: int = 0,
                      cache_bytes: int | None = None) -> DecodeConfig:
    """The tile and launch settings for this shape class: paged (page_size > 0) or contiguous, and for a contiguous
    cache of fewer than HOST_BOUND_BYTES (K and V, cache_bytes; None: a large one) the host-bound settings where
    they are tuned. A paged cache without tuned settings whose pages are a power of two from 32 up, smaller than
    the key tile, gets tiles of one page (so TMA can read them); other pages are gathered."""
    if INTERPRET:
        return _INTERPRETER_DECODE_CONFIG
    return gpu_decode_config(head_dim, torch.empty((), dtype=dtype).element_size(), page_size, cache_bytes)


def gpu_decode_config(head_dim: int, dtype_bytes: int, page_size: int = 0, cache_bytes: int | None = None,
                      ) -> DecodeConfig:
    """config_for_decode on a GPU (also where the interpreter runs: the cost model of a recorded GPU shape)."""
    key = (head_dim, dtype_bytes)
    if page_size and key in TUNED_PAGED_DECODE_CONFIGS:
        return TUNED_PAGED_DECODE_CONFIGS[key]
    if not page_size and cache_bytes is not None and cache_bytes < HOST_BOUND_BYTES and key in HOST_BOUND_DECODE_CONFIGS:
        return HOST_BOUND_DECODE_CONFIGS[key]
    config = TUNED_DECODE_CONFIGS.get(key, _default_decode_config(head_dim, dtype_bytes))
    if config.tma and 32 <= page_size < config.block_n and page_size & (page_size - 1) == 0:
        config = replace(config, block_n=page_size)
    return config


def smaller_decode_config(config: DecodeConfig) -> DecodeConfig | None:
    """The next settings to try where config's build needs more shared memory than the GPU gives a block
    (runtime.fit_shared_memory): one stage fewer, down to 1; then half the keys a tile, down to 16; then half the
    packed query rows a program, down to 16. None: nothing smaller."""
    if config.num_stages > 1:
        return replace(config, num_stages=config.num_stages - 1)
    if config.block_n > costmodel.MIN_TILE:
        return replace(config, block_n=config.block_n // 2)
    if config.max_block_m > costmodel.MIN_TILE:
        return replace(config, max_block_m=config.max_block_m // 2)
    return None


def _fit_key(device: torch.device, dtype: torch.dtype, head_dim: int, page_size: int) -> tuple:
    return ("decode", device.index, dtype, head_dim, page_size)


def packed_rows(group: int, q_len: int, config: DecodeConfig) -> int:
    """Rows of a program's tile (block_m): the group's q_len × group query rows, padded to a power of two from 16
    (tl.dot's least on a GPU) up to config.max_block_m (more rows take more row blocks)."""
    return min(max(costmodel.MIN_TILE, triton.next_power_of_2(group * q_len)), config.max_block_m)


def kv_cache_bytes(batch: int, heads_kv: int, max_len: int, head_dim: int, dtype_bytes: int) -> int:
    """K and V of a contiguous cache: what config_for_decode's host-bound threshold compares."""
    return 2 * batch * heads_kv * max_len * head_dim * dtype_bytes


def launch_shape(batch: int, heads_kv: int, group: int, q_len: int, max_len: int, config: DecodeConfig,
                 sm_count: int, num_splits: int | None = None) -> tuple[int, int, int]:
    """(block_m, row_blocks, splits): the packed rows a program takes, the row blocks they make, and the splits of
    each (sequence, K/V head, row block)'s cache (num_splits, or the heuristic's on sm_count SMs)."""
    block_m = packed_rows(group, q_len, config)
    row_blocks = triton.cdiv(group * q_len, block_m)
    splits = num_splits or choose_num_splits(batch * heads_kv * row_blocks, triton.cdiv(max_len, config.block_n),
                                             sm_count, config.programs_per_sm, config.merge_splits)
    return block_m, row_blocks, splits


def gpu_splits_for(shape: costmodel.Shape, sm_count: int) -> int:
    """The split count the shipped call chooses for a contiguous cache of this shape on a GPU of sm_count SMs."""
    dtype_bytes = DTYPES_BY_NAME[shape.dtype].itemsize
    config = gpu_decode_config(shape.head_dim, dtype_bytes, 0, kv_cache_bytes(
        shape.batch, shape.kv_heads, shape.kv_len, shape.head_dim, dtype_bytes))
    return launch_shape(shape.batch, shape.kv_heads, shape.group, shape.seq_len, shape.kv_len, config, sm_count)[2]


def tiles_for(shape: costmodel.Shape) -> tuple[int, int]:
    """(block_m, block_n) the decode kernel runs a shape with (its spec's `tiles`): packed query rows × keys a tile."""
    config = config_for_decode(shape.head_dim, DTYPES_BY_NAME[shape.dtype])
    return packed_rows(shape.group, shape.seq_len, config), config.block_n


def choose_num_splits(programs: int, key_blocks: int, sm_count: int, programs_per_sm: int,
                      merge_splits: int = DecodeConfig.merge_splits) -> int:
    """Splits per (batch, K/V head, row block) when the caller leaves num_splits open: costmodel.decode_num_splits
    on SMs × programs_per_sm slots (none when the grid already fills the GPU; else the fewest splits whose waves are
    nearly as full as the best; never more than the cache's key blocks, nor 128), rounded down to a multiple of the
    merge's load width (merge_splits) where that leaves at most 1 in 32 of them out: the merge, on the critical path
    after the last split, then takes one dependent load fewer a row (B1 H32/8: 33 → 32, measured on an H100,
    2026-12-05: 1.019× at 128K, 1.016× at 256K, 0.999× at 1M; perf/h200/decode_merge.py)."""
    splits = costmodel.decode_num_splits(programs, key_blocks, sm_count * programs_per_sm)
    extra = splits % merge_splits
    if splits > merge_splits and extra <= splits // 32:
        splits -= extra
    return splits


# -- the launch plan (everything computable from shapes, cached) ----------------------------------

@dataclass(frozen=True)
class _Plan:
    batch: int
    heads_q: int
    heads_kv: int
    q_len: int
    head_dim: int
    max_len: int        # keys the cache holds per sequence (contiguous: max_len; paged: max_pages · page_size)
    page_size: int      # 0: contiguous
    num_pages: int      # paged: the cache's pages (0: contiguous)
    config: DecodeConfig
    block_m: int
    row_blocks: int
    splits: int
    tma: bool           # the layout allows TMA (the data pointers' alignment is checked per call)
    k_strides: tuple    # (outer, inner, head)
    v_strides: tuple
    sl_stride: int      # cache_seqlens' stride (0: none given)
    bt_strides: tuple   # block_table's (row, column) strides ((0, 0): contiguous cache)
    default_scale: float
    q_strides: tuple = ()       # q's (batch, head, position, dim) strides
    has_seqlens: bool = False   # cache_seqlens given
    causal: bool = True
    serial: int = field(default=0, compare=False)  # one per _plan entry (its arguments fix the launch's specialization)


_PLAN_SERIALS = itertools.count(1)


def _meta(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


@functools.lru_cache(maxsize=1024)
def _plan(q_meta, k_meta, v_meta, seqlens_meta, bt_meta, causal: bool, num_splits, config) -> _Plan:
    (q_shape, _, dtype, device), (k_shape, k_stride, k_dtype, k_device) = q_meta, k_meta
    v_shape, v_stride, v_dtype, v_device = v_meta
    paged = bt_meta is not None
    if len(q_shape) != 4:
        raise ValueError(f"q must be 4-D (batch, heads_q, q_len, head_dim); got shape {tuple(q_shape)}")
    layout = "(num_pages, page_size, heads_kv, head_dim)" if paged else "(batch, heads_kv, max_len, head_dim)"
    for name, shape in (("k_cache", k_shape), ("v_cache", v_shape)):
        if len(shape) != 4:
            raise ValueError(f"{name} must be 4-D {layout}; got shape {tuple(shape)}")
    if k_shape != v_shape:
        raise ValueError(f"k_cache and v_cache must have the same shape; got {tuple(k_shape)} and {tuple(v_shape)}")
    if not (dtype == k_dtype == v_dtype):
        raise TypeError(f"q, k_cache and v_cache must share one dtype; got {dtype}, {k_dtype}, {v_dtype}")
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {dtype}: use torch.float16, torch.bfloat16 or torch.float32")
    metas = {"cache_seqlens": seqlens_meta, "block_table": bt_meta}
    devices = {"q": device, "k_cache": k_device, "v_cache": v_device,
               **{name: m[3] for name, m in metas.items() if m is not None}}
    if len(set(devices.values())) > 1:
        raise ValueError("all tensors must be on one device; got " + ", ".join(f"{n} {d}" for n, d in devices.items()))
    if device.type != DEVICE.type:
        raise ValueError(f"tensors are on {device} but {'the interpreter' if INTERPRET else 'the GPU path'} is "
                         f"active: move them to {DEVICE.type}")
    batch, heads_q, q_len, head_dim = q_shape
    heads_kv = k_shape[2] if paged else k_shape[1]
    if min(batch, heads_q, q_len, heads_kv, *k_shape) == 0:
        raise ValueError(f"empty input: q {tuple(q_shape)}, k_cache {tuple(k_shape)}: every dimension must be >= 1")
    if k_shape[3] != head_dim:
        raise ValueError(f"q's head_dim {head_dim} differs from the cache's {k_shape[3]}")
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"unsupported head_dim {head_dim}: supported are {SUPPORTED_HEAD_DIMS}")
    if heads_q % heads_kv:
        raise ValueError(f"heads_q ({heads_q}) must be a multiple of heads_kv ({heads_kv}) (GQA/MQA; equal for MHA)")
    if k_stride[3] != 1 or v_stride[3] != 1:
        raise ValueError("k_cache and v_cache need a unit-stride head_dim (the kernel does not copy the cache)")
    for name, m in metas.items():
        if m is not None and m[2] != torch.int32:
            raise TypeError(f"{name} must be torch.int32; got {m[2]}")
    if seqlens_meta is not None and tuple(seqlens_meta[0]) != (batch,):
        raise ValueError(f"cache_seqlens must have shape (batch,) = ({batch},); got {tuple(seqlens_meta[0])}")
    if paged:
        if len(bt_meta[0]) != 2 or bt_meta[0][0] != batch:
            raise ValueError(f"block_table must have shape (batch, max_pages) with batch {batch}; "
                             f"got {tuple(bt_meta[0])}")
        page_size, max_len = k_shape[1], bt_meta[0][1] * k_shape[1]
        k_strides, v_strides, bt_strides = (k_stride[0], k_stride[1], k_stride[2]), (v_stride[0], v_stride[1],
                                                                                     v_stride[2]), tuple(bt_meta[1])
    else:
        if k_shape[0] != batch:
            raise ValueError(f"k_cache holds {k_shape[0]} sequences but q has batch {batch}")
        page_size, max_len, bt_strides = 0, k_shape[2], (0, 0)
        k_strides, v_strides = (k_stride[0], k_stride[2], k_stride[1]), (v_stride[0], v_stride[2], v_stride[1])
    if max_len == 0:
        raise ValueError("the cache holds no key: block_table has no column")
    if causal and seqlens_meta is None and q_len > max_len:
        raise ValueError(f"causal with q_len {q_len} > the cache's {max_len} keys: the first queries would see no key")
    if batch * heads_kv >= 2**31:
        raise ValueError(f"batch · heads_kv = {batch * heads_kv} programs is too many for one grid axis")
    elem = torch.empty((), dtype=dtype).element_size()
    if config is None:
        config = config_for_decode(head_dim, dtype, page_size, kv_cache_bytes(batch, heads_kv, max_len, head_dim, elem))
        if device.type == "cuda":  # smaller settings where this GPU's shared memory took them (decode_attention)
            config = fitted_config(_fit_key(device, dtype, head_dim, page_size), config)
    group = heads_q // heads_kv
    block_m, row_blocks, splits = launch_shape(batch, heads_kv, group, q_len, max_len, config, sm_count(device),
                                               num_splits)
    costmodel.check_tiles(block_m, config.block_n)
    if row_blocks > MAX_GRID_YZ:
        raise ValueError(f"q_len · group = {q_len * group} rows make {row_blocks} row blocks, above {MAX_GRID_YZ}")
    tma = (config.tma and elem == 2 and tma_device(device) and (page_size == 0 or page_size % config.block_n == 0)
           and all(s * elem % 16 == 0 for s in (*k_stride[:3], *v_stride[:3])))
    return _Plan(batch, heads_q, heads_kv, q_len, head_dim, max_len, page_size, k_shape[0] if paged else 0, config,
                 block_m, row_blocks, splits,
                 tma, k_strides, v_strides, seqlens_meta[1][0] if seqlens_meta else 0, bt_strides,
                 1.0 / math.sqrt(head_dim), tuple(q_meta[1]), seqlens_meta is not None, causal,
                 next(_PLAN_SERIALS))


def _checked_plan(q, k_cache, v_cache, cache_seqlens, block_table, causal, sm_scale, num_splits, config):
    """The per-call checks (types, autograd, scalars), then the cached shape checks and plan: (plan, sm_scale)."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                    ("cache_seqlens", cache_seqlens), ("block_table", block_table)):
        if t is not None or name in ("q", "k_cache", "v_cache"):
            _check_dense(name, t)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int)
                                   or not 1 <= num_splits <= MAX_GRID_YZ):
        raise ValueError(f"num_splits must be None (chosen to fill the GPU) or an int from 1 to {MAX_GRID_YZ}; "
                         f"got {num_splits!r}")
    if config is not None and not isinstance(config, DecodeConfig):
        raise TypeError(f"config must be a DecodeConfig, got {type(config).__name__}")
    plan = _plan(_meta(q), _meta(k_cache), _meta(v_cache), _meta(cache_seqlens), _meta(block_table), causal,
                 num_splits, config)
    return plan, plan.default_scale if sm_scale is None else _check_scale(sm_scale)


def _check_dense(name: str, t: object) -> None:
    """A dense, strided torch.Tensor that needs no gradient (checked per call; the rank and the rest are checked once
    per shape, in _plan)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_nested or t.layout != torch.strided:
        kind = "a nested tensor" if t.is_nested else f"a {t.layout} tensor"
        raise TypeError(f"{name} is {kind}: the kernels read dense (strided) tensors; pass {name}.to_dense()")
    if t.requires_grad and torch.is_grad_enabled():
        from kernels.autograd import no_backward_message
        raise ValueError(no_backward_message("decode", name))


_FP32_MAX = float(torch.finfo(torch.float32).max)


def _check_scale(sm_scale: object) -> float:
    """sm_scale as a float: positive and finite as the kernel holds it, in fp32 with log2(e) folded in (a scale of 0
    or below turns the masked scores' −inf into NaN or +inf; one that rounds to 0 or overflows in fp32 too)."""
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, Real) or not math.isfinite(sm_scale):
        raise ValueError(f"sm_scale must be a positive finite number (or None for 1/sqrt(head_dim)); got {sm_scale!r}")
    in_kernel = float(torch.tensor(float(sm_scale), dtype=torch.float32))
    if not (0 < in_kernel and in_kernel * costmodel.LOG2_E < _FP32_MAX):
        raise ValueError(f"sm_scale must be a positive number that stays finite and nonzero in fp32 (with log2(e) "
                         f"folded in, up to {_FP32_MAX / costmodel.LOG2_E:.3g}); got {sm_scale!r}")
    return float(sm_scale)


def check_cache_values(plan: _Plan, cache_seqlens, block_table, causal: bool) -> None:
    """The values of cache_seqlens and block_table: 1 <= L <= the cache (and L >= q_len when causal), and every page a
    sequence uses inside [0, num_pages). Reads them on the host (a device sync for GPU tensors)."""
    lengths = (torch.full((plan.batch,), plan.max_len) if cache_seqlens is None else cache_seqlens.cpu().long())
    least = plan.q_len if causal else 1
    bad = ((lengths < least) | (lengths > plan.max_len)).nonzero()
    if len(bad):
        b = int(bad[0])
        raise ValueError(f"cache_seqlens[{b}] = {int(lengths[b])} is outside [{least}, {plan.max_len}] (the cache "
                         f"holds {plan.max_len} keys" + (f"; causal needs at least q_len = {plan.q_len})" if causal
                                                          else ")"))
    if block_table is not None:
        table, num_pages = block_table.cpu().long(), plan.num_pages
        used = torch.arange(table.shape[1])[None, :] < (lengths[:, None] + plan.page_size - 1) // plan.page_size
        bad = (used & ((table < 0) | (table >= num_pages))).nonzero()
        if len(bad):
            b, j = (int(x) for x in bad[0])
            raise ValueError(f"block_table[{b}, {j}] = {int(table[b, j])} points past the cache's {num_pages} pages")


# -- launch ------------------------------------------------------------------------------------------

@dataclass
class DecodeTrace:
    """What the trace mode recorded (plain tensors, m in natural-log units, NaN where no step ran):

    steps (batch, heads_kv, splits, row_blocks, max_steps, 2, block_m): after each key block of a split, the packed
    rows' running (m, l); splits (batch, heads_kv, splits, row_blocks, 2, block_m): each split's final (m, l), which
    the merge folds into the LSE (LSE = log Σ_s l_s·e^m_s). Packed row r of row block j is query position
    row_positions[j·block_m + r] of query head row_heads[…] (−1: padding)."""
    steps: torch.Tensor
    splits: torch.Tensor
    row_heads: torch.Tensor
    row_positions: torch.Tensor
    block_m: int
    block_n: int


# The splits' partial results (fp32) and the merge's counters, kept between calls per (device, stream): a decode
# step is bound by the host, and each allocation costs it microseconds. Work on one stream runs in order, so the
# next call's kernel starts after this one has read its partials; the counters are zero between launches (the last
# split of each row block sets its counter back). A CUDA graph captured on a stream keeps that stream's buffers.
_WORKSPACES: dict = {}


WORKSPACE_MAX_FLOATS = 1 << 24  # 64 MiB kept at most; a larger need (long chunks, many splits) is allocated per call


def _workspace(device: torch.device, where: tuple, floats: int, counters: int) -> tuple[torch.Tensor, torch.Tensor]:
    if floats > WORKSPACE_MAX_FLOATS:
        return (torch.empty(floats, dtype=torch.float32, device=device),
                torch.zeros(max(counters, 1), dtype=torch.int32, device=device))
    held = _WORKSPACES.get(where)
    if held is None or held[0].numel() < floats or held[1].numel() < counters:
        old_floats, old_counters = (0, 0) if held is None else (held[0].numel(), held[1].numel())
        held = (torch.empty(max(floats, old_floats, 1), dtype=torch.float32, device=device),
                torch.zeros(max(counters, old_counters, 1), dtype=torch.int32, device=device))
        _WORKSPACES[where] = held
    return held


def _launch(plan: _Plan, q, k_cache, v_cache, cache_seqlens, block_table, sm_scale: float,
            trace: tuple | None = None, use_tma: bool | None = None, need_lse: bool = True):
    """The kernel's launch on checked inputs: (O, LSE), LSE None unless need_lse (it then lives in the workspace).
    trace: (steps, splits, max_steps) buffers; use_tma: None decides as the shipped call does (the ahead-of-time
    check forces it)."""
    p, cfg = plan, plan.config
    out = torch.empty((p.batch, p.heads_q, p.q_len, p.head_dim), dtype=q.dtype, device=q.device)
    rows = p.batch * p.heads_q * p.q_len
    merge = p.splits > 1
    part_floats = rows * p.splits * (p.head_dim + 1) if merge else 0
    where = stream_key(q.device)
    ws, counters = _workspace(q.device, where, part_floats + (0 if need_lse else rows),
                              p.batch * p.heads_kv * p.row_blocks if merge else 0)
    if need_lse:
        lse = torch.empty((p.batch, p.heads_q, p.q_len), dtype=torch.float32, device=q.device)
        lse_arg, lse_offset = lse, 0
    else:
        lse, lse_arg, lse_offset = None, ws, part_floats
    if use_tma is None:
        use_tma = p.tma and k_cache.data_ptr() % 16 == 0 and v_cache.data_ptr() % 16 == 0
    k_arg, v_arg = k_cache, v_cache
    if use_tma:  # rows past the cache's end load as zeros
        block = [1, cfg.block_n, 1, p.head_dim] if p.page_size else [1, 1, cfg.block_n, p.head_dim]
        k_arg, v_arg = (quick_descriptor(TensorDescriptor, t, block) for t in (k_cache, v_cache))
    steps, splits_trace, max_steps = trace if trace is not None else (None, None, 0)  # None: not passed at all
    key = (p.serial, use_tma, trace is not None, need_lse)
    static = _STATIC_ARGS.get(key) if trace is None else None
    if static is None:  # the launch's integers and constexprs: a function of the plan (computed once per plan)
        dot_fp32, precision = dot_modes(q.dtype)
        static = ((p.batch * p.heads_kv, p.splits, p.row_blocks),
                  (p.q_len, p.max_len, p.heads_kv, p.splits, max(p.num_pages, 1), max_steps, lse_offset,
                   rows * p.splits * p.head_dim, *p.q_strides, *p.k_strides, *p.v_strides, p.sl_stride,
                   *p.bt_strides),
                  dict(HEAD_DIM=p.head_dim, GROUP=p.heads_q // p.heads_kv, BLOCK_M=p.block_m,
                       BLOCK_N=cfg.block_n, PAGE_SIZE=p.page_size, CAUSAL=p.causal, HAS_SEQLENS=p.has_seqlens,
                       USE_TMA=use_tma, DOT_FP32=dot_fp32, PRECISION=precision, TRACE=trace is not None, MERGE=merge,
                       MERGE_SPLITS=cfg.merge_splits, MERGE_ROWS=cfg.merge_rows, num_warps=cfg.num_warps, num_stages=cfg.num_stages))
        if trace is None:
            if len(_STATIC_ARGS) > 4096:
                _STATIC_ARGS.clear()
            _STATIC_ARGS[key] = static
    grid, ints, constexprs = static
    with kernel_launch_lock():  # the interpreter runs one kernel at a time, process-wide
        _SPLIT_LAUNCH(key, grid, where,
                      (q, k_arg, v_arg, out, lse_arg, ws, counters, cache_seqlens, block_table,
                       steps, splits_trace, sm_scale, *ints), constexprs)
    return out, lse


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     cache_seqlens: torch.Tensor | None = None, block_table: torch.Tensor | None = None,
                     causal: bool = True, sm_scale: float | None = None, num_splits: int | None = None,
                     return_lse: bool = False, *, check_values: bool | None = None,
                     config: DecodeConfig | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention of new queries against a KV cache (flash-decoding: the cache split across programs, then merged).

    q: (batch, heads_q, q_len, head_dim), q_len >= 1 (1: a decode step; more: a chunk appended at the cache's end).
    k_cache, v_cache: contiguous (batch, heads_kv, max_len, head_dim), or paged (num_pages, page_size, heads_kv,
    head_dim) with block_table (batch, max_pages) int32: the physical page of each sequence's logical page. heads_q a
    multiple of heads_kv (GQA; query head h reads K/V head h // (heads_q / heads_kv)). fp16, bf16 or fp32; head_dim
    16..256 (a power of two); the cache's head_dim must be unit-stride (other strides are read as they are).
    cache_seqlens: (batch,) int32, each sequence's length L (None: the whole cache, max_len or max_pages·page_size).
    causal: query i sees keys 0 .. L − q_len + i (aligned bottom-right, as FlashAttention); else all L keys.
    num_splits: None chooses enough splits to fill the GPU's SMs; an int from 1 up (more than the cache has key
    blocks is allowed: the extra splits are empty). sm_scale: default 1/sqrt(head_dim).

    Returns O (batch, heads_q, q_len, head_dim) in q's dtype, and with return_lse=True the fp32 natural-log LSE
    (batch, heads_q, q_len). A row that sees no key gets O = 0 and LSE = −inf.

    check_values: whether the VALUES of cache_seqlens and block_table are checked on the host (1 <= L <= the cache,
    L >= q_len when causal, every used page inside the cache), raising ValueError before any launch. None (default):
    only when they are CPU tensors (no device sync), so a GPU call reads no value on the host and can be captured in a
    CUDA graph; True: always (syncs the GPU); False: never. Unchecked, the kernel guards itself: a length outside
    [0, max_len] or a used page outside the cache is never followed, and the rows it serves come out NaN (O and
    LSE), never a plausible wrong answer. Shapes, dtypes, devices and strides are always checked, before any launch.
    config: overrides the tuned tile settings (kernels.decode.config_for_decode).
    """
    plan, scale = _checked_plan(q, k_cache, v_cache, cache_seqlens, block_table, causal, sm_scale, num_splits,
                                config)
    given = [t for t in (cache_seqlens, block_table) if t is not None]  # neither: the shape checks cover it
    if given and (check_values or (check_values is None and all(t.device.type == "cpu" for t in given))):
        check_cache_values(plan, cache_seqlens, block_table, causal)
    try:
        out, lse = _launch(plan, q, k_cache, v_cache, cache_seqlens, block_table, scale, need_lse=return_lse)
    except OutOfResources as exc:  # settings tuned on a Hopper, on a GPU with less shared memory a block
        if exc.name != "shared memory":
            raise
        metas = (_meta(q), _meta(k_cache), _meta(v_cache), _meta(cache_seqlens), _meta(block_table), causal,
                 num_splits)
        out, lse = fit_shared_memory(
            lambda c: _launch(_plan(*metas, c), q, k_cache, v_cache, cache_seqlens, block_table, scale,
                              need_lse=return_lse),
            plan.config, smaller_decode_config, _fit_key(q.device, q.dtype, plan.head_dim, plan.page_size),
            "the decode kernel")
        _plan.cache_clear()  # the next call's plan takes the settings that fitted
    return (out, lse) if return_lse else out


def decode_attention_traced(q, k_cache, v_cache, cache_seqlens=None, block_table=None, causal=True, sm_scale=None,
                            num_splits: int = 2, config: DecodeConfig | None = None,
                            ) -> tuple[torch.Tensor, torch.Tensor, DecodeTrace]:
    """decode_attention in trace mode, at small sizes: (O, LSE, DecodeTrace); the values are always checked."""
    plan, scale = _checked_plan(q, k_cache, v_cache, cache_seqlens, block_table, causal, sm_scale, num_splits,
                                config)
    check_cache_values(plan, cache_seqlens, block_table, causal)
    p = plan
    max_steps = triton.cdiv(triton.cdiv(p.max_len, p.config.block_n), p.splits)
    lead = (p.batch, p.heads_kv, p.splits, p.row_blocks)
    steps = torch.full((*lead, max_steps, 2, p.block_m), float("nan"), dtype=torch.float32, device=q.device)
    finals = torch.full((*lead, 2, p.block_m), float("nan"), dtype=torch.float32, device=q.device)
    out, lse = _launch(plan, q, k_cache, v_cache, cache_seqlens, block_table, scale,
                       trace=(steps, finals, max_steps))
    steps[..., 0, :] *= LN2  # the kernel keeps m in log2 units
    finals[..., 0, :] *= LN2
    group = p.heads_q // p.heads_kv
    rows = torch.arange(p.row_blocks * p.block_m)
    real = rows < group * p.q_len
    heads = torch.where(real, rows // p.q_len, -1)  # the head within the group (add hkv·group for the query head)
    positions = torch.where(real, rows % p.q_len, -1)
    return out, lse, DecodeTrace(steps, finals, heads, positions, p.block_m, p.config.block_n)


# -- what the ahead-of-time compile check needs -----------------------------------------------------

# Configurations perf/h200/decode_merge.py times beside the shipped one at batch 1 (BENCHMARKS.md §1b), compiled
# with the shipped ones (shipped_launches). None is open now. Timed and left out (an H100, 2026-12-06, ÷ the shipped
# 4 rows × 32 splits a load at B1 H32/8 128K): 64 splits × 2 rows a load, which lets the call take the wave rule's 33
# splits (two loads), 0.989×; 32 × 2, 0.989×; the shipped config at 33 splits, 0.996×. (64 × 4 spills: 176 bytes.)
CANDIDATES: dict[str, DecodeConfig] = {}


def shipped_launches():
    """Every shipped configuration as (label, targets, launch) for an ahead-of-time compile (bench/compile_check.py):
    each tuned or default class, contiguous (large, and host-bound where tuned) and paged (page 64), TMA and pointer
    paths, one split and several (the same kernel, num_splits not being specialized; several add the merge); then
    each of CANDIDATES at head_dim 128, bf16, contiguous through TMA, 33 splits."""
    launches = [(f"candidate: {name}", ("sm_90",),
                 functools.partial(_example_launch, 128, torch.bfloat16, 0, 33, True, config))
                for name, config in CANDIDATES.items()]
    classes = sorted({(d, b) for d in SUPPORTED_HEAD_DIMS for b in (2, 4)} | set(TUNED_DECODE_CONFIGS))
    for head_dim, dtype_bytes in classes:
        dtype = torch.bfloat16 if dtype_bytes == 2 else torch.float32
        for page_size, cache_bytes in ((0, None), (0, 0), (64, None)):
            config = gpu_decode_config(head_dim, dtype_bytes, page_size, cache_bytes)
            if cache_bytes == 0 and config == gpu_decode_config(head_dim, dtype_bytes, 0, None):
                continue  # no host-bound settings of its own
            paths = [True, False] if dtype_bytes == 2 and (page_size % config.block_n == 0) else [False]
            for use_tma, splits in ((t, s) for t in paths for s in (1, 4)):
                label = (f"D={head_dim} {str(dtype)[6:]} {'paged64' if page_size else 'contiguous'}"
                         f"{' host-bound' if cache_bytes == 0 else ''} "
                         f"n{config.block_n} w{config.num_warps} s{config.num_stages} "
                         f"{'tma' if use_tma else 'pointers'} splits={splits}")
                launches.append((label, ("sm_90",) if use_tma else ("sm_90", "sm_80"),
                                 functools.partial(_example_launch, head_dim, dtype, page_size, splits, use_tma,
                                                   config)))
    return launches


def _example_launch(head_dim, dtype, page_size, splits, use_tma, config):
    q = torch.randn(2, 8, 1, head_dim).to(dtype)
    if page_size:
        k = torch.randn(8, page_size, 2, head_dim).to(dtype)
        table = torch.arange(8, dtype=torch.int32).reshape(2, 4)
    else:
        k, table = torch.randn(2, 2, 256, head_dim).to(dtype), None
    seqlens = torch.full((2,), 200, dtype=torch.int32)
    plan, scale = _checked_plan(q, k, k, seqlens, table, True, None, splits, config)
    return _launch(plan, q, k, k, seqlens, table, scale, use_tma=use_tma)
