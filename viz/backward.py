"""The backward scene's figures: the backward's tile walk (the dK/dV pass by columns, the dQ pass by rows) as an
animation on viz.animation's controls, and the measured TFLOPS bars. The memory chart is viz.memory's, given the
training formulas.

Data in: the walk as {"dkdv": [(Q block, K/V block), ...], "dq": [...]} (kernels/fa2_bwd.visit_order, by way of
the page) and bars as dicts (story.backward.Bar); nothing here computes a number of the story's.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fmt import plotly_text
from viz import animation
from viz.theme import BLUE, ORANGE, SMALLEST_TEXT_PX, algorithm_color, style, surface, translucent

PASSES = (("dkdv", "dK/dV pass: a program per K/V block (column)", BLUE),
          ("dq", "dQ pass: a program per Q block (row)", ORANGE))
FRAME_MS = 500
TILE_PX = 44  # a tile's square at the design size


def _states(walk: dict, name: str, step: int, offset: int) -> tuple[list[str], list[float]]:
    """Each visited tile's colour and outline in one pass at a global step: not yet (translucent), done, current
    (outlined); the tiles of the program now running (its column or row) half-bright."""
    tiles = walk[name]
    color = next(c for key, _, c in PASSES if key == name)
    local = step - offset
    current = tiles[local] if 0 <= local < len(tiles) else None
    colors, widths = [], []
    for t, tile in enumerate(tiles):
        if current is not None and tile == current:
            colors.append(color)
            widths.append(5.0)
        elif t < local or local >= len(tiles):
            colors.append(translucent(color, 0.75))
            widths.append(0.0)
        elif current is not None and (tile[1] == current[1] if name == "dkdv" else tile[0] == current[0]):
            colors.append(translucent(color, 0.35))
            widths.append(0.0)
        else:
            colors.append(translucent(color, 0.12))
            widths.append(0.0)
    return colors, widths


def backward_walk_figure(walk: dict, num_q_blocks: int, num_kv_blocks: int, theme: str = "light",
                         height: int = 640, start_step: int = 0, title: str = "") -> go.Figure:
    """Two grids of (Q block, K/V block) tiles, left the dK/dV pass and right the dQ pass, animated one recomputed
    tile a step (the dK/dV pass first, then the dQ pass): a tile bright once its S and P were recomputed, outlined
    while they are, the running program's column (dK, dV on chip) or row (dQ on chip) half-bright. Tiles a pass
    skips (above the diagonal under causal) are not drawn."""
    colors = surface(theme)
    num_steps = len(walk["dkdv"]) + len(walk["dq"])
    if num_steps == 0:
        raise ValueError("the walk has no tiles")
    animation.check_start_step(start_step, num_steps)
    offsets = {"dkdv": 0, "dq": len(walk["dkdv"])}
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08,
                        subplot_titles=[plotly_text(label) for _, label, _ in PASSES])
    size = max(8.0, min(TILE_PX, 0.5 * height / max(num_q_blocks, 1)))

    def traces(step: int) -> list[dict]:
        out = []
        for name, _, _ in PASSES:
            fill, width = _states(walk, name, step, offsets[name])
            out.append(dict(marker=dict(color=fill, line=dict(width=width, color=colors["foreground"]))))
        return out

    for col, (name, _, _) in enumerate(PASSES, start=1):
        fill, width = _states(walk, name, start_step, offsets[name])
        order = {tile: i + 1 for i, tile in enumerate(walk[name])}
        fig.add_trace(go.Scatter(
            x=[kv for _, kv in walk[name]], y=[q for q, _ in walk[name]], mode="markers", showlegend=False,
            marker=dict(symbol="square", size=size, color=fill, line=dict(width=width, color=colors["foreground"])),
            hovertext=[f"Q block {q}, K/V block {kv}: step {order[(q, kv)]} of this pass" for q, kv in walk[name]],
            hoverinfo="text"), row=1, col=col)
        # no axis title under the plots, where the play buttons are: the panel titles name the columns
        fig.update_xaxes(range=[-0.6, num_kv_blocks - 0.4], tickvals=list(range(num_kv_blocks)),
                         tickangle=0, showgrid=False,
                         constrain="domain", zeroline=False, row=1, col=col)
        fig.update_yaxes(range=[num_q_blocks - 0.4, -0.6], tickvals=list(range(num_q_blocks)), title_text="Q block",
                         showgrid=False, zeroline=False,
                         constrain="domain", scaleanchor=f"x{'' if col == 1 else col}", row=1, col=col)
    fig.frames = [go.Frame(**f) for f in animation.frames(traces, num_steps, [0, 1])]
    style(fig, theme, title=title or None)
    fig.update_annotations(font=dict(size=SMALLEST_TEXT_PX))
    # the play buttons and the step slider in the bottom margin, under the axis titles
    bottom = 150
    controls_y = -(bottom - 90) / max(height - bottom - 60, 1)
    fig.update_layout(height=height, margin=dict(b=bottom, t=110 if title else 60),
                      **animation.controls(FRAME_MS, num_steps, start_step, colors, buttons_y=controls_y,
                                           slider_y=controls_y))
    return fig


def backward_tflops_figure(bars: list[dict], theme: str = "light", height: int = 520, title: str = "") -> go.Figure:
    """Horizontal bars of TFLOPS, one per measured bar ({"label", "algorithm", "pass_", "tflops"}; a bar without
    tflops is left out: the story says why); the forward's bar hatched."""
    colors = surface(theme)
    shown = [b for b in bars if b.get("tflops")]
    labels = [plotly_text(b["label"]) for b in shown]
    fig = go.Figure(go.Bar(
        y=labels, x=[b["tflops"] for b in shown], orientation="h", text=[f"{b['tflops']:,.0f}" for b in shown],
        textposition="outside", cliponaxis=False, showlegend=False, hoverinfo="skip",
        textfont=dict(color=colors["foreground"]),
        marker=dict(color=[algorithm_color(b["algorithm"]) for b in shown],
                    pattern=dict(shape=["/" if b["pass_"] != "backward" else "" for b in shown]))))
    style(fig, theme, title=title or None)
    top = max([b["tflops"] for b in shown] + [1.0])
    fig.update_xaxes(range=[0, top * 1.25], title_text="TFLOPS")
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], automargin=True)
    fig.update_layout(height=height, bargap=0.3)
    return fig
