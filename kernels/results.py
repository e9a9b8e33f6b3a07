"""Recorded benchmark files: written by `python -m kernels.bench`, read (and validated) by the app.

A results file is JSON with a versioned schema. The loader rejects a corrupt, foreign, oversized or
inconsistent file with a `ResultsError` that says what is wrong; it never opens a path a user typed:
files are chosen from results/ by bare name, or passed as bytes (an upload).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from kernels.record import ALGORITHMS, RECORD_FIELDS, REQUIRED_RECORD_FIELDS, STATUSES, Record

SCHEMA = "flash-live-results"
SCHEMA_VERSION = 1
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
MAX_FILE_BYTES = 20 << 20
FACT_FIELDS = ("name", "sm_count", "smem_per_sm_bytes", "smem_per_block_bytes", "l2_bytes", "hbm_bytes",
               "copy_gbps", "compute_capability", "driver", "torch", "triton")
META_FIELDS = ("created", "command")
TIMELINE_ARRAYS = ("sm_id", "t_start_ns", "t_end_ns", "q_block", "bh")
TIMELINE_FIELDS = ("sm_count", "seq_len", "heads", "batch", "head_dim", "block_m", "causal")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}\.json$")
_RECORD_TYPES = {
    "algorithm": str, "seq_len": int, "batch": int, "heads": int, "head_dim": int, "dtype": str, "causal": bool,
    "status": str, "time_ms": float, "time_ms_p20": float, "time_ms_p80": float, "tflops": float, "gbps": float,
    "bytes_moved": int, "peak_extra_bytes": int, "needed_bytes": int, "message": str, "device": str,
    "timing_kind": str, "block_m": int, "block_n": int, "dram_read_bytes": int, "dram_write_bytes": int,
    "l2_bytes": int, "counters": str, "kernels": list,
}
_OPTIONAL = {"time_ms", "time_ms_p20", "time_ms_p80", "tflops", "gbps", "peak_extra_bytes", "needed_bytes",
             "block_m", "block_n", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "kernels"}
_DEFAULTS = {f.name: f.default for f in fields(Record) if f.name not in REQUIRED_RECORD_FIELDS}  # older files lack them


class ResultsError(ValueError):
    """A results file that cannot be used, with the reason."""


@dataclass(frozen=True)
class RecordedResults:
    meta: dict
    facts: dict
    records: list[dict]
    timelines: list[dict] = field(default_factory=list)
    name: str = ""


def list_result_files() -> list[str]:
    """Names of the results files shipped in results/."""
    return sorted(p.name for p in RESULTS_DIR.glob("*.json") if _NAME.match(p.name))


def load_results(source: str | bytes) -> RecordedResults:
    """Load a results file by its bare name in results/ (e.g. "h200.json"), or from uploaded bytes."""
    if isinstance(source, (bytes, bytearray)):
        raw, name = bytes(source), "uploaded file"
    elif isinstance(source, str):
        if not _NAME.match(source):
            raise ResultsError(f"{source!r} is not a results file name: give a bare name like 'h200.json'")
        path = RESULTS_DIR / source
        if not path.is_file():
            raise ResultsError(f"no results file {source!r} in results/ (have: {', '.join(list_result_files()) or 'none'})")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ResultsError(f"{source} is {path.stat().st_size} bytes, above the {MAX_FILE_BYTES} byte limit")
        raw, name = path.read_bytes(), source
    else:
        raise ResultsError(f"load_results takes a file name or bytes, got {type(source).__name__}")
    if len(raw) > MAX_FILE_BYTES:
        raise ResultsError(f"{name} is {len(raw)} bytes, above the {MAX_FILE_BYTES} byte limit")
    return parse_results(raw, name)


def _reject_constant(token: str):
    raise ResultsError(f"the file holds {token}, which is not a number a measurement can have")


def parse_results(raw: bytes, name: str = "results") -> RecordedResults:
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{name} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ResultsError(f"{name} is not a FlashAttention-live results file (no \"schema\": \"{SCHEMA}\")")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(f"{name} has schema version {doc.get('schema_version')!r}; this app reads version "
                           f"{SCHEMA_VERSION}: re-run `python -m kernels.bench`")
    meta = _section(doc, "meta", META_FIELDS, name)
    facts = _section(doc, "device", FACT_FIELDS, name)
    records = doc.get("records")
    if not isinstance(records, list) or not records:
        raise ResultsError(f"{name} has no records")
    checked = [_check_record(r, i, name) for i, r in enumerate(records)]
    timelines = doc.get("timelines", [])
    if not isinstance(timelines, list):
        raise ResultsError(f"{name}: \"timelines\" must be a list")
    return RecordedResults(meta, facts, checked, [_check_timeline(t, i, name) for i, t in enumerate(timelines)],
                           name)


def _section(doc: dict, key: str, required: tuple[str, ...], name: str) -> dict:
    section = doc.get(key)
    if not isinstance(section, dict):
        raise ResultsError(f"{name} is missing its \"{key}\" section")
    missing = [f for f in required if f not in section]
    if missing:
        raise ResultsError(f"{name}: \"{key}\" is missing {', '.join(missing)}")
    return section


def _check_record(rec, index: int, name: str) -> dict:
    where = f"{name}: record {index}"
    if not isinstance(rec, dict):
        raise ResultsError(f"{where} is not an object")
    missing = [f for f in REQUIRED_RECORD_FIELDS if f not in rec]
    if missing:
        raise ResultsError(f"{where} is missing {', '.join(missing)}")
    rec = {**_DEFAULTS, **rec}
    for key, kind in _RECORD_TYPES.items():
        value = rec[key]
        if value is None and key in _OPTIONAL:
            continue
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok:
            raise ResultsError(f"{where}: {key} = {value!r} is not a valid {kind.__name__}")
    if rec["algorithm"] not in ALGORITHMS:
        raise ResultsError(f"{where}: unknown algorithm {rec['algorithm']!r}")
    if rec["status"] not in STATUSES:
        raise ResultsError(f"{where}: unknown status {rec['status']!r}")
    if rec["status"] == "ok" and rec["time_ms"] is None:
        raise ResultsError(f"{where}: status ok but no time")
    if min(rec["seq_len"], rec["batch"], rec["heads"], rec["head_dim"]) < 1:
        raise ResultsError(f"{where}: sizes must be positive")
    return {key: rec[key] for key in RECORD_FIELDS}


def _check_timeline(tl, index: int, name: str) -> dict:
    where = f"{name}: timeline {index}"
    if not isinstance(tl, dict):
        raise ResultsError(f"{where} is not an object")
    missing = [f for f in TIMELINE_FIELDS + TIMELINE_ARRAYS if f not in tl]
    if missing:
        raise ResultsError(f"{where} is missing {', '.join(missing)}")
    lengths = {len(tl[a]) if isinstance(tl[a], list) else -1 for a in TIMELINE_ARRAYS}
    if len(lengths) != 1 or -1 in lengths:
        raise ResultsError(f"{where}: arrays {TIMELINE_ARRAYS} must be lists of one length")
    if not all(isinstance(x, int) and not isinstance(x, bool) for a in TIMELINE_ARRAYS for x in tl[a]):
        raise ResultsError(f"{where}: array entries must be integers")
    return tl


def dump_results(path: Path, facts: dict, records: list[dict], timelines: list[dict], command: str,
                 created: str, extra_meta: dict | None = None) -> None:
    doc = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
           "meta": {"created": created, "command": command, **(extra_meta or {})},
           "device": facts, "records": records, "timelines": timelines}
    text = json.dumps(doc, indent=1, allow_nan=False)
    parse_results(text.encode(), str(path))  # never write a file the app would refuse
    path.write_text(text)
