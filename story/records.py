"""What a record says when it is not a plain time: the wall of an out-of-memory record, a failure in words, the
records at one length, the bytes the GPU counted."""
from __future__ import annotations

from costmodel import Shape
from fmt import bytes_after, fmt_bytes, fmt_tokens
from kernels import source, specs


OUT_OF_MEMORY = "out of memory"


def prefill_records(records: list[dict]) -> list[dict]:
    """The records that are forward passes over a prompt (`pass` "prefill"; older records have none): what the
    prefill scenes read. Decode and backward records (bench --decode, --backward) are kept apart by their pass; the
    decode and backward scenes read their own (story.decode_records, the backward's `pass` == "backward")."""
    return [r for r in records if r.get("pass", "prefill") in (None, "prefill")]


def record_at(records: list[dict], algorithm: str, seq_len: int) -> dict | None:
    return next((r for r in records if r["algorithm"] == algorithm and r["seq_len"] == seq_len), None)


def first_out_of_memory(records: list[dict]) -> dict | None:
    """The shortest length at which the standard kernels ran out of memory: the wall on the slider."""
    walls = [record for record in records if record["algorithm"] == "naive" and record["status"] == "oom"]
    return min(walls, key=lambda record: record["seq_len"], default=None)


def counted_bytes(record: dict) -> int | None:
    """The HBM bytes the GPU's counters read and wrote for a record's run, or None where nothing was counted."""
    if record.get("dram_read_bytes") is None or record.get("dram_write_bytes") is None:
        return None
    return record["dram_read_bytes"] + record["dram_write_bytes"]


def counted_bytes_at(records: list[dict], algorithm: str, seq_len: int) -> int | None:
    """HBM bytes the GPU's counters read for this algorithm's run at seq_len, or None (not counted, not run)."""
    record = record_at(records, algorithm, seq_len)
    return counted_bytes(record) if record and record["status"] == "ok" else None


# -- the wall: what an out-of-memory record says --------------------------------------------------------

def oom_need(record: dict) -> int | None:
    """Bytes the algorithm needs at the record's setting (its spec's design need), else what the failed
    allocation asked for."""
    if record["algorithm"] in specs.SPECS:
        return specs.extra_bytes(record["algorithm"], Shape.of_record(record))
    return record.get("needed_bytes")


def held_and_tried(record: dict) -> tuple[int, int] | None:
    """(bytes the process held, CUDA context and the allocator's reserve included, and bytes it then failed to
    allocate) as an out-of-memory record's allocator message says ("Tried to allocate 32.00 GiB. … Including
    non-PyTorch memory, this process has 129.49 GiB memory in use."), or None where the message does not say both
    (our own refusal before launch, an older record). The allocation failed because it was larger than what was
    free, so the two together exceed what the device had free for this process."""
    message = str(record.get("message") or "")
    held, tried = bytes_after(message, "this process has"), bytes_after(message, "Tried to allocate")
    return (held, tried) if held is not None and tried is not None else None


REFUSED_BEFORE_LAUNCH = "refused before any launch"  # kernels/inputs.py: S and P larger than the whole device


REFUSED = "refused before any launch"


def refused(record: dict | None) -> bool:
    """The record's kernel was refused by our library's own check before any launch (not an allocator's failure)."""
    return bool(record) and record.get("status") == "oom" and REFUSED_BEFORE_LAUNCH in str(record.get("message") or "")


def oom_word(record: dict | None) -> str:
    """What happened to a kernel that did not fit, in a word or two: refused before launch, or out of memory."""
    return REFUSED if refused(record) else OUT_OF_MEMORY


def oom_card_word(record: dict | None) -> str:
    """oom_word short enough for a card's number: "refused" (before any launch; the card's help and caption say it
    whole) or "out of memory"."""
    return "refused" if refused(record) else OUT_OF_MEMORY


def oom_text(record: dict) -> str:
    """"needs 192.2 GiB beyond Q, K, V; a 64.0 GiB allocation failed": the model's need beyond the inputs (the
    memory chart's quantity) and what was measured, each saying what it is. The one wording of the wall: the chart,
    the speedup table, the headline and the takeaways all use it (the problem scene's wall counts Q, K, V too and
    says so: story.standard_wall)."""
    parts = []
    need = oom_need(record)
    if need:
        parts.append(f"needs {fmt_bytes(need)} beyond Q, K, V")
    if record.get("needed_bytes"):
        if REFUSED_BEFORE_LAUNCH in str(record.get("message") or ""):  # our library's own check, not the allocator
            parts.append(f"{fmt_bytes(record['needed_bytes'])} for S and P")  # said: refused before any launch
        else:
            parts.append(f"a {fmt_bytes(record['needed_bytes'])} allocation failed")
    return "; ".join(parts)


def wall_text(record: dict) -> str:
    """"out of memory at N = 32K (needs 192.2 GiB; a 64.0 GiB allocation failed)"."""
    needed = f" ({oom_text(record)})" if oom_text(record) else ""
    return f"{oom_word(record)} at N = {fmt_tokens(record['seq_len'])}{needed}"


def first_wall(records: list[dict]) -> dict | None:
    """The first out-of-memory record of these: standard's, if it has one (the memory chart's shaded wall)."""
    oom = [r for r in records if r["status"] == "oom"]
    naive = [r for r in oom if r["algorithm"] == "naive"]
    return min(naive or oom, key=lambda r: r["seq_len"], default=None)


def failure_text(record: dict) -> str:
    """Why a record has no timing: "out of memory (needs …; a 64.0 GiB allocation failed)" or "error: …"."""
    if record["status"] == "oom":
        needs = oom_text(record)
        return oom_word(record) + (f" ({needs})" if needs else "")
    return f"error: {record.get('message') or 'unknown'}"


def with_failures(records: list[dict]) -> list[dict]:
    """The records as the memory and timing charts draw them: each failed one carries its `failure` text, the word
    or two the timing charts write beside its ✕ (`failure_mark`: "refused", "out of memory" or "error"), and each
    out-of-memory one the bytes it needs (`need_bytes`, where its ✕ sits on the memory chart)."""
    return [r if r["status"] == "ok" else {**r, "failure": failure_text(r), "need_bytes": oom_need(r),
                                           "failure_mark": oom_card_word(r) if r["status"] == "oom" else "error"}
            for r in records]


def memory_wall(records: list[dict]) -> dict | None:
    """The memory chart's shaded wall: where the first out-of-memory record is, and what it says."""
    wall = first_wall(records)
    return {"seq_len": wall["seq_len"], "text": wall_text(wall)} if wall else None


def runs_sentence(meta: dict | None) -> str:
    """What a results file merged from several bench runs (bench --merge-into) makes of a comparison between its
    points: "" for a file of one run."""
    earlier = [command for command in str((meta or {}).get("merged_from") or "").split(" | ") if command.strip()]
    if not earlier:
        return ""
    return f"Points from {len(earlier) + 1} bench runs: across runs, times spread a few per cent."


# -- when, and with which code, a recording's records were measured -------------------------------------------------

def recorded_days(records: list[dict], created: str = "") -> str:
    """The days these records were measured (their recorded_at, UTC): "2026-12-04", "2026-12-04 to 12-05"; a
    file's records without one (files before the field) fall back to its created date; "" when neither says."""
    days = sorted({str(r["recorded_at"])[:10] for r in records if r.get("recorded_at")})
    if not days:
        return str(created or "")[:10]
    if len(days) == 1:
        return days[0]
    return f"{days[0]} to {days[-1][5:] if days[-1][:4] == days[0][:4] else days[-1]}"


def recorded_label(gpu: str, records: list[dict], created: str = "") -> str:
    """"recorded on NVIDIA H200, 2026-12-04 to 12-05": where and when these records were measured."""
    days = recorded_days(records, created)
    return f"recorded on {gpu}" + (f", {days}" if days else "")


def earlier_code(records: list[dict], build_now, section: str = "records") -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Our kernels of which some of these entries of a results file's section (its records, or its timelines, phases
    or ring runs) were measured with other code than this copy's, in legend order, each with the file(s) it names
    (specs.named_files): an entry's `build` differs from build_now(key, pass, dtype) of the code it measured
    (kernels/source.py measured_with, record_build). An entry without a build (a file before the field) says nothing
    either way; a peer's has none. Only measurements count: a record or ring run that did not finish (`status` other
    than "ok": refused before any launch, out of memory, an error) measured nothing, whichever code it ran (a timeline
    or a phase recording has no status: it is a measurement)."""
    stale: dict[str, set[str]] = {}
    for r in records:
        if r.get("status", "ok") != "ok":
            continue
        what = source.measured_with(section, r)
        if not r.get("build") or what is None:
            continue
        now = build_now(*what)
        if now and r["build"] != now:  # this copy's build unknown (a file unreadable): nothing said
            stale.setdefault(what[0], set()).update(specs.named_files(*what))
    return tuple((key, tuple(sorted(stale[key]))) for key in specs.SPECS if key in stale)


def _files(stale: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    files = [f"kernels/{name}" for _, group in stale for name in group]
    return files[0] if len(files) == 1 else ", ".join(files[:-1]) + " and " + files[-1]


def earlier_code_sentence(stale: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    """What the page says of records measured with other code than this copy's (earlier_code; "" when none): the
    files whose code has changed since, which name the kernels."""
    return f"Measured with an earlier version of {_files(stale)} than this copy runs." if stale else ""


def recorded_subtitle(records: list[dict], created: str, stale: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    """When these records were measured and which of their kernels' files changed since (earlier_code), short enough
    for a chart's subtitle in a narrow column: "recorded 2026-12-04; code changed since: fa2.py, decode.py" ("" when
    nothing dates them and nothing changed)."""
    days = recorded_days(records, created)
    changed = ", ".join(name for _, group in stale for name in group)
    return "; ".join(filter(None, (f"recorded {days}" if days else "",
                                   f"code changed since: {changed}" if changed else "")))
