"""Where the page's numbers come from: the data source (live GPU or a recording), the cached loaders and
measurements, and the records the scenes ask for at the current settings.

`prepare_stage` builds a `Stage` once per run from the settings and what the viewer uploaded; scenes ask it for
records (`stage.ours_over_lengths()`, `stage.every_algorithm_at_length()`) and for the story's shared numbers.
It draws nothing but spinners and the live progress bar.

kernels/ and bench/ are imported inside the functions that use them: torch and Triton take seconds to import,
and the page frame (title, navigation) should be on screen before they have loaded.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import tokenize
from dataclasses import dataclass, field, replace

import streamlit as st

import costmodel
import story
from costmodel import Shape
from fmt import fmt_tokens, markdown_text
from kernels import source
from page.cache import ByteBudgetCache
from page.pictures import SharedMemoryBudget, fit_tiles
from page.settings import SEQ_LENS, UPLOADED_RECORDING, Settings
from viz import algorithm_label

NO_RECORDING = "no recorded results yet"
UPLOADED = "uploaded file"
# Uploads: a parsed results file takes ~4× its JSON bytes (measured with tracemalloc), at most 20 MB of JSON.
UPLOAD_CACHE_BYTES = 160 << 20
PARSED_BYTES_PER_JSON_BYTE = 4
UPLOADS: ByteBudgetCache = ByteBudgetCache("uploaded results", UPLOAD_CACHE_BYTES)
RECORD_TEXT = ("message", "device", "counters")
RING_TEXT = ("message", "device", "kernel")


@dataclass(frozen=True)
class Recording:
    """A results file of the bench CLI (bench.results), as plain data. Its numbers are checked; the text of
    its records is markdown-safe (`page_record`); facts and meta text is plain (escape it where it is shown)."""
    label: str  # file name in results/, or "uploaded file"
    facts: dict
    meta: dict
    records: list[dict]
    timelines: list[dict]
    notes: tuple[str, ...] = ()  # values of the file that were ignored (bench.results), as plain text
    phases: tuple[dict, ...] = ()  # one launch's warpgroups over time, per kernel (schema 2)
    programs: tuple[story.RecordedProgram, ...] = ()  # each kernel's typical program of `phases`, worked out once
    # bench --ladder (schema 4): the ablation's records and each step's typical program, by the step's name; kept
    # apart, so that no other scene reads a ladder step as the shipped kernel
    ladder: tuple[dict, ...] = ()
    ladder_programs: dict = field(default_factory=dict)
    # bench --fp8 (schema 5): the e4m3 kernel's records with their errors; kept apart likewise, so that no 16-bit
    # scene reads an FP8 time as the bf16 kernel's
    fp8: tuple[dict, ...] = ()
    # bench.ring: ring attention over several GPUs (each run's text markdown-safe, as a record's)
    ring: tuple[dict, ...] = ()

    def days(self, records: list[dict]) -> str:
        """The days these records of this file were measured (story.recorded_days: their own, else the file's)."""
        return story.recorded_days(records, self.meta.get("created", ""))

    def recorded_label(self, records: list[dict]) -> str:
        """"recorded on NVIDIA H200, 2026-12-04 to 12-05": these records of this file (plain text)."""
        return story.recorded_label(self.facts["name"], records, self.meta.get("created", ""))


@functools.lru_cache(maxsize=64)
def build_now(algorithm: str, pass_: str, dtype: str) -> str | None:
    """This copy's build stamp of our kernel for records of this algorithm, pass and dtype (kernels/source.py),
    read once per server; None where a file of it cannot be read or parsed (the page then says nothing of builds)."""
    try:
        return source.record_build(algorithm, pass_, dtype)
    except (OSError, SyntaxError, ValueError, tokenize.TokenError):
        return None


@dataclass(frozen=True, kw_only=True)
class Stage:
    """What every scene needs besides the settings: the data source and the GPU whose numbers show."""
    settings: Settings
    on_gpu: bool                  # the kernels run on a CUDA GPU here (the animation too, even when recorded)
    live: bool                    # measuring on this machine's GPU right now
    backend_reason: str           # why live or not, in one sentence
    recording: Recording | None = None   # used when not live
    recording_problem: str = ""   # why there is no recording ("" when there is one)
    upload_problem: str = ""      # why an uploaded results file was refused ("" when none was)
    facts: dict | None = None     # device facts of the GPU whose numbers are shown
    theme_asked: str = "auto"     # the link's theme; settings.theme is the charts' ("auto" resolved)

    @property
    def gpu(self) -> str:
        """The GPU's name as plain text (a results file's: figures escape it with fmt.plotly_text)."""
        return self.facts["name"] if self.facts else "no GPU"

    @property
    def link_settings(self) -> Settings:
        """The settings as the link keeps them (the theme as asked, not as resolved)."""
        return replace(self.settings, theme=self.theme_asked)

    @property
    def quoted_recording(self) -> Recording | None:
        """The recording a scene quotes for what the page does not measure on each visit (a ring over several GPUs,
        Proton's lanes, decode, the backward): this page's, or on a live page the shipped one."""
        return shipped_recording() if self.live else self.recording

    @property
    def gpu_name(self) -> str:
        """The GPU's name, safe in Streamlit's markdown (labels, badges, captions, takeaways)."""
        return markdown_text(self.gpu)

    @property
    def measured_text(self) -> str:
        """Where and when the numbers on screen were measured, as plain text: "measured live on X" or
        "recorded on X, date" (a figure shows it through fmt.plotly_text)."""
        if self.live:
            return f"measured live on {self.gpu}"
        return self.measured_for(self.recording.records if self.recording else [])

    def measured_for(self, records: list[dict]) -> str:
        """measured_text for these records: live, or recorded on X on the days they were measured (plain text)."""
        if self.live:
            return f"measured live on {self.gpu}"
        return self.recording.recorded_label(records) if self.recording else f"recorded on {self.gpu}"

    @staticmethod
    def earlier_code(records: list[dict], section: str = "records") -> str:
        """What to say of recorded records (or entries of the file's `section`: timelines, phases, ring) measured with
        other code than this copy's kernels (story.earlier_code), safe in Streamlit's markdown; "" when every one is
        this copy's (or says nothing of its build)."""
        return markdown_text(story.earlier_code_sentence(story.earlier_code(records, build_now, section)))

    def recorded_subtitle(self, records: list[dict]) -> str:
        """story.recorded_subtitle for records of the quoted recording (a scene whose figures are always recorded),
        as plain text (a figure escapes it)."""
        recording = self.quoted_recording
        return story.recorded_subtitle(records, recording.meta.get("created", "") if recording else "",
                                       story.earlier_code(records, build_now))

    @property
    def measured(self) -> str:
        """measured_text, safe in Streamlit's markdown."""
        return markdown_text(self.measured_text)

    @property
    def kernels_run(self) -> str:
        """Where the animation's kernels run, for captions."""
        if self.live:
            return f"on {self.gpu_name}"
        return "on this machine's GPU" if self.on_gpu else "in Triton's CPU interpreter"

    # -- records for the current settings ------------------------------------------------------------

    def records_for(self, algorithms: tuple[str, ...], seq_lens: tuple[int, ...]) -> list[dict]:
        """Records of these algorithms at these lengths for the current batch/heads/head_dim/dtype/causal.

        Live: measured now (cached per setting), with a progress bar while the GPU works. Recorded: the
        file's records for this setting (maybe none: the frame's `recording_coverage` says what the file has).
        """
        s = self.settings
        if not self.live:
            if self.recording is None:
                return []
            return [record for record in self.recording.records if record["algorithm"] in algorithms
                    and record["seq_len"] in seq_lens and same_setting(record, s)]
        return _measure_with_progress(self, [(a, n, "prefill") for n in seq_lens for a in algorithms
                                             if not _absent_peer(a, s)])

    @property
    def backward_live_fits(self) -> bool:
        """Whether the backward scene's bars are timed live at the slider's N (story.backward.live_fits)."""
        return self.live and story.backward.live_fits(self.settings.shape)

    def backward_bars_live(self) -> list[dict]:
        """The backward scene's bars (story.backward.BARS) at the slider's N, measured now (cached): the backward of
        each differentiable kernel and peer, and our kernels' forwards beside them."""
        return _measure_with_progress(self, _backward_jobs(self.settings.seq_len))

    def every_algorithm_at_length(self) -> list[dict]:
        """Every algorithm's records at the slider's length (ours, SDPA's, the FA1-order kernel, PyTorch eager)."""
        return self.records_for(story.prefill_algorithms(), (self.settings.seq_len,))

    def ours_over_lengths(self) -> list[dict]:
        """FA-2 and naive records over the slider's lengths: every recorded one, or live up to the slider.

        Live, the sweep stops at the slider: the audience watches it grow, and a huge setting cannot
        hold the GPU for minutes."""
        lengths = tuple(n for n in SEQ_LENS if n <= self.settings.seq_len) if self.live else SEQ_LENS
        return self.records_for(("fa2", "naive"), lengths)

    # -- the story's numbers that several scenes quote -----------------------------------------------

    def hbm_traffic(self, records: list[dict]) -> story.TrafficPanels:
        """The cost model's HBM traffic of both algorithms at the current setting, with the flash tiles the
        records say ran and the programs per SM the kernel's SM timeline measured (story.traffic_panels)."""
        s = self.settings
        per_sm, how = self.residency()
        return story.traffic_panels(s.shape, records, self.facts, per_sm, how)

    def residency(self) -> tuple[int | None, str]:
        """Programs of the flash kernel resident on one SM at once: live, from the SM timeline measured now at
        this setting; recorded, from the recording's timelines (story.residency); None where neither says."""
        s = self.settings
        if self.live:
            try:
                timeline = live_sm_timeline(s.seq_len, s.batch, s.heads, s.head_dim, s.dtype, s.causal)
            except (ValueError, RuntimeError):  # an out-of-memory at a huge setting: the model assumes 1 per SM
                return None, costmodel.RESIDENCY_ASSUMED
            return story.residency([timeline], s.head_dim, s.causal), costmodel.RESIDENCY_LIVE
        timelines = self.recording.timelines if self.recording else []
        return story.residency(timelines, s.head_dim, s.causal), costmodel.RESIDENCY_RECORDED

    @property
    def roof_sizes(self) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """The sizes the roofs were measured at: this bench's, live; a recording's own facts say theirs (None where
        an older file does not)."""
        if not self.live:
            facts = self.facts or {}
            return (tuple(facts.get("copy_sizes_bytes") or ()) or None, tuple(facts.get("matmul_sizes") or ()) or None)
        from bench import device
        return device.COPY_SIZES_BYTES, device.MATMUL_SIZES

    def headline_numbers(self, records: list[dict]) -> story.Headline:
        s = self.settings
        missing = self.recording_problem if not self.live and self.recording is None else "not measured at this setting"
        return story.headline(records, s.shape, missing)


def same_setting(record: dict, settings: Settings) -> bool:
    """Whether a record is of the talk's shape (its length aside): batch, heads and K/V heads, head_dim, dtype, mask,
    and a prefill of every query against every key."""
    shape = Shape.of_record(record)
    return shape.kv_len == shape.seq_len and shape.at(seq_len=1, kv_len=1) == settings.shape.at(seq_len=1, kv_len=1)


# -- loaders (cached) --------------------------------------------------------------------------------------

@st.cache_resource(show_spinner="Loading the kernels (torch, Triton)…")
def kernel_backend() -> tuple[str, str]:
    """'cuda' or 'interpreter' and why. Without a GPU the driver probe decides in milliseconds; otherwise
    importing kernels (torch, Triton: seconds) decides, once per process."""
    from kernels import probe
    reason = probe.interpreter_without_torch()
    if reason:
        return "interpreter", reason
    import kernels
    return kernels.backend(), kernels.backend_reason()


@st.cache_resource(show_spinner="Measuring this GPU's memory hierarchy…")
def live_device_facts() -> dict:
    from bench import device
    return device.device_facts(measure_bandwidth=True)


def page_record(record: dict) -> dict:
    """A record as the page shows it: its text (an error message, the device, how it was counted, kernel names)
    escaped for Streamlit's markdown once, here, so every scene and story sentence that quotes it shows it as
    written. Figures escape again for plotly (fmt.plotly_text): safe, if a backslash may show there."""
    shown = {key: markdown_text(record[key]) for key in RECORD_TEXT if record.get(key)}
    if record.get("kernels"):
        shown["kernels"] = [{**kernel, "name": markdown_text(kernel["name"])} for kernel in record["kernels"]]
    return {**record, **shown}


def _as_recording(label: str, loaded) -> Recording:
    """Once per file (uploads are kept by their content's hash, shipped files by name and time): what every rerun
    would otherwise work out again, the phases' programs included (story.recorded_programs)."""
    shipped = [p for p in loaded.phases if p.get("config") is None]
    steps = [p for p in loaded.phases if p.get("config") is not None]
    fp8 = [r for r in loaded.records if r["dtype"] == costmodel.FP8_DTYPE]
    rest = [r for r in loaded.records if r["dtype"] != costmodel.FP8_DTYPE]
    return Recording(label, dict(loaded.facts), dict(loaded.meta),
                     [page_record(r) for r in rest if r.get("config") is None], list(loaded.timelines),
                     loaded.notes, tuple(shipped), story.recorded_programs(shipped),
                     tuple(page_record(r) for r in rest if r.get("config") is not None),
                     story.step_programs(steps), tuple(page_record(r) for r in fp8),
                     tuple({**r, **{key: markdown_text(r[key]) for key in RING_TEXT if r.get(key)}} for r in loaded.ring))


# Recordings are read-only and shared by every session: cache_resource hands out the same object
# instead of unpickling a copy on every rerun (a slider move must stay well under 300 ms).
@st.cache_resource(show_spinner="Reading the recorded results…", max_entries=16)
def load_recording(name: str, modified_ns: int) -> Recording:
    """A file from results/ (modified_ns keys the cache, so a new recording replaces the old)."""
    from bench import results
    return _as_recording(name, results.load_results(name))


def parse_uploaded_recording(data: bytes) -> Recording:
    """An uploaded results file, checked (bench.results); shared by sessions within UPLOADS' byte budget."""
    from bench import results
    with st.spinner("Checking the uploaded results…"):
        return UPLOADS.get(hashlib.sha256(data).digest(), lambda: _as_recording(UPLOADED, results.load_results(data)),
                           lambda _: PARSED_BYTES_PER_JSON_BYTE * len(data))


@st.cache_data(show_spinner=False, max_entries=4096)
def measure_live(algorithm: str, seq_len: int, batch: int, heads: int, head_dim: int, dtype: str,
                 causal: bool, pass_: str = "prefill") -> dict:
    """One record from the GPU (bench.measure serializes GPU work between sessions): a prefill, or a backward (its
    TFLOPS, its forward + backward time and peak memory, bench.measure)."""
    from bench import measure
    shape = Shape(seq_len, batch, heads, head_dim, dtype, causal, pass_=pass_)
    return measure.measure(measure.Setting(algorithm, shape)).to_dict()


@st.cache_data(show_spinner=False, max_entries=8)
def live_sm_timeline(seq_len: int, batch: int, heads: int, head_dim: int, dtype: str, causal: bool) -> dict:
    from kernels import trace
    return trace.sm_timeline(seq_len=seq_len, batch=batch, heads=heads, head_dim=head_dim, dtype=dtype,
                             causal=causal).to_dict()


def _backward_jobs(seq_len: int) -> list[tuple[str, int, str]]:
    """The backward scene's bars at this N, as measuring jobs (the forward bars measured as prefill records)."""
    return [(algorithm, seq_len, pass_) for algorithm, pass_, _ in story.backward.BARS]


def _absent_peer(algorithm: str, s: Settings) -> bool:
    """A peer installed apart from the app (its spec's `requirements`: the authors' FA-4) that cannot run here: live,
    it is not measured, so a machine without it shows no failure for it (and the scenes nothing new)."""
    from kernels import specs
    spec = specs.spec(algorithm)
    return bool(spec.requirements and spec.unavailable and spec.load("unavailable")(s.shape))


def _measure_with_progress(stage: Stage, jobs: list[tuple[str, int, str]]) -> list[dict]:
    """Each (algorithm, seq_len, pass) at the talk's setting, measured now (cached), with a progress bar."""
    s = stage.settings
    progress = st.progress(0.0)
    measured = []
    for done, (algorithm, seq_len, pass_) in enumerate(jobs):
        what = "the backward of " if pass_ == story.backward.BACKWARD else ""
        progress.progress(done / len(jobs), text=f"Measuring {what}{algorithm_label(algorithm)} at "
                          f"{fmt_tokens(seq_len)} tokens on {stage.gpu_name}…")
        try:
            measured.append(page_record(measure_live(algorithm, seq_len, s.batch, s.heads, s.head_dim, s.dtype,
                                                     s.causal, pass_)))
        except (TimeoutError, ValueError) as why:  # GPU busy with other viewers, or a setting it refuses
            st.warning(f"Stopped measuring at {fmt_tokens(seq_len)} tokens: {why}")
            break
    progress.empty()
    return measured


@st.cache_data(show_spinner=False, max_entries=2)
def measure_ladder_live() -> list[dict]:
    """The ablation's steps and cuDNN timed side by side now, in one interleaved run (bench/ladder.py), once per
    server process: the same run answers every later visit (the shape is the paper's, not the slider's)."""
    from bench import ladder
    return [page_record(r) for r in ladder.time_ladder()]


@st.cache_data(show_spinner=False, max_entries=16)
def backward_walk(seq_len: int, causal: bool) -> dict:
    """The backward's tile walk for one head of seq_len tokens in the scene's square tiles (kernels/fa2_bwd.py's
    visit_order of its launch grids and loop bounds at WALK_CONFIG), with the tile's side and the blocks a side."""
    from kernels import fa2_bwd
    side = fa2_bwd.WALK_CONFIG.block_n1
    return {**fa2_bwd.visit_order(seq_len, causal), "block": side, "num_blocks": -(-seq_len // side)}


def backward_records(recording: Recording | None) -> list[dict]:
    """A recording's backward records (`pass` = "backward"): those it keeps apart (a `backward` field, where the
    Recording has one) and those among its records, each once."""
    if recording is None:
        return []
    kept = list(getattr(recording, "backward", ()) or ())
    return kept + [r for r in story.backward.backward_records(recording.records) if r not in kept]


@dataclass(frozen=True)
class LadderSource:
    """Where the ablation scene's numbers come from: the records, a label as the house labels sources, and why live
    could not measure them ("" when it did, or did not try)."""
    records: tuple[dict, ...]
    label: str
    live_problem: str = ""
    recording: Recording | None = None  # where the steps' Proton lanes come from
    gpu: str = ""                       # the GPU that measured them, plain text
    live: bool = False                  # measured now on this page's GPU (else the recording's)


def ladder_source(stage: Stage) -> LadderSource:
    """Live on a Hopper GPU: every step measured now (cached); otherwise, or where live fails, the recording's ladder
    records (the shipped recording's when live)."""
    recording = stage.quoted_recording
    problem = ""
    if stage.live:
        try:
            with st.spinner(f"Timing every step of the ladder side by side on {stage.gpu_name}…"):
                return LadderSource(tuple(measure_ladder_live()), stage.measured_text, "", recording, stage.gpu,
                                    live=True)
        except (RuntimeError, ValueError, TimeoutError) as why:  # not Hopper, or the GPU busy with other viewers
            problem = markdown_text(str(why))
    if recording is None:
        return LadderSource((), "", problem or stage.recording_problem, None)
    return LadderSource(tuple(recording.ladder), recording.recorded_label(list(recording.ladder)), problem, recording,
                        recording.facts["name"])


@st.cache_data(show_spinner=False, max_entries=2)
def measure_fp8_speed_live() -> dict[tuple[str, bool], float]:
    """(scaling, rotation) → bf16 time ÷ e4m3 time at bench.fp8's first shape (B2 H16 N8K D128), one interleaved
    run, once per server process."""
    from bench import fp8
    records = fp8.time_fp8(shapes=fp8.SHAPES[:1], rounds=1)
    return {(r["scaling"], r["rotation"]): r["bf16_time_ms"] / r["time_ms"] for r in records
            if r["status"] == "ok" and r.get("bf16_time_ms")}


@st.cache_data(show_spinner=False, max_entries=8)
def measure_fp8_errors_live(level: str) -> tuple[dict, ...]:
    """Each variant's and bf16's relative RMS error against float64 now, at B1 H2 N4K D128, the outliers at
    `level` (story.fp8.OUTLIER_LEVELS): quantized, run on this GPU, compared (bench.fp8.measure_errors)."""
    from bench import fp8
    key = story.fp8.level_key(level)
    errors = fp8.measure_errors(Shape(4096, 1, 2, 128, costmodel.FP8_DTYPE, False),
                                kinds={key.removesuffix("rel_rms"): story.fp8.OUTLIER_LEVELS[level]})
    points = [{"name": story.fp8.variant_name(s, r), "scaling": s, "rotation": r,
               "rel_rms": errors[fp8.variant_name(s, r)][key], "speedup": None} for s, r in story.fp8.VARIANTS]
    return (*points, {"name": story.fp8.BF16, "scaling": None, "rotation": False, "rel_rms": errors[fp8.BF16][key],
                      "speedup": 1.0})


@st.cache_data(show_spinner=False, max_entries=8)
def emulate_fp8_errors(level: str, seed: int = 5) -> tuple[dict, ...]:
    """The same points from the CPU emulation of e4m3 (kernels.fp8.emulate_fp8_attention) at B1 H2 N512 D128:
    errors only, no speed."""
    import torch
    from kernels.fp8 import attention_error, emulate_fp8_attention, with_outliers
    from kernels.reference import reference_attention
    gen = torch.Generator().manual_seed(seed)
    x = with_outliers([torch.randn(1, 2, 512, 128, generator=gen) for _ in range(3)], story.fp8.OUTLIER_LEVELS[level],
                      seed)
    ref = reference_attention(*(t.double() for t in x))[0]
    points = [{"name": story.fp8.variant_name(s, r), "scaling": s, "rotation": r, "speedup": None,
               "rel_rms": attention_error(emulate_fp8_attention(*x, granularity=s, rotate=r), ref)["rel_rms"]}
              for s, r in story.fp8.VARIANTS]
    bf16 = reference_attention(*(t.bfloat16() for t in x))[0]
    return (*points, {"name": story.fp8.BF16, "scaling": None, "rotation": False, "speedup": None,
                      "rel_rms": attention_error(bf16, ref)["rel_rms"]})


@dataclass(frozen=True)
class Fp8Source:
    """The FP8 view's points (story/fp8.py), how they were measured ("live", "recorded", "emulated"), a label as
    the house labels sources, and why a better source could not be used ("" when none was tried)."""
    points: tuple[dict, ...]
    kind: str
    label: str
    problem: str = ""


def fp8_source(stage: Stage, level: str) -> Fp8Source:
    """Live on a Hopper GPU (errors now, speed from one interleaved run, both cached); otherwise the recording's FP8
    records at a recorded level; otherwise the CPU emulation of e4m3 (errors, no speed)."""
    problem = ""
    if stage.live:
        try:
            with st.spinner(f"Quantizing, running and comparing with float64 on {stage.gpu_name}…"):
                speed = measure_fp8_speed_live()
                points = tuple({**p, "speedup": speed.get((p["scaling"], p["rotation"]), p["speedup"])}
                               for p in measure_fp8_errors_live(level))
            return Fp8Source(points, "live", stage.measured_text)
        except (RuntimeError, ValueError, TimeoutError) as why:  # not Hopper, or the GPU busy with other viewers
            problem = markdown_text(str(why))
    recording = stage.quoted_recording
    if recording is not None and recording.fp8:
        points = story.fp8.recorded_points(recording.fp8, level)
        if points:
            return Fp8Source(tuple(points), "recorded", recording.recorded_label(list(recording.fp8)), problem)
        problem = problem or story.fp8.no_points_sentence(level, has_records=True)
    elif not problem:
        problem = story.fp8.no_points_sentence("none", stage.recording_problem)
    return Fp8Source(emulate_fp8_errors(level), "emulated", story.fp8.EMULATED_LABEL, problem)


# -- the warm-up: every slider stop measured before the talk ------------------------------------------------
# Live, the first drag to 128K takes seconds (a kernel compiles, then runs); in front of an audience every drag
# should be served from the cache. One action measures, for the talk's setting, everything the slider's scenes
# ask for at every stop, with a progress bar; the page then says it is ready.

WARMED: dict[tuple, str] = {}  # the settings warmed in this server process → what was done, in words


def _warm_key(s: Settings) -> tuple:
    return (s.batch, s.heads, s.head_dim, s.dtype, s.causal)


def warmed(stage: Stage) -> str | None:
    """What the warm-up did for the current setting, or None when it has not run (on this server)."""
    return WARMED.get(_warm_key(stage.settings))


def warm_up(stage: Stage) -> str:
    """Measure now what every slider stop of the current setting will show (every algorithm at every length,
    the SM timeline at this setting) so that the talk's drags are served from the cache. On the CPU path there is
    nothing to measure: the recording answers at once; the default animation's trace is run ahead instead."""
    import time
    from page.pictures import TraceRequest, kernel_trace
    s = stage.settings
    start = time.perf_counter()
    if stage.live:
        jobs = [(a, n, "prefill") for n in SEQ_LENS for a in story.prefill_algorithms() if not _absent_peer(a, s)]
        jobs += [job for n in SEQ_LENS if story.backward.live_fits(s.shape.at(seq_len=n, kv_len=n))
                 for job in _backward_jobs(n)]
        done = len(_measure_with_progress(stage, jobs))
        try:
            live_sm_timeline(s.seq_len, s.batch, s.heads, s.head_dim, s.dtype, s.causal)
        except (ValueError, RuntimeError):  # an out-of-memory at a huge setting is a scene's note, not a stop
            pass
        what = f"{done} measurements of this setting at every slider stop"
        try:  # the ablation scene's one run (cached for the server's life): a Hopper GPU only
            with st.spinner("Timing the FA-3 ladder side by side…"):
                measure_ladder_live()
            what += ", the FA-3 ladder"
        except (RuntimeError, ValueError, TimeoutError):  # not Hopper: the scene shows the recording and says why
            pass
    else:
        what = "nothing to measure: the recording answers at once"
    with st.spinner("Running the animation's kernels ahead…"):
        kernel_trace(TraceRequest.of(s))
    WARMED[_warm_key(s)] = f"{what}, and the animation's trace, in {time.perf_counter() - start:,.0f} s"
    return WARMED[_warm_key(s)]


# -- the data source ---------------------------------------------------------------------------------------

def _uploaded_recording(upload: bytes | None) -> tuple[Recording | None, str]:
    """The results file the viewer uploaded (bytes, from the frame's uploader), or why it cannot be used."""
    from bench import results
    if upload is None:
        return None, ""
    try:
        return parse_uploaded_recording(upload), ""
    except results.ResultsError as why:
        return None, str(why)


def _shipped_recording(settings: Settings) -> tuple[Recording | None, str, list[str]]:
    """The recording from results/ that the settings name, why there is none, and notes."""
    from bench import results
    available = results.list_result_files()
    if not available:
        return None, NO_RECORDING, []
    notes = []
    name = settings.recording
    if name == UPLOADED_RECORDING:  # a link copied while an uploaded file was shown
        notes.append(f"recording: this link was made from an uploaded results file, which a link cannot carry; "
                     f"showing `{available[0]}` (open the file in the sidebar to see its numbers)")
        name = available[0]
    elif name not in available:
        notes.append(f"recording: `{name}` is not in results/ (there: {', '.join(available)}); "
                     f"using `{available[0]}`")
        name = available[0]
    try:
        modified_ns = os.stat(os.path.join(results.RESULTS_DIR, name)).st_mtime_ns
        return load_recording(name, modified_ns), "", notes
    except (results.ResultsError, OSError) as why:
        return None, f"results/{name} could not be read: {markdown_text(why)}", notes


def shipped_recording() -> Recording | None:
    """The recording shipped in results/ (h200.json, else the first there): what a live page quotes of what it does
    not measure on each visit (one launch's phases, recorded with Proton)."""
    recording, _, _ = _shipped_recording(Settings())
    return recording


def is_live(settings: Settings) -> bool:
    """Whether these settings measure on this machine's GPU (asked for, and a GPU Triton can drive is here)."""
    return settings.source == "live" and kernel_backend()[0] == "cuda"


def prepare_stage(settings: Settings, page_theme: str | None = None, upload: bytes | None = None,
                  asked_live: bool = False) -> tuple[Stage, list[str]]:
    """Choose the data source (live only on a GPU Triton can drive; else the uploaded file, else the shipped
    recording), check the tiles against its GPU, and resolve the charts' theme ("auto": the page's, light when
    unknown). asked_live: the link itself asked for source=live (a note says when it cannot be).

    Never raises: the sidebar, with its uploader (the way out of a bad file), is drawn from the stage, so a
    failure here becomes a stage without numbers that says why."""
    try:
        return _prepare_stage(settings, page_theme, upload, asked_live)
    except Exception as exc:  # noqa: BLE001 - a bug or a broken machine must not take the page frame down
        logging.getLogger(__name__).exception("preparing the data failed")
        problem = f"the data could not be prepared ({type(exc).__name__})"
        theme = settings.theme if settings.theme != "auto" else page_theme or "light"
        return Stage(settings=replace(settings, source="recorded", theme=theme), on_gpu=False, live=False,
                     backend_reason=problem, recording_problem=problem, theme_asked=settings.theme), []


def _prepare_stage(settings: Settings, page_theme: str | None, upload: bytes | None,
                   asked_live: bool) -> tuple[Stage, list[str]]:
    backend, reason = kernel_backend()
    live = is_live(settings)
    theme_asked = settings.theme
    settings = replace(settings, theme=settings.theme if settings.theme != "auto" else page_theme or "light")
    recording, problem, notes, upload_problem = None, "", [], ""
    if settings.source == "live" and not live:
        if asked_live:  # asked for in the link, not just the default
            notes.append(f"source: `live` needs a CUDA GPU ({markdown_text(reason)}); showing the recording instead")
        settings = replace(settings, source="recorded")  # the link says what is shown
    if not live:
        recording, upload_problem = _uploaded_recording(upload)
        if recording is not None:  # the link says the numbers are an upload's, never a shipped file's name
            settings = replace(settings, recording=UPLOADED_RECORDING)
        else:
            recording, problem, shipped_notes = _shipped_recording(settings)
            notes += shipped_notes
            if recording:
                settings = replace(settings, recording=recording.label)
    facts = live_device_facts() if live else (recording.facts if recording else None)
    budget = SharedMemoryBudget.of(facts, markdown_text(facts["name"]) if facts else "")
    if budget:
        settings, tile_notes = fit_tiles(settings, budget)
        notes += tile_notes
    return Stage(settings=settings, on_gpu=backend == "cuda", live=live, backend_reason=reason, recording=recording,
                 recording_problem=problem, upload_problem=upload_problem, facts=facts,
                 theme_asked=theme_asked), notes
