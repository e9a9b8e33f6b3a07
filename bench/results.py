"""Recorded benchmark files: written by `python -m bench`, read (and validated) by the app.

A results file is JSON with a versioned schema (docs/data-contracts.md). This module is the one place its
numbers are checked: types, signs, finiteness and plausible bounds for records, device facts and SM
timelines, and a status consistent with the times. Scenes draw what comes out of here without checking again.

- A bad required value (a time, a size, a device fact the page draws) refuses the file with a `ResultsError`
  that says where and what.
- A bad optional value (hardware counts, tiles, the newer device facts) is dropped to None with a note: the
  file still loads and the page falls back to the cost model, saying so.
- Text is cleaned: control and formatting characters removed, length capped. (Showing it as text, not as
  markdown or HTML, is the page's job: see fmt.py.)
- Unknown keys are dropped, so nothing unchecked reaches a scene.

It never opens a path a user typed: files are chosen from results/ by bare name, or passed as bytes (an upload).
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import costmodel
from costmodel import DECODE_KV_LENS, DTYPE_BYTES, ELEMENT_BYTES, FP8_DTYPE, SEQ_LENS, Shape
from bench.record import OPTIONAL_RECORD_FIELDS, RECORD_FIELDS
from bench.schema import (  # noqa: F401 - the schema's names, read through this module too (results.RECORD_SCHEMA)
    FACT_SCHEMA, KERNEL_SCHEMA, MAX_BYTES, MAX_DEPTH, MAX_KERNELS, MAX_PROGRAMS, MAX_RATIO_ROWS, MAX_TEXT,
    MAX_RING_RUNS, MAX_TIMESTAMP_NS, META_SCHEMA, PROVENANCE_FALLBACK, PROVENANCE_SCHEMA, RECORD_SCHEMA, RING_REQUIRED,
    RING_SCHEMA, REQUIRED_FACTS, TIMELINE_ARRAYS, TIMELINE_SCHEMA, _BOOL, _COUNTERS,
    _FACT_FALLBACK, _TIME, _Bad, _Field, _Notes, _checked, _float, _int, _proton_kernels, _short, _text, plain_text)
from kernels import specs

SCHEMA = "flash-live-results"
# 3: the kernels' one vocabulary ("fa2", "fa1", "fa3": files of 1 and 2 say "flash", "flash_v1", "flash_v3", read as
# these) and the shape's K/V length and heads, the pass, a decode's page size and splits; 2 added "phases" (what each
# warpgroup of one launch did, Proton). 4: records and phases may name an ablation step ("config", bench --ladder):
# an app of version 3 would read such a record as the shipped kernel's. Backward records (pass "backward", a value
# version 3 already named) with their optional fwd_bwd_ms need no new version: an app of version 4 ignores the field,
# and keeps records of another pass apart by their pass. 5: records may be FP8 (dtype float8_e4m3fn, bench --fp8) with
# their scaling, rotation and errors against float64: an app of version 4 refuses their dtype. 1, 2, 3 and 4 still read.
SCHEMA_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
MAX_FILE_BYTES = 20 << 20
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}\.json$")


class ResultsError(ValueError):
    """A results file that cannot be used, with the reason."""


@dataclass(frozen=True)
class RecordedResults:
    meta: dict
    facts: dict
    records: list[dict]
    timelines: list[dict] = field(default_factory=list)
    phases: list[dict] = field(default_factory=list)  # schema 2: per kernel, one launch's warpgroups over time
    notes: tuple[str, ...] = ()  # optional values that were dropped, one line each
    ring: list[dict] = field(default_factory=list)  # ring-attention runs over several GPUs (bench.ring)


# -- reading ------------------------------------------------------------------------------------------

def list_result_files() -> list[str]:
    """Names of the results files shipped in results/."""
    return sorted(p.name for p in RESULTS_DIR.glob("*.json") if _NAME.match(p.name))


def load_results(source: str | bytes) -> RecordedResults:
    """Load a results file by its bare name in results/ (e.g. "h200.json"), or from uploaded bytes."""
    if isinstance(source, (bytes, bytearray)):
        raw, name = bytes(source), "uploaded file"
    elif isinstance(source, str):
        if not _NAME.match(source):
            raise ResultsError(f"{source[:60]!r} is not a results file name: give a bare name like 'h200.json'")
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


def load_results_path(path: Path) -> RecordedResults:
    """A results file at a path the bench itself was given (its --out): never a path a viewer typed."""
    raw = Path(path).read_bytes()
    if len(raw) > MAX_FILE_BYTES:
        raise ResultsError(f"{path} is {len(raw)} bytes, above the {MAX_FILE_BYTES} byte limit")
    return parse_results(raw, str(path))


def _reject_constant(token: str):
    raise ResultsError(f"the file holds {token}, which is not a number a measurement can have")


def _depth_within(doc, limit: int) -> bool:
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return False
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


def parse_results(raw: bytes, name: str = "results") -> RecordedResults:
    if len(raw) > MAX_FILE_BYTES:
        raise ResultsError(f"{name} is {len(raw)} bytes, above the {MAX_FILE_BYTES} byte limit")
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{name} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise ResultsError(f"{name} is nested too deeply to be a results file") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise ResultsError(f"{name} is not a results file: {str(exc)[:120]}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ResultsError(f"{name} is not a FlashAttention-live results file (no \"schema\": \"{SCHEMA}\")")
    version = doc.get("schema_version")
    if type(version) is not int or version not in READABLE_VERSIONS:  # not true (== 1) or 2.0 (== 2): a version
        raise ResultsError(f"{name} has schema version {_short(version)}; this app reads "
                           f"version {SCHEMA_VERSION}: re-run `python -m bench`")
    if not _depth_within(doc, MAX_DEPTH):
        raise ResultsError(f"{name} is nested deeper than a results file ({MAX_DEPTH} levels)")
    notes = _Notes(name)
    meta = _object(doc.get("meta"), META_SCHEMA, ("created", "command"), f"{name}: \"meta\"", notes,
                   lambda key: "it is not shown")
    if meta["ratios"] is not None:
        try:
            meta["ratios"] = _check_ratios(meta["ratios"])
        except _Bad as why:
            notes.drop("ratios", "\"meta\"", doc["meta"]["ratios"], str(why), "it is not shown")
            meta["ratios"] = None
    meta = {key: value for key, value in meta.items() if value is not None}
    facts = _object(doc.get("device"), FACT_SCHEMA, REQUIRED_FACTS, f"{name}: \"device\"", notes,
                    lambda key: _FACT_FALLBACK.get(key, "it is not shown"))
    records = doc.get("records")
    if not isinstance(records, list) or not records:
        raise ResultsError(f"{name} has no records")
    _check_facts(facts, f"{name}: \"device\"")
    checked = [_check_record(r, f"{name}: record {i}", notes) for i, r in enumerate(records)]
    for i, record in enumerate(checked):
        _check_plausible(record, facts, f"{name}: record {i}", notes)
    checked = _one_record_per_setting(checked, name)
    _say_what_the_slider_misses(checked, name, notes)
    timelines = doc.get("timelines", [])
    if not isinstance(timelines, list):
        raise ResultsError(f"{name}: \"timelines\" must be a list")
    lines = [_check_timeline(t, f"{name}: timeline {i}", notes) for i, t in enumerate(timelines)]
    phases = doc.get("phases", [])
    if not isinstance(phases, list) or len(phases) > MAX_PHASE_RECORDINGS:
        raise ResultsError(f"{name}: \"phases\" must be a list of at most {MAX_PHASE_RECORDINGS} recordings")
    recorded_phases = [_check_phases(p, f"{name}: phases {i}", notes) for i, p in enumerate(phases)]
    ring = doc.get("ring", [])
    if not isinstance(ring, list) or len(ring) > MAX_RING_RUNS:
        raise ResultsError(f"{name}: \"ring\" must be a list of at most {MAX_RING_RUNS} runs")
    runs = [_check_ring(r, f"{name}: ring run {i}", notes) for i, r in enumerate(ring)]
    return RecordedResults(meta, facts, checked, lines, recorded_phases, notes.lines(), runs)


def _object(obj, schema: dict[str, _Field], required, where: str, notes: _Notes, fallback=None) -> dict:
    """The known fields of one JSON object, checked; required ones refuse the file, optional ones are noted."""
    if not isinstance(obj, dict):
        raise ResultsError(f"{where} is missing or not an object")
    missing = [key for key in required if key not in obj]
    if missing:
        raise ResultsError(f"{where} is missing {', '.join(missing)}")
    out = {}
    for key, spec in schema.items():
        if key not in obj:  # an optional field older files lack
            out[key] = None
            continue
        value = obj[key]
        try:
            out[key] = _checked(spec, value)
        except _Bad as why:
            if key in required:
                raise ResultsError(f"{where}: {key} = {_short(value)} {why}") from None
            out[key] = None
            notes.drop(key, where.split(": ", 1)[-1], value, str(why), fallback(key))
    return out


# -- what the numbers must be, against each other and against the file's own GPU ------------------------------
# A schema-valid value can still be absurd: a time that makes 10⁹ TFLOPS, one byte counted for a kernel that
# must read its inputs, a GPU with 1 byte of shared memory. These checks compare fields with each other and with
# the device facts of the same file, so what a scene draws is physically possible on that GPU.

PLAUSIBLE_COMPUTE_FACTOR = 1.25   # a kernel's TFLOPS over the file's own measured matmul roof: at most this
NO_ROOF_MAX_TFLOPS = 3000.0       # without a measured roof: more than any GPU's dense 16-bit rate today
PLAUSIBLE_DRAM_FACTOR = 1.25      # counted DRAM bytes per second over the file's measured copy bandwidth
PLAUSIBLE_MODEL_FACTOR = 3.0      # the cost model's bytes per second over the copy bandwidth (the model may overcount)
MIN_COUNTED_SHARE = 0.5           # counted bytes below this share of Q, K, V read once and O written once: a bad count
MIN_SMEM_BYTES = 16 << 10         # every CUDA GPU gives a block at least 48 KiB
MIN_L2_BYTES = 256 << 10
MIN_HBM_BYTES = 1 << 30
MAX_TIMELINE_NS = 3600 * 10**9    # one launch recorded over more than an hour is not a launch
_TOLERANCE = 0.01                 # a derived number may differ from the recorded one by 1 % (rounding)


def _check_facts(facts: dict, where: str) -> None:
    if not facts["name"].strip():
        raise ResultsError(f"{where}: name is empty: the file must say which GPU measured it")
    lows = {"smem_per_block_bytes": MIN_SMEM_BYTES, "smem_per_sm_bytes": MIN_SMEM_BYTES,
            "l2_bytes": MIN_L2_BYTES, "hbm_bytes": MIN_HBM_BYTES}
    for key, low in lows.items():
        if facts.get(key) is not None and facts[key] < low:
            raise ResultsError(f"{where}: {key} = {facts[key]} is below {low} bytes, less than any CUDA GPU has")
    if (facts.get("smem_per_block_bytes") and facts.get("smem_per_sm_bytes")
            and facts["smem_per_block_bytes"] > facts["smem_per_sm_bytes"]):
        raise ResultsError(f"{where}: smem_per_block_bytes = {facts['smem_per_block_bytes']} is more than the "
                           f"SM has (smem_per_sm_bytes = {facts['smem_per_sm_bytes']})")


def _near(recorded: float, derived: float) -> bool:
    return abs(recorded - derived) <= _TOLERANCE * abs(derived)


def _check_plausible(record: dict, facts: dict, where: str, notes: _Notes) -> None:
    """Cross-field and physical checks of one record (numbers a GPU can produce); refuses the file, naming the
    field, when a required number is impossible; drops an optional one (tiles, counts) with a note."""
    e = ELEMENT_BYTES[record["dtype"]]
    _check_tiles_in(record, facts, where, notes, e)
    if record["status"] != "ok":
        return
    seconds = record["time_ms"] * 1e-3
    flops = costmodel.pass_flops(Shape.of_record(record))  # a backward's: 2.5 × the forward's
    if record["timing_kind"] == "cuda":
        derived = flops / seconds / 1e12
        if record["tflops"] is None or not _near(record["tflops"], derived):
            raise ResultsError(f"{where}: tflops = {_short(record['tflops'])} does not match its time "
                               f"({record['time_ms']:g} ms for {flops:.3g} FLOPs is {derived:,.1f} TFLOPS)")
        roof = facts.get("matmul_tflops")
        limit = PLAUSIBLE_COMPUTE_FACTOR * roof if roof else NO_ROOF_MAX_TFLOPS
        if record["dtype"] == FP8_DTYPE:  # the roofs are 16-bit; Hopper's tensor cores run e4m3 at twice the rate
            limit *= 2
        if derived > limit:
            raise ResultsError(f"{where}: time_ms = {record['time_ms']:g} ms makes {derived:,.0f} TFLOPS, more than "
                               f"{facts['name']} can do ({'its measured matmul roof is ' + format(roof, ',.0f') if roof else 'no GPU does ' + format(limit, ',.0f')} TFLOPS)")
        moved = record["bytes_moved"] / seconds / 1e9
        if record["gbps"] is None or not _near(record["gbps"], moved):
            raise ResultsError(f"{where}: gbps = {_short(record['gbps'])} does not match bytes_moved / time_ms "
                               f"({moved:,.0f} GB/s)")
        if moved > PLAUSIBLE_MODEL_FACTOR * facts["copy_gbps"]:
            raise ResultsError(f"{where}: bytes_moved / time_ms is {moved:,.0f} GB/s, more than "
                               f"{PLAUSIBLE_MODEL_FACTOR:g}× the GPU's copy bandwidth ({facts['copy_gbps']:,.0f} GB/s)")
    elif record["tflops"] is not None or record["gbps"] is not None:
        raise ResultsError(f"{where}: an interpreter time (CPU wall time) cannot give tflops or gbps")
    _check_counts(record, facts, where, notes, seconds, e)


def _check_tiles_in(record: dict, facts: dict, where: str, notes: _Notes, e: int) -> None:
    """Tiles the cost model takes (specs.check_tiles: the rule the record's own kernel applies), and
    that fit the GPU."""
    tiles = (record["block_m"], record["block_n"])
    if None in tiles:  # one side alone says nothing (a side the schema dropped has its note already)
        record["block_m"] = record["block_n"] = None
        return
    why = None
    try:
        specs.check_tiles(record["algorithm"], *tiles)
    except ValueError as error:
        why = str(error)
    limit = facts.get("smem_per_block_bytes")
    if why is None and limit and costmodel.smem_bytes(*tiles, record["head_dim"], e, num_stages=1) > limit:
        why = f"need more shared memory than {facts['name']} gives a block ({limit} bytes)"
    if why:
        for key in ("block_m", "block_n"):
            notes.drop(key, where.split(": ", 1)[-1], record[key], why, _counter_fallback(key))
        record["block_m"] = record["block_n"] = None


def _check_counts(record: dict, facts: dict, where: str, notes: _Notes, seconds: float, e: int) -> None:
    """Counted DRAM bytes: at least about what the kernel must read and write, at most what HBM can move in
    its time; per-kernel counts complete (every kernel's time and bytes) or not used at all."""
    place = where.split(": ", 1)[-1]
    counted = (record["dram_read_bytes"], record["dram_write_bytes"])
    if None not in counted:
        least = 4 * record["batch"] * record["heads"] * record["seq_len"] * record["head_dim"] * e
        rate = sum(counted) / seconds / 1e9 if record["timing_kind"] == "cuda" else 0.0
        why = (f"is less than {MIN_COUNTED_SHARE:.0%} of reading Q, K, V and writing O once ({least} bytes)"
               if sum(counted) < MIN_COUNTED_SHARE * least else
               f"means {rate:,.0f} GB/s from HBM, more than the GPU's copy bandwidth allows"
               if rate > PLAUSIBLE_DRAM_FACTOR * facts["copy_gbps"] else None)
        if why:
            for key in ("dram_read_bytes", "dram_write_bytes"):
                notes.drop(key, place, record[key], why, _counter_fallback(key))
            record["dram_read_bytes"] = record["dram_write_bytes"] = None
    kernels = record["kernels"]
    if kernels and any(k[key] is None for k in kernels for key in ("time_ms", "dram_read_bytes", "dram_write_bytes")):
        notes.drop("kernels", place, "a kernel without its time or bytes", "is incomplete",
                   "the page shows the kernels as a whole")
        record["kernels"] = None


def _one_record_per_setting(records: list[dict], name: str) -> list[dict]:
    """Each (algorithm, shape, dtype, mask) once: an exact repeat is dropped, a conflicting one refuses the file
    (which of two times would a scene show?)."""
    first: dict[tuple, tuple[int, dict]] = {}
    kept = []
    for i, record in enumerate(records):
        shape = Shape.of_record(record)
        key = (record["algorithm"], shape, record.get("page_size"), record.get("config"), record.get("scaling"),
               record.get("rotation"))
        if key in first:
            j, earlier = first[key]
            if earlier != record:
                step = f", step {key[3]!r}" if key[3] else ""
                raise ResultsError(f"{name}: records {j} and {i} measure the same setting ({key[0]}{step}, N = "
                                   f"{shape.seq_len}, batch {shape.batch}, {shape.heads} heads, head_dim "
                                   f"{shape.head_dim}, {shape.dtype}{', causal' if shape.causal else ''}) with "
                                   f"different results")
            continue
        first[key] = (i, record)
        kept.append(record)
    return kept


def _on_the_slider(record: dict) -> bool:
    """The record's length is a stop of its scene's slider: a prefill's N, a decode's cache length."""
    if record.get("pass") == "decode":
        return record["kv_len"] in DECODE_KV_LENS
    return record["seq_len"] in SEQ_LENS


def _say_what_the_slider_misses(records: list[dict], name: str, notes: _Notes) -> None:
    outside = [r for r in records if not _on_the_slider(r)]
    if outside and len(outside) == len(records):
        notes.drop("seq_len", "every record", outside[0]["seq_len"],
                   f"is off the slider's lengths ({', '.join(str(n) for n in (SEQ_LENS[0], SEQ_LENS[-1]))} and the "
                   f"powers of two between)", "the slider's scenes have nothing to show")


def _counter_fallback(key: str) -> str:
    if key in PROVENANCE_FALLBACK:
        return PROVENANCE_FALLBACK[key]
    if key == "fwd_bwd_ms":
        return "the record keeps its backward time alone"
    return ("the page uses the cost model's traffic instead" if key in _COUNTERS
            else "the page uses the tuned tiles instead")


def _check_record(rec, where: str, notes: _Notes) -> dict:
    required = tuple(key for key in RECORD_FIELDS if key not in OPTIONAL_RECORD_FIELDS)
    out = _object(rec, RECORD_SCHEMA, required, where, notes, _counter_fallback)
    _check_config(rec, out, where)
    _check_fwd_bwd(out, where)
    _check_fp8(rec, out, where)
    if out["counters"] is None:
        out["counters"] = ""
    # the shape's newer fields: a record that lacks them (an older file) is a prefill of every query against every key
    out["kv_len"] = out["kv_len"] or out["seq_len"]
    out["kv_heads"] = out["kv_heads"] or out["heads"]
    out["pass"] = out["pass"] or "prefill"
    if out["heads"] % out["kv_heads"]:
        raise ResultsError(f"{where}: heads = {out['heads']} is not a multiple of kv_heads = {out['kv_heads']}")
    if out["kernels"] is not None:
        try:
            out["kernels"] = _check_kernels(out["kernels"])
        except _Bad as why:
            notes.drop("kernels", where.split(": ", 1)[-1], rec["kernels"], str(why), _counter_fallback("kernels"))
            out["kernels"] = None
    timed = [key for key in ("time_ms", "time_ms_p20", "time_ms_p80", "tflops", "gbps") if out[key] is not None]
    if out["status"] == "ok":
        if out["time_ms"] is None:
            raise ResultsError(f"{where}: status ok but no time (time_ms = null)")
        low, high = out["time_ms_p20"], out["time_ms_p80"]
        if low is not None and high is not None and not low * (1 - 1e-9) <= out["time_ms"] <= high * (1 + 1e-9):
            raise ResultsError(f"{where}: the median time {out['time_ms']:g} ms is outside its 20th–80th "
                               f"percentiles {low:g} … {high:g} ms")
    elif timed:
        raise ResultsError(f"{where}: status {out['status']} but {', '.join(timed)} given: only a run that "
                           f"finished (ok) has a time")
    return out


def _check_config(raw: dict, out: dict, where: str) -> None:
    """A record's or a phase recording's ablation step (bench --ladder): text, not empty, or absent. A bad one refuses
    the file: dropped, the record would read as the shipped kernel's at that setting, which it is not."""
    value = raw.get("config")
    if value is None:
        out["config"] = None
        return
    if not isinstance(value, str) or not plain_text(value):
        why = "is empty" if isinstance(value, str) else "is not text"
        raise ResultsError(f"{where}: config = {_short(value)} {why}: a ladder record names its step "
                           f"(e.g. \"FA-2 order (ours)\"), or has no config")
    out["config"] = plain_text(value)


def _check_fwd_bwd(out: dict, where: str) -> None:
    """fwd_bwd_ms (forward + backward) belongs to a finished backward, and is not less than its backward alone
    (time_ms); otherwise the file is refused: which of the two times would the scene trust?"""
    both = out["fwd_bwd_ms"]
    if both is None:
        return
    if (out["pass"] or "prefill") != "backward" or out["status"] != "ok":
        raise ResultsError(f"{where}: fwd_bwd_ms = {both:g} on a record that is not a finished backward (pass "
                           f"{out['pass'] or 'prefill'!r}, status {out['status']!r}): only a backward that ran has "
                           f"a forward + backward time")
    if out["time_ms"] is not None and both < (1 - _TOLERANCE) * out["time_ms"]:
        raise ResultsError(f"{where}: fwd_bwd_ms = {both:g} ms is less than the backward alone (time_ms = "
                           f"{out['time_ms']:g} ms): forward + backward includes the backward")
def _check_fp8(raw: dict, out: dict, where: str) -> None:
    """An e4m3 record (bench --fp8) says its scaling ("tensor" or "head") and whether Q and K were rotated; a bad or
    missing one refuses the file (records of one shape differ only by them). A 16-bit record has neither."""
    fp8 = out["dtype"] == FP8_DTYPE
    scaling, rotation = raw.get("scaling"), raw.get("rotation")
    if fp8 and (scaling not in ("tensor", "head") or not isinstance(rotation, bool)):
        raise ResultsError(f"{where}: an {FP8_DTYPE} record says its scaling (\"tensor\" or \"head\") and rotation "
                           f"(true or false); got scaling = {_short(scaling)}, rotation = {_short(rotation)}")
    if not fp8 and (scaling is not None or rotation is not None):
        raise ResultsError(f"{where}: a {out['dtype']} record has scaling = {_short(scaling)}, rotation = "
                           f"{_short(rotation)}: only {FP8_DTYPE} records are scaled")
    out["scaling"], out["rotation"] = (scaling, rotation) if fp8 else (None, None)


def _check_kernels(kernels: list) -> list[dict]:
    if len(kernels) > MAX_KERNELS:
        raise _Bad(f"lists more than {MAX_KERNELS} kernels")
    out = []
    for entry in kernels:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _Bad("holds an entry that is not {name, time_ms, …}")
        checked = {}
        for key, spec in KERNEL_SCHEMA.items():
            try:
                checked[key] = _checked(spec, entry.get(key))
            except _Bad as why:
                raise _Bad(f"holds {key} = {_short(entry.get(key))} that {why}") from None
        out.append(checked)
    return out


def _check_ratios(rows: list) -> list[dict]:
    """The bench's ratio table (kept for the record, not drawn): flat rows of text, flags and finite numbers."""
    if len(rows) > MAX_RATIO_ROWS or not all(isinstance(row, dict) and len(row) <= 50 for row in rows):
        raise _Bad("is not a list of rows")
    out = []
    for row in rows:
        clean = {}
        for key, value in row.items():
            if isinstance(value, str):
                value = plain_text(value)
            elif not (value is None or isinstance(value, (bool, int)) or
                      (isinstance(value, float) and math.isfinite(value))) or (
                    isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_BYTES):
                raise _Bad(f"holds {key} = {_short(value)}, not a plain value")
            clean[plain_text(str(key), 60)] = value
        out.append(clean)
    return out


def _required_fields(obj: dict, schema: dict[str, _Field], also: tuple[str, ...], where: str) -> dict:
    """Every field of `schema` checked (a bad or missing one refuses the file), after checking that the `also`
    keys are there too (the caller checks those)."""
    missing = [key for key in (*schema, *also) if key not in obj]
    if missing:
        raise ResultsError(f"{where} is missing {', '.join(missing)}")
    out = {}
    for key, spec in schema.items():
        try:
            out[key] = _checked(spec, obj[key])
        except _Bad as why:
            raise ResultsError(f"{where}: {key} = {_short(obj[key])} {why}") from None
    return out


def _provenance(entry: dict, where: str, notes: _Notes) -> dict:
    """An entry's recorded_at and build (optional in every section; a bad one dropped with a note)."""
    return _object(entry, PROVENANCE_SCHEMA, (), where, notes, PROVENANCE_FALLBACK.get)


def _check_timeline(tl, where: str, notes: _Notes) -> dict:
    if not isinstance(tl, dict):
        raise ResultsError(f"{where} is not an object")
    out = _required_fields(tl, TIMELINE_SCHEMA, TIMELINE_ARRAYS, where)
    arrays = [tl[key] for key in TIMELINE_ARRAYS]
    lengths = {len(a) if isinstance(a, list) else -1 for a in arrays}
    if len(lengths) != 1 or -1 in lengths:
        raise ResultsError(f"{where}: arrays {', '.join(TIMELINE_ARRAYS)} must be lists of one length")
    programs = lengths.pop()
    if not 1 <= programs <= MAX_PROGRAMS:
        raise ResultsError(f"{where}: {programs} programs; a timeline holds 1 … {MAX_PROGRAMS}")
    if not all(type(x) is int for a in arrays for x in a):
        raise ResultsError(f"{where}: array entries must be integers")
    q_blocks = -(-out["seq_len"] // out["block_m"])
    bounds = {"sm_id": out["sm_count"] - 1, "t_start_ns": MAX_TIMESTAMP_NS, "t_end_ns": MAX_TIMESTAMP_NS,
              "q_block": q_blocks - 1, "bh": out["batch"] * out["heads"] - 1}
    for key, array in zip(TIMELINE_ARRAYS, arrays):
        low, high = min(array), max(array)
        if low < 0 or high > bounds[key]:
            raise ResultsError(f"{where}: {key} holds {low if low < 0 else high}, outside 0 … {bounds[key]}")
        out[key] = array
    if any(end < start for start, end in zip(tl["t_start_ns"], tl["t_end_ns"])):
        raise ResultsError(f"{where}: a program ends (t_end_ns) before it starts (t_start_ns)")
    span = max(tl["t_end_ns"]) - min(tl["t_start_ns"])
    if span > MAX_TIMELINE_NS:
        raise ResultsError(f"{where}: its programs span {span / 1e9:,.0f} s; one launch takes far less than an hour")
    expected = out["batch"] * out["heads"] * q_blocks
    if programs > expected:
        raise ResultsError(f"{where}: {programs} programs, but batch {out['batch']} × {out['heads']} heads × "
                           f"{q_blocks} Q blocks of {out['block_m']} make only {expected}")
    return {**out, **_provenance(tl, where, notes)}


# -- phases: one launch's warpgroups over time (bench --phases, bench/phases.py) --------------------------------

PHASE_NAMES = ("load", "wait", "qk", "softmax", "pv", "epilogue")
MAX_PHASE_RECORDINGS = 16   # the kernels' (2) and the ablation's steps (bench --ladder --phases)
MAX_PHASE_PROGRAMS = 16
MAX_PHASE_LANES = 16
MAX_PHASE_SPANS = 20_000     # spans of one lane: a 256K-token program has 2 048 K/V tiles × 4 phases
MAX_PHASE_CYCLES = 10**12    # ~8 minutes at 2 GHz: far past any program
PHASE_SCHEMA: dict[str, _Field] = {
    "kernel": _text(choices=_proton_kernels, aliases=specs.aliases), "batch": _int(1, 1 << 16),
    "heads": _int(1, 1 << 12),
    "seq_len": _int(1, 1 << 24), "head_dim": _int(1, 1 << 12), "causal": _BOOL,
    "dtype": _text(choices=tuple(DTYPE_BYTES)), "program_count": _int(1, MAX_PROGRAMS),
    "plain_ms": _TIME, "instrumented_launch_ms": _TIME, "sm_clock_mhz": _float(1e5, unit="MHz"),
    "overhead": _Field(float, -1.0, 100.0, nullable=True), "profiled_output_identical": _BOOL,
}


def _check_phases(rec, where: str, notes: _Notes) -> dict:
    if not isinstance(rec, dict):
        raise ResultsError(f"{where} is not an object")
    out = _required_fields(rec, PHASE_SCHEMA, ("programs",), where)
    _check_config(rec, out, where)  # optional: the ablation step it records (bench --ladder --phases)
    programs = rec["programs"]
    if not isinstance(programs, list) or not 1 <= len(programs) <= MAX_PHASE_PROGRAMS:
        raise ResultsError(f"{where}: programs must be a list of 1 … {MAX_PHASE_PROGRAMS}")
    out["programs"] = [_check_phase_program(p, f"{where}: program {i}") for i, p in enumerate(programs)]
    return {**out, **_provenance(rec, where, notes)}


def _check_phase_program(program, where: str) -> dict:
    if not isinstance(program, dict) or not isinstance(program.get("lanes"), list):
        raise ResultsError(f"{where} is not {{cta, sm, lanes}}")
    for key in ("cta", "sm"):
        if type(program.get(key)) is not int or not 0 <= program[key] < MAX_PROGRAMS:
            raise ResultsError(f"{where}: {key} = {_short(program.get(key))} is not a program or SM index")
    lanes = program["lanes"]
    if not 1 <= len(lanes) <= MAX_PHASE_LANES:
        raise ResultsError(f"{where}: {len(lanes)} lanes; a program records 1 … {MAX_PHASE_LANES}")
    checked = []
    for j, lane in enumerate(lanes):
        if not isinstance(lane, dict) or type(lane.get("warp")) is not int or not 0 <= lane["warp"] < 64:
            raise ResultsError(f"{where}: lane {j} has no warp index")
        role = plain_text(str(lane.get("role", "")), 40)
        spans = lane.get("spans")
        if not isinstance(spans, list) or not 1 <= len(spans) <= MAX_PHASE_SPANS:  # a lane is drawn from its spans
            raise ResultsError(f"{where}: lane {j}: spans must be a list of 1 … {MAX_PHASE_SPANS} "
                               f"[phase, start, end]{'; it is empty' if spans == [] else ''}")
        for span in spans:
            if (not isinstance(span, list) or len(span) != 3 or span[0] not in PHASE_NAMES
                    or not all(type(t) is int for t in span[1:]) or not 0 <= span[1] <= span[2] <= MAX_PHASE_CYCLES):
                raise ResultsError(f"{where}: lane {j} holds a span {_short(span)} that is not [phase, start, end] "
                                   f"with one of {', '.join(PHASE_NAMES)} and 0 ≤ start ≤ end cycles")
        checked.append({"warp": lane["warp"], "role": role, "spans": [list(span) for span in spans]})
    return {"cta": program["cta"], "sm": program["sm"], "lanes": checked}


# -- ring: ring attention over several GPUs (bench.ring, kernels/ring.py) ---------------------------------------

def ring_key(run: dict) -> tuple:
    """What one ring run measured: a later run of the same setting replaces it."""
    return (run["impl"], run["layout"], run["rotate"], run["world_size"], run["seq_len"], run["batch"], run["heads"],
            run["head_dim"], run["dtype"], run["causal"])


def _check_ring(run, where: str, notes: _Notes) -> dict:
    if not isinstance(run, dict):
        raise ResultsError(f"{where} is not an object")
    out = _object(run, RING_SCHEMA, RING_REQUIRED, where, notes,
                  lambda key: PROVENANCE_FALLBACK.get(key, "it is not shown"))
    world = out["world_size"]
    if (out["status"] == "ok") != (out["time_ms"] is not None):
        raise ResultsError(f"{where}: status {out['status']} with time_ms {_short(out['time_ms'])}: a run that "
                           f"finished has a time, one that did not has none")
    if out["seq_len"] % costmodel.ring_chunks(world, out["layout"]):
        raise ResultsError(f"{where}: {out['seq_len']} tokens do not cut into "
                           f"{costmodel.ring_chunks(world, out['layout'])} equal chunks of the {out['layout']} layout")
    for key in ("rank_compute_ms", "rank_wait_ms"):
        values = run.get(key)
        if values is None:
            out[key] = None
        elif (not isinstance(values, list) or len(values) != world
              or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                         and 0 <= v <= 1e7 for v in values)):
            raise ResultsError(f"{where}: {key} must be {world} times in ms, one per rank")
        else:
            out[key] = [float(v) for v in values]
    out["steps"] = _check_ring_steps(run.get("steps"), out, where)
    return out


def _check_ring_steps(steps, run: dict, where: str) -> list[dict]:
    """One forward's trace: for each rank and step, the rank whose K/V it held, when it started (ms after the
    forward began on that rank), how long it computed and then waited for the next K/V, and its blocks."""
    if steps is None or steps == []:
        return []
    world, chunks = run["world_size"], costmodel.ring_chunks(run["world_size"], run["layout"])
    if not isinstance(steps, list) or len(steps) != world * world:
        raise ResultsError(f"{where}: steps must list each of {world} ranks at each of its {world} steps")
    out, seen = [], set()
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ResultsError(f"{where}: step {i} is not an object")
        try:
            rank, number, src = (step[k] for k in ("rank", "step", "src"))
            times = [step[k] for k in ("start_ms", "compute_ms", "wait_ms")]
            blocks = step["blocks"]
        except KeyError as missing:
            raise ResultsError(f"{where}: step {i} has no {missing}") from None
        if not all(type(v) is int and 0 <= v < world for v in (rank, number, src)) or (rank, number) in seen:
            raise ResultsError(f"{where}: step {i}: rank, step and src must be ranks 0 … {world - 1}, each (rank, "
                               f"step) once")
        seen.add((rank, number))
        if src != costmodel.ring_source(world, rank, number):
            raise ResultsError(f"{where}: step {i}: rank {rank} holds rank {costmodel.ring_source(world, rank, number)}"
                               f"'s K/V at step {number}, not rank {src}'s")
        if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and 0 <= t <= 1e7
                   for t in times):
            raise ResultsError(f"{where}: step {i}: start_ms, compute_ms and wait_ms must be times in ms")
        if (not isinstance(blocks, list) or len(blocks) > 4 or not all(
                isinstance(b, list) and len(b) == 3 and type(b[0]) is int and type(b[1]) is int
                and 0 <= b[0] < chunks and 0 <= b[1] < chunks and b[2] in ("causal", "full") for b in blocks)):
            raise ResultsError(f"{where}: step {i}: blocks must be [query chunk, key chunk, causal|full] of the "
                               f"{chunks} chunks")
        out.append({"rank": rank, "step": number, "src": src, "start_ms": float(times[0]),
                    "compute_ms": float(times[1]), "wait_ms": float(times[2]), "blocks": [list(b) for b in blocks]})
    return sorted(out, key=lambda s: (s["rank"], s["step"]))


def merge_ring(earlier: list[dict], runs: list[dict]) -> list[dict]:
    """This run's ring runs over an earlier file's: a setting measured again is replaced, the rest stay."""
    fresh = {ring_key(r) for r in runs}
    return [r for r in earlier if ring_key(r) not in fresh] + runs


# -- writing ------------------------------------------------------------------------------------------

def dump_results(path: Path, facts: dict, records: list[dict], timelines: list[dict], command: str,
                 created: str, extra_meta: dict | None = None, phases: list[dict] | None = None,
                 ring: list[dict] | None = None) -> None:
    doc = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
           "meta": {"created": created, "command": command, **(extra_meta or {})},
           "device": facts, "records": records, "timelines": timelines, "phases": phases or [], "ring": ring or []}
    text = json.dumps(doc, indent=1, allow_nan=False)
    loaded = parse_results(text.encode(), str(path))  # never write a file the app would refuse or trim
    if loaded.notes:
        raise ResultsError("; ".join(loaded.notes))
    write_atomically(path, text)


def add_ring_runs(path: Path, runs: list[dict], command: str, created: str) -> None:
    """Ring runs (bench.ring) into the results file at `path` (python -m bench made it: its device facts and
    records stay as they are): a setting measured again replaces the earlier run."""
    earlier = load_results_path(path)
    meta = dict(earlier.meta)
    for key in ("created", "command"):
        meta.pop(key, None)
    meta["ring_command"] = f"{command} ({created})"[:1000]
    dump_results(path, earlier.facts, earlier.records, earlier.timelines, earlier.meta.get("command", ""),
                 earlier.meta.get("created", created), meta, earlier.phases, merge_ring(earlier.ring, runs))


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all: written to a new file beside it, flushed to the disk, then renamed
    over it. A write that fails part way (a full disk, a quota) raises OSError and leaves what `path` held before."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, a device (/dev/full), a pipe: never renamed over
        raise IsADirectoryError(21, "a folder", str(path)) if path.is_dir() else OSError(
            f"{path} is not a regular file")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
