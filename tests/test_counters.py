"""bench.counters: reading Nsight Compute's raw CSV into per-record counts (the format seen on the H200)."""
from bench.counters import MARKER, counted_fields, parse_ncu_csv

HEADER = ('"ID","Process ID","Kernel Name","Grid Size","dram__bytes_read.sum","dram__bytes_write.sum",'
          '"lts__t_bytes.sum","gpu__time_duration.sum"')
UNITS = '"","","","","byte","byte","byte","ns"'


def row(index: int, name: str, grid: str, read: str, write: str, l2: str, ns: str) -> str:
    return f'"{index}","567","{name}","{grid}","{read}","{write}","{l2}","{ns}"'


def test_kernels_between_markers_belong_to_their_record():
    text = "\n".join([
        "==PROF== Connected to process 567",
        HEADER, UNITS,
        row(0, MARKER, "(1, 1, 1)", "2,560", "0", "123,424", "1,632"),
        row(1, "_scores_kernel", "(64, 64, 32)", "1,000", "2,000", "9,000", "10,000"),
        row(2, "_softmax_kernel", "(8192, 1, 1)", "3,000", "4,000", "9,000", "20,000"),
        row(3, MARKER, "(1, 2, 1)", "2,560", "0", "46,336", "1,376"),
        row(4, "stray_kernel_outside_markers", "(1, 1, 1)", "9", "9", "9", "9"),
        row(5, MARKER, "(4, 1, 1)", "2,560", "0", "46,336", "1,376"),
        row(6, "_attn_fwd", "(8, 32, 1)", "25,196,288", "7,424", "96,087,040", "47,104"),
        row(7, MARKER, "(4, 2, 1)", "2,560", "0", "46,336", "1,376"),
    ])
    counts = parse_ncu_csv(text)
    assert sorted(counts) == [0, 3]
    assert [k["name"] for k in counts[0]] == ["_scores_kernel", "_softmax_kernel"]
    fields = counted_fields(counts[0])
    assert (fields["dram_read_bytes"], fields["dram_write_bytes"], fields["l2_bytes"]) == (4000, 6000, 18000)
    assert [k["time_ms"] for k in fields["kernels"]] == [0.01, 0.02]
    flash = counted_fields(counts[3])
    assert flash["dram_read_bytes"] == 25_196_288 and flash["kernels"][0]["name"] == "_attn_fwd"


def test_a_missing_metric_gives_no_total():
    text = "\n".join([HEADER, UNITS, row(0, MARKER, "(1, 1, 1)", "0", "0", "0", "0"),
                      row(1, "k", "(1, 1, 1)", "n/a", "10", "10", "10"), row(2, MARKER, "(1, 2, 1)", "0", "0", "0", "0")])
    fields = counted_fields(parse_ncu_csv(text)[0])
    assert fields["dram_read_bytes"] is None and fields["dram_write_bytes"] == 10


def test_the_replay_builds_each_records_setting():
    """The ncu replay (GPU only) turns each record into the bench's setting: every shipped record's fields do."""
    import json
    from pathlib import Path
    from bench import counters
    from bench.results import parse_results
    path = Path(__file__).resolve().parents[1] / "results" / "h200.json"
    records = parse_results(path.read_bytes(), str(path)).records
    for r in records[:50]:
        job = json.loads(json.dumps({key: r[key] for key in counters.JOB_FIELDS if r.get(key) is not None}))
        setting = counters.setting_of(job)
        assert (setting.algorithm, setting.shape.seq_len, setting.shape.causal) == (r["algorithm"], r["seq_len"],
                                                                                   r["causal"])
