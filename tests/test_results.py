"""The results-file loader: good files load; corrupt, foreign, inconsistent or hostile ones are refused."""
import json

import pytest

from kernels import results as res
from kernels.measure import Setting, _result

FACTS = {"name": "NVIDIA H200", "sm_count": 132, "smem_per_sm_bytes": 233472, "smem_per_block_bytes": 232448,
         "l2_bytes": 62914560, "hbm_bytes": 150109880320, "copy_gbps": 4273.4, "compute_capability": "9.0",
         "driver": "580", "torch": "2.11.0", "triton": "3.6.0"}


def good_doc():
    ok = _result(Setting("flash", 8192, 2, 16, 128), "ok", "NVIDIA H200", "cuda", [2.0, 2.1, 2.2], peak=100)
    oom = _result(Setting("naive", 32768, 2, 16, 128), "oom", "NVIDIA H200", "cuda", needed=1 << 37, message="oom")
    timeline = {"sm_count": 132, "seq_len": 16384, "heads": 32, "batch": 1, "head_dim": 128, "block_m": 128,
                "causal": False, "sm_id": [0, 1], "t_start_ns": [0, 5], "t_end_ns": [10, 12], "q_block": [0, 1],
                "bh": [0, 0]}
    return {"schema": res.SCHEMA, "schema_version": res.SCHEMA_VERSION,
            "meta": {"created": "2026-11-29T09:00:00Z", "command": "python -m kernels.bench"},
            "device": dict(FACTS), "records": [ok.to_dict(), oom.to_dict()], "timelines": [timeline]}


def encode(doc):
    return json.dumps(doc).encode()


def test_good_file_round_trips(tmp_path, monkeypatch):
    monkeypatch.setattr(res, "RESULTS_DIR", tmp_path)
    doc = good_doc()
    res.dump_results(tmp_path / "gpu.json", doc["device"], doc["records"], doc["timelines"], "cmd", "today")
    assert res.list_result_files() == ["gpu.json"]
    loaded = res.load_results("gpu.json")
    assert loaded.facts["name"] == "NVIDIA H200" and loaded.meta["created"] == "today"
    assert [r["status"] for r in loaded.records] == ["ok", "oom"]
    assert loaded.records[0]["tflops"] > 0 and loaded.timelines[0]["sm_id"] == [0, 1]


def test_shipped_recording_is_valid():
    for name in res.list_result_files():
        loaded = res.load_results(name)
        assert loaded.records and loaded.facts["name"]


def _mutate(path, value):
    doc = good_doc()
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return encode(doc)


@pytest.mark.parametrize("raw,words", [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[1, 2, 3]", "not a FlashAttention-live results file"),
    (encode({"schema": "someone-else", "records": []}), "not a FlashAttention-live results file"),
    (_mutate(["schema_version"], 99), "schema version 99"),
    (_mutate(["device"], KeyError), "missing its \"device\""),
    (_mutate(["device", "sm_count"], KeyError), "missing sm_count"),
    (_mutate(["records"], []), "no records"),
    (_mutate(["records", 0, "time_ms"], KeyError), "missing time_ms"),
    (_mutate(["records", 0, "time_ms"], "fast"), "time_ms"),
    (_mutate(["records", 0, "seq_len"], True), "seq_len"),
    (_mutate(["records", 0, "seq_len"], -4), "positive"),
    (_mutate(["records", 0, "algorithm"], "magic"), "unknown algorithm"),
    (_mutate(["records", 0, "status"], "great"), "unknown status"),
    (_mutate(["records", 0, "time_ms"], None), "no time"),
    (encode(good_doc()).replace(b'"time_ms": 2.1', b'"time_ms": NaN'), "NaN"),
    (encode(good_doc()).replace(b'"time_ms": 2.1', b'"time_ms": Infinity'), "Infinity"),
    (_mutate(["timelines", 0, "t_end_ns"], [1]), "one length"),
    (_mutate(["timelines", 0, "sm_id"], [0.5, 1]), "integers"),
    (_mutate(["timelines"], {"a": 1}), "must be a list"),
])
def test_bad_files_are_refused_with_a_reason(raw, words):
    with pytest.raises(res.ResultsError, match=words):
        res.load_results(raw)


def test_oversized_upload_is_refused_before_parsing():
    with pytest.raises(res.ResultsError, match="above the"):
        res.load_results(b" " * (res.MAX_FILE_BYTES + 1))


@pytest.mark.parametrize("name", ["../etc/passwd", "/etc/hosts", "h200", "results/h200.json", "..json", 42])
def test_only_bare_names_in_results_dir_are_opened(name):
    with pytest.raises(res.ResultsError):
        res.load_results(name)


def test_missing_file_lists_what_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(res, "RESULTS_DIR", tmp_path)
    with pytest.raises(res.ResultsError, match="no results file"):
        res.load_results("absent.json")


def test_dump_refuses_to_write_a_bad_file(tmp_path):
    doc = good_doc()
    with pytest.raises(res.ResultsError):
        res.dump_results(tmp_path / "x.json", {"name": "x"}, doc["records"], [], "cmd", "today")
    assert not (tmp_path / "x.json").exists()
