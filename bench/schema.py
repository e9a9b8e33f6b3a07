"""The results file's schema, one line per field: each field's type and bounds, and the one function that checks a
value against its line (bench/results.py reads files through it). No torch: the app reads recordings without it.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from costmodel import DTYPE_BYTES, ELEMENT_BYTES, PASSES, RING_LAYOUTS
from bench.record import RECORD_FIELDS, STATUSES
from kernels import specs
from kernels.source import BUILD_CHARS

MAX_DEPTH = 10                # the deepest our files go is 9 (file → phases → … → lane → spans → span)
MAX_BYTES = 2**50             # 1 PiB: sizes, byte counts
MIN_MS, MAX_MS = 1e-6, 1e7    # 1 ns … ~3 hours
MAX_TFLOPS = 1e5
MAX_GBPS = 1e7
MAX_TIMESTAMP_NS = 10**15     # ~11 days of %globaltimer after the first program started
MAX_PROGRAMS = 1 << 22        # entries of one timeline
MAX_KERNELS = 64              # launched kernels listed in one record
MAX_SIZES = 16                # sizes a roof was measured at
MAX_ERROR = 1e9               # an attention output's error against float64 (the inputs' scale: no bound of its own)
MAX_TEXT = 200                # characters of a name; messages and commands get more
TIMING_KINDS = ("cuda", "interpreter")
RECORDED_AT_PATTERN = r"20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]Z"


# -- the schema: one line per field ------------------------------------------------------------------

@dataclass(frozen=True)
class _Field:
    kind: type                        # int, float, str or bool
    low: float = 0                    # numbers: inclusive bounds
    high: float = 0
    nullable: bool = False
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()  # text: one of these (a callable: asked each time)
    max_chars: int = MAX_TEXT
    unit: str = ""
    aliases: Callable[[], dict[str, str]] | None = None  # text: older names read as today's
    pattern: str = ""                 # text: the whole value matches this regular expression (what it says: `what`)
    what: str = ""


def _int(low: int, high: int, nullable: bool = False, unit: str = "") -> _Field:
    return _Field(int, low, high, nullable, unit=unit)


def _float(high: float, nullable: bool = True, low: float = MIN_MS, unit: str = "") -> _Field:
    return _Field(float, low, high, nullable, unit=unit)


def _text(max_chars: int = MAX_TEXT, nullable: bool = False, choices=(), aliases=None, pattern: str = "",
          what: str = "") -> _Field:
    return _Field(str, nullable=nullable, choices=choices, max_chars=max_chars, aliases=aliases, pattern=pattern,
                  what=what)


def _algorithms() -> tuple[str, ...]:
    """The names a record may carry: every spec's key (kernels/specs.py), read when a file is."""
    return tuple(specs.SPECS)


def _proton_kernels() -> tuple[str, ...]:
    return tuple(spec.key for spec in specs.with_facet("proton"))


_BOOL = _Field(bool)
# when and with which build of our kernel (kernels/source.py entry_build) an entry of any section was measured: optional
# (files before the fields lack them); a bad one is dropped with a note, and the page says less of its entry
PROVENANCE_SCHEMA: dict[str, _Field] = {
    "recorded_at": _text(20, nullable=True, pattern=RECORDED_AT_PATTERN, what="a UTC time as 2026-12-06T15:04Z"),
    "build": _text(BUILD_CHARS, nullable=True, pattern=f"[0-9a-f]{{{BUILD_CHARS}}}",
                   what=f"a build stamp ({BUILD_CHARS} hex digits)"),
}
PROVENANCE_FALLBACK = {"recorded_at": "the page does not date it", "build": "the page says nothing of its code"}
_BYTES = _int(0, MAX_BYTES, nullable=True, unit="bytes")
_TIME = _float(MAX_MS, unit="ms")

RECORD_SCHEMA: dict[str, _Field] = {
    "algorithm": _text(choices=_algorithms, aliases=specs.aliases), "seq_len": _int(1, 1 << 24),
    "batch": _int(1, 1 << 16),
    "heads": _int(1, 1 << 12), "head_dim": _int(1, 1 << 12), "dtype": _text(choices=tuple(ELEMENT_BYTES)),
    "causal": _BOOL, "status": _text(choices=STATUSES),
    "time_ms": _TIME, "time_ms_p20": _TIME, "time_ms_p80": _TIME,
    "tflops": _float(MAX_TFLOPS, unit="TFLOPS"), "gbps": _float(MAX_GBPS, unit="GB/s"),
    "bytes_moved": _int(0, MAX_BYTES, unit="bytes"), "peak_extra_bytes": _BYTES, "needed_bytes": _BYTES,
    "message": _text(500), "device": _text(), "timing_kind": _text(choices=TIMING_KINDS),
    # optional (bench.record.OPTIONAL_RECORD_FIELDS): a bad value is dropped with a note
    "block_m": _int(1, 1024, nullable=True), "block_n": _int(1, 1024, nullable=True),
    "dram_read_bytes": _BYTES, "dram_write_bytes": _BYTES, "l2_bytes": _BYTES, "counters": _text(600),
    "kernels": _Field(list, nullable=True), "kv_len": _int(1, 1 << 24, nullable=True),
    "kv_heads": _int(1, 1 << 12, nullable=True), "pass": _text(choices=PASSES, nullable=True),
    "page_size": _int(1, 1 << 16, nullable=True), "num_splits": _int(1, 1 << 16, nullable=True),
    # bench --ladder: the ablation step (a bad one refuses the file: without it the record reads as the shipped kernel)
    "config": _text(nullable=True),
    # bench --backward: forward + backward (time_ms is the backward alone); a bad one is dropped with a note, one on
    # a record that is not a finished backward refuses the file (bench/results.py)
    "fwd_bwd_ms": _TIME,
    # bench --fp8 (schema 5): an e4m3 record's scaling and rotation (a bad or missing one refuses the file: they tell
    # its records apart), its errors against float64 and the bf16 kernel beside it (a bad one is dropped)
    "scaling": _text(choices=("tensor", "head"), nullable=True), "rotation": _Field(bool, nullable=True),
    "err_max": _float(MAX_ERROR, low=0), "err_rms": _float(MAX_ERROR, low=0), "err_rel_rms": _float(MAX_ERROR, low=0),
    "outlier_err_max": _float(MAX_ERROR, low=0), "outlier_err_rms": _float(MAX_ERROR, low=0),
    "outlier_err_rel_rms": _float(MAX_ERROR, low=0), "paper_outlier_err_max": _float(MAX_ERROR, low=0),
    "paper_outlier_err_rms": _float(MAX_ERROR, low=0), "paper_outlier_err_rel_rms": _float(MAX_ERROR, low=0),
    "bf16_time_ms": _TIME, "bf16_err_rel_rms": _float(MAX_ERROR, low=0),
    "bf16_outlier_err_rel_rms": _float(MAX_ERROR, low=0), "bf16_paper_outlier_err_rel_rms": _float(MAX_ERROR, low=0),
    **PROVENANCE_SCHEMA,
}
KERNEL_SCHEMA: dict[str, _Field] = {
    "name": _text(), "time_ms": _TIME, "dram_read_bytes": _BYTES, "dram_write_bytes": _BYTES, "l2_bytes": _BYTES,
}
FACT_SCHEMA: dict[str, _Field] = {
    "name": _text(), "sm_count": _int(1, 10_000, nullable=True),
    "smem_per_sm_bytes": _int(1, MAX_BYTES, nullable=True, unit="bytes"),
    "smem_per_block_bytes": _int(1, MAX_BYTES, nullable=True, unit="bytes"),
    "l2_bytes": _int(1, MAX_BYTES, nullable=True, unit="bytes"),
    "hbm_bytes": _int(1, MAX_BYTES, nullable=True, unit="bytes"),
    "copy_gbps": _float(MAX_GBPS, unit="GB/s"), "compute_capability": _text(20, nullable=True),
    "driver": _text(60, nullable=True), "torch": _text(60, nullable=True), "triton": _text(60, nullable=True),
    # optional: older files lack them; a bad value is dropped with a note
    "cuda": _text(60, nullable=True), "python": _text(60, nullable=True),
    "matmul_tflops": _float(MAX_TFLOPS, unit="TFLOPS"), "l2_gbps": _float(MAX_GBPS, unit="GB/s"),
    "sm_clock_mhz": _float(1e5, unit="MHz"),
    # the sizes the roofs were measured at, each roof the best of them (bench/device.py COPY_SIZES_BYTES,
    # MATMUL_SIZES): the roofline says what each roof is
    "copy_sizes_bytes": _Field(tuple, 1 << 20, MAX_BYTES, nullable=True, unit="bytes"),
    "matmul_sizes": _Field(tuple, 16, 1 << 18, nullable=True),
}
REQUIRED_FACTS = ("name", "sm_count", "smem_per_sm_bytes", "smem_per_block_bytes", "l2_bytes", "hbm_bytes",
                  "copy_gbps", "compute_capability", "driver", "torch", "triton")
META_SCHEMA: dict[str, _Field] = {"created": _text(40), "command": _text(1000),
                                  "phases_skipped": _text(1000, nullable=True),  # bench --phases: what could not be
                                  "merged_from": _text(1000, nullable=True),  # bench --merge-into: earlier commands
                                  "counters_command": _text(1000, nullable=True),  # bench.counters
                                  "ring_command": _text(1000, nullable=True),  # bench.ring: what measured "ring"
                                  "ratios": _Field(list, nullable=True),            # bench: printed ratios
                                  # bench --decode: the copy bandwidth measured in that run, the decode scene's roof
                                  "decode_copy_gbps": _float(MAX_GBPS, unit="GB/s")}
MAX_RATIO_ROWS = 1000
TIMELINE_SCHEMA: dict[str, _Field] = {
    "sm_count": _int(1, 10_000), "seq_len": _int(1, 1 << 24), "heads": _int(1, 1 << 12),
    "batch": _int(1, 1 << 16), "head_dim": _int(1, 1 << 12), "block_m": _int(1, 1024), "causal": _BOOL,
}
TIMELINE_ARRAYS = ("sm_id", "t_start_ns", "t_end_ns", "q_block", "bh")
# "ring": one entry per ring-attention run (bench.ring under torchrun): ours or PyTorch's context_parallel, its layout
# and the world it ran on, the time of one forward (all ranks), our one-GPU kernel at the same shape, and ours' per-rank
# trace of one forward (bench/results.py checks the lists)
RING_IMPLS = ("ours", "torch_cp")
RING_ROTATES = ("p2p", "allgather", "alltoall")
MAX_WORLD = 1024
RING_SCHEMA: dict[str, _Field] = {
    "impl": _text(choices=RING_IMPLS), "layout": _text(choices=RING_LAYOUTS), "rotate": _text(choices=RING_ROTATES),
    "kernel": _text(60), "world_size": _int(1, MAX_WORLD), "seq_len": _int(1, 1 << 30), "batch": _int(1, 1 << 16),
    "heads": _int(1, 1 << 12), "head_dim": _int(1, 1 << 12), "dtype": _text(choices=tuple(DTYPE_BYTES)),
    "causal": _BOOL, "status": _text(choices=STATUSES), "message": _text(500), "device": _text(),
    "timing_kind": _text(choices=TIMING_KINDS),
    "time_ms": _TIME, "time_ms_p20": _TIME, "time_ms_p80": _TIME,
    "one_gpu_ms": _TIME,          # our kernel on one GPU over the whole sequence, timed in the same run (None: not)
    "kv_step_ms": _TIME,          # one hop of a rank's K/V shard round the ring with nothing else running
    "check_seq_len": _int(1, 1 << 24, nullable=True),   # the correctness check's sequence (same world and layout)
    "check_err": _float(MAX_ERROR, low=0),               # its max |O − float64 reference|
    **PROVENANCE_SCHEMA,          # ours: kernels/ring.py and its kernel (specs.source_files' RING); PyTorch's: no build
}
RING_REQUIRED = ("impl", "layout", "rotate", "kernel", "world_size", "seq_len", "batch", "heads", "head_dim",
                 "dtype", "causal", "status", "message", "device", "timing_kind", "time_ms", "time_ms_p20",
                 "time_ms_p80")
MAX_RING_RUNS = 200
assert set(RECORD_SCHEMA) == set(RECORD_FIELDS), "every record field needs a line in RECORD_SCHEMA"
_FACT_FALLBACK = {"matmul_tflops": "the roofline uses the GPU's datasheet peak",
                  "l2_gbps": "the hierarchy shows no measured L2 bandwidth",
                  "sm_clock_mhz": "the clock is not shown",
                  "copy_sizes_bytes": "the roofline says the copy's sizes were not recorded",
                  "matmul_sizes": "the roofline says the matmul's sizes were not recorded"}
_COUNTERS = ("dram_read_bytes", "dram_write_bytes", "l2_bytes", "kernels", "counters")


class _Bad(ValueError):
    """One value that does not fit its field; the message completes '<field> = <value> …'."""


def plain_text(value: str, max_chars: int = MAX_TEXT) -> str:
    """Text as it may be shown: control, formatting (e.g. bidi overrides) and unpaired surrogate characters
    removed, line breaks and tabs turned to spaces, cut to `max_chars` with an ellipsis."""
    kept = "".join(" " if ch in "\t\n\r" else ch for ch in value
                   if ch in "\t\n\r" or unicodedata.category(ch)[0] != "C")
    kept = kept.strip()
    return kept if len(kept) <= max_chars else kept[:max_chars - 1] + "…"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _checked(spec: _Field, value):
    """The value cleaned up for its field, or _Bad with why it does not fit."""
    if value is None:
        if spec.nullable:
            return None
        raise _Bad("is missing (null)")
    if spec.kind is bool:
        if not isinstance(value, bool):
            raise _Bad("is not true or false")
        return value
    if spec.kind is str:
        if not isinstance(value, str):
            raise _Bad("is not text")
        if spec.aliases is not None:
            value = spec.aliases().get(value, value)
        if spec.choices:
            choices = spec.choices() if callable(spec.choices) else spec.choices
            if value not in choices:
                raise _Bad(f"is not one of {', '.join(choices)}")
            return value
        if spec.pattern and not re.fullmatch(spec.pattern, value):
            raise _Bad(f"is not {spec.what}")
        return plain_text(value, spec.max_chars)
    if spec.kind is list:
        if not isinstance(value, list):
            raise _Bad("is not a list")
        return value
    if spec.kind is tuple:  # a short list of whole numbers, each within the bounds
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_SIZES:
            raise _Bad(f"is not a list of 1 … {MAX_SIZES} sizes")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not spec.low <= item <= spec.high:
                unit = f" {spec.unit}" if spec.unit else ""
                raise _Bad(f"holds {_short(item)}, not a whole number in {spec.low:g} … {spec.high:g}{unit}")
        return list(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad("is not a number")
    if spec.kind is int and not isinstance(value, int):
        raise _Bad("is not a whole number")
    if isinstance(value, float) and not math.isfinite(value):  # a whole number is finite, and may be too big for a
        raise _Bad("is not finite")                            # float (a 401-digit one): the bounds say so
    if not spec.low <= value <= spec.high:
        unit = f" {spec.unit}" if spec.unit else ""
        raise _Bad(f"is outside {spec.low:g} … {spec.high:g}{unit}")
    return float(value) if spec.kind is float else value


class _Notes:
    """Dropped optional values, one line per (section, field) however many records had it."""

    def __init__(self, name: str):
        self.name, self.seen = name, {}

    def drop(self, field_name: str, where: str, value, why: str, fallback: str) -> None:
        key = (field_name, fallback)
        count, first = self.seen.get(key, (0, f"{where}: {field_name} = {_short(value)} {why}"))
        self.seen[key] = (count + 1, first)

    def lines(self) -> tuple[str, ...]:
        return tuple(f"{self.name}: {first}{f' (and {count - 1} more)' if count > 1 else ''}; ignored, {fallback}"
                     for (_, fallback), (count, first) in self.seen.items())
