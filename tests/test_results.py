"""The results-file loader: good files load; corrupt, foreign, inconsistent or hostile ones are refused."""
import json

import pytest

from bench import results as res
from costmodel import Shape
from bench.measure import Setting, make_record

FACTS = {"name": "NVIDIA H200", "sm_count": 132, "smem_per_sm_bytes": 233472, "smem_per_block_bytes": 232448,
         "l2_bytes": 62914560, "hbm_bytes": 150109880320, "copy_gbps": 4273.4, "compute_capability": "9.0",
         "driver": "580", "torch": "2.11.0", "triton": "3.6.0"}


def good_doc():
    ok = make_record(Setting("fa2", Shape(seq_len=8192, batch=2, heads=16, head_dim=128)), "ok", "NVIDIA H200", "cuda", [2.0, 2.1, 2.2], peak=100)
    oom = make_record(Setting("naive", Shape(seq_len=32768, batch=2, heads=16, head_dim=128)), "oom", "NVIDIA H200", "cuda", needed=1 << 37, message="oom")
    timeline = {"sm_count": 132, "seq_len": 16384, "heads": 32, "batch": 1, "head_dim": 128, "block_m": 128,
                "causal": False, "sm_id": [0, 1], "t_start_ns": [0, 5], "t_end_ns": [10, 12], "q_block": [0, 1],
                "bh": [0, 0]}
    return {"schema": res.SCHEMA, "schema_version": res.SCHEMA_VERSION,
            "meta": {"created": "2026-11-29T09:00:00Z", "command": "python -m bench"},
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
    (_mutate(["device"], KeyError), "\"device\" is missing"),
    (_mutate(["device", "sm_count"], KeyError), "missing sm_count"),
    (_mutate(["records"], []), "no records"),
    (_mutate(["records", 0, "time_ms"], KeyError), "missing time_ms"),
    (_mutate(["records", 0, "time_ms"], "fast"), "time_ms"),
    (_mutate(["records", 0, "seq_len"], True), "seq_len"),
    (_mutate(["records", 0, "seq_len"], -4), "seq_len = -4 is outside 1"),
    (_mutate(["records", 0, "algorithm"], "magic"), "algorithm = 'magic' is not one of fa2"),
    (_mutate(["records", 0, "status"], "great"), "status = 'great' is not one of ok"),
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


# -- hostile and absurd files -------------------------------------------------------------------------

def _deep(levels):
    return ('{"schema": "flash-live-results", "schema_version": 1, "x": ' + "[" * levels + "]" * levels
            + "}").encode()


@pytest.mark.parametrize("raw,words", [
    (_deep(10_000), "nested too deeply"),
    (_deep(50), "nested deeper"),
    (encode(good_doc()).replace(b'"sm_count": 132', b'"sm_count": ' + b"9" * 5000), "not a results file"),
    (encode(good_doc()).replace(b'"time_ms": 2.1', b'"time_ms": 1e400'), "time_ms = inf is not finite"),
    (_mutate(["device", "sm_count"], "abc"), "sm_count = 'abc' is not a number"),
    (_mutate(["device", "hbm_bytes"], "lots"), "hbm_bytes = 'lots' is not a number"),
    (_mutate(["device", "hbm_bytes"], 10**30), "hbm_bytes = 1000000000000000000000000000000 is outside"),
    (_mutate(["device", "copy_gbps"], -1.0), "copy_gbps = -1.0 is outside"),
    (_mutate(["device", "sm_count"], 0), "sm_count = 0 is outside 1"),
    (_mutate(["device", "name"], 7), "name = 7 is not text"),
    (_mutate(["meta", "created"], ["today"]), "created"),
    (_mutate(["records", 0, "time_ms"], -7.23), "time_ms = -7.23 is outside"),
    (_mutate(["records", 0, "time_ms"], 1e300), "time_ms = 1e\\+300 is outside"),
    (_mutate(["records", 0, "time_ms"], 1e-300), "time_ms = 1e-300 is outside"),
    (_mutate(["records", 0, "time_ms"], 0), "time_ms = 0 is outside"),
    (_mutate(["records", 0, "tflops"], -3.0), "tflops = -3.0 is outside"),
    (_mutate(["records", 0, "bytes_moved"], 10**30), "bytes_moved = .* is outside"),
    (_mutate(["records", 0, "peak_extra_bytes"], -1), "peak_extra_bytes = -1 is outside"),
    (_mutate(["records", 0, "needed_bytes"], 2.5), "needed_bytes = 2.5 is not a whole number"),
    (_mutate(["records", 0, "causal"], "no"), "causal = 'no' is not true or false"),
    (_mutate(["records", 0, "dtype"], "float64"), "dtype = 'float64' is not one of"),
    (_mutate(["records", 0, "time_ms_p20"], 3.0), "outside its 20th–80th percentiles"),
    (_mutate(["records", 1, "time_ms"], 2.0), "status oom but time_ms given"),
    (_mutate(["timelines", 0, "sm_count"], 0), "timeline 0: sm_count = 0 is outside"),
    (_mutate(["timelines", 0, "sm_count"], "abc"), "timeline 0: sm_count = 'abc' is not a number"),
    (_mutate(["timelines", 0, "block_m"], 0), "block_m = 0 is outside"),
    (_mutate(["timelines", 0, "t_end_ns"], [10, 10**30]), "t_end_ns holds .* outside 0"),
    (_mutate(["timelines", 0, "t_end_ns"], [10, 4]), "ends .* before it starts"),
    (_mutate(["timelines", 0, "sm_id"], [0, 132]), "sm_id holds 132, outside 0 … 131"),
    (_mutate(["timelines", 0, "bh"], [0, -1]), "bh holds -1"),
    (_mutate(["timelines", 0, "sm_id"], [0, True]), "integers"),
    ({k: [] if k in res.TIMELINE_ARRAYS else v for k, v in good_doc()["timelines"][0].items()}, "0 programs"),
])
def test_hostile_and_absurd_files_are_refused_with_a_reason(raw, words):
    if isinstance(raw, dict):
        doc = good_doc()
        doc["timelines"] = [raw]
        raw = encode(doc)
    with pytest.raises(res.ResultsError, match=words):
        res.load_results(raw)


def test_reasons_quote_values_short():
    with pytest.raises(res.ResultsError) as err:
        res.load_results(_mutate(["records", 0, "time_ms"], "x" * 100_000))
    assert len(str(err.value)) < 200


def test_text_loses_control_characters_and_is_capped():
    doc = good_doc()
    doc["device"]["name"] = "NVIDIA\u202e H200\x00\x1b[31m\nrow two" + "x" * 1000
    doc["records"][1]["message"] = "\ud800 oom " + "y" * 10_000
    loaded = res.load_results(encode(doc))
    name, message = loaded.facts["name"], loaded.records[1]["message"]
    assert name.startswith("NVIDIA H200[31m row two") and len(name) <= res.MAX_TEXT and name.endswith("…")
    assert message.startswith("oom ") and len(message) <= 500
    markup = "[click me](https://evil.example) <b>x</b>"
    doc["device"]["name"] = markup
    assert res.load_results(encode(doc)).facts["name"] == markup  # escaping is the page's job, not the loader's


def test_unknown_keys_are_dropped():
    doc = good_doc()
    doc["device"]["evil"] = {"deep": [1, 2]}
    doc["records"][0]["surprise"] = 1e300
    doc["meta"]["later"] = "x"
    doc["meta"]["ratios"] = [{"head_dim": 64, "flash_ms": 1.5, "flash_vs_sdpa_flash": None}]
    loaded = res.load_results(encode(doc))
    assert "evil" not in loaded.facts and "surprise" not in loaded.records[0]
    assert loaded.meta == {"created": "2026-11-29T09:00:00Z", "command": "python -m bench",
                           "ratios": doc["meta"]["ratios"]}


def test_bad_ratios_are_dropped_with_a_note():
    doc = good_doc()
    doc["meta"]["ratios"] = [{"x": [1, 2]}]
    loaded = res.load_results(encode(doc))
    assert "ratios" not in loaded.meta and "ratios" in loaded.notes[0]


def test_a_loaded_file_dumps_back_unchanged(tmp_path):
    """bench.counters reads a file, adds counts and writes it back through dump_results."""
    doc = good_doc()
    doc["meta"]["ratios"] = [{"head_dim": 64, "flash_ms": 1.5}]
    doc["device"].update(matmul_tflops=750.5, l2_gbps=11000.0, sm_clock_mhz=1980.0)
    first = res.load_results(encode(doc))
    meta = dict(first.meta)
    res.dump_results(tmp_path / "again.json", first.facts, first.records, first.timelines, meta.pop("command"),
                     meta.pop("created"), meta)
    again = res.load_results((tmp_path / "again.json").read_bytes())
    assert again == res.RecordedResults(first.meta, first.facts, first.records, first.timelines, first.phases, ())


def test_files_without_the_optional_fields_load_with_defaults():
    doc = good_doc()
    for rec in doc["records"]:
        for key in ("block_m", "block_n", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "counters", "kernels"):
            rec.pop(key, None)
    loaded = res.load_results(encode(doc))
    assert loaded.records[0]["dram_read_bytes"] is None and loaded.records[0]["counters"] == ""
    assert loaded.records[0]["kernels"] is None and loaded.facts["matmul_tflops"] is None and not loaded.notes


def test_counted_records_load():
    doc = good_doc()
    doc["records"][0].update(dram_read_bytes=10**9, dram_write_bytes=10**8, l2_bytes=5 * 10**9,
                             counters="ncu: dram__bytes_read.sum",
                             kernels=[{"name": "_attn_fwd", "time_ms": 2.0, "dram_read_bytes": 10**9,
                                       "dram_write_bytes": 10**8, "l2_bytes": 5 * 10**9}])
    doc["device"].update(matmul_tflops=750.5, l2_gbps=11000.0, sm_clock_mhz=1980)
    loaded = res.load_results(encode(doc))
    assert loaded.records[0]["kernels"][0]["name"] == "_attn_fwd" and loaded.records[0]["l2_bytes"] == 5 * 10**9
    assert loaded.facts["sm_clock_mhz"] == 1980.0 and not loaded.notes


@pytest.mark.parametrize("key,value,words", [
    ("dram_read_bytes", -5, "dram_read_bytes = -5 is outside 0"),
    ("dram_write_bytes", "lots", "is not a number"),
    ("l2_bytes", 10**30, "is outside"),
    ("block_m", 0, "block_m = 0 is outside"),
    ("counters", 17, "counters = 17 is not text"),
    ("kernels", "all of them", "is not a list"),
    ("kernels", [{"name": "k", "time_ms": -1.0}], "time_ms = -1.0 that is outside"),
    ("kernels", [{"name": "k"}] * 100, "more than 64"),
    ("kernels", [7], "not {name"),
])
def test_bad_optional_record_values_are_dropped_with_a_note(key, value, words):
    doc = good_doc()
    for rec in doc["records"]:
        rec[key] = value
    loaded = res.load_results(encode(doc))
    default = "" if key == "counters" else None
    assert all(r[key] == default for r in loaded.records)
    assert len(loaded.notes) == 1 and words in loaded.notes[0] and "(and 1 more)" in loaded.notes[0]
    assert "ignored" in loaded.notes[0]
    if key not in ("block_m",):
        assert "cost model" in loaded.notes[0]


@pytest.mark.parametrize("key,value", [("matmul_tflops", -1.0), ("l2_gbps", "fast"), ("sm_clock_mhz", 1e300),
                                       ("python", 3.12), ("copy_sizes_bytes", [0]), ("copy_sizes_bytes", 4096),
                                       ("matmul_sizes", []), ("matmul_sizes", [8192, True]),
                                       ("matmul_sizes", list(range(64, 64 * 20, 64)))])
def test_bad_optional_device_facts_are_dropped_with_a_note(key, value):
    doc = good_doc()
    doc["device"][key] = value
    loaded = res.load_results(encode(doc))
    assert loaded.facts[key] is None and len(loaded.notes) == 1 and key in loaded.notes[0]


def test_dump_refuses_to_write_values_the_loader_would_drop(tmp_path):
    doc = good_doc()
    doc["records"][0]["dram_read_bytes"] = -1
    with pytest.raises(res.ResultsError, match="dram_read_bytes"):
        res.dump_results(tmp_path / "x.json", doc["device"], doc["records"], [], "cmd", "today")
    assert not (tmp_path / "x.json").exists()


def test_the_sizes_the_roofs_were_measured_at_are_kept():
    doc = good_doc()
    doc["device"].update(copy_sizes_bytes=[1 << 30, 4 << 30], matmul_sizes=[4096, 16384])
    loaded = res.load_results(encode(doc))
    assert loaded.facts["copy_sizes_bytes"] == [1 << 30, 4 << 30] and loaded.facts["matmul_sizes"] == [4096, 16384]
    assert not loaded.notes
    shipped = res.load_results("h200.json").facts  # the bench writes them (bench/device.py device_facts)
    assert shipped["copy_sizes_bytes"] and shipped["matmul_sizes"]
