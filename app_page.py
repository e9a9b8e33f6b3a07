"""The page around the scenes: the URL as the page's state (read_url/write_url, controls bound to it),
the frame (sidebar, source badges, navigation, notes), the shared widgets, and the page's style and script.

The URL is the page's state: every control writes its value into st.query_params and every run reads the
settings back from there (app_settings), so a bookmark restores the view and a hostile link only produces a
note. (Streamlit's own `bind="query-params"` drops bad values silently; we want to say what was ignored, so
the page keeps the URL itself.)
"""
from __future__ import annotations

import operator
import urllib.parse
from dataclasses import replace

import streamlit as st
import streamlit.components.v1 as components

from app_settings import SCENES, SEQ_LENS, Settings, quoted, settings_from_query, settings_to_query
import app_settings
from app_stage import NO_RECORDING, UPLOAD_KEY, Stage, same_setting
from viz.text import markdown_text
from viz.theme import fmt_tokens

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
# Streamlit leaves 6rem above the first row for its header; the header here holds only the sidebar's
# arrow at the far left, so 4rem is enough, and a scene fits a 1080-pixel projector screen.
PAGE_STYLE = '<style>[data-testid="stMainBlockContainer"] { padding-top: 4rem; }</style>'


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

def sidebar(stage: Stage, titles: dict[str, str]) -> None:
    """Global controls; each writes the URL."""
    settings = stage.settings
    with st.sidebar:
        bound(st.radio, "Scene", "scene", settings, options=SCENES,
              format_func=lambda scene: f"{SCENES.index(scene) + 1}. {titles[scene]}")
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
                st.error(f"That file was not used: {markdown_text(stage.upload_problem)}")
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
    tile_controls(settings)


def tile_controls(settings: Settings) -> None:
    bound(st.selectbox, "block_m (query rows per tile)", "block_m", settings, options=app_settings.TILE_SIZES)
    bound(st.selectbox, "block_n (key columns per tile)", "block_n", settings, options=app_settings.TILE_SIZES)


def source_badges(stage: Stage) -> None:
    """The data source, always in view: the audience should know what they are looking at."""
    row = st.container(horizontal=True)
    if stage.live:
        row.badge(f"LIVE on {markdown_text(stage.gpu, keep='[]')}", icon=":material/bolt:", color="green")
        return
    if stage.recording:
        created = str(stage.recording.meta.get("created", ""))[:10] or "undated"
        label = markdown_text(f"{stage.gpu}, {created}", keep="[]")  # st.badge escapes the brackets itself
        row.badge(f"RECORDED on {label}", icon=":material/history:", color="blue")
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


def animation_in_the_page() -> None:
    """The script that ties the animated chart to the page (Space, the paused step into the URL)."""
    components.html(ANIMATION_IN_THE_PAGE, height=0)


# -- messages about the data ----------------------------------------------------------------------

def recording_coverage(stage: Stage) -> None:
    """When the recording has nothing for the current setting, say what it has and offer to go there."""
    records = stage.recording.records if stage.recording else []
    if stage.live or not records or any(same_setting(record, stage.settings) for record in records):
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


def recording_notes(stage: Stage) -> None:
    """What the results file held that could not be used (kernels.results dropped it): the page falls back."""
    notes = stage.recording.notes if stage.recording and not stage.live else ()
    if notes:
        st.info("Some values in the results file were ignored:\n\n" +
                "\n".join(f"- {markdown_text(note)}" for note in notes), icon=":material/info:")


def no_numbers(stage: Stage) -> bool:
    """True (after saying why) when neither a GPU nor a recording can supply measurements."""
    if stage.live or stage.recording is not None:
        return False
    st.warning(f"No measurements to show: {stage.recording_problem} ({stage.backend_reason}).")
    return True

