"""Where the page's numbers come from: the data source (live GPU or a recording), the cached loaders and
kernel runs, the records for the current settings, and the story's numbers that several scenes quote.

app.py decides what to show; this module feeds it. It draws nothing but spinners and the live progress bar.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import streamlit as st

from app_settings import SEQ_LENS, Settings, SharedMemoryBudget, fit_tiles
import costmodel
import story
import viz
from viz.theme import algorithm_label, fmt_tokens

ANIMATION_FRAME_MS = 250
NO_RECORDING = "no recorded results yet"
UPLOADED = "uploaded file"
UPLOAD_KEY = "uploaded_results"  # the sidebar's uploader (app_page) keeps its file under this key


# -- where the numbers come from ------------------------------------------------------------------
# kernels/ is imported inside the functions that use it: torch and Triton take seconds to import, and
# the page frame (title, navigation) should be on screen before they have loaded.

@dataclass(frozen=True)
class Recording:
    """A results file of the bench CLI (kernels.results), as plain data."""
    label: str  # file name in results/, or "uploaded file"
    facts: dict
    meta: dict
    records: list[dict]
    timelines: list[dict]


@dataclass(frozen=True)
class Stage:
    """What every scene needs besides the settings: the data source and the GPU whose numbers show."""
    settings: Settings
    on_gpu: bool                  # the kernels run on a CUDA GPU here (the animation too, even when recorded)
    live: bool                    # measuring on this machine's GPU right now
    backend_reason: str           # why live or not, in one sentence
    recording: Recording | None   # used when not live
    recording_problem: str        # why there is no recording ("" when there is one)
    upload_problem: str           # why an uploaded results file was refused ("" when none was)
    facts: dict | None            # device facts of the GPU whose numbers are shown
    theme_asked: str = "auto"     # the link's theme; settings.theme is the charts' ("auto" resolved)

    @property
    def gpu_name(self) -> str:
        return self.facts["name"] if self.facts else "no GPU"

    @property
    def link_settings(self) -> Settings:
        """The settings as the link keeps them (the theme as asked, not as resolved)."""
        return replace(self.settings, theme=self.theme_asked)

    @property
    def measured(self) -> str:
        """Where and when the numbers on screen were measured: "measured live on X" or "recorded on X, date"."""
        if self.live:
            return f"measured live on {self.gpu_name}"
        created = str(self.recording.meta.get("created", ""))[:10] if self.recording else ""
        return f"recorded on {self.gpu_name}" + (f", {created}" if created else "")

    @property
    def kernels_run(self) -> str:
        """Where the animation's kernels run, for captions."""
        if self.live:
            return f"on {self.gpu_name}"
        return "on this machine's GPU" if self.on_gpu else "in Triton's CPU interpreter"


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
    from kernels import runtime
    return runtime.device_facts(measure_bandwidth=True)


def _as_recording(label: str, loaded) -> Recording:
    return Recording(label, dict(loaded.facts), dict(loaded.meta), list(loaded.records), list(loaded.timelines))


# Recordings are read-only and shared by every session: cache_resource hands out the same object
# instead of unpickling a copy on every rerun (a slider move must stay well under 300 ms).
@st.cache_resource(show_spinner="Reading the recorded results…", max_entries=16)
def load_recording(name: str, modified_ns: int) -> Recording:
    """A file from results/ (modified_ns keys the cache, so a new recording replaces the old)."""
    from kernels import results
    return _as_recording(name, results.load_results(name))


@st.cache_resource(show_spinner="Checking the uploaded results…", max_entries=4)
def parse_uploaded_recording(data: bytes) -> Recording:
    from kernels import results
    return _as_recording(UPLOADED, results.load_results(data))


@st.cache_data(show_spinner=False, max_entries=4096)
def measure_live(algorithm: str, seq_len: int, batch: int, heads: int, head_dim: int, dtype: str,
                 causal: bool) -> dict:
    """One record from the GPU (kernels.measure serializes GPU work between sessions)."""
    from kernels import measure
    return measure.measure(measure.Setting(algorithm, seq_len, batch, heads, head_dim, dtype, causal)).to_dict()


# Traces and animations are read-only too, and large (a 512-token animation of 16-token tiles has 1024
# frames, ~5 MB): cache_resource spares every rerun a pickled copy (seconds at that size).
@st.cache_resource(show_spinner=False, max_entries=32)
def flash_trace(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype: str,
                seed: int, order: str = "fa2") -> dict:
    """The flash kernel's tile steps on one (batch, head), and the naive kernel on the same inputs; order
    "fa1" runs the FlashAttention-1-order kernel (kernels/flash_v1.py) instead."""
    from kernels import trace
    return trace.trace_flash(seq_len, head_dim, block_m, block_n, causal, dtype=dtype, seed=seed,
                             order=order).to_dict()


@st.cache_resource(show_spinner=False, max_entries=16)
def tiling_animation(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype: str,
                     seed: int, theme: str, start_step: int, order: str = "fa2", view: str = "tiles",
                     height: int = viz.tiling.DEFAULT_HEIGHT_PX, smem_per_block: int | None = None,
                     device_label: str = "", l2_bytes: int | None = None, sm_count: int | None = None,
                     talk_seq_len: int | None = None):
    """The tiling scene's figure of one view ("tiles", "hbm", "source", "rereads"), from the trace."""
    trace = flash_trace(seq_len, head_dim, block_m, block_n, causal, dtype, seed, order)
    common = dict(theme=theme, height=height)
    if view == "hbm":
        return viz.hbm_sram_figure(trace, smem_per_block, device_label, frame_ms=ANIMATION_FRAME_MS,
                                   start_step=start_step, **common)
    if view == "source":
        from kernels import source  # plain file reading: no torch
        kernel = source.kernel_source(order)
        phases = source.step_phases(order, trace["loads"], trace["stores"], kernel["phases"])
        return viz.kernel_source_figure(trace, kernel, phases, frame_ms=ANIMATION_FRAME_MS, start_step=start_step,
                                        **common)
    if view == "rereads":
        machine = costmodel.machine_from_facts({"l2_bytes": l2_bytes, "sm_count": sm_count})
        return viz.rereads_figure(trace, machine, device_label, talk_seq_len, **common)
    return viz.tiling_figure(trace, frame_ms=ANIMATION_FRAME_MS, start_step=start_step, **common)


@st.cache_data(show_spinner=False, max_entries=8)
def live_sm_timeline(seq_len: int, batch: int, heads: int, head_dim: int, dtype: str, causal: bool) -> dict:
    from kernels import trace
    return trace.sm_timeline(seq_len=seq_len, batch=batch, heads=heads, head_dim=head_dim, dtype=dtype,
                             causal=causal).to_dict()


def _uploaded_recording() -> tuple[Recording | None, str]:
    """The results file in the sidebar's uploader (from the previous run), or why it cannot be used."""
    from kernels import results
    upload = st.session_state.get(UPLOAD_KEY)
    if upload is None:
        return None, ""
    try:
        return parse_uploaded_recording(upload.getvalue()), ""
    except results.ResultsError as why:
        return None, str(why)


def _shipped_recording(settings: Settings) -> tuple[Recording | None, str, list[str]]:
    """The recording from results/ that the settings name, why there is none, and notes."""
    from kernels import results
    available = results.list_result_files()
    if not available:
        return None, NO_RECORDING, []
    notes = []
    name = settings.recording
    if name not in available:
        notes.append(f"recording: `{name}` is not in results/ (there: {', '.join(available)}); "
                     f"using `{available[0]}`")
        name = available[0]
    try:
        modified_ns = os.stat(os.path.join(results.RESULTS_DIR, name)).st_mtime_ns
        return load_recording(name, modified_ns), "", notes
    except (results.ResultsError, OSError) as why:
        return None, f"results/{name} could not be read: {why}", notes


def _shared_memory_budget(facts: dict | None) -> SharedMemoryBudget | None:
    if not facts or not facts.get("smem_per_block_bytes"):
        return None
    from costmodel import smem_bytes
    return SharedMemoryBudget(int(facts["smem_per_block_bytes"]), smem_bytes, facts["name"])


def prepare_stage(settings: Settings, page_theme: str | None = None) -> tuple[Stage, list[str]]:
    """Choose the data source (live only on a GPU Triton can drive; the link then says "recorded"), check
    the tiles against it, and resolve the charts' theme ("auto": the page's, light when unknown)."""
    backend, reason = kernel_backend()
    live = settings.source == "live" and backend == "cuda"
    theme_asked = settings.theme
    settings = replace(settings, source="live" if live else "recorded",
                       theme=settings.theme if settings.theme != "auto" else page_theme or "light")
    recording, problem, notes, upload_problem = None, "", [], ""
    if not live:
        recording, upload_problem = _uploaded_recording()
        if recording is None:
            recording, problem, notes = _shipped_recording(settings)
            if recording:
                settings = replace(settings, recording=recording.label)
    facts = live_device_facts() if live else (recording.facts if recording else None)
    budget = _shared_memory_budget(facts)
    if budget:
        settings, tile_notes = fit_tiles(settings, budget)
        notes += tile_notes
    return Stage(settings, backend == "cuda", live, reason, recording, problem, upload_problem, facts,
                 theme_asked), notes


# -- records for the current settings -------------------------------------------------------------

def same_setting(record: dict, settings: Settings) -> bool:
    return (record["batch"], record["heads"], record["head_dim"], record["dtype"], bool(record["causal"])) == (
        settings.batch, settings.heads, settings.head_dim, settings.dtype, settings.causal)


def records_for(stage: Stage, algorithms: tuple[str, ...], seq_lens: tuple[int, ...]) -> list[dict]:
    """Records of these algorithms at these lengths for the current batch/heads/head_dim/dtype/causal.

    Live: measured now (cached per setting), with a progress bar while the GPU works. Recorded: the
    file's records for this setting (maybe none: `recording_coverage` says what the file has).
    """
    settings = stage.settings
    if not stage.live:
        if stage.recording is None:
            return []
        return [record for record in stage.recording.records if record["algorithm"] in algorithms
                and record["seq_len"] in seq_lens and same_setting(record, settings)]
    jobs = [(algorithm, seq_len) for seq_len in seq_lens for algorithm in algorithms]
    progress = st.progress(0.0)
    measured = []
    for done, (algorithm, seq_len) in enumerate(jobs):
        progress.progress(done / len(jobs), text=f"Measuring {algorithm_label(algorithm)} at "
                          f"{fmt_tokens(seq_len)} tokens on {stage.gpu_name}…")
        try:
            measured.append(measure_live(algorithm, seq_len, settings.batch, settings.heads, settings.head_dim,
                                         settings.dtype, settings.causal))
        except (TimeoutError, ValueError) as why:  # GPU busy with other viewers, or a setting it refuses
            st.warning(f"Stopped measuring at {fmt_tokens(seq_len)} tokens: {why}")
            break
    progress.empty()
    return measured


def every_algorithm_at_length(stage: Stage) -> list[dict]:
    """Every algorithm's records at the slider's length (ours, SDPA's, the FA1-order kernel, PyTorch eager)."""
    from kernels.record import ALGORITHMS
    return records_for(stage, ALGORITHMS, (stage.settings.seq_len,))


def ours_over_lengths(stage: Stage) -> list[dict]:
    """Flash and naive records over the slider's lengths: every recorded one, or live up to the slider.

    Live, the sweep stops at the slider: the audience watches it grow, and a huge setting cannot
    hold the GPU for minutes.
    """
    lengths = tuple(n for n in SEQ_LENS if n <= stage.settings.seq_len) if stage.live else SEQ_LENS
    return records_for(stage, ("flash", "naive"), lengths)


# -- the story's numbers, shared by the scenes that quote them -------------------------------------

def hbm_traffic(stage: Stage, records: list[dict]) -> story.TrafficPanels:
    """The cost model's HBM traffic of both algorithms at the current setting (story.traffic_panels), with
    the flash tiles the records say ran."""
    s = stage.settings
    return story.traffic_panels(s.seq_len, s.batch, s.heads, s.head_dim, s.dtype_bytes, s.causal, records,
                                stage.facts)


def animation_trace(s: Settings, order: str = "fa2") -> dict:
    return flash_trace(s.trace_len, s.head_dim, s.block_m, s.block_n, s.causal, s.dtype, s.seed, order)


def headline_numbers(stage: Stage, records: list[dict]) -> story.Headline:
    s = stage.settings
    missing = stage.recording_problem if not stage.live and stage.recording is None else "not measured at this setting"
    return story.headline(records, s.seq_len, s.batch, s.heads, s.head_dim, s.dtype_bytes, missing)
