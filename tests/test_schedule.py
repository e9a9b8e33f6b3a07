"""The story's arithmetic (viz/schedule.py) against closed forms, brute force and hand-worked numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viz.schedule import (
    flash_extra_bytes,
    naive_extra_bytes,
    scores_bytes,
    step_traffic,
    tile_schedule,
    traffic_totals,
)
from viz.theme import fmt_bytes, fmt_tokens

TILES = (16, 32, 64, 128)
GiB = 2**30


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
    traffic = step_traffic(20, 4, 16, 16, causal=False, dtype_bytes=2)
    flash_steps = [
        16 * 4 * 2 + 2 * 16 * 4 * 2,  # (0,0): Q tile + K, V tiles = 384
        2 * 4 * 4 * 2 + 16 * 4 * 2 + 16 * 4,  # (0,1): K, V (4 rows) + O + fp32 LSE = 256
        4 * 4 * 2 + 2 * 16 * 4 * 2,  # (1,0): Q (4 rows) + K, V = 288
        2 * 4 * 4 * 2 + 4 * 4 * 2 + 4 * 4,  # (1,1): K, V + O + LSE = 112
    ]
    standard_steps = [
        # Q, K tiles + S written and read (fp32) + P written and read (2 B) + V tile [+ O at the block's end]
        128 + 128 + 2 * 16 * 16 * 4 + 2 * 16 * 16 * 2 + 128,  # 3456
        128 + 32 + 2 * 16 * 4 * 4 + 2 * 16 * 4 * 2 + 32 + 128,  # 1088
        32 + 128 + 2 * 4 * 16 * 4 + 2 * 4 * 16 * 2 + 128,  # 1056
        32 + 32 + 2 * 4 * 4 * 4 + 2 * 4 * 4 * 2 + 32 + 32,  # 320
    ]
    assert traffic["flash_bytes"].tolist() == [384, 640, 928, 1040] == np.cumsum(flash_steps).tolist()
    assert traffic["standard_bytes"].tolist() == [3456, 4544, 5600, 5920] == np.cumsum(standard_steps).tolist()
    assert (traffic["flash_total"], traffic["standard_total"]) == (1040, 5920)


@pytest.mark.parametrize(("seq_len", "causal"), [(100, False), (100, True), (257, True), (512, False)])
def test_step_traffic_totals_equal_a_direct_sum(seq_len: int, causal: bool) -> None:
    head_dim, block_m, block_n, b = 64, 32, 16, 2
    flash = standard = 0
    for step in tile_schedule(seq_len, block_m, block_n, causal):
        rows = min(block_m, seq_len - step.q_block * block_m)
        cols = min(block_n, seq_len - step.k_block * block_n)
        flash += 2 * cols * head_dim * b
        flash += rows * head_dim * b if step.first else 0
        flash += rows * head_dim * b + rows * 4 if step.last else 0
        standard += (rows + 2 * cols) * head_dim * b + 2 * rows * cols * (4 + b)
        standard += rows * head_dim * b if step.last else 0
    traffic = step_traffic(seq_len, head_dim, block_m, block_n, causal, b)
    assert traffic["flash_total"] == flash == traffic["flash_bytes"][-1]
    assert traffic["standard_total"] == standard == traffic["standard_bytes"][-1]
    assert len(traffic["flash_bytes"]) == len(tile_schedule(seq_len, block_m, block_n, causal))
    assert np.all(np.diff(traffic["flash_bytes"]) > 0) and np.all(np.diff(traffic["standard_bytes"]) > 0)


def rows_of(totals: dict, side: str) -> list[tuple[int, int]]:
    return [(row["reads"], row["writes"]) for row in totals[side]]


def test_traffic_totals_hand_worked() -> None:
    # N = 256, d = 64, 2-byte elements: one N×d matrix is 256·64·2 = 32768 bytes; S is 256²·4 = 262144
    # bytes (fp32), P is 256²·2 = 131072 bytes; 64-token Q blocks make 4 passes over K and V.
    totals = traffic_totals(256, 64, 2, 64, causal=False)
    assert [row["step"] for row in totals["standard"]] == ["S = QKᵀ", "P = softmax(S)", "O = PV"]
    assert rows_of(totals, "standard") == [(65536, 262144), (262144, 131072), (131072 + 32768, 32768)]
    assert [row["step"] for row in totals["flash"]] == [
        "load Q block",
        "stream K, V tiles",
        "online softmax (in SRAM)",
        "write O, LSE",
    ]
    assert rows_of(totals, "flash") == [(32768, 0), (4 * 2 * 32768, 0), (0, 0), (0, 32768 + 256 * 4)]


def test_traffic_totals_causal_streams_only_kept_tiles() -> None:
    # 64-token tiles: Q block q reads keys 0 .. 64(q+1): 64 + 128 + 192 + 256 = 640 rows of K and of V
    causal = traffic_totals(256, 64, 2, 64, causal=True)
    assert causal["flash"][1]["reads"] == 2 * 640 * 64 * 2
    # 128-token K/V tiles: blocks 0 and 1 read one tile (128 keys), blocks 2 and 3 two (256 keys)
    wide = traffic_totals(256, 64, 2, 64, causal=True, block_n=128)
    assert wide["flash"][1]["reads"] == 2 * (128 + 128 + 256 + 256) * 64 * 2
    # the naive kernels still materialize the full N×N S and P
    assert causal["standard"] == traffic_totals(256, 64, 2, 64, causal=False)["standard"]


@pytest.mark.parametrize(("seq_len", "block_m", "causal"), [(257, 32, True), (100, 64, False), (512, 16, True)])
def test_traffic_totals_agree_with_the_schedule(seq_len: int, block_m: int, causal: bool) -> None:
    head_dim, b = 32, 2
    kv_rows = sum(
        min(block_m, seq_len - s.k_block * block_m) for s in tile_schedule(seq_len, block_m, block_m, causal)
    )
    totals = traffic_totals(seq_len, head_dim, b, block_m, causal, batch_heads=6)
    assert totals["flash"][1]["reads"] == 6 * 2 * kv_rows * head_dim * b
    single = traffic_totals(seq_len, head_dim, b, block_m, causal)
    assert rows_of(totals, "standard") == [(6 * r, 6 * w) for r, w in rows_of(single, "standard")]


def test_scores_bytes_headline() -> None:
    assert scores_bytes(131072, 1, 1, 2) == 32 * GiB
    assert fmt_bytes(scores_bytes(131072, 1, 1, 2)) == "32.0 GiB"
    assert scores_bytes(1024, heads=8, batch=2, dtype_bytes=4) == 1024 * 1024 * 4 * 16


def test_extra_bytes_formulas() -> None:
    # batch 2 × 3 heads, N = 1024, d = 64, 2 bytes: naive keeps S (fp32) + P + O per head
    assert naive_extra_bytes(1024, 2, 3, 64, 2) == 6 * (1024 * 1024 * (4 + 2) + 1024 * 64 * 2) == 38535168
    # flash keeps O + the fp32 LSE per head
    assert flash_extra_bytes(1024, 2, 3, 64, 2) == 6 * 1024 * (64 * 2 + 4) == 811008


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (141 * GiB, "141.0 GiB"), (2**40, "1.0 TiB")],
)
def test_fmt_bytes(n: int, text: str) -> None:
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(("n", "text"), [(512, "512"), (1024, "1K"), (1536, "1.5K"), (131072, "128K"), (2**20, "1M")])
def test_fmt_tokens(n: int, text: str) -> None:
    assert fmt_tokens(n) == text
