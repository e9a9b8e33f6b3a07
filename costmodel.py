"""The cost model: every constant and formula the story's numbers come from, in one place.

A leaf module: plain Python and NumPy, no torch, no Triton, no Streamlit, nothing else of the project.
`kernels/` (the bench's `bytes_moved`, the kernels' own thresholds), `viz/` (the compare scene, the
animation's counters, the roofline) and the app all call it, and tests pin each formula by hand.

Units: sizes in bytes, lengths in tokens (rows of Q, K, V), tiles in tokens per side, FLOPs as
floating-point operations (a multiply-add is 2).

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
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# -- constants --------------------------------------------------------------------------------------

SEQ_LENS = tuple(1 << power for power in range(10, 19))  # 1K … 256K tokens: the slider's stops
TRACE_SEQ_LENS = (64, 128, 256, 512)  # the animation runs the real kernel (in the CPU interpreter: ~10 ms a tile)
HEAD_DIMS = (16, 32, 64, 128, 256)  # what both kernels accept
TILE_SIZES = (16, 32, 64, 128, 256)  # flash tiles: powers of two, at least MIN_TILE
MIN_TILE = 16  # the smallest tile tl.dot accepts on a GPU
DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}
SCORE_BYTES = 4  # the naive kernels keep S in fp32
LSE_BYTES = 4  # flash writes one fp32 log-sum-exp per query row
LN2 = math.log(2.0)  # the flash kernel keeps its running max in log2 units
LOG2_E = 1.0 / LN2
SOFTMAX_FLOPS_PER_SCORE = 5  # max, subtract, exp, sum, divide: a convention for the softmax kernel's FLOPs
# The naive softmax reads a row in one pass up to this many keys (GPU; interpreter), else in two passes.
SOFTMAX_SINGLE_PASS_MAX = 8192
SOFTMAX_SINGLE_PASS_MAX_INTERPRETER = 1024
# Flash tiles assumed for a record that does not say which tiles its kernel ran (files before the field).
ASSUMED_FLASH_TILES = (128, 64)
# Of the L2, the share the L2-aware model lets one wave's K/V occupy: Hopper's L2 is two partitions, and a
# line that SMs on both sides read can be held in both.
USABLE_L2_SHARE = 0.5
# bf16 dense matmul and copy ceilings are measured by the bench on the GPU (device facts); this is the spec
# width of the on-chip shared memory: 32 banks × 4 bytes per clock per SM.
SMEM_BYTES_PER_CLOCK_PER_SM = 128


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name such as "bfloat16" (a "torch." prefix is accepted)."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


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


# -- memory -----------------------------------------------------------------------------------------

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


def fused_extra_bytes(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Device memory a fused kernel (SDPA) needs beyond Q, K, V at the least: O."""
    return batch * heads * seq_len * head_dim * dtype_bytes


def inputs_bytes(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of the inputs Q, K and V for every (batch, head)."""
    return 3 * batch * heads * seq_len * head_dim * dtype_bytes


def standard_device_bytes(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Device memory our naive kernels hold at once: the inputs Q, K, V and naive_extra_bytes (S in fp32, P, O)."""
    return (inputs_bytes(seq_len, batch, heads, head_dim, dtype_bytes)
            + naive_extra_bytes(seq_len, batch, heads, head_dim, dtype_bytes))


@dataclass(frozen=True)
class MemoryWall:
    """Where the standard kernels stop fitting a device: the longest N whose memory fits, and the first power
    of two past it (a slider stop), with what it needs there."""
    hbm_bytes: int
    fits_up_to: int  # the longest N (tokens) whose standard_device_bytes fit in hbm_bytes (0: none)
    seq_len: int     # the first power-of-two N that does not fit
    need_bytes: int  # standard_device_bytes at seq_len


MAX_WALL_SEQ_LEN = 1 << 30  # the search's upper end: no device holds one head's N×N scores past this


def standard_memory_wall(hbm_bytes: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> MemoryWall:
    """The memory wall of the standard kernels at this setting on a device of hbm_bytes: the one formula the
    problem scene draws and the recorded out-of-memory records meet (at batch 2 × 16 heads, head_dim 128,
    bf16 on the H200's 139.8 GiB: fits up to N ≈ 27.2K, out of memory from the 32K stop)."""
    def need(n: int) -> int:
        return standard_device_bytes(n, batch, heads, head_dim, dtype_bytes)

    lo, hi = 0, MAX_WALL_SEQ_LEN  # need(lo) fits (0 tokens need nothing); need(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= hbm_bytes else (lo, mid)
    first = 1 << lo.bit_length()  # the first power of two above lo
    return MemoryWall(int(hbm_bytes), lo, first, need(first))


def smem_bytes(block_m: int, block_n: int, head_dim: int, dtype_bytes: int, num_stages: int = 2) -> int:
    """Shared memory a flash tile shape needs, roughly: the Q block plus `num_stages` buffered K and V tiles."""
    return block_m * head_dim * dtype_bytes + num_stages * 2 * block_n * head_dim * dtype_bytes


# -- FLOPs ------------------------------------------------------------------------------------------

def attention_flops(seq_len: int, batch: int, heads: int, head_dim: int, causal: bool) -> float:
    """Matmul FLOPs of the forward pass: QKᵀ and PV, 2·N²·D each per head, halved under a causal mask
    (the convention of the FlashAttention papers)."""
    flops = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return flops / 2 if causal else flops


# -- HBM traffic ------------------------------------------------------------------------------------

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


def softmax_passes(seq_len: int, interpreter: bool = False) -> int:
    """Reads of S by the naive softmax: 1 when a row fits one block, else 2 (max and sum, then P)."""
    return 1 if seq_len <= (SOFTMAX_SINGLE_PASS_MAX_INTERPRETER if interpreter else SOFTMAX_SINGLE_PASS_MAX) else 2


def naive_traffic(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                  interpreter: bool = False) -> list[Traffic]:
    """HBM reads, writes and FLOPs of each of the three naive kernels (S = QKᵀ, softmax, O = PV)."""
    bh, n, d, e = batch * heads, seq_len, head_dim, dtype_bytes
    matrix, visible = n * d * e, visible_scores(n, causal)
    half = attention_flops(n, 1, 1, d, causal) / 2  # one of the two matmuls, attention_flops' convention
    passes = softmax_passes(n, interpreter)
    return [
        Traffic("S = QKᵀ", bh * 2 * matrix, bh * visible * SCORE_BYTES, bh * half),
        Traffic("P = softmax(S)", bh * passes * visible * SCORE_BYTES, bh * n * n * e,
                bh * SOFTMAX_FLOPS_PER_SCORE * float(visible)),
        Traffic("O = PV", bh * (visible * e + matrix), bh * matrix, bh * half),
    ]


def flash_traffic_no_cache(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                           block_m: int, block_n: int) -> list[Traffic]:
    """The flash kernel's loads and stores with no cache between it and HBM (the paper's bound), by phase."""
    keys = int(keys_per_q_block(seq_len, block_m, block_n, causal).sum())
    return _flash_phases(seq_len, batch, heads, head_dim, dtype_bytes, causal, 2 * keys * head_dim * dtype_bytes)


def _flash_phases(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                  kv_bytes_per_head: int) -> list[Traffic]:
    """Flash's traffic by phase, given the K and V bytes one head reads: the models differ only there."""
    bh, n, d, e = batch * heads, seq_len, head_dim, dtype_bytes
    return [
        Traffic("read Q", bh * n * d * e, 0),
        Traffic("read K, V", bh * kv_bytes_per_head, 0),
        Traffic("softmax in SRAM", 0, 0, attention_flops(n, batch, heads, d, causal)),
        Traffic("write O, LSE", 0, bh * n * (d * e + LSE_BYTES)),
    ]


def flash_kv_reads_l2(seq_len: int, head_dim: int, dtype_bytes: int, causal: bool, block_m: int, block_n: int,
                      l2_bytes: int, programs_in_flight: int) -> int:
    """K and V bytes one head reads from HBM under the L2-aware model (see the module's docstring)."""
    n, d, e = seq_len, head_dim, dtype_bytes
    kv_head = 2 * n * d * e
    n_q = n_blocks(n, block_m)
    programs_in_flight = max(1, programs_in_flight)
    heads_in_flight = -(-programs_in_flight // n_q) + 1  # a window of programs straddles one more head
    if heads_in_flight * kv_head <= USABLE_L2_SHARE * l2_bytes:
        return kv_head
    keys = keys_per_q_block(n, block_m, block_n, causal)
    # each wave of co-resident Q blocks streams the keys its furthest Q block needs
    wave_ends = np.minimum(np.arange(programs_in_flight, n_q + programs_in_flight, programs_in_flight), n_q) - 1
    return int(2 * keys[wave_ends].sum() * d * e)


def flash_traffic_l2(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                     block_m: int, block_n: int, l2_bytes: int, programs_in_flight: int) -> list[Traffic]:
    """The flash kernel's HBM traffic by phase when programs of a head share K/V through L2."""
    kv = flash_kv_reads_l2(seq_len, head_dim, dtype_bytes, causal, block_m, block_n, l2_bytes, programs_in_flight)
    return _flash_phases(seq_len, batch, heads, head_dim, dtype_bytes, causal, kv)


def fused_traffic(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool) -> list[Traffic]:
    """The least any fused kernel (PyTorch SDPA) moves: Q, K, V read once, O written once."""
    matrix = batch * heads * seq_len * head_dim * dtype_bytes
    return [Traffic("fused kernel", 3 * matrix, matrix, attention_flops(seq_len, batch, heads, head_dim, causal))]


def torch_naive_traffic(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int,
                        causal: bool) -> list[Traffic]:
    """PyTorch eager standard attention: bmm writes fp32 S; the causal fill reads and writes it; softmax
    reads S and writes fp32 P; the cast reads it and writes P in dtype; bmm reads P and V, writes O."""
    bh, n, d, e = batch * heads, seq_len, head_dim, dtype_bytes
    square, matrix = n * n, n * d * e
    flops = attention_flops(n, batch, heads, d, causal) / 2
    steps = [Traffic("S = QKᵀ (bmm)", bh * 2 * matrix, bh * square * 4, flops)]
    if causal:
        steps.append(Traffic("mask (masked_fill)", bh * square * 4, bh * square * 4))
    steps += [Traffic("softmax", bh * square * 4, bh * square * 4, bh * SOFTMAX_FLOPS_PER_SCORE * float(square)),
              Traffic("cast P", bh * square * 4, bh * square * e),
              Traffic("O = PV (bmm)", bh * (square * e + matrix), bh * matrix, flops)]
    return steps


RESIDENCY_RECORDED = "measured on the recorded SM timeline"
RESIDENCY_LIVE = "measured occupancy on this GPU"
RESIDENCY_ASSUMED = "assumed: no timeline"


@dataclass(frozen=True)
class Machine:
    """What the L2-aware model needs of a GPU: its L2 and how many flash programs it runs at once."""
    l2_bytes: int
    programs_in_flight: int  # SMs × programs resident on one SM at once
    how: str  # where programs_in_flight comes from, in words
    programs_per_sm: int = 1


def machine_from_facts(facts: dict | None, programs_per_sm: int | None = None,
                       measured: str = RESIDENCY_RECORDED) -> Machine | None:
    """The model's machine from device facts (sm_count, l2_bytes); None when they are unknown.

    programs_per_sm: the flash programs resident on one SM at once (the residency), as measured: on the SM
    timeline of the recording (story.residency; `measured` then RESIDENCY_RECORDED) or as this GPU's
    occupancy (RESIDENCY_LIVE). None: 1 per SM, assumed (RESIDENCY_ASSUMED). The programs in flight, which
    share one pass over a head's K and V, are SMs × programs_per_sm.

    How the model meets the H200's counters (results/h200.json: bf16, batch 2 × 16 heads, the kernel's own
    tiles), model ÷ counted, at the residency the recorded timelines measure (2 per SM, head_dim 128):
    - up to 16K (head_dim 64: 32K), one head's K/V fits the L2: 0.88–1.34 (at 1K–2K some of the writes are
      still in L2 when the counters stop, so the model is above them);
    - head_dim 128, causal, 32K–256K: 0.98–1.07;
    - head_dim 128, not causal, 32K–256K: 0.69 at 32K and 0.76 at 64K, falling to 0.52 at 256K: the GPU reads
      up to twice what the model says. The model's premise, that a wave's programs share each K/V tile through
      L2, does not hold there, and the model is not fitted to hide it;
    - head_dim 64 (no timeline of its kernel: 1 per SM assumed), 64K–256K: 2.8–3.5 causal, 0.55–1.9 not.
    With 1 per SM assumed instead, head_dim 128 not causal meets the counters at 128K–256K (0.99–1.01): a
    coincidence the timeline contradicts, not a reason to assume it (tests/test_story_truth.py pins these).
    (The 2026-12-02 16:41 recording; each re-recording moves these by a few hundredths.)"""
    if not facts or not facts.get("l2_bytes") or not facts.get("sm_count"):
        return None
    sm_count = int(facts["sm_count"])
    per_sm = int(programs_per_sm) if programs_per_sm else 1
    where = measured if programs_per_sm else RESIDENCY_ASSUMED
    return Machine(int(facts["l2_bytes"]), sm_count * per_sm,
                   f"{sm_count * per_sm} programs in flight ({per_sm} per SM, {where})",
                   per_sm)


def total_bytes(parts: list[Traffic]) -> int:
    return sum(part.total for part in parts)


# -- the animation's counters: the same models, step by step ---------------------------------------

def step_traffic(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype_bytes: int,
                 interpreter: bool = False) -> dict[str, np.ndarray]:
    """Cumulative HBM bytes read and written after each step of tile_schedule, one (batch, head).

    Flash (what the kernel loads and stores: the no-cache model): the Q tile at a Q block's first step,
    the K and V tiles every step, O and the fp32 LSE at a Q block's last step.
    Standard (the naive kernels' traffic, handed out to the tiles flash visits, so that its totals are
    naive_traffic's): Q at a Q block's first step and each K and V tile the first time any Q block meets
    it; the tile's visible scores written to S, read back by the softmax (`softmax_passes` times), P
    written for the tile and read for its visible scores; at a Q block's last step P's zeros right of
    the tiles it visits (causal) and O.

    Returns int64 arrays of shape (T,): "flash_read", "flash_written", "naive_read",
    "naive_written" (cumulative), and "flash_bytes", "naive_bytes" (read + written).
    """
    n, d, e = seq_len, head_dim, dtype_bytes
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

    flash_read = first * rows * d * e + 2 * cols * d * e
    flash_written = last * rows * (d * e + LSE_BYTES)
    naive_read = (first * rows * d * e + first_visit * 2 * cols * d * e
                     + passes * visible * SCORE_BYTES + visible * e)
    naive_written = (visible * SCORE_BYTES + rows * cols * e
                        + last * (rows * (n - covered) * e + rows * d * e))
    out = {name: np.cumsum(values.astype(np.int64)) for name, values in (
        ("flash_read", flash_read), ("flash_written", flash_written),
        ("naive_read", naive_read), ("naive_written", naive_written))}
    out["flash_bytes"] = out["flash_read"] + out["flash_written"]
    out["naive_bytes"] = out["naive_read"] + out["naive_written"]
    return out


# -- roofline ---------------------------------------------------------------------------------------

def arithmetic_intensity(flops: float, hbm_bytes: float) -> float | None:
    """FLOPs per HBM byte; None when no byte was moved."""
    return flops / hbm_bytes if hbm_bytes > 0 else None


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """The roofline: min(compute peak, bandwidth × intensity), in TFLOPS."""
    return min(peak_tflops, bandwidth_gbps * 1e9 * intensity / 1e12)


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """The intensity (FLOPs/byte) where the bandwidth roof meets the compute roof."""
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def sram_bandwidth_gbps(sm_count: int, sm_clock_mhz: float) -> float:
    """Shared-memory bandwidth of the whole chip by its spec width (SMEM_BYTES_PER_CLOCK_PER_SM), GB/s."""
    return sm_count * sm_clock_mhz * 1e6 * SMEM_BYTES_PER_CLOCK_PER_SM / 1e9


# -- FlashAttention-1 order -------------------------------------------------------------------------
# kernels/flash_v1.py: one program per (batch, head); the outer loop walks the K/V tiles (each loaded
# once), the inner loop the Q blocks that tile touches. Between steps a Q block's O, m and l live in HBM
# in fp32: read back at every tile but its first, written back at every tile but its last, where O (in
# the input dtype) and the fp32 LSE are written instead.

FA1_STATE_BYTES = 4  # O, m and l travel between FA1 steps in fp32
# The HBM tensors a kernel step loads or stores, in the order of a trace's `loads` / `stores` (kernels/trace.py);
# "state" is the FA1-order kernel's fp32 O, m and l between steps.
IO_TENSORS = ("Q", "K", "V", "O", "LSE", "state")


def fa1_state_bytes_per_row(head_dim: int) -> int:
    """Bytes of one row's running state in HBM between FA1 steps: O (head_dim fp32), m and l."""
    return (head_dim + 2) * FA1_STATE_BYTES


def schedule_arrays(schedule: list[Step]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A schedule's (q_block, k_block) as int64 arrays and (first, last) as bool arrays, one entry a step."""
    return (np.array([s.q_block for s in schedule], dtype=np.int64),
            np.array([s.k_block for s in schedule], dtype=np.int64),
            np.array([s.first for s in schedule], dtype=bool), np.array([s.last for s in schedule], dtype=bool))


def fa1_schedule(seq_len: int, block_m: int, block_n: int, causal: bool) -> list[Step]:
    """The FA1-order kernel's steps: K/V tile by K/V tile (ascending), and within one the Q blocks that
    see it (ascending). The same (Q block, K/V tile) pairs as tile_schedule; `first` / `last` still mark
    a Q block's first / last tile."""
    steps = sorted(tile_schedule(seq_len, block_m, block_n, causal), key=lambda s: (s.k_block, s.q_block))
    return [Step(index, s.q_block, s.k_block, s.masked, s.first, s.last) for index, s in enumerate(steps)]


def flash_v1_extra_bytes(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Device memory the FA1-order kernel needs beyond Q, K, V: O, the LSE and the fp32 O, m, l it
    keeps in HBM between steps (bytes)."""
    return (flash_extra_bytes(seq_len, batch, heads, head_dim, dtype_bytes)
            + batch * heads * seq_len * fa1_state_bytes_per_row(head_dim))


def flash_v1_traffic(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                     block_m: int, block_n: int) -> list[Traffic]:
    """The FA1-order kernel's HBM loads and stores by phase (no cache): every K/V tile once, the Q block
    at every step, O, m and l read back and written back at every step but a Q block's first / last."""
    bh, n, d, e = batch * heads, seq_len, head_dim, dtype_bytes
    tiles = k_tiles_per_q_block(n, block_m, block_n, causal)
    rows = np.minimum(block_m, n - np.arange(len(tiles)) * block_m)
    round_trips = int((rows * (tiles - 1)).sum())  # rows × the steps after a block's first (before its last)
    return [
        Traffic("load K, V tiles (once each)", bh * 2 * n * d * e, 0),
        Traffic("load Q blocks (every step)", bh * int((rows * tiles).sum()) * d * e, 0),
        Traffic("read back O, m, l", bh * round_trips * fa1_state_bytes_per_row(d), 0),
        Traffic("online softmax (in SRAM)", 0, 0, attention_flops(n, batch, heads, d, causal)),
        Traffic("write back O, m, l", 0, bh * round_trips * fa1_state_bytes_per_row(d)),
        Traffic("write O, LSE", 0, bh * n * (d * e + LSE_BYTES)),
    ]


def fa1_step_traffic(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool,
                     dtype_bytes: int) -> dict[str, np.ndarray]:
    """Cumulative HBM bytes after each step of fa1_schedule, one (batch, head), like step_traffic.

    Returns int64 arrays of shape (T,): "flash_v1_read", "flash_v1_written", "flash_v1_bytes" (what the
    FA1-order kernel loads and stores), and of those the O, m, l round trips: "state_read",
    "state_written"; their totals are flash_v1_traffic's."""
    n, d, e = seq_len, head_dim, dtype_bytes
    schedule = fa1_schedule(n, block_m, block_n, causal)
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
        ("flash_v1_read", read), ("flash_v1_written", written),
        ("state_read", state_read), ("state_written", state_written))}
    out["flash_v1_bytes"] = out["flash_v1_read"] + out["flash_v1_written"]
    return out


SHARED_MEMORY, REGISTERS = "shared memory", "registers"


def on_chip_buffers(block_m: int, block_n: int, head_dim: int, dtype_bytes: int) -> dict[str, dict[str, int]]:
    """What one program of either order holds on chip at a step (bytes), by where it lives:
    - shared memory (SRAM): the Q block and the K and V tiles, in the input dtype (tl.load / TMA fill them;
      the kernel double-buffers K and V: smem_bytes);
    - registers: the S tile, m, l and the O accumulator, in fp32 (tl.dot's results stay in the warps'
      registers; kernels/flash.py keeps them for a whole Q block, kernels/flash_v1.py reloads m, l and O
      from HBM every step)."""
    e, f = dtype_bytes, FA1_STATE_BYTES
    return {
        SHARED_MEMORY: {"Q block": block_m * head_dim * e, "K tile": block_n * head_dim * e,
                        "V tile": block_n * head_dim * e},
        REGISTERS: {"S tile": block_m * block_n * f, "m": block_m * f, "l": block_m * f,
                    "O acc": block_m * head_dim * f},
    }


def sram_buffers(block_m: int, block_n: int, head_dim: int, dtype_bytes: int) -> dict[str, int]:
    """Every buffer of on_chip_buffers in one dict, shared memory's first (bytes)."""
    return {name: size for place in on_chip_buffers(block_m, block_n, head_dim, dtype_bytes).values()
            for name, size in place.items()}


# -- the algorithms: one row each ---------------------------------------------------------------------
# Every algorithm a record can name (bench.algorithms has the same keys; viz/theme.py draws them; a test checks
# that the three tables agree). A new kernel is one row here: its HBM traffic by kernel or phase, and the
# device memory it needs beyond Q, K, V by its design.

Shape = tuple[int, int, int, int, int, bool]  # (seq_len, batch, heads, head_dim, dtype_bytes, causal)


@dataclass(frozen=True)
class AlgorithmModel:
    traffic: Callable[[Shape, tuple[int, int], Machine | None, bool], list[Traffic]]
    # (shape, tiles, machine for the L2-aware model or None, interpreter path) -> traffic by kernel or phase
    extra_bytes: Callable[[int, int, int, int, int], int]  # (seq_len, batch, heads, head_dim, dtype_bytes)
    tiles: tuple[int, int] | None = None  # the tiles a record that does not say which it ran is assumed to use
    check_tiles: Callable[[object, object], None] | None = None  # the kernel's rule for tiles a record names


def check_v3_tiles(block_m: object, block_n: object) -> None:
    """The FA-3 style kernel's tiles: query rows per program and keys per K/V tile, each a multiple of 64 (wgmma's
    M per consumer warpgroup) up to 256."""
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(block, bool) or not isinstance(block, int) or block % 64 or not 64 <= block <= 256:
            raise ValueError(f"{name} of the FA-3 style kernel must be a multiple of 64 from 64 to 256; got {block!r}")


def _flash_model(shape: Shape, tiles: tuple[int, int], machine: Machine | None, interpreter: bool) -> list[Traffic]:
    if machine is None:
        return flash_traffic_no_cache(*shape, *tiles)
    return flash_traffic_l2(*shape, *tiles, machine.l2_bytes, machine.programs_in_flight)


ALGORITHM_MODELS: dict[str, AlgorithmModel] = {
    "flash": AlgorithmModel(_flash_model, flash_extra_bytes, ASSUMED_FLASH_TILES, check_tiles),
    "naive": AlgorithmModel(lambda shape, tiles, machine, interpreter: naive_traffic(*shape, interpreter=interpreter),
                            naive_extra_bytes),
    "sdpa_default": AlgorithmModel(lambda shape, *_: fused_traffic(*shape), fused_extra_bytes),
    "sdpa_flash": AlgorithmModel(lambda shape, *_: fused_traffic(*shape), fused_extra_bytes),
    "torch_naive": AlgorithmModel(lambda shape, *_: torch_naive_traffic(*shape), naive_extra_bytes),
    "flash_v1": AlgorithmModel(lambda shape, tiles, *_: flash_v1_traffic(*shape, *tiles), flash_v1_extra_bytes,
                               (64, 64), check_tiles),
    # the FA-3 style Gluon kernel (kernels/flash_v3.py): the same loads and stores as flash, with its own tiles
    # (query rows per program: 2 consumer warpgroups × 64 at head_dim 128, 3 × 64 at 64; 128 keys per tile)
    "flash_v3": AlgorithmModel(_flash_model, flash_extra_bytes, (128, 128), check_v3_tiles),
}
ALGORITHMS = tuple(ALGORITHM_MODELS)
EXTRA_BYTES = {key: model.extra_bytes for key, model in ALGORITHM_MODELS.items()}


def _model(algorithm: str) -> AlgorithmModel:
    if algorithm not in ALGORITHM_MODELS:
        raise ValueError(f"unknown algorithm {algorithm!r}; the cost model knows {', '.join(ALGORITHMS)}")
    return ALGORITHM_MODELS[algorithm]


def traffic(algorithm: str, seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
            block_m: int | None = None, block_n: int | None = None, machine: Machine | None = None,
            interpreter: bool = False) -> list[Traffic]:
    """HBM traffic of an algorithm by kernel or phase: the model behind every byte count on the page.

    The flash kernels: the L2-aware model when `machine` is given, else the no-cache bound; block_m × block_n
    are the tiles the kernel ran (the algorithm's assumed tiles when unknown)."""
    model = _model(algorithm)
    tiles = (block_m or model.tiles[0], block_n or model.tiles[1]) if model.tiles else (0, 0)
    return model.traffic((seq_len, batch, heads, head_dim, dtype_bytes, causal), tiles, machine, interpreter)


def check_algorithm_tiles(algorithm: str, block_m: object, block_n: object) -> None:
    """The tiles a record of this algorithm names, by its kernel's own rule (ValueError when they break it)."""
    rule = _model(algorithm).check_tiles
    if rule is None:
        raise ValueError(f"{algorithm} has no tiles of ours to name")
    rule(block_m, block_n)


def extra_bytes(algorithm: str, seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Device memory an algorithm needs beyond its inputs, by its design."""
    return _model(algorithm).extra_bytes(seq_len, batch, heads, head_dim, dtype_bytes)
