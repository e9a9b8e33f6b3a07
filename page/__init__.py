"""The page machinery of "FlashAttention, live": one way in for app.py.

    page.present(SCENES)   # app.py's table of scenes: key, title, the function that lays it out

`present` draws the frame (title, source badges, navigation, notes, sidebar), reads the link (the URL is the
page's state), prepares the stage (where the numbers come from) and hands it to the scene's function. The scene
functions use the widgets and loaders exported here; they get their data from the `Stage` they are passed.

Rooms: `settings` (the URL as one frozen value, no Streamlit), `url` (reading and writing it, controls bound to
it), `stage` (the data source, records, loaders), `pictures` (the tiling scene's traces, views, loop orders and
tiles), `frame` (sidebar, badges, navigation, messages), `script` (the 1920×1080 stage, CSS, the page script),
`cache` (a process-wide cache bounded in bytes, no Streamlit).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from kernels import specs
from page import guard
from page.layout import ROW_PX, Body, note_px, text_rows_px
from page.frame import no_numbers, recording_coverage, scene_navigation, seq_len_slider, show_notes, \
    sidebar_settings, sidebar_source, source_badges, talk_settings, tile_controls, recording_notes, \
    warm_up_if_asked
from page.pictures import VIEWS, PictureDevice, PictureRequest, TraceRequest, kernel_trace, loop_orders, \
    order_label, picture, traced_tiles
from page.script import BODY_WIDTH_PX, SCENE_BODY_PX, built_figure, chart, column_px, controls_ready, hold_place, \
    metric_cards_px, page_style_and_script
from page.settings import Settings, resolve
from page.stage import Fp8Source, LadderSource, Stage, backward_records, backward_walk, fp8_source, is_live, kernel_backend, ladder_source, live_sm_timeline, prepare_stage, \
    shipped_recording
from page.url import asked_for, bound, correct_link, hold_notes, move_step, read_url, write_url

__all__ = ["BODY_WIDTH_PX", "Body", "ROW_PX", "SCENE_BODY_PX", "note_px", "text_rows_px", "VIEWS", "PictureDevice", "PictureRequest", "Scene",
           "Settings", "Stage", "TraceRequest", "bound", "built_figure", "chart", "column_px", "controls_ready",
           "backward_records", "backward_walk", "correct_link", "hold_place", "kernel_trace", "ladder_source", "LadderSource", "fp8_source", "Fp8Source", "live_sm_timeline", "loop_orders", "metric_cards_px",
           "move_step",
           "no_numbers", "order_label", "picture", "present", "recording_coverage", "seq_len_slider",
           "shipped_recording", "tile_controls", "traced_tiles"]


NAVIGATION_PX = 60  # the frame's buttons (◀ Previous, Next ▶; the settings popover), as tall as drawn at 1080p


@dataclass(frozen=True)
class Scene:
    key: str                       # in the link: ?scene=tiling (or its number, ?scene=6)
    title: str                     # the scene's heading
    show: Callable[[Stage], None]  # lays the scene out from the stage
    animation: str = "kernel"      # where its animation comes from: "kernel" (ours, run here: the GPU or the
                                   # interpreter) or "recorded" (a recording's trace: the ring needs several GPUs)


# the tab's icon: a PNG, not an emoji (Streamlit draws an emoji icon as an SVG image of the emoji's text, which the
# browser parses on the page's main thread with the color emoji font: ~30 ms before the first chart, BENCHMARKS.md)
PAGE_ICON = str(Path(__file__).with_name("icon.png"))


def present(scenes: Sequence[Scene], choices: dict[str, tuple[str, ...]] | None = None, warm_up: bool = False) -> None:
    """One run of the page: the frame, the stage, then the scene the link names.

    choices: the scenes' own tables of link keys (e.g. {"tab": (...)}), resolved like the scene, the tiling
    view and the loop order (page.settings.resolve): a bad value falls back to the first with a note.
    warm_up: measure every slider stop of the setting before its first view (`streamlit run app.py -- --warm-up`)."""
    st.set_page_config(page_title="FlashAttention, live", page_icon=PAGE_ICON, layout="wide",
                       initial_sidebar_state="collapsed")
    guard.install()
    if not guard.same_origin():
        st.error("This page was opened from another site's page; open the app's own address instead.")
        st.stop()
    keys = tuple(scene.key for scene in scenes)
    resolved = page_style_and_script(keys)  # notes on the page script's reports in the link, if a hand wrote them
    settings, notes = read_url()
    tables = {"scene": keys, "view": tuple(VIEWS), "order": tuple(loop_orders()), **(choices or {})}
    for field, table in tables.items():
        settings, found = resolve(settings, field, table, specs.aliases() if field == "order" else None)
        resolved += found
    if resolved:
        notes = [*notes, *resolved]
        hold_notes(notes)
    scene = scenes[keys.index(settings.scene)]
    # the controls come once the session's first picture is drawn (page.script: the first view's steps);
    # until then each holds its place, and the collapsed sidebar's and the closed popover's hold none
    ready = controls_ready()
    badges, navigation = st.columns([3, 2], vertical_alignment="center")
    with navigation:  # the frame is on screen before the first view has loaded the kernels
        if ready:
            scene_navigation(settings.scene, keys)
        else:
            hold_place(NAVIGATION_PX)
    title, talk = st.columns([3, 1], vertical_alignment="center")  # the talk's setting beside the scene's title
    title.header(f"{keys.index(scene.key) + 1}. {scene.title}", anchor=False)
    notes_slot = st.container()
    backend, reason = kernel_backend()
    upload = sidebar_source(settings, scenes, backend == "cuda", is_live(settings), reason) if ready else None
    stage, stage_notes = prepare_stage(settings, st.context.theme.type, upload, asked_for("source", "live"))
    write_url(stage.link_settings)  # the address bar shows the settings in use, ready to bookmark
    with badges:
        source_badges(stage, scene.animation)
        warm_up_if_asked(stage, warm_up)
    with talk:
        if ready:
            talk_settings(stage)
        else:
            hold_place(NAVIGATION_PX)
    with notes_slot:
        show_notes(notes + stage_notes)
        recording_notes(stage)
    if ready:
        sidebar_settings(stage)
    scene.show(stage)
