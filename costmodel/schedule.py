"""The flash kernels' tile schedules: which (Q block, K/V tile) steps run, in which order, and the rules for tiles."""
from __future__ import annotations

import math
from dataclasses import dataclass

import math

import numpy as np

from costmodel.shape import MIN_TILE, TILE_SIZES

# -- the tile schedule ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One (Q block, K/V tile) step of the flash kernel.

    masked: some of the tile's block_m × block_n positions are masked out, because the tile straddles
    the causal diagonal or runs past seq_len (a partial last Q block or K/V tile).
    first / last: the first / last K/V tile visited for this Q block.
    """

    index: int
    q_block: int
    k_block: int
    masked: bool
    first: bool
    last: bool


def check_tiles(block_m: object, block_n: object) -> None:
    """The one rule for flash tiles, used by the kernels, the settings and the results file: each side one of
    TILE_SIZES (a power of two from MIN_TILE, the smallest tile tl.dot takes on a GPU, to 256)."""
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(block, bool) or not isinstance(block, int) or block not in TILE_SIZES:
            raise ValueError(f"{name} must be a power of two from {TILE_SIZES[0]} to {TILE_SIZES[-1]} "
                             f"(tl.dot needs ≥ {MIN_TILE}); got {block!r}")


def check_tiling(seq_len: int, block_m: int, block_n: int) -> None:
    """The teaching kernel's schedule: N ≥ 1 and its tiles (check_tiles)."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1 token, got {seq_len}")
    check_tiles(block_m, block_n)


def check_model_tiling(seq_len: int, block_m: int, block_n: int) -> None:
    """What the traffic models' arithmetic needs: N ≥ 1 and tiles of at least MIN_TILE tokens, a multiple of it
    (any of our kernels: the FA-3 style kernel runs 192-row programs at head_dim 64)."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1 token, got {seq_len}")
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(block, bool) or not isinstance(block, int) or block < MIN_TILE or block % MIN_TILE:
            raise ValueError(f"{name} must be a multiple of {MIN_TILE} tokens, at least {MIN_TILE}; got {block!r}")


def n_blocks(seq_len: int, block: int) -> int:
    """Number of tiles of `block` tokens covering seq_len tokens (the last one may be partial)."""
    return -(-seq_len // block)


def k_tiles_per_q_block(seq_len: int, block_m: int, block_n: int, causal: bool) -> np.ndarray:
    """How many K/V tiles each Q block visits, shape (ceil(seq_len / block_m),).

    Causal keeps tile k when k·block_n <= (q+1)·block_m − 1: some key in the tile is not later than
    some query in the block. The kernel visits these tiles in ascending order, from tile 0.
    """
    check_model_tiling(seq_len, block_m, block_n)
    num_k = n_blocks(seq_len, block_n)
    q_blocks = np.arange(n_blocks(seq_len, block_m), dtype=np.int64)
    if not causal:
        return np.full(q_blocks.shape, num_k, dtype=np.int64)
    return np.minimum(num_k, ((q_blocks + 1) * block_m - 1) // block_n + 1)


def keys_per_q_block(seq_len: int, block_m: int, block_n: int, causal: bool) -> np.ndarray:
    """K (and V) rows each Q block loads: its visited tiles, the last one partial at seq_len."""
    return np.minimum(k_tiles_per_q_block(seq_len, block_m, block_n, causal) * block_n, seq_len)


def tile_schedule(seq_len: int, block_m: int, block_n: int, causal: bool) -> list[Step]:
    """The flash kernel's tile order: Q block by Q block (ascending), K/V tiles ascending within each."""
    check_tiling(seq_len, block_m, block_n)
    steps: list[Step] = []
    for q_block, num_tiles in enumerate(k_tiles_per_q_block(seq_len, block_m, block_n, causal)):
        rows = min(block_m, seq_len - q_block * block_m)
        for k_block in range(int(num_tiles)):
            cols = min(block_n, seq_len - k_block * block_n)
            # the tile's last key comes after its first query: part of it lies above the diagonal
            straddles_diagonal = causal and (k_block + 1) * block_n - 1 > q_block * block_m
            steps.append(Step(index=len(steps), q_block=q_block, k_block=k_block,
                              masked=straddles_diagonal or rows < block_m or cols < block_n,
                              first=k_block == 0, last=k_block == num_tiles - 1))
    return steps


def visible_scores(seq_len: int, causal: bool) -> int:
    """Scores one head keeps: N² or, under a causal mask, the N(N+1)/2 with key ≤ query."""
    return seq_len * (seq_len + 1) // 2 if causal else seq_len * seq_len


def schedule_arrays(schedule: list[Step]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A schedule's (q_block, k_block) as int64 arrays and (first, last) as bool arrays, one entry a step."""
    return (np.array([s.q_block for s in schedule], dtype=np.int64),
            np.array([s.k_block for s in schedule], dtype=np.int64),
            np.array([s.first for s in schedule], dtype=bool), np.array([s.last for s in schedule], dtype=bool))


FA1_MAX_SPLITS = 30  # FlashAttention-1's own cap on the programs one (batch, head) is split into
FA1_PROGRAMS_PER_SM = 2  # programs of kernels/fa1.py one SM holds at once at its shipped configs: the split's slots


def fa1_splits(batch_heads: int, n_q_blocks: int, slots: int | None) -> int:
    """How many programs the FA1-order kernel gives one (batch, head): FlashAttention-1's heuristic (its forward
    launch, late 2022), which splits a head's Q blocks among programs when batch·heads leaves the GPU's
    program slots idle. For each split count up to min(30, Q blocks) the share of the last wave's slots in use,
    waves / ceil(waves) with waves = batch·heads·splits ÷ slots; the fewest splits within 95 % of the best.
    slots: the programs the GPU runs at once (SMs × programs per SM); None (the interpreter, no GPU) gives 1."""
    if not slots or slots < 1 or batch_heads < 1:
        return 1
    most = max(1, min(FA1_MAX_SPLITS, n_q_blocks))
    use = []
    for splits in range(1, most + 1):
        waves = batch_heads * splits / slots
        use.append(waves / math.ceil(waves))
    best = max(use)
    return next(splits for splits, u in enumerate(use, start=1) if u > 0.95 * best)


def fa1_split_ranges(n_q_blocks: int, splits: int) -> list[tuple[int, int]]:
    """The Q blocks [first, end) each of a head's `splits` programs walks, contiguous, as the kernel divides them."""
    per = -(-n_q_blocks // splits)
    return [(s * per, min(n_q_blocks, (s + 1) * per)) for s in range(splits) if s * per < n_q_blocks]


def fa1_schedule(seq_len: int, block_m: int, block_n: int, causal: bool) -> list[Step]:
    """The FA1-order kernel's steps: K/V tile by K/V tile (ascending), and within one the Q blocks that
    see it (ascending). The same (Q block, K/V tile) pairs as tile_schedule; `first` / `last` still mark
    a Q block's first / last tile."""
    steps = sorted(tile_schedule(seq_len, block_m, block_n, causal), key=lambda s: (s.k_block, s.q_block))
    return [Step(index, s.q_block, s.k_block, s.masked, s.first, s.last) for index, s in enumerate(steps)]



# -- causal: the longest programs first across a group of heads (FA-3's tile scheduler) ----------------------------

# FA-3's tile scheduler budgets 32 MiB of L2 (the H200 has 60 MB) for the heads whose programs run at once
LPT_L2_BYTES = 32 * 2 ** 20


def lpt_heads_per_group(batch_heads: int, seq_len: int, head_dim: int, element_size: int) -> int:
    """How many heads take their causal blocks in turn, the longest first (`lpt`): as many as have the two tensors
    every program of a head re-reads (the forward's K and V; the backward's Q and dO, or K and V) together in
    LPT_L2_BYTES (at least 1, at most all), so the programs running at once share those tiles through L2."""
    return max(1, min(batch_heads, LPT_L2_BYTES // (2 * seq_len * head_dim * element_size)))


# -- decode: how many programs share one sequence's cache (flash-decoding) ----------------------------------------

DECODE_MAX_SPLITS = 128  # the split heuristic's cap (flash-attn's too); a caller may ask for more
DECODE_FILLED = 0.8      # programs that fill this share of the GPU's slots are not split
DECODE_GOOD_WAVES = 0.85  # of the best wave efficiency: the fewest splits that reach it are chosen


def decode_wave_efficiency(programs: int, slots: int) -> float:
    """How full the grid's waves are: programs ÷ (slots × the waves they take); 1.0 when the last wave is full."""
    waves = programs / slots
    return waves / math.ceil(waves)


def decode_num_splits(programs: int, key_blocks: int, slots: int, max_splits: int = DECODE_MAX_SPLITS) -> int:
    """The decode kernel's split count when the caller leaves it open: how many programs share each (sequence, K/V
    head, row block)'s cache. programs: the grid without splits (batch · K/V heads · row blocks); key_blocks: the
    cache's key tiles (no split gets less than one); slots: programs the GPU runs at once (SMs × programs resident on
    one SM). One split where the programs already fill DECODE_FILLED of the slots; else, of 1 .. min(key_blocks,
    max_splits), the fewest whose waves are at least DECODE_GOOD_WAVES as full as the fullest choice's (flash-attn's
    rule: equal programs in a part-empty last wave leave SMs idle while the others finish); and where that is one
    wave, as many splits as that wave holds: each program then streams a shorter slice, with more bytes in flight
    at once (B1 32/8 heads: 29 → 33 splits, 1.007× at 128K, 1.027× at 256K, 1.046× at 1M on the H200)."""
    if programs >= DECODE_FILLED * slots:
        return 1
    limit = max(1, min(key_blocks, max_splits))
    efficiency = [decode_wave_efficiency(programs * s, slots) for s in range(1, limit + 1)]
    best = max(efficiency)
    splits = next(s for s, e in enumerate(efficiency, 1) if e >= DECODE_GOOD_WAVES * best)
    return min(limit, slots // programs) if programs * splits <= slots else splits  # ≥ splits: they fit one wave


def decode_max_splits(kv_len: int, block_n: int) -> int:
    """The most splits the heuristic can choose for a cache of kv_len keys in tiles of block_n."""
    return max(1, min(n_blocks(kv_len, block_n), DECODE_MAX_SPLITS))
