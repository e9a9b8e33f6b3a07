"""The decode scene, "Generating: one token against the cache": its numbers from the recording's decode records, its
sentences true at every stop, the kernel's trace drawn as it ran, and the KV cache of each model preset."""
from __future__ import annotations

import json
import math

import pytest

import costmodel
from fmt import fmt_bytes, fmt_tokens
import story
import viz
from bench import results
from bench.results import load_results
from page import settings as settings_module
from page.decode_trace import decode_trace
from tests.support_app import assert_no_exception, open_app

RECORDED = load_results("h200.json")
COPY = RECORDED.meta["decode_copy_gbps"]


def rows_at(batch: int, kv_len: int):
    return story.decode_rows(RECORDED.records, batch, kv_len, COPY)


def test_the_recording_holds_decode_at_every_stop_for_our_kernel():
    records = story.decode_records(RECORDED.records)
    assert story.decode_batches(RECORDED.records) == (1, 8, 32)
    assert story.decode_lengths(RECORDED.records, 1) == costmodel.DECODE_KV_LENS  # 1K … 1M at batch 1
    for r in records:  # Llama 3 8B's attention, one new token
        assert (r["seq_len"], r["heads"], r["kv_heads"], r["head_dim"]) == (1, 32, 8, 128)
        assert r["bytes_moved"] == costmodel.total_bytes(costmodel.decode_traffic(costmodel.decode_shape(
            r["batch"], r["kv_len"]), 1))


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_every_stop_has_ours_first_and_a_sentence_that_holds(batch):
    for kv_len in story.decode_lengths(RECORDED.records, batch):
        rows = rows_at(batch, kv_len)
        assert rows[0].key == "decode" and rows[0].page_size is None
        assert [r.key for r in rows].count("paged") == 1
        ours = story.decode.row(rows, "decode")
        assert ours.gbps == pytest.approx(story.cache_bytes(batch, kv_len) / (ours.time_us * 1e-6) / 1e9, rel=0.01)
        text = story.decode_sentence(rows, batch, kv_len, 132)
        assert f"{ours.time_us:,.0f} µs" in text and f"{ours.share:.0%} of the copy roof" in text
        assert ("the rest is fixed costs" in text) == ours.latency_bound
        assert "1.0× slower" not in text and "1.0× faster" not in text  # within 10 %: said in per cent
        cudnn = story.decode.row(rows, "sdpa_default")
        ratio = cudnn.time_us / ours.time_us
        if ratio < 0.97:
            assert "slower than SDPA's default" in text
        elif ratio > 1.03:
            assert "faster than SDPA's default" in text
        else:
            assert "level with SDPA's default" in text
        if ours.share > 1:
            assert "decode only reads" in text  # past the copy roof, said why it can be
        prefill = story.decode.row(rows, "fa2")
        if prefill is not None:  # "both calls are mostly fixed costs" only where ours is
            assert ("the problem Flash-Decoding's split of the cache solved" in text) == (not ours.latency_bound)
            assert ("both calls are mostly fixed costs" in text) == ours.latency_bound


def test_ours_against_cudnn_is_said_level_in_per_cent_or_as_a_ratio_and_the_right_way_round():
    assert [story.decode._versus(x) for x in (1.0, 0.97, 1.03)] == ["level with"] * 3
    assert story.decode._versus(1 / 1.04) == "4% slower than" and story.decode._versus(1.05) == "5% faster than"
    assert story.decode._versus(0.5) == "2.0× slower than" and story.decode._versus(1.5) == "1.5× faster than"


def test_at_128k_our_kernel_streams_the_cache_and_the_prefill_kernel_does_not():
    rows = rows_at(1, 131072)
    ours, prefill = story.decode.row(rows, "decode"), story.decode.row(rows, "fa2")
    assert not ours.latency_bound and ours.share > 0.8
    assert prefill.time_us / ours.time_us > 8  # the goal: ≥ 8× our prefill kernel at batch 1, 128K


def test_a_model_presets_kv_cache_is_its_real_kv_heads():
    hbm = RECORDED.facts["hbm_bytes"]
    rows = {r.label: r for r in story.kv_cache_rows(settings_module.MODEL_PRESETS, hbm, 131072)}
    llama = rows["Llama 3 8B"]
    assert llama.per_token == 2 * 32 * 8 * 128 * 2 == 128 * 1024  # 128 KiB a token: 32 layers × 8 K/V heads
    assert llama.per_token_mha == 4 * llama.per_token  # GQA: 4× smaller than a K/V head per query head
    assert llama.tokens_fit == hbm // llama.per_token and llama.sequences_fit == llama.tokens_fit // 131072
    assert rows["GPT-2 small"].per_token_mha == rows["GPT-2 small"].per_token
    table = story.kv_cache_table(list(rows.values()), 131072, hbm)
    assert "4.0× smaller" in table[1]["KV cache per token"] or "4.0× smaller" in json.dumps(table)


def test_the_trace_is_the_kernels_own_and_its_merge_is_the_kernels_lse():
    trace = decode_trace(0)
    assert trace["splits"] == 4 and len(trace["block_table"]) == trace["kv_len"] // trace["page_size"]
    assert sorted(trace["block_table"]) == list(range(len(trace["block_table"])))  # a shuffle of the pages
    assert trace["block_table"] != sorted(trace["block_table"])
    assert math.isclose(trace["merged_lse"], trace["kernel_lse"], rel_tol=1e-5)
    assert math.isclose(trace["kernel_lse"], trace["reference_lse"], rel_tol=1e-5)
    assert trace["max_abs_err"] < 1e-4
    for running in trace["running"]:  # the running sum only grows within a split, the max never falls
        ms, ls = zip(*running)
        assert list(ms) == sorted(ms)
    fig = viz.decode_trace_figure(trace)
    steps = max(len(r) for r in trace["running"])
    assert [f.name for f in fig.frames] == [f"{i}" for i in range(1, steps + 1)] + ["merge"]
    merge = fig.frames[-1].data[-1]
    assert list(merge.y) == [trace["merged_lse"]] * 2 and fig.frames[0].data[-1].y == (None,)
    assert "float64" in fig.layout.title.text
    assert fig.layout.title.text.startswith("Our kernel traced on a small cache: 1K tokens, 4 splits"), \
        "the trace's own cache, said to be one"
    ends = fig.layout.yaxis2.tickvals  # the LSE panel: two ticks, its lowest and highest value (more stood on each other)
    lse = [m + math.log(l) for running in trace["running"] for m, l in running] + [trace["merged_lse"]]
    assert len(ends) == 2 and ends[0] == pytest.approx(min(lse), abs=0.05) and ends[1] == pytest.approx(max(lse), abs=0.05)
    fig.to_json()


def test_the_bandwidth_figure_draws_each_kernel_against_the_copy_roof():
    rows = [{"key": r.key, "label": r.label, "time_us": r.time_us, "gbps": r.gbps, "latency_bound": r.latency_bound}
            for r in rows_at(8, 4096)]
    fig = viz.decode_bandwidth_figure(rows, COPY)
    (bars,) = fig.data
    texts = [a.text for a in fig.layout.annotations if a.y in bars.y]
    assert len(bars.y) == len(rows) and len(texts) == len(rows) and all("µs" in t for t in texts)
    # at 4K our call is mostly fixed costs: a dagger beside its bar, keyed in the axis title
    marked = [t for t, r in zip(texts, rows) if r["latency_bound"]]
    assert marked and all(t.endswith(" †") for t in marked) and sum("†" in t for t in texts) == len(marked)
    assert fig.layout.xaxis.title.text == "GB/s on K and V bytes · † latency-bound"
    unmarked = viz.decode_bandwidth_figure([{**r, "latency_bound": False} for r in rows], COPY)
    assert "†" not in unmarked.layout.xaxis.title.text, "no key where no bar is marked"
    assert any(shape.x0 == COPY for shape in fig.layout.shapes)
    # the labels stand in a column right of the longest bar and of the roof: the roof's line crosses none of them
    right = max([*bars.x, COPY])
    assert all(a.x > right and a.xanchor == "left" for a in fig.layout.annotations if a.y in bars.y)
    # the x gridlines run on through that column: each label stands on the chart's own background, over them
    from viz.theme import surface
    assert {a.bgcolor for a in fig.layout.annotations if a.y in bars.y} == {surface("light")["background"]}


def test_the_scene_runs_at_every_stop_and_says_what_it_lacks(tmp_path, monkeypatch):
    for kv_len, batch in ((1024, 1), (131072, 8), (1048576, 1)):
        app = open_app(scene="decode", kv_len=str(kv_len), decode_batch=str(batch))
        assert_no_exception(app)
        assert any("the whole job is to read the cache's K and V once" in c.value for c in app.caption)
    app = open_app(scene="decode", kv_len="1048576", decode_batch="32")  # not timed: its cache does not fit
    assert_no_exception(app)
    assert any("the recording timed no decode at 1M tokens × 32 sequences (a cache of 128.0 GiB: with its copy more "
               "than the bench's 35% of this GPU's" in i.value for i in app.info)
    app = open_app(scene="decode", kv_len="3000")
    assert_no_exception(app)
    assert "kv_len" in app.warning[0].value
    shipped = json.loads((results.RESULTS_DIR / "h200.json").read_text())
    prefill_only = {**shipped, "records": [r for r in shipped["records"] if r.get("pass") != "decode"]}
    (tmp_path / "h200.json").write_text(json.dumps(prefill_only))
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    app = open_app(scene="decode")
    assert_no_exception(app)
    assert any("no decode records (`python -m bench --decode` makes them)" in i.value for i in app.info)


def test_a_stop_the_recording_lacks_says_what_it_has_instead():
    batch, kv_len = 8, costmodel.DECODE_KV_LENS[-1]
    assert not rows_at(batch, kv_len)  # the bench stops batch 8 at 512K
    lengths = story.decode_lengths(RECORDED.records, batch)
    hbm = RECORDED.facts["hbm_bytes"]
    text = story.decode_missing_sentence(RECORDED.records, batch, kv_len, hbm)
    assert f"{fmt_tokens(kv_len)} tokens × 8 sequences (a cache of {fmt_bytes(story.cache_bytes(batch, kv_len))}" in text
    assert 2 * story.cache_bytes(batch, kv_len) > costmodel.DECODE_MEMORY_SHARE * hbm  # why the bench left it out
    assert f"more than the bench's 35% of this GPU's {fmt_bytes(hbm)})" in text
    assert "bench's" not in story.decode_missing_sentence(RECORDED.records, batch, kv_len, 10 * hbm)  # it would fit
    assert text.endswith(f"at 8 sequences it has {fmt_tokens(lengths[0])} to {fmt_tokens(lengths[-1])}")
    unrecorded = story.decode_missing_sentence(RECORDED.records, 3, 4096)
    assert unrecorded.endswith("it has batches 1, 8, 32")
    assert "bench --decode" in story.decode_missing_sentence([], 1, 4096)
