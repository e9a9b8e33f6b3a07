"""Scene 10, inside one program: what each warpgroup did over time, by Proton (a results file's "phases")."""
from __future__ import annotations

from dataclasses import dataclass

from kernels import specs


# -- inside one program: what each warpgroup did, by Proton (a results file's "phases") -----------------------

GEMM_PHASES = ("qk", "pv")


def _program_span(program: dict) -> tuple[int, int]:
    spans = [s for lane in program["lanes"] for s in lane["spans"]]
    return min(s[1] for s in spans), max(s[2] for s in spans)


def _union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def gemm_busy(program: dict) -> float:
    """Share of the program's time (first record to last) during which some warpgroup is inside a GEMM scope
    (qk or pv): the tensor cores' busy fraction as the scopes can tell it. A warpgroup in a GEMM scope is issuing a
    wgmma or waiting on one; an issued wgmma also runs on after its scope ends (FA-3 overlaps it with softmax)."""
    start, end = _program_span(program)
    busy = _union([(s[1], s[2]) for lane in program["lanes"] for s in lane["spans"] if s[0] in GEMM_PHASES])
    return busy / (end - start) if end > start else 0.0


def phase_fractions(lane: dict) -> dict[str, float]:
    """Share of the lane's recorded span spent in each phase."""
    spans = lane["spans"]
    if not spans:
        return {}
    total = max(s[2] for s in spans) - min(s[1] for s in spans)
    out: dict[str, float] = {}
    for name, start, end in spans:
        out[name] = out.get(name, 0.0) + (end - start) / total if total else 0.0
    return out


def softmax_overlap(program: dict) -> float | None:
    """Of the time the first consumer spends in its softmax, the share during which another warpgroup is inside a
    GEMM scope: the ping-pong, measured. None with one warpgroup (the teaching kernel: nothing can overlap)."""
    lanes = [lane for lane in program["lanes"] if not lane.get("role", "").startswith("producer")]
    if len(lanes) < 2:
        return None
    soft = [(a, b) for n, a, b in lanes[0]["spans"] if n == "softmax"]
    busy = [(a, b) for lane in lanes[1:] for n, a, b in lane["spans"] if n in GEMM_PHASES]
    total = sum(b - a for a, b in soft)
    if not total:
        return None
    covered = sum(max(0, min(b, d) - max(a, c)) for a, b in soft for c, d in busy)
    return min(1.0, covered / total)


def _typical_program(recording: dict) -> dict:
    """The recorded program of median length (not the fastest or the slowest of the few kept)."""
    programs = sorted(recording["programs"], key=lambda p: _program_span(p)[1] - _program_span(p)[0])
    return programs[len(programs) // 2]


LANE_NAMES = {"producer": "producer warp (TMA loads)", "warpgroup 0": "its one warpgroup (every phase)"}


@dataclass(frozen=True)
class PhaseKernel:
    """One kernel's recorded program, as the scene shows and quotes it."""
    kernel: str
    label: str                # the kernel's short name (viz.theme.short_labels, passed in)
    cta: int
    sm: int
    microseconds: float       # the program's span, first record to last, at the recorded SM clock
    gemm_busy: float
    softmax_overlap: float | None
    rate_share: float | None  # its measured TFLOPS at the talk's setting ÷ the measured matmul roof
    lanes: list[dict]         # [{"label", "spans": [[phase, start_us, end_us], ...]}] for viz.phases_figure


def phase_kernels(phases: list[dict], records: list[dict], facts: dict | None,
                  names: dict[str, str] | None = None) -> list[PhaseKernel]:
    """The kernels with a recorded program, in the specs' order (those with a Proton facet: the teaching kernel, then
    the FA-3 style kernel). records: every algorithm's at the talk's setting
    (the measured TFLOPS the busy fraction is checked against); names: each algorithm's short name."""
    roof = (facts or {}).get("matmul_tflops")
    out = []
    for kernel in (spec.key for spec in specs.with_facet("proton")):
        recording = next((p for p in phases if p["kernel"] == kernel), None)
        if recording is None:
            continue
        program = _typical_program(recording)
        clock_mhz = recording.get("sm_clock_mhz") or 1000.0  # Proton's own assumption when the clock is unknown
        start, end = _program_span(program)
        to_us = 1.0 / clock_mhz
        lanes = [{"label": LANE_NAMES.get(lane["role"], lane["role"]),
                  "spans": [[s[0], (s[1] - start) * to_us, (s[2] - start) * to_us] for s in lane["spans"]]}
                 for lane in program["lanes"]]
        measured = next((r for r in records if r["algorithm"] == kernel and r["status"] == "ok" and r.get("tflops")),
                        None)
        out.append(PhaseKernel(kernel, (names or {}).get(kernel, kernel), program["cta"], program["sm"],
                               (end - start) * to_us, gemm_busy(program), softmax_overlap(program),
                               measured["tflops"] / roof if measured and roof else None, lanes))
    return out


BUSY_AGREES = 0.10  # the scopes' busy fraction and the rate's share of the roof agree within this


def busy_sentence(k: PhaseKernel) -> str:
    """The busy fraction against the kernel's measured rate ÷ roof: within 10 %, or what the scopes count that the
    rate does not."""
    busy = f"{k.label}: some warpgroup is inside a GEMM scope {k.gemm_busy:.0%} of the program's time"
    if k.rate_share is None:
        return busy + "; no measured rate at the talk's setting to check it against."
    rate = f"its measured rate is {k.rate_share:.0%} of the matmul roof"
    if abs(k.gemm_busy - k.rate_share) <= BUSY_AGREES:
        return f"{busy}, and {rate}: the two agree within {BUSY_AGREES:.0%}."
    return (f"{busy}; {rate}. They differ: a GEMM scope counts a warpgroup issuing a wgmma and waiting for it, not "
            f"the tensor cores' cycles (an issued wgmma is not a busy tensor core), and one program is not the "
            f"whole launch (its prologue, tail and the other programs on the SM).")


def phases_sentence(kernels: list[PhaseKernel]) -> str:
    """What to look at, in this recording's numbers."""
    fa2 = next((k for k in kernels if k.kernel == "fa2"), None)
    fa3 = next((k for k in kernels if k.kernel == "fa3"), None)
    parts = []
    if fa2:
        parts.append(f"In {fa2.label} one warpgroup does everything in turn: while it runs the softmax no GEMM "
                     f"(S = QKᵀ, O += P·V) of its program runs.")
    if fa3 and fa3.softmax_overlap is not None:
        parts.append(f"In {fa3.label} a producer warp loads while two consumers take turns: "
                     f"{fa3.softmax_overlap:.0%} of the first consumer's softmax time the other is inside a GEMM.")
    elif fa3:
        parts.append(f"In {fa3.label} no consumer's softmax overlaps another's GEMM in this recording: that is a "
                     f"finding about our kernel, not drawn as if it did.")
    durations = [(k, mean_span_us(k, "qk"), mean_span_us(k, "pv")) for k in kernels]
    shorter = [(k, qk, pv) for k, qk, pv in durations if qk and pv and pv < 0.75 * qk]
    if shorter:
        k, qk, pv = shorter[0]
        parts.append(f"O += P·V does as many FLOPs as S = QKᵀ, yet in {k.label} its scope lasts {pv:.2f} µs against "
                     f"QKᵀ's {qk:.2f} µs on average: a scope times one warpgroup from issuing a GEMM to waiting on "
                     f"it, not the tensor cores' work.")
    return " ".join(parts)


def mean_span_us(k: PhaseKernel, phase: str) -> float | None:
    """The mean length (µs) of a phase's spans in a kernel's drawn program, None where it has none."""
    spans = [end - start for lane in k.lanes for name, start, end in lane["spans"] if name == phase]
    return sum(spans) / len(spans) if spans else None
