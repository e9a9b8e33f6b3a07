"""The headline scene: extra memory of both algorithms and the measured speedup at the slider's N; and the
sequence-length scene's speedup table it reads."""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_ms, fmt_tokens
from story.records import failure_text, oom_card_word, oom_text, oom_word, record_at


@dataclass(frozen=True)
class Headline:
    naive_bytes: int   # extra memory the standard kernels need (model: S, P, O)
    flash_bytes: int   # extra memory flash needs (model: O, LSE)
    speedup: str       # measured naive time / flash time at the slider's N, "refused", "out of memory", or "—"
    speedup_why: str   # the two times, the wall (what it needs, which allocation failed), or the reason


def headline(records: list[dict], shape: Shape, missing_reason: str = "not measured at this setting") -> Headline:
    """The headline's three numbers at the shape's N. records: FA-2 and naive records of the current setting."""
    seq_len = shape.seq_len
    memory = costmodel.naive_extra_bytes(shape), costmodel.flash_extra_bytes(shape)
    naive, flash = record_at(records, "naive", seq_len), record_at(records, "fa2", seq_len)
    if naive is not None and naive["status"] == "oom":
        flash_ran = f"; flash ran in {fmt_ms(flash['time_ms'])}" if flash and flash["status"] == "ok" else ""
        return Headline(*memory, oom_card_word(naive), f"standard attention: {oom_word(naive)} ({oom_text(naive)}){flash_ran}")
    row = next((row for row in speedup_table(records) if row["seq_len"] == seq_len), None)
    if row is None:
        return Headline(*memory, "—", missing_reason)
    if row["speedup"] is None:
        return Headline(*memory, "—", row["note"] or "one of the two did not run")
    return Headline(*memory, f"{row['speedup']:.1f}×",
                    f"standard {fmt_ms(row['naive_ms'])} → flash {fmt_ms(row['flash_ms'])}")


# Under this GPU time a call may be mostly the host launching it, not the GPU's work: the recording's FA-2 call at 1K
# (batch 2 × 16 heads, head_dim 64) took 0.100 ms where Nsight Compute counted 0.028 ms in the kernel. Longer calls
# are never said to be launch-bound; a shorter one is where its record's kernel times (Nsight Compute's, `kernels`)
# add up to less than half its time, or, where the record has none, is said only to possibly be (BENCHMARKS.md).
LAUNCH_BOUND_MS = 0.2


def kernel_share(record: dict | None) -> float | None:
    """The share of a GPU record's time that its kernels took (the sum of its Nsight Compute kernel times ÷ its
    time); None where the record counted no kernel times."""
    kernels = (record or {}).get("kernels") or []
    times = [kernel.get("time_ms") for kernel in kernels]
    if not times or any(t is None for t in times) or not record.get("time_ms"):
        return None
    return sum(times) / record["time_ms"]


def _same_setting(a: dict, b: dict) -> bool:
    return all(a.get(key) == b.get(key) for key in ("algorithm", "batch", "heads", "head_dim", "dtype", "causal",
                                                       "kv_heads", "pass"))


def _best_tflops(record: dict, records: list[dict] | None) -> float | None:
    """The same kernel's best TFLOPS at the same setting at the other lengths in `records` (None: none recorded)."""
    rates = [r["tflops"] for r in records or () if r["status"] == "ok" and r.get("tflops") and _same_setting(r, record)
             and r["seq_len"] != record["seq_len"]]
    return max(rates, default=None)


def launch_bound(record: dict | None, records: list[dict] | None = None) -> bool:
    """Whether a GPU record's call is mostly its launch: under LAUNCH_BOUND_MS, and its kernels (where counted) under
    half its time; where they were not counted, its TFLOPS under half the same kernel's best at the same setting in
    `records` (a kernel that runs near its full rate is not waiting on its launch); with neither, possibly."""
    if not (record and record["status"] == "ok" and record.get("timing_kind") == "cuda"
            and record["time_ms"] < LAUNCH_BOUND_MS):
        return False
    share = kernel_share(record)
    if share is not None:
        return share < 0.5
    best = _best_tflops(record, records)
    if best and record.get("tflops"):
        return record["tflops"] < 0.5 * best
    return True


def launch_words(record: dict, records: list[dict] | None = None, name: str = "flash") -> str:
    """Why a launch_bound call is said to be its launch: "flash's kernel 0.028 of 0.100 ms, the rest its launch"
    where its kernel times were counted; "flash 35 TFLOPS here, 8% of its 431 at other lengths: mostly the launch"
    where the same kernel's rate at other lengths says so; else "flash under 0.2 ms: the launch may be much of it"."""
    share = kernel_share(record)
    if share is not None:
        return (f"{name}'s kernel {fmt_ms(share * record['time_ms'])} of {fmt_ms(record['time_ms'])}, the rest its "
                f"launch")
    best = _best_tflops(record, records)
    if best and record.get("tflops"):
        return (f"{name} {record['tflops']:,.0f} TFLOPS here, {record['tflops'] / best:.0%} of its {best:,.0f} at "
                f"other lengths: mostly the launch")
    return f"{name} under {LAUNCH_BOUND_MS} ms: the launch may be much of it"


# A kernel at this share of the measured matmul roof or more is doing arithmetic most of its time: only there may a
# sentence say that arithmetic, not bytes, sets its time.
COMPUTE_BOUND_SHARE = 0.5


def compute_bound(record: dict | None, facts: dict | None) -> bool:
    """Whether a GPU record ran at COMPUTE_BOUND_SHARE of the measured matmul roof or more (a call that waits on its
    launch cannot: it needs no launch test)."""
    roof = (facts or {}).get("matmul_tflops")
    return bool(roof and record and record.get("tflops")
                and record["tflops"] >= COMPUTE_BOUND_SHARE * roof)


def speedup_words(speedup: float) -> str:
    """"1.8× faster" or "1.3× slower": never "0.8× faster"; two decimals under 1.1× ("1.04× faster", not "1.0×
    faster")."""
    value = speedup if speedup >= 1 else 1 / speedup
    digits = 2 if value < 1.095 else 1
    return f"{value:.{digits}f}× {'faster' if speedup >= 1 else 'slower'}"


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
    if launch_bound(flash, records):
        sentence += (f". Flash's call is mostly the host launching it, not the GPU's work "
                     f"({launch_words(flash, records)}): the ratio says more about launches than kernels"
                     if kernel_share(flash) is not None or _best_tflops(flash, records) else
                     f". Under {LAUNCH_BOUND_MS} ms a call can be as much the host launching it as the GPU's work: "
                     f"these times may compare launches")
    return sentence + "."


# -- the speedup table ----------------------------------------------------------------------------------

SPEEDUP_NAMES = {"fa2": "flash", "naive": "standard"}
SPEEDUP_COLUMNS = ("N", "flash", "standard", "speedup", "note")  # the table as the scene shows it


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
        elif launch_bound(pair.get("fa2"), records):
            notes.append(launch_words(pair["fa2"], records))
        both = times["fa2"] and times["naive"]
        table.append({"seq_len": seq_len, "tokens": fmt_tokens(seq_len), "flash_ms": times["fa2"],
                      "naive_ms": times["naive"], "speedup": times["naive"] / times["fa2"] if both else None,
                      "note": "; ".join(notes)})
    return table


def speedup_table_text(records: list[dict]) -> list[dict[str, str]]:
    """speedup_table as the sequence-length scene shows it: per N, flash's and standard's times, the speedup to two
    decimals ("—" where one did not run) and the note, as text (SPEEDUP_COLUMNS, in order)."""
    return [dict(zip(SPEEDUP_COLUMNS, (row["tokens"], fmt_ms(row["flash_ms"]), fmt_ms(row["naive_ms"]),
                                       f"{row['speedup']:.2f}×" if row["speedup"] else "—", row["note"])))
            for row in speedup_table(records)]
