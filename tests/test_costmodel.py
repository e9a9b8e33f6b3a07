"""The cost model (costmodel/) against closed forms, brute force and hand-worked numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import costmodel
from costmodel import (
    flash_extra_bytes,
    flash_traffic_l2,
    flash_traffic_no_cache,
    naive_extra_bytes,
    naive_traffic,
    scores_bytes,
    step_traffic,
    tile_schedule,
    total_bytes,
)
from costmodel import Shape
from fmt import fmt_bytes, fmt_tokens
from kernels import specs

TILES = (16, 32, 64, 128)
GiB = 2**30
DTYPE_OF_BYTES = {2: "bfloat16", 4: "float32"}


def S(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool) -> Shape:
    """The cost model's shape, as these hand-worked cases write it: (N, batch, heads, head_dim, bytes, causal)."""
    return Shape(seq_len, batch, heads, head_dim, DTYPE_OF_BYTES[dtype_bytes], causal)


def brute_force_tiles(seq_len: int, block_m: int, block_n: int, causal: bool) -> list[tuple[int, int, bool]]:
    """(q_block, k_block, masked) of every tile with at least one unmasked (query, key) pair, found by
    looking at every position of every padded tile; in row-major order."""
    tiles = []
    for q_block in range(math.ceil(seq_len / block_m)):
        queries = np.arange(q_block * block_m, (q_block + 1) * block_m)[:, None]
        for k_block in range(math.ceil(seq_len / block_n)):
            keys = np.arange(k_block * block_n, (k_block + 1) * block_n)[None, :]
            allowed = (queries < seq_len) & (keys < seq_len) & ((keys <= queries) if causal else True)
            if allowed.any():
                tiles.append((q_block, k_block, not allowed.all()))
    return tiles


def as_tuples(seq_len: int, block_m: int, block_n: int, causal: bool) -> list[tuple[int, int, bool]]:
    return [(s.q_block, s.k_block, s.masked) for s in tile_schedule(seq_len, block_m, block_n, causal)]


@pytest.mark.parametrize("seq_len", [1, 17, 100, 257, 512])
@pytest.mark.parametrize("block_m", TILES)
@pytest.mark.parametrize("block_n", TILES)
def test_non_causal_visits_every_tile(seq_len: int, block_m: int, block_n: int) -> None:
    schedule = tile_schedule(seq_len, block_m, block_n, causal=False)
    assert len(schedule) == math.ceil(seq_len / block_m) * math.ceil(seq_len / block_n)


@pytest.mark.parametrize("seq_len", [1, 17, 100, 257, 512])
@pytest.mark.parametrize("block_m", TILES)
@pytest.mark.parametrize("block_n", TILES)
@pytest.mark.parametrize("causal", [False, True])
def test_schedule_matches_brute_force(seq_len: int, block_m: int, block_n: int, causal: bool) -> None:
    assert as_tuples(seq_len, block_m, block_n, causal) == brute_force_tiles(seq_len, block_m, block_n, causal)


@settings(max_examples=60, deadline=None)
@given(
    seq_len=st.integers(1, 600),
    block_m=st.sampled_from(TILES),
    block_n=st.sampled_from(TILES),
    causal=st.booleans(),
)
def test_schedule_matches_brute_force_anywhere(seq_len: int, block_m: int, block_n: int, causal: bool) -> None:
    assert as_tuples(seq_len, block_m, block_n, causal) == brute_force_tiles(seq_len, block_m, block_n, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_step_flags_and_order(causal: bool) -> None:
    schedule = tile_schedule(257, 64, 32, causal)
    assert [s.index for s in schedule] == list(range(len(schedule)))
    pairs = [(s.q_block, s.k_block) for s in schedule]
    assert pairs == sorted(pairs)  # q block by q block, k ascending
    last_k = {}
    for s in schedule:
        last_k[s.q_block] = max(last_k.get(s.q_block, -1), s.k_block)
    for s in schedule:
        assert s.first == (s.k_block == 0)
        assert s.last == (s.k_block == last_k[s.q_block])


def test_partial_tiles_small_cases() -> None:
    # one token: a single 16×16 tile with 255 of its 256 positions masked
    assert as_tuples(1, 16, 16, causal=True) == [(0, 0, True)]
    # 17 tokens in 16-token tiles: a full tile and 1-token tails
    assert as_tuples(17, 16, 16, causal=False) == [(0, 0, False), (0, 1, True), (1, 0, True), (1, 1, True)]
    # causal drops tile (0, 1): keys 16.. all come after queries 0..15; (0, 0) straddles the diagonal
    assert as_tuples(17, 16, 16, causal=True) == [(0, 0, True), (1, 0, True), (1, 1, True)]


@pytest.mark.parametrize(
    ("seq_len", "block_m", "block_n", "message"),
    [(0, 16, 16, "seq_len"), (64, 8, 16, "block_m"), (64, 16, 48, "block_n"), (64, 0, 16, "block_m")],
)
def test_invalid_arguments_are_rejected(seq_len: int, block_m: int, block_n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tile_schedule(seq_len, block_m, block_n, causal=False)


def test_step_traffic_hand_worked() -> None:
    # N = 20 tokens, d = 4, 16-token tiles, 2-byte elements: tiles (0,0) (0,1) (1,0) (1,1),
    # Q block rows 16 then 4, K/V tile columns 16 then 4.
    traffic = step_traffic(S(20, 1, 1, 4, 2, False), 16, 16)
    flash_steps = [
        16 * 4 * 2 + 2 * 16 * 4 * 2,  # (0,0): Q tile + K, V tiles = 384
        2 * 4 * 4 * 2 + 16 * 4 * 2 + 16 * 4,  # (0,1): K, V (4 rows) + O + fp32 LSE = 256
        4 * 4 * 2 + 2 * 16 * 4 * 2,  # (1,0): Q (4 rows) + K, V = 288
        2 * 4 * 4 * 2 + 4 * 4 * 2 + 4 * 4,  # (1,1): K, V + O + LSE = 112
    ]
    naive_read = [
        # Q at a block's first step, K and V the first time a tile is met, S read (fp32), P read (2 B)
        128 + 2 * 128 + 16 * 16 * 4 + 16 * 16 * 2,  # 1920
        2 * 32 + 16 * 4 * 4 + 16 * 4 * 2,  # 448
        32 + 4 * 16 * 4 + 4 * 16 * 2,  # 416
        4 * 4 * 4 + 4 * 4 * 2,  # 96
    ]
    naive_written = [
        # S written (fp32), P written (2 B), O at a block's last step
        16 * 16 * 4 + 16 * 16 * 2,  # 1536
        16 * 4 * 4 + 16 * 4 * 2 + 128,  # 512
        4 * 16 * 4 + 4 * 16 * 2,  # 384
        4 * 4 * 4 + 4 * 4 * 2 + 32,  # 128
    ]
    assert traffic["fa2_bytes"].tolist() == [384, 640, 928, 1040] == np.cumsum(flash_steps).tolist()
    assert traffic["naive_read"].tolist() == np.cumsum(naive_read).tolist()
    assert traffic["naive_written"].tolist() == np.cumsum(naive_written).tolist()
    assert traffic["naive_bytes"][-1] == 5440


@pytest.mark.parametrize("seq_len", [1, 17, 100, 257, 512])
@pytest.mark.parametrize(("block_m", "block_n"), [(16, 16), (32, 16), (16, 64), (64, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_step_traffic_totals_are_the_whole_kernel_models(seq_len: int, block_m: int, block_n: int,
                                                         causal: bool) -> None:
    """The animation's counters end where the cost model's whole-kernel traffic is: one source."""
    head_dim, b = 64, 2
    traffic = step_traffic(S(seq_len, 1, 1, head_dim, b, causal), block_m, block_n)
    flash = flash_traffic_no_cache(S(seq_len, 1, 1, head_dim, b, causal), block_m, block_n)
    naive = naive_traffic(S(seq_len, 1, 1, head_dim, b, causal))
    assert traffic["fa2_read"][-1] == sum(part.reads for part in flash)
    assert traffic["fa2_written"][-1] == sum(part.writes for part in flash)
    assert traffic["naive_read"][-1] == sum(part.reads for part in naive)
    assert traffic["naive_written"][-1] == sum(part.writes for part in naive)
    assert len(traffic["fa2_bytes"]) == len(tile_schedule(seq_len, block_m, block_n, causal))
    assert np.all(np.diff(traffic["fa2_bytes"]) > 0) and np.all(np.diff(traffic["naive_bytes"]) > 0)


def test_naive_traffic_hand_worked() -> None:
    # N = 256, d = 64, 2-byte elements: one N×d matrix is 256·64·2 = 32768 bytes; S is 256²·4 = 262144
    # bytes (fp32), P is 256²·2 = 131072 bytes
    parts = naive_traffic(S(256, 1, 1, 64, 2, False))
    assert [p.name for p in parts] == ["S = QKᵀ", "P = softmax(S)", "O = PV"]
    assert [(p.reads, p.writes) for p in parts] == [(65536, 262144), (262144, 131072), (131072 + 32768, 32768)]
    assert [p.flops for p in parts] == [2 * 256 * 256 * 64, 5 * 256 * 256, 2 * 256 * 256 * 64]
    # causal: the visible triangle (256·257/2 = 32896 scores) of S written and read, and of P read; P written whole
    tri = 256 * 257 // 2
    causal = naive_traffic(S(256, 1, 1, 64, 2, True))
    assert [(p.reads, p.writes) for p in causal] == [(65536, tri * 4), (tri * 4, 131072), (tri * 2 + 32768, 32768)]


def test_naive_softmax_reads_s_twice_past_one_block() -> None:
    one, two = (naive_traffic(S(n, 1, 1, 64, 2, False))[1] for n in (8192, 16384))
    assert one.reads == 8192 * 8192 * 4 and two.reads == 2 * 16384 * 16384 * 4
    assert naive_traffic(S(2048, 1, 1, 64, 2, False), interpreter=True)[1].reads == 2 * 2048 * 2048 * 4


def test_the_issue_setting_by_hand() -> None:
    """8K tokens, batch 2 × 16 heads, d = 128, bf16: standard moves ~26 GB (what the H200's counters gave)."""
    naive = total_bytes(naive_traffic(S(8192, 2, 16, 128, 2, False)))
    square = 32 * 8192 * 8192
    assert naive == square * (4 + 4 + 2 + 2) + 32 * 8192 * 128 * 2 * 4
    assert 25.9e9 < naive < 26.1e9
    # flash with 128×64 tiles and no cache: K, V re-read by each of 64 Q blocks: 8 GiB plus Q, O and LSE
    no_cache = total_bytes(flash_traffic_no_cache(S(8192, 2, 16, 128, 2, False), 128, 64))
    assert no_cache == 32 * (8192 * 128 * 2 * 2 + 64 * 2 * 8192 * 128 * 2 + 8192 * 4)
    # L2-aware on an H200 (60 MiB L2, 132 programs at once: ~3 heads in flight, 12 MiB of K/V): read once
    l2 = total_bytes(flash_traffic_l2(S(8192, 2, 16, 128, 2, False), 128, 64, 60 << 20, 132))
    assert l2 == 32 * (8192 * 128 * 2 * 4 + 8192 * 4)


def test_flash_l2_model_streams_once_per_wave_when_a_head_does_not_fit() -> None:
    # 256K tokens, d = 128, bf16: one head's K and V are 128 MiB > the usable L2; 2048 Q blocks of 128 over
    # 132 programs at once make 16 waves, each streaming K and V once
    kv = costmodel.flash_kv_reads_l2(S(262144, 1, 1, 128, 2, False), 128, 64, 60 << 20, 132)
    assert kv == 16 * 2 * 262144 * 128 * 2
    # causal: a wave streams the keys its furthest Q block needs
    causal = costmodel.flash_kv_reads_l2(S(1024, 1, 1, 64, 2, True), 128, 64, 64 << 10, 2)
    waves_last_block = [1, 3, 5, 7]  # Q blocks 0..7 in waves of 2: keys up to 256, 512, 768, 1024
    assert causal == sum(2 * (b + 1) * 128 * 64 * 2 for b in waves_last_block)


def test_roofline_arithmetic() -> None:
    assert costmodel.ridge_point(790, 4250) == pytest.approx(185.88, rel=1e-3)
    assert costmodel.attainable_tflops(10, 790, 4250) == pytest.approx(42.5)
    assert costmodel.attainable_tflops(1000, 790, 4250) == 790
    assert costmodel.arithmetic_intensity(100, 0) is None
    assert costmodel.sram_bandwidth_gbps(132, 1980) == pytest.approx(132 * 1.98e9 * 128 / 1e9)


def test_scores_bytes_headline() -> None:
    assert scores_bytes(S(131072, 1, 1, 64, 2, False)) == 32 * GiB
    assert fmt_bytes(scores_bytes(S(131072, 1, 1, 64, 2, False))) == "32.0 GiB"
    assert scores_bytes(S(1024, 2, 8, 64, 4, False)) == 1024 * 1024 * 4 * 16
    assert scores_bytes(S(1024, 2, 8, 64, 2, False), 4) == 1024 * 1024 * 4 * 16  # fp32 scores of bf16 inputs


def test_extra_bytes_formulas() -> None:
    # batch 2 × 3 heads, N = 1024, d = 64, 2 bytes: naive keeps S (fp32) + P + O per head
    assert naive_extra_bytes(S(1024, 2, 3, 64, 2, False)) == 6 * (1024 * 1024 * (4 + 2) + 1024 * 64 * 2) == 38535168
    # flash keeps O + the fp32 LSE per head
    assert flash_extra_bytes(S(1024, 2, 3, 64, 2, False)) == 6 * 1024 * (64 * 2 + 4) == 811008


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (141 * GiB, "141.0 GiB"), (2**40, "1.0 TiB")],
)
def test_fmt_bytes(n: int, text: str) -> None:
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(("n", "text"), [(512, "512"), (1024, "1K"), (1536, "1.5K"), (131072, "128K"), (2**20, "1M")])
def test_fmt_tokens(n: int, text: str) -> None:
    assert fmt_tokens(n) == text


# -- FlashAttention-1 order -------------------------------------------------------------------------

def test_fa1_schedule_is_kv_outer_over_the_same_tiles() -> None:
    for causal in (False, True):
        fa1 = costmodel.fa1_schedule(100, 32, 16, causal)
        fa2 = tile_schedule(100, 32, 16, causal)
        assert sorted((s.q_block, s.k_block, s.first, s.last) for s in fa1) == \
            sorted((s.q_block, s.k_block, s.first, s.last) for s in fa2)
        assert [(s.k_block, s.q_block) for s in fa1] == sorted((s.k_block, s.q_block) for s in fa1)
        assert [s.index for s in fa1] == list(range(len(fa1)))


def test_fa1_step_traffic_hand_worked() -> None:
    # N = 20 tokens, d = 4, 16-token tiles, 2-byte elements; FA1 order (0,0) (1,0) (0,1) (1,1): Q block
    # rows 16 then 4, K/V tile columns 16 then 4; the state (O, m, l in fp32) is (4 + 2)·4 = 24 B a row.
    traffic = costmodel.fa1_step_traffic(S(20, 1, 1, 4, 2, False), 16, 16)
    read = [
        2 * 16 * 4 * 2 + 16 * 4 * 2,  # (0,0): K, V tiles + Q block = 384
        4 * 4 * 2,  # (1,0): Q (4 rows), K/V still in SRAM = 32
        2 * 4 * 4 * 2 + 16 * 4 * 2 + 16 * 24,  # (0,1): K, V (4 rows) + Q + state read back = 576
        4 * 4 * 2 + 4 * 24,  # (1,1): Q + state = 128
    ]
    written = [
        16 * 24,  # (0,0): state written back = 384
        4 * 24,  # (1,0): 96
        16 * 4 * 2 + 16 * 4,  # (0,1): the block's last tile: O + fp32 LSE = 192
        4 * 4 * 2 + 4 * 4,  # (1,1): 48
    ]
    assert traffic["fa1_read"].tolist() == np.cumsum(read).tolist() == [384, 416, 992, 1120]
    assert traffic["fa1_written"].tolist() == np.cumsum(written).tolist() == [384, 480, 672, 720]
    assert traffic["state_read"].tolist() == [0, 0, 384, 480]
    assert traffic["state_written"].tolist() == [384, 480, 480, 480]
    assert traffic["fa1_bytes"][-1] == 1840
    # the same kernel by phase
    parts = {p.name: p for p in costmodel.fa1_traffic(S(20, 1, 1, 4, 2, False), 16, 16)}
    assert parts["load K, V tiles (once each)"].reads == 2 * 20 * 4 * 2
    assert parts["load Q blocks (every step)"].reads == 2 * 20 * 4 * 2  # every Q block twice
    assert parts["read back O, m, l"].reads == parts["write back O, m, l"].writes == 20 * 24
    assert costmodel.total_bytes(specs.traffic("fa1", S(20, 1, 1, 4, 2, False), 16, 16)) == 1840


@pytest.mark.parametrize("seq_len", [1, 17, 100, 257, 512])
@pytest.mark.parametrize("block_m,block_n", [(16, 16), (32, 16), (16, 64), (64, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_fa1_step_totals_are_the_whole_kernel(seq_len: int, block_m: int, block_n: int, causal: bool) -> None:
    steps = costmodel.fa1_step_traffic(S(seq_len, 1, 1, 32, 2, causal), block_m, block_n)
    parts = costmodel.fa1_traffic(S(seq_len, 1, 1, 32, 2, causal), block_m, block_n)
    assert steps["fa1_read"][-1] == sum(p.reads for p in parts)
    assert steps["fa1_written"][-1] == sum(p.writes for p in parts)
    # FA1 reads Q once per step and K/V once; FA2 (no cache) K/V once per step and Q once: same step count
    fa2 = flash_traffic_no_cache(S(seq_len, 1, 1, 32, 2, causal), block_m, block_n)
    assert parts[-1] == fa2[-1]  # both write O and the LSE once
    num_steps = len(tile_schedule(seq_len, block_m, block_n, causal))
    assert len(steps["fa1_read"]) == num_steps


def test_fa1_moves_more_than_fa2_at_length() -> None:
    # at N = 4096, d = 64, 64-token tiles: the O, m, l round trips dwarf what FA2 saves on Q
    fa1 = total_bytes(specs.traffic("fa1", S(4096, 1, 1, 64, 2, False), 64, 64))
    fa2 = total_bytes(specs.traffic("fa2", S(4096, 1, 1, 64, 2, False), 64, 64))
    round_trips = 2 * 4096 * (64 - 1) * (64 + 2) * 4  # every row, 63 tiles after its first, both ways
    assert fa1 - fa2 == round_trips + 4096 * 64 * 2 * (64 - 1) - 2 * 4096 * 64 * 2 * (64 - 1)


def test_fa1_extra_bytes_and_sram_buffers() -> None:
    assert specs.extra_bytes("fa1", S(100, 2, 3, 64, 2, False)) == 2 * 3 * 100 * (64 * 2 + 4 + 66 * 4)
    buffers = costmodel.sram_buffers(64, 32, 128, 2)
    assert buffers == {"Q block": 16384, "K tile": 8192, "V tile": 8192, "S tile": 8192, "m": 256, "l": 256,
                       "O acc": 32768}


def test_the_shape_value() -> None:
    shape = Shape(8192, 2, 32, 128, "bfloat16", True, kv_heads=8)
    assert shape.kv_len == 8192 and shape.group == 4 and shape.dtype_bytes == 2 and shape.pass_ == "prefill"
    assert shape.one_head() == Shape(8192, 1, 1, 128, "bfloat16", True)
    assert Shape(8192) == Shape(8192, kv_len=8192, kv_heads=1)  # the defaults are the prefill's
    assert costmodel.attention_flops(shape) == 4 * 2 * 32 * 8192 * 8192 * 128 / 2  # the papers' causal half
    decode = Shape(1, 1, 32, 128, "bfloat16", True, kv_len=4096, kv_heads=8, pass_="decode")
    assert costmodel.attention_flops(decode) == 4 * 32 * 128 * (4096 - 0.5)
    assert costmodel.kv_bytes(decode) == 2 * 8 * 4096 * 128 * 2  # the cache a decode step streams: 4× fewer heads
    record = {**shape.record_fields(), "algorithm": "fa2"}
    assert Shape.of_record(record) == shape
    older = {key: value for key, value in record.items() if key not in ("kv_len", "kv_heads", "pass")}
    assert Shape.of_record(older) == shape.at(kv_heads=32)  # a record before the fields: every head its own K/V
    for bad in ({"heads": 6, "kv_heads": 4}, {"seq_len": 0}, {"dtype": "int8"}, {"pass_": "sideways"},
                {"causal": "yes"}, {"kv_len": -1}):
        with pytest.raises(ValueError):
            Shape(**{"seq_len": 16, **bad})
