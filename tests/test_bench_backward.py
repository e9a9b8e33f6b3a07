"""The bench's backward records (bench --backward): what it sweeps, one record measured on this machine's
interpreter, the results file's fwd_bwd_ms (older files read, a bad one dropped or refused), and the page keeping
backward records apart from the prefill scenes'."""
from __future__ import annotations

import pytest

import costmodel
import story
from bench import cli, results
from bench.measure import BACKWARD_PEERS, Setting, backward_algorithms, measure
from bench.results import ResultsError, load_results_path
from costmodel import Shape

TINY = Shape(64, 1, 2, 16, "float32", True, pass_="backward")
H200 = results.RESULTS_DIR / "h200.json"


def test_the_sweep_is_ours_sdpa_and_eager_at_b2_h16_1k_to_64k():
    settings = cli.backward_settings(cli.parse_args(["--backward"]))
    assert {s.algorithm for s in settings} == {"fa2", "fa3", "sdpa_default", "sdpa_flash", "torch_naive"}
    assert set(backward_algorithms()) == {"fa2", "fa3", *BACKWARD_PEERS}
    assert sorted({s.shape.seq_len for s in settings}) == [1 << p for p in range(10, 17)]
    assert {(s.shape.batch, s.shape.heads, s.shape.dtype, s.shape.pass_) for s in settings} == {
        (2, 16, "bfloat16", "backward")}
    assert {(s.shape.head_dim, s.shape.causal) for s in settings} == {(64, False), (64, True), (128, False),
                                                                       (128, True)}
    assert len(settings) == 4 * 7 * 5
    # the lengths innermost: PyTorch eager's first out-of-memory stops its sweep at that head_dim and mask
    eager = [s.shape.seq_len for s in settings[:35] if s.algorithm == "torch_naive"]
    assert eager == sorted(eager) and len(eager) == 7
    named = cli.backward_settings(cli.parse_args(["--backward", "--algorithms", "fa2,naive", "--seq-lens", "2048"]))
    assert {(s.algorithm, s.shape.seq_len) for s in named} == {("fa2", 2048)}


def test_a_kernel_without_a_backward_is_refused_by_name():
    for algorithm in ("fa1", "naive", "decode"):
        with pytest.raises(ValueError, match="has no backward pass to time.*fa2, fa3, sdpa_default"):
            Setting(algorithm, TINY)


def test_a_backward_record_on_the_interpreter():
    r = measure(Setting("fa2", TINY)).to_dict()  # ours through autograd: its forward, then fa2_bwd's kernels
    assert r["status"] == "ok", r["message"]
    assert (r["pass"], r["timing_kind"], r["seq_len"], r["causal"]) == ("backward", "interpreter", 64, True)
    assert r["time_ms"] > 0 and r["fwd_bwd_ms"] > 0
    # CPU time says nothing of a GPU: no TFLOPS, bandwidth or memory; a backward runs its own tiles
    assert r["tflops"] is None and r["gbps"] is None and r["peak_extra_bytes"] is None
    assert r["block_m"] is None and r["block_n"] is None
    assert r["bytes_moved"] == costmodel.backward_least_bytes(TINY) == 4 * 64 * 2 * 16 * 4 * 2 + 2 * 64 * 4
    with pytest.raises(ValueError, match="needs a GPU"):  # PyTorch's peers are timed on a GPU only, as in prefill
        measure(Setting("torch_naive", TINY))


def _cuda_record(ms: float = 8.0, both: float | None = 10.5, **changes) -> dict:
    """A backward record as a GPU run writes it (its TFLOPS and GB/s derived from its time)."""
    shape = Shape(8192, 2, 16, 128, "bfloat16", False, pass_="backward")
    flops, moved = costmodel.pass_flops(shape), costmodel.backward_least_bytes(shape)
    record = {**shape.record_fields(), "algorithm": "fa2", "status": "ok", "time_ms": ms, "time_ms_p20": ms,
              "time_ms_p80": ms, "tflops": flops / (ms * 1e-3) / 1e12, "gbps": moved / (ms * 1e-3) / 1e9,
              "bytes_moved": moved, "peak_extra_bytes": 1 << 30, "needed_bytes": None, "message": "",
              "device": "NVIDIA H200", "timing_kind": "cuda", "fwd_bwd_ms": both}
    return {**record, **changes}


def _parsed(records):
    """A file as someone may hand it over (not through dump_results, which writes nothing it would trim)."""
    import json
    doc = {"schema": results.SCHEMA, "schema_version": results.SCHEMA_VERSION,
           "meta": {"created": "2026-12-04T00:00:00Z", "command": "hand-made"},
           "device": load_results_path(H200).facts, "records": records, "timelines": [], "phases": []}
    return results.parse_results(json.dumps(doc).encode(), "hand-made.json")


def _round_trip(tmp_path, records):
    path = tmp_path / "backward.json"
    cli.dump_results(path, load_results_path(H200).facts, records, [], "python -m bench --backward",
                     "2026-12-04T00:00:00Z")
    return load_results_path(path)


def test_backward_tflops_count_two_and_a_half_forwards_and_fwd_bwd_ms_is_kept(tmp_path):
    loaded = _round_trip(tmp_path, [_cuda_record()])
    r = loaded.records[0]
    assert (r["pass"], r["fwd_bwd_ms"]) == ("backward", 10.5) and not loaded.notes
    forward = costmodel.attention_flops(Shape.of_record(r))
    assert r["tflops"] == pytest.approx(2.5 * forward / 8e-3 / 1e12)
    # a backward's TFLOPS counted as a forward's would not match its time: refused, naming the field
    with pytest.raises(ResultsError, match="tflops"):
        _round_trip(tmp_path, [_cuda_record(tflops=forward / 8e-3 / 1e12)])


def test_older_files_read_without_fwd_bwd_ms():
    loaded = load_results_path(H200)  # schema 5, backward records among them: only those have the field
    assert loaded.records and all((r["fwd_bwd_ms"] is None) == (r["pass"] != "backward" or r["status"] != "ok")
                                  for r in loaded.records)


def test_a_bad_fwd_bwd_ms_is_dropped_or_refused(tmp_path):
    for bad in (-1.0, "fast"):  # not a time: dropped, with a note; the bench never writes one
        loaded = _parsed([_cuda_record(both=bad)])
        assert loaded.records[0]["fwd_bwd_ms"] is None and loaded.records[0]["time_ms"] == 8.0
        assert any("fwd_bwd_ms" in note and "backward time alone" in note for note in loaded.notes)
    with pytest.raises(ResultsError, match="fwd_bwd_ms"):
        _round_trip(tmp_path, [_cuda_record(both=-1.0)])
    with pytest.raises(ResultsError, match="less than the backward alone"):
        _round_trip(tmp_path, [_cuda_record(ms=8.0, both=6.0)])
    with pytest.raises(ResultsError, match="not a finished backward"):
        _round_trip(tmp_path, [_cuda_record(**{"pass": "prefill"})])
    oom = _cuda_record(status="oom", time_ms=None, time_ms_p20=None, time_ms_p80=None, tflops=None, gbps=None,
                       needed_bytes=1 << 34, peak_extra_bytes=None)
    with pytest.raises(ResultsError, match="not a finished backward"):
        _round_trip(tmp_path, [oom])
    assert _round_trip(tmp_path, [{**oom, "fwd_bwd_ms": None}]).records[0]["needed_bytes"] == 1 << 34


def test_merging_a_backward_run_keeps_the_prefill_records_of_the_same_setting(tmp_path):
    path = tmp_path / "merged.json"
    earlier = load_results_path(H200)
    prefill = next(r for r in earlier.records if (r["algorithm"], r["seq_len"], r["head_dim"], r["causal"])
                   == ("fa2", 8192, 128, False) and r["batch"] == 2 and r["heads"] == 16)
    cli.dump_results(path, earlier.facts, [prefill], [], "python -m bench", "2026-12-04T00:00:00Z")
    records, *_ = cli.merged(path, [_cuda_record()], [], [], {"ratios": []}, "python -m bench --backward")
    assert sorted(r.get("pass") or "prefill" for r in records) == ["backward", "prefill"]


def test_the_prefill_scenes_do_not_read_backward_records():
    from page.settings import Settings
    from page.stage import same_setting
    backward = _cuda_record()
    prefill = {**backward, "pass": "prefill", "fwd_bwd_ms": None}
    assert story.prefill_records([backward, prefill]) == [prefill]
    assert story.prefill_records([{**prefill, "pass": None}])  # an older record is a prefill
    settings = Settings(seq_len=8192, batch=2, heads=16, head_dim=128, dtype="bfloat16", causal=False)
    assert same_setting(prefill, settings) and not same_setting(backward, settings)
    talk = Shape(8192, 2, 16, 128, "bfloat16", False)
    fa1 = {**prefill, "algorithm": "fa1", "time_ms": 3.0}
    # the FA1-order gap reads prefill records only: a backward fa2 record (slower than fa1 here) changes nothing
    assert story.fa1_gap([prefill, fa1], talk, 132) == story.fa1_gap([prefill, fa1, backward], talk, 132)


def test_the_eager_peer_is_differentiable_and_matches_the_reference_gradients():
    """Standard attention's autograd is the backward's memory wall: its forward must record a graph (bmm's out_dtype
    has no derivative: every eager backward record of the first H200 run was 'derivative for aten::bmm is not
    implemented'), with the reference's gradients."""
    import torch
    from kernels import peers
    from kernels.reference import reference_gradients
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(1, 2, 37, 16) for _ in range(4))
    for causal in (False, True):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = peers.torch_naive(*leaves, causal=causal)
        grads = torch.autograd.grad(out, leaves, do)
        expected = reference_gradients(q, k, v, do, causal=causal)
        for got, want in zip(grads, expected):
            assert torch.allclose(got.double(), want.double(), atol=1e-4, rtol=1e-3)
