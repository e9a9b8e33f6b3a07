"""The headline scene: extra memory of both algorithms and the measured speedup at the slider's N; and the
sequence-length scene's speedup table it reads."""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_ms, fmt_tokens
from story.records import OUT_OF_MEMORY, failure_text, oom_text, oom_word, record_at


@dataclass(frozen=True)
class Headline:
    naive_bytes: int   # extra memory the standard kernels need (model: S, P, O)
    flash_bytes: int   # extra memory flash needs (model: O, LSE)
    speedup: str       # measured naive time / flash time at the slider's N, "out of memory", or "—"
    speedup_why: str   # the two times, the wall (what it needs, which allocation failed), or the reason


def headline(records: list[dict], shape: Shape, missing_reason: str = "not measured at this setting") -> Headline:
    """The headline's three numbers at the shape's N. records: FA-2 and naive records of the current setting."""
    seq_len = shape.seq_len
    memory = costmodel.naive_extra_bytes(shape), costmodel.flash_extra_bytes(shape)
    naive, flash = record_at(records, "naive", seq_len), record_at(records, "fa2", seq_len)
    if naive is not None and naive["status"] == "oom":
        flash_ran = f"; flash ran in {fmt_ms(flash['time_ms'])}" if flash and flash["status"] == "ok" else ""
        return Headline(*memory, OUT_OF_MEMORY, f"standard attention: {oom_word(naive)} ({oom_text(naive)}){flash_ran}")
    row = next((row for row in speedup_table(records) if row["seq_len"] == seq_len), None)
    if row is None:
        return Headline(*memory, "—", missing_reason)
    if row["speedup"] is None:
        return Headline(*memory, "—", row["note"] or "one of the two did not run")
    return Headline(*memory, f"{row['speedup']:.1f}×",
                    f"standard {fmt_ms(row['naive_ms'])} → flash {fmt_ms(row['flash_ms'])}")


# Under this GPU time a call is mostly the host launching it, not the GPU's work: the recording's FA-2 call at 1K
# (batch 2 × 16 heads, head_dim 64) took 0.100 ms where Nsight Compute counted 0.028 ms in the kernel. Times this
# short compare launches, not algorithms (BENCHMARKS.md).
LAUNCH_BOUND_MS = 0.2


def launch_bound(record: dict | None) -> bool:
    """Whether a GPU record's time is short enough to be mostly the launch (LAUNCH_BOUND_MS)."""
    return bool(record and record["status"] == "ok" and record.get("timing_kind") == "cuda"
                and record["time_ms"] < LAUNCH_BOUND_MS)


# A kernel at this share of the measured matmul roof or more is doing arithmetic most of its time: only there may a
# sentence say that arithmetic, not bytes, sets its time.
COMPUTE_BOUND_SHARE = 0.5


def compute_bound(record: dict | None, facts: dict | None) -> bool:
    """Whether a GPU record ran at COMPUTE_BOUND_SHARE of the measured matmul roof or more (and not launch-bound)."""
    roof = (facts or {}).get("matmul_tflops")
    return bool(roof and record and record.get("tflops") and not launch_bound(record)
                and record["tflops"] >= COMPUTE_BOUND_SHARE * roof)


def speedup_words(speedup: float) -> str:
    """"1.8× faster" or "1.3× slower": never "0.8× faster"."""
    return f"{speedup:.1f}× faster" if speedup >= 1 else f"{1 / speedup:.1f}× slower"


def at_length_sentence(records: list[dict], shape: Shape) -> str:
    """What the two timed kernels did at the slider's N, in one sentence (the sequence-length scene's caption): both
    times and the ratio, the wall, or why there is nothing; where flash's time is mostly its launch, it says so."""
    n = fmt_tokens(shape.seq_len)
    setting = f"batch {shape.batch} × {shape.heads} heads, head_dim {shape.head_dim}{', causal' if shape.causal else ''}"
    naive, flash = record_at(records, "naive", shape.seq_len), record_at(records, "fa2", shape.seq_len)
    if naive is None and flash is None:
        return f"At N = {n} ({setting}): not measured."
    parts = []
    if flash is not None:
        parts.append(f"flash {fmt_ms(flash['time_ms'])}" if flash["status"] == "ok" else
                     f"flash: {failure_text(flash)}")
    if naive is not None:
        parts.append(f"standard {fmt_ms(naive['time_ms'])}" if naive["status"] == "ok" else
                     f"standard attention: {failure_text(naive)}")
    sentence = f"At N = {n} ({setting}): " + "; ".join(parts)
    if flash and naive and flash["status"] == naive["status"] == "ok":
        sentence += f": flash is {speedup_words(naive['time_ms'] / flash['time_ms'])}"
    if launch_bound(flash):
        sentence += (f". Under {LAUNCH_BOUND_MS} ms a call is mostly the host launching it, not the GPU's work: "
                     f"these times compare launches")
    return sentence + "."


# -- the speedup table ----------------------------------------------------------------------------------

SPEEDUP_NAMES = {"fa2": "flash", "naive": "standard"}


def speedup_table(records: list[dict]) -> list[dict]:
    """Per sequence length: flash and standard (naive) median ms, the speedup naive / flash, and a note
    where one of them failed or ran in the interpreter. Rows sorted by seq_len, plain values."""
    by_len: dict[int, dict[str, dict]] = {}
    for record in sorted(records, key=lambda r: r["seq_len"]):
        if record["algorithm"] in SPEEDUP_NAMES:
            by_len.setdefault(record["seq_len"], {})[record["algorithm"]] = record
    table = []
    for seq_len, pair in sorted(by_len.items()):
        times = {a: pair[a]["time_ms"] if a in pair and pair[a]["status"] == "ok" else None for a in SPEEDUP_NAMES}
        notes = [f"{SPEEDUP_NAMES[a]}: {failure_text(r)}" for a, r in sorted(pair.items(), key=lambda item: item[0])
                 if r["status"] != "ok"]
        if any(r.get("timing_kind") == "interpreter" for r in pair.values()):
            notes.append("CPU interpreter times, not GPU speed")
        elif launch_bound(pair.get("fa2")):
            notes.append(f"flash under {LAUNCH_BOUND_MS} ms: mostly the launch")
        both = times["fa2"] and times["naive"]
        table.append({"seq_len": seq_len, "tokens": fmt_tokens(seq_len), "flash_ms": times["fa2"],
                      "naive_ms": times["naive"], "speedup": times["naive"] / times["fa2"] if both else None,
                      "note": "; ".join(notes)})
    return table
