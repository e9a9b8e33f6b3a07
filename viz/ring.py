"""Ring attention over several GPUs: the ring animated from a real run's trace, the layouts' balance per GPU, and the
time of one attention layer against the sequence length past one GPU, with the memory wall per GPU count.

Data in: the traced runs (story.ring.animation_runs: each rank's steps with their blocks and measured start, compute
and wait in ms), the bars (story.ring.balance_bars) and the series and walls (story.ring.length_series,
story.ring.memory_walls as dicts); nothing here computes a number of the story's.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fmt import fmt_ms, fmt_tokens, plotly_text
from viz import animation
from viz.marks import log_range, positive, token_axis
from viz.theme import (BLUE, BLUISH_GREEN, BROWN, MEDIUM_PURPLE, ORANGE, REDDISH_PURPLE, SKY_BLUE, SMALLEST_TEXT_PX,
                       VERMILLION, algorithm_color, style, surface, translucent)

RANK_COLORS = (BLUE, ORANGE, BLUISH_GREEN, REDDISH_PURPLE, VERMILLION, SKY_BLUE, MEDIUM_PURPLE, BROWN)
FRAME_MS = 1200  # a ring step is a big thing: slow enough to read at 1×
PAST, FUTURE = 0.5, 0.12  # opacity of the steps done and of the steps not reached yet (the current one: 1)
OUTLINE_PX = 4
BAR_WIDTH = 0.72  # of a GPU's lane on the timeline
GRID_SHARE = 0.3  # of the plot's width: the chunk grids; the timelines take the rest
TOP_PX, BOTTOM_PX = 132, 212
MIN_PLOT_PX = 120  # the title with its line under it; the time axis, then the play buttons and slider
LABEL_PX = 34  # a tick label's place along an axis (24 px text, two digits across): labels closer are thinned
LANE_LABEL_PX = 28  # a lane's label, one 24 px line high
WALL_MERGE = 1.1  # walls closer than this factor share one label


def rank_color(rank: int) -> str:
    return RANK_COLORS[rank % len(RANK_COLORS)]


def _ends(run: dict) -> float:
    return max(s["start_ms"] + s["compute_ms"] + s["wait_ms"] for s in run["steps"])


def _check_runs(runs: list[dict]) -> int:
    if not runs:
        raise ValueError("no traced run to animate")
    worlds = {r["world_size"] for r in runs}
    if len(worlds) != 1:
        raise ValueError(f"the runs animated side by side must share one GPU count, got {sorted(worlds)}")
    world = worlds.pop()
    for r in runs:
        if len(r["steps"]) != world * world:
            raise ValueError(f"the {r['layout']} run's trace has {len(r['steps'])} steps, not {world} × {world}")
    return world


def _chunks(run: dict) -> int:
    return run["world_size"] * (2 if run["layout"] == "zigzag" else 1)


def _block_px(run: dict, grid_px: float) -> tuple[float, float]:
    """A block's marker size on a grid `grid_px` across, and its outline while computed (thinner on a small block)."""
    size = 0.8 * grid_px / (_chunks(run) + 0.2)
    return size, min(OUTLINE_PX, max(1.5, size / 12))


def _grid_state(run: dict, now: int, colors: dict, outline_px: float) -> dict:
    """The grid's blocks at step `now`, one per block of each step in the trace's order: the step now bright and
    outlined, the steps done half-bright, the steps to come faint. (A frame's trace says its type: plotly.js plays a
    frame's trace without one as a scatter, and a bar would turn into lines.)"""
    steps = [s["step"] for s in run["steps"] for _ in s["blocks"]]
    return dict(type="scatter", marker=dict(
        opacity=[1.0 if step == now else PAST if step < now else FUTURE for step in steps],
        line=dict(width=[outline_px if step == now else 0.0 for step in steps], color=colors["foreground"])))


def _add_grid(fig: go.Figure, run: dict, col: int, grid_px: float, now: int, colors: dict) -> None:
    """The chunk × chunk grid of one run: a marker per block computed, the colour of the GPU that computed it (the
    GPU that keeps those queries: each row of the grid is one GPU's)."""
    chunks = _chunks(run)
    size, outline_px = _block_px(run, grid_px)
    blocks = [(s, b) for s in run["steps"] for b in s["blocks"]]
    fig.add_trace(go.Scatter(
        x=[b[1] for _, b in blocks], y=[b[0] for _, b in blocks], mode="markers", showlegend=False,
        marker=dict(symbol=["triangle-sw" if b[2] == "causal" else "square" for _, b in blocks],
                    size=size, color=[rank_color(s["rank"]) for s, _ in blocks],
                    **_grid_state(run, now, colors, outline_px)["marker"]),
        hovertext=[f"GPU {s['rank']}, step {s['step'] + 1}: queries of chunk {b[0]} × keys of chunk {b[1]} "
                   f"({'the diagonal: half its pairs' if b[2] == 'causal' else 'every pair'})" for s, b in blocks],
        hoverinfo="text", cliponaxis=False), row=1, col=col)
    ticks = list(range(0, chunks, _stride(grid_px / (chunks + 0.2), LABEL_PX)))  # (the axis spans chunks + 0.2)
    fig.update_xaxes(range=[-0.6, chunks - 0.4], tickvals=ticks, showgrid=False, zeroline=False, tickangle=0,
                     constrain="domain", title_text="key chunk", row=1, col=col)
    fig.update_yaxes(range=[chunks - 0.4, -0.6], tickvals=ticks, showgrid=False, zeroline=False, constrain="domain",
                     title_text="query chunk" if col == 1 else None, title_standoff=4,
                     scaleanchor="x" if col == 1 else f"x{col}", row=1, col=col)


TIMELINE_TRACES = 4  # per run: every step faint (drawn once), the steps done, the step now, the exposed waits so far


def _bar_states(run: dict, now: int) -> list[dict]:
    """The timeline's animated bars at step `now` (one place per rank and step, None where not drawn): the steps done,
    the step now, the waits so far. A frame moves bars (their lengths), never restyles them: a frame that does not
    redraw updates a bar's geometry, not its colours or opacity."""
    steps = run["steps"]
    return [dict(type="bar", x=[s["compute_ms"] if s["step"] < now else None for s in steps]),
            dict(type="bar", x=[s["compute_ms"] if s["step"] == now else None for s in steps]),
            dict(type="bar", x=[s["wait_ms"] if s["step"] <= now else None for s in steps])]


def _stride(pitch_px: float, label_px: float) -> int:
    """Every how many ticks a label goes, so that labels `pitch_px` apart each have `label_px`."""
    return max(1, math.ceil(label_px / max(pitch_px, 1e-9)))


def _add_timeline(fig: go.Figure, run: dict, row: int, col: int, last: bool, end: float, now: int,
                  colors: dict, lane_px: float) -> None:
    """Each GPU's steps of one run over time: every step's compute faint, the steps done half-bright, the step now
    bright, and hatched after each the wait for K/V its compute left exposed."""
    steps, world = run["steps"], run["world_size"]
    hover = [f"GPU {s['rank']}, step {s['step'] + 1}: K/V of GPU {s['src']}, {len(s['blocks'])} block"
             f"{'s' if len(s['blocks']) != 1 else ''}; computed {fmt_ms(s['compute_ms'])}, then waited "
             f"{fmt_ms(s['wait_ms'])}" for s in steps]
    ranks = [s["rank"] for s in steps]
    starts = [s["start_ms"] for s in steps]
    done, current, waits = _bar_states(run, now)
    common = dict(y=ranks, orientation="h", width=BAR_WIDTH, showlegend=False, hovertext=hover, hoverinfo="text")
    fig.add_trace(go.Bar(x=[s["compute_ms"] for s in steps], base=starts, **common,
                         marker=dict(color=[translucent(rank_color(r), FUTURE) for r in ranks])), row=row, col=col)
    fig.add_trace(go.Bar(**done, base=starts, **common,
                         marker=dict(color=[translucent(rank_color(r), PAST) for r in ranks])), row=row, col=col)
    # no outline on the step now: a frame that moves a bar leaves its outline where it was
    fig.add_trace(go.Bar(**current, base=starts, **common, marker=dict(color=[rank_color(r) for r in ranks])),
                  row=row, col=col)
    fig.add_trace(go.Bar(**waits, base=[s["start_ms"] + s["compute_ms"] for s in steps], **common,
                         marker=dict(color=colors["muted"], pattern=dict(shape="/"))), row=row, col=col)
    # the timelines share one time axis (the first's: x{col}), its numbers under the last
    fig.update_xaxes(range=[0, end], matches=f"x{col}" if row > 1 else None, showticklabels=last,
                     title_text="ms after the forward began" if last else None, row=row, col=col)
    stride = _stride(lane_px, LANE_LABEL_PX)
    if stride >= world:  # room for one label only: it names them all, between the lanes, not the first one alone
        ticks, labels = [(world - 1) / 2], [f"GPUs 0–{world - 1}"]
    else:
        ticks = list(range(0, world, stride))  # the lanes' colours say the rest
        labels = [f"GPU {r}" for r in ticks]
    fig.update_yaxes(range=[world - 0.5, -0.5], tickvals=ticks, ticktext=labels,
                     showgrid=False, zeroline=False, row=row, col=col)


def ring_steps_figure(runs: list[dict], theme: str = "light", height: int = 640, start_step: int = 0,
                      title: str = "", *, width_px: float) -> go.Figure:
    """Each traced run (a layout, same GPU count) twice. Left, side by side, the blocks of each run's chunk × chunk
    causal grid (query chunks down, key chunks across), coloured by the GPU that computed them (a diagonal block is
    the triangle it computes). Right, one above the other, each run's GPUs over one traced forward, a bar per step
    (its compute, then hatched the wait for the next K/V shard that compute did not hide), from the measured start,
    compute and wait. One frame per ring step: that step's blocks and bars bright and outlined, the steps done
    half-bright, the steps to come faint.
    runs: {"layout", "world_size", "seq_len", "time_ms", "steps": [{rank, step, src, start_ms, compute_ms, wait_ms,
    blocks}]}. width_px: the figure's width at the design size (the page's body width): the grids' squares are sized
    to it. Traces: the grids, then per run TIMELINE_TRACES bars."""
    colors = surface(theme)
    world = _check_runs(runs)
    animation.check_start_step(start_step, world)
    n = len(runs)
    grid_share = GRID_SHARE if n == 1 else 0.19  # of the width, each grid
    vertical = 0.27 if n > 1 else 0.0  # between the timelines: the second's title
    specs = [[{"rowspan": n}] * n + [{}]] + [[None] * n + [{}] for _ in range(n - 1)]
    titles = [f"{r['layout']}" for r in runs] + [
        f"{r['layout']}: each GPU over one traced forward, {fmt_ms(_ends(r))} (timed: {fmt_ms(r['time_ms'])})"
        for r in runs]
    fig = make_subplots(rows=n, cols=n + 1, specs=specs, column_widths=[grid_share] * n + [1 - grid_share * n],
                        horizontal_spacing=0.06, vertical_spacing=vertical,
                        subplot_titles=[plotly_text(t) for t in titles])
    # never shorter than MIN_PLOT_PX: plotly refuses controls more than two plot heights below it (a page with a
    # note above the scene may leave less; the figure then runs a little past the canvas rather than break)
    height = max(height, TOP_PX + MIN_PLOT_PX + BOTTOM_PX)
    plot_px = height - TOP_PX - BOTTOM_PX
    grid_px = min(plot_px, (width_px - 100) * (1 - 0.06 * n) * grid_share)
    end = max(_ends(r) for r in runs) * 1.02
    for i, run in enumerate(runs):
        _add_grid(fig, run, i + 1, grid_px, start_step, colors)
    lane_px = plot_px * (1 - vertical) / n / world
    for i, run in enumerate(runs):
        _add_timeline(fig, run, i + 1, n + 1, i == n - 1, end, start_step, colors, lane_px)

    def frame_data(now: int) -> list[dict]:
        return ([_grid_state(run, now, colors, _block_px(run, grid_px)[1]) for run in runs]
                + [b for run in runs for b in _bar_states(run, now)])

    animated = [*range(n), *(n + TIMELINE_TRACES * i + k for i in range(n) for k in (1, 2, 3))]
    fig.frames = [go.Frame(**f) for f in animation.frames(frame_data, world, animated)]
    style(fig, theme, title=title or (
        f"The ring on {world} GPUs, {fmt_tokens(runs[0]['seq_len'])} tokens: each step, each GPU computes its queries "
        f"against the K/V it holds<br><sup>colour: the GPU that keeps those queries ({gpu_key(world)}); faint: steps "
        f"to come; hatched: waiting for K/V the compute did not hide</sup>"))
    fig.update_annotations(font=dict(size=SMALLEST_TEXT_PX))
    controls_y = -(BOTTOM_PX - 92) / plot_px  # under the axes' titles (120 px), with a gap
    fig.update_layout(height=height, margin=dict(t=TOP_PX, b=BOTTOM_PX, l=20, r=20), bargap=0.3, barmode="overlay",
                      **animation.controls(FRAME_MS, world, start_step, colors, buttons_y=controls_y,
                                           slider_y=controls_y))
    return fig


def gpu_key(world: int) -> str:
    """The GPUs' colours in words, for a title: "■ GPU 0  ■ GPU 1", each square in its GPU's colour (rank_color, the
    one meaning of a colour in the ring's views); past four GPUs the squares in order and "GPUs 0–7"."""
    squares = [f"<span style='color:{rank_color(r)}'>■</span>" for r in range(world)]
    if world <= 4:
        return "  ".join(f"{square} GPU {r}" for r, square in enumerate(squares))
    return f"{''.join(squares)} GPUs 0–{world - 1}"


def ring_balance_figure(bars: list[dict], theme: str = "light", height: int = 560, title: str = "") -> go.Figure:
    """Each GPU's measured compute over one traced forward: the layouts side by side, under each its GPUs, a bar each
    in the GPU's colour (as in the ring, step by step: a colour is a GPU in every view of the ring); under each
    layout its balance measured (mean ÷ most) and by the cost model. The legend names the GPUs.
    bars: {"layout", "rank_compute_ms": [per GPU], "measured", "model"}."""
    colors = surface(theme)
    fig = go.Figure()
    groups = []
    for bar in bars:
        measured = f"{bar['measured']:.0%}" if bar.get("measured") is not None else "—"
        groups.append(plotly_text(f"{bar['layout']}: mean ÷ most {measured}, cost model {bar['model']:.0%}"))
    world = max((len(bar["rank_compute_ms"]) for bar in bars), default=0)
    top = max((ms for bar in bars for ms in bar["rank_compute_ms"]), default=0.0)
    for rank in range(world):  # one trace a GPU: its legend entry is its colour
        mine = [(group, bar["rank_compute_ms"][rank]) for group, bar in zip(groups, bars)
                if rank < len(bar["rank_compute_ms"])]
        fig.add_trace(go.Bar(
            x=[[group for group, _ in mine], [f"GPU {rank}"] * len(mine)], y=[ms for _, ms in mine],
            name=f"GPU {rank}", marker=dict(color=rank_color(rank)), text=[fmt_ms(ms) for _, ms in mine],
            textposition="outside", cliponaxis=False, textfont=dict(color=colors["foreground"]),
            customdata=[plotly_text(bar["layout"]) for bar in bars if rank < len(bar["rank_compute_ms"])],
            hovertemplate=f"GPU {rank}, %{{customdata}}: %{{y:,.1f}} ms computing<extra></extra>"))
    style(fig, theme, title=title or None)
    fig.update_xaxes(type="multicategory", tickangle=0)
    fig.update_yaxes(range=[0, top * 1.2 or 1], title_text="ms computing in one forward")
    # one bar a (layout, GPU) place: "relative" stands each in its own place, "group" would split it by GPU
    fig.update_layout(height=height, barmode="relative", bargap=0.3,
                      legend=dict(orientation="h", x=0, y=1.02, xanchor="left", yanchor="bottom",
                                  title=dict(text="colour: the GPU")),
                      margin=dict(t=(130 if title else 80)))
    return fig


def ms_ticks(log_range_: list[float]) -> list[float]:
    """Ticks at 1, 2 and 5 times the powers of ten inside a log axis' range (plotly's own label every digit)."""
    lo, hi = log_range_
    ticks = [m * 10.0**e for e in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)]
    return [t for t in ticks if lo <= math.log10(t) <= hi]


SERIES_LOOK = {"one": (BLUISH_GREEN, "circle"), "ours": (BLUE, "diamond"), "torch_cp": (None, "square")}
WORLD_DASH = {1: "solid", 2: "solid", 4: "dash", 8: "dot"}


def ring_length_figure(series: list[dict], walls: list[dict], theme: str = "light", height: int = 560,
                       title: str = "") -> go.Figure:
    """One attention layer's forward time against the total sequence length, measured points only (log axes): our
    kernel on one GPU, and per GPU count ours on the ring and PyTorch's context_parallel; dashed, the longest sequence
    whose forward fits each GPU count's memory by the cost model (walls closer than WALL_MERGE share one line).
    series: {"kind": "one" | "ours" | "torch_cp", "world", "label", "points": [{"seq_len", "time_ms", "note"}]};
    walls: {"world", "seq_len"}."""
    colors = surface(theme)
    fig = go.Figure()
    xs, ys = [], []
    for s in series:
        color, symbol = SERIES_LOOK[s["kind"]]
        color = color or algorithm_color("sdpa_default")
        points = s["points"]
        xs += [p["seq_len"] for p in points]
        ys += [p["time_ms"] for p in points]
        fig.add_trace(go.Scatter(
            x=[p["seq_len"] for p in points], y=[p["time_ms"] for p in points], mode="lines+markers",
            name=plotly_text(s["label"]), marker=dict(symbol=symbol, size=16, color=color),
            line=dict(color=color, dash=WORLD_DASH.get(s["world"], "dashdot")),
            hovertext=[plotly_text(f"{s['label']}: {fmt_ms(p['time_ms'])} at {fmt_tokens(p['seq_len'])} tokens "
                                   f"({p['note']})") for p in points], hoverinfo="text"))
    groups: list[list[dict]] = []
    for wall in sorted(walls, key=lambda w: w["seq_len"]):
        if wall["seq_len"] <= 0:
            continue
        if groups and wall["seq_len"] <= groups[-1][0]["seq_len"] * WALL_MERGE:
            groups[-1].append(wall)
        else:
            groups.append([wall])
    wall_x = [g[-1]["seq_len"] for g in groups]
    y_range = log_range(ys or [1.0], pad=3.0)
    for i, group in enumerate(groups):
        worlds = [str(w["world"]) for w in group]
        count = worlds[0] if len(worlds) == 1 else ", ".join(worlds[:-1]) + " or " + worlds[-1]
        gpus = "GPU" if worlds == ["1"] else "GPUs"
        x = group[-1]["seq_len"]
        fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="y domain",
                      line=dict(color=colors["muted"], width=3, dash="dash"))
        # annotations on a log axis take log10 values (viz.marks); stagger the labels down the plot
        fig.add_annotation(x=math.log10(x), y=1 - 0.09 * i, yref="y domain", xanchor="right", yanchor="top",
                           text=plotly_text(f"{count} {gpus}: {fmt_tokens(x)}"), showarrow=False,
                           font=dict(size=SMALLEST_TEXT_PX, color=colors["muted"]), xshift=-6)
    style(fig, theme, title=title or None)
    fig.update_xaxes(**token_axis([*xs, *wall_x] or [1024], pad=1.5), title_text="tokens in the sequence, all GPUs"
                     + ("; dashed: the longest that fits each GPU count's memory (cost model)" if groups else ""))
    ticks = ms_ticks(y_range)
    fig.update_yaxes(type="log", range=y_range, tickvals=ticks, ticktext=[f"{v:,g}" for v in ticks],
                     title_text="ms, one attention layer's forward")
    fig.update_layout(height=height, legend=dict(orientation="h", x=0, y=1.02, xanchor="left", yanchor="bottom",
                                                 bgcolor=translucent(colors["background"], 0.8)),
                      margin=dict(t=(150 if title else 80)))
    if not positive(ys):
        fig.add_annotation(text="no measured points", x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False)
    return fig
