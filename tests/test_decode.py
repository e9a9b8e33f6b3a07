"""The decode kernel (kernels/decode.py) against the float64 reference: contiguous and paged caches (shuffled block
tables), ragged lengths, GQA, q_len 1 and more, every split count; its errors before any launch; its trace.

Runs in the CPU interpreter (about 10 ms per program and key block: small caches, few heads) or on a GPU. Past each
sequence's length the caches hold NaN, so a kernel that reads a key it should not fails the comparison.
"""
import math

import pytest
import torch

import costmodel
import kernels.decode as decode
from kernels.decode import DecodeConfig, choose_num_splits, config_for_decode, decode_attention, decode_attention_traced
from kernels.reference import reference_attention, reference_decode
from kernels.runtime import DEVICE
from tests.support_kernels import TOLERANCE, rel_error

pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning"),  # log2(0) of empty splits
              pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")]  # the interpreter's max of NaN rows


def make_cache(batch, heads_q, heads_kv, q_len, head_dim, lengths, dtype, page_size=0, seed=0, spare=5):
    """(q, k_cache, v_cache, cache_seqlens, block_table) on the active device: random values (never zeros) where a
    sequence has keys, NaN everywhere else (the tail of each sequence, the pages no sequence uses)."""
    gen = torch.Generator().manual_seed(seed)
    capacity = max(lengths) + spare
    q = torch.randn(batch, heads_q, q_len, head_dim, generator=gen).to(dtype)
    seqlens = torch.tensor(lengths, dtype=torch.int32)
    if page_size:
        max_pages = math.ceil(capacity / page_size)
        num_pages = batch * max_pages + 3
        k, v = (torch.full((num_pages, page_size, heads_kv, head_dim), float("nan")).to(dtype) for _ in range(2))
        table = torch.randperm(num_pages, generator=gen)[:batch * max_pages].reshape(batch, max_pages).int()
        for b, length in enumerate(lengths):  # each sequence's keys, written page by page through its table
            flat = torch.randn(2, max_pages * page_size, heads_kv, head_dim, generator=gen)
            flat[:, length:] = float("nan")
            pages = table[b].long()
            k[pages], v[pages] = (t.reshape(max_pages, page_size, heads_kv, head_dim).to(dtype) for t in flat)
            table[b, math.ceil(length / page_size):] = -1  # pages the sequence does not use yet: never followed
    else:
        table = None
        k, v = (torch.randn(batch, heads_kv, capacity, head_dim, generator=gen).to(dtype) for _ in range(2))
        for b, length in enumerate(lengths):
            k[b, :, length:], v[b, :, length:] = float("nan"), float("nan")
    return tuple(t if t is None else t.to(DEVICE) for t in (q, k, v, seqlens, table))


def check(case, out, lse, causal, sm_scale=None):
    q, k, v, seqlens, table = case
    ref, ref_lse = reference_decode(q, k, v, seqlens, table, causal, sm_scale)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite output elements"
    assert rel_error(out, ref) < TOLERANCE[q.dtype]
    assert torch.allclose(lse.cpu().double(), ref_lse, rtol=1e-5, atol=1e-4)


# (batch, heads_q, heads_kv, q_len, head_dim, lengths, page_size, dtype, causal, num_splits, block_n)
CASES = [
    (3, 4, 4, 1, 64, [70, 1, 33], 0, torch.float32, True, 3, 32),       # MHA, a length of 1
    (2, 8, 2, 1, 128, [100, 45], 0, torch.bfloat16, True, 2, 32),       # GQA 4, bf16, TMA in the interpreter
    (2, 8, 1, 3, 64, [90, 3], 0, torch.float16, True, 4, 32),           # GQA 8 (MQA), a chunk of 3
    (2, 4, 4, 17, 32, [50, 17], 0, torch.float32, True, 2, 32),         # a chunk of 17: 17 rows, L == q_len
    (1, 8, 2, 17, 64, [61], 0, torch.bfloat16, False, 2, 32),           # 68 packed rows: two row blocks
    (3, 4, 1, 1, 64, [40, 1, 23], 16, torch.float32, True, 3, 32),      # pages of 16 gathered by a 32-key tile
    (2, 8, 2, 3, 64, [130, 7], 64, torch.bfloat16, True, 2, 32),        # pages of 64, two tiles a page (TMA)
    (2, 4, 4, 1, 64, [300, 70], 256, torch.float16, False, 3, 64),      # pages of 256 (TMA)
    (2, 8, 1, 3, 16, [19, 5], 16, torch.float16, True, 2, 64),          # a 64-key tile over four pages of 16
    (2, 4, 2, 1, 256, [33, 2], 0, torch.float32, False, 1, 16),         # head_dim 256, one split: no merge
    (3, 8, 2, 4, 64, [64, 16, 37], 16, torch.float16, True, 2, 32),     # q_len 4; lengths at page boundaries
    (2, 8, 8, 4, 64, [48, 20], 24, torch.float32, False, 3, 32),        # q_len 4, full; pages of 24 (not 2^k)
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: (f"B{c[0]}-H{c[1]}/{c[2]}-q{c[3]}-d{c[4]}-p{c[6]}-"
                                                        f"{str(c[7])[6:]}-{'causal' if c[8] else 'full'}-s{c[9]}"))
def test_matches_float64_reference(case, poisoned_allocations):
    batch, heads_q, heads_kv, q_len, head_dim, lengths, page, dtype, causal, splits, block_n = case
    inputs = make_cache(batch, heads_q, heads_kv, q_len, head_dim, lengths, dtype, page, seed=len(lengths) + q_len)
    out, lse = decode_attention(*inputs, causal=causal, num_splits=splits, return_lse=True,
                                config=DecodeConfig(block_n, 4, 1))
    check(inputs, out, lse, causal)


@pytest.mark.parametrize("splits", [1, 2, 3, 4, 9])
def test_any_split_count(splits, poisoned_allocations):
    """Up to more splits than the cache has key blocks (4 of 32 keys here): the extra splits are empty and the merge
    ignores them."""
    inputs = make_cache(2, 2, 1, 1, 32, [101, 40], torch.float32, seed=splits)
    out, lse = decode_attention(*inputs, num_splits=splits, return_lse=True, config=DecodeConfig(32, 4, 1))
    check(inputs, out, lse, True)


@pytest.mark.parametrize("merge_splits, splits", [(2, 9), (4, 3), (16, 9)])
def test_the_merge_reads_any_number_of_splits_a_load(merge_splits, splits, poisoned_allocations):
    """DecodeConfig.merge_splits: the last split merges the partials merge_splits at a time: fewer than the splits
    (several loads, the last part-filled) or more (one load, part masked) give the same answer."""
    inputs = make_cache(2, 4, 1, 1, 32, [150, 71], torch.float32, seed=merge_splits)
    out, lse = decode_attention(*inputs, num_splits=splits, return_lse=True,
                                config=DecodeConfig(16, 4, 1, merge_splits=merge_splits))
    check(inputs, out, lse, True)
    for bad in (1, 3, 0, True, 2.0):
        with pytest.raises(ValueError, match="merge_splits"):
            DecodeConfig(16, 4, 1, merge_splits=bad)


@pytest.mark.parametrize("merge_rows", [1, 2, 4, 8])
def test_the_merge_reads_any_number_of_rows_a_load(merge_rows, poisoned_allocations):
    """DecodeConfig.merge_rows: the merge reads merge_rows query rows of a K/V head together; a row block of 12 real
    rows (group 4 × q_len 3: fewer than a load's rows, or several loads, the last part-filled) and sequences of
    different lengths, one of them shorter than a split, give the float64 answer."""
    inputs = make_cache(2, 8, 2, 3, 32, [150, 20], torch.float32, seed=merge_rows)
    out, lse = decode_attention(*inputs, num_splits=5, return_lse=True,
                                config=DecodeConfig(16, 4, 1, merge_rows=merge_rows))
    check(inputs, out, lse, True)
    for bad in (0, 3, True, 2.0):
        with pytest.raises(ValueError, match="merge_rows"):
            DecodeConfig(16, 4, 1, merge_rows=bad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("page", [0, 64])
def test_pointer_path_of_16_bit_caches(dtype, page, poisoned_allocations):
    """16-bit caches take TMA where they can; the pointer loads (older GPUs, unaligned caches) give the same."""
    inputs = make_cache(2, 8, 2, 1, 64, [100, 9], dtype, page, seed=4)
    out, lse = decode_attention(*inputs, num_splits=2, return_lse=True, config=DecodeConfig(32, 4, 1, tma=False))
    check(inputs, out, lse, True)


def test_defaults_custom_scale_and_no_lengths(poisoned_allocations):
    """num_splits, the config and cache_seqlens left out (the whole cache), a custom sm_scale, O only."""
    q, k, v, _, _ = make_cache(2, 4, 2, 2, 64, [80, 80], torch.float16, seed=5, spare=0)
    out = decode_attention(q, k, v, sm_scale=0.3)
    ref, _ = reference_decode(q, k, v, None, None, True, 0.3)
    assert rel_error(out, ref) < TOLERANCE[torch.float16]


def test_strided_caches_and_query():
    """A (batch, seq, heads, dim) cache seen as (batch, heads, seq, dim), and a strided q: read as they are."""
    gen = torch.Generator().manual_seed(6)
    k, v = (torch.randn(2, 70, 2, 32, generator=gen).to(DEVICE).transpose(1, 2) for _ in range(2))
    q = torch.randn(2, 1, 4, 32, generator=gen).to(DEVICE).transpose(1, 2)
    seqlens = torch.tensor([70, 31], dtype=torch.int32).to(DEVICE)
    out = decode_attention(q, k, v, seqlens, num_splits=2, config=DecodeConfig(32, 4, 1))
    assert rel_error(out, reference_decode(q, k, v, seqlens, None, True, None)[0]) < 1e-5


def test_rows_that_see_no_key(poisoned_allocations):
    """Unchecked lengths (check_values=False) below q_len (causal) or 0: those rows get O = 0 and LSE = −inf."""
    inputs = make_cache(3, 2, 1, 3, 32, [1, 0, 40], torch.float32, seed=7)
    out, lse = decode_attention(*inputs, num_splits=2, return_lse=True, check_values=False,
                                config=DecodeConfig(32, 4, 1))
    ref, ref_lse = reference_decode(*inputs, causal=True)
    assert torch.equal(torch.isneginf(lse.cpu()), torch.isneginf(ref_lse))
    assert torch.isneginf(lse[0, :, :2]).all() and torch.isneginf(lse[1]).all() and torch.isfinite(lse[2]).all()
    assert (out[0, :, :2] == 0).all() and (out[1] == 0).all()
    assert rel_error(out, ref) < 1e-5


def test_trace_merges_to_the_lse():
    """Each split's final (m, l) from the trace merges to the LSE the kernel returns; the running (m, l) of a split's
    last step is its final one; m never decreases."""
    inputs = make_cache(2, 4, 2, 1, 32, [100, 20], torch.float32, seed=8)
    out, lse, trace = decode_attention_traced(*inputs, num_splits=3, config=DecodeConfig(16, 4, 1))
    check(inputs, out, lse, True)
    assert trace.steps.shape == (2, 2, 3, 1, 3, 2, 16) and trace.splits.shape == (2, 2, 3, 1, 2, 16)
    m, l = trace.splits[..., 0, :], trace.splits[..., 1, :]  # (B, H_kv, splits, row_blocks, rows)
    merged = torch.logsumexp(m.double() + l.double().log(), dim=2)[:, :, 0]  # (B, H_kv, rows)
    group = 2
    for b in range(2):
        for hkv in range(2):
            for row in range(group):  # q_len 1: packed row r is head hkv·group + r
                assert math.isclose(merged[b, hkv, row], lse[b, hkv * group + row, 0], rel_tol=1e-5, abs_tol=1e-5)
    assert (trace.row_heads[:group] == torch.arange(group)).all() and (trace.row_heads[group:] == -1).all()
    # sequence 1 has 20 keys = 2 blocks of 16: splits 0 and 1 take one block each, split 2 is empty
    assert torch.isneginf(trace.splits[1, :, 2, 0, 0, :group]).all() and (trace.splits[1, :, 2, 0, 1] == 0).all()
    steps = trace.steps[0, 0, 0, 0]  # 100 keys = 7 blocks: 3 steps in split 0
    assert torch.isfinite(steps).all()
    assert torch.equal(steps[-1], trace.splits[0, 0, 0, 0])
    assert (steps[1:, 0] >= steps[:-1, 0]).all()


def test_split_choice_and_configs():
    """The split heuristic on the H200's 132 SMs, 2 programs each (264 slots): the fewest splits whose waves are
    within 85 % of the fullest choice's, and where that is one wave, as many as fill it; none when the grid fills
    80 % of the slots; never more than the key blocks or 128; rounded down to the merge's load width (32) where
    that leaves at most 1 in 32 out."""
    assert choose_num_splits(8, 2048, 132, 2, 64) == 33     # (1, 32, 8, 128K): 264 of 264 slots (29 were within 85 %)
    assert choose_num_splits(8, 2048, 132, 2) == 32         # 33 rounded down to one merge load of 32 (1 of 33 left out)
    assert choose_num_splits(8, 2048, 132, 2, 8) == 32      # 33 = 4 loads of 8 and 1: one fewer
    assert choose_num_splits(7, 2048, 132, 2, 16) == 37     # 264 // 7 = 37: 5 over 32 is more than 1 in 32
    assert choose_num_splits(24, 2048, 132, 2) == 11        # 264 of 264 (10 were within 85 %: 240)
    assert choose_num_splits(64, 512, 132, 2) == 4          # (8, 32, 8, 32K): 256 of 264, where 5 would take 2 waves
    assert choose_num_splits(512, 64, 132, 2) == 1          # (64, 32, 8, 4K): the batch fills the GPU by itself
    assert choose_num_splits(1, 3, 132, 2) == 3             # never more splits than key blocks
    assert choose_num_splits(1, 10**6, 132, 2) == 128       # capped at 128 (109 within 85 % of it: one wave, filled)
    assert choose_num_splits(8, 16, 1, 1) == 1              # the interpreter's one "SM"
    assert choose_num_splits(200, 4096, 132, 2) == 5        # 76 % of one wave, or 3.8 waves 95 % full
    for programs in (1, 3, 8, 50, 200, 211, 1000):
        splits = choose_num_splits(programs, 4096, 132, 2)
        assert 1 <= splits <= 128 and (splits == 1) == (programs >= 0.8 * 264)
        assert costmodel.decode_wave_efficiency(programs * splits, 264) >= 0.85 * max(
            costmodel.decode_wave_efficiency(programs * s, 264) for s in range(1, 129)) or splits == 1
    assert config_for_decode(64, torch.float32).block_n >= 16


def test_the_gpu_settings_by_layout_and_cache_size():
    """On a GPU (kernels.decode.gpu_decode_config, what config_for_decode returns there): a paged cache at head_dim
    128 is gathered by pointer loads in tiles of 128 keys (two pages of 64: measured within 5 % of contiguous, TMA's
    page-per-tile 6-21 % slower); a contiguous one takes TMA from HOST_BOUND_BYTES up and pointer loads below (a call
    that short is bound by the host, which TMA's descriptors cost ~14 µs); the cost model's split count is the one
    the shipped call chooses for that size."""
    big, small = decode.HOST_BOUND_BYTES, decode.HOST_BOUND_BYTES - 1
    assert decode.gpu_decode_config(128, 2, 64) == DecodeConfig(128, 4, 3, tma=False)
    assert decode.gpu_decode_config(128, 2, 16).tma is False
    assert decode.gpu_decode_config(128, 2, 0, big).tma and decode.gpu_decode_config(128, 2, 0, None).tma
    assert not decode.gpu_decode_config(128, 2, 0, small).tma
    assert decode.gpu_decode_config(64, 2, 64).block_n == 64  # untuned: a page per tile, as before
    llama_128k, llama_4k = costmodel.Shape(1, 1, 32, 128, kv_len=131072, kv_heads=8, pass_="decode"), \
        costmodel.Shape(1, 1, 32, 128, kv_len=4096, kv_heads=8, pass_="decode")
    assert decode.gpu_splits_for(llama_128k, 132) == choose_num_splits(8, 2048, 132, 2) == 32
    assert decode.gpu_splits_for(llama_4k, 132) == choose_num_splits(8, 64, 132, 2)


def test_the_merge_counters_are_zero_after_every_call_in_the_interpreter():
    """The last split of each row block merges and zeroes its counter: after split calls, a poisoned one included,
    every counter of every workspace is zero, and the same call gives the same answer again."""
    inputs = make_cache(2, 4, 2, 2, 32, [70, 2], torch.float32, seed=15, spare=2)
    q, k, v, seqlens, _ = inputs
    first = decode_attention(*inputs, num_splits=3, config=DecodeConfig(16, 4, 1))
    bad = seqlens.clone()
    bad[1] = 10 ** 6
    poisoned = decode_attention(q, k, v, bad, num_splits=3, config=DecodeConfig(16, 4, 1), check_values=False)
    assert poisoned[1].isnan().all() and poisoned[0].isfinite().all()
    assert torch.equal(decode_attention(*inputs, num_splits=3, config=DecodeConfig(16, 4, 1)), first)
    assert decode._WORKSPACES and all(int(c.abs().sum()) == 0 for _, c in decode._WORKSPACES.values())


def test_paged_and_contiguous_caches_give_the_same_answer():
    """The same keys and values, once contiguous and once in shuffled pages of 16: the same O and LSE (to rounding:
    the tiles differ)."""
    q, k, v, seqlens, _ = make_cache(3, 8, 2, 2, 32, [47, 2, 32], torch.float32, seed=12, spare=1)
    page, max_pages = 16, 3
    gen = torch.Generator().manual_seed(13)
    table = torch.randperm(3 * max_pages + 2, generator=gen)[:3 * max_pages].reshape(3, max_pages).int().to(DEVICE)
    k_p, v_p = (torch.full((3 * max_pages + 2, page, 2, 32), float("nan"), device=DEVICE) for _ in range(2))
    for b in range(3):
        for j in range(max_pages):
            k_p[table[b, j]], v_p[table[b, j]] = (t[b, :, j * page:(j + 1) * page].transpose(0, 1) for t in (k, v))
    for splits in (1, 3):
        config = DecodeConfig(32, 4, 1)
        a, a_lse = decode_attention(q, k, v, seqlens, num_splits=splits, return_lse=True, config=config)
        b_, b_lse = decode_attention(q, k_p, v_p, seqlens, table, num_splits=splits, return_lse=True, config=config)
        assert torch.allclose(a, b_, rtol=1e-5, atol=1e-6) and torch.allclose(a_lse, b_lse, rtol=1e-5, atol=1e-6)
    check((q, k_p, v_p, seqlens, table), b_, b_lse, True)


def test_strided_lengths_and_block_table():
    """cache_seqlens and block_table seen through strides (every other element): read through their strides."""
    q, k, v, seqlens, table = make_cache(2, 4, 2, 1, 32, [40, 17], torch.float32, page_size=16, seed=14)
    wide_lengths = torch.stack([seqlens, seqlens * 0 - 7], 1).flatten()[::2]  # -7 between: never read
    wide_table = torch.stack([table, table * 0 - 9], 2).flatten(1)[:, ::2]
    assert wide_lengths.stride() == (2,) and wide_table.stride(1) == 2
    out, lse = decode_attention(q, k, v, wide_lengths, wide_table, num_splits=2, return_lse=True,
                                config=DecodeConfig(16, 4, 1))
    check((q, k, v, seqlens, table), out, lse, True)


@pytest.mark.parametrize("tma", [True, False])
def test_unchecked_bad_values_give_nan_rows_not_wrong_answers(tma):
    """Lengths and pages the wrapper does not read (check_values=False, as for GPU tensors): a length past the cache
    or negative, or a used page outside the cache, is never followed; the rows of that sequence come out NaN, the
    other sequences are right."""
    q, k, v, seqlens, table = make_cache(3, 4, 2, 1, 64, [40, 17, 33], torch.bfloat16, page_size=32, seed=15)
    config = DecodeConfig(32, 4, 1, tma=tma)
    for lengths, pages in (([40, 999, 33], table), ([40, -3, 33], table)):
        bad = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
        for splits in (1, 2):
            out, lse = decode_attention(q, k, v, bad, pages, num_splits=splits, return_lse=True, check_values=False,
                                        config=config)
            assert torch.isnan(out[1]).all() and torch.isnan(lse[1]).all()
            ref, _ = reference_decode(q[[0, 2]], k, v, seqlens[[0, 2]], table[[0, 2]], True)
            assert rel_error(out[[0, 2]], ref) < TOLERANCE[torch.bfloat16]
    for value in (k.shape[0], -1, 2**30):
        bad_table = table.clone()
        bad_table[1, 0] = value  # sequence 1's first page
        for splits in (1, 3):
            out, lse = decode_attention(q, k, v, seqlens, bad_table, num_splits=splits, return_lse=True,
                                        check_values=False, config=config)
            assert torch.isnan(out[1]).all() and torch.isnan(lse[1]).all()
            assert torch.isfinite(out[[0, 2]]).all() and torch.isfinite(lse[[0, 2]]).all()


def test_the_cost_model_of_decode():
    """Bytes by the decode kernel's design: the cache read once (whatever the group), Q read, O and LSE written; with
    splits, the fp32 partials written then read by the merge; extra memory is O, LSE and the partials."""
    shape = costmodel.Shape(1, 2, 32, 128, "bfloat16", True, kv_len=1000, kv_heads=8, pass_="decode")
    cache, q_bytes, rows = 2 * 2 * 8 * 1000 * 128 * 2, 2 * 32 * 128 * 2, 2 * 32
    (one,) = costmodel.decode_traffic(shape, 1)
    assert (one.reads, one.writes) == (cache + q_bytes, q_bytes + rows * 4)
    split, merge = costmodel.decode_traffic(shape, 5)
    partials = rows * 5 * 129 * 4
    assert (split.reads, split.writes, merge.reads, merge.writes) == (cache + q_bytes, partials, partials,
                                                                      q_bytes + rows * 4)
    assert costmodel.decode_extra_bytes(shape, 1) == q_bytes + rows * 4
    assert costmodel.decode_extra_bytes(shape, 5) == q_bytes + rows * 4 + partials
    assert costmodel.decode_max_splits(1000, 64) == 16 and costmodel.decode_max_splits(10**6, 64) == 128


# -- errors, before any launch ----------------------------------------------------------------------

def _bad_inputs():
    q, k, v, seqlens, _ = make_cache(2, 4, 2, 1, 32, [10, 20], torch.float32, spare=0)
    qp, kp, vp, seqp, table = make_cache(2, 4, 2, 1, 32, [10, 20], torch.float32, page_size=16, spare=0)
    return [
        ("q not a tensor", (q.tolist(), k, v), {}, TypeError, "q must be a torch.Tensor"),
        ("q 3-D", (q[0], k, v), {}, ValueError, "q must be 4-D"),
        ("cache 3-D", (q, k[0], v[0]), {}, ValueError, "k_cache must be 4-D"),
        ("k v shapes", (q, k, v[:, :, :5]), {}, ValueError, "same shape"),
        ("dtype mismatch", (q, k.half(), v.half()), {}, TypeError, "one dtype"),
        ("float64", (q.double(), k.double(), v.double()), {}, TypeError, "unsupported dtype"),
        ("heads not a multiple", (q[:, :3], k, v), {}, ValueError, "multiple of heads_kv"),
        ("head_dim differs", (q[..., :16], k, v), {}, ValueError, "head_dim"),
        ("head_dim 48", (q[..., :24].repeat(1, 1, 1, 2), k[..., :24].repeat(1, 1, 1, 2),
                         v[..., :24].repeat(1, 1, 1, 2)), {}, ValueError, "unsupported head_dim"),
        ("batch differs", (q[:1], k, v), {}, ValueError, "holds 2 sequences"),
        ("other device", (q, k, v.to("meta")), {}, ValueError, "one device"),
        ("wrong device", tuple(t.to("meta") for t in (q, k, v)), {}, ValueError, "is active"),
        ("cache head_dim strided", (q, torch.cat([k, k], -1)[..., ::2], v), {}, ValueError, "unit-stride"),
        ("seqlens int64", (q, k, v, seqlens.long()), {}, TypeError, "cache_seqlens must be torch.int32"),
        ("seqlens shape", (q, k, v, seqlens[:1]), {}, ValueError, "cache_seqlens must have shape"),
        ("seqlens past the cache", (q, k, v, seqlens + 1), {}, ValueError, r"cache_seqlens\[1\] = 21"),
        ("seqlens 0", (q, k, v, seqlens * 0), {}, ValueError, r"cache_seqlens\[0\] = 0"),
        ("seqlens negative", (q, k, v, seqlens - 15), {}, ValueError, r"cache_seqlens\[0\] = -5"),
        ("seqlens float", (q, k, v, seqlens.float()), {}, TypeError, "cache_seqlens must be torch.int32"),
        ("seqlens 2-D", (q, k, v, seqlens[None]), {}, ValueError, "cache_seqlens must have shape"),
        ("seqlens past the pages", (qp, kp, vp, seqp + 13), {"block_table": table}, ValueError,
         r"cache_seqlens\[1\] = 33"),
        ("causal q_len > L", (q.repeat(1, 1, 12, 1), k, v, seqlens), {}, ValueError, "causal needs at least"),
        ("causal q_len > cache", (q.repeat(1, 1, 21, 1), k, v), {}, ValueError, "q_len 21"),
        ("table int64", (qp, kp, vp, seqp, table.long()), {}, TypeError, "block_table must be torch.int32"),
        ("table 1-D", (qp, kp, vp, seqp, table[0]), {}, ValueError, "block_table must have shape"),
        ("table past pages", (qp, kp, vp, seqp, table * 0 + kp.shape[0]), {}, ValueError, "points past"),
        ("table negative", (qp, kp, vp, seqp, table * 0 - 1), {}, ValueError, "points past"),
        ("table other batch", (qp, kp, vp, seqp, table[:1]), {}, ValueError, "block_table must have shape"),
        ("table without pages", (qp, kp, vp, seqp, table[:, :0]), {}, ValueError, "no column"),
        ("paged cache 3-D", (qp, kp[0], vp[0], seqp, table), {}, ValueError, "num_pages, page_size"),
        ("q other device", (q.to("meta"), k, v), {}, ValueError, "one device"),
        ("seqlens other device", (q, k, v, seqlens.to("meta")), {}, ValueError, "one device"),
        ("v dtype", (q, k, v.half()), {}, TypeError, "one dtype"),
        ("int8 cache", (q.to(torch.int8), k.to(torch.int8), v.to(torch.int8)), {}, TypeError, "unsupported dtype"),
        ("empty batch", (q[:0], k[:0], v[:0]), {}, ValueError, "empty input"),
        ("empty q_len", (q[:, :, :0], k, v), {}, ValueError, "empty input"),
        ("causal not bool", (q, k, v), {"causal": 1}, TypeError, "causal"),
        ("sm_scale 0", (q, k, v), {"sm_scale": 0.0}, ValueError, "sm_scale"),
        ("sm_scale inf", (q, k, v), {"sm_scale": float("inf")}, ValueError, "sm_scale"),
        ("sm_scale nan", (q, k, v), {"sm_scale": float("nan")}, ValueError, "sm_scale"),
        ("sm_scale negative", (q, k, v), {"sm_scale": -0.1}, ValueError, "sm_scale"),
        ("sm_scale fp32 overflow", (q, k, v), {"sm_scale": 1e39}, ValueError, "fp32"),
        ("sm_scale log2e overflow", (q, k, v), {"sm_scale": 3e38}, ValueError, "fp32"),
        ("sm_scale fp32 underflow", (q, k, v), {"sm_scale": 1e-50}, ValueError, "fp32"),
        ("sm_scale string", (q, k, v), {"sm_scale": "0.1"}, ValueError, "sm_scale"),
        ("num_splits 0", (q, k, v), {"num_splits": 0}, ValueError, "num_splits"),
        ("num_splits float", (q, k, v), {"num_splits": 2.0}, ValueError, "num_splits"),
        ("config", (q, k, v), {"config": (32, 4, 1)}, TypeError, "DecodeConfig"),
        ("bad tile", (q, k, v), {"config": DecodeConfig(24, 4, 1)}, ValueError, "power of two"),
        ("sparse", (q.to_sparse(), k, v), {}, TypeError, "dense"),
        ("requires grad", (q.clone().requires_grad_(), k, v), {}, ValueError, "forward only"),
    ]


@pytest.mark.parametrize("case", _bad_inputs(), ids=lambda c: c[0])
def test_bad_input_gets_a_clear_error_before_any_launch(case, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("a kernel was launched for bad input")
    monkeypatch.setattr(decode, "_launch", no_launch)
    _, args, kwargs, error, words = case
    with pytest.raises(error, match=words):
        decode_attention(*args, **kwargs)


def test_the_reference_keeps_its_old_behaviour_and_learns_gqa():
    gen = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(1, 4, 6, 8, generator=gen) for _ in range(3))
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(8)
    scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    out, lse = reference_attention(q, k, v, causal=True)
    assert torch.allclose(out, torch.softmax(scores, -1) @ v.double()) and torch.allclose(lse, scores.logsumexp(-1))
    k2, v2 = k[:, :2], v[:, :2]  # GQA: query heads 0, 1 read K/V head 0; 2, 3 read head 1
    out, _ = reference_attention(q[:, :, -2:], k2, v2, causal=True)  # bottom-right: the last 2 rows of the square
    full, _ = reference_attention(q, k2.repeat_interleave(2, 1), v2.repeat_interleave(2, 1), causal=True)
    assert torch.allclose(out, full[:, :, -2:])


# -- on a GPU only ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 64])
def test_cuda_graph_replay_matches_eager(page):
    inputs = make_cache(4, 32, 8, 1, 128, [4000, 1, 2049, 3000], torch.bfloat16, page, seed=10)
    q, k, v, seqlens, table = inputs
    eager = decode_attention(*inputs)
    static_q = q.clone()
    decode_attention(static_q, k, v, seqlens, table)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = decode_attention(static_q, k, v, seqlens, table)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)
    static_q.copy_(torch.randn_like(q))  # new inputs, same buffers: the replay follows them
    graph.replay()
    assert torch.equal(captured, decode_attention(static_q, k, v, seqlens, table))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("page", [0, 16, 64, 256])
def test_large_caches_on_the_gpu(dtype, page):
    inputs = make_cache(3, 32, 8, 4, 128, [9000, 1, 4097], dtype, page, seed=11)
    for splits in (None, 1, 7):
        out, lse = decode_attention(*inputs, num_splits=splits, return_lse=True)
        check(inputs, out, lse, True)


@pytest.mark.gpu
def test_the_cached_launch_runs_the_kernel_the_jit_would_pick():
    """kernels.runtime.CachedLaunch skips Triton's per-call dispatch: for every call below (contiguous and paged,
    TMA and pointers, splits or not, an LSE asked for or not, a q that is a misaligned view) the compiled kernel it
    launches is the one Triton's own JIT picks for the same arguments, and the answer is bit for bit the JIT's."""
    from kernels import runtime
    seen = []
    real = decode._SPLIT_LAUNCH

    class Spy:
        def __call__(self, key, grid, where, args, kwargs):
            compiled = real(key, grid, where, args, kwargs)
            seen.append((compiled, real.jit_kernel(grid, *args, **kwargs)))
            return compiled
    base = torch.randn(1 * 32 * 128 + 1, device="cuda", dtype=torch.bfloat16)
    misaligned_q = base[1:].view(1, 32, 1, 128)
    cases = [make_cache(3, 32, 8, 1, 128, [4000, 1, 2049], torch.bfloat16, page, seed=12) for page in (0, 64)]
    _, k, v, _, _ = make_cache(1, 32, 8, 1, 128, [300], torch.bfloat16, 0, seed=13)
    try:
        decode._SPLIT_LAUNCH = Spy()
        for inputs in cases:
            for splits, lse in ((None, False), (1, True), (5, False)):
                for _ in range(2):  # the second call is the cached one
                    fast = decode_attention(*inputs, num_splits=splits, return_lse=lse)
                runtime.FAST_LAUNCH = False
                slow = decode_attention(*inputs, num_splits=splits, return_lse=lse)
                runtime.FAST_LAUNCH = True
                assert all(torch.equal(a, b) for a, b in zip(fast if lse else [fast], slow if lse else [slow]))
        aligned_q = misaligned_q.clone()
        for q in (aligned_q, misaligned_q, aligned_q):
            decode_attention(q, k, v)
    finally:
        decode._SPLIT_LAUNCH = real
        runtime.FAST_LAUNCH = True
    assert len(seen) > 20 and all(ours is jits for ours, jits in seen)


@pytest.mark.gpu
def test_the_merge_counters_are_zero_after_every_call():
    """The last split of each row block merges and sets its counter back to zero: after calls with several splits,
    a poisoned length (NaN rows) and another stream's call, every counter of every workspace is zero, and a side
    stream's answer equals the default stream's."""
    inputs = make_cache(3, 32, 8, 2, 128, [5000, 2, 777], torch.bfloat16, 0, seed=14)
    q, k, v, seqlens, _ = inputs
    first = decode_attention(*inputs, num_splits=9)
    bad = seqlens.clone()
    bad[1] = 10 ** 6
    poisoned = decode_attention(q, k, v, bad, num_splits=9)
    assert poisoned[1].isnan().all() and poisoned[0].isfinite().all() and poisoned[2].isfinite().all()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        on_side = decode_attention(*inputs, num_splits=9)
    torch.cuda.synchronize()
    assert torch.equal(on_side, first) and torch.equal(decode_attention(*inputs, num_splits=9), first)
    assert len(decode._WORKSPACES) >= 2
    assert all(int(counters.abs().sum()) == 0 for _, counters in decode._WORKSPACES.values())
