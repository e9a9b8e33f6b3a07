"""The story's arithmetic: which tiles the flash kernel visits, in what order, and the HBM bytes each
algorithm moves. Plain Python/NumPy, so tests can check every number against a closed form.

Units: sizes in bytes, lengths in tokens (rows of Q/K/V), tiles in tokens per side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCORE_BYTES = 4  # the score matrix S is kept in fp32 by the standard (naive) kernels
LSE_BYTES = 4  # flash writes one fp32 log-sum-exp per query row (for the backward pass)
DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}
MIN_TILE = 16  # smallest tile tl.dot accepts on a GPU


def bytes_per_element(dtype: str) -> int:
    """Bytes per element of a dtype name such as "bfloat16" (a "torch." prefix is accepted)."""
    name = dtype.removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


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


def _check_tiling(seq_len: int, block_m: int, block_n: int) -> None:
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1 token, got {seq_len}")
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        if block < MIN_TILE or block & (block - 1):
            raise ValueError(f"{name} must be a power of two >= {MIN_TILE}, got {block}")


def n_blocks(seq_len: int, block: int) -> int:
    """Number of tiles of `block` tokens covering seq_len tokens (the last one may be partial)."""
    return -(-seq_len // block)


def k_tiles_per_q_block(seq_len: int, block_m: int, block_n: int, causal: bool) -> np.ndarray:
    """How many K/V tiles each Q block visits, shape (ceil(seq_len / block_m),).

    Causal keeps tile k when k·block_n <= (q+1)·block_m − 1: some key in the tile is not later than
    some query in the block. The kernel visits these tiles in ascending order, from tile 0.
    """
    _check_tiling(seq_len, block_m, block_n)
    num_k = n_blocks(seq_len, block_n)
    q_blocks = np.arange(n_blocks(seq_len, block_m), dtype=np.int64)
    if not causal:
        return np.full(q_blocks.shape, num_k, dtype=np.int64)
    return np.minimum(num_k, ((q_blocks + 1) * block_m - 1) // block_n + 1)


def tile_schedule(seq_len: int, block_m: int, block_n: int, causal: bool) -> list[Step]:
    """The flash kernel's tile order: Q block by Q block (ascending), K/V tiles ascending within each."""
    steps: list[Step] = []
    for q_block, num_tiles in enumerate(k_tiles_per_q_block(seq_len, block_m, block_n, causal)):
        rows = min(block_m, seq_len - q_block * block_m)
        for k_block in range(int(num_tiles)):
            cols = min(block_n, seq_len - k_block * block_n)
            # the tile's last key comes after its first query: part of it lies above the diagonal
            straddles_diagonal = causal and (k_block + 1) * block_n - 1 > q_block * block_m
            steps.append(
                Step(
                    index=len(steps),
                    q_block=q_block,
                    k_block=k_block,
                    masked=straddles_diagonal or rows < block_m or cols < block_n,
                    first=k_block == 0,
                    last=k_block == num_tiles - 1,
                )
            )
    return steps


def step_traffic(
    seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype_bytes: int
) -> dict[str, np.ndarray | int]:
    """Cumulative HBM bytes after each step of tile_schedule, for flash and for standard attention.

    Flash, per step: reads the Q tile at a Q block's first step (rows·d·b), the K and V tiles every
    step (cols·d·b each), and at a Q block's last step writes O (rows·d·b) and the fp32 LSE (rows·4).
    Standard, doing the same tile of work its way: reads the Q and K tiles, writes the fp32 S tile
    (rows·cols·4) and reads it back, writes the P tile (rows·cols·b) and reads it back, reads the V
    tile, and writes O (rows·d·b) at a Q block's last step. rows/cols are the real (partial) sizes.

    Returns int64 arrays "flash_bytes", "standard_bytes" of shape (T,) and ints "flash_total",
    "standard_total" (bytes).
    """
    schedule = tile_schedule(seq_len, block_m, block_n, causal)
    q_block = np.array([step.q_block for step in schedule], dtype=np.int64)
    k_block = np.array([step.k_block for step in schedule], dtype=np.int64)
    first = np.array([step.first for step in schedule])
    last = np.array([step.last for step in schedule])
    rows = np.minimum(block_m, seq_len - q_block * block_m)
    cols = np.minimum(block_n, seq_len - k_block * block_n)

    q_tile = rows * head_dim * dtype_bytes
    kv_tile = cols * head_dim * dtype_bytes
    o_tile = rows * head_dim * dtype_bytes
    flash = first * q_tile + 2 * kv_tile + last * (o_tile + rows * LSE_BYTES)
    score_tile = rows * cols * SCORE_BYTES
    prob_tile = rows * cols * dtype_bytes
    standard = q_tile + kv_tile + 2 * score_tile + 2 * prob_tile + kv_tile + last * o_tile

    flash_bytes, standard_bytes = np.cumsum(flash), np.cumsum(standard)
    return {
        "flash_bytes": flash_bytes,
        "standard_bytes": standard_bytes,
        "flash_total": int(flash_bytes[-1]),
        "standard_total": int(standard_bytes[-1]),
    }


def traffic_totals(
    seq_len: int,
    head_dim: int,
    dtype_bytes: int,
    block_m: int,
    causal: bool,
    batch_heads: int = 1,
    block_n: int | None = None,
) -> dict[str, list[dict[str, str | int]]]:
    """Whole-tensor HBM reads and writes (bytes) per step of each algorithm, for the side-by-side scene.

    Standard (our naive kernels): S = QKᵀ reads Q and K, writes the fp32 N×N S; softmax reads S and
    writes P (N×N in dtype); O = PV reads P and V and writes O. Causal does not shrink these: the naive
    kernels still materialize the full N×N S and P and only mask the values.
    Flash: reads Q once, streams K and V once per Q block (ceil(N / block_m) passes; causal: only the
    tiles the mask keeps), keeps the softmax in SRAM, and writes O and the fp32 LSE.
    block_n defaults to block_m; it only matters for causal (which tiles the mask keeps).
    All counts are multiplied by batch_heads (batch × heads).
    """
    n, d, b = seq_len, head_dim, dtype_bytes
    block_n = block_m if block_n is None else block_n
    tiles = k_tiles_per_q_block(n, block_m, block_n, causal)
    keys_streamed = int(np.minimum(tiles * block_n, n).sum())  # K rows read over all Q blocks
    matrix = n * d * b
    standard = [
        {"step": "S = QKᵀ", "reads": 2 * matrix, "writes": n * n * SCORE_BYTES},
        {"step": "P = softmax(S)", "reads": n * n * SCORE_BYTES, "writes": n * n * b},
        {"step": "O = PV", "reads": n * n * b + matrix, "writes": matrix},
    ]
    flash = [
        {"step": "load Q block", "reads": matrix, "writes": 0},
        {"step": "stream K, V tiles", "reads": 2 * keys_streamed * d * b, "writes": 0},
        {"step": "online softmax (in SRAM)", "reads": 0, "writes": 0},
        {"step": "write O, LSE", "reads": 0, "writes": matrix + n * LSE_BYTES},
    ]
    return {
        name: [{**row, "reads": row["reads"] * batch_heads, "writes": row["writes"] * batch_heads} for row in rows]
        for name, rows in (("standard", standard), ("flash", flash))
    }


def scores_bytes(seq_len: int, heads: int = 1, batch: int = 1, dtype_bytes: int = 2) -> int:
    """Bytes of the N×N score matrix for every (batch, head): N·N·dtype_bytes·batch·heads."""
    return seq_len * seq_len * dtype_bytes * batch * heads


def naive_extra_bytes(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Device memory the standard kernels need beyond Q, K, V: S in fp32, P in dtype, and O (bytes)."""
    per_head = seq_len * seq_len * (SCORE_BYTES + dtype_bytes) + seq_len * head_dim * dtype_bytes
    return batch * heads * per_head


def flash_extra_bytes(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Device memory the flash kernel needs beyond Q, K, V: O in dtype and the fp32 LSE (bytes)."""
    return batch * heads * seq_len * (head_dim * dtype_bytes + LSE_BYTES)
