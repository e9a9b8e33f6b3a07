"""The one plotly internal the figures lean on, in one place: a figure's frames, shared with another figure.

plotly.py has no public way to give a new Figure the frames of another without copying them (`go.Figure(frames=...)`
validates and copies each of an animation's ~1000 frames: most of a cached animation's cost). Both the figure
scaled to a window (viz.theme.scaled_figure) and the one set to a step (viz.animation.at_step) share their source's
frames through `share_frames`. `check()` says whether this plotly still keeps them where this expects
(tests/test_private_apis.py fails loudly when an upgrade moves them).
"""
from __future__ import annotations

import plotly.graph_objects as go

_FRAMES = "_frame_objs"  # plotly.py's list of Frame objects on a BaseFigure


def share_frames(source: go.Figure, target: go.Figure) -> go.Figure:
    """`target` with `source`'s frames, the same objects, not copies (frames carry data, never sizes); returns it."""
    setattr(target, _FRAMES, getattr(source, _FRAMES))
    return target


def check() -> list[str]:
    """What of the above this plotly lacks (empty: all there)."""
    fig = go.Figure(frames=[go.Frame(name="0")])
    frames = getattr(fig, _FRAMES, None)
    if not isinstance(frames, (list, tuple)) or len(frames) != 1 or fig.frames[0] is not frames[0]:
        return [f"plotly.graph_objects.Figure.{_FRAMES} is not the figure's frames any more"]
    return []
