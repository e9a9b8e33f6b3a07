"""The bench's decode sweep (bench --decode): which kernels it times against a KV cache, the settings it leaves out
and says so, its records in a results file, and one record measured on this machine's interpreter."""
from __future__ import annotations

import json

import pytest

from bench import cli
from bench.measure import Setting, measure
from bench import results
from bench.results import load_results_path
from costmodel import Shape
from kernels import specs

DECODE = Shape(1, 1, 8, 64, "float32", True, kv_len=1024, kv_heads=2, pass_="decode")


def test_every_kernel_with_a_kv_cache_path_is_timed_ours_also_paged():
    settings, skipped = cli.decode_settings([1024, 4096], [1, 8], hbm_bytes=None)
    keys = {(s.algorithm, s.page_size) for s in settings}
    assert keys == {("decode", None), ("decode", cli.DECODE_PAGE_SIZE), ("sdpa_default", None),
                    ("sdpa_flash", None), ("fa2", None)} and not skipped
    assert {s.algorithm for s in settings} == set(specs.keys()) & {spec.key for spec in specs.with_facet("kv_cache")}
    shape = settings[0].shape  # Llama 3 8B's attention: 32 query heads share 8 K/V heads
    assert (shape.pass_, shape.seq_len, shape.heads, shape.kv_heads, shape.head_dim) == ("decode", 1, 32, 8, 128)
    assert len(settings) == 2 * 2 * 5


def test_a_cache_that_would_not_fit_is_left_out_and_said():
    settings, skipped = cli.decode_settings([1 << 20], [32], hbm_bytes=141 * 2**30)
    assert not settings and len(skipped) == 4  # the prefill kernel's expanded cache, and the others' 128 GiB
    assert all("its cache needs" in line for line in skipped)


def test_a_decode_setting_is_checked():
    with pytest.raises(ValueError, match="page_size"):
        Setting("decode", DECODE.at(pass_="prefill", kv_len=None, kv_heads=None, heads=2), page_size=16)
    with pytest.raises(ValueError, match="not timed against a KV cache"):
        Setting("naive", DECODE)
    with pytest.raises(ValueError, match="page_size"):
        Setting("decode", DECODE, page_size=0)


def test_decode_records_round_trip_and_paged_stays_apart_from_contiguous(tmp_path):
    contiguous = measure(Setting("decode", DECODE)).to_dict()
    paged = measure(Setting("decode", DECODE, page_size=16)).to_dict()
    assert contiguous["status"] == paged["status"] == "ok"
    assert (contiguous["pass"], contiguous["kv_len"], contiguous["kv_heads"], paged["page_size"]) == ("decode", 1024,
                                                                                                     2, 16)
    # the bytes a decode must move: K and V of the cache once, Q and O
    assert contiguous["bytes_moved"] == 2 * 1024 * 2 * 64 * 4 + 2 * 8 * 64 * 4 + 8 * 4
    path = tmp_path / "decode.json"
    facts = {**load_results_path(results.RESULTS_DIR / "h200.json").facts}
    cli.dump_results(path, facts, [contiguous, paged], [], "python -m bench --decode", "2026-12-04T00:00:00Z")
    loaded = load_results_path(path)
    assert [(r["algorithm"], r.get("page_size"), r["pass"]) for r in loaded.records] == [
        ("decode", None, "decode"), ("decode", 16, "decode")]
    assert cli._setting_key(loaded.records[0]) != cli._setting_key(loaded.records[1])
    json.loads(path.read_text())
