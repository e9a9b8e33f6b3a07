"""One palette and one plotly template for every figure: projector-friendly and colour-blind safe.

Colours come from the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), which stays
distinguishable under the common colour-vision deficiencies. The algorithms' colours (each kernel's spec names one
of COLORS; `look` gives its colour, legend name and loop order) keep at least 3:1 contrast against both the light
(white) and the dark (Streamlit's #0E1117) background, but for PyTorch eager's orange (2.3:1 on white);
orange and sky blue are otherwise used only for large filled areas (tiles, bands), never for text.
PALETTE holds the colours of everything else: tile states, failures, memory levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import functools
import plotly.colors
import plotly.graph_objects as go

from fmt import THEMES  # noqa: F401 (the theme names live in the formatting leaf; viz draws them)
from kernels import specs
from viz.fit import FIXED_MARGIN_KEY
from viz.plotly_private import share_frames


# The Okabe–Ito colours this house uses, and two of the same family: a medium purple and an indigo (each
# >= 3:1 against both backgrounds, where Okabe–Ito's own remaining sky blue, yellow and black are not).
BLUE, VERMILLION, REDDISH_PURPLE, BLUISH_GREEN = "#0072B2", "#D55E00", "#CC79A7", "#009E73"
ORANGE, SKY_BLUE, MEDIUM_PURPLE, INDIGO = "#E69F00", "#56B4E9", "#8C6BB1", "#4050E8"
GREY, LIGHT_GREY, DARK_GREY = "#7F7F7F", "#BBBBBB", "#555555"
BROWN = "#A6761D"  # ColorBrewer Dark2's: 4.0:1 on white, 4.7:1 on the dark background


# The palette by name: a kernel's spec names its colour here (kernels/specs.py, `color`), and nothing else draws it.
COLORS: dict[str, str] = {"blue": BLUE, "vermillion": VERMILLION, "reddish_purple": REDDISH_PURPLE,
                          "bluish_green": BLUISH_GREEN, "orange": ORANGE, "sky_blue": SKY_BLUE,
                          "medium_purple": MEDIUM_PURPLE, "indigo": INDIGO, "brown": BROWN, "grey": GREY,
                          "dark_grey": DARK_GREY}


@dataclass(frozen=True)
class Look:
    """How an algorithm looks in every scene: its colour, its legend name, a short name (a point's label on the
    roofline, a sentence of the story) and, for the kernels the tiling views animate, the name of its loop order.
    Read from its spec (kernels/specs.py) each time: a spec added later has its look at once."""
    color: str
    label: str
    short: str
    order_label: str | None = None


def look(algorithm: str) -> Look | None:
    """The look of a record's algorithm (a spec's key, or an older name of one); None for a name no spec has."""
    try:
        spec = specs.spec(algorithm)
    except ValueError:
        return None
    return Look(COLORS[spec.color], spec.label, spec.short, spec.trace.order_label if spec.trace else None)


def algorithm_order() -> tuple[str, ...]:
    """Every algorithm in legend order (the specs' order)."""
    return tuple(specs.SPECS)


# Colours of what is not an algorithm.
PALETTE: dict[str, str] = {
    "published": GREY,  # numbers from papers, not from this GPU; also any algorithm not in ALGORITHMS
    # tile states in the tiling animation
    "highlight": ORANGE,  # the tile in SRAM right now
    "done": SKY_BLUE,
    "pending": LIGHT_GREY,
    "skipped": DARK_GREY,  # removed by the causal mask, never computed
    # failures
    "oom": VERMILLION,
    "error": REDDISH_PURPLE,
    # memory levels, and bytes moving between them
    "registers": REDDISH_PURPLE,
    "sram": BLUISH_GREEN,
    "l2": ORANGE,
    "hbm": BLUE,
    "read": BLUE,  # read from HBM
    "write": VERMILLION,  # written to HBM
}

# Background / foreground per theme; the dark background matches Streamlit's dark theme.
_SURFACES: dict[str, dict[str, str]] = {
    # projector contrast: black on white, white on near-black; muted text still 7:1
    "light": {"background": "#FFFFFF", "foreground": "#000000", "grid": "#C8C8C8", "muted": "#4D4D4D"},
    "dark": {"background": "#0E1117", "foreground": "#FFFFFF", "grid": "#4A505C", "muted": "#B8B8B8"},
}

# Figures are built for a 1920×1080 screen ("design px") and scaled to the window by the page
# (scaled_figure). The smallest text anyone in the room has to read is 24 design px, 1/45 of the height:
# every figure's smallest text is SMALLEST_TEXT_PX, the one text size below the base font.
SMALLEST_TEXT_PX = 24
BASE_FONT_PX = SMALLEST_TEXT_PX + 2
FONT_FAMILY = "Source Sans Pro, Arial, sans-serif"


def surface(theme: str) -> dict[str, str]:
    """Background, foreground, grid and muted text colours (hex) of a theme ("light" or "dark")."""
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {THEMES}, got {theme!r}")
    return _SURFACES[theme]


def algorithm_color(algorithm: str) -> str:
    """Colour of a record's algorithm; unknown names get the foreground-neutral grey."""
    found = look(algorithm)
    return found.color if found else PALETTE["published"]


def short_labels() -> dict[str, str]:
    """Every algorithm's short name, for the story's sentences and the roofline's points (passed as data)."""
    return {key: look(key).short for key in algorithm_order()}


def algorithm_label(algorithm: str) -> str:
    """Legend name of a record's algorithm; unknown names are shown as they are."""
    found = look(algorithm)
    return found.label if found else algorithm


def order_label(order: str) -> str:
    """A traced kernel's loop order, as the screen names it: "FA2 order", "FA1 order"."""
    found = look(order)
    if found is None or found.order_label is None:
        raise ValueError(f"{order!r} is not a traced kernel")
    return found.order_label


def translucent(color: str, alpha: float) -> str:
    """A hex colour as rgba() with opacity `alpha`."""
    red, green, blue = plotly.colors.hex_to_rgb(color)
    return f"rgba({red}, {green}, {blue}, {alpha})"


@functools.lru_cache(maxsize=None)  # one per theme: plotly copies a template into each figure it styles
def template(theme: str = "light") -> go.layout.Template:
    """The plotly template of a theme: large fonts, high-contrast axes, Okabe–Ito colourway."""
    colors = surface(theme)
    axis = dict(
        gridcolor=colors["grid"],
        linecolor=colors["foreground"],
        zerolinecolor=colors["grid"],
        tickcolor=colors["foreground"],
        showline=True,
        ticks="outside",
        tickfont=dict(size=SMALLEST_TEXT_PX),
        title=dict(font=dict(size=BASE_FONT_PX)),
        automargin=True,
    )
    layout = go.Layout(
        font=dict(family=FONT_FAMILY, size=BASE_FONT_PX, color=colors["foreground"]),
        # a title's <sup> subtitle is 70% of it: 36 px keeps it at 25 px
        title=dict(font=dict(size=BASE_FONT_PX + 10), x=0.01, xanchor="left"),
        paper_bgcolor=colors["background"],
        plot_bgcolor=colors["background"],
        colorway=[algorithm_color(name) for name in ("fa2", "naive", "sdpa_flash", "sdpa_default", "torch_naive")],
        xaxis=axis,
        yaxis=axis,
        legend=dict(font=dict(size=SMALLEST_TEXT_PX), bgcolor="rgba(0,0,0,0)"),
        hoverlabel=dict(font=dict(size=SMALLEST_TEXT_PX, family=FONT_FAMILY)),
        margin=dict(l=80, r=40, t=90, b=70),
    )
    return go.layout.Template(
        layout=layout,
        data=dict(
            scatter=[go.Scatter(line=dict(width=4), marker=dict(size=12))],
            bar=[go.Bar(textfont=dict(size=SMALLEST_TEXT_PX))],
        ),
    )


def style(fig: go.Figure, theme: str = "light", title: str | None = None) -> go.Figure:
    """Apply a theme's template (and optionally a title) to a figure; returns the same figure."""
    fig.update_layout(template=template(theme))
    if title is not None:
        fig.update_layout(title_text=title)
    return fig


# Under these keys a layout or trace holds pixel sizes; scaled_figure multiplies them.
_FONT_KEYS = ("font", "textfont", "tickfont", "insidetextfont", "outsidetextfont", "grouptitlefont")
_PX_KEYS = {
    "layout": ("height", "width"),
    "margin": ("l", "r", "t", "b", "pad"),
    "pad": ("l", "r", "t", "b"),
    "marker": ("size",),
    # an arrow's tail (ax, ay) and its gap to the point are px too, where its tail is placed in px (axref "pixel")
    "annotations": ("xshift", "yshift", "ax", "ay", "standoff"),
    "header": ("height",),  # a table's rows
    "cells": ("height",),
    "uniformtext": ("minsize",),
    **{key: ("size",) for key in _FONT_KEYS},
}


def _scale_px(node, factor: float, parent: str) -> None:
    """Multiply the pixel sizes in nested plotly JSON in place (font and marker sizes, margins, paddings,
    the figure's height and width, annotation shifts and arrows, a table's rows); `parent` is the key that holds
    `node`. A font smaller than SMALLEST_TEXT_PX is raised to it first: no text on the stage is too small to read."""
    if isinstance(node, list):
        for item in node:
            _scale_px(item, factor, parent)
        return
    if not isinstance(node, dict):
        return
    floor = SMALLEST_TEXT_PX if parent in _FONT_KEYS else 0
    for key in _PX_KEYS.get(parent, ()):
        if key in ("ax", "ay") and node.get(f"{key}ref", "pixel") != "pixel":
            continue  # a tail placed on an axis moves with it
        value = node.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            node[key] = (max(value, floor) if floor else value) * factor  # a shift may be negative
        elif isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
            node[key] = [(max(v, floor) if floor else v) * factor for v in value]
    for key, value in node.items():
        if isinstance(value, (dict, list)):
            _scale_px(value, factor, key)


def scaled_figure(fig: go.Figure, factor: float) -> go.Figure:
    """The figure with every pixel size (fonts, markers, margins, height) times `factor`: a figure built
    for a 1920×1080 screen, shown on a smaller or larger one; fonts below SMALLEST_TEXT_PX are raised to
    it. A new figure that shares `fig`'s frames (frames carry data, never sizes); `fig` is not changed."""
    layout = fig.layout.to_plotly_json()
    layout.setdefault("height", 450)  # plotly's default height, so that it scales too
    given = dict(layout.get("margin", {}))
    _scale_px(layout, factor, "layout")
    # the px of a margin that plotly does not scale with the fonts stay as they are (viz.fit)
    meta = layout.get("meta")
    fixed = meta.get(FIXED_MARGIN_KEY, {}) if isinstance(meta, dict) else {}
    for side, px in fixed.items():
        if isinstance(given.get(side), (int, float)):
            layout["margin"][side] = px + (given[side] - px) * factor
    data = [trace.to_plotly_json() for trace in fig.data]
    _scale_px(data, factor, "data")
    scaled = go.Figure(data=data, layout=layout, skip_invalid=False)
    if fig.frames:
        share_frames(fig, scaled)  # the same frames, not a copy: an animation has ~1000
    return scaled
