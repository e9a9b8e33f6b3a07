"""Ring attention (kernels/ring.py, costmodel/ring.py, bench/ring.py, the results file's "ring" section): the plan
covers every (query, key) pair once, the ring over CPU processes (gloo, our kernels in Triton's interpreter) matches
float64 at chunk sizes that are no multiple of a tile, and the bench writes runs the app reads back."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import costmodel
from bench import results as res
from kernels import source, specs
from kernels.reference import reference_attention
from tests.support_ring import ring_in_processes

ROOT = Path(__file__).resolve().parent.parent


# -- the plan --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("world", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("layout", costmodel.RING_LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_blocks_cover_every_visible_pair_once(world, layout, causal):
    chunks = costmodel.ring_chunks(world, layout)
    seen = {}
    for rank in range(world):
        owned = costmodel.ring_owned(world, rank, layout)
        for step in range(world):
            src = costmodel.ring_source(world, rank, step)
            for qc, kc, kind in costmodel.ring_blocks(world, rank, step, layout, causal):
                assert qc in owned and kc in costmodel.ring_owned(world, src, layout)
                assert (qc, kc) not in seen
                seen[(qc, kc)] = kind
    want = {(qc, kc): "causal" if causal and qc == kc else "full"
            for qc in range(chunks) for kc in range(chunks) if not causal or kc <= qc}
    assert seen == want
    assert sorted(c for r in range(world) for c in costmodel.ring_owned(world, r, layout)) == list(range(chunks))


def test_balance_of_the_layouts():
    for world in (2, 4, 8):
        assert costmodel.ring_balance(world, "plain", True) == pytest.approx(world / (2 * world - 1))
        assert costmodel.ring_balance(world, "zigzag", True) == 1.0
        assert costmodel.ring_balance(world, "plain", False) == 1.0
        work = costmodel.ring_rank_work(world, "zigzag", True)
        assert len(set(work)) == 1 and sum(work) == pytest.approx((2 * world) ** 2 / 2)
    assert costmodel.ring_balance(8, "plain", True) == pytest.approx(0.533, abs=1e-3)  # ring-flash-attention's ≈52 %


def test_memory_and_the_longest_sequence():
    one = costmodel.ring_memory(1 << 20, 1, 1, 32, 128, 2)
    assert one.qkvo == 4 * (1 << 20) * 32 * 128 * 2 and one.kv_buffers == 0
    two = costmodel.ring_memory(1 << 20, 2, 1, 32, 128, 2)
    assert two.qkvo == one.qkvo // 2  # one K/V shard arriving (the last step sends nothing)
    assert two.kv_buffers == costmodel.ring_kv_bytes_per_step(1 << 20, 2, 1, 32, 128, 2) == two.qkvo // 2
    eight = costmodel.ring_memory(1 << 20, 8, 1, 32, 128, 2)
    assert eight.kv_buffers == 2 * costmodel.ring_kv_bytes_per_step(1 << 20, 8, 1, 32, 128, 2)
    hbm = 141 << 30
    longest = [costmodel.ring_longest(w, hbm, 1, 32, 128, 2) for w in (1, 2, 4, 8)]
    assert longest == sorted(longest) and longest[-1] > 3 * longest[0]
    for w, n in zip((1, 2, 4, 8), longest):
        assert costmodel.ring_memory(n, w, 1, 32, 128, 2).total <= hbm
        assert costmodel.ring_memory(n + 2048 * w, w, 1, 32, 128, 2).total > hbm
    with pytest.raises(ValueError, match="layout"):
        costmodel.ring_blocks(2, 0, 0, "striped", True)
    with pytest.raises(ValueError, match="rank"):
        costmodel.ring_owned(2, 2, "zigzag")


# -- shards ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", costmodel.RING_LAYOUTS)
def test_shard_and_unshard_round_trip(layout):
    from kernels.ring import shard, unshard
    x = torch.arange(2 * 3 * 48 * 4, dtype=torch.float32).reshape(2, 3, 48, 4)
    for world in (1, 2, 3, 4):
        parts = [shard(x, world, r, layout) for r in range(world)]
        assert all(p.is_contiguous() and p.shape[2] == 48 // world for p in parts)
        assert torch.equal(unshard(parts, layout), x)
    zig = shard(x, 3, 0, "zigzag")  # chunks 0 and 5 of 6
    assert torch.equal(zig, torch.cat([x[:, :, 0:8], x[:, :, 40:48]], dim=2))
    with pytest.raises(ValueError, match="equal chunks"):
        shard(x[:, :, :47], 2, 0, layout)


# -- the ring over processes ---------------------------------------------------------------------------------------

def _inputs(n, seed=0, dtype=torch.float32, heads=2, head_dim=32):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, n, head_dim, generator=g).to(dtype) for _ in range(3))


@pytest.mark.parametrize("world,layout,causal", [(2, "zigzag", True), (2, "plain", True), (3, "zigzag", True),
                                                 (3, "plain", False), (4, "zigzag", False), (4, "plain", True)])
def test_ring_over_processes_matches_float64(world, layout, causal):
    from kernels import flash_attention
    n = costmodel.ring_chunks(world, "zigzag") * 24  # chunks of 24 or 48 tokens: no multiple of a 64-token tile
    q, k, v = _inputs(n, seed=world)
    o, lse, steps, kernel = ring_in_processes(q, k, v, world, layout, causal)
    ref_o, ref_lse = reference_attention(q, k, v, causal)
    one = flash_attention(q, k, v, causal=causal)
    budget = 4 * (one.double() - ref_o).abs().max().item() + 1e-6
    assert (o.double() - ref_o).abs().max().item() <= budget
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4
    assert kernel == "fa2"
    for rank, mine in enumerate(steps):  # the trace: each step's source and blocks as planned, times measured
        assert [s["step"] for s in mine] == list(range(world))
        for s in mine:
            assert s["src"] == costmodel.ring_source(world, rank, s["step"])
            assert [tuple(b) for b in s["blocks"]] == list(costmodel.ring_blocks(world, rank, s["step"], layout, causal))
            assert s["compute_ms"] > 0 and s["wait_ms"] >= 0
        assert all(a["start_ms"] < b["start_ms"] for a, b in zip(mine, mine[1:]))


def test_ring_in_bf16_over_processes():
    q, k, v = _inputs(96, seed=5, dtype=torch.bfloat16)
    o, _, _, _ = ring_in_processes(q, k, v, 2, "zigzag", True)
    assert o.dtype == torch.bfloat16
    ref_o = reference_attention(q, k, v, True)[0]
    assert (o.double() - ref_o).abs().max().item() < 2e-2


@pytest.mark.parametrize("world", [1, 2, 5])
@pytest.mark.parametrize("layout", costmodel.RING_LAYOUTS)
def test_ring_simulated_in_one_process_matches_float64(world, layout):
    from kernels.ring import ring_simulate
    q, k, v = _inputs(2 * world * 20, seed=world)
    for causal in (False, True):
        o = ring_simulate(q, k, v, world, causal, layout=layout)
        assert (o.double() - reference_attention(q, k, v, causal)[0]).abs().max().item() < 1e-5


def test_ring_refuses_what_it_cannot_run():
    from kernels.ring import ring_attention
    q, k, v = _inputs(32)
    with pytest.raises(RuntimeError, match="torchrun"):
        ring_attention(q, k, v, True)
    with pytest.raises(ValueError, match="layout"):
        ring_attention(q, k, v, True, layout="striped")


def test_ring_of_one_rank_is_the_kernel_and_refuses_bad_shards(tmp_path):
    import torch.distributed as dist
    from kernels import flash_attention
    from kernels.ring import RingTrace, ring_attention
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        q, k, v = _inputs(40)
        trace = RingTrace()
        assert torch.equal(ring_attention(q, k, v, True, trace=trace), flash_attention(q, k, v, causal=True))
        assert len(trace.steps) == 1 and trace.steps[0].blocks == [[0, 0, "causal"], [1, 0, "full"], [1, 1, "causal"]]
        with pytest.raises(ValueError, match="one shape"):
            ring_attention(q, k[:, :, :20], v, True)
        with pytest.raises(ValueError, match="equal chunks"):
            ring_attention(q[:, :, :39], k[:, :, :39], v[:, :, :39], True)
        with pytest.raises(ValueError, match="4-D"):
            ring_attention(q[0], k[0], v[0])
        with pytest.raises(ValueError, match="forward pass only"):
            ring_attention(q.requires_grad_(), k, v)
    finally:
        dist.destroy_process_group()


# -- the bench and the results file ------------------------------------------------------------------------------

def test_bench_ring_on_cpu_processes_writes_runs_the_app_reads(tmp_path):
    out = tmp_path / "rec.json"
    out.write_bytes((ROOT / "results" / "h200.json").read_bytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bench.ring", "--world", "2", "--rounds", "1", "--warmup", "0",
           "--check-seq-len", "72", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote 2 ring runs" in done.stdout
    loaded = res.load_results_path(out)
    mine = [r for r in loaded.ring if r["timing_kind"] == "interpreter"]
    assert {r["layout"] for r in mine} == {"plain", "zigzag"}
    for run in mine:
        assert run["world_size"] == 2 and run["seq_len"] == 64 and run["causal"] and run["kernel"] == "fa2"
        # (a failure names the layout and carries the bench's log: it found a test that had left FLASH_LIVE_BACKEND=aot
        # in pytest's environment, so the bench's kernels compiled and never ran; tests/conftest.py now refuses that)
        assert run["check_seq_len"] == 72 and run["check_err"] < 2e-2, (run["layout"], run["check_err"],
                                                                         done.stderr[-1500:])
        assert len(run["steps"]) == 4 and len(run["rank_compute_ms"]) == 2 and run["one_gpu_ms"] > 0
        # when, and the code it ran: kernels/ring.py around the teaching kernel (specs.source_files' RING)
        assert run["recorded_at"] and run["build"] == source.record_build("fa2", specs.RING, "bfloat16")
    assert all(r["recorded_at"] for r in loaded.ring), "the file's earlier runs keep their stamps"
    before = len(loaded.ring)
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and len(res.load_results_path(out).ring) == before  # replaced, not added
    assert len(loaded.records) == len(res.load_results("h200.json").records)  # the rest of the file as it was


def test_bench_ring_says_how_to_start_it():
    done = subprocess.run([sys.executable, "-m", "bench.ring"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "RANK"})
    assert done.returncode == 2 and "torchrun" in done.stderr
    bad = subprocess.run([sys.executable, "-m", "bench.ring", "--world", "2", "--layouts", "striped"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "layouts must be some of plain, zigzag" in bad.stderr


def _file_with(ring: list[dict]) -> bytes:
    doc = json.loads((ROOT / "results" / "h200.json").read_bytes())
    doc["ring"] = ring
    return json.dumps(doc).encode()


def _a_run() -> dict:
    doc = json.loads((ROOT / "results" / "h200.json").read_bytes())
    ours = [r for r in doc.get("ring", []) if r["impl"] == "ours" and r.get("steps")]
    assert ours, "the shipped recording has ring runs with traces (torchrun -m bench.ring)"
    return copy.deepcopy(ours[0])


@pytest.mark.parametrize("spoil,match", [
    (lambda r: r.update(status="ok", time_ms=None), "a run that finished has a time"),
    (lambda r: r.update(seq_len=r["seq_len"] + 1), "equal chunks"),
    (lambda r: r["steps"].pop(), "each of 2 ranks"),
    (lambda r: r["steps"][1].update(src=0), "holds rank"),
    (lambda r: r["steps"][0].update(blocks=[[9, 0, "full"]]), "blocks must be"),
    (lambda r: r["steps"][0].update(wait_ms=-1.0), "times in ms"),
    (lambda r: r.update(rank_compute_ms=[1.0]), "one per rank"),
    (lambda r: r.update(layout="striped"), "layout"),
])
def test_a_spoiled_ring_run_is_refused_with_where_and_why(spoil, match):
    run = _a_run()
    spoil(run)
    with pytest.raises(res.ResultsError, match=match):
        res.parse_results(_file_with([run]))


def test_a_bad_optional_ring_value_is_dropped_with_a_note():
    run = _a_run()
    run["one_gpu_ms"] = -3
    loaded = res.parse_results(_file_with([run]))
    assert loaded.ring[0]["one_gpu_ms"] is None and any("one_gpu_ms" in n for n in loaded.notes)


def test_the_shipped_recording_has_ring_runs_of_both_layouts_and_the_peer():
    runs = res.load_results("h200.json").ring
    ok = [r for r in runs if r["status"] == "ok" and r["timing_kind"] == "cuda"]
    assert {(r["impl"], r["layout"]) for r in ok} >= {("ours", "plain"), ("ours", "zigzag"), ("torch_cp", "zigzag")}
    for r in ok:
        if r["impl"] == "ours":
            assert r["check_err"] is not None and r["check_err"] < 5e-2 and r["one_gpu_ms"] > 0


def test_other_benches_keep_the_ring_runs(tmp_path):
    """A bench run merged into a file keeps its ring runs (bench.cli.write_out through merged); one written afresh
    has none (it measured none)."""
    from argparse import Namespace
    from bench.cli import write_out
    shipped = res.load_results("h200.json")
    records = [r for r in shipped.records if r["algorithm"] == "fa2"][:3]
    for merge in (True, False):
        out = tmp_path / f"rec-{merge}.json"
        out.write_bytes((ROOT / "results" / "h200.json").read_bytes())
        assert write_out(Namespace(merge_into=merge, out=out), shipped.facts, records, [], "python -m bench",
                         "2026-12-04T00:00:00Z", {"ratios": []}, []) == 0
        kept = res.load_results_path(out).ring
        if merge:
            assert kept == shipped.ring and kept
        else:
            assert kept == []


# -- on GPUs -----------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("layout", costmodel.RING_LAYOUTS)
def test_ring_blocks_on_the_gpu_kernel_match_float64(layout):
    """Every rank's blocks and merges at 4 ranks, in one process on one GPU (ring_simulate): our Hopper kernel on
    chunk views of 200 tokens, causal and not."""
    from kernels.ring import ring_simulate
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(2, 4, 1600, 128, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        o = ring_simulate(q, k, v, 4, causal, layout=layout)
        ref = reference_attention(q, k, v, causal)[0]
        assert (o.double() - ref).abs().max().item() < 2e-2


@pytest.mark.gpu
def test_ring_over_two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs (the nvidia-h200-x2 kind): bench.ring on 2 GPUs is recorded in results/h200.json")
    done = subprocess.run([sys.executable, "-m", "bench.ring", "--world", "2", "--seq-lens", "16384", "--rounds",
                           "1", "--warmup", "1", "--no-one-gpu"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT), "NCCL_NVLS_ENABLE": "0",
                                            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    checks = [float(line.split("= ")[1].split()[0]) for line in done.stderr.splitlines() if line.startswith("check ")]
    assert len(checks) == 2 and max(checks) < 2e-2


def test_a_merge_keeps_the_command_that_measured_the_ring(tmp_path):
    from bench.cli import merged
    out = tmp_path / "rec.json"
    out.write_bytes((ROOT / "results" / "h200.json").read_bytes())
    earlier = res.load_results_path(out)
    assert earlier.meta.get("ring_command") and earlier.ring
    _, _, _, extra, _ = merged(out, [], [], [], {}, "python -m bench --fp8")
    assert extra["ring_command"] == earlier.meta["ring_command"]
