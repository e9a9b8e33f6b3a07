"""The frame around the scenes: sidebar, source badges, navigation, notes, and the widgets several scenes share.
Every control is bound to the URL (page.url): it writes the link, and the next run reads it back.
"""
from __future__ import annotations

import operator
import urllib.parse
from collections.abc import Sequence

import streamlit as st

from fmt import fmt_tokens, markdown_text
from page import settings as settings_module
from page.settings import SEQ_LENS, Settings, settings_to_query
from page.layout import Body, note_px, set_frame_px
from page.stage import NO_RECORDING, Stage, same_setting, warm_up, warmed
from page.url import bound, change_settings
from story.records import prefill_records

UPLOADER_KEY = "uploaded_results"


def show_notes(notes: list[str]) -> None:
    """The link's settings that could not be used, in one compact note whose height the scene's body subtracts from
    its chart (page.layout.frame_px): a bad link never pushes the slider and the caption below the fold."""
    text = ("Some settings in the link could not be used, so defaults stand in: " + "; ".join(notes) + "."
            if notes else "")
    if text:
        st.warning(text)
    set_frame_px(note_px(text) if text else 0)


# -- the sidebar: the data source first (its uploader feeds the stage), then the talk's settings -----------

def sidebar_source(settings: Settings, scenes: Sequence, on_gpu: bool, live: bool, backend_reason: str) -> bytes | None:
    """The scene list and the data source; returns the bytes of the results file the viewer uploaded (None)."""
    keys = tuple(scene.key for scene in scenes)
    titles = {scene.key: scene.title for scene in scenes}
    with st.sidebar:
        # a list, not a radio: at 14 scenes a radio pushed the drawer's last controls below a 1080 px window
        bound(st.selectbox, "Scene", "scene", settings, options=keys,
              format_func=lambda key: f"{keys.index(key) + 1}. {titles[key]}")
        st.subheader("Data source")
        if on_gpu:
            bound(st.radio, "Numbers from", "source", settings, options=settings_module.SOURCES,
                  format_func={"live": "this GPU, live", "recorded": "a recording"}.get, horizontal=True)
        else:
            st.caption(f"Live needs a CUDA GPU: {backend_reason}.")
        if live:
            st.button("Warm up the talk", key="warm_up_button", on_click=_ask_for_warm_up,
                      help="Measures every slider stop of this setting now (a progress bar shows it), so that "
                           "every drag in the talk is served from the cache. `streamlit run app.py -- --warm-up` "
                           "does it when the server starts.")
            return None
        from bench import results
        if len(results.list_result_files()) > 1:
            bound(st.selectbox, "Recording", "recording", settings, options=results.list_result_files())
        upload = st.file_uploader("Or open a results file", type="json", key=UPLOADER_KEY,
                                  help="Made by `python -m bench`; checked before use.")
        return upload.getvalue() if upload is not None else None


_WARM_UP_ASKED = "warm_up_asked"


def _ask_for_warm_up() -> None:
    st.session_state[_WARM_UP_ASKED] = True


def warm_up_if_asked(stage: Stage, at_start: bool) -> None:
    """Run the warm-up when its button was pressed, or once per setting when the server was started with
    `-- --warm-up`; say when the talk is ready."""
    asked = st.session_state.pop(_WARM_UP_ASKED, False)
    if (asked or at_start) and (asked or warmed(stage) is None):
        warm_up(stage)
    done = warmed(stage)
    if done:
        st.badge(f"READY: {done}", icon=":material/check_circle:", color="green")


def sidebar_settings(stage: Stage) -> None:
    """What the upload said, then the charts' look; each control writes the URL. (The talk's setting is in the
    frame's top row: `talk_settings`.)"""
    settings = stage.settings
    with st.sidebar:
        if stage.upload_problem:
            st.error(f"That file was not used: {markdown_text(stage.upload_problem)}")
        st.subheader("Look")
        bound(st.radio, "Chart theme", "theme", stage.link_settings, options=settings_module.THEME_CHOICES,
              horizontal=True, format_func=lambda theme: "as the page" if theme == "auto" else theme)
        page_theme = st.context.theme.type  # Streamlit's own page theme: the URL or the viewer's system picks it
        if page_theme and page_theme != settings.theme:
            matching = urllib.parse.urlencode(settings_to_query(stage.link_settings)
                                              | {"embed_options": f"{settings.theme}_theme"})
            st.caption(f"The page is {page_theme}: [open it {settings.theme} too](?{matching}).")


def offered_models(stage: Stage) -> tuple[str, ...]:
    """The model presets a presenter can pick: every one live; on a recording, those it measured at the talk's
    batch over the sequence lengths (a preset with no numbers there would show "no measurements" in every measured
    scene: a fill-the-GPU record at one length is not a recording of the model), and the current choice."""
    if stage.live or stage.recording is None:
        return settings_module.MODELS
    lengths: dict[tuple[int, int], set[int]] = {}
    for r in prefill_records(stage.recording.records):  # a decode or backward record is no prefill
        if r["batch"] == stage.settings.batch and r["algorithm"] in ("fa2", "naive"):
            lengths.setdefault((r["heads"], r["head_dim"]), set()).add(r["seq_len"])
    shapes = {shape for shape, seen in lengths.items() if len(seen) >= 3}
    return tuple(name for name in settings_module.MODELS if name == settings_module.CUSTOM_MODEL
                 or name == stage.settings.model
                 or (settings_module.MODEL_PRESETS[name].heads, settings_module.MODEL_PRESETS[name].head_dim) in shapes)


def setting_summary(settings: Settings) -> str:
    preset = settings_module.MODEL_PRESETS.get(settings.model)
    shape = preset.label if preset else f"{settings.heads} × d{settings.head_dim}"
    dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[settings.dtype]
    return f"{shape} · batch {settings.batch} · {dtype}{' · causal' if settings.causal else ''}"


def talk_settings(stage: Stage) -> None:
    """The attention the talk is about (model, batch, heads, head_dim, dtype, causal, tiles), in a popover of the
    frame's top row: there for the presenter without opening the sidebar, closed for the audience."""
    settings = stage.settings
    with st.container(horizontal=True, horizontal_alignment="right"), \
            st.popover(setting_summary(settings), width="content"):
        bound(st.selectbox, "Model", "model", settings, options=offered_models(stage),
              format_func=lambda name: settings_module.MODEL_PRESETS[name].label
              if name in settings_module.MODEL_PRESETS else "custom (heads, head_dim below)")
        preset = settings_module.MODEL_PRESETS.get(settings.model)
        if preset:
            grouped = (f" Its {preset.heads} query heads share {preset.kv_heads} K/V heads (grouped-query "
                       f"attention), as the decode scene's KV cache does; the prefill scenes, like the recording, "
                       f"give every query head its own K/V head ({preset.heads})."
                       if preset.kv_heads != preset.heads else "")
            st.caption(f"{preset.label}: {preset.heads} heads × head_dim {preset.head_dim}, from {preset.source}."
                       + grouped)
        bound(st.number_input, "Batch", "batch", settings, min_value=1, max_value=settings_module.MAX_BATCH, step=1)
        bound(st.number_input, "Heads", "heads", settings, min_value=1, max_value=settings_module.MAX_HEADS, step=1)
        bound(st.selectbox, "Head dimension", "head_dim", settings, options=settings_module.HEAD_DIMS)
        bound(st.selectbox, "Data type", "dtype", settings, options=tuple(settings_module.DTYPE_BYTES))
        if settings.scene != "tiling":  # the tiling scene shows these next to its animation instead
            bound(st.toggle, "Causal", "causal", settings)
            tile_controls(settings)


def tile_controls(settings: Settings) -> None:
    bound(st.selectbox, "block_m (query rows per tile)", "block_m", settings, options=settings_module.TILE_SIZES)
    bound(st.selectbox, "block_n (key columns per tile)", "block_n", settings, options=settings_module.TILE_SIZES)


# -- the frame's top row -------------------------------------------------------------------------------------

def source_badges(stage: Stage, animation: str = "kernel") -> None:
    """The data source, always in view: the audience should know what they are looking at. animation: the scene's
    (page.Scene.animation): our kernel run here, or a recording's trace."""
    row = st.container(horizontal=True)
    if stage.live:
        row.badge(f"LIVE on {markdown_text(stage.gpu, keep='[]')}", icon=":material/bolt:", color="green")
        return
    if stage.recording:
        days = stage.recording.days(stage.recording.records) or "undated"
        label = markdown_text(f"{stage.gpu}, {days}", keep="[]")  # st.badge escapes the brackets itself
        row.badge(f"RECORDED on {label}", icon=":material/history:", color="blue")
    else:
        row.badge(NO_RECORDING.upper(), icon=":material/block:", color="gray")
    if animation == "recorded":
        row.badge("animation from the recording's trace", icon=":material/history:", color="blue")
    elif stage.on_gpu:
        row.badge("animation LIVE on this GPU", icon=":material/bolt:", color="green")
    else:
        row.badge("INTERPRETER (CPU) for the animation", icon=":material/memory:", color="orange")


def scene_navigation(scene: str, keys: tuple[str, ...]) -> None:
    """Previous / next buttons; a presenter's clicker sends Page Up / Page Down."""
    index = keys.index(scene)
    row = st.container(horizontal=True, horizontal_alignment="right")
    row.button("◀ Previous", shortcut="PageUp", disabled=index == 0, on_click=change_settings,
               kwargs={"scene": keys[max(index - 1, 0)]})
    row.button("Next ▶", shortcut="PageDown", disabled=index == len(keys) - 1, on_click=change_settings,
               kwargs={"scene": keys[min(index + 1, len(keys) - 1)]})


def seq_len_slider(settings: Settings, body: Body | None = None) -> None:
    """The sequence-length slider (a row of the scene's `body`, when given)."""
    bound(st.select_slider, "Sequence length N (tokens)", "seq_len", settings, options=SEQ_LENS,
          format_func=fmt_tokens)
    if body is not None:
        body.row("slider")


# -- messages about the data ----------------------------------------------------------------------

COVERAGE_PX = 145  # design px the coverage line takes when it shows (its note and button)


def recording_coverage(stage: Stage, body: Body | None = None) -> bool:
    """When the recording has nothing for the current setting, say so in one line, with what it has and a button
    to go there (a row of the scene's `body`, when given); returns whether it said so."""
    records = [r for r in (stage.recording.records if stage.recording else []) if r.get("pass", "prefill") == "prefill"]
    if stage.live or not records or any(same_setting(record, stage.settings) for record in records):
        return False
    if body is not None:
        body.add_px(COVERAGE_PX)
    combos = sorted({(r["batch"], r["heads"], r["head_dim"], r["dtype"], bool(r["causal"])) for r in records})
    shapes = sorted({f"{b} × {h} heads, d {d}" for b, h, d, _, _ in combos})
    listed = "; ".join(shapes[:3]) + (f" and {len(shapes) - 3} more" if len(shapes) > 3 else "")
    # only a setting the link can hold is offered (a file may cover head_dim 7, or batch 65536)
    showable = [combo for combo in combos if settings_module.can_show(*combo)]
    line, button = st.columns([3, 1], vertical_alignment="center")
    if not showable:
        line.info("The recording has no measurements for this setting, and none of the recording's settings can "
                  f"be shown here: its batch, heads or head_dim are outside what the app draws (batch ≤ "
                  f"{settings_module.MAX_BATCH}, heads ≤ {settings_module.MAX_HEADS}, head_dim in "
                  f"{', '.join(map(str, settings_module.HEAD_DIMS))}).")
        return True
    line.info(f"The recording has no measurements for this setting ({setting_summary(stage.settings)}); it covers "
              f"{listed}.")
    s = stage.settings
    current = (s.batch, s.heads, s.head_dim, s.dtype, s.causal)
    batch, heads, head_dim, dtype, causal = min(showable, key=lambda combo: sum(map(operator.ne, combo, current)))
    button.button("Closest recorded", on_click=change_settings, help="Show the recording's closest setting",
                  kwargs=dict(batch=batch, heads=heads, head_dim=head_dim, dtype=dtype, causal=causal,
                              model=settings_module.model_of(heads, head_dim)))
    return True


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
