"""Decode against a KV cache: our split-KV kernel's trace as an animation (the cache as the sequence sees it, the same
pages where they sit in memory, each split's running log-sum-exp, then the merge), and each kernel's bandwidth at one
setting against the copy roof.

Data in: the decode trace (page.decode_trace: plain lists and numbers) and the scene's rows (story.decode.DecodeRow
as dicts); nothing here computes a number of the story's.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fmt import fmt_tokens, plotly_text
from viz.theme import (BLUE, BLUISH_GREEN, ORANGE, REDDISH_PURPLE, SMALLEST_TEXT_PX, algorithm_color, style,
                       surface)

SPLIT_COLORS = (BLUE, ORANGE, BLUISH_GREEN, REDDISH_PURPLE)  # one colour per split (program)
NOT_YET = 0.22  # opacity of a page no split has read yet


def _page_states(trace: dict, step: int) -> tuple[list[int], list[float], list[float]]:
    """For each logical page: its split, its opacity (read or not yet) and its outline width (read at this step)."""
    pages_per_block = trace["block_n"] // trace["page_size"]
    block_of = [page // pages_per_block for page in range(len(trace["block_table"]))]
    splits = [trace["split_of_block"][min(b, len(trace["split_of_block"]) - 1)] for b in block_of]
    first = {}
    for b, s in enumerate(trace["split_of_block"]):
        first.setdefault(s, b)
    opacity, outline = [], []
    for page, (b, s) in enumerate(zip(block_of, splits)):
        t = b - first[s]  # the step of its split at which this page's block is read
        opacity.append(1.0 if t <= step else NOT_YET)
        outline.append(4.0 if t == step else 0.0)
    return splits, opacity, outline


def decode_trace_figure(trace: dict, theme: str = "light", height: int = 640) -> go.Figure:
    """Two panels on one animation: above, the cache's pages in the sequence's order and where they sit in memory
    (coloured by the split that reads them, bright once read, outlined while read); below, each split's running
    log-sum-exp of one query row (m + ln l) after each of its key blocks. The last frame adds the merge
    (log Σ l_s·e^m_s), checked against the kernel's LSE and the float64 reference's."""
    colors = surface(theme)
    table = trace["block_table"]
    n_pages, splits = len(table), trace["splits"]
    steps = max(len(r) for r in trace["running"])
    fig = make_subplots(rows=2, cols=1, row_heights=[0.4, 0.6], vertical_spacing=0.14)
    where = {logical: physical for logical, physical in enumerate(table)}
    rows_y = {"seq": 1.0, "mem": 0.0}

    def page_traces(step: int) -> list[go.Scatter]:
        split_of, opacity, outline = _page_states(trace, step)
        marker = dict(symbol="square", size=15, color=[SPLIT_COLORS[s % len(SPLIT_COLORS)] for s in split_of],
                      opacity=opacity, line=dict(width=outline, color=colors["foreground"]))
        hover = [f"logical page {p} → physical page {where[p]}, split {split_of[p]}" for p in range(n_pages)]
        return [go.Scatter(x=np.arange(n_pages), y=np.full(n_pages, rows_y["seq"]), mode="markers", marker=marker,
                           hovertext=hover, hoverinfo="text", showlegend=False),
                go.Scatter(x=[where[p] for p in range(n_pages)], y=np.full(n_pages, rows_y["mem"]), mode="markers",
                           marker=marker, hovertext=hover, hoverinfo="text", showlegend=False)]

    def lse_traces(step: int, merged: bool) -> list[go.Scatter]:
        out = []
        for s, running in enumerate(trace["running"]):
            shown = running[: step + 1]
            out.append(go.Scatter(x=list(range(1, len(shown) + 1)), y=[m + np.log(l) for m, l in shown],
                                  mode="lines+markers", name=f"split {s}", marker=dict(size=12),
                                  line=dict(color=SPLIT_COLORS[s % len(SPLIT_COLORS)], width=4)))
        value = trace["merged_lse"]
        out.append(go.Scatter(x=[0.6, steps + 0.4] if merged else [None], y=[value, value] if merged else [None],
                              mode="lines", name="merge", line=dict(color=colors["foreground"], width=4,
                                                                      dash="dash")))
        return out

    first = page_traces(0)
    fig.add_trace(first[0], row=1, col=1)
    fig.add_trace(first[1], row=1, col=1)
    for trace_ in lse_traces(0, merged=False):
        fig.add_trace(trace_, row=2, col=1)
    frames = []
    for step in range(steps + 1):  # the last frame: every split done, and the merge
        merged = step == steps
        shown = min(step, steps - 1)
        frames.append(go.Frame(name="merge" if merged else f"{step + 1}",
                               data=[*page_traces(steps if merged else shown), *lse_traces(shown, merged)]))
    fig.frames = frames
    all_lse = [m + np.log(l) for running in trace["running"] for m, l in running] + [trace["merged_lse"]]
    lo, hi = min(all_lse), max(all_lse)
    pad = 0.15 * (hi - lo or 1.0)
    check = (f"dashed: the merge, {trace['merged_lse']:.4f} = the kernel's LSE {trace['kernel_lse']:.4f} "
             f"(float64 {trace['reference_lse']:.4f})")
    # the trace's own cache (page/decode_trace.py: a small one), said in the title: the scene's caption speaks of the
    # recorded run's split count at the slider's cache length, a different number
    style(fig, theme, title=f"Our kernel traced on a small cache: {fmt_tokens(trace['kv_len'])} tokens, {splits} splits"
                            f"<br><sup>{plotly_text(check)}</sup>")
    fig.update_yaxes(range=[-0.6, 1.6], tickvals=[rows_y["seq"], rows_y["mem"]],
                     ticktext=["pages in order", "in memory"], showgrid=False, row=1, col=1)
    fig.update_xaxes(range=[-1, n_pages], showgrid=False, row=1, col=1)
    fig.update_xaxes(range=[0.5, steps + 0.5], dtick=1, row=2, col=1)  # the slider under it names the key blocks
    fig.update_yaxes(range=[lo - pad, hi + pad], title_text="m + ln l", **_end_ticks(lo, hi), row=2, col=1)
    fig.update_layout(
        height=height, margin=dict(t=130, b=190, r=20),
        showlegend=False,  # the pages above show each split's colour; the merge is said in words
        updatemenus=[dict(type="buttons", direction="left", x=0, xanchor="left", y=-0.3, yanchor="top",
                          pad=dict(t=0, l=0),
                          # as the tiling animation's buttons: plotly's active highlight is near-white and would
                          # hide light text in the dark theme
                          showactive=False, bgcolor=colors["grid"], bordercolor=colors["foreground"],
                          font=dict(color=colors["foreground"]),
                          buttons=[dict(label="▶ play", method="animate",
                                        args=[None, dict(frame=dict(duration=700, redraw=True), fromcurrent=True,
                                                         transition=dict(duration=0))])])],
        sliders=[dict(active=0, x=0.22, len=0.7, y=-0.28, yanchor="top", pad=dict(t=0, b=0),
                      currentvalue=dict(visible=False),
                      steps=[dict(label=frame.name, method="animate",
                                  args=[[frame.name], dict(mode="immediate", frame=dict(duration=0, redraw=True))])
                             for frame in frames])])
    return fig


def _end_ticks(lo: float, hi: float) -> dict:
    """Two ticks, the lowest and highest value drawn: the LSE panel is a few text lines high at the projector's sizes,
    where plotly's own three or more ticks stood on each other."""
    decimals = 1 if hi - lo >= 0.2 else 3
    ends = sorted({round(lo, decimals), round(hi, decimals)})
    return dict(tickvals=ends, ticktext=[f"{v:.{decimals}f}" for v in ends])


LATENCY_MARK = "†"  # beside a bar whose time is mostly fixed costs (the launch, first round trips, the merge)
SUBTITLE_TOP_PX = 160  # the top margin with a subtitle (the theme's 90 holds one title line and the roof's label)


def decode_bandwidth_figure(rows: list[dict], copy_gbps: float | None, theme: str = "light", height: int = 520,
                            title: str = "", subtitle: str = "") -> go.Figure:
    """Each kernel's bandwidth on the cache's bytes at one setting, as horizontal bars against the copy roof measured
    in the same run; each bar says its time per token. rows: {"key", "label", "time_us", "gbps", "latency_bound"};
    subtitle (plain text): a line under the title (where and when the bars were recorded)."""
    colors = surface(theme)
    shown = [r for r in rows if r.get("gbps")]
    fig = go.Figure()
    labels = [plotly_text(r["label"]) for r in shown]
    # a latency-bound bar is marked with a dagger, keyed in the axis title: the words beside each bar ran out of the
    # chart at the short caches, where every bar is one (at 1080p the column right of the roof holds ~25 characters)
    texts = [f"{r['time_us']:,.0f} µs · {r['gbps'] / 1000:,.2f} TB/s"
             + (f" ({r['gbps'] / copy_gbps:.0%})" if copy_gbps else "")
             + (f" {LATENCY_MARK}" if r.get("latency_bound") else "") for r in shown]
    fig.add_trace(go.Bar(y=labels, x=[r["gbps"] for r in shown], orientation="h", showlegend=False,
                         marker=dict(color=[algorithm_color("decode" if r["key"] == "paged" else r["key"])
                                            for r in shown],
                                     pattern=dict(shape=["/" if r["key"] == "paged" else "" for r in shown])),
                         hoverinfo="skip"))
    top = max([r["gbps"] for r in shown] + [copy_gbps or 0, 1.0])
    for label, text in zip(labels, texts):  # in a column right of the longest bar and the roof, over the gridlines
        fig.add_annotation(x=top * 1.03, y=label, text=text, showarrow=False, xanchor="left",
                           font=dict(color=colors["foreground"]), bgcolor=colors["background"])
    if copy_gbps:
        fig.add_vline(x=copy_gbps, line=dict(color=colors["foreground"], width=3, dash="dash"),
                      label=dict(text=f"copy roof {copy_gbps / 1000:,.2f} TB/s", textposition="end", textangle=0,
                                 xanchor="left", yanchor="bottom", font=dict(size=SMALLEST_TEXT_PX)))
    style(fig, theme, title=(title + (f"<br><sup>{plotly_text(subtitle)}</sup>" if subtitle else "")) or None)
    if subtitle:  # the title's second line: the roof's label stays below it
        fig.update_layout(margin=dict(t=SUBTITLE_TOP_PX))
    axis = (f"GB/s on K and V bytes · {LATENCY_MARK} latency-bound" if any(r.get("latency_bound") for r in shown)
            else "GB/s on the cache's K and V bytes")  # the key's line is shorter: centred, it ran out at 720p
    fig.update_xaxes(range=[0, top * 2.25], title_text=axis)
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], automargin=True, tickmode="array",
                     tickvals=labels, ticktext=labels)
    fig.update_layout(height=height, bargap=0.3)
    return fig
