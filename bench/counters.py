"""Counted HBM bytes: DRAM and L2 traffic of every recorded kernel, read from the GPU's hardware counters.

    python -m bench.counters --results results/h200.json

Nsight Compute (`ncu`) runs this module again in `--replay` mode as its target: that process runs each
successful record's setting once more, between two marker launches whose grid encodes the record's
index (`_range_marker`, grid (index + 1, 1) before and (index + 1, 2) after), inside an NVTX range
"count" so that ncu profiles only those launches (not the inputs' creation or the warm-up). ncu
flushes the caches before each kernel (`--cache-control all`) and leaves the clocks alone
(`--clock-control none`). Back here the CSV is split at the markers, summed per record and written
into the results file's optional fields (dram_read_bytes, dram_write_bytes, l2_bytes, kernels,
counters). Why ncu and not CUPTI's range profiler in process: ncu ships with the CUDA toolkit on the
GPU machine and needs no extra Python package; it replays each kernel in isolation, so the counts of
one kernel never include its neighbours'.

Where counting cannot happen (no ncu, counters forbidden by the driver, a setting that fails under
the profiler), each record's `counters` says why and the app shows the cost model, labelled "model".
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "gpu__time_duration.sum")
NCU_CANDIDATES = ("ncu", "/usr/local/cuda/bin/ncu")
MARKER = "_range_marker"
NVTX_RANGE = "count"
JOB_FIELDS = ("algorithm", "seq_len", "batch", "heads", "head_dim", "dtype", "causal", "kv_len", "kv_heads", "pass")


def setting_of(job: dict):
    """The bench's setting of a record (or of the replay's job made from one)."""
    from bench.measure import Setting
    from costmodel import Shape
    return Setting(job["algorithm"], Shape(job["seq_len"], job["batch"], job["heads"], job["head_dim"], job["dtype"],
                                           job["causal"], kv_len=job.get("kv_len"), kv_heads=job.get("kv_heads"),
                                           pass_=job.get("pass") or "prefill"))


def find_ncu() -> str | None:
    for candidate in NCU_CANDIDATES:
        path = shutil.which(candidate)
        if path:
            return path
    return None


# -- the profiled process ---------------------------------------------------------------------------

def _replay(jobs_path: Path) -> int:
    import torch
    import triton

    from bench.measure import inputs, runner

    @triton.jit
    def _range_marker(X):  # does nothing: its grid (record index + 1, 1 or 2) marks where a record starts, ends
        pass

    jobs = json.loads(jobs_path.read_text())
    dummy = torch.empty(1, device="cuda")
    for job in jobs:
        setting = setting_of(job)
        q = k = v = None
        try:
            q, k, v = inputs(setting, seed=0)
            run = runner(setting, q, k, v)
            run()  # compile and warm up outside the counted range
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(NVTX_RANGE)
            _range_marker[(job["index"] + 1, 1)](dummy)
            run()
            _range_marker[(job["index"] + 1, 2)](dummy)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        except Exception as exc:  # one failing setting must not lose the others' counts
            print(f"counters: record {job['index']} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            del q, k, v
            torch.cuda.empty_cache()
    return 0


# -- reading ncu's CSV ------------------------------------------------------------------------------

def _number(text: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        return None


def _grid(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def parse_ncu_csv(text: str) -> dict[int, list[dict]]:
    """Kernels ncu profiled between each record's markers: {record index: [{name, metrics…}]}.

    ncu's raw CSV page has a header row, maybe a units row, then one row per profiled kernel."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    per_record: dict[int, list[dict]] = {}
    current = None
    for row in rows:
        name = row.get("Kernel Name", "")
        if not row.get("ID", "").strip().isdigit():
            continue  # the units row
        if name.startswith(MARKER):
            grid = _grid(row.get("Grid Size", ""))
            if len(grid) >= 2 and grid[1] == 1:
                current = grid[0] - 1
                per_record[current] = []
            else:
                current = None
            continue
        if current is None:
            continue
        per_record[current].append({"name": name, **{metric: _number(row.get(metric, "")) for metric in METRICS}})
    return per_record


def _short_name(kernel: str) -> str:
    return re.sub(r"\(.*", "", kernel).strip()[:80]


def _count(value: float | None) -> int | None:
    return None if value is None else int(value)


def counted_fields(kernels: list[dict]) -> dict:
    """The record's optional counter fields from the kernels counted for it."""
    def total(metric: str) -> int | None:
        values = [k[metric] for k in kernels]
        return int(sum(values)) if values and all(v is not None for v in values) else None

    return {
        "dram_read_bytes": total("dram__bytes_read.sum"),
        "dram_write_bytes": total("dram__bytes_write.sum"),
        "l2_bytes": total("lts__t_bytes.sum"),
        "kernels": [{"name": _short_name(k["name"]),
                     "time_ms": k["gpu__time_duration.sum"] / 1e6 if k["gpu__time_duration.sum"] else None,
                     # a metric ncu did not give is unknown (None), never 0 bytes
                     "dram_read_bytes": _count(k["dram__bytes_read.sum"]),
                     "dram_write_bytes": _count(k["dram__bytes_write.sum"]),
                     "l2_bytes": _count(k["lts__t_bytes.sum"])} for k in kernels],
    }


# -- the driver ---------------------------------------------------------------------------------------

def _ncu_version(ncu: str) -> str:
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"Version\s+([\w.\-()]+)", out)
    return match.group(1) if match else "unknown version"


def count(results_path: Path, max_seq_len: int | None = None, timeout_s: float = 1800,
          keep_csv: Path | None = None, only_missing: bool = False) -> int:
    from bench.results import dump_results, parse_results

    loaded = parse_results(results_path.read_bytes(), str(results_path))
    records = [dict(r) for r in loaded.records]
    ncu = find_ncu()
    jobs = [{"index": i, **{key: r[key] for key in JOB_FIELDS if r.get(key) is not None}}
            for i, r in enumerate(records)
            if r["status"] == "ok" and r["timing_kind"] == "cuda" and (not max_seq_len or r["seq_len"] <= max_seq_len)
            and not (only_missing and r.get("dram_read_bytes") is not None)
            and r.get("config") is None]  # an ablation step (bench --ladder) runs a config the replay does not
    why_not = ""
    counts: dict[int, list[dict]] = {}
    if ncu is None:
        why_not = "not counted: Nsight Compute (ncu) is not installed on this machine"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            jobs_path, log_path = Path(tmp) / "jobs.json", Path(tmp) / "ncu.csv"
            jobs_path.write_text(json.dumps(jobs))
            command = [ncu, "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
                       "--clock-control", "none", "--cache-control", "all", "--nvtx", "--nvtx-include",
                       f"{NVTX_RANGE}/", "--log-file", str(log_path),
                       sys.executable, "-m", "bench.counters", "--replay", str(jobs_path)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
            text = log_path.read_text() if log_path.exists() else ""
            if keep_csv:
                keep_csv.write_text(text)
            counts = parse_ncu_csv(text)
            if not counts:
                problem = (done.stderr + text)[-400:].strip().replace("\n", " ")
                why_not = f"not counted: ncu returned no counts ({problem or f'exit {done.returncode}'})"
        version = _ncu_version(ncu)
    for job in jobs:
        record = records[job["index"]]
        kernels = counts.get(job["index"])
        if kernels:
            record.update(counted_fields(kernels))
            record["counters"] = (f"counted by Nsight Compute {version}: {', '.join(METRICS[:3])} over "
                                  f"{len(kernels)} kernel{'s' if len(kernels) > 1 else ''}, one run, caches flushed")
        else:
            record["counters"] = why_not or "not counted: the setting failed under the profiler"
    counted = sum(1 for job in jobs if counts.get(job["index"]))
    meta = dict(loaded.meta)
    meta["counters_command"] = "python -m bench.counters " + " ".join(sys.argv[1:])
    dump_results(results_path, loaded.facts, records, loaded.timelines, meta.pop("command"), meta.pop("created"),
                 meta, loaded.phases)
    print(f"counted {counted} of {len(jobs)} records; wrote {results_path}")
    return 0 if counted else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.counters", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, help="a results file written by `python -m bench`")
    parser.add_argument("--max-seq-len", type=int, default=None, help="count only records up to this length")
    parser.add_argument("--keep-csv", type=Path, default=None, help="also save ncu's raw CSV here")
    parser.add_argument("--only-missing", action="store_true",
                        help="count only the records that have no counts yet (records merged in by bench --merge-into)")
    parser.add_argument("--replay", type=Path, help=argparse.SUPPRESS)  # ncu's target process
    args = parser.parse_args(argv)
    if args.replay:
        return _replay(args.replay)
    if not args.results:
        parser.error("--results is required")
    return count(args.results, args.max_seq_len, keep_csv=args.keep_csv, only_missing=args.only_missing)


if __name__ == "__main__":
    sys.exit(main())
