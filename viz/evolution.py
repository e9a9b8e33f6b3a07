"""FlashAttention 1 → 4: the published headline throughput, next to what we measure on this GPU.

Published numbers are for other GPUs (A100, H100, B200) and other kernels: they place our numbers in
the history, they are not a like-for-like benchmark. Each entry says what its number measures and,
in "note", how far it was checked: where a paper gives a percentage rather than TFLOPS, the value is
derived from it and marked "derived".
"""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go

from viz.marks import note
from fmt import plotly_text
from viz.theme import PALETTE, algorithm_color, look, style, surface

# a measured tick's line: at most 11 characters leave a gap between neighbouring labels ("PyTorch SDPA" twice side
# by side read as one line at 14); a missing number's note is wrapped like them
TICK_LINE_CHARS = 11
A100_PEAK_TFLOPS = 312  # A100 dense fp16/bf16 tensor-core peak (NVIDIA A100 datasheet)

PUBLISHED: list[dict] = [
    {
        "version": "FlashAttention",
        "short": "FA1",
        "year": 2022,
        "gpu": "A100",
        "dtype": "fp16 / bf16",
        "tflops": round(0.40 * A100_PEAK_TFLOPS),
        "tflops_kind": "derived",
        "measures": "attention kernel, upper end of a utilization range; pass not stated",
        "headline": "3× faster GPT-2 training (seq. 1K); 15% faster BERT-large than the MLPerf 1.1 record",
        "citation": "Dao, Fu, Ermon, Rudra, Ré. FlashAttention: Fast and Memory-Efficient Exact Attention "
        "with IO-Awareness. NeurIPS 2022. arXiv:2205.14135",
        "url": "https://arxiv.org/abs/2205.14135",
        "note": "The paper headlines speedups, not TFLOPS. 125 TFLOPS is derived: the upper end of the "
        "'25–40% of the theoretical maximum FLOPs/s' that the FlashAttention-2 abstract gives for "
        "FlashAttention, × A100's 312 TFLOPS peak.",
    },
    {
        "version": "FlashAttention-2",
        "short": "FA2",
        "year": 2023,
        "gpu": "A100",
        "dtype": "fp16 / bf16",
        "tflops": round(0.73 * A100_PEAK_TFLOPS),
        "tflops_kind": "derived",
        "measures": "attention kernel, upper end of a utilization range; pass not stated in the abstract",
        "headline": "≈2× FlashAttention, 50–73% of A100 peak; up to 225 TFLOPs/s per A100 training GPT (72% MFU)",
        "citation": "Dao. FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning. "
        "ICLR 2024. arXiv:2307.08691",
        "url": "https://arxiv.org/abs/2307.08691",
        "note": "228 TFLOPS is derived: 73% (the abstract's upper end) × 312 TFLOPS. A per-pass forward "
        "TFLOPS figure from the paper's tables was not checked here.",
    },
    {
        "version": "FlashAttention-3",
        "short": "FA3",
        "year": 2024,
        "gpu": "H100",
        "dtype": "fp16",
        "tflops": 740,
        "tflops_kind": "published",
        "measures": "forward pass, fp16, best case (75% of H100 peak)",
        "headline": "1.5–2.0× FlashAttention-2 on H100; fp16 up to 740 TFLOPs/s, fp8 close to 1.2 PFLOPs/s",
        "citation": "Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao. FlashAttention-3: Fast and Accurate "
        "Attention with Asynchrony and Low-precision. NeurIPS 2024. arXiv:2407.08608",
        "url": "https://arxiv.org/abs/2407.08608",
        "note": "740 TFLOPs/s (75% utilization) is from the abstract; that it is the forward pass comes "
        "from the authors' fp16 forward benchmark plot, not from the abstract itself.",
    },
    {
        "version": "FlashAttention-4",
        "short": "FA4",
        "year": 2026,
        "gpu": "B200",
        "dtype": "bf16",
        "tflops": 1613,
        "tflops_kind": "published",
        "measures": "attention kernel, bf16, best case (71% of B200 peak); pass not stated in the abstract",
        "headline": "up to 1.3× cuDNN 9.13 and 2.7× Triton on B200; up to 1613 TFLOPs/s",
        "citation": "Zadouri, Hoehnerbach, Shah, Liu, Thakkar, Dao. FlashAttention-4: Algorithm and Kernel "
        "Pipelining Co-Design for Asymmetric Hardware Scaling. arXiv:2603.05451 (2026)",
        "url": "https://arxiv.org/abs/2603.05451",
        "note": "1613 TFLOPs/s (71% utilization) is from the abstract, which does not say forward or "
        "backward; not verified further here. 71 %, not 'near 100 %': the paper's subject is that Blackwell's "
        "tensor cores grew faster than the units that compute the softmax's exponentials and move the data, "
        "and the kernel's work is hiding those (its title's 'asymmetric hardware scaling').",
    },
]


def _category(entry: dict) -> str:
    """An entry's x position: a published one's version, year, GPU and dtype; a measured one's label."""
    # short lines side by side: nine upright labels fit a 1920-px-wide chart at 24 px
    if "short" in entry:
        return f"{entry['short']} ({entry['year']})<br>{entry['gpu']}<br>{entry['dtype']}"
    # measured: the legend and the title say on which GPU; short lines (TICK_LINE_CHARS). A label with a word no
    # such line holds ("FlashAttention-4,", which wrapping cut into "FlashAttent" / "ion-4,"), or that takes more
    # lines than a published entry's three ("PyTorch eager (matmul, softmax, matmul)": five, which the plot paid for
    # in height), gives its spec's short name instead (the sentences below the chart name it in full)
    label = entry["label"]
    if any(len(word) > TICK_LINE_CHARS for word in label.split()) or len(textwrap.wrap(label, TICK_LINE_CHARS)) > 3:
        found = look(entry.get("algorithm", ""))
        label = found.short if found else label
    return "<br>".join(plotly_text(line) for line in textwrap.wrap(label, TICK_LINE_CHARS))


def _add_published(fig: go.Figure) -> None:
    """The papers' numbers: filled where the abstract gives them, hollow where derived from a % of peak."""
    for kind, symbol, name in (
        ("published", "circle", "published (paper abstract)"),
        ("derived", "circle-open", "derived from a paper's % of peak"),
    ):
        entries = [entry for entry in PUBLISHED if entry["tflops_kind"] == kind]
        fig.add_trace(
            go.Scatter(
                x=[_category(e) for e in entries],
                y=np.array([e["tflops"] for e in entries], dtype=np.float64),
                mode="markers+text",
                name=name,
                marker=dict(symbol=symbol, size=22, color=PALETTE["published"], line=dict(width=4)),
                text=[f"{'≈' if kind == 'derived' else ''}{e['tflops']:,}" for e in entries],
                textposition="top center",
                customdata=[e["measures"] for e in entries],
                hovertemplate="%{x}: %{y:,.0f} TFLOPS<br>%{customdata}<extra></extra>",
            )
        )


def _add_measured(fig: go.Figure, known: list[dict], unknown: list[dict], measured_label: str, theme: str) -> None:
    """The measured points in their algorithms' colours; where a number is missing, its note in its place."""
    if known:
        fig.add_trace(
            go.Scatter(
                x=[_category(m) for m in known],
                y=np.array([m["tflops"] for m in known], dtype=np.float64),
                mode="markers+text",
                name=measured_label,
                marker=dict(
                    symbol="diamond",
                    size=26,
                    color=[algorithm_color(m["algorithm"]) if "algorithm" in m else PALETTE["highlight"]
                           for m in known],
                ),
                text=[f"<b>{m['tflops']:,.0f}</b>" for m in known],
                textposition="top center",
                hovertemplate="%{x}: %{y:,.1f} TFLOPS<extra>" + measured_label.split(" on ")[0] + "</extra>",
            )
        )
    if unknown:
        # a labelled gap: the entry keeps its column, and its note (wrapped like the column's label, so that
        # neighbouring notes never run into each other) stands where its point would be, over a dash on the axis
        notes = [m.get("note") or "not measured" for m in unknown]
        fig.add_trace(
            go.Scatter(
                x=[_category(m) for m in unknown],
                y=np.zeros(len(unknown)),
                mode="markers+text",
                marker=dict(symbol="line-ew-open", size=40, color=surface(theme)["muted"], line=dict(width=3)),
                text=["<br>".join(plotly_text(line) for line in textwrap.wrap(note, TICK_LINE_CHARS)) for note in notes],
                textposition="top center",
                textfont=dict(color=surface(theme)["muted"]),
                customdata=[plotly_text(note) for note in notes],
                hovertemplate="%{x}: no number, %{customdata}<extra></extra>",
                name="no number here (why)",
                showlegend=False,
            )
        )


# The plot's place in the figure as chromium draws it (plotly.js `_fullLayout._size`, the scene at 1920×1080): the top
# margin given below, and under the plot the tick labels' lines and the gap below them; a line of 24 px text
TOP_MARGIN_PX, LINE_PX, TICKS_GAP_PX, NOTE_GAP_PX = 150, 28.8, 33, 24


def _y_top(top: float, note_lines: int, tick_lines: int, height: int) -> float:
    """The axis' top: 1.45 × the tallest point (room for its label), or more where the tallest note of a missing
    number, written upward from zero, would otherwise run past the plot's top (it is cut there)."""
    plot_px = height - TOP_MARGIN_PX - tick_lines * LINE_PX - TICKS_GAP_PX
    share = (note_lines * LINE_PX + NOTE_GAP_PX) / plot_px if note_lines and plot_px > 0 else 0.0
    low = top * 0.08  # below zero, as the axis' range has it
    return max(top * 1.45, low * share / (1 - share)) if share < 0.9 else top * 1.45


def evolution_figure(measured: list[dict], theme: str = "light", height: int = 600,
                     measured_label: str = "measured on this GPU") -> go.Figure:
    """Published FlashAttention throughput by version and year, then the measured points passed in.

    measured: dicts with "label", "tflops" (None: no number; "note" then says why, else "not measured") and
    optionally "algorithm" (for its colour), e.g. ours and PyTorch SDPA on this GPU. One x position per entry,
    in order; which GPU they ran on is measured_label's to say (the legend and the title), not each tick's.
    measured_label: where those with a number come from, as plain text ("recorded on H200, 2026-11-29"; escaped
    here); said only where one of them has a number (a setting with none draws the published points alone).
    """
    measured_label = plotly_text(measured_label)
    known = [m for m in measured if m.get("tflops") is not None]
    fig = go.Figure()
    _add_published(fig)
    _add_measured(fig, known, [m for m in measured if m.get("tflops") is None], measured_label, theme)
    top = max([e["tflops"] for e in PUBLISHED] + [m["tflops"] for m in known])
    # the title names what is drawn: the measured points' source only where there is a point of them
    drawn = f", and ours {measured_label}" if known else ""
    style(fig, theme, title=f"FlashAttention 1 → 4{drawn}<br><sup>published numbers are other GPUs</sup>")
    # room above the tallest point for its label, below zero for a low point's whole marker, and above zero for the
    # tallest note of a missing number (a short chart: its lines need more of the axis)
    lines = [label.count("<br>") + 1 for label in [_category(e) for e in PUBLISHED + measured]]
    notes = [len(textwrap.wrap(m.get("note") or "not measured", TICK_LINE_CHARS)) for m in measured
             if m.get("tflops") is None]
    fig.update_yaxes(title_text="TFLOPS", range=[-top * 0.08, _y_top(top, max(notes, default=0), max(lines), height)])
    # chronological, then the measurements, whatever order the traces were added in
    fig.update_xaxes(type="category", categoryorder="array",
                     categoryarray=[_category(e) for e in PUBLISHED + measured])
    fig.update_xaxes(tickangle=0)
    # the legend in a row above the plot, where no point can sit under it
    fig.update_layout(height=height, legend=dict(orientation="h", x=0, y=1.0, xanchor="left", yanchor="bottom"),
                      margin=dict(t=TOP_MARGIN_PX))
    if not measured:
        note(fig, "no measurement on this GPU yet", theme, y=0.85)
    return fig
