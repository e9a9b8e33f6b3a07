"""Time and throughput versus sequence length, one line per algorithm, from measurement records.

Records should share one setting (batch, heads, head_dim, dtype, causal); the app filters them.
Failed points (out of memory, error) break the line and show as an ✕ on a "failed" row above it, their
`failure` text (story.with_failures) on hover.
Interpreter timings are CPU wall times: labelled as such, and never turned into TFLOPS.
"""

from __future__ import annotations

import math

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go

from fmt import fmt_tokens, plotly_text
from viz.marks import log_range, note, token_axis, vertical_marker
from viz.theme import algorithm_color, algorithm_label, algorithm_order, style


FAILED_STRIP = 0.1  # of the plot's height: the throughput chart's failures get a strip of their own above it


def _by_algorithm(records: list[dict]) -> dict[str, list[dict]]:
    """Records grouped per algorithm (in the specs' legend order), each sorted by seq_len."""
    groups: dict[str, list[dict]] = {}
    for record in sorted(records, key=lambda r: r["seq_len"]):
        groups.setdefault(record["algorithm"], []).append(record)
    rank = {name: i for i, name in enumerate(algorithm_order())}
    return dict(sorted(groups.items(), key=lambda item: rank.get(item[0], len(rank))))


def _failure(record: dict) -> str:
    """A failed record's `failure` text, as the story words it (story.with_failures), escaped for plotly."""
    if "failure" not in record:
        raise ValueError(f"the failed {record['algorithm']} record at N = {record['seq_len']} carries no 'failure' "
                         "text: pass the records through story.with_failures")
    return plotly_text(record["failure"])


def _mark(record: dict) -> str:
    """The word or two beside a failed record's ✕ (its `failure_mark`, story.with_failures): refused, out of memory."""
    if "failure_mark" not in record:
        raise ValueError(f"the failed {record['algorithm']} record at N = {record['seq_len']} carries no "
                         "'failure_mark': pass the records through story.with_failures")
    return plotly_text(record["failure_mark"])


def _is_interpreter(record: dict) -> bool:
    return record.get("timing_kind") == "interpreter"


def _algorithm_lines(
    fig: go.Figure,
    groups: dict[str, list[dict]],
    value: Callable[[dict], float | None],
    unit: str,
    failed_row_factor: float,
    with_spread: bool = False,
    failed_axis: str | None = None,
) -> list[float]:
    """One line per algorithm, broken where a point failed, plus ✕ markers for the failures on a row
    failed_row_factor × the highest value, or on a strip of their own (failed_axis: the y axis of the strip,
    e.g. "y2", where they sit at 0 and cannot be read as a value). Returns the y values plotted on the main
    axis, for its range."""
    shown = [v for rows in groups.values() for r in rows if r["status"] == "ok" and (v := value(r)) is not None]
    failed_row = 0.0 if failed_axis else max(shown, default=1.0) * failed_row_factor
    rightmost = max((r["seq_len"] for rows in groups.values() for r in rows), default=None)
    any_failed = False
    for algorithm, rows in groups.items():
        color, label = algorithm_color(algorithm), algorithm_label(algorithm)
        fig.add_trace(
            go.Scatter(
                x=np.array([r["seq_len"] for r in rows]),
                # NaN for failed points: a gap in the line
                y=np.array([value(r) if r["status"] == "ok" else None for r in rows], dtype=np.float64),
                mode="lines+markers",
                connectgaps=False,
                name=label,
                line=dict(color=color),
                error_y=_spread(rows) if with_spread else None,
                hovertemplate=f"N = %{{x}}: %{{y:.4g}} {unit}<extra>{label}</extra>",
            )
        )
        failed = [r for r in rows if r["status"] != "ok"]
        any_failed = any_failed or bool(failed)
        if failed:
            fig.add_trace(
                go.Scatter(
                    x=np.array([r["seq_len"] for r in failed]),
                    y=np.full(len(failed), failed_row),
                    mode="markers+text",
                    marker=dict(symbol="x", size=18, color=color, line=dict(width=2)),
                    name=f"{label}: failed",
                    showlegend=False,
                    # the word once, beside the first ✕ of a run that says the same (the ✕s stand closer than
                    # the word is long); right of it, but left of one at the chart's right edge, which cuts it off
                    text=[_mark(r) if i == 0 or _mark(r) != _mark(failed[i - 1]) else ""
                          for i, r in enumerate(failed)],
                    textposition=["middle left" if r["seq_len"] == rightmost else "middle right" for r in failed],
                    hovertext=[_failure(r) for r in failed],
                    hovertemplate="N = %{x}: %{hovertext}<extra></extra>",
                    **({"yaxis": failed_axis, "cliponaxis": False} if failed_axis else {}),
                )
            )
    return shown + ([failed_row] * any_failed if not failed_axis else [])


def _spread(rows: list[dict]) -> dict | None:
    """Error bars from the 20th to the 80th percentile time, where the records have them."""
    if any(r["status"] == "ok" and r.get("time_ms_p20") is None for r in rows):
        return None
    median = [r["time_ms"] if r["status"] == "ok" else np.nan for r in rows]
    return dict(
        type="data",
        symmetric=False,
        array=np.array([(r.get("time_ms_p80") or m) - m for r, m in zip(rows, median)], dtype=np.float64),
        arrayminus=np.array([m - (r.get("time_ms_p20") or m) for r, m in zip(rows, median)], dtype=np.float64),
        thickness=2,
    )


def _finish(fig: go.Figure, records: list[dict], seq_len_marker: int | None, theme: str, height: int) -> go.Figure:
    seq_lens = [r["seq_len"] for r in records] + ([seq_len_marker] if seq_len_marker else [])
    fig.update_xaxes(title_text="sequence length N (tokens)", **token_axis(seq_lens or [1024, 131072]))
    if seq_len_marker:
        # labelled at the foot: at the top it would cover a failed run's marker at that N (its row is on top)
        vertical_marker(fig, seq_len_marker, f"N = {fmt_tokens(seq_len_marker)}", theme,
                        at_right_end=seq_len_marker >= max(seq_lens), at_bottom=True)
    fig.update_layout(height=height, legend=dict(x=0.01, y=0.99, xanchor="left", yanchor="top"))
    return fig


def timing_figure(
    records: list[dict], seq_len_marker: int | None = None, theme: str = "light", height: int = 620
) -> go.Figure:
    """Median forward time (ms) vs sequence length (tokens), log-log, one line per algorithm present.

    records: measurement records of one setting (docs/data-contracts.md); each failed one ("oom", "error")
    carries its `failure` text (story.with_failures), shown on hover over its ✕."""
    fig = go.Figure()
    # failures sit on a row 2.5× above the slowest point: clear of the lines on a log axis
    plotted = _algorithm_lines(
        fig, _by_algorithm(records), lambda r: r.get("time_ms"), "ms", failed_row_factor=2.5, with_spread=True
    )
    interpreter = any(_is_interpreter(r) for r in records)
    kind = "CPU wall time, Triton interpreter (not GPU speed)" if interpreter else "GPU time, median"
    style(fig, theme, title=f"Forward time vs sequence length · {kind}")
    lo, hi = log_range(plotted, pad=1.5)
    # one tick a decade, and the axis starts at the decade under the fastest point, so every point has a tick
    # below it (0.1 ms under a launch-bound 0.16 ms)
    fig.update_yaxes(type="log", dtick=1, range=[math.floor(lo), hi], title_text="time (ms)")
    if not plotted:
        note(fig, "no successful measurements yet", theme)
    return _finish(fig, records, seq_len_marker, theme, height)


def tflops_figure(
    records: list[dict],
    seq_len_marker: int | None = None,
    theme: str = "light",
    height: int = 620,
) -> go.Figure:
    """Achieved TFLOPS (4·B·H·N²·D per forward, halved when causal) vs sequence length (tokens).

    Only GPU ("cuda") timings: interpreter records are left out, because CPU wall time says nothing
    about GPU throughput. (The roofs, measured, are the roofline scene's.) records: as timing_figure's.
    """
    gpu_records = [r for r in records if not _is_interpreter(r)]
    fig = go.Figure()
    plotted = _algorithm_lines(
        fig, _by_algorithm(gpu_records), lambda r: r.get("tflops"), "TFLOPS", failed_row_factor=1.1,
        failed_axis="y2",
    )
    style(fig, theme, title="Achieved throughput vs sequence length")
    fig.update_yaxes(range=[0, max(plotted, default=1.0) * 1.15], title_text="TFLOPS (forward)")
    if not gpu_records:
        note(fig, "TFLOPS need GPU timings: these records come from the CPU interpreter", theme)
    fig = _finish(fig, gpu_records, seq_len_marker, theme, height)
    if any(r["status"] != "ok" for r in gpu_records):
        # the failures on a strip above the plot, on an axis of no values: a ✕ there is no throughput
        fig.update_layout(
            yaxis=dict(domain=[0, 1 - FAILED_STRIP]),
            yaxis2=dict(domain=[1 - FAILED_STRIP + 0.02, 1], anchor="x", range=[-1, 1], tickvals=[0],
                        ticktext=["failed"], showgrid=False, zeroline=False, fixedrange=True),
            legend=dict(y=1 - FAILED_STRIP - 0.01),
        )
    return fig
