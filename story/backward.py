"""The backward scene's numbers and sentences: the memory a training step keeps for attention (standard attention's
autograd keeps N × N per head, flash O and the LSE), the backward's measured TFLOPS beside the forward's and the
peers', and the backward's tile walk (kernels/fa2_bwd.py's visit order)."""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_bytes, fmt_tokens
from kernels import specs
from story.records import failure_text, held_and_tried

BACKWARD = "backward"
BENCH_COMMAND = "python -m bench --backward"
NO_BACKWARD_RECORDS = f"this recording has no backward records (`{BENCH_COMMAND}` records them)"
# the memory chart's formulas: the algorithm whose backward records carry the measured peaks, and what each counts
STANDARD, FLASH = "torch_naive", "fa2"
TRAINING_FORMULAS = {
    STANDARD: (costmodel.standard_training_bytes, "fp32 softmax + P + O + grads"),
    FLASH: (costmodel.flash_training_bytes, "O + LSE + Δ + grads"),
}
TRAINING_TITLE = "A training step's memory for attention, beyond Q, K, V, dO"
# the TFLOPS bars, in order: (algorithm, pass, label)
# (each kernel by the short name every scene gives it, its spec's; the peers' with the backend that ran on Hopper)
BARS = tuple((algorithm, pass_, f"{specs.spec(algorithm).short}{note}, {pass_ if pass_ == BACKWARD else 'forward'}")
             for algorithm, pass_, note in (("fa3", BACKWARD, ""), ("fa2", BACKWARD, ""),
                                            ("sdpa_default", BACKWARD, " (cuDNN)"),
                                            ("sdpa_flash", BACKWARD, " (FA-2)"),
                                            ("fa3", "prefill", ""), ("fa2", "prefill", "")))
# A live page times the bars up to the backward FLOPs of B2 H16 d128 at 32K without the mask (44 TFLOP: 0.15 s a call
# for the slowest bar, SDPA's FA-2 at ~300 TFLOPS; each bar is one forward + backward for its peak memory, then the
# backward and forward + backward timed, about a second a bar); float32 counts 8× (no tensor cores at bf16's rate).
# Past that the scene quotes the recording and says why.
LIVE_LIMIT = Shape(32768, 2, 16, 128, "bfloat16", False, pass_=BACKWARD)
FP32_SLOWDOWN = 8


def _counted_flops(shape: Shape) -> tuple[float, float]:
    """The backward's FLOPs at this shape, and as the live limit counts them (float32 × FP32_SLOWDOWN)."""
    flops = costmodel.pass_flops(shape.at(pass_=BACKWARD))
    return flops, flops * (FP32_SLOWDOWN if shape.dtype == "float32" else 1)


def live_fits(shape: Shape) -> bool:
    """Whether a live page times the backward bars at this shape (LIVE_LIMIT)."""
    return _counted_flops(shape)[1] <= costmodel.pass_flops(LIVE_LIMIT)


def live_limit_why(shape: Shape) -> str:
    """Why a live page quotes the recording's bars at this shape, as plain text."""
    limit = costmodel.pass_flops(LIVE_LIMIT)
    flops, counted = _counted_flops(shape)
    scaled = (f", which counts as {counted / 1e12:,.0f} in float32 ({FP32_SLOWDOWN}× slower without bf16's "
              "tensor-core rate)" if counted != flops else "")
    return (f"timed live up to {limit / 1e12:,.0f} TFLOP a backward, B{LIVE_LIMIT.batch} H{LIVE_LIMIT.heads} "
            f"d{LIVE_LIMIT.head_dim} at N = {fmt_tokens(LIVE_LIMIT.seq_len)}; this one is {flops / 1e12:,.1f} TFLOP"
            f"{scaled}")


OURS = ("fa3", "fa2")  # the sentence speaks of the first of ours measured at the setting
TFLOPS_RULE = "backward TFLOPS = 2.5 × the forward's FLOPs ÷ the backward's time (halved when causal)"


def backward_records(records) -> list[dict]:
    """The records of these that are backward passes (`pass` = "backward")."""
    return [r for r in records if r.get("pass") == BACKWARD]


def _same_setting(record: dict, shape: Shape, pass_: str) -> bool:
    one = Shape.of_record(record)
    return one.kv_len == one.seq_len and one.at(seq_len=1, kv_len=1) == shape.at(seq_len=1, kv_len=1, pass_=pass_)


def at_setting(records, shape: Shape, pass_: str = BACKWARD) -> list[dict]:
    """The records of this pass at the talk's setting (its N aside)."""
    return [r for r in records if _same_setting(r, shape, pass_)]


def measured_need(record: dict, said: tuple[int, int] | None) -> int | None:
    """At least what a training step needed beyond Q, K, V and dO where it ran out of memory, as its allocator
    message measured it (said: story.records.held_and_tried of it): what the process held when an allocation failed
    (the CUDA context and the allocator's reserve included), plus that allocation, less the four inputs (dO is O's
    size). None where the message does not say."""
    if said is None:
        return None
    shape = Shape.of_record(record)
    return max(0, said[0] + said[1] - costmodel.inputs_bytes(shape) - costmodel.output_bytes(shape))


def _training_failure(record: dict, formula_need: int | None, said: tuple[int, int] | None,
                      measured: int | None) -> str:
    """The ✕'s hover: what the allocator measured (measured_need) beside the formula's bound, else failure_text."""
    if said is None or measured is None or record["status"] != "oom":
        return failure_text(record)
    bound = (f"; the formula's lower bound: {fmt_bytes(formula_need)}" if formula_need else "")
    return (f"out of memory: the process held {fmt_bytes(said[0])} when a {fmt_bytes(said[1])} allocation failed, "
            f"so the step needs at least {fmt_bytes(measured)} beyond Q, K, V, dO (measured, the CUDA context "
            f"included){bound}")


def with_training_failures(records: list[dict]) -> list[dict]:
    """Backward records as the memory chart draws them: a failed one with its `failure` text, an out-of-memory one
    with what the step needs there (its ✕): the larger of what its allocator message measured (measured_need) and
    the training formula's lower bound (none for an algorithm without either). Each message is read once."""
    out = []
    for r in records:
        if r["status"] == "ok":
            out.append(r)
            continue
        formula = TRAINING_FORMULAS.get(r["algorithm"])
        bound = formula[0](Shape.of_record(r)) if formula else None
        said = held_and_tried(r)
        measured = measured_need(r, said)
        needs = [n for n in (bound, measured) if n]
        out.append({**r, "failure": _training_failure(r, bound, said, measured),
                    "need_bytes": max(needs) if needs else None})
    return out


def training_wall(records: list[dict]) -> dict | None:
    """The chart's shaded wall: the shortest N at which standard attention's backward record ran out of memory."""
    oom = [r for r in records if r["algorithm"] == STANDARD and r["status"] == "oom"]
    first = min(oom, key=lambda r: r["seq_len"], default=None)
    if first is None:
        return None
    return {"seq_len": first["seq_len"],
            "text": f"standard attention's training step: out of memory at N = {fmt_tokens(first['seq_len'])} "
                    "(measured)"}


def formula_wall(shape: Shape, hbm_bytes: int | None) -> dict | None:
    """The chart's shaded wall where no backward record measured one: from the first N whose standard training step
    (with Q, K, V and dO) outgrows the device by the formula."""
    if not hbm_bytes:
        return None
    wall = costmodel.standard_training_wall(hbm_bytes, shape)
    return {"seq_len": wall.fits_up_to + 1,
            "text": f"standard attention's training step outgrows the device past N ≈ {fmt_tokens(wall.fits_up_to)} "
                    "(formula, a lower bound)"}


def training_memory(shape: Shape) -> tuple[int, int, str]:
    """What a training step keeps for attention at this shape, with the gradients (the formulas' lower bounds):
    standard attention's bytes, flash's, and how many times less flash keeps ("49×")."""
    standard = costmodel.standard_training_bytes(shape)
    flash = costmodel.flash_training_bytes(shape)
    return standard, flash, f"{standard / flash:,.0f}×"


def memory_sentence(shape: Shape, hbm_bytes: int | None, records: list[dict] = ()) -> str:
    """What each training step keeps at the talk's N, and where standard attention's wall falls on this device: by
    the formula's lower bound, and where the backward records (at the talk's setting) ran out of memory short of
    it, by them."""
    standard, flash, less = training_memory(shape)
    kept = "softmax's fp32 output and P" if shape.dtype_bytes != costmodel.SCORE_BYTES else "P (fp32)"
    said = (f"At N = {fmt_tokens(shape.seq_len)}, standard attention's autograd keeps {kept} "
            f"for the backward, N × N per head: with the gradients at least {fmt_bytes(standard)}. Flash keeps O and "
            f"one LSE per row: {fmt_bytes(flash)} with the gradients, {less} less.")
    if hbm_bytes:
        wall = costmodel.standard_training_wall(hbm_bytes, shape)
        said += (f" On this device's {fmt_bytes(hbm_bytes)}, with Q, K, V and dO, the standard step's lower bound "
                 f"fits up to N ≈ {fmt_tokens(wall.fits_up_to)}")
        measured = training_wall(records)
        if measured and measured["seq_len"] <= wall.fits_up_to:  # the recording's wall comes first: say so
            said += (f", but the recording ran out of memory from N = {fmt_tokens(measured['seq_len'])}: the "
                     f"backward's dP, dS and autograd's temporaries come on top of the bound{_peak_words(records)}. "
                     f"N = {fmt_tokens(shape.seq_len)} is "
                     + ("past that: the standard step cannot run here." if shape.seq_len >= measured["seq_len"]
                        else "short of it."))
        else:
            said += (f"; N = {fmt_tokens(shape.seq_len)} is "
                     + ("within that bound (the backward's dP and dS come on top of it)."
                        if shape.seq_len <= wall.fits_up_to else "past it: the standard step cannot run here."))
    return said


def _peak_words(records: list[dict]) -> str:
    """" (measured at N = 8K: 32.1 GiB, 2.6× the bound)": standard attention's longest measured peak against the
    formula there; empty where none was measured."""
    peaks = [r for r in records if r["algorithm"] == STANDARD and r["status"] == "ok" and r.get("peak_extra_bytes")]
    if not peaks:
        return ""
    r = max(peaks, key=lambda r: r["seq_len"])
    bound = costmodel.standard_training_bytes(Shape.of_record(r))
    return (f" (its measured peak at N = {fmt_tokens(r['seq_len'])}: {fmt_bytes(r['peak_extra_bytes'])}, "
            f"{r['peak_extra_bytes'] / bound:.1f}× the bound)")


@dataclass(frozen=True)
class Bar:
    label: str
    algorithm: str
    pass_: str
    tflops: float | None   # None: not measured at this setting
    note: str = ""         # why there is no number ("" when there is one)


def _bar_records(backward: list[dict], forward: list[dict], shape: Shape) -> list[tuple[tuple, list[dict]]]:
    """Per BARS entry, the records at the talk's setting and N (none, or the one it draws first)."""
    pools = {BACKWARD: at_setting(backward, shape, BACKWARD), "prefill": at_setting(forward, shape, "prefill")}
    return [((algorithm, pass_, label), [r for r in pools[pass_] if r["algorithm"] == algorithm
                                         and r["seq_len"] == shape.seq_len]) for algorithm, pass_, label in BARS]


def bar_records(backward: list[dict], forward: list[dict], shape: Shape) -> list[dict]:
    """The records tflops_bars draws at the talk's setting and N: what its caption may say of when and with which
    code they were measured (the scene's other lengths are not on its chart)."""
    return [found[0] for _, found in _bar_records(backward, forward, shape) if found]


def tflops_bars(backward: list[dict], forward: list[dict], shape: Shape) -> list[Bar]:
    """One bar per BARS entry at the talk's setting and N: the record's TFLOPS, or None and why."""
    bars = []
    for (algorithm, pass_, label), found in _bar_records(backward, forward, shape):
        if not found:
            bars.append(Bar(label, algorithm, pass_, None, "not measured at this setting"))
        elif found[0]["status"] != "ok" or not found[0].get("tflops"):
            bars.append(Bar(label, algorithm, pass_, None, failure_text(found[0]) if found[0]["status"] != "ok"
                            else "no TFLOPS in its record"))
        else:
            bars.append(Bar(label, algorithm, pass_, float(found[0]["tflops"])))
    return bars


@dataclass(frozen=True)
class OursAgainst:
    """Our fastest backward measured at the setting, and its TFLOPS as a ratio ("0.98×") of cuDNN's backward and of
    its own forward, where those were measured."""
    bar: Bar
    vs_cudnn: str | None
    vs_forward: str | None


def ours_against(bars: list[Bar]) -> OursAgainst | None:
    """Our fastest backward among the bars (fa3's where it ran, else the teaching fa2's) against cuDNN's backward and
    its own forward; None where none of ours was measured."""
    by = {(b.algorithm, b.pass_): b for b in bars}
    mine = next((key for key in OURS if by[(key, BACKWARD)].tflops), None)
    if mine is None:
        return None
    ours, cudnn, forward = by[(mine, BACKWARD)], by[("sdpa_default", BACKWARD)], by[(mine, "prefill")]
    return OursAgainst(ours, f"{ours.tflops / cudnn.tflops:.2f}×" if cudnn.tflops else None,
                       f"{ours.tflops / forward.tflops:.2f}×" if forward.tflops else None)


def tflops_sentence(bars: list[Bar], shape: Shape) -> str:
    """Our fastest backward measured here (fa3's where it ran, else the teaching fa2's) against cuDNN's backward and
    the same kernel's forward, where those were measured; which bars are missing."""
    said = [f"N = {fmt_tokens(shape.seq_len)}, {'causal' if shape.causal else 'no mask'}: {TFLOPS_RULE}."]
    mine = ours_against(bars)
    if mine is not None:
        if mine.vs_cudnn:
            said.append(f"The backward of {specs.spec(mine.bar.algorithm).short} runs at {mine.vs_cudnn} cuDNN's.")
        if mine.vs_forward:
            said.append(f"It reaches {mine.vs_forward} its own forward's TFLOPS.")
    missing = [b for b in bars if b.tflops is None]
    if missing and len(missing) == len(bars) and len({b.note for b in missing}) == 1:  # one reason for every bar
        said.append(f"No bars: all {len(bars)} {missing[0].note}.")
    elif missing:
        said.append("No bar: " + "; ".join(f"{b.label} ({b.note})" for b in missing) + ".")
    return " ".join(said)


INTRO = ("Training needs the backward pass too. Standard attention's autograd keeps the N × N probabilities for it; "
         "FlashAttention keeps only O and one log-sum-exp per row, and its backward recomputes S and P tile by tile "
         "from them.")


def _tiles(count: int) -> str:
    return f"{count} tile" if count == 1 else f"{count} tiles"


def walk_caption(seq_len: int, block: int, num_blocks: int, causal: bool, dkdv_tiles: int, dq_tiles: int) -> str:
    """What the walk shows, how it was made, and how many tiles each pass recomputes S and P for."""
    skipped = "; causal: none above the diagonal" if causal else ""
    return (f"One head, N = {seq_len}, {block}×{block} tiles ({num_blocks} a side{skipped}). Left, the dK/dV pass: one "
            f"program per K/V block walks its column of Q blocks, dK and dV staying on chip, recomputing S and P "
            f"for {_tiles(dkdv_tiles)}. Right, the dQ pass: one program per Q block walks its row, computing S, P "
            f"and dP a second time for {_tiles(dq_tiles)} (no atomics: the same gradients every run, at seven tile "
            "products a tile where an atomic dQ needs five). The order comes from kernels/fa2_bwd.py's grids and loop "
            "bounds, not traced (a test pins it to the tiles the kernels read in Triton's interpreter). On a GPU the "
            "programs run at once.")


MEMORY_NOT_LIVE = "the memory curves quote the recording: a live page times the backward at the slider's N only"


def source_words(gpu: str, created: str, live: bool, why: str) -> str:
    """Where recorded numbers come from, as plain text; on a live page, with why they are the recording's."""
    if not gpu:
        return "no recording"
    where = f"recorded on {gpu}" + (f", {created}" if created else "")
    return f"{where} ({why})" if live else where


def measured_words(records: list[dict], source: str) -> str:
    """What of the chart is measured: the recording's backward peaks at this setting, or none."""
    peaks = [r for r in records if r["status"] == "ok" and r.get("peak_extra_bytes")]
    if not peaks:
        return (f"Curves: formulas only; no measured peak at this setting ({source}; `{BENCH_COMMAND}` measures "
                "them).")
    return (f"Curves: formulas; dots: measured peaks of forward + backward beyond Q, K, V and dO ({len(peaks)} "
            f"records, {source}).")


def no_records_line(has_recording: bool) -> str:
    """The speed view's one line where there is nothing measured to draw."""
    return (NO_BACKWARD_RECORDS[0].upper() + NO_BACKWARD_RECORDS[1:] + "." if has_recording
            else f"No recording to read backward records from (`{BENCH_COMMAND}` records them).")
