"""FlashAttention, live: the FlashAttention story scene by scene, on numbers from our own kernels.

    streamlit run app.py

Every number on the page comes from the two Triton kernels in kernels/ (flash and naive): measured
live on the GPU in front of the audience or, without a GPU that Triton can drive, read from a
recording of those kernels (results/) while the tiling animation runs the same kernel source in
Triton's CPU interpreter. This file decides what to show; kernels/ computes and viz/ draws.

Keys for a presenter's clicker: Page Down / Page Up move between scenes, ← / → step the animation.

The URL is the page's state: every control writes its value into st.query_params and every run
reads the settings back from there (app_settings), so a bookmark restores the view and a hostile
link only produces a note. (Streamlit's own `bind="query-params"` drops bad values silently; we
want to say what was ignored, so the app keeps the URL itself.)
"""
from __future__ import annotations

import functools
import operator
import os
import urllib.parse
from dataclasses import dataclass, replace

import streamlit as st
import streamlit.components.v1 as components

from app_settings import SCENES, SEQ_LENS, TRACE_SEQ_LENS, Settings, SharedMemoryBudget, fit_tiles, quoted, \
    settings_from_query, settings_to_query
import app_settings
import costmodel
import story
import viz
from viz.sm_timeline import timeline_stats
from viz.theme import algorithm_label, fmt_bytes, fmt_tokens

SCENE_TITLES = {
    "headline": "FlashAttention in one picture",
    "hierarchy": "The GPU memory hierarchy",
    "problem": "The problem: N × N scores",
    "compare": "Standard vs flash, side by side",
    "tiling": "The tiling, step by step",
    "seqlen": "Sequence length",
    "evolution": "FlashAttention 1 → 4",
    "timeline": "Work on the SMs",
    "takeaways": "Takeaways",
}
# Plotly's own toolbar exports any figure for slides; twice the pixels for a sharp PNG.
CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
# Plotly plays the animation in the browser; a zero-height component (a same-origin iframe) ties it to the
# page around it:
# - Space plays and pauses, as a clicker's "start" key expects: it presses the chart's own play (1×) and
#   pause buttons. Keys typed into inputs and sliders are left alone.
# - Where the animation stops (paused, ended, or moved with its slider), that step goes into the URL's
#   `step`, the way Streamlit itself follows the browser's back and forward buttons (the address changes,
#   then a popstate event): the app reruns at that step, so "Step ▶"/→ go on from the frame on screen and
#   the link shows it.
ANIMATION_IN_THE_PAGE = """<script>
(() => {
  const page = window.parent;  // this iframe is replaced on reruns: the handlers are re-bound each time
  const animated = () => [...page.document.querySelectorAll(".js-plotly-plot")]
    .find((plot) => plot.querySelector(".updatemenu-button"));
  const keepStep = (chart) => {
    if (chart.__stepKept) return;
    chart.__stepKept = true;
    chart.on("plotly_animatingframe", (frame) => { chart.__frameOnScreen = frame.name; });
    const stopped = () => {
      const step = chart.__frameOnScreen;
      const url = new URL(page.location.href);
      if (step === undefined || url.searchParams.get("step") === step) return;
      url.searchParams.set("step", step);
      page.history.replaceState(page.history.state, "", url.toString());
      page.dispatchEvent(new PopStateEvent("popstate", {state: page.history.state}));
    };
    chart.on("plotly_animated", stopped);
    chart.on("plotly_animationinterrupted", stopped);
  };
  const bind = () => { const chart = animated(); if (chart) keepStep(chart); };
  bind();
  window.setInterval(bind, 300);  // the chart is drawn once plotly has loaded, and may be redrawn anew
  if (page.__spacePlaysAnimation) page.document.removeEventListener("keydown", page.__spacePlaysAnimation, true);
  page.__spacePlaysAnimation = (event) => {
    if (event.code !== "Space" || event.repeat) return;
    const target = event.target;
    if (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName)
        || target.getAttribute("role") === "slider") return;
    const chart = animated();
    if (!chart) return;
    const buttons = [...chart.querySelectorAll(".updatemenu-button")];
    const playing = chart.__playing === true;
    const wanted = playing ? buttons.find((b) => b.textContent.includes("pause"))
                           : buttons.find((b) => b.textContent.trim().startsWith("▶ 1×")) || buttons[0];
    if (!wanted) return;
    event.preventDefault();
    if (!chart.__watched) {
      chart.__watched = true;
      chart.on("plotly_animated", () => { chart.__playing = false; });
      chart.on("plotly_animationinterrupted", () => { chart.__playing = false; });
    }
    wanted.dispatchEvent(new page.MouseEvent("click", {bubbles: true}));
    chart.__playing = !playing;
  };
  page.document.addEventListener("keydown", page.__spacePlaysAnimation, true);
})();
</script>"""
ANIMATION_FRAME_MS = 250
# Streamlit leaves 6rem above the first row for its header; the header here holds only the sidebar's
# arrow at the far left, so 4rem is enough, and a scene fits a 1080-pixel projector screen.
PAGE_STYLE = '<style>[data-testid="stMainBlockContainer"] { padding-top: 4rem; }</style>'
HEADLINE_CHART_PX = 500  # under the headline's numbers, legend included, on a 1080-pixel-high screen
NO_RECORDING = "no recorded results yet"
UPLOADED = "uploaded file"
UPLOAD_KEY = "uploaded_results"


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

    @property
    def gpu_name(self) -> str:
        return self.facts["name"] if self.facts else "no GPU"

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
                seed: int) -> dict:
    """The flash kernel's tile steps on one (batch, head), and the naive kernel on the same inputs."""
    from kernels import trace
    return trace.trace_flash(seq_len, head_dim, block_m, block_n, causal, dtype=dtype, seed=seed).to_dict()


@st.cache_resource(show_spinner=False, max_entries=16)
def tiling_animation(seq_len: int, head_dim: int, block_m: int, block_n: int, causal: bool, dtype: str,
                     seed: int, theme: str, start_step: int):
    trace = flash_trace(seq_len, head_dim, block_m, block_n, causal, dtype, seed)
    return viz.tiling_figure(trace, theme=theme, frame_ms=ANIMATION_FRAME_MS, start_step=start_step)


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


def prepare_stage(settings: Settings) -> tuple[Stage, list[str]]:
    """Choose the data source (live only on a GPU Triton can drive) and check the tiles against it."""
    backend, reason = kernel_backend()
    live = settings.source == "live" and backend == "cuda"
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
    return Stage(settings, backend == "cuda", live, reason, recording, problem, upload_problem, facts), notes


# -- records for the current settings -------------------------------------------------------------

def _same_setting(record: dict, settings: Settings) -> bool:
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
                and record["seq_len"] in seq_lens and _same_setting(record, settings)]
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


def ours_over_lengths(stage: Stage) -> list[dict]:
    """Flash and naive records over the slider's lengths: every recorded one, or live up to the slider.

    Live, the sweep stops at the slider: the audience watches it grow, and a huge setting cannot
    hold the GPU for minutes.
    """
    lengths = tuple(n for n in SEQ_LENS if n <= stage.settings.seq_len) if stage.live else SEQ_LENS
    return records_for(stage, ("flash", "naive"), lengths)


def recording_coverage(stage: Stage) -> None:
    """When the recording has nothing for the current setting, say what it has and offer to go there."""
    records = stage.recording.records if stage.recording else []
    if stage.live or not records or any(_same_setting(record, stage.settings) for record in records):
        return
    combos = sorted({(r["batch"], r["heads"], r["head_dim"], r["dtype"], bool(r["causal"])) for r in records})
    listed = "; ".join(f"batch {b}, {h} heads, head_dim {d}, {t}{', causal' if c else ''}"
                       for b, h, d, t, c in combos[:6])
    st.info(f"The recording has no measurements for this setting. It covers: {listed}"
            f"{' …' if len(combos) > 6 else ''}.")
    s = stage.settings
    current = (s.batch, s.heads, s.head_dim, s.dtype, s.causal)
    batch, heads, head_dim, dtype, causal = min(combos, key=lambda combo: sum(map(operator.ne, combo, current)))
    st.button("Show the closest recorded setting", on_click=change_settings,
              kwargs=dict(batch=batch, heads=heads, head_dim=head_dim, dtype=dtype, causal=causal))


def _no_numbers(stage: Stage) -> bool:
    """True (after saying why) when neither a GPU nor a recording can supply measurements."""
    if stage.live or stage.recording is not None:
        return False
    st.warning(f"No measurements to show: {stage.recording_problem} ({stage.backend_reason}).")
    return True


# -- the URL is the state -------------------------------------------------------------------------

def read_url() -> tuple[Settings, list[str]]:
    return settings_from_query({key: st.query_params.get_all(key) for key in st.query_params})


def write_url(settings: Settings) -> None:
    wanted = settings_to_query(settings)
    if {key: st.query_params.get_all(key) for key in st.query_params} != {k: [v] for k, v in wanted.items()}:
        st.query_params.from_dict(wanted)


def _control_key(field: str) -> str:
    return f"control_{field}"


def change_settings(**changes) -> None:
    """A control's callback: the URL holds the settings the last run used; change them there."""
    settings, _ = read_url()
    write_url(replace(settings, **changes))


def move_step(by: int, num_steps: int) -> None:
    """The step buttons' callback: from the step in the URL (where the browser may have paused the
    animation since this page was drawn), `by` steps on, within the animation."""
    settings, _ = read_url()
    write_url(replace(settings, step=min(max(settings.step + by, 0), num_steps - 1)))


def _adopt_control(field: str) -> None:
    change_settings(**{field: st.session_state[_control_key(field)]})


def bound(widget, label: str, field: str, settings: Settings, **options):
    """A widget showing one setting; changing it rewrites the URL, which the next run reads back."""
    key = _control_key(field)
    st.session_state[key] = getattr(settings, field)
    return widget(label, key=key, on_change=_adopt_control, args=(field,), **options)


def show_notes(notes: list[str]) -> None:
    if notes:
        st.warning("Some settings in the link could not be used, so defaults stand in:\n\n"
                   + "\n".join(f"- {note}" for note in notes))


# -- page frame -----------------------------------------------------------------------------------

def sidebar(stage: Stage) -> None:
    """Global controls; each writes the URL."""
    settings = stage.settings
    with st.sidebar:
        bound(st.radio, "Scene", "scene", settings, options=SCENES,
              format_func=lambda scene: f"{SCENES.index(scene) + 1}. {SCENE_TITLES[scene]}")
        st.subheader("Data source")
        if stage.on_gpu:
            bound(st.radio, "Numbers from", "source", settings, options=app_settings.SOURCES,
                  format_func={"live": "this GPU, live", "recorded": "a recording"}.get, horizontal=True)
        else:
            st.caption(f"Live needs a CUDA GPU: {stage.backend_reason}.")
        if not stage.live:
            from kernels import results
            if len(results.list_result_files()) > 1:
                bound(st.selectbox, "Recording", "recording", settings, options=results.list_result_files())
            st.file_uploader("Or open a results file", type="json", key=UPLOAD_KEY,
                             help="Made by `python -m kernels.bench`; checked before use.")
            if stage.upload_problem:
                st.error(f"That file was not used: {quoted(stage.upload_problem, limit=300)}")
        st.subheader("Attention")
        bound(st.number_input, "Batch", "batch", settings, min_value=1, max_value=app_settings.MAX_BATCH, step=1)
        bound(st.number_input, "Heads", "heads", settings, min_value=1, max_value=app_settings.MAX_HEADS, step=1)
        bound(st.selectbox, "Head dimension", "head_dim", settings, options=app_settings.HEAD_DIMS)
        bound(st.selectbox, "Data type", "dtype", settings, options=tuple(app_settings.DTYPE_BYTES))
        if settings.scene != "tiling":  # the tiling scene shows these next to its animation instead
            causal_and_tile_controls(settings)
        st.subheader("Look")
        bound(st.radio, "Chart theme", "theme", settings, options=app_settings.THEMES, horizontal=True)
        page_theme = st.context.theme.type  # Streamlit's own page theme: the URL or the viewer's system picks it
        if page_theme and page_theme != settings.theme:
            matching = urllib.parse.urlencode(settings_to_query(settings) | {"embed_options": f"{settings.theme}_theme"})
            st.caption(f"The page is {page_theme}: [open it {settings.theme} too](?{matching}).")


def causal_and_tile_controls(settings: Settings) -> None:
    bound(st.toggle, "Causal", "causal", settings)
    bound(st.selectbox, "block_m (query rows per tile)", "block_m", settings, options=app_settings.TILE_SIZES)
    bound(st.selectbox, "block_n (key columns per tile)", "block_n", settings, options=app_settings.TILE_SIZES)


def source_badges(stage: Stage) -> None:
    """The data source, always in view: the audience should know what they are looking at."""
    row = st.container(horizontal=True)
    if stage.live:
        row.badge(f"LIVE on {stage.gpu_name}", icon=":material/bolt:", color="green")
        return
    if stage.recording:
        created = str(stage.recording.meta.get("created", ""))[:10] or "undated"
        row.badge(f"RECORDED on {stage.gpu_name}, {created}", icon=":material/history:", color="blue")
    else:
        row.badge(NO_RECORDING.upper(), icon=":material/block:", color="gray")
    if stage.on_gpu:
        row.badge("animation LIVE on this GPU", icon=":material/bolt:", color="green")
    else:
        row.badge("INTERPRETER (CPU) for the animation", icon=":material/memory:", color="orange")


def scene_navigation(scene: str) -> None:
    """Previous / next buttons; a presenter's clicker sends Page Up / Page Down."""
    index = SCENES.index(scene)
    row = st.container(horizontal=True, horizontal_alignment="right")
    row.button("◀ Previous", shortcut="PageUp", disabled=index == 0, on_click=change_settings,
               kwargs={"scene": SCENES[max(index - 1, 0)]})
    row.button("Next ▶", shortcut="PageDown", disabled=index == len(SCENES) - 1, on_click=change_settings,
               kwargs={"scene": SCENES[min(index + 1, len(SCENES) - 1)]})


def chart(fig) -> None:
    st.plotly_chart(fig, theme=None, config=CHART_CONFIG)  # theme=None: keep viz's projector template


def seq_len_slider(settings: Settings) -> None:
    bound(st.select_slider, "Sequence length N (tokens)", "seq_len", settings, options=SEQ_LENS,
          format_func=fmt_tokens)


# -- the story's numbers, shared by the scenes that quote them -------------------------------------

def hbm_traffic(stage: Stage, records: list[dict]) -> story.TrafficPanels:
    """The cost model's HBM traffic of both algorithms at the current setting (story.traffic_panels)."""
    s = stage.settings
    return story.traffic_panels(s.seq_len, s.batch, s.heads, s.head_dim, s.dtype_bytes, s.causal, records,
                                stage.facts)


def animation_trace(s: Settings) -> dict:
    return flash_trace(s.trace_len, s.head_dim, s.block_m, s.block_n, s.causal, s.dtype, s.seed)


def first_out_of_memory(records: list[dict]) -> dict | None:
    """The shortest length at which the standard kernels ran out of memory: the wall on the slider."""
    walls = [record for record in records if record["algorithm"] == "naive" and record["status"] == "oom"]
    return min(walls, key=lambda record: record["seq_len"], default=None)


@dataclass(frozen=True)
class Headline:
    naive_bytes: int   # extra memory the standard kernels need (model: S, P, O)
    flash_bytes: int   # extra memory flash needs (model: O, LSE)
    speedup: str       # measured naive time / flash time at the slider's N, or why there is none
    speedup_why: str   # the two times, or the reason


def headline_numbers(stage: Stage, records: list[dict]) -> Headline:
    s = stage.settings
    shape = (s.seq_len, s.batch, s.heads, s.head_dim, s.dtype_bytes)
    memory = costmodel.naive_extra_bytes(*shape), costmodel.flash_extra_bytes(*shape)
    row = next((row for row in viz.speedup_table(records) if row["seq_len"] == s.seq_len), None)
    if row is None:
        why = stage.recording_problem if not stage.live and stage.recording is None else \
            "not measured at this setting"
        return Headline(*memory, "—", why)
    if row["speedup"] is None:
        return Headline(*memory, "n/a", row["note"] or "one of the two did not run")
    return Headline(*memory, f"{row['speedup']:.1f}×",
                    f"standard {row['naive_ms']:.3g} ms → flash {row['flash_ms']:.3g} ms")


# -- scenes ---------------------------------------------------------------------------------------

def memory_chart(stage: Stage, records: list[dict], **figure_options) -> None:
    s = stage.settings
    hbm_bytes = stage.facts.get("hbm_bytes") if stage.facts else None
    chart(viz.memory_figure(records, s.batch, s.heads, s.head_dim, s.dtype_bytes, seq_len_marker=s.seq_len,
                            theme=s.theme, hbm_bytes=hbm_bytes, **figure_options))


def scene_headline(stage: Stage) -> None:
    s = stage.settings
    st.markdown("Attention builds an **N × N** matrix of scores. FlashAttention computes the same result "
                "tile by tile in on-chip memory and never writes that matrix out.")
    seq_len_slider(s)
    records = ours_over_lengths(stage)
    numbers = headline_numbers(stage, records)
    standard, flash, faster = st.columns(3)
    standard.metric(f"Standard attention: extra memory at {fmt_tokens(s.seq_len)}", fmt_bytes(numbers.naive_bytes),
                    help="S (fp32) + P + O for every batch and head: grows as N²", border=True)
    flash.metric(f"Flash: extra memory at {fmt_tokens(s.seq_len)}", fmt_bytes(numbers.flash_bytes),
                 help="O + the log-sum-exp per row: grows as N", border=True)
    faster.metric(f"Speedup, measured on {stage.gpu_name}", numbers.speedup, help=numbers.speedup_why, border=True)
    st.caption(f"Batch {s.batch} × {s.heads} heads, head_dim {s.head_dim}, {s.dtype}"
               f"{', causal' if s.causal else ''}. Speedup: {numbers.speedup_why}.")
    recording_coverage(stage)
    memory_chart(stage, records, height=HEADLINE_CHART_PX)


def scene_hierarchy(stage: Stage) -> None:
    if stage.facts is None:
        st.info(f"The memory hierarchy comes from a GPU or a recording: {stage.recording_problem}.")
        return
    st.markdown("Flash attention keeps its working set in the small, fast on-chip SRAM and reads the large, "
                "slow HBM as few times as it can.")
    chart(viz.hierarchy_figure(stage.facts, theme=stage.settings.theme))


def scene_problem(stage: Stage) -> None:
    s = stage.settings
    seq_len_slider(s)
    eight_k_fp32 = costmodel.scores_bytes(8192, dtype_bytes=4)
    eight_k_bf16 = costmodel.scores_bytes(8192, dtype_bytes=2)
    st.markdown(
        f"One head's scores at N = {fmt_tokens(s.seq_len)} in {s.dtype}: "
        f"**{fmt_bytes(costmodel.scores_bytes(s.seq_len, dtype_bytes=s.dtype_bytes))}**; all {s.heads} heads: "
        f"**{fmt_bytes(costmodel.scores_bytes(s.seq_len, heads=s.heads, dtype_bytes=s.dtype_bytes))}**. "
        f"The often-quoted \"8K = 256 MB per head\" holds for fp32 scores ({fmt_bytes(eight_k_fp32)}); "
        f"in bf16 it is {fmt_bytes(eight_k_bf16)}. Flash's extra memory is not constant either: it grows as "
        f"O(N), {fmt_bytes(costmodel.flash_extra_bytes(s.seq_len, 1, 1, s.head_dim, s.dtype_bytes))} per head here.")
    hbm_bytes = stage.facts.get("hbm_bytes") if stage.facts else None
    chart(viz.scores_memory_figure(s.seq_len, s.heads, s.dtype_bytes, hbm_bytes=hbm_bytes, theme=s.theme))


def scene_compare(stage: Stage) -> None:
    s = stage.settings
    seq_len_slider(s)
    panels = hbm_traffic(stage, ours_over_lengths(stage))
    block_m, block_n = panels.tiles
    standard, flash, ratio = st.columns(3)
    standard.metric("Standard: HBM traffic", fmt_bytes(panels.naive_bytes), border=True)
    flash.metric(f"Flash ({block_m}×{block_n} tiles): HBM traffic", fmt_bytes(panels.flash_bytes), border=True)
    ratio.metric("Standard ÷ flash traffic", f"{panels.naive_bytes / panels.flash_bytes:.1f}×", border=True)
    figure_panels = [{"key": "naive", "title": "standard: 3 kernels", "parts": panels.naive},
                     {"key": "flash_no_cache", "title": "flash, no cache (paper's bound)",
                      "parts": panels.flash_no_cache}]
    if panels.flash_l2 is not None:
        figure_panels.append({"key": "flash_l2", "title": "flash, L2-aware model", "parts": panels.flash_l2})
    chart(viz.compare_figure(figure_panels, theme=s.theme))


def scene_tiling(stage: Stage) -> None:
    s = stage.settings
    length, tiles, seed, back, forward = st.columns([3, 5, 1.5, 1.25, 1.25], vertical_alignment="bottom")
    with length:
        bound(st.select_slider, "Animation length N (tokens)", "trace_len", s, options=TRACE_SEQ_LENS)
    with tiles.container(horizontal=True, vertical_alignment="bottom"):
        causal_and_tile_controls(s)
    with seed:
        bound(st.number_input, "Random inputs: seed", "seed", s, min_value=0, max_value=app_settings.MAX_SEED)
    where = stage.kernels_run
    try:
        with st.spinner(f"Running the flash and naive kernels {where}…"):
            trace = animation_trace(s)
            num_steps = len(trace["steps"])
            step = min(s.step, num_steps - 1)
            fig = tiling_animation(s.trace_len, s.head_dim, s.block_m, s.block_n, s.causal, s.dtype, s.seed,
                                   s.theme, step)
    except ValueError as why:  # settings the kernel or the animation refuse, said in their words
        st.error(f"No animation for these settings: {why}")
        return
    back.button("◀ Step", shortcut="Left", disabled=step == 0, on_click=move_step, args=(-1, num_steps),
                width="stretch")
    forward.button("Step ▶", shortcut="Right", disabled=step == num_steps - 1, on_click=move_step,
                   args=(1, num_steps), width="stretch")
    chart(fig)
    components.html(ANIMATION_IN_THE_PAGE, height=0)
    st.caption(f"{num_steps} steps of {s.block_m}×{s.block_n} tiles over one head, head_dim {s.head_dim}, "
               f"{s.dtype}{', causal' if s.causal else ''}, computed {where}. Same inputs through the naive kernel: "
               f"max |O_flash − O_standard| = {trace['max_abs_err']:.2e}.")
    st.download_button("Download the animation (HTML, plays offline)", data=functools.partial(viz.tiling_html, fig),
                       file_name=f"flash-tiling-{s.trace_len}-{s.block_m}x{s.block_n}"
                                 f"{'-causal' if s.causal else ''}.html",
                       mime="text/html", on_click="ignore")


def scene_seqlen(stage: Stage) -> None:
    s = stage.settings
    seq_len_slider(s)
    if _no_numbers(stage):
        return
    records = ours_over_lengths(stage)
    recording_coverage(stage)
    memory, time, throughput, table = st.tabs(["Memory", "Time", "Throughput", "Speedup table"])
    with memory:
        memory_chart(stage, records)
    with time:
        chart(viz.timing_figure(records, seq_len_marker=s.seq_len, theme=s.theme))
    with throughput:
        chart(viz.tflops_figure(records, seq_len_marker=s.seq_len, theme=s.theme))
    with table:
        st.table([{"N": row["tokens"], "flash": _milliseconds(row["flash_ms"]),
                   "standard": _milliseconds(row["naive_ms"]),
                   "speedup": f"{row['speedup']:.2f}×" if row["speedup"] else "—", "note": row["note"]}
                  for row in viz.speedup_table(records)])


def _milliseconds(value: float | None) -> str:
    return f"{value:.3g} ms" if value is not None else "—"


def scene_evolution(stage: Stage) -> None:
    s = stage.settings
    seq_len_slider(s)
    if _no_numbers(stage):
        return
    from kernels.record import ALGORITHMS
    records = records_for(stage, ALGORITHMS, (s.seq_len,))
    recording_coverage(stage)
    measured = [{"label": algorithm_label(r["algorithm"]), "tflops": r["tflops"], "gpu": stage.gpu_name,
                 "algorithm": r["algorithm"]} for r in records]
    chart(viz.evolution_figure(measured, theme=s.theme))
    with st.expander("Sources of the published numbers"):
        st.markdown("\n".join(f"- **{entry['version']}** ({entry['year']}, {entry['gpu']}): {entry['citation']}. "
                              f"{entry['note']}" for entry in viz.PUBLISHED))


def scene_timeline(stage: Stage) -> None:
    s = stage.settings
    if stage.live:
        try:
            with st.spinner(f"Timing every program of the flash kernel on {stage.gpu_name}…"):
                timeline = live_sm_timeline(s.seq_len, s.batch, s.heads, s.head_dim, s.dtype, s.causal)
        except (ValueError, RuntimeError) as why:  # RuntimeError: torch's out-of-memory at a huge setting
            st.error(f"No SM timeline for these settings: {why}")
            return
    elif stage.recording and stage.recording.timelines:
        # the recording holds a few timelines; show the one closest to the current setting
        timeline = min(stage.recording.timelines,
                       key=lambda t: (bool(t["causal"]) != s.causal, abs(t["seq_len"] - s.seq_len)))
    else:
        st.info(f"The SM timeline needs a GPU or a recording with timelines: "
                f"{stage.recording_problem or 'this recording has none'}.")
        return
    st.caption(f"{'Measured now' if stage.live else 'Recorded'}: {fmt_tokens(timeline['seq_len'])} tokens, "
               f"batch {timeline['batch']}, {timeline['heads']} heads, head_dim {timeline['head_dim']}, "
               f"block_m {timeline['block_m']}{', causal' if timeline['causal'] else ''}.")
    stats = timeline_stats(timeline)
    programs, waves, busy = st.columns(3)
    programs.metric("Programs (Q blocks × heads)", f"{stats['programs']:,}", border=True)
    waves.metric(f"Waves over {timeline['sm_count']} SMs", f"{stats['waves']:.1f}", border=True)
    busy.metric("SMs busy", f"{stats['utilization']:.0%}", border=True)
    chart(viz.sm_timeline_figure(timeline, theme=s.theme))


def scene_takeaways(stage: Stage) -> None:
    s = stage.settings
    records = ours_over_lengths(stage)
    numbers = headline_numbers(stage, records)
    panels = hbm_traffic(stage, records)
    at = f"at {fmt_tokens(s.seq_len)} tokens (batch {s.batch} × {s.heads} heads, {s.dtype})"
    points = [
        f"**Memory: O(N²) → O(N).** Standard attention needs {fmt_bytes(numbers.naive_bytes)} beyond its inputs "
        f"{at}; flash needs {fmt_bytes(numbers.flash_bytes)} (scene 1).",
        f"**Traffic, not FLOPs.** Both do the same arithmetic, but standard moves {fmt_bytes(panels.naive_bytes)} "
        f"through HBM and flash {fmt_bytes(panels.flash_bytes)} (scene 4).",
        f"**Speed follows traffic.** Measured on {stage.gpu_name}: {numbers.speedup} ({numbers.speedup_why}) "
        "(scenes 1, 6).",
    ]
    wall = first_out_of_memory(records)
    if wall:
        points.append(f"**The wall.** On {stage.gpu_name} the standard kernels ran out of memory at "
                      f"{fmt_tokens(wall['seq_len'])} tokens, asking for {fmt_bytes(wall['needed_bytes'] or 0)}; "
                      "flash kept going (scene 6).")
    where = stage.kernels_run
    try:
        with st.spinner(f"Running both kernels on the same inputs {where}…"):
            error = animation_trace(s)["max_abs_err"]
        points.append(f"**Exact, not approximate.** On the same random inputs ({s.trace_len} tokens, {s.dtype}), "
                      f"flash and the standard kernels differ by at most {error:.1e}: rounding, nothing more "
                      "(scene 5).")
    except ValueError as why:
        st.error(f"No exactness check for these settings: {why}")
    st.markdown("\n".join(f"{number}. {point}" for number, point in enumerate(points, start=1)))


SCENE_FUNCTIONS = {
    "headline": scene_headline, "hierarchy": scene_hierarchy, "problem": scene_problem, "compare": scene_compare,
    "tiling": scene_tiling, "seqlen": scene_seqlen, "evolution": scene_evolution, "timeline": scene_timeline,
    "takeaways": scene_takeaways,
}
assert set(SCENE_FUNCTIONS) == set(SCENES), "every scene needs a function"


def main() -> None:
    st.set_page_config(page_title="FlashAttention, live", page_icon="⚡", layout="wide",
                       initial_sidebar_state="collapsed")
    st.html(PAGE_STYLE)  # style only: Streamlit applies it without adding a row to the page
    settings, notes = read_url()
    badges, navigation = st.columns([3, 2], vertical_alignment="center")
    with navigation:  # the frame is on screen before the first view has loaded the kernels
        scene_navigation(settings.scene)
    st.header(f"{SCENES.index(settings.scene) + 1}. {SCENE_TITLES[settings.scene]}", anchor=False)
    notes_slot = st.container()
    stage, stage_notes = prepare_stage(settings)
    write_url(stage.settings)  # the address bar shows the settings in use, ready to bookmark
    with badges:
        source_badges(stage)
    with notes_slot:
        show_notes(notes + stage_notes)
    sidebar(stage)
    SCENE_FUNCTIONS[stage.settings.scene](stage)


if __name__ == "__main__":
    main()
