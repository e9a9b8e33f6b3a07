"""The ablation scene, FA-3 idea by idea: the FA-3 paper's ablation re-enacted with our kernel. Each step of the ladder
(kernels/ladder.py: FA-2 order, then each row of kernels.fa3.LADDER) is measured side by side in one run at the
paper's ablation shape, with cuDNN as the reference; beside them the paper's own published steps (an H100, another
GPU). Every number here comes from records (bench --ladder, or the live run) or is a published figure, labelled."""
from __future__ import annotations

from dataclasses import dataclass

from fmt import fmt_ratio
from story.inside import RecordedProgram

# The steps in the ladder's order, each with what it changes (the names are kernels/ladder.py's: a test keeps them
# equal). The records' `config` is the step's name.
STEPS: tuple[tuple[str, str], ...] = (
    ("FA-2 order (ours)", "The teaching kernel: one warpgroup per program does everything in turn (wait for K, V; "
                          "QKᵀ; softmax; P·V); Triton pipelines the loads."),
    ("producer warp, 1 consumer (no ping-pong)", "TMA and wgmma, warp-specialized: a producer warp copies K, V with "
                                                 "TMA into a ring; one consumer warpgroup of 64 query rows does the "
                                                 "math (wgmma), its softmax with the tensor cores idle."),
    ("producer warp, 2 consumers in ping-pong", "Ping-pong: two consumer warpgroups take turns at the tensor cores "
                                                "(wgmma), one's softmax under the other's GEMM."),
    ("+ softmax overlapped with the next QKᵀ", "Inside a consumer: QKᵀ of tile j and P·V of tile j−1 are issued "
                                               "together; tile j's softmax runs while P·V finishes."),
    ("+ Q in registers", "QKᵀ reads Q from registers, loaded once: each tile's wgmma reads only K from shared memory."),
    ("+ named-barrier hand-off, paired K/V ring", "The turn passes through hardware named barriers; one ring entry "
                                                  "holds K_j with V_j−1: one wait and one release per tile."),
    ("+ conditional rescale (FA-4)", "FA-4's rescale: O is multiplied only when a row's max grew by more than 2⁸; on "
                                     "most tiles a warp skips it."),
)
REFERENCE = "cuDNN (PyTorch's default), reference"  # bench/ladder.py REFERENCE: a test keeps them equal
# each step's tick under its bar (a chart column's width at the room's 24 px: a dozen characters a line)
SHORT = {"FA-2 order (ours)": "FA-2 order", "producer warp, 1 consumer (no ping-pong)": "1 consumer",
         "producer warp, 2 consumers in ping-pong": "+ ping-pong",
         "+ softmax overlapped with the next QKᵀ": "+ overlap", "+ Q in registers": "+ Q in regs",
         "+ named-barrier hand-off, paired K/V ring": "+ named bar.", "+ conditional rescale (FA-4)":
         "+ cond. rescale", REFERENCE: "cuDNN (ref.)"}
SHAPE_TEXT = "batch 2 × 16 heads, N = 8K, head_dim 128, not causal, bf16"
LADDER_SHAPE = (8192, 2, 16, 128, False, "bfloat16", "prefill")  # SHAPE_TEXT's (seq_len, batch, heads, head_dim,
#                                                                   causal, dtype, pass), as a record has them
BENCH_COMMAND = "python -m bench --ladder --phases --out results/h200.json --merge-into"

# The FA-3 paper's steps at head_dim 128, N = 8K, FP16 forward, on an H100 SXM5 (another GPU than ours): FA-2 read
# from its forward benchmark figure; the rest from its text (ping-pong: "from around 570 to 620"; the
# intra-warpgroup overlap: "from 620 to around 640–660") and its ablation table. `ours` names the step of our ladder
# that adds the same idea (None: our ladder has no such row).
PUBLISHED_SOURCE = ("Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao. FlashAttention-3: Fast and Accurate Attention with "
                    "Asynchrony and Low-precision. NeurIPS 2024. arXiv:2407.08608 (§3.1, §3.2, §4.2)")
PUBLISHED_GPU = "H100 SXM5"


@dataclass(frozen=True)
class PublishedStep:
    label: str
    low: float
    high: float
    ours: str | None
    note: str

    @property
    def text(self) -> str:
        return f"≈ {self.low:,.0f}" if self.low == self.high else f"{self.low:,.0f}–{self.high:,.0f}"


PUBLISHED_STEPS: tuple[PublishedStep, ...] = (
    PublishedStep("FlashAttention-2", 350, 350, "FA-2 order (ours)",
                  "FA-2 (the authors' CUDA kernel) on the H100, read from the paper's forward benchmark figure"),
    PublishedStep("TMA + wgmma, no ping-pong", 540, 570, "producer warp, 1 consumer (no ping-pong)",
                  "FA-3 without the ping-pong schedule and without the in-warpgroup overlap"),
    PublishedStep("+ ping-pong of two warpgroups", 620, 620, "producer warp, 2 consumers in ping-pong",
                  "the ping-pong schedule: 'from around 570 to 620 TFLOPS'"),
    PublishedStep("+ softmax overlapped in a warpgroup", 640, 660, "+ softmax overlapped with the next QKᵀ",
                  "the intra-warpgroup overlap: 'from 620 to around 640–660 TFLOPS'"),
)


def step_names() -> tuple[str, ...]:
    return tuple(name for name, _ in STEPS)


def what_changed(name: str) -> str:
    return dict(STEPS).get(name, "")


def chart_data(bar_list: list[Bar], selected: str | None = None) -> dict:
    """The figure's plain data (viz.ablation_figure): the categories in order (a published step without a row of
    ours stands where the paper has it), our bars and the published ranges by category."""
    published_only = [p for p in PUBLISHED_STEPS if p.ours is None]
    ours = [{"category": SHORT.get(b.name, b.name), "name": b.name, "tflops": b.tflops, "vs_before": b.vs_before,
             "note": b.note, "kind": "reference" if b.reference else ("fa2" if b.name == STEPS[0][0] else "fa3"),
             "selected": b.name == selected} for b in bar_list]
    categories = [ours[0]["category"], *(p.label for p in published_only), *(o["category"] for o in ours[1:])]
    published = [{"category": SHORT.get(p.ours, p.ours) if p.ours else p.label, "low": p.low, "high": p.high,
                  "text": p.text, "note": p.note} for p in PUBLISHED_STEPS]
    return {"categories": categories, "ours": ours, "published": published}


@dataclass(frozen=True)
class Bar:
    """One step as the scene draws it: its measured TFLOPS (None: failed or not recorded, and why), and ÷ the step
    before it."""
    name: str
    what: str
    tflops: float | None
    vs_before: float | None   # this step's TFLOPS ÷ the previous step's (None for the first, or without numbers)
    note: str                 # why there is no number ("" when there is one)
    reference: bool = False   # cuDNN, drawn apart: not a step of the ladder


def bars(records: list[dict] | tuple[dict, ...]) -> list[Bar]:
    """The ladder's bars from one run's records (their `config` names the step): every step of STEPS in order, then
    the reference; a step the records lack or that failed keeps its place with a note, never a number."""
    by_step = {r.get("config"): r for r in records if r.get("config")}
    out: list[Bar] = []
    before = None
    for name, what in (*STEPS, (REFERENCE, "PyTorch's default attention on this GPU (cuDNN): the bar to beat.")):
        record = by_step.get(name)
        tflops = record.get("tflops") if record and record["status"] == "ok" else None
        note = "" if tflops else ("not in this recording" if record is None
                                  else f"{record['status']}: {record.get('message') or 'no time'}")
        reference = name == REFERENCE
        vs = tflops / before if tflops and before and not reference else None
        out.append(Bar(name, what, tflops, vs, note, reference))
        if not reference:
            before = tflops
    return out


def has_numbers(bar_list: list[Bar]) -> bool:
    return any(b.tflops for b in bar_list if not b.reference)


def ladder_sentence(bar_list: list[Bar], gpu: str) -> str:
    """What the run shows: first step to last, how many steps were faster than the one before, and the last against
    cuDNN. Empty without numbers."""
    steps = [b for b in bar_list if not b.reference]
    timed = [b for b in steps if b.tflops]
    if len(timed) < 2:
        return ""
    first, last = timed[0], timed[-1]
    faster = sum(1 for b in steps[1:] if b.vs_before is not None and b.vs_before > 1)
    compared = sum(1 for b in steps[1:] if b.vs_before is not None)
    text = (f"On {gpu}, one run: {first.name} {first.tflops:,.0f} TFLOPS → {last.name.lstrip('+ ')} "
            f"{last.tflops:,.0f} ({fmt_ratio(last.tflops / first.tflops)}); {faster} of {compared} steps faster than "
            f"the one before.")
    reference = next((b for b in bar_list if b.reference and b.tflops), None)
    if reference:
        text += f" cuDNN in the same run: {reference.tflops:,.0f} (the last step ÷ cuDNN: {last.tflops / reference.tflops:.2f}×)."
    return text


def other_run_sentence(bar_list: list[Bar], records: list[dict] | tuple[dict, ...]) -> str:
    """The last step is the shipped kernel, which the other scenes show from another run of the same recording at the
    same shape: where both have a number, both are said, so a reader who meets 672 there and 660 here knows why. ""
    where either is missing."""
    steps = [b for b in bar_list if not b.reference and b.tflops]
    main = next((r for r in records if r["algorithm"] == "fa3" and not r.get("config") and r["status"] == "ok"
                 and r.get("tflops") and (r["seq_len"], r["batch"], r["heads"], r["head_dim"], r["causal"], r["dtype"],
                                          r.get("pass") or "prefill") == LADDER_SHAPE), None)
    if not steps or main is None:
        return ""
    last = steps[-1]
    when = f" ({main['recorded_at'][:10]})" if main.get("recorded_at") else ""
    return (f"The last step is the kernel as it ships: the other scenes show it from the recording's main run at this "
            f"shape, {main['tflops']:,.0f} TFLOPS{when}, this run {last.tflops:,.0f}: two runs, "
            f"{abs(main['tflops'] / last.tflops - 1):.1%} apart.")


def no_records_sentence(live_problem: str = "") -> str:
    """One line for a recording without ladder records: what would make them, and why live could not."""
    live = f" Live: {live_problem.rstrip('.')}." if live_problem else ""
    return (f"This recording has no ladder records yet (`{BENCH_COMMAND}` on a Hopper GPU writes them): only the "
            f"paper's published steps are shown.{live}")


def step_lanes_title(name: str, program: RecordedProgram | None) -> str:
    """The lanes' title for a step (short: it stands over a chart column), or why there are none."""
    if program is None:
        return f"No Proton lanes recorded for {name}"
    return f"{SHORT.get(name, name)}: one program, {program.microseconds:,.1f} µs"


def step_lanes_sentence(program: RecordedProgram | None,
                        shipped: tuple[RecordedProgram, ...] | list[RecordedProgram] = (), step: str = "") -> str:
    """What the selected step's recorded program shows, and which recording it is (the ladder's Proton run, at its own
    shape and day, not the bars' run): its time inside GEMM scopes and the softmax overlap. For a step that runs a
    kernel as it ships (SHIPS_AS), where the inside scene shows that kernel from its own recording (`shipped`), it
    says that that is another recording, and when, so that a reader who meets 44.2 µs there and 44.6 µs here knows
    they are two runs."""
    if program is None:
        return ""
    overlap = (f"; {program.softmax_overlap:.0%} of the first consumer's softmax runs while another warpgroup is "
               f"inside a GEMM" if program.softmax_overlap is not None else "; one warpgroup: nothing overlaps")
    theirs = next((p for p in shipped if p.kernel == SHIPS_AS.get(step)), None)
    other = (f"; the inside scene's card of this kernel is another recording{_when(theirs, program)}" if theirs
             else "")
    return (f"Its lanes (Proton, {', '.join(filter(None, (program.launch_words, program.day)))}{other}): some "
            f"warpgroup inside a GEMM scope {program.gemm_busy:.0%} of the program{overlap}.")


def _when(program: RecordedProgram, beside: RecordedProgram) -> str:
    """", 2026-12-02" (and its launch, where it is not `beside`'s): when another recording of a kernel was made."""
    launch = program.launch_words if program.setting != beside.setting else ""
    said = ", ".join(filter(None, (launch, program.day)))
    return f", {said}" if said else ""


# The steps that run one of our kernels as it ships (kernels/ladder.py: FA-2 order is fa2 as shipped, the last LADDER
# row fa3's SHIPPED configuration; tests/test_ablation.py keeps them so), by the kernel: the inside scene shows those
# kernels from their own Proton recording (bench --phases), another run than the ladder's
SHIPS_AS = {STEPS[0][0]: "fa2", STEPS[-1][0]: "fa3"}


def ladder_recording_sentence(shipped: tuple[RecordedProgram, ...] | list[RecordedProgram],
                              steps: dict[str, RecordedProgram]) -> str:
    """For the inside scene: where the ablation scene draws the same kernels as its steps (SHIPS_AS) from the ladder's
    own Proton recording, that those lanes are another recording, and when (its numbers differ from these by the run:
    44.6 µs there, 44.2 µs here). "" where the ladder recorded none of them."""
    mine = {p.kernel: p for p in shipped}
    theirs = [(steps[step], mine[kernel]) for step, kernel in SHIPS_AS.items() if step in steps and kernel in mine]
    if not theirs:
        return ""
    when = sorted({_when(ladder, beside).removeprefix(", ") for ladder, beside in theirs} - {""})
    return f"The ablation scene's lanes are another recording{', ' + '; '.join(when) if when else ''}."
