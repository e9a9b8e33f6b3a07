"""The roofline: achieved TFLOPS against arithmetic intensity (FLOPs per HBM byte), log–log, under the
device's two roofs, the memory-bandwidth slope and the compute ceiling, both measured on that GPU.

A kernel left of the ridge point can go no faster than bandwidth × intensity: it is memory-bound; right of
it, the matmul rate caps it. Points come in as plain dicts (story.roofline_points builds them).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from costmodel import attainable_tflops, ridge_point
from viz.fit import LEGEND_ENTRY_PX, text_px
from viz.theme import PALETTE, SMALLEST_TEXT_PX, algorithm_color, style, surface


# the standard kernels share a colour; their shapes tell them apart
SYMBOLS = {"standard: S = QKᵀ": "square", "standard: softmax": "triangle-up", "standard: O = PV": "diamond"}
SUBJECT = "fa2"  # the kernel the talk is about: the largest marker, named on the chart
SUBJECT_PX, POINT_PX = 30, 20
# Kernels that run about as fast on the same bytes sit on one spot (at 8K FA-4, FA-3 style and SDPA's default within a
# few pixels of ours). Where markers would overlap, each keeps its true place and its marker differs in size from its
# neighbours' (drawn largest first, so each shows as a ring around the next), and a label with a leader line names it.
NESTED_PX = (24, 18, 12)
LABEL_ROW_PX = 34  # one label's line (24 px text) and the gap to the next
LEAD_PX = 56       # from a cluster's markers to its labels
# The plot's place in the figure as chromium draws the scene's roofline at 1920×1080 (plotly.js `_fullLayout._size`:
# left 102, top 90, bottom 78; right, the legend's entries and 26 px): where a point lands, to find which overlap.
PLOT_LEFT_PX, PLOT_TOP_PX, PLOT_BOTTOM_PX, LEGEND_PAD_PX = 102, 90, 78, 26


def _roof(x: np.ndarray, peak_tflops: float, bandwidth_gbps: float) -> np.ndarray:
    return np.array([attainable_tflops(float(v), peak_tflops, bandwidth_gbps) for v in x])


def _log_ticks(lo: float, hi: float) -> dict:
    """Ticks of a log axis from lo to hi: the powers of ten, and 2× and 5× them where the range spans too few
    powers to read a value off (past the wall only the fast kernels are left, all within one decade)."""
    if hi / lo >= 100:
        return {"dtick": 1}
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    values = [m * 10.0 ** k for k in decades for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    return {"tickmode": "array", "tickvals": values, "ticktext": [f"{v:g}" for v in values]}


def _plot_px(names: list[str], width: float, height: int) -> tuple[float, float]:
    """The plot area's width and height (px) in a figure this size, its legend of these names right of it."""
    legend = max((text_px(line, SMALLEST_TEXT_PX) for name in names for line in name.split("<br>")), default=0.0)
    return width - PLOT_LEFT_PX - legend - LEGEND_ENTRY_PX - LEGEND_PAD_PX, height - PLOT_TOP_PX - PLOT_BOTTOM_PX


def _to_px(value: float, axis: list[float], length: float, down: bool = False) -> float:
    """Where a value lands along a log axis with this range (log10), in px from the plot's left (top, `down`)."""
    share = (math.log10(value) - axis[0]) / (axis[1] - axis[0])
    return length * (1 - share if down else share)


def _clusters(places: list[tuple[float, float]], sizes: list[float]) -> list[list[int]]:
    """The points whose markers overlap, gathered (an overlap of an overlap joins them), in index order."""
    group = list(range(len(places)))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i
    for i, (x, y) in enumerate(places):
        for j in range(i):
            if math.dist((x, y), places[j]) < (sizes[i] + sizes[j]) / 2 + 4:
                group[root(i)] = root(j)
    gathered: dict[int, list[int]] = {}
    for i in range(len(places)):
        gathered.setdefault(root(i), []).append(i)
    return list(gathered.values())


def _label_places(group: list[int], places: list, labels: list[str], taken: list[tuple], plot: tuple,
                  under: float) -> list:
    """Each point's label in a column beside its group, a row apart, top to bottom as the points are (no two leader
    lines cross), as near the points' height as the plot, the compute roof (`under`: its height in px, which a column
    stays below where it can) and the labels already placed allow (`taken`: boxes in plot px; a fifth item marks a
    text, which a column must not cover); on the side whose column runs less out of the plot and covers fewer markers.
    Returns, in the group's order, (label x, label y, xanchor) in plot px; the column's box joins `taken`."""
    order = sorted(group, key=lambda i: places[i][1])
    wide = max(text_px(labels[i], SMALLEST_TEXT_PX) for i in group)
    tall = LABEL_ROW_PX * len(order)
    middle = sum(places[i][1] for i in group) / len(group)
    highest = under if under + tall <= plot[1] else 0.0
    top = min(max(middle - tall / 2, highest), plot[1] - tall)  # the column's top edge, inside the plot where it fits
    tops = [top + LABEL_ROW_PX * k for step in range(int(plot[1] // LABEL_ROW_PX) + 1)
            for k in ((step, -step) if step else (0,))]  # nearest first: a row down, then a row up
    best = None
    for side in ("left", "right"):
        x = (min(places[i][0] for i in group) - LEAD_PX if side == "left"
             else max(places[i][0] for i in group) + LEAD_PX)
        x0, x1 = (x - wide, x) if side == "left" else (x, x + wide)
        boxes = [(x0, t, x1, t + tall) for t in tops if highest <= t <= plot[1] - tall] or [(x0, top, x1, top + tall)]
        box = next((b for b in boxes if not any(_meets(b, t) for t in taken if len(t) > 4)), boxes[0])
        outside = max(0.0, -x0) + max(0.0, x1 - plot[0])
        score = (outside, sum(_meets(box, t) for t in taken))
        if best is None or score < best[0]:
            best = (score, box, x, "right" if side == "left" else "left")
    _, box, x, anchor = best
    taken.append((*box, "text"))
    return [(x, box[1] + LABEL_ROW_PX * (order.index(i) + 0.5), anchor) for i in group]


def _meets(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _label_groups(clusters: list[list[int]], places: list, shown: list[dict]) -> list[list[int]]:
    """The points that get a label (every point of a cluster, and the talk's subject wherever it stands), in groups
    that share one column: clusters whose markers stand within two leads of each other across."""
    named = [c for c in clusters if len(c) > 1 or shown[c[0]]["algorithm"] == SUBJECT]
    groups: list[list[int]] = []
    for cluster in sorted(named, key=lambda c: min(places[i][0] for i in c)):
        if groups and min(places[i][0] for i in cluster) - max(places[i][0] for i in groups[-1]) < 2 * LEAD_PX:
            groups[-1] = groups[-1] + cluster
        else:
            groups.append(list(cluster))
    return groups


def _name_clusters(fig: go.Figure, shown: list[dict], sizes: list[float], places: list, clusters: list[list[int]],
                   plot: tuple, ridge_label: tuple, under: float, colors: dict) -> None:
    """A label with a leader line at each point of a cluster (and at the talk's subject wherever it stands), clear of
    the other labels and of the ridge's (`ridge_label`: its box in plot px), below the compute roof where it fits (`under`:
    the roof's height in plot px). The leader line stops at the marker's edge."""
    taken = [(x - r, y - r, x + r, y + r) for (x, y), r in zip(places, (size / 2 for size in sizes))]
    taken.append(ridge_label)
    labels = [p["label"] for p in shown]
    for group in _label_groups(clusters, places, shown):
        for i, (x, y, anchor) in zip(group, _label_places(group, places, labels, taken, plot, under)):
            point = shown[i]
            fig.add_annotation(x=math.log10(point["intensity"]), y=math.log10(point["tflops"]), text=point["label"],
                               showarrow=True, arrowhead=0, arrowwidth=2, arrowcolor=algorithm_color(point["algorithm"]),
                               standoff=sizes[i] / 2, ax=x - places[i][0], ay=y - places[i][1], xanchor=anchor,
                               yanchor="middle", font=dict(color=colors["foreground"]), bgcolor=colors["background"])


def roofline_figure(points: list[dict], peak_tflops: float, bandwidth_gbps: float, l2_gbps: float | None = None,
                    theme: str = "light", height: int = 620, title: str = "Roofline",
                    width: float = 1800) -> go.Figure:
    """points: dicts with "label", "algorithm" (its colour), "intensity" (FLOPs/byte), "tflops" (achieved),
    "counted" (bytes from hardware counters, else the cost model: hollow marker). peak_tflops: the measured
    matmul rate; bandwidth_gbps: the measured HBM copy rate; l2_gbps: the measured L2 read rate (a dotted roof).
    width: the figure's width at the design size (where points land, to find the markers that overlap)."""
    shown = [p for p in points if p.get("intensity") and p.get("tflops")]
    ridge = ridge_point(peak_tflops, bandwidth_gbps)
    xs = [p["intensity"] for p in shown] + [ridge]
    lo = 10 ** math.floor(math.log10(min(xs) / 3))
    hi = 10 ** math.ceil(math.log10(max(xs) * 3))
    y_lo, y_hi = min([p["tflops"] for p in shown] + [peak_tflops]) / 3, peak_tflops * 2.2
    x_range, y_range = [math.log10(lo), math.log10(hi)], [math.log10(y_lo), math.log10(y_hi)]
    x = np.geomspace(lo, hi, 200)
    fig = go.Figure()
    colors = surface(theme)
    roofs = f"roofs: HBM {bandwidth_gbps / 1000:,.2f} TB/s,<br>matmul {peak_tflops:,.0f} TFLOPS"
    fig.add_trace(go.Scatter(x=x, y=_roof(x, peak_tflops, bandwidth_gbps), mode="lines", name=roofs,
                             line=dict(color=colors["foreground"], width=4), hoverinfo="skip"))
    if l2_gbps:
        fig.add_trace(go.Scatter(x=x, y=_roof(x, peak_tflops, l2_gbps), mode="lines",
                                 name=f"L2 roof: {l2_gbps / 1000:,.1f} TB/s", hoverinfo="skip",
                                 line=dict(color=PALETTE["l2"], width=3, dash="dot")))
    plot = _plot_px([roofs, *(p["label"] for p in shown)], width, height)
    places = [(_to_px(p["intensity"], x_range, plot[0]), _to_px(p["tflops"], y_range, plot[1], down=True))
              for p in shown]
    sizes = [SUBJECT_PX if p["algorithm"] == SUBJECT else POINT_PX for p in shown]
    clusters = _clusters(places, sizes)
    for cluster in clusters:  # neighbours on one spot: sizes that differ, top to bottom, the subject kept largest
        peers = sorted((i for i in cluster if shown[i]["algorithm"] != SUBJECT), key=lambda i: places[i][1])
        for k, i in enumerate(peers if len(cluster) > 1 else ()):
            sizes[i] = NESTED_PX[k % len(NESTED_PX)]
    # drawn largest first: a smaller marker on one spot stays on top; the legend keeps the points' order, ours last
    legend = sorted(range(len(shown)), key=lambda i: shown[i]["algorithm"] == SUBJECT)
    for i in sorted(range(len(shown)), key=lambda i: -sizes[i]):
        point, color = shown[i], algorithm_color(shown[i]["algorithm"])
        fig.add_trace(go.Scatter(
            x=[point["intensity"]], y=[point["tflops"]], mode="markers", name=point["label"],
            legendrank=1000 + legend.index(i),
            marker=dict(size=sizes[i], color=color if point.get("counted") else colors["background"],
                        line=dict(width=4, color=color), symbol=SYMBOLS.get(point["label"], "circle")),
            hovertemplate=(f"{point['label']}<br>%{{x:,.1f}} FLOPs/byte, %{{y:,.1f}} TFLOPS<br>"
                           f"{'counted bytes' if point.get('counted') else 'modelled bytes'}<extra></extra>"),
            showlegend=True))
    ridge_text = f"ridge {ridge:,.0f} FLOPs/byte"
    ridge_x = _to_px(ridge, x_range, plot[0])  # its label stands at the plot's foot, right of the line
    _name_clusters(fig, shown, sizes, places, clusters, plot, (
        ridge_x, plot[1] - LABEL_ROW_PX, ridge_x + text_px(ridge_text, SMALLEST_TEXT_PX + 2) + 8, plot[1], "text"),
        _to_px(peak_tflops, y_range, plot[1], down=True) + 4, colors)
    fig.add_vline(x=ridge, line=dict(color=colors["muted"], width=2, dash="dash"),
                  label=dict(text=ridge_text, textposition="start", textangle=0, xanchor="left", yanchor="bottom"))
    style(fig, theme, title=title)
    fig.update_xaxes(type="log", range=x_range, dtick=1, title_text="arithmetic intensity (FLOPs per HBM byte)")
    fig.update_yaxes(type="log", range=y_range, title_text="achieved TFLOPS", **_log_ticks(y_lo, y_hi))
    # beside the plot: inside, its nine entries reach up to the compute roof, where flash and SDPA sit; it may
    # run a line past the plot's bottom rather than scroll (a side legend's default limit is the plot's height)
    fig.update_layout(height=height, legend=dict(x=1.01, y=1, xanchor="left", yanchor="top", maxheight=height))
    return fig
