"""The inside scene, one program from the inside: what each warpgroup did over time, by Proton (a results file's "phases")."""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from fmt import fmt_tokens
from kernels import specs


# -- inside one program: what each warpgroup did, by Proton (a results file's "phases") -----------------------

GEMM_PHASES = ("qk", "pv")


def _program_span(program: dict) -> tuple[int, int]:
    """First record to last of the program (bench.results refuses a lane without spans)."""
    starts = [s[1] for lane in program["lanes"] for s in lane["spans"]]
    if not starts:
        raise ValueError(f"program {program.get('cta')} recorded no spans")
    return min(starts), max(s[2] for lane in program["lanes"] for s in lane["spans"])


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The intervals' union as disjoint intervals, in order: one sort, one pass (O(n log n))."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _union(intervals: list[tuple[int, int]]) -> int:
    return sum(end - start for start, end in _merged(intervals))


def _covered(spans: list[tuple[int, int]], union: list[tuple[int, int]]) -> int:
    """How much of `spans` lies inside `union` (disjoint, in order): the union's length below x is a prefix sum and a
    bisection away, so each span costs O(log m) (comparing every pair was O(n·m))."""
    starts = [a for a, _ in union]
    below = [0]  # below[i]: the union's length before its interval i
    for a, b in union:
        below.append(below[-1] + b - a)

    def length_below(x: int) -> int:
        i = bisect.bisect_right(starts, x) - 1
        return 0 if i < 0 else below[i] + min(x, union[i][1]) - union[i][0]
    return sum(length_below(b) - length_below(a) for a, b in spans)


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
    # the time under some other warpgroup's GEMM, counted once where several overlap: the GEMMs' union
    return min(1.0, _covered(soft, _merged(busy)) / total)


def _typical_program(recording: dict) -> dict:
    """The recorded program of median length (not the fastest or the slowest of the few kept)."""
    programs = sorted(recording["programs"], key=lambda p: _program_span(p)[1] - _program_span(p)[0])
    return programs[len(programs) // 2]


LANE_NAMES = {"producer": "producer warp (TMA loads)", "warpgroup 0": "its one warpgroup (every phase)"}


@dataclass(frozen=True)
class RecordedProgram:
    """One kernel's typical recorded program and its numbers: what the scene needs of a recording, worked out once
    per recording (page/stage.py does it as it reads a file, so a rerun does not go through its spans again)."""
    kernel: str
    cta: int
    sm: int
    microseconds: float       # the program's span, first record to last, at the recorded SM clock
    gemm_busy: float
    softmax_overlap: float | None
    lanes: list[dict]         # [{"label", "spans": [[phase, start_us, end_us], ...]}] for viz.phases_figure
    # which recording it is: its launch's (batch, heads, seq_len, head_dim, causal) and when (recorded_at, UTC; "" in
    # a file before the field): two recordings of one kernel differ by their run, and a scene that quotes one says which
    setting: tuple = ()
    recorded_at: str = ""

    @property
    def launch_words(self) -> str:
        """"one launch at batch 1 × 4 heads, N = 4K, head_dim 128": what was recorded ("" where unknown)."""
        if not self.setting:
            return ""
        batch, heads, seq_len, head_dim, causal = self.setting
        return (f"one launch at batch {batch} × {heads} heads, N = {fmt_tokens(seq_len)}, head_dim {head_dim}"
                f"{', causal' if causal else ''}")

    @property
    def day(self) -> str:
        return self.recorded_at[:10]


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


def recorded_programs(phases: list[dict] | tuple[dict, ...]) -> tuple[RecordedProgram, ...]:
    """The kernels with a recorded program, in the specs' order (those with a Proton facet: the teaching kernel, then
    the FA-3 style kernel): each one's typical program, its span, GEMM-busy share and softmax overlap. O(n log n) in
    the spans (a results file may hold 16 lanes × 20,000)."""
    out = []
    for kernel in (spec.key for spec in specs.with_facet("proton")):
        recording = next((p for p in phases if p["kernel"] == kernel), None)
        if recording is not None:
            out.append(recorded_program(recording))
    return tuple(out)


def recorded_program(recording: dict) -> RecordedProgram:
    """One phase recording's typical program: its span (µs at the recorded clock), GEMM-busy share, softmax overlap
    and its lanes in µs from the program's first record."""
    program = _typical_program(recording)
    clock_mhz = recording.get("sm_clock_mhz") or 1000.0  # Proton's own assumption when the clock is unknown
    start, end = _program_span(program)
    to_us = 1.0 / clock_mhz
    lanes = [{"label": LANE_NAMES.get(lane["role"], lane["role"]),
              "spans": [[s[0], (s[1] - start) * to_us, (s[2] - start) * to_us] for s in lane["spans"]]}
             for lane in program["lanes"]]
    setting = tuple(recording.get(key) for key in ("batch", "heads", "seq_len", "head_dim", "causal"))
    return RecordedProgram(recording["kernel"], program["cta"], program["sm"], (end - start) * to_us,
                           gemm_busy(program), softmax_overlap(program), lanes,
                           setting if None not in setting else (), str(recording.get("recorded_at") or ""))


def step_programs(phases: list[dict] | tuple[dict, ...]) -> dict[str, RecordedProgram]:
    """The ablation's phase recordings (bench --ladder --phases: each names its step in "config"), each step's typical
    program by the step's name."""
    return {p["config"]: recorded_program(p) for p in phases if p.get("config")}


def phase_kernels(programs: tuple[RecordedProgram, ...], records: list[dict], facts: dict | None,
                  names: dict[str, str] | None = None) -> list[PhaseKernel]:
    """The recorded programs (recorded_programs: once per recording) as the scene quotes them at the talk's setting.
    records: every algorithm's at the talk's setting (the measured TFLOPS the busy fraction is checked against);
    names: each algorithm's short name."""
    roof = (facts or {}).get("matmul_tflops")
    out = []
    for p in programs:
        measured = next((r for r in records if r["algorithm"] == p.kernel and r["status"] == "ok" and r.get("tflops")),
                        None)
        out.append(PhaseKernel(p.kernel, (names or {}).get(p.kernel, p.kernel), p.cta, p.sm, p.microseconds,
                               p.gemm_busy, p.softmax_overlap, measured["tflops"] / roof if measured and roof else None,
                               p.lanes))
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
