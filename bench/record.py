"""The measurement record: what one measurement of one setting produced (docs/data-contracts.md).

Plain data, importable without torch, so the app can read recorded files before (or without)
loading the kernels. `bench.measure` fills it; `bench.results` validates files of it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

STATUSES = ("ok", "oom", "error")


@dataclass(frozen=True)
class Record:
    algorithm: str                 # a kernel's spec key (kernels/specs.py)
    seq_len: int                   # the shape (costmodel.Shape): query tokens per sequence …
    batch: int
    heads: int
    head_dim: int
    dtype: str
    causal: bool
    status: str                    # "ok" | "oom" | "error"
    time_ms: float | None          # median; None unless ok
    time_ms_p20: float | None
    time_ms_p80: float | None
    tflops: float | None           # None on the interpreter (CPU time says nothing about GPU speed)
    gbps: float | None
    bytes_moved: int               # HBM bytes by the cost model (its spec's traffic; flash: L2-aware on a GPU)
    peak_extra_bytes: int | None   # None where it cannot be measured
    needed_bytes: int | None       # oom: the size of the allocation that failed
    message: str
    device: str
    timing_kind: str               # "cuda" | "interpreter"
    # Optional: files written before these fields load with the defaults.
    block_m: int | None = None             # flash: the tiles the timed kernel ran
    block_n: int | None = None
    dram_read_bytes: int | None = None     # HBM bytes read, counted by hardware counters over its kernels
    dram_write_bytes: int | None = None    # HBM bytes written, likewise
    l2_bytes: int | None = None            # bytes through L2 (reads and writes), likewise
    counters: str = ""                     # how the counts were read, or why there are none
    kernels: list[dict] | None = None      # per kernel launched: name, time_ms, dram_read_bytes, dram_write_bytes, l2_bytes
    kv_len: int | None = None              # … keys per sequence (None: seq_len) …
    kv_heads: int | None = None            # … K/V heads (None: heads) …
    pass_: str = "prefill"                 # … and what was computed ("pass" in the file: prefill, decode, backward)
    page_size: int | None = None           # decode: tokens per page of a paged cache (None: contiguous)
    num_splits: int | None = None          # decode: splits of the cache (programs per sequence and K/V head)
    config: str | None = None              # bench --ladder: the ablation step it times (kernels/ladder.py: "FA-2
                                           # order (ours)", a LADDER row's name, or the reference); None: shipped
    fwd_bwd_ms: float | None = None        # backward: the median of forward + backward (time_ms: the backward alone)
    # bench --fp8 (dtype float8_e4m3fn, kernels/fp8.py): how Q, K, V were made e4m3 and what that cost in accuracy
    scaling: str | None = None             # "tensor" or "head": one descale per tensor or per (batch, head)
    rotation: bool | None = None           # Q and K turned by the random-sign Hadamard matrix before quantizing
    err_max: float | None = None           # O against float64 attention on the unquantized inputs, random inputs
    err_rms: float | None = None           # (batch 1, 2 heads at the record's seq_len and head_dim): max |Δ|, RMS,
    err_rel_rms: float | None = None       # RMS ÷ RMS of the reference
    outlier_err_max: float | None = None   # the same on inputs with planted outliers (0.1 % of entries ×10–100)
    outlier_err_rms: float | None = None
    outlier_err_rel_rms: float | None = None
    paper_outlier_err_max: float | None = None  # the same on the FA-3 paper's outliers (N(0, 10²) added to 0.1 %)
    paper_outlier_err_rms: float | None = None
    paper_outlier_err_rel_rms: float | None = None
    bf16_time_ms: float | None = None      # our bf16 FA-3 kernel at the same shape, timed in the same rounds
    bf16_err_rel_rms: float | None = None  # its relative RMS error, random inputs and both kinds of outliers
    bf16_outlier_err_rel_rms: float | None = None
    bf16_paper_outlier_err_rel_rms: float | None = None
    # provenance: when it was measured (UTC, to the minute) and our kernel's build (kernels/source.py record_build:
    # a digest of its files' code; None for a peer's). Files before these fields: undated, build unknown
    recorded_at: str | None = None
    build: str | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["pass"] = out.pop("pass_")
        return out


FP8_FIELDS = ("scaling", "rotation", "err_max", "err_rms", "err_rel_rms", "outlier_err_max", "outlier_err_rms",
              "outlier_err_rel_rms", "paper_outlier_err_max", "paper_outlier_err_rms", "paper_outlier_err_rel_rms",
              "bf16_time_ms", "bf16_err_rel_rms", "bf16_outlier_err_rel_rms", "bf16_paper_outlier_err_rel_rms")
RECORD_FIELDS = tuple("pass" if f.name == "pass_" else f.name for f in fields(Record))
OPTIONAL_RECORD_FIELDS = ("block_m", "block_n", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "counters",
                          "kernels", "kv_len", "kv_heads", "pass", "page_size", "num_splits", "config",
                          "fwd_bwd_ms", *FP8_FIELDS, "recorded_at", "build")
REQUIRED_RECORD_FIELDS = tuple(name for name in RECORD_FIELDS if name not in OPTIONAL_RECORD_FIELDS)
