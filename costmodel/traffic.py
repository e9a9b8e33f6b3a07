"""HBM traffic: the bytes each algorithm moves between HBM and the chip, by kernel or phase, and step by step for
the animation's counters.

What the traffic models count (per (batch, head), times batch·heads):
- standard (our three naive kernels): S = sm_scale·QKᵀ written in fp32, read back by the softmax (twice
  when a row is longer than one block), P written in the input dtype (zeros included), read by O = PV.
  Under a causal mask the kernels store and load only the visible triangle (col ≤ row) of S and P, but
  write all of P. Q, K, V read once and O written once: their tile re-reads hit the L2 cache.
- flash, no cache (the FlashAttention paper's bound, Θ(N²d²/M)): Q read once, every K/V tile the Q block
  visits read again for every Q block, O and the fp32 log-sum-exp written once.
- flash, L2-aware: programs run Q block after Q block of one head (the grid's fastest axis), so the
  programs in flight share their head's K and V through L2. When the K/V of the heads in flight fit in
  the usable L2, each head's K and V come from HBM once; when one head's K/V does not fit, each wave of
  co-resident Q blocks streams it once.
- fused (SDPA, decode): Q, K, V read once and O written once, the least any kernel moves.
- decode (ours, split-KV): the split kernel reads Q and the cache once (a K/V tile once for all the query heads that
  share it) and writes fp32 partials per split; the merge reads them back and writes O and the LSE.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodel.memory import decode_partial_bytes, fa1_state_bytes_per_row, kv_bytes, output_bytes
from costmodel.schedule import (fa1_schedule, fa1_split_ranges, k_tiles_per_q_block, keys_per_q_block, n_blocks,
                                schedule_arrays,
                                tile_schedule, visible_scores)
from costmodel.shape import LSE_BYTES, SCORE_BYTES, Shape, attention_flops

SOFTMAX_FLOPS_PER_SCORE = 5  # max, subtract, exp, sum, divide: a convention for the softmax kernel's FLOPs
# The naive softmax reads a row in one pass up to this many keys (GPU; interpreter), else in two passes.
SOFTMAX_SINGLE_PASS_MAX = 8192
SOFTMAX_SINGLE_PASS_MAX_INTERPRETER = 1024
# Flash tiles assumed for a record that does not say which tiles its kernel ran (files before the field).
ASSUMED_FLASH_TILES = (128, 64)
# Of the L2, the share the L2-aware model lets one wave's K/V occupy: Hopper's L2 is two partitions, and a
# line that SMs on both sides read can be held in both.
USABLE_L2_SHARE = 0.5
# The HBM tensors a kernel step loads or stores, in the order of a trace's `loads` / `stores` (kernels/trace.py);
# "state" is the FA1-order kernel's fp32 O, m and l between steps.
IO_TENSORS = ("Q", "K", "V", "O", "LSE", "state")


@dataclass(frozen=True)
class Traffic:
    """HBM bytes one kernel (or one step of the story) reads and writes, and its FLOPs."""
    name: str
    reads: int
    writes: int
    flops: float = 0.0

    @property
    def total(self) -> int:
        return self.reads + self.writes


def total_bytes(parts: list[Traffic]) -> int:
    return sum(part.total for part in parts)


def softmax_passes(seq_len: int, interpreter: bool = False) -> int:
    """Reads of S by the naive softmax: 1 when a row fits one block, else 2 (max and sum, then P)."""
    return 1 if seq_len <= (SOFTMAX_SINGLE_PASS_MAX_INTERPRETER if interpreter else SOFTMAX_SINGLE_PASS_MAX) else 2


# -- whole kernels, by kernel or phase ---------------------------------------------------------------------------

def naive_traffic(shape: Shape, interpreter: bool = False) -> list[Traffic]:
    """HBM reads, writes and FLOPs of each of the three naive kernels (S = QKᵀ, softmax, O = PV); every query
    against every key (seq_len × seq_len)."""
    bh, n, d, e = shape.batch * shape.heads, shape.seq_len, shape.head_dim, shape.dtype_bytes
    matrix, visible = n * d * e, visible_scores(n, shape.causal)
    half = attention_flops(shape.at(batch=1, heads=1, kv_heads=1)) / 2  # one of the two matmuls
    passes = softmax_passes(n, interpreter)
    return [
        Traffic("S = QKᵀ", bh * 2 * matrix, bh * visible * SCORE_BYTES, bh * half),
        Traffic("P = softmax(S)", bh * passes * visible * SCORE_BYTES, bh * n * n * e,
                bh * SOFTMAX_FLOPS_PER_SCORE * float(visible)),
        Traffic("O = PV", bh * (visible * e + matrix), bh * matrix, bh * half),
    ]


def _flash_phases(shape: Shape, kv_bytes_per_head: int) -> list[Traffic]:
    """Flash's traffic by phase, given the K and V bytes one head reads: the models differ only there."""
    bh, n, d, e = shape.batch * shape.heads, shape.seq_len, shape.head_dim, shape.dtype_bytes
    return [
        Traffic("read Q", bh * n * d * e, 0),
        Traffic("read K, V", bh * kv_bytes_per_head, 0),
        Traffic("softmax in SRAM", 0, 0, attention_flops(shape)),
        Traffic("write O, LSE", 0, bh * n * (d * e + LSE_BYTES)),
    ]


def flash_traffic_no_cache(shape: Shape, block_m: int, block_n: int) -> list[Traffic]:
    """The flash kernel's loads and stores with no cache between it and HBM (the paper's bound), by phase."""
    keys = int(keys_per_q_block(shape.seq_len, block_m, block_n, shape.causal).sum())
    return _flash_phases(shape, 2 * keys * shape.head_dim * shape.dtype_bytes)


def flash_kv_reads_l2(shape: Shape, block_m: int, block_n: int, l2_bytes: int, programs_in_flight: int) -> int:
    """K and V bytes one head reads from HBM under the L2-aware model (see the module's docstring)."""
    n, d, e = shape.seq_len, shape.head_dim, shape.dtype_bytes
    kv_head = 2 * n * d * e
    n_q = n_blocks(n, block_m)
    programs_in_flight = max(1, programs_in_flight)
    heads_in_flight = -(-programs_in_flight // n_q) + 1  # a window of programs straddles one more head
    if heads_in_flight * kv_head <= USABLE_L2_SHARE * l2_bytes:
        return kv_head
    keys = keys_per_q_block(n, block_m, block_n, shape.causal)
    # each wave of co-resident Q blocks streams the keys its furthest Q block needs
    wave_ends = np.minimum(np.arange(programs_in_flight, n_q + programs_in_flight, programs_in_flight), n_q) - 1
    return int(2 * keys[wave_ends].sum() * d * e)


def flash_traffic_l2(shape: Shape, block_m: int, block_n: int, l2_bytes: int,
                     programs_in_flight: int) -> list[Traffic]:
    """The flash kernel's HBM traffic by phase when programs of a head share K/V through L2."""
    return _flash_phases(shape, flash_kv_reads_l2(shape, block_m, block_n, l2_bytes, programs_in_flight))


def fused_traffic(shape: Shape) -> list[Traffic]:
    """The least any fused kernel (PyTorch SDPA, a decode kernel) moves: Q, K, V read once, O written once."""
    return [Traffic("fused kernel", output_bytes(shape) + kv_bytes(shape), output_bytes(shape),
                    attention_flops(shape))]


def decode_traffic(shape: Shape, num_splits: int = 1) -> list[Traffic]:
    """The decode kernel's HBM traffic by kernel (kernels/decode.py): the split kernel reads Q and K, V of the cache
    (kv_len keys of each sequence, each tile once for the group of query heads that share its K/V head) and writes
    the fp32 partial O and LSE of each split; the merge reads those and writes O and the LSE. With one split there is
    no merge: the split kernel writes O and the LSE. The block table and lengths (a few bytes a page) are left out."""
    rows = shape.batch * shape.heads * shape.seq_len
    final = output_bytes(shape) + rows * LSE_BYTES
    reads = output_bytes(shape) + kv_bytes(shape)  # Q is O's size
    partials = decode_partial_bytes(shape, num_splits)
    if not partials:
        return [Traffic("split kernel (one split, no merge)", reads, final, attention_flops(shape))]
    return [Traffic("split kernel", reads, partials, attention_flops(shape)),
            Traffic("merge splits", partials, final, 4.0 * rows * num_splits * shape.head_dim)]


def torch_naive_traffic(shape: Shape) -> list[Traffic]:
    """PyTorch eager standard attention: bmm writes fp32 S; the causal fill reads and writes it; softmax
    reads S and writes fp32 P; the cast reads it and writes P in dtype; bmm reads P and V, writes O."""
    bh, n, d, e = shape.batch * shape.heads, shape.seq_len, shape.head_dim, shape.dtype_bytes
    square, matrix = n * n, n * d * e
    flops = attention_flops(shape) / 2
    steps = [Traffic("S = QKᵀ (bmm)", bh * 2 * matrix, bh * square * 4, flops)]
    if shape.causal:
        steps.append(Traffic("mask (masked_fill)", bh * square * 4, bh * square * 4))
    steps += [Traffic("softmax", bh * square * 4, bh * square * 4, bh * SOFTMAX_FLOPS_PER_SCORE * float(square)),
              Traffic("cast P", bh * square * 4, bh * square * e),
              Traffic("O = PV (bmm)", bh * (square * e + matrix), bh * matrix, flops)]
    return steps


# -- FlashAttention-1 order ----------------------------------------------------------------------------------------
# kernels/fa1.py: one program per (batch, head), or per part of one when FlashAttention-1's split heuristic divides a
# head's Q blocks among programs (costmodel.fa1_splits); each program's outer loop walks the K/V tiles its Q blocks
# see (each loaded once per program), the inner loop its Q blocks that tile touches. Between steps a Q block's O, m
# and l live in HBM in fp32: read back at every tile but its first, written back at every tile but its last, where
# O (in the input dtype) and the fp32 LSE are written instead.

def fa1_kv_keys(shape: Shape, block_m: int, block_n: int, splits: int = 1) -> int:
    """Keys of one (batch, head) whose K and V rows the FA1-order kernel's programs load, all splits together:
    each program loads the K/V tiles up to the last key its Q blocks see."""
    n = shape.seq_len
    total = 0
    for _, end in fa1_split_ranges(n_blocks(n, block_m), splits):
        keys = min(n, end * block_m) if shape.causal else n
        total += min(n, -(-keys // block_n) * block_n)
    return total


def fa1_traffic(shape: Shape, block_m: int, block_n: int, splits: int = 1) -> list[Traffic]:
    """The FA1-order kernel's HBM loads and stores by phase (no cache): every K/V tile once per program, the Q
    block at every step, O, m and l read back and written back at every step but a Q block's first / last.
    splits: the programs one (batch, head) is divided into (costmodel.fa1_splits; 1 in the interpreter)."""
    bh, n, d, e = shape.batch * shape.heads, shape.seq_len, shape.head_dim, shape.dtype_bytes
    tiles = k_tiles_per_q_block(n, block_m, block_n, shape.causal)
    rows = np.minimum(block_m, n - np.arange(len(tiles)) * block_m)
    round_trips = int((rows * (tiles - 1)).sum())  # rows × the steps after a block's first (before its last)
    kv_label = "load K, V tiles (once each)" if splits == 1 else f"load K, V tiles (once per program, {splits} a head)"
    return [
        Traffic(kv_label, bh * 2 * fa1_kv_keys(shape, block_m, block_n, splits) * d * e, 0),
        Traffic("load Q blocks (every step)", bh * int((rows * tiles).sum()) * d * e, 0),
        Traffic("read back O, m, l", bh * round_trips * fa1_state_bytes_per_row(d), 0),
        Traffic("online softmax (in SRAM)", 0, 0, attention_flops(shape)),
        Traffic("write back O, m, l", 0, bh * round_trips * fa1_state_bytes_per_row(d)),
        Traffic("write O, LSE", 0, bh * n * (d * e + LSE_BYTES)),
    ]


# -- the animation's counters: the same models, step by step, one (batch, head) ------------------------------------

def step_traffic(shape: Shape, block_m: int, block_n: int, interpreter: bool = False) -> dict[str, np.ndarray]:
    """Cumulative HBM bytes read and written after each step of tile_schedule, one (batch, head) of the shape.

    FA-2 order (what the kernel loads and stores: the no-cache model): the Q tile at a Q block's first step,
    the K and V tiles every step, O and the fp32 LSE at a Q block's last step.
    Standard (the naive kernels' traffic, handed out to the tiles flash visits, so that its totals are
    naive_traffic's): Q at a Q block's first step and each K and V tile the first time any Q block meets
    it; the tile's visible scores written to S, read back by the softmax (`softmax_passes` times), P
    written for the tile and read for its visible scores; at a Q block's last step P's zeros right of
    the tiles it visits (causal) and O.

    Returns int64 arrays of shape (T,): "fa2_read", "fa2_written", "naive_read", "naive_written" (cumulative), and
    "fa2_bytes", "naive_bytes" (read + written).
    """
    n, d, e, causal = shape.seq_len, shape.head_dim, shape.dtype_bytes, shape.causal
    schedule = tile_schedule(n, block_m, block_n, causal)
    q_block, k_block, first, last = schedule_arrays(schedule)
    row0, col0 = q_block * block_m, k_block * block_n
    rows = np.minimum(block_m, n - row0)
    cols = np.minimum(block_n, n - col0)
    if causal:  # scores with key ≤ query in the tile: for each row r, keys col0 … min(r, col0 + cols − 1)
        r = row0[:, None] + np.arange(block_m)[None, :]
        per_row = np.clip(np.minimum(r, (col0 + cols - 1)[:, None]) - col0[:, None] + 1, 0, None)
        visible = np.where(np.arange(block_m)[None, :] < rows[:, None], per_row, 0).sum(axis=1)
    else:
        visible = rows * cols
    first_visit = np.zeros(len(schedule), dtype=bool)
    first_visit[np.unique(k_block, return_index=True)[1]] = True
    covered = np.minimum((k_block + 1) * block_n, n)  # keys covered by the Q block after this step
    passes = softmax_passes(n, interpreter)

    fa2_read = first * rows * d * e + 2 * cols * d * e
    fa2_written = last * rows * (d * e + LSE_BYTES)
    naive_read = (first * rows * d * e + first_visit * 2 * cols * d * e
                  + passes * visible * SCORE_BYTES + visible * e)
    naive_written = (visible * SCORE_BYTES + rows * cols * e
                     + last * (rows * (n - covered) * e + rows * d * e))
    out = {name: np.cumsum(values.astype(np.int64)) for name, values in (
        ("fa2_read", fa2_read), ("fa2_written", fa2_written),
        ("naive_read", naive_read), ("naive_written", naive_written))}
    out["fa2_bytes"] = out["fa2_read"] + out["fa2_written"]
    out["naive_bytes"] = out["naive_read"] + out["naive_written"]
    return out


def fa1_step_traffic(shape: Shape, block_m: int, block_n: int) -> dict[str, np.ndarray]:
    """Cumulative HBM bytes after each step of fa1_schedule, one (batch, head) of the shape, like step_traffic.

    Returns int64 arrays of shape (T,): "fa1_read", "fa1_written", "fa1_bytes" (what the FA1-order kernel loads and
    stores), and of those the O, m, l round trips: "state_read", "state_written"; their totals are fa1_traffic's."""
    n, d, e = shape.seq_len, shape.head_dim, shape.dtype_bytes
    schedule = fa1_schedule(n, block_m, block_n, shape.causal)
    q_block, k_block, first, last = schedule_arrays(schedule)
    rows = np.minimum(block_m, n - q_block * block_m)
    cols = np.minimum(block_n, n - k_block * block_n)
    tile_start = np.zeros(len(schedule), dtype=bool)  # the step that loads its K/V tile
    tile_start[np.unique(k_block, return_index=True)[1]] = True
    state = rows * fa1_state_bytes_per_row(d)
    state_read = ~first * state
    state_written = ~last * state
    read = tile_start * 2 * cols * d * e + rows * d * e + state_read
    written = state_written + last * rows * (d * e + LSE_BYTES)
    out = {name: np.cumsum(values.astype(np.int64)) for name, values in (
        ("fa1_read", read), ("fa1_written", written),
        ("state_read", state_read), ("state_written", state_written))}
    out["fa1_bytes"] = out["fa1_read"] + out["fa1_written"]
    return out
