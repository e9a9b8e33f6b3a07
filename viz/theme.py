"""One palette and one plotly template for every figure: projector-friendly and colour-blind safe.

Colours come from the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), which stays
distinguishable under the common colour-vision deficiencies. The series colours were picked so that
each keeps at least 3:1 contrast against both the light (white) and the dark (Streamlit's #0E1117)
background; orange and sky blue are used only for large filled areas (tiles, bands), never for text.
"""

from __future__ import annotations

import plotly.graph_objects as go

from fmt import THEMES  # noqa: F401 (the theme names live in the formatting leaf; viz draws them)


PALETTE: dict[str, str] = {
    # series: one colour per algorithm, the same in every scene
    "flash": "#0072B2",  # blue
    "naive": "#D55E00",  # vermillion: standard attention
    "sdpa_default": "#CC79A7",  # reddish purple
    "sdpa_flash": "#009E73",  # bluish green
    "torch_naive": "#E69F00",  # orange
    "flash_v1": "#8C6BB1",  # medium purple: flash in FlashAttention-1's loop order (>= 3:1 on both backgrounds)
    "published": "#7F7F7F",  # neutral grey: numbers from papers, not from this GPU
    # tile states in the tiling animation
    "highlight": "#E69F00",  # the tile in SRAM right now
    "done": "#56B4E9",  # sky blue
    "pending": "#BBBBBB",
    "skipped": "#555555",  # removed by the causal mask, never computed
    # failures
    "oom": "#D55E00",
    "error": "#CC79A7",
    # memory levels
    "sram": "#009E73",
    "l2": "#E69F00",
    "hbm": "#0072B2",
}

# Which palette entry and legend name each record "algorithm" (docs/data-contracts.md) gets.
ALGORITHM_COLORS: dict[str, str] = {
    "flash": PALETTE["flash"],
    "naive": PALETTE["naive"],
    "sdpa_default": PALETTE["sdpa_default"],
    "sdpa_flash": PALETTE["sdpa_flash"],
    "torch_naive": PALETTE["torch_naive"],
    "flash_v1": PALETTE["flash_v1"],
}
ALGORITHM_LABELS: dict[str, str] = {
    "flash": "flash (ours, Triton)",
    "naive": "standard (ours, 3 Triton kernels)",
    "sdpa_default": "PyTorch SDPA (default)",
    "sdpa_flash": "PyTorch SDPA (flash backend)",
    "torch_naive": "PyTorch eager (matmul, softmax, matmul)",
    "flash_v1": "flash, FA1 loop order (ours, Triton)",
}

# Background / foreground per theme; the dark background matches Streamlit's dark theme.
_SURFACES: dict[str, dict[str, str]] = {
    # projector contrast: black on white, white on near-black; muted text still 7:1
    "light": {"background": "#FFFFFF", "foreground": "#000000", "grid": "#C8C8C8", "muted": "#4D4D4D"},
    "dark": {"background": "#0E1117", "foreground": "#FFFFFF", "grid": "#4A505C", "muted": "#B8B8B8"},
}

# Figures are built for a 1920×1080 screen ("design px") and scaled to the window by the page
# (scaled_figure). The smallest text anyone in the room has to read is 24 design px, 1/45 of the height;
# every figure font is BASE_FONT_PX - 2 or more.
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
    return ALGORITHM_COLORS.get(algorithm, PALETTE["published"])


def algorithm_label(algorithm: str) -> str:
    """Legend name of a record's algorithm; unknown names are shown as they are."""
    return ALGORITHM_LABELS.get(algorithm, algorithm)


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
        tickfont=dict(size=BASE_FONT_PX - 2),
        title=dict(font=dict(size=BASE_FONT_PX)),
        automargin=True,
    )
    layout = go.Layout(
        font=dict(family=FONT_FAMILY, size=BASE_FONT_PX, color=colors["foreground"]),
        # a title's <sup> subtitle is 70% of it: 36 px keeps it at 25 px
        title=dict(font=dict(size=BASE_FONT_PX + 10), x=0.01, xanchor="left"),
        paper_bgcolor=colors["background"],
        plot_bgcolor=colors["background"],
        colorway=[PALETTE[name] for name in ("flash", "naive", "sdpa_flash", "sdpa_default", "torch_naive")],
        xaxis=axis,
        yaxis=axis,
        legend=dict(font=dict(size=BASE_FONT_PX - 2), bgcolor="rgba(0,0,0,0)"),
        hoverlabel=dict(font=dict(size=BASE_FONT_PX - 2, family=FONT_FAMILY)),
        margin=dict(l=80, r=40, t=90, b=70),
    )
    return go.layout.Template(
        layout=layout,
        data=dict(
            scatter=[go.Scatter(line=dict(width=4), marker=dict(size=12))],
            bar=[go.Bar(textfont=dict(size=BASE_FONT_PX - 2))],
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
    "annotations": ("xshift", "yshift"),
    **{key: ("size",) for key in _FONT_KEYS},
}


def _scale_px(node, factor: float, parent: str) -> None:
    """Multiply the pixel sizes in nested plotly JSON in place (font and marker sizes, margins, paddings,
    the figure's height and width, annotation shifts); `parent` is the key that holds `node`. A font
    smaller than SMALLEST_TEXT_PX is raised to it first: no text on the stage is too small to read."""
    if isinstance(node, list):
        for item in node:
            _scale_px(item, factor, parent)
        return
    if not isinstance(node, dict):
        return
    floor = SMALLEST_TEXT_PX if parent in _FONT_KEYS else 0
    for key in _PX_KEYS.get(parent, ()):
        value = node.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            node[key] = max(value, floor) * factor
        elif isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
            node[key] = [max(v, floor) * factor for v in value]
    for key, value in node.items():
        if isinstance(value, (dict, list)):
            _scale_px(value, factor, key)


def scaled_figure(fig: go.Figure, factor: float) -> go.Figure:
    """The figure with every pixel size (fonts, markers, margins, height) times `factor`: a figure built
    for a 1920×1080 screen, shown on a smaller or larger one; fonts below SMALLEST_TEXT_PX are raised to
    it. A new figure that shares `fig`'s frames (frames carry data, never sizes); `fig` is not changed."""
    layout = fig.layout.to_plotly_json()
    layout.setdefault("height", 450)  # plotly's default height, so that it scales too
    _scale_px(layout, factor, "layout")
    data = [trace.to_plotly_json() for trace in fig.data]
    _scale_px(data, factor, "data")
    scaled = go.Figure(data=data, layout=layout, skip_invalid=False)
    if fig.frames:
        scaled._frame_objs = fig._frame_objs  # the same frames, not a copy: an animation has ~1000
    return scaled
