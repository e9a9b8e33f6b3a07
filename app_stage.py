"""Where the page's numbers come from: the data source (live GPU or a recording), the cached loaders and
kernel runs, the records for the current settings, and the story's numbers that several scenes quote.

app.py decides what to show; this module feeds it. It draws nothing but spinners and the live progress bar.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
import streamlit as st

from app_cache import ByteBudgetCache
from app_settings import SEQ_LENS, Settings, SharedMemoryBudget, fit_tiles
import costmodel
import story
import viz
from fmt import markdown_text
from viz.theme import algorithm_label
from fmt import fmt_tokens

ANIMATION_FRAME_MS = 250
NO_RECORDING = "no recorded results yet"
UPLOADED = "uploaded file"
UPLOAD_KEY = "uploaded_results"  # the sidebar's uploader (app_page) keeps its file under this key
# What the server keeps between sessions, in bytes (README, "Running it for others"). Traces and animations:
# a default animation holds ~4 MB, the largest one (512 tokens, 16×16 tiles, head_dim 256, fp32) ~55 MB.
# Uploads: a parsed results file takes ~4× its JSON bytes (measured with tracemalloc), at most 20 MB of JSON.
ANIMATION_CACHE_BYTES = 256 << 20
UPLOAD_CACHE_BYTES = 160 << 20
PARSED_BYTES_PER_JSON_BYTE = 4
FIGURE_BYTES_PER_JSON_BYTE = 5  # a plotly Figure in memory against its JSON text (tracemalloc, 512-token case)
TRACES: ByteBudgetCache[dict] = ByteBudgetCache("kernel traces", ANIMATION_CACHE_BYTES // 2)
ANIMATIONS: ByteBudgetCache = ByteBudgetCache("animations", ANIMATION_CACHE_BYTES // 2)
UPLOADS: ByteBudgetCache = ByteBudgetCache("uploaded results", UPLOAD_CACHE_BYTES)


# -- where the numbers come from ------------------------------------------------------------------
# kernels/ is imported inside the functions that use it: torch and Triton take seconds to import, and
# the page frame (title, navigation) should be on screen before they have loaded.

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
    def gpu(self) -> str:
        """The GPU's name as plain text (a results file's: figures escape it with fmt.plotly_text)."""
        return self.facts["name"] if self.facts else "no GPU"

    @property
    def link_settings(self) -> Settings:
        """The settings as the link keeps them (the theme as asked, not as resolved)."""
        return replace(self.settings, theme=self.theme_asked)

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
        created = str(self.recording.meta.get("created", ""))[:10] if self.recording else ""
        return f"recorded on {self.gpu}" + (f", {created}" if created else "")

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


RECORD_TEXT = ("message", "device", "counters")


def page_record(record: dict) -> dict:
    """A record as the page shows it: its text (an error message, the device, how it was counted, kernel names)
    escaped for Streamlit's markdown once, here, so every scene and story sentence that quotes it shows it as
    written. Figures escape again for plotly (fmt.plotly_text): safe, if a backslash may show there."""
    shown = {key: markdown_text(record[key]) for key in RECORD_TEXT if record.get(key)}
    if record.get("kernels"):
        shown["kernels"] = [{**kernel, "name": markdown_text(kernel["name"])} for kernel in record["kernels"]]
    return {**record, **shown}


def _as_recording(label: str, loaded) -> Recording:
    return Recording(label, dict(loaded.facts), dict(loaded.meta), [page_record(r) for r in loaded.records],
                     list(loaded.timelines), loaded.notes)


# Recordings are read-only and shared by every session: cache_resource hands out the same object
# instead of unpickling a copy on every rerun (a slider move must stay well under 300 ms).
@st.cache_resource(show_spinner="Reading the recorded results…", max_entries=16)
def load_recording(name: str, modified_ns: int) -> Recording:
    """A file from results/ (modified_ns keys the cache, so a new recording replaces the old)."""
    from bench import results
    return _as_recording(name, results.load_results(name))


def parse_uploaded_recording(data: bytes) -> Recording:
    """An uploaded results file, checked (bench.results); shared by sessions within UPLOADS' byte budget."""
    import hashlib
    from bench import results
    with st.spinner("Checking the uploaded results…"):
        return UPLOADS.get(hashlib.sha256(data).digest(), lambda: _as_recording(UPLOADED, results.load_results(data)),
                           lambda _: PARSED_BYTES_PER_JSON_BYTE * len(data))


@st.cache_data(show_spinner=False, max_entries=4096)
def measure_live(algorithm: str, seq_len: int, batch: int, heads: int, head_dim: int, dtype: str,
                 causal: bool) -> dict:
    """One record from the GPU (bench.measure serializes GPU work between sessions)."""
    from bench import measure
    return measure.measure(measure.Setting(algorithm, seq_len, batch, heads, head_dim, dtype, causal)).to_dict()


# Traces and animations are read-only and large: the byte-bounded caches above hand every rerun the same
# object (no pickled copy: seconds at that size) and drop the least recently used past their budget.
def _trace_bytes(trace: dict) -> int:
    return sum(value.nbytes for value in trace.values() if isinstance(value, np.ndarray))


def flash_trace(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype: str,
                seed: int, order: str = "fa2") -> dict:
    """The flash kernel's tile steps on one (batch, head), and the naive kernel on the same inputs; order
    "fa1" runs the FlashAttention-1-order kernel (kernels/flash_v1.py) instead.

    On the CPU, Triton's interpreter runs one kernel at a time for the whole server (kernels.runtime): a
    viewer whose animation waits behind other viewers' is told so while it waits."""
    from kernels import runtime, trace
    key = (seq_len, head_dim, block_m, block_n, causal, dtype, seed, order)
    waiting = st.empty()

    def queued(ahead: int) -> None:
        whose = "viewer's kernel run" if ahead == 1 else "viewers' kernel runs"
        waiting.info(f"Queued behind {ahead} other {whose}: Triton's CPU interpreter runs one at a time, so "
                     "this animation starts when theirs are done.", icon=":material/hourglass_top:")

    def build() -> dict:
        with runtime.kernel_launch_lock(on_wait=queued):  # the trace's kernel runs re-enter it
            return trace.trace_flash(seq_len, head_dim, block_m, block_n, causal, dtype=dtype, seed=seed,
                                     order=order).to_dict()
    try:
        return TRACES.get(key, build, _trace_bytes)
    finally:
        waiting.empty()


def tiling_animation(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype: str,
                     seed: int, theme: str, start_step: int, order: str = "fa2", view: str = "tiles",
                     height: int = viz.tiling.DEFAULT_HEIGHT_PX, smem_per_block: int | None = None,
                     device_label: str = "", l2_bytes: int | None = None, sm_count: int | None = None,
                     talk_seq_len: int | None = None):
    """The tiling scene's figure of one view ("tiles", "hbm", "source", "rereads"), from the trace; kept in
    ANIMATIONS (bounded in bytes) like the traces."""
    key = (seq_len, head_dim, block_m, block_n, causal, dtype, seed, theme, start_step, order, view, height,
           smem_per_block, device_label, l2_bytes, sm_count, talk_seq_len)

    def build():
        trace = flash_trace(seq_len, head_dim, block_m, block_n, causal, dtype, seed, order)
        common = dict(theme=theme, height=height)
        if view == "hbm":
            return viz.hbm_sram_figure(trace, smem_per_block, device_label, frame_ms=ANIMATION_FRAME_MS,
                                       start_step=start_step, **common)
        if view == "source":
            from kernels import source  # plain file reading: no torch
            kernel = source.kernel_source(order)
            phases = source.step_phases(order, trace["loads"], trace["stores"], kernel["phases"])
            return viz.kernel_source_figure(trace, kernel, phases, frame_ms=ANIMATION_FRAME_MS,
                                            start_step=start_step, **common)
        if view == "rereads":
            machine = costmodel.machine_from_facts({"l2_bytes": l2_bytes, "sm_count": sm_count})
            return viz.rereads_figure(trace, machine, device_label, talk_seq_len, **common)
        return viz.tiling_figure(trace, frame_ms=ANIMATION_FRAME_MS, start_step=start_step, **common)
    return ANIMATIONS.get(key, build, lambda fig: FIGURE_BYTES_PER_JSON_BYTE * len(fig.to_json()))


@st.cache_data(show_spinner=False, max_entries=8)
def live_sm_timeline(seq_len: int, batch: int, heads: int, head_dim: int, dtype: str, causal: bool) -> dict:
    from kernels import trace
    return trace.sm_timeline(seq_len=seq_len, batch=batch, heads=heads, head_dim=head_dim, dtype=dtype,
                             causal=causal).to_dict()


def _uploaded_recording() -> tuple[Recording | None, str]:
    """The results file in the sidebar's uploader (from the previous run), or why it cannot be used."""
    from bench import results
    upload = st.session_state.get(UPLOAD_KEY)
    if upload is None:
        return None, ""
    try:
        return parse_uploaded_recording(upload.getvalue()), ""
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
    if name not in available:
        notes.append(f"recording: `{name}` is not in results/ (there: {', '.join(available)}); "
                     f"using `{available[0]}`")
        name = available[0]
    try:
        modified_ns = os.stat(os.path.join(results.RESULTS_DIR, name)).st_mtime_ns
        return load_recording(name, modified_ns), "", notes
    except (results.ResultsError, OSError) as why:
        return None, f"results/{name} could not be read: {markdown_text(why)}", notes


def _shared_memory_budget(facts: dict | None) -> SharedMemoryBudget | None:
    if not facts or not facts.get("smem_per_block_bytes"):
        return None
    from costmodel import smem_bytes
    return SharedMemoryBudget(int(facts["smem_per_block_bytes"]), smem_bytes, markdown_text(facts["name"]))


def prepare_stage(settings: Settings, page_theme: str | None = None) -> tuple[Stage, list[str]]:
    """Choose the data source (live only on a GPU Triton can drive), check the tiles against it, and resolve
    the charts' theme ("auto": the page's, light when unknown).

    Never raises: the sidebar, with its uploader (the way out of a bad file), is drawn from the stage, so a
    failure here becomes a stage without numbers that says why."""
    try:
        return _prepare_stage(settings, page_theme)
    except Exception as exc:  # noqa: BLE001 - a bug or a broken machine must not take the page frame down
        import logging
        logging.getLogger(__name__).exception("preparing the data failed")
        problem = f"the data could not be prepared ({type(exc).__name__})"
        theme = settings.theme if settings.theme != "auto" else page_theme or "light"
        return Stage(replace(settings, source="recorded", theme=theme), False, False, problem, None, problem, "",
                     None, settings.theme), []


def _prepare_stage(settings: Settings, page_theme: str | None) -> tuple[Stage, list[str]]:
    backend, reason = kernel_backend()
    live = settings.source == "live" and backend == "cuda"
    theme_asked = settings.theme
    settings = replace(settings, theme=settings.theme if settings.theme != "auto" else page_theme or "light")
    recording, problem, notes, upload_problem = None, "", [], ""
    if settings.source == "live" and not live:
        if st.query_params.get("source") == "live":  # asked for in the link, not just the default
            notes.append(f"source: `live` needs a CUDA GPU ({markdown_text(reason)}); showing the recording instead")
        settings = replace(settings, source="recorded")  # the link says what is shown
    if not live:
        recording, upload_problem = _uploaded_recording()
        if recording is None:
            recording, problem, shipped_notes = _shipped_recording(settings)
            notes += shipped_notes
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
            measured.append(page_record(measure_live(algorithm, seq_len, settings.batch, settings.heads,
                                                     settings.head_dim, settings.dtype, settings.causal)))
        except (TimeoutError, ValueError) as why:  # GPU busy with other viewers, or a setting it refuses
            st.warning(f"Stopped measuring at {fmt_tokens(seq_len)} tokens: {why}")
            break
    progress.empty()
    return measured


def every_algorithm_at_length(stage: Stage) -> list[dict]:
    """Every algorithm's records at the slider's length (ours, SDPA's, the FA1-order kernel, PyTorch eager)."""
    from bench.record import ALGORITHMS
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
