"""The FA-3 style Gluon kernel (kernels/fa3.py).

On a Hopper GPU (gpu-marked, skipped elsewhere): float64 checks on random inputs, ragged N, causal and not, fp16 and
bf16, head_dim 64, 128 and 256, with every output allocation poisoned with NaN first. Everywhere (CI's interpreter
included): the module imports, `v3_unavailable_reason()` says why it cannot run, and a call that cannot run raises a
clear error instead of a compile trace.
"""
import dataclasses
import math

import pytest
import torch

from kernels import gluon_compat
from kernels.fa3 import (LADDER, SHIPPED, SHORT, SUPPORTED_HEAD_DIMS, Fa3Config, config_for_v3, merge_tail,
                         TAIL_MAX_COST, TAIL_PART_COST, tail_plan, tiles_for, v3_unavailable_reason, flash_attention_v3)
from costmodel import LPT_L2_BYTES, Shape, lpt_heads_per_group
from kernels.reference import reference_attention, relative_error
from kernels.runtime import DEVICE, INTERPRET, backend

TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
RAGGED = (1, 17, 255, 1000, 4097)

needs_hopper = pytest.mark.skipif(backend() == "cuda" and v3_unavailable_reason() is not None,
                                  reason=f"FA-3 kernel cannot run here: {v3_unavailable_reason()}")


def random_qkv(shape, dtype, seed, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen, device=device).to(dtype) for _ in range(3))


# -- on the GPU ----------------------------------------------------------------------------------

@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("seq_len", RAGGED)
@pytest.mark.parametrize("head_dim", SUPPORTED_HEAD_DIMS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fa3_matches_float64_reference(seq_len, head_dim, dtype, causal, poisoned_allocations):
    q, k, v = random_qkv((2, 3, seq_len, head_dim), dtype, seed=seq_len * 7 + head_dim + causal)
    out, lse = flash_attention_v3(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = reference_attention(q, k, v, causal)  # float64, on the GPU
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    assert torch.isfinite(out).all() and torch.isfinite(lse).all(), "unwritten (NaN-poisoned) output elements"
    assert relative_error(out, ref) < TOLERANCE[dtype]
    assert relative_error(lse, ref_lse) < 1e-4


def _tail_split_configs(dtype, head_dim):
    """The tail-split configs a (dtype, head_dim) has: 16-bit's shipped one (not causal, every head_dim); e4m3: the
    shipped one (kernels.fp8.TAIL_SPLIT: at 128) and each fp8 candidate that carries it."""
    if dtype == torch.bfloat16:
        assert SHIPPED[(head_dim, False)].tail_split, "16-bit ships the tail split at every head_dim, not causal"
        return {"bf16": SHIPPED[(head_dim, False)]}
    from kernels.fp8 import config_for_fp8, fp8_candidates
    shipped = config_for_fp8(head_dim, False)
    assert shipped.tail_split, "e4m3 ships the tail split at head_dim 128, not causal"
    return {"e4m3 shipped": shipped, **{name: c for name, (d, causal, c) in fp8_candidates().items()
                                        if c.tail_split and d == head_dim and not causal}}


def _tail_inputs(dtype, batch, heads, seq_len, head_dim, seed):
    """(q, k, v, descale or None, the float64 reference's inputs): random, e4m3 quantized per head."""
    x = random_qkv((batch, heads, seq_len, head_dim), torch.float32, seed=seed)
    if dtype == torch.bfloat16:
        q, k, v = (t.bfloat16() for t in x)
        return q, k, v, None, (q, k, v)
    from kernels.fp8 import dequantize_fp8, quantize_fp8
    (q, dq), (k, dk), (v, dv) = (quantize_fp8(t, "head") for t in x)
    descale = torch.stack([d.reshape(-1).float() for d in (dq, dk, dv)])
    return q, k, v, descale, tuple(dequantize_fp8(t, d) for t, d in ((q, dq), (k, dk), (v, dv)))


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("seq_len", (255, 1000, 4097))
@pytest.mark.parametrize("dtype, head_dim", [(torch.bfloat16, d) for d in SUPPORTED_HEAD_DIMS]
                         + [(torch.float8_e4m3fn, 128)], ids=[f"bf16-{d}" for d in SUPPORTED_HEAD_DIMS] + ["e4m3-128"])
def test_tail_split_matches_float64_reference(seq_len, dtype, head_dim, poisoned_allocations):
    """Fa3Config.tail_split (not causal) at ragged N: batch 2 and heads enough for one wave of query tiles and a few
    more, so the tiles past the wave split along the keys (the plan is asserted) and merge by their LSE. Against
    float64 (on e4m3's dequantized inputs), and no worse than the same config unsplit on the same inputs."""
    from kernels.fa3 import launch_v3
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for name, config in _tail_split_configs(dtype, head_dim).items():
        per_head = -(-seq_len // config.tile_m)
        heads = -(-(sms // per_head + 1) // 2)
        main, splits, _ = tail_plan(per_head * 2 * heads, -(-seq_len // config.block_n), sms)
        assert splits > 1 and main == sms, (name, per_head, heads, main, splits)
        q, k, v, descale, exact = _tail_inputs(dtype, 2, heads, seq_len, head_dim, seed=seq_len * 5 + head_dim)
        ref, ref_lse = reference_attention(*exact, False)
        out, lse = launch_v3(q, k, v, False, head_dim ** -0.5, config, descale=descale)
        out0, _ = launch_v3(q, k, v, False, head_dim ** -0.5, dataclasses.replace(config, tail_split=False),
                            descale=descale)
        assert torch.isfinite(out).all() and torch.isfinite(lse).all(), f"{name}: unwritten (NaN-poisoned) elements"
        err, err0 = relative_error(out, ref), relative_error(out0, ref)
        assert err < (TOLERANCE[torch.bfloat16] if dtype == torch.bfloat16 else 0.05), name
        assert err <= 1.1 * err0 + 1e-4, f"{name}: split {err:.2e} against unsplit {err0:.2e}"
        assert relative_error(lse, ref_lse) < (1e-4 if dtype == torch.bfloat16 else 1e-3), name


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("dtype, head_dim, heads, seq_len, splits_some", [
    (torch.bfloat16, 64, 16, 8192, True), (torch.bfloat16, 128, 16, 8192, True), (torch.bfloat16, 256, 8, 16384, True),
    (torch.bfloat16, 64, 16, 16384, False), (torch.float8_e4m3fn, 128, 16, 8192, True)],
    ids=["bf16-64-8k", "bf16-128-8k", "bf16-256-16k", "bf16-64-16k", "e4m3-128-8k"])
def test_tail_split_at_long_n_changes_only_the_split_tiles(dtype, head_dim, heads, seq_len, splits_some):
    """Batch 2, not causal, the tail split on: at bf16 D64 and e4m3 D128 8K (tiles of 192 rows: 1376 tiles, 56 past
    ten waves of 132) each tile past the last whole wave splits in two, one short wave; at bf16 D128 8K (2048 tiles,
    68 past) in 5 parts over three short waves, at D256 16K H8 in 7; at bf16 D64 16K (2752 tiles, 112 past) nothing
    is split and the 1-D grid must give the 2-D grid's output. Rows of the whole waves come out bit for bit as
    without the split. The split rows: in bf16 within O's rounding of the unsplit ones; in e4m3 each part quantizes
    its P against its own running max, so they are checked against float64 on the dequantized inputs instead, no
    worse than the unsplit rows; the LSE within fp32's rounding of the unsplit."""
    from kernels.fa3 import launch_v3
    fp8 = dtype == torch.float8_e4m3fn
    if fp8:
        from kernels.fp8 import config_for_fp8
        split = config_for_fp8(head_dim, False)
    else:
        split = SHIPPED[(head_dim, False)]
    assert split.tail_split, "shipped not causal in 16-bit; in e4m3 at 128"
    base = dataclasses.replace(split, tail_split=False)
    n, bh_count = seq_len, 2 * heads
    q, k, v, descale, exact = _tail_inputs(dtype, 2, heads, n, head_dim, seed=8)
    o0, lse0 = launch_v3(q, k, v, False, head_dim ** -0.5, base, descale=descale)
    o1, lse1 = launch_v3(q, k, v, False, head_dim ** -0.5, split, descale=descale)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n_tiles = -(-n // base.tile_m)
    main, splits, _ = tail_plan(n_tiles * bh_count, n // base.block_n, sms)
    flat_rows = (torch.arange(bh_count * n, device="cuda") // n) * n_tiles + torch.arange(n, device="cuda").repeat(
        bh_count) // base.tile_m  # each row's tile in (batch·head, tile) order
    tail = (flat_rows >= main).reshape(2, heads, n)
    assert (splits > 1) == splits_some and bool(tail.any()) == splits_some
    assert torch.equal(o0[~tail], o1[~tail]) and torch.equal(lse0[~tail], lse1[~tail])
    torch.testing.assert_close(lse1[tail], lse0[tail], rtol=1e-5, atol=1e-5)
    if not fp8:
        if splits_some:
            torch.testing.assert_close(o1[tail].float(), o0[tail].float(), rtol=2 ** -7, atol=2e-3)
        return
    split_heads = sorted({int(i) for i in tail.reshape(bh_count, n).any(1).nonzero()})  # (batch·head) with split rows
    for bh in split_heads:
        b, h = divmod(bh, heads)
        rows = tail[b, h]
        ref = reference_attention(*(t[b:b + 1, h:h + 1, rows] if j == 0 else t[b:b + 1, h:h + 1]
                                    for j, t in enumerate(exact)), False)[0][0, 0]
        err1, err0 = relative_error(o1[b, h, rows], ref), relative_error(o0[b, h, rows], ref)
        assert err1 < 0.05 and err1 <= 1.1 * err0 + 1e-4, f"head {bh}: split {err1:.2e} against unsplit {err0:.2e}"


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("head_dim", SUPPORTED_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lazy", [False, True], ids=["rescale-always", "rescale-lazy"])
def test_fa3_rows_whose_max_jumps_late(head_dim, causal, lazy, poisoned_allocations):
    """Random inputs move a row's max by less than 2^8 after the first tile, so a conditional rescale never
    rescales on them. Here a few keys in later tiles are 30× larger: rows with a positive score on them move their
    max by far more than that, in tiles past the first, while the other rows of the same warp do not."""
    seq_len = 1000
    q, k, v = random_qkv((2, 3, seq_len, head_dim), torch.float32, seed=head_dim + causal)
    for pos in range(200, seq_len, 450):  # keys 200 and 650: tiles 1 and 5 of 128-key tiles
        k[:, :, pos] *= 30.0
    q, k, v = (t.bfloat16() for t in (q, k, v))
    config = dataclasses.replace(SHIPPED[(head_dim, causal)], lazy_rescale=lazy)
    out, lse = flash_attention_v3(q, k, v, causal=causal, return_lse=True, config=config)
    ref, ref_lse = reference_attention(q, k, v, causal)
    assert relative_error(out, ref) < 1e-2
    assert relative_error(lse, ref_lse) < 1e-4


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("head_dim", SUPPORTED_HEAD_DIMS)
def test_fa3_strided_inputs_and_custom_scale(head_dim, poisoned_allocations):
    # (B, N, H, D) memory seen as (B, H, N, D): the TMA descriptors take the strides as they are
    q, k, v = (t.transpose(1, 2) for t in random_qkv((2, 300, 3, head_dim), torch.bfloat16, seed=5))
    out = flash_attention_v3(q, k, v, causal=True, sm_scale=0.3)
    assert relative_error(out, reference_attention(q, k, v, True, 0.3)[0]) < 1e-2


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fa3_at_8k_matches_sdpa(causal):
    q, k, v = random_qkv((1, 4, 8192, 128), torch.bfloat16, seed=8)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    assert relative_error(flash_attention_v3(q, k, v, causal=causal), ref) < 1e-2


@pytest.mark.gpu
@needs_hopper
def test_fa3_every_config_class_runs_its_own_config():
    for (head_dim, causal), config in [*SHIPPED.items(), *SHORT.items()]:
        q, k, v = random_qkv((1, 2, 3 * config.tile_m + 5, head_dim), torch.bfloat16, seed=head_dim + causal)
        out = flash_attention_v3(q, k, v, causal=causal, config=config)
        assert relative_error(out, reference_attention(q, k, v, causal)[0]) < 1e-2, (head_dim, causal)


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("head_dim", SUPPORTED_HEAD_DIMS)
def test_lpt_reorders_the_causal_programs_and_nothing_else(head_dim, poisoned_allocations):
    """13 heads at a length where a group of heads is smaller than 13 (the last group short): O and the LSE equal,
    bit for bit, those of the same config one head at a time."""
    n = 16384 if head_dim == 64 else 8192
    assert 1 < lpt_heads_per_group(13, n, head_dim, 2) < 13
    q, k, v = random_qkv((1, 13, n, head_dim), torch.bfloat16, seed=head_dim)
    config = SHIPPED[(head_dim, True)]
    ours = flash_attention_v3(q, k, v, causal=True, return_lse=True, config=dataclasses.replace(config, lpt=True))
    theirs = flash_attention_v3(q, k, v, causal=True, return_lse=True, config=dataclasses.replace(config, lpt=False))
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", SUPPORTED_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_authors_fa4_peer_matches_float64_where_installed(head_dim, causal, poisoned_allocations):
    """The peer our FA-3 is measured against (kernels.peers.fa4_authors: our (B, H, N, D) tensors in, transposed
    views for theirs) gives the right answer, ragged N, where flash-attn-4 is installed on a Hopper GPU."""
    from costmodel import Shape
    from kernels.peers import fa4_authors, fa4_unavailable_for
    why = fa4_unavailable_for(Shape(1000, 2, 3, head_dim, "bfloat16"))
    if why:
        pytest.skip(why)
    q, k, v = random_qkv((2, 3, 1000, head_dim), torch.bfloat16, seed=head_dim + causal)
    out = fa4_authors(q, k, v, causal=causal)
    assert out.shape == q.shape and torch.isfinite(out).all()
    assert relative_error(out, reference_attention(q, k, v, causal)[0]) < 1e-2


# -- everywhere -----------------------------------------------------------------------------------

@pytest.mark.parametrize("causal,short_up_to", [(False, 1024), (True, 4096)])
def test_short_sequences_take_fewer_rows_where_they_measured_faster(causal, short_up_to):
    """B2 H16 d64 on 132 SMs, the lengths timed on the H200 (BENCHMARKS.md §1b: the 2 × 64-row config ÷ shipped 1.31,
    1.28, 0.96, 0.97 not causal and 1.40, 1.36, 1.07, 1.01 causal at 512, 1K, 2K, 4K): the wave model picks the
    faster one at each, and the shipped config from 8K on (issue 40's shapes)."""
    def plain(c):
        return dataclasses.replace(c, tail_split=False)
    for seq_len in (512, 1024, 2048, 4096, 8192, 16384, 32768):
        config = config_for_v3(64, causal, seq_len, 2 * 16, sms=132)
        assert plain(config) == plain(SHORT[(64, causal)] if seq_len <= short_up_to else SHIPPED[(64, causal)]), seq_len
        assert tiles_for(Shape(seq_len=seq_len, batch=2, heads=16, head_dim=64, causal=causal)) == (
            config.tile_m, config.block_n)
    # more heads fill the waves: at 1K, B8 H32 (256 heads) keeps the shipped 192 rows; other head_dims never change
    assert plain(config_for_v3(64, False, 1024, 256, sms=132)) == plain(SHIPPED[(64, False)])
    assert plain(config_for_v3(128, causal, 512, 32)) == plain(SHIPPED[(128, causal)])
    assert config_for_v3(64, causal) is SHIPPED[(64, causal)]  # no shape given: the shipped one


def test_tail_plan_splits_the_tiles_past_the_last_whole_wave_where_the_cost_model_says_it_pays():
    assert tail_plan(1376, 64, 132) == (1320, 2, 32)  # e4m3 D128 8K B2 H16: 56 tiles left, two parts each, one wave
    assert tail_plan(4096, 128, 132) == (4092, 32, 4)  # 4 left: 32 parts of 4 key tiles in one short wave
    assert tail_plan(2048, 64, 132) == (1980, 5, 13)  # bf16 D128 8K: 68 left, 5 parts over ⌈340 ÷ 132⌉ = 3 waves
    assert tail_plan(2048, 256, 132) == (1980, 7, 37)  # bf16 D256 16K B2 H8: 7 parts over 4 waves
    assert tail_plan(2752, 128, 132) == (2752, 1, 128)  # 112 left: no split finishes first
    assert tail_plan(1024, 32, 132) == (1024, 1, 32)  # 100 left: 5 parts would take 0.99 of a program: not worth it
    assert tail_plan(264, 64, 132) == (264, 1, 64)  # whole waves
    assert tail_plan(6, 1, 132) == (6, 1, 1)  # one key tile: nothing to split
    assert tail_plan(36, 8, 132) == (36, 1, 8)  # fewer tiles than SMs (short, host-bound calls): not split
    for tiles in (1, 5, 36, 131, 133, 200, 1024, 1376, 2048, 4097):
        for key_tiles in (1, 2, 3, 7, 64, 129, 256):
            main, splits, per = tail_plan(tiles, key_tiles, 132)
            if splits == 1:
                assert main == tiles and per == key_tiles
                continue
            rest = tiles - main
            assert main == tiles - tiles % 132 and 0 < rest < 132 and tiles >= 132
            assert (splits - 1) * per < key_tiles <= splits * per  # every part has keys; together all of them
            waves = -(-rest * splits // 132)  # the model's tail in program-times, at most TAIL_MAX_COST of one
            assert waves * (per / key_tiles + TAIL_PART_COST) <= TAIL_MAX_COST + 1e-9, (tiles, key_tiles)


def test_the_tail_split_runs_only_where_it_splits_something():
    """config_for_v3 keeps the shipped tail split (16-bit, not causal, every head_dim) only at shapes where
    tail_plan splits: elsewhere the same config without it (the 2-D grid, the library's fast path)."""
    assert all(c.tail_split is (not causal) for (d, causal), c in SHIPPED.items())
    cases = {(64, 8192, 32): True, (64, 16384, 32): False, (128, 16384, 32): True, (128, 32768, 32): True,
             (128, 8192, 32): True, (128, 4096, 32): False, (256, 16384, 16): True, (256, 8192, 16): False}
    for (head_dim, seq_len, batch_heads), splits in cases.items():
        config = config_for_v3(head_dim, False, seq_len, batch_heads, sms=132)
        assert config.tail_split is splits, (head_dim, seq_len)
        assert dataclasses.replace(config, tail_split=True) == SHIPPED[(head_dim, False)]


def test_e4m3_runs_the_tail_split_only_at_128_not_causal_where_it_splits_something():
    """kernels.fp8.config_for_fp8: the tail split at TAIL_SPLIT (head_dim 128, not causal), and given the shape only
    where tail_plan splits (B2 H16: 8K's 1376 tiles of 192 rows leave 56 past ten waves of 132, 16K's 2752 leave 112:
    two parts would not fit); never with precise_pv (its 128-key pair is not built with it), causal or at 64 and 256."""
    from kernels.fp8 import config_for_fp8
    assert config_for_fp8(128, False).tail_split
    assert config_for_fp8(128, False, None, 8192, 32, 132).tail_split
    base = config_for_fp8(128, False, None, 16384, 32, 132)
    assert not base.tail_split and dataclasses.replace(base, tail_split=True) == config_for_fp8(128, False)
    assert not config_for_fp8(128, False, True).tail_split
    assert not config_for_fp8(128, False, None, 8192, 32, 1).tail_split  # off CUDA (one SM): nothing to split
    assert not any(config_for_fp8(d, c, None, 8192, 32, 132).tail_split
                   for d, c in SHIPPED if c or d != 128)


def test_a_causal_launch_with_the_tail_split_is_refused_before_anything_runs():
    from kernels.fa3 import launch_v3
    q, k, v = (torch.randn(1, 2, 300, 64, dtype=torch.bfloat16) for _ in range(3))
    with pytest.raises(ValueError, match="tail_split is for the non-causal kernel"):
        launch_v3(q, k, v, True, 0.125, SHIPPED[(64, False)])


def test_merge_tail_merges_parts_by_their_lse():
    """merge_tail (the tail split's second kernel; the interpreter in CI): parts of the keys, each attended
    separately (O normalized, its LSE), merged into the rows of their tiles, float64 reference; other rows untouched."""
    gen = torch.Generator().manual_seed(3)
    b, h, n, d, tile_m, splits = 1, 2, 300, 64, 128, 3
    q, k, v = (torch.randn(b, h, n, d, generator=gen, dtype=torch.float64) for _ in range(3))
    ref, ref_lse = reference_attention(q, k, v, False)
    n_tiles = -(-n // tile_m)
    main = 4  # of 6 tiles in (batch·head, tile) order: tiles 4 and 5 (head 1's last two) are split
    o_part = torch.randn(2 * splits, 1, tile_m, d, generator=gen)  # rows past n stay random: read, not stored
    lse_part = torch.randn(2 * splits, tile_m, generator=gen)
    bounds = (0, 100, 200, n)
    for i, flat in enumerate(range(main, 2 * n_tiles)):
        bh, tile = divmod(flat, n_tiles)
        rows = slice(tile * tile_m, min(n, (tile + 1) * tile_m))
        for s in range(splits):
            keys = slice(bounds[s], bounds[s + 1])
            o_s, lse_s = reference_attention(q[:, bh:bh + 1, rows], k[:, bh:bh + 1, keys], v[:, bh:bh + 1, keys], False)
            o_part[i * splits + s, 0, :rows.stop - rows.start] = o_s[0, 0].float()
            lse_part[i * splits + s, :rows.stop - rows.start] = lse_s[0, 0].float()
    o = torch.full((b, h, n, d), float("nan"))
    lse = torch.full((b, h, n), float("nan"))
    o, lse, o_part, lse_part = (t.to(DEVICE) for t in (o, lse, o_part, lse_part))
    merge_tail(o, lse, o_part, lse_part, main, splits)
    o, lse = o.cpu(), lse.cpu()
    merged = torch.zeros(b, h, n, dtype=torch.bool)
    merged[0, 1, tile_m:] = True  # head 1's tiles 1 and 2
    assert torch.isnan(o[~merged]).all() and torch.isnan(lse[~merged]).all()
    torch.testing.assert_close(o[merged].double(), ref[merged], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse[merged].double(), ref_lse[merged], rtol=1e-5, atol=1e-5)


def test_configs_fit_the_hopper_sm():
    for (head_dim, causal), config in [*SHIPPED.items(), *SHORT.items()]:
        assert config_for_v3(head_dim, causal) is SHIPPED[(head_dim, causal)]
        assert config.block_m % 64 == 0 and config.block_n % 16 == 0  # wgmma: M in 64s, K in 16s
        assert config.num_consumers in (2, 3)
        threads = 128
        assert config.num_consumers * threads * config.consumer_regs + threads * config.producer_regs <= 65536
        assert config.maxnreg * config.num_warps * 32 <= 65536
        assert config.smem_bytes(head_dim) <= 227 * 1024
        assert config.block_n & (config.block_n - 1) == 0  # Gluon's arange over a tile's keys: a power of two
        # a consumer thread's share of the live tiles (fp32 accumulators: O and S; Q when it sits in registers, two
        # 16-bit values a register) leaves at least 40 of its registers for P, m, l, α and the addresses
        live = (config.block_m * head_dim + config.block_m * config.block_n) // 128
        live += config.block_m * head_dim // 256 if config.q_in_regs else 0
        assert live <= config.consumer_regs - 40, (head_dim, causal, live)


def test_head_dim_256_has_configs_that_fit():
    """FA-3's headline shape: at head_dim 256 O alone is 128 fp32 registers a thread, so Q cannot also sit in
    registers, and 64-key tiles in two paired slots are what Hopper's 227 KB of shared memory holds."""
    assert 256 in SUPPORTED_HEAD_DIMS
    for causal in (False, True):
        config = SHIPPED[(256, causal)]
        assert not config.q_in_regs and config.num_consumers == 2
        assert config.smem_bytes(256) <= 227 * 1024
        assert dataclasses.replace(config, block_n=128).smem_bytes(256) > 227 * 1024


def test_module_imports_and_gluon_is_there():
    assert gluon_compat.GLUON_IMPORT_ERROR is None, gluon_compat.GLUON_IMPORT_ERROR
    assert gluon_compat.partition_barrier is not None
    assert set(SHIPPED) == {(d, c) for d in SUPPORTED_HEAD_DIMS for c in (False, True)}


@pytest.mark.skipif(backend() == "cuda", reason="off the GPU path only")
def test_unavailable_reason_says_why_off_the_gpu():
    reason = v3_unavailable_reason()
    assert isinstance(reason, str) and len(reason) > 30 and "\n" not in reason
    if INTERPRET:
        assert "interpreter" in reason


def test_unavailable_reason_names_dtype_and_head_dim():
    assert "float32" in v3_unavailable_reason(dtype=torch.float32)
    assert "32" in v3_unavailable_reason(head_dim=32)
    assert "256" in v3_unavailable_reason(head_dim=32)  # the sentence names what it does support


def test_a_call_that_cannot_run_raises_a_clear_error():
    q, k, v = random_qkv((1, 2, 33, 64), torch.float32, seed=1, device="cpu")
    q, k, v = (t.to(DEVICE) for t in (q, k, v))
    with pytest.raises(TypeError, match="float16 and bfloat16"):
        flash_attention_v3(q, k, v)
    q16, k16, v16 = (t[..., :32].to(torch.bfloat16) for t in (q, k, v))
    with pytest.raises(ValueError, match="head_dim 64, 128 and 256"):
        flash_attention_v3(q16, k16, v16)


@pytest.mark.skipif(backend() == "cuda", reason="off the GPU path only")
def test_cpu_tensors_raise_the_reason_not_a_compile_trace():
    q, k, v = random_qkv((1, 2, 33, 64), torch.bfloat16, seed=1, device="cpu")
    with pytest.raises(RuntimeError) as info:
        flash_attention_v3(q, k, v, causal=True)
    assert str(info.value) == v3_unavailable_reason()


def test_inputs_are_checked_like_the_teaching_kernel():
    q, k, v = (t.to(DEVICE) for t in random_qkv((1, 2, 16, 64), torch.bfloat16, seed=2, device="cpu"))
    with pytest.raises(ValueError, match="same shape"):
        flash_attention_v3(q, k[:, :, :8], v)
    with pytest.raises(TypeError, match="causal"):
        flash_attention_v3(q, k, v, causal="yes")
    with pytest.raises(ValueError, match="sm_scale"):
        flash_attention_v3(q, k, v, sm_scale=-math.inf)


def test_lpt_is_named_in_the_label_and_the_mangled_name_apart_from_the_lazy_rescale():
    base = Fa3Config(64, 128, 2, 3, 240, 24, lazy_rescale=True)
    lpt = dataclasses.replace(base, lpt=True)
    assert not base.lpt and lpt.label == base.label + " lpt"
    assert base.mangle() != lpt.mangle() != dataclasses.replace(base, lazy_rescale=False, lpt=True).mangle()
    assert lpt.mangle().endswith("_olt") and base.mangle().endswith("_ol")
    assert lpt.smem_bytes(128) == base.smem_bytes(128) and lpt.tile_m == base.tile_m, "a schedule, not a tile"
    names = [c.mangle() for c in (*SHIPPED.values(), *LADDER.values())]
    assert len(set(names)) == len(set(SHIPPED.values()) | set(LADDER.values())), "one name per config"


def test_lpt_groups_as_many_heads_as_have_k_and_v_in_its_l2_budget():
    # one head's K and V at 8K, head_dim 128, bf16: 2 × 8192 × 128 × 2 bytes = 4 MiB, so 8 in 32 MiB
    assert LPT_L2_BYTES == 32 * 2 ** 20
    assert lpt_heads_per_group(32, 8192, 128, 2) == 8
    assert lpt_heads_per_group(32, 8192, 64, 2) == 16 and lpt_heads_per_group(16, 8192, 256, 2) == 4
    assert lpt_heads_per_group(16, 16384, 256, 2) == 2 and lpt_heads_per_group(32, 32768, 128, 2) == 2
    assert lpt_heads_per_group(3, 1024, 64, 2) == 3, "never more than the heads there are"
    assert lpt_heads_per_group(4, 131072, 256, 2) == 1, "at least one, when one head's K and V overflow it"


def test_the_ladder_starts_with_one_consumer_and_adds_one_idea_a_row():
    names = list(LADDER)
    assert names[:2] == ["producer warp, 1 consumer (no ping-pong)", "producer warp, 2 consumers in ping-pong"]
    assert len(names) == 6 and names[-1] == "+ conditional rescale (FA-4)"
    lone, pair = LADDER[names[0]], LADDER[names[1]]
    assert dataclasses.replace(lone, num_consumers=2) == pair, "the second row only adds the second consumer"
    assert lone.num_warps == 8 and lone.maxnreg == 256 and lone.tile_m == 64
    assert lone.smem_bytes(128) == 2 * 128 * (64 + 2 * 2 * 128) <= 227 * 1024
    assert lone.label == "1×64×128 kv2 regs 240/24 no-overlap"


def test_config_is_a_frozen_table_entry():
    config = Fa3Config(64, 128, 2, 2, 240, 24)
    assert config.tile_m == 128 and config.num_warps == 12 and config.maxnreg == 168
    with pytest.raises(Exception):
        config.block_m = 128


def test_phase_timeline_reads_protons_chrome_trace(tmp_path):
    """The parser of bench/phases.py on a trace in the layout triton 3.6's Proton writes (seen on the H200):
    pid '<kernel> Core<SM> CTA<id>', tid 'warp <id> (line <n>)', ts/dur = cycles / 1000."""
    import json
    from bench.phases import name_roles, parse_chrome_trace, unavailable_reason
    from story import phase_fractions, softmax_overlap
    events = [{"name": "Kernel", "ph": "X", "pid": "Kernel Call Path", "tid": "path 0", "ts": 0, "dur": 9,
               "cat": "call_path"}]
    for name, warp, ts, dur in [("wait", 0, 0.128, 0.2), ("qk", 0, 0.4, 0.6), ("softmax", 0, 1.0, 1.3),
                                ("pv", 0, 2.35, 0.1), ("qk", 4, 1.0, 0.9), ("softmax", 4, 2.0, 1.2),
                                ("load", 10, 0.1, 2.0)]:
        events.append({"name": name, "ph": "X", "pid": "_fa3_fwd Core7 CTA3", "tid": f"warp {warp} (line 0)",
                       "ts": ts, "dur": dur, "cat": "_fa3_fwd", "args": {"Frequency (MHz)": 1000.0}})
    path = tmp_path / "t.chrome_trace"
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    (program,) = parse_chrome_trace(path)
    name_roles(program["lanes"])
    assert program["sm"] == 7 and program["cta"] == 3
    assert [lane["role"] for lane in program["lanes"]] == ["consumer 0", "consumer 1", "producer"]
    assert program["lanes"][0]["spans"][:2] == [["wait", 28, 228], ["qk", 300, 900]]
    assert abs(sum(phase_fractions(program["lanes"][0]).values()) - 2.2 / 2.322) < 1e-3
    assert abs(softmax_overlap(program) - 0.9 / 1.3) < 1e-9  # consumer 1's qk covers [1.0, 1.9] of [1.0, 2.3]
    assert "unknown kernel" in unavailable_reason("fa1")  # the kernels whose specs have a Proton facet, by key
    assert "interpreter" in (unavailable_reason("fa2") or "interpreter")


def test_importing_gluon_compat_first_keeps_the_interpreter_whole():
    """`from kernels import gluon_compat` as a module's first import must not load Triton before kernels.runtime has
    chosen the backend: Triton decorates its own library (tl.zeros, …) once, at import, for the interpreter or not."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # this process's runtime set it
    code = ("from kernels import gluon_compat\n"
            "from kernels import runtime\n"
            "import triton.language as tl\n"
            "from triton.runtime.interpreter import InterpretedFunction\n"
            "print(runtime.INTERPRET, isinstance(tl.zeros, InterpretedFunction))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    interpret, interpreted = out.stdout.split()
    assert interpret == interpreted, out.stdout


def test_the_exponential_on_the_fma_units_is_exp2_to_its_cubic_error():
    """kernels/ptx.py's FA-4 exponential, its PTX run step by step in float32 (the 1.5·2²³ rounding, the cubic's four
    constants as written in the PTX, the power of two added into the exponent bits): within 1.5e-4 of 2^x over
    [−126, 8] (the lazy rescale's P ≤ 2^8), and a masked score (−inf) gives ≈ 2^−126, which e4m3 rounds to 0."""
    import re
    import struct
    import numpy as np
    from kernels import ptx
    text = ptx._EXP2_CUBIC
    hexes = re.findall(r"0f([0-9A-F]{8})", text)
    clamp, magic, _, c3, c2, c1, c0 = (np.float32(struct.unpack(">f", bytes.fromhex(h))[0]) for h in hexes)
    assert (clamp, magic) == (-126.0, 1.5 * 2**23) and "shl.b32 e, e, 23" in text

    def run(x):
        x = np.maximum(np.asarray(x, np.float32), clamp)
        t = (x + magic).astype(np.float32)
        r = (x - (t - magic)).astype(np.float32)
        p = ((c3 * r + c2).astype(np.float32) * r + c1).astype(np.float32)
        p = (p * r + c0).astype(np.float32)
        bits = (p.view(np.int32).astype(np.int64) + (t.view(np.int32).astype(np.int64) << 23)) & 0xFFFFFFFF
        return bits.astype(np.uint32).view(np.float32)

    x = np.linspace(-126, 8, 400_001, dtype=np.float32)
    assert np.max(np.abs(run(x) / np.exp2(x.astype(np.float64)) - 1)) < 1.5e-4
    masked = run(np.array([-np.inf], np.float32))
    assert 0 < masked[0] < 1.2e-38 and torch.tensor(masked).to(torch.float8_e4m3fn).float().item() == 0
    # one value of a thread's every 8 (16) by the cubic, the rest by MUFU.EX2
    for every in ptx.EXP_FMA_EVERY:
        asm = ptx._exp2_asm(every)
        assert asm.count("ex2.approx.ftz.f32") == every - 1 and asm.count("fma.rn.ftz.f32") == 3


def test_exp_fma_is_named_and_checked():
    from kernels.fa3 import Fa3Config, launch_v3
    config = Fa3Config(64, 128, 2, 2, 240, 24, exp_fma=8)
    assert config.label.endswith(" exp-fma 1/8") and config.mangle().endswith("_e8")
    assert "_e" not in Fa3Config(64, 128, 2, 2, 240, 24).mangle()  # the shipped kernels keep their names
    q = torch.zeros(1, 1, 64, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="exp_fma is 0 or one of"):
        launch_v3(q, q, q, False, 0.1, Fa3Config(64, 128, 2, 2, 240, 24, exp_fma=3))
    with pytest.raises(ValueError, match="needs p_in_place"):  # the late cast is written for P in place's layout
        Fa3Config(64, 128, 2, 2, 240, 24, p_late_cast=True)
