"""Trust boundaries of the server: what a browser (or anything that speaks its websocket) may do to others.

Streamlit (pinned: 1.67) lets any websocket client send "clear_cache", which empties every cache of the
process: on a GPU that means every viewer's numbers are measured again. Its developer menu, the only place
that sends it, is hidden here (config: toolbarMode = "minimal"), so a viewer's "clear cache" now clears that
viewer's own session state and nothing shared. Streamlit also accepts a websocket from any page served by
this machine (`http://127.0.0.1:<any port>`); here only the app's own origin, or one listed in
`server.corsAllowedOrigins`, may connect. `install()` applies both once per process, when the page is first
imported; `same_origin()` also checks the connection of the very run that installed them.

Both lean on Streamlit internals (AppSession's clear-cache handler and session state, the websocket's origin check,
the allowlist reader): this module is the one place that names them, and `check()` says which of them this
Streamlit lacks (tests/test_private_apis.py fails loudly when an upgrade moves them).
"""
from __future__ import annotations

from urllib.parse import urlparse

import streamlit as st

_INSTALLED = False


def _session_only_clear_cache(session) -> None:
    """A viewer's "clear cache": their own session state; the process-wide caches stay (others use them)."""
    session._session_state.clear()


def _listed_origin(url: str) -> bool:
    """A cross-origin websocket is allowed only from an origin listed in server.corsAllowedOrigins."""
    from streamlit.web.server.server_util import allowlisted_origins
    return url in allowlisted_origins()


def check() -> list[str]:
    """The Streamlit internals named here that this Streamlit lacks (empty: all there)."""
    missing = []
    try:
        from streamlit.runtime.app_session import AppSession
        missing += [f"AppSession.{name}" for name in ("_handle_clear_cache_request",) if not hasattr(AppSession, name)]
    except ImportError as exc:
        missing.append(f"streamlit.runtime.app_session: {exc}")
    try:
        from streamlit.web.server.server_util import allowlisted_origins  # noqa: F401
    except ImportError as exc:
        missing.append(f"streamlit.web.server.server_util.allowlisted_origins: {exc}")
    try:
        from streamlit.web.server.starlette import starlette_websocket
        if not hasattr(starlette_websocket, "is_url_from_allowed_origins"):
            missing.append("starlette_websocket.is_url_from_allowed_origins")
    except ImportError:
        pass  # another server build: same_origin() still applies
    return missing


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from streamlit.runtime.app_session import AppSession
    AppSession._handle_clear_cache_request = _session_only_clear_cache
    try:
        from streamlit.web.server.starlette import starlette_websocket
        starlette_websocket.is_url_from_allowed_origins = _listed_origin
    except ImportError:  # another server build: the run's own check (same_origin) still applies
        pass
    _INSTALLED = True


def same_origin() -> bool:
    """Whether this run's connection comes from the app's own page (or sent no Origin, like AppTest)."""
    headers = st.context.headers
    origin, host = headers.get("Origin"), headers.get("Host")
    if not origin or not host:
        return True
    return urlparse(origin).netloc == host or _listed_origin(origin)
