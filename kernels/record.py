"""The measurement record: what one measurement of one setting produced (docs/data-contracts.md).

Plain data, importable without torch, so the app can read recorded files before (or without)
loading the kernels. `kernels.measure` fills it; `kernels.results` validates files of it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

ALGORITHMS = ("flash", "naive", "sdpa_default", "sdpa_flash", "torch_naive")
OURS = ("flash", "naive")
STATUSES = ("ok", "oom", "error")


@dataclass(frozen=True)
class Record:
    algorithm: str
    seq_len: int
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
    bytes_moved: int               # HBM bytes the algorithm must move at the least
    peak_extra_bytes: int | None   # None where it cannot be measured
    needed_bytes: int | None       # oom: the size of the allocation that failed
    message: str
    device: str
    timing_kind: str               # "cuda" | "interpreter"

    def to_dict(self) -> dict:
        return asdict(self)


RECORD_FIELDS = tuple(f.name for f in fields(Record))
