"""The URL is the page's state: every control writes its value into st.query_params and every run reads the
settings back from there (page.settings), so a bookmark restores the view and a hostile link only produces a
note. (Streamlit's own `bind="query-params"` drops bad values silently; we want to say what was ignored, so
the page keeps the URL itself.)
"""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from page import settings as settings_module
from page.script import control_place
from page.settings import Settings, settings_from_query, settings_to_query

_LINK_NOTES = "link_notes"  # (notes, the link the app wrote in place of the one they were about)


def _query() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params}


def asked_for(field: str, value: str) -> bool:
    """Whether the link itself (not a default) asks for this value of a setting."""
    return st.query_params.get(field) == value


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


def hold_notes(notes: list[str]) -> None:
    """Hold these notes on the link (its own, and those found after reading it: a scene the talk does not have)
    like read_url holds the link's own: on screen until the link changes."""
    if notes:
        st.session_state[_LINK_NOTES] = (notes, None)  # the link to hold them comes with write_url


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
        settings, _ = settings_module.with_model(settings)
    elif "heads" in changes or "head_dim" in changes:
        settings = replace(settings, model=settings_module.model_of(settings.heads, settings.head_dim))
    write_url(settings)


def move_step(by: int, num_steps: int) -> None:
    """The step buttons' callback: from the step in the URL (where the browser may have paused the
    animation since this page was drawn), `by` steps on, within the animation."""
    settings, _ = read_url()
    write_url(replace(settings, step=min(max(settings.step + by, 0), num_steps - 1)))


def correct_link(settings: Settings, **changes) -> None:
    """A scene found that a value of the link cannot be (a step past the animation's end): the link says what is
    shown instead, so the next step starts from there."""
    write_url(replace(settings, **changes))


def _adopt_control(field: str) -> None:
    change_settings(**{field: st.session_state[_control_key(field)]})


def bound(widget, label: str, field: str, settings: Settings, **options):
    """A widget showing one setting; changing it rewrites the URL, which the next run reads back. While the
    session's first picture is on its way (page.script), only its place is drawn and the setting's value returned."""
    with control_place(widget.__name__, field) as ready:
        if not ready:
            return getattr(settings, field)
        key = _control_key(field)
        st.session_state[key] = getattr(settings, field)
        return widget(label, key=key, on_change=_adopt_control, args=(field,), **options)
