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
from pathlib import Path

from app_settings import SCENES, SEQ_LENS, Settings, quoted, settings_from_query, settings_to_query
import app_settings
from app_stage import NO_RECORDING, UPLOAD_KEY, Stage, same_setting
from fmt import markdown_text
from viz.theme import scaled_figure
from fmt import fmt_tokens

# Plotly's own toolbar exports any figure for slides; twice the pixels for a sharp PNG.
CHART_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
# -- the stage: a 1920×1080 design canvas scaled to the window -----------------------------------------
# Every size on the page is given for a 1920×1080 screen ("design px") and scales with the window, so a
# scene that fits 1080p fits 720p (or 1080p at 150% zoom) the same way, only smaller. The page's text
# scales through the root font size (1rem = 24 design px = 1/45 of the height, the smallest text the
# audience reads); the charts are built in design px and scaled to the window the page script reports.
# (CSS `zoom` on the page would do both at once, but Streamlit sizes a plotly chart from its rendered
# width: under zoom 2/3 the charts came out 2/3 as wide as their column. See the stage report.)
DESIGN_WIDTH_PX, DESIGN_HEIGHT_PX = 1920, 1080
SMALLEST_TEXT_PX = 24  # design px: 1/45 of the height (24 px at 1080p, 16 px at 720p)
# Under the page frame (badges, navigation, the scene's title) a scene body has this much height, in
# design px, for everything it shows (text, controls, charts); scenes size their charts from it.
FRAME_PX = 150
SCENE_BODY_PX = DESIGN_HEIGHT_PX - FRAME_PX
# Streamlit's own sizes are in rem: one root size scales them all. Text the audience reads is at
# least 1rem (max(1rem, 1em) lifts captions, labels, badges and table cells that Streamlit sets
# smaller); the frame's paddings shrink so the scene gets the height.
PAGE_STYLE = """<style>
html { font-size: min(calc(100vh / 45), calc(100vw / 80)) !important; }
[data-testid="stMainBlockContainer"] { padding: 0.5rem 2.5rem 0.25rem 2.5rem; max-width: none; }
[data-testid="stMain"] :is(p, span, div, label, li, td, th, a, code, small, summary, button, input) {
  font-size: max(1rem, 1em); }
[data-testid="stMain"] h2 { font-size: 1.75rem; padding: 0.25rem 0 0.25rem 0; }
[data-testid="stMain"] [data-testid="stMetricValue"] { font-size: 2rem; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
[data-testid="stMain"] .stMarkdownBadge { font-size: 1rem !important; }
/* Streamlit's header keeps only the sidebar's arrow (top left, over the page's left padding) */
[data-testid="stHeader"] { background: transparent; pointer-events: none; }
[data-testid="stHeader"] button { pointer-events: auto; }
</style>"""


# -- the URL is the state -------------------------------------------------------------------------

_LINK_NOTES = "link_notes"  # (notes, the link the app wrote in place of the one they were about)


def _query() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params}


def read_url() -> tuple[Settings, list[str]]:
    """The settings the link asks for, and notes on what it asked for that could not be used. The notes
    stay while the link is the one the app wrote in its place: a rerun that nobody asked for (the page
    reporting its window's size) must not take them off the screen."""
    settings, notes = settings_from_query(_query())
    if notes:
        st.session_state[_LINK_NOTES] = (notes, None)  # the link to hold them comes with write_url
        return settings, notes
    remembered, written = st.session_state.get(_LINK_NOTES, ([], None))
    return settings, (remembered if written is not None and written == _query() else [])


def write_url(settings: Settings) -> None:
    wanted = {key: [value] for key, value in settings_to_query(settings).items()}
    if _query() != wanted:
        st.query_params.from_dict({key: values[0] for key, values in wanted.items()})
    notes, written = st.session_state.get(_LINK_NOTES, ([], None))
    if notes and written is None:
        st.session_state[_LINK_NOTES] = (notes, wanted)


def _control_key(field: str) -> str:
    return f"control_{field}"


def change_settings(**changes) -> None:
    """A control's callback: the URL holds the settings the last run used; change them there. A model
    preset sets heads and head_dim; setting either names the preset of that shape, or "custom"."""
    settings, _ = read_url()
    settings = replace(settings, **changes)
    if "model" in changes:
        settings, _ = app_settings.with_model(settings)
    elif "heads" in changes or "head_dim" in changes:
        settings = replace(settings, model=app_settings.model_of(settings.heads, settings.head_dim))
    write_url(settings)


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
            from bench import results
            if len(results.list_result_files()) > 1:
                bound(st.selectbox, "Recording", "recording", settings, options=results.list_result_files())
            st.file_uploader("Or open a results file", type="json", key=UPLOAD_KEY,
                             help="Made by `python -m bench`; checked before use.")
            if stage.upload_problem:
                st.error(f"That file was not used: {markdown_text(stage.upload_problem)}")
        st.subheader("Attention")
        bound(st.selectbox, "Model", "model", settings, options=app_settings.MODELS,
              format_func=lambda name: app_settings.MODEL_PRESETS[name].label
              if name in app_settings.MODEL_PRESETS else "custom (heads, head_dim below)")
        preset = app_settings.MODEL_PRESETS.get(settings.model)
        if preset:
            grouped = (f" Its {preset.heads} query heads share {preset.kv_heads} K/V heads (grouped-query "
                       f"attention); the kernels here give every query head its own K/V head, so the app "
                       f"shows {preset.heads} K/V heads." if preset.kv_heads != preset.heads else "")
            st.caption(f"{preset.label}: {preset.heads} heads × head_dim {preset.head_dim}, from {preset.source}."
                       + grouped)
        bound(st.number_input, "Batch", "batch", settings, min_value=1, max_value=app_settings.MAX_BATCH, step=1)
        bound(st.number_input, "Heads", "heads", settings, min_value=1, max_value=app_settings.MAX_HEADS, step=1)
        bound(st.selectbox, "Head dimension", "head_dim", settings, options=app_settings.HEAD_DIMS)
        bound(st.selectbox, "Data type", "dtype", settings, options=tuple(app_settings.DTYPE_BYTES))
        if settings.scene != "tiling":  # the tiling scene shows these next to its animation instead
            causal_and_tile_controls(settings)
        st.subheader("Look")
        bound(st.radio, "Chart theme", "theme", stage.link_settings, options=app_settings.THEME_CHOICES,
              horizontal=True, format_func=lambda theme: "as the page" if theme == "auto" else theme)
        page_theme = st.context.theme.type  # Streamlit's own page theme: the URL or the viewer's system picks it
        if page_theme and page_theme != settings.theme:
            matching = urllib.parse.urlencode(settings_to_query(stage.link_settings)
                                              | {"embed_options": f"{settings.theme}_theme"})
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
    """A figure built in design px (viz), scaled to the window; theme=None keeps viz's projector template."""
    st.plotly_chart(scaled_figure(fig, stage_scale()), theme=None, config=CHART_CONFIG)


def seq_len_slider(settings: Settings) -> None:
    bound(st.select_slider, "Sequence length N (tokens)", "seq_len", settings, options=SEQ_LENS,
          format_func=fmt_tokens)


# -- the page's style and script -------------------------------------------------------------------

PAGE_SCRIPT_KEY = "page_script"
_page_script = st.components.v2.component(
    "flash_live_page", js=(Path(__file__).with_name("app_page.js")).read_text(), isolate_styles=False)


def page_style_and_script() -> None:
    """The stage's CSS, and the page script (app_page.js): the window's size for the charts, Space to play
    and pause, the animation's paused step into the link. Mounted in the sidebar: no row in the scene."""
    # style only: Streamlit applies it without adding a row to the page. --stage-window says which window
    # the charts were built for (tests wait for it after a resize).
    size = window_size()
    built_for = f"{size['width']}x{size['height']}" if size else "design"
    st.html(PAGE_STYLE.replace("</style>", f':root {{ --stage-window: "{built_for}"; }}\n</style>'))
    with st.sidebar:
        _page_script(key=PAGE_SCRIPT_KEY, data={"viewport": window_size()}, height=0,
                     default={"viewport": None}, on_viewport_change=lambda: None)


def window_size() -> dict | None:
    """The browser window's inner size in CSS px, as the page script last reported it (None before)."""
    state = st.session_state.get(PAGE_SCRIPT_KEY)
    size = state.get("viewport") if state else None
    return size if isinstance(size, dict) and size.get("width") and size.get("height") else None


def stage_scale() -> float:
    """Screen px per design px: the window against the 1920×1080 canvas (1 until the page reports)."""
    size = window_size()
    if size is None:
        return 1.0
    scale = min(float(size["height"]) / DESIGN_HEIGHT_PX, float(size["width"]) / DESIGN_WIDTH_PX)
    return min(max(scale, 0.25), 4.0)


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
    """What the results file held that could not be used (bench.results dropped it): the page falls back."""
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

