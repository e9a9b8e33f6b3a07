"""One spec per kernel, read by every room: a spec is complete, and a kernel added as one more spec is seen by every
layer (the library's dispatch, the bench's runner and ratio table, the results file's names, the cost model's
traffic, the roofline, the colours), with no table to edit elsewhere. Scenes and views keep one table each."""
import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
import torch

import app
import costmodel
import story
import viz
from bench import record, results
from bench.cli import ratio_table
from bench.measure import Setting, bytes_moved, flash_tiles, model_extra_bytes
from costmodel import Shape
from kernels import specs, trace
from page import pictures
from viz import animation
from tests.support_kernels import random_qkv, reference, rel_error


def test_every_spec_is_complete():
    assert specs.all_specs(), "no specs"
    keys = [s.key for s in specs.all_specs()]
    assert len(set(keys)) == len(keys) and tuple(specs.SPECS) == tuple(keys)
    colours = [s.color for s in specs.all_specs()]
    assert len(set(colours)) == len(colours), "two algorithms share a colour"
    shape = Shape(1024, 1, 2, 64, "bfloat16")
    for s in specs.all_specs():
        assert s.label and s.short and s.color in viz.COLORS, s.key
        assert callable(s.load("call")), s.key
        assert costmodel.total_bytes(specs.traffic(s.key, shape)) > 0, s.key
        assert specs.extra_bytes(s.key, shape) > 0, s.key
        assert set(s.passes) <= set(costmodel.PASSES), s.key
        for facet in ("tiles", "unavailable", "proton", "compile", "backward", "backward_compile"):
            if getattr(s, facet):
                assert callable(s.load(facet)), (s.key, facet)
        if s.tile_rule:
            assert s.assumed_tiles, s.key
            s.tile_rule(*s.assumed_tiles)
        if s.trace:
            assert s.trace.order_label and callable(specs.load(s.trace.traced)), s.key
            assert s.trace.source and s.trace.phases, s.key
        if s.library:
            assert s.ours, s.key
        if s.max_seq_len:
            assert s.max_seq_len_why, s.key
        for alias in s.aliases:
            assert specs.canonical(alias) == s.key and alias not in specs.SPECS
    assert results.RECORD_SCHEMA["algorithm"].choices() == tuple(specs.SPECS)  # a file may name each


def test_the_authors_fa4_is_a_peer_spec_that_says_why_it_cannot_run(monkeypatch):
    """The FlashAttention authors' FA-4 (issue 40): a peer (not ours, not in the library), timed by the bench and
    recorded like SDPA, installed apart from the app; where it cannot run its spec's `unavailable` says why."""
    from kernels import peers
    fa4 = specs.spec("fa4_authors")
    assert not fa4.ours and not fa4.library and fa4.ratio and "prefill" in fa4.passes
    assert fa4.requirements == "requirements-peers.txt"
    wanted = (Path(__file__).resolve().parents[1] / fa4.requirements).read_text()
    assert "flash-attn-4==4.0.0b36" in wanted and "nvidia-cutlass-dsl" in wanted
    assert "flash-attn-4" not in (Path(__file__).resolve().parents[1] / "requirements.txt").read_text()
    assert "fa4_authors" in specs.keys(passes=("prefill",))  # what `python -m bench` times by default
    assert results.RECORD_SCHEMA["algorithm"].choices() == tuple(specs.SPECS)  # a file may record it
    shape = Shape(1024, 2, 4, 128, "bfloat16")
    unavailable = fa4.load("unavailable")
    importer = peers._fa4_func
    importer.cache_clear()
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # not installed (an import of it fails)
    try:
        assert unavailable(shape) == "flash-attn-4 is not installed (pip install -r requirements-peers.txt)"
        with pytest.raises(RuntimeError, match="not installed"):
            fa4.load("call")(*(torch.zeros(1, 1, 8, 64) for _ in range(3)))
        monkeypatch.setattr(peers, "_fa4_func", lambda: (object(), None))  # installed, on this CPU machine
        assert "float32" in unavailable(Shape(1024, 2, 4, 128, "float32"))
        assert "needs Hopper" in unavailable(shape)
    finally:
        importer.cache_clear()  # the next caller imports again, with flash_attn as it really is


def test_a_live_stage_does_not_measure_a_peer_this_machine_lacks(monkeypatch):
    """Live, the page measures every prefill algorithm; a peer installed apart that cannot run here (the authors'
    FA-4 not installed) is left out, so its absence shows no failure; where it can run, it is measured."""
    from kernels import peers
    from page import stage
    from page.settings import Settings
    settings = Settings()
    monkeypatch.setattr(peers, "_fa4_func", lambda: (None, "flash-attn-4 is not installed"))
    assert stage._absent_peer("fa4_authors", settings)
    assert not stage._absent_peer("fa2", settings) and not stage._absent_peer("sdpa_default", settings)
    monkeypatch.setattr(peers, "fa4_unavailable_for", lambda shape, device=None: None)
    assert not stage._absent_peer("fa4_authors", settings)


def test_older_names_still_read():
    assert specs.canonical("flash") == "fa2" and specs.canonical("flash_v1") == "fa1"
    assert specs.canonical("flash_v3") == "fa3" and specs.canonical("naive") == "naive"
    with pytest.raises(ValueError, match="unknown algorithm"):
        specs.spec("nope")


def test_loop_orders_are_the_traced_kernels_and_their_sources():
    traced = tuple(s.key for s in specs.with_facet("trace"))
    assert traced == trace.orders() == tuple(animation.loop_orders()) == tuple(pictures.loop_orders())
    assert traced == ("fa2", "fa1")
    assert all(viz.order_label(order) for order in traced)


def test_one_table_of_scenes_and_one_of_views():
    keys = [scene.key for scene in app.SCENES]
    assert len(set(keys)) == len(keys) == len(app.SCENE_KEYS) and all(callable(s.show) for s in app.SCENES)
    assert all(scene.title for scene in app.SCENES)
    assert set(pictures.VIEWS) == {"tiles", "hbm", "source", "rereads"}
    assert record.RECORD_FIELDS == tuple(results.RECORD_SCHEMA)


# -- a new kernel is its file plus one spec ---------------------------------------------------------------------

TOY = specs.Spec("toy", "toy (ours, a test's)", "toy (ours)", "sky_blue", "kernels.fa2:flash_attention",
                 specs.SPECS["fa2"].traffic, costmodel.flash_extra_bytes, interpreter=True, library=True, ratio=True,
                 tiles="kernels.fa2:tiles_for", assumed_tiles=(64, 64), tile_rule=costmodel.check_tiles)


def _record(algorithm: str, time_ms: float, shape: Shape) -> dict:
    """A GPU record as the bench writes it (its derived fields consistent with its time)."""
    s = Setting(algorithm, shape)
    moved = bytes_moved(s)
    flops = costmodel.attention_flops(shape)
    tiles = (None, None) if algorithm in ("naive", "sdpa_default") else flash_tiles(s) or (None, None)
    return record.Record(algorithm, shape.seq_len, shape.batch, shape.heads, shape.head_dim, shape.dtype,
                         shape.causal, "ok", time_ms, time_ms, time_ms, flops / (time_ms * 1e-3) / 1e12,
                         moved / (time_ms * 1e-3) / 1e9, moved, 1 << 20, None, "", "NVIDIA H200", "cuda",
                         *tiles).to_dict()


def test_a_new_spec_is_seen_by_every_layer():
    shape = Shape(8192, 2, 16, 128, "bfloat16")
    with specs.registered(TOY):
        # the library's dispatch: kernel="toy" runs it, and it is among the choices
        from kernels.attention import flash_attention, kernel_choices
        assert "toy" in kernel_choices()
        q, k, v = random_qkv((1, 2, 40, 32), torch.float32, seed=5)
        out = flash_attention(q, k, v, causal=True, kernel="toy")
        assert rel_error(out, reference(q, k, v, True, 32 ** -0.5)[0]) < 1e-5
        # the bench: a setting of it, its tiles, bytes and memory through its spec
        s = Setting("toy", shape)
        assert flash_tiles(s) == flash_tiles(Setting("fa2", shape))
        assert bytes_moved(s) == bytes_moved(Setting("fa2", shape)) and model_extra_bytes(s) > 0
        # the results file accepts its name, and the ratio table has its column
        records = [_record("fa2", 2.0, shape), _record("toy", 4.0, shape), _record("sdpa_default", 3.0, shape)]
        doc = {"schema": results.SCHEMA, "schema_version": results.SCHEMA_VERSION,
               "meta": {"created": "2026-12-04T00:00:00Z", "command": "test"},
               "device": {"name": "NVIDIA H200", "sm_count": 132, "smem_per_sm_bytes": 233472,
                          "smem_per_block_bytes": 232448, "l2_bytes": 62914560, "hbm_bytes": 150109110272,
                          "copy_gbps": 4270.0, "compute_capability": "9.0", "driver": "580", "torch": "2.11",
                          "triton": "3.6", "matmul_tflops": 720.0},
               "records": records, "timelines": []}
        loaded = results.parse_results(json.dumps(doc).encode(), "toy.json")
        assert [r["algorithm"] for r in loaded.records] == ["fa2", "toy", "sdpa_default"]
        row = ratio_table(loaded.records)[0]
        assert row["fa2_vs_toy"] == pytest.approx(2.0) and row["fa2_vs_sdpa_default"] == pytest.approx(1.5)
        # the roofline draws its point, named by its spec; the evolution scene has its entry
        points = story.roofline_points(loaded.records, viz.short_labels())
        toy = next(p for p in points if p.algorithm == "toy")
        assert toy.label == "toy (ours)" and math.isclose(toy.tflops, loaded.records[1]["tflops"])
        assert "toy" in [e["algorithm"] for e in story.evolution_points(loaded.records, 8192)]
        # the colours and legend names
        assert viz.algorithm_color("toy") == viz.COLORS["sky_blue"] and viz.algorithm_label("toy") == TOY.label
    assert "toy" not in specs.SPECS and viz.algorithm_color("toy") == viz.PALETTE["published"]
    with pytest.raises(results.ResultsError, match="toy"):  # gone again: a file naming it is refused
        results.parse_results(json.dumps(doc).encode(), "toy.json")


def test_a_spec_key_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="already"):
        with specs.registered(dataclasses.replace(TOY, key="fa2")):
            pass
