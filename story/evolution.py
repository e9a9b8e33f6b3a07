"""The evolution scene, FlashAttention 1 → 4: each algorithm's measured TFLOPS at the talk's setting (or why it has none), and
how much of FA-1 order's gap is loop order and how much the talk's shape, and the bytes the loop order moves."""
from __future__ import annotations

from dataclasses import dataclass

from costmodel import Shape
from fmt import fmt_bytes, fmt_ms, fmt_ratio, fmt_tokens
from kernels import specs
from story.headline import LAUNCH_BOUND_MS, launch_bound
from story.records import failure_text, oom_text, oom_word, refused


def prefill_algorithms() -> tuple[str, ...]:
    """The algorithms that compute a prefill (the specs whose passes say so), in legend order: the evolution
    scene's entries, and what the scenes of prefill measure."""
    return tuple(spec.key for spec in specs.all_specs() if "prefill" in spec.passes)


# -- the evolution scene ---------------------------------------------------------------------------------

def _no_number(algorithm: str, at_length: dict | None, history: list[dict], seq_len: int | None) -> str:
    """Why an algorithm has no TFLOPS at seq_len: its record's failure, or what its records at other lengths
    of the setting say (out of memory from a shorter length, not timed past the longest it ran), else not
    recorded."""
    if at_length is not None:
        return oom_word(at_length) if at_length["status"] == "oom" else failure_text(at_length)
    mine = [r for r in history if r["algorithm"] == algorithm]
    shorter_oom = [r for r in mine if r["status"] == "oom" and seq_len and r["seq_len"] < seq_len]
    if shorter_oom:
        first = min(shorter_oom, key=lambda r: r["seq_len"])
        return f"{oom_word(first)} (from {fmt_tokens(first['seq_len'])})"
    timed = [r["seq_len"] for r in mine if r["status"] == "ok"]
    if timed and seq_len and max(timed) < seq_len:
        why = specs.spec(algorithm).max_seq_len_why if algorithm in specs.SPECS else ""  # its spec says why
        return f"not timed past {fmt_tokens(max(timed))}" + (f" ({why})" if why else "")
    return "not recorded"


def evolution_points(records: list[dict], seq_len: int | None = None, history: list[dict] | None = None,
                     algorithms: tuple[str, ...] | None = None) -> list[dict]:
    """The evolution chart's measured entries: one per prefill algorithm of the specs (in their order; or those
    given),
    with its TFLOPS, or None and a note saying why there is no number: "out of memory", "not timed past 16K
    (round trips ∝ N²)", "not recorded"…

    records: every algorithm's records at seq_len (one setting); history: the same setting's records at other
    lengths (why an algorithm with no record here stopped earlier), optional. A peer installed apart from the app
    (its spec's `requirements`: the authors' FA-4) has an entry only where it was measured: an "ok" record here or
    in the history; elsewhere the chart is as it was without it."""
    entries = []
    for algorithm in algorithms or prefill_algorithms():
        if _installed_apart(algorithm) and not any(
                r["algorithm"] == algorithm and r["status"] == "ok" for r in [*records, *(history or [])]):
            continue
        here = [r for r in records if r["algorithm"] == algorithm and (seq_len is None or r["seq_len"] == seq_len)]
        record = next((r for r in here if r["status"] == "ok" and r.get("tflops")), here[0] if here else None)
        if record is not None and record["status"] == "ok" and record.get("tflops"):
            entries.append({"algorithm": algorithm, "tflops": record["tflops"], "note": None,
                            "time_ms": record["time_ms"],
                            "launch_bound": launch_bound(record, [*records, *(history or [])])})
        else:
            entries.append({"algorithm": algorithm, "tflops": None,
                            "note": _no_number(algorithm, record, history or [], seq_len)})
    return entries


def drawn_records(records: list[dict], points: list[dict]) -> list[dict]:
    """The records behind the chart's measured points (evolution_points with a number): what its title and legend
    date, not the records of the entries that have a note instead."""
    shown = {point["algorithm"] for point in points if point.get("tflops")}
    return [r for r in records if r["algorithm"] in shown and r["status"] == "ok" and r.get("tflops")]


def failed_here_sentence(records: list[dict], seq_len: int, names: dict[str, str],
                         hbm_bytes: int | None = None) -> str:
    """What happened at seq_len to the kernels whose record here did not finish (the chart writes a word or two where
    their point would be), short, as the caption has little room: refused before any launch and why (its buffers
    larger than the whole device), out of memory, or the error. "" where every record here finished. names: each
    algorithm's short name; hbm_bytes: the device's memory."""
    said = []
    for r in records:
        if r["seq_len"] != seq_len or r["status"] == "ok":
            continue
        name = names.get(r["algorithm"], r["algorithm"])
        if r["status"] == "oom":  # the one wording of the wall (story.records.oom_text), and the device beside it
            device = f"the device has {fmt_bytes(hbm_bytes)}" if hbm_bytes else ""
            why = "; ".join(part for part in (oom_text(r), device) if part)
            said.append(f"{name} {'was' if refused(r) else 'ran'} {oom_word(r)}" + (f" ({why})" if why else ""))
        else:
            said.append(f"{name} failed ({failure_text(r)})")
    if not said:
        return ""
    return f"At {fmt_tokens(seq_len)} {said[0] if len(said) == 1 else ', '.join(said[:-1]) + ' and ' + said[-1]}."


def _installed_apart(algorithm: str) -> bool:
    return algorithm in specs.SPECS and specs.spec(algorithm).requirements is not None


def authors_sentence(points: list[dict], gpu: str = "this GPU", caveat: bool = True) -> str:
    """Our FA-3 style kernel against the FlashAttention authors' own Hopper kernel (FA-4's sm90 forward), both
    measured on one GPU at the setting (evolution_points); "" where either has no number here. With the launch
    caveat (launch_caveat) where either call is launch_bound, unless caveat is False (ratio_sentences says it once)."""
    measured = {point["algorithm"]: point for point in points if point.get("tflops")}
    ours, theirs = measured.get("fa3"), measured.get("fa4_authors")
    if not (ours and theirs):
        return ""
    sentence = (f"FlashAttention-4, the authors' Hopper kernel, measured on {gpu} at this setting: "
                f"{theirs['tflops']:,.0f} TFLOPS; our FA-3 style kernel {ours['tflops']:,.0f}, "
                f"{ours['tflops'] / theirs['tflops']:.2f}× theirs.")
    return sentence + (launch_caveat([ours, theirs]) if caveat else "") + " Their published figures are from other GPUs."


def same_gpu_sentence(points: list[dict], published: list[dict], gpu: str = "this GPU", caveat: bool = True) -> str:
    """FA-3 against FA-2 on one GPU, beside what the papers' points seem to say: the measured ratio of our FA-3
    style kernel to SDPA's FA-2 backend at the setting (evolution_points), and the papers' FA-3 ÷ FA-2, which mixes
    two GPUs. "" where either kernel has no number here. With the launch caveat where either call is launch_bound,
    unless caveat is False."""
    measured = {point["algorithm"]: point for point in points if point.get("tflops")}
    if not (measured.get("fa3") and measured.get("sdpa_flash")):
        return ""
    rate = {algorithm: point["tflops"] for algorithm, point in measured.items()}
    paper = {entry["short"]: entry for entry in published}
    sentence = (f"On {gpu} at this setting our FA-3 style kernel runs {rate['fa3']:,.0f} TFLOPS and SDPA's FA-2 "
                f"backend {rate['sdpa_flash']:,.0f}: {fmt_ratio(rate['fa3'] / rate['sdpa_flash'])}, one GPU, one "
                f"setting.")
    if caveat:
        sentence += launch_caveat([measured["fa3"], measured["sdpa_flash"]])
    fa2, fa3 = paper.get("FA2"), paper.get("FA3")
    if fa2 and fa3:
        sentence += (f" The papers' points ({fa2['tflops']:,} on an {fa2['gpu']}, {fa3['tflops']:,} on an "
                     f"{fa3['gpu']}) differ by {fmt_ratio(fa3['tflops'] / fa2['tflops'])}, but that is two GPUs "
                     f"as well as two algorithms.")
    return sentence


_CALL_NAMES = {"fa3": "ours", "fa4_authors": "FA-4", "sdpa_flash": "SDPA's FA-2"}


def launch_caveat(points: list[dict]) -> str:
    """The words ' But a call under 0.2 ms (here ours 0.145 ms, FA-4 0.070 ms) can be as much its launch…' where
    any of the compared points (evolution_points) is launch_bound, naming those calls' times; else ""."""
    short = [point for point in points if point.get("launch_bound")]
    if not short:
        return ""
    times = ", ".join(f"{_CALL_NAMES.get(point['algorithm'], point['algorithm'])} {fmt_ms(point['time_ms'])}"
                      for point in short)
    ratios = "these ratios" if len(points) > 2 else "this"
    return (f" But a call under {fmt_ms(LAUNCH_BOUND_MS)} (here {times}) can be as much its launch on the host as its "
            f"kernel, so {ratios} may compare launch paths more than kernels; the longer settings compare the "
            f"kernels.")


def ratio_sentences(points: list[dict], published: list[dict], gpu: str = "this GPU", same_gpu: bool = True) -> str:
    """The evolution scene's caption of ratios: authors_sentence, then (same_gpu) same_gpu_sentence, with one launch
    caveat at the end for the calls they compare; "" where neither has its two numbers."""
    measured = {point["algorithm"]: point for point in points if point.get("tflops")}
    authors = authors_sentence(points, gpu, caveat=False)
    fa2 = same_gpu_sentence(points, published, gpu, caveat=False) if same_gpu else ""
    compared = [algorithm for algorithm, said in (("fa3", authors or fa2), ("fa4_authors", authors),
                                                   ("sdpa_flash", fa2)) if said]
    ratios = " ".join(filter(None, (authors, fa2))) + launch_caveat([measured[a] for a in compared])
    short = [point for algorithm, point in measured.items() if point.get("launch_bound") and algorithm not in compared]
    return " ".join(filter(None, (ratios, short_calls_sentence(short))))


def short_calls_sentence(points: list[dict]) -> str:
    """The chart's other bars whose calls may be mostly their launch at this length (launch_bound), named with their
    times: "At this length a call under 0.2 ms can be mostly its launch, so these bars may undersell their kernels:
    flash (ours) 0.161 ms."; "" where none is."""
    if not points:
        return ""
    calls = ", ".join(f"{point.get('label', point['algorithm'])} {fmt_ms(point['time_ms'])}" for point in points)
    bars = "this bar may undersell its kernel" if len(points) == 1 else "these bars may undersell their kernels"
    return f"At this length a call under {fmt_ms(LAUNCH_BOUND_MS)} can be mostly its launch, so {bars}: {calls}."


# -- FA-1 order: loop order or idle SMs ------------------------------------------------------------------

@dataclass(frozen=True)
class Fa1Gap:
    """How much slower our FA1-order kernel is than our FA-2 kernel at the talk's shape, split into what the
    loop order costs (the ratio at a shape that fills the GPU unsplit) and what is left at the talk's shape
    (the rest), with the bytes the loop order moves. Ratios are FA1-order time ÷ FA-2 time; None where the
    records are missing."""
    seq_len: int                   # the talk's length, where talk_ratio is taken
    talk_ratio: float | None       # at the talk's shape, at seq_len
    programs: int                  # the FA1-order kernel's programs at the talk's shape: batch·heads × splits
    splits: int                    # the programs one (batch, head) is divided into (FlashAttention-1's heuristic)
    sm_count: int | None
    split_seq_len: int | None      # where the filling shape was timed (the split uses both shapes there)
    filling: tuple[int, int] | None  # (batch, heads) of the shape that fills the GPU
    loop_order: float | None       # the ratio at the filling shape
    idle_sms: float | None         # the talk shape's ratio at split_seq_len ÷ loop_order
    round_trip_bytes: int | None   # the cost model's O, m, l round trips at the talk's shape and seq_len
    round_trip_ms: float | None    # the counted DRAM bytes at the measured copy bandwidth: their least time
    sentence: str


def _time(records: list[dict], algorithm: str, seq_len: int, batch: int, heads: int) -> float | None:
    return next((r["time_ms"] for r in records if r["algorithm"] == algorithm and r["seq_len"] == seq_len
                 and r["batch"] == batch and r["heads"] == heads and r["status"] == "ok" and r.get("time_ms")), None)


def _counted(records: list[dict], algorithm: str, seq_len: int, batch: int, heads: int) -> int | None:
    """The DRAM bytes the GPU's counters read for a record (read + written), None where not counted."""
    record = next((r for r in records if r["algorithm"] == algorithm and r["seq_len"] == seq_len
                   and r["batch"] == batch and r["heads"] == heads and r["status"] == "ok"), None)
    if record is None or record.get("dram_read_bytes") is None:
        return None
    return int(record["dram_read_bytes"]) + int(record.get("dram_write_bytes") or 0)


def _time_ratio(records: list[dict], seq_len: int, batch: int, heads: int) -> float | None:
    v1, v2 = _time(records, "fa1", seq_len, batch, heads), _time(records, "fa2", seq_len, batch, heads)
    return v1 / v2 if v1 and v2 else None


def _fa1_splits(shape: Shape, sm_count: int | None, tiles: tuple[int, int] | None) -> int:
    import costmodel  # the kernel's own heuristic, with the tiles it ran
    block_m = (tiles or specs.spec("fa1").assumed_tiles or (64, 64))[0]
    return costmodel.fa1_splits(shape.batch * shape.heads, costmodel.n_blocks(shape.seq_len, block_m),
                                sm_count * costmodel.FA1_PROGRAMS_PER_SM if sm_count else None)


def _fa1_tiles(records: list[dict], shape: Shape) -> tuple[int, int] | None:
    """The tiles the FA1-order kernel ran at the shape, as its record says; else its spec's assumed tiles."""
    record = next((r for r in records if r["algorithm"] == "fa1" and r["seq_len"] == shape.seq_len
                   and r["batch"] == shape.batch and r["heads"] == shape.heads and r.get("block_m")), None)
    if record is not None:
        return int(record["block_m"]), int(record["block_n"])
    return specs.spec("fa1").assumed_tiles


def fa1_gap(records: list[dict], talk: Shape, sm_count: int | None, copy_gbps: float | None = None) -> Fa1Gap:
    """The talk-shape gap between our FA1-order and FA-2 kernels, split into loop order and the rest, and what
    the loop order moves: the O, m, l round trips in HBM.

    records: the recording's records of every shape (filtered here to head_dim, dtype, causal). The filling
    shape: a (batch, heads) whose batch·heads ≥ 2 × sm_count, where fa1 and fa2 both ran at one length that the
    talk's shape ran too (the one closest to seq_len). copy_gbps: the measured copy bandwidth (GB/s), for the
    round trips' least time."""
    import costmodel
    from story.records import prefill_records
    seq_len, batch, heads = talk.seq_len, talk.batch, talk.heads
    mine = [r for r in prefill_records(records) if r["head_dim"] == talk.head_dim and r["dtype"] == talk.dtype
            and bool(r["causal"]) == talk.causal]
    ratio = _time_ratio(mine, seq_len, batch, heads)
    tiles = _fa1_tiles(mine, talk)
    splits = _fa1_splits(talk, sm_count, tiles)
    programs = batch * heads * splits
    split = None
    if sm_count:
        shapes = sorted({(r["seq_len"], r["batch"], r["heads"]) for r in mine
                         if r["batch"] * r["heads"] >= 2 * sm_count and r["algorithm"] == "fa1"},
                        key=lambda s: (abs(s[0].bit_length() - seq_len.bit_length()), -s[0], -s[1] * s[2]))
        for n, b, h in shapes:
            filling, at_talk = _time_ratio(mine, n, b, h), _time_ratio(mine, n, batch, heads)
            if filling and at_talk:
                split = (n, (b, h), filling, at_talk / filling)
                break
    shape = f"batch {batch} × {heads} heads"
    on = f" on {sm_count} SMs" if sm_count else ""
    if splits > 1:
        layout = (f"{batch * heads} heads, each split into {splits} programs by FlashAttention-1's own heuristic: "
                  f"{programs} programs{on}")
    else:
        layout = f"one program per head: {programs} programs{on}"
    if ratio is None:
        sentence = (f"Our FA1-order and FA-2 kernels were not both timed at {fmt_tokens(seq_len)} tokens for {shape}: "
                    f"no gap to split.")
    else:
        sentence = (f"At the talk's shape ({shape}; {layout}) our FA1-order kernel takes "
                    f"{fmt_ratio(ratio)} the FA-2 kernel's time at {fmt_tokens(seq_len)} tokens.")
    trips = trips_ms = None
    moves = ""
    if tiles:
        parts = costmodel.fa1_traffic(talk, *tiles, splits=splits)
        trips = sum(part.total for part in parts if "O, m, l" in part.name)
        counted = {a: _counted(mine, a, seq_len, batch, heads) for a in ("fa1", "fa2")}
        moves = (f" The loop order's price is bytes: every Q block's O, m and l go to HBM and back at each K/V "
                 f"tile, {fmt_bytes(trips)} at this setting by the cost model")
        if counted["fa1"]:
            against = f" against FA-2's {fmt_bytes(counted['fa2'])}" if counted["fa2"] else ""
            caught = " (L2 catches the rest)" if counted["fa1"] < trips else ""
            moves += f"; the GPU's counters read {fmt_bytes(counted['fa1'])} of DRAM traffic{caught}{against}"
            if copy_gbps:
                trips_ms = counted["fa1"] / (copy_gbps * 1e9) * 1e3
                mine_ms = _time(mine, "fa1", seq_len, batch, heads)
                of = f" of its {fmt_ms(mine_ms)}" if mine_ms else ""
                moves += (f", which at the measured copy bandwidth ({copy_gbps / 1000:.2f} TB/s) take "
                          f"{fmt_ms(trips_ms)}{of}")
            moves += "."
        else:
            moves += " (some of it stays in L2: the counters did not read this setting)."
    if split is None:
        needed = f" (batch·heads ≥ {2 * sm_count})" if sm_count else ""
        sentence += (f" Which part is loop order and which is the talk's shape needs both kernels timed at a shape "
                     f"that fills the GPU{needed}: not recorded.")
        sentence += moves
        return Fa1Gap(seq_len, ratio, programs, splits, sm_count, None, None, None, None, trips, trips_ms, sentence)
    n, (b, h), loop, idle = split
    sentence += (f" At a shape that fills the GPU with one program per head (batch {b} × {h} heads, "
                 f"{fmt_tokens(n)} tokens) the gap is {fmt_ratio(loop)}: that is the loop order (the FA-2 paper "
                 f"measured about 2× on an A100).")
    if idle >= 1.15:
        sentence += (f" The other {fmt_ratio(idle)} is SMs the talk's shape leaves idle (the talk's shape at "
                     f"{fmt_tokens(n)}: {fmt_ratio(loop * idle)} ÷ {fmt_ratio(loop)}).")
    elif idle > 1 / 1.15:
        sentence += (f" The split keeps the SMs busy: at {fmt_tokens(n)} the talk's shape's gap is "
                     f"{fmt_ratio(loop * idle)}, about the same.")
    else:
        sentence += f" At {fmt_tokens(n)} the talk's shape's gap is smaller, {fmt_ratio(loop * idle)}."
    sentence += moves
    return Fa1Gap(seq_len, ratio, programs, splits, sm_count, n, (b, h), loop, idle, trips, trips_ms, sentence)
