"""The tiling scene's pictures: the kernel's traces, its views and loop orders (one table each), the tiles a
GPU can run (shared memory, then a real launch), and the byte-bounded caches that keep traces and figures.

A picture is asked for with a `PictureRequest` (the settings that change it, nothing else) and built from a
trace that a `TraceRequest` names; both are frozen values, so they are the caches' keys.
"""
from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import streamlit as st

import costmodel
import viz
import viz.animation
from fmt import plotly_text
from page.cache import ByteBudgetCache
from page.settings import Settings

ANIMATION_FRAME_MS = 250
# What the server keeps between sessions, in bytes (README, "What a server needs"). Traces and animations:
# a default animation holds ~4 MB, the largest one (512 tokens, 16×16 tiles, head_dim 256, fp32) ~55 MB.
ANIMATION_CACHE_BYTES = 256 << 20
FIGURE_BYTES_PER_JSON_BYTE = 5  # a plotly Figure in memory against its JSON text (tracemalloc, 512-token case)
TRACES: ByteBudgetCache[dict] = ByteBudgetCache("kernel traces", ANIMATION_CACHE_BYTES // 2)
FIGURES: ByteBudgetCache = ByteBudgetCache("animations", ANIMATION_CACHE_BYTES // 2)


# -- the tables: loop orders and views ------------------------------------------------------------------

# The kernels a trace can come from: the specs with a trace facet (kernels/specs.py), by key; their names on screen
# from viz.theme (the link's `order` is resolved against them, page.present).
loop_orders = viz.animation.loop_orders
order_label = viz.animation.order_label


@dataclass(frozen=True)
class TraceRequest:
    """One (batch, head) of a kernel run in trace mode at small N (kernels.trace.trace_flash)."""
    seq_len: int
    head_dim: int
    block_m: int
    block_n: int
    causal: bool
    dtype: str
    seed: int
    order: str = "fa2"

    @classmethod
    def of(cls, s: Settings) -> TraceRequest:
        return cls(s.trace_len, s.head_dim, s.block_m, s.block_n, s.causal, s.dtype, s.seed, s.order or "fa2")


@dataclass(frozen=True)
class PictureDevice:
    """What a view quotes of the GPU: its shared memory per block and L2, and whose they are."""
    smem_per_block: int | None = None
    l2_bytes: int | None = None
    sm_count: int | None = None
    label: str = ""  # plain text: the builders escape it for plotly
    programs_per_sm: int | None = None  # the flash kernel's measured residency (None: 1 per SM, assumed)
    residency_how: str = costmodel.RESIDENCY_ASSUMED

    @classmethod
    def of(cls, facts: dict | None, recorded: bool, residency: tuple[int | None, str] = (None, "")) -> PictureDevice:
        if not facts:
            return cls()
        name = str(facts.get("name", "GPU"))
        per_sm, how = residency
        return cls(facts.get("smem_per_block_bytes"), facts.get("l2_bytes"), facts.get("sm_count"),
                   f"{name} (recorded)" if recorded else name, per_sm, how or costmodel.RESIDENCY_ASSUMED)


@dataclass(frozen=True)
class PictureRequest:
    """What changes a view's figure, and nothing else: the cache keeps one figure per request, and the step a
    viewer stops at is applied to the cached figure (viz.animation.at_step), never built into it."""
    trace: TraceRequest
    view: str
    theme: str
    height: int
    device: PictureDevice
    talk_seq_len: int = 0  # the talk's N: only the re-reads view quotes it

    @classmethod
    def of(cls, trace: TraceRequest, view: str, theme: str, height: int, device: PictureDevice,
           talk_seq_len: int) -> PictureRequest:
        quoted = talk_seq_len if view == "rereads" else 0  # a key holds only what the figure shows
        return cls(trace, view, theme, height, device if view in ("hbm", "rereads") else PictureDevice(), quoted)


def _tiles_view(trace: dict, r: PictureRequest):
    return viz.tiling_figure(trace, theme=r.theme, frame_ms=ANIMATION_FRAME_MS, height=r.height)


def _hbm_view(trace: dict, r: PictureRequest):
    return viz.hbm_sram_figure(trace, r.device.smem_per_block, plotly_text(r.device.label), theme=r.theme,
                               frame_ms=ANIMATION_FRAME_MS, height=r.height)


def _source_view(trace: dict, r: PictureRequest):
    from kernels import source  # plain file reading: no torch
    kernel = source.kernel_source(r.trace.order)
    phases = source.step_phases(r.trace.order, trace["loads"], trace["stores"], kernel["phases"])
    return viz.kernel_source_figure(trace, kernel, phases, theme=r.theme, frame_ms=ANIMATION_FRAME_MS,
                                    height=r.height)


def _rereads_view(trace: dict, r: PictureRequest):
    machine = costmodel.machine_from_facts({"l2_bytes": r.device.l2_bytes, "sm_count": r.device.sm_count},
                                           r.device.programs_per_sm, r.device.residency_how)
    return viz.rereads_figure(trace, machine, plotly_text(r.device.label), r.talk_seq_len, theme=r.theme,
                              height=r.height)


@dataclass(frozen=True)
class View:
    label: str
    build: Callable[[dict, PictureRequest], object]
    animated: bool = True  # has play buttons and a step slider (the re-reads view is one static picture)


VIEWS: dict[str, View] = {
    "tiles": View("Tiles", _tiles_view),
    "hbm": View("HBM ↔ SRAM", _hbm_view),
    "source": View("Source", _source_view),
    "rereads": View("Re-reads", _rereads_view, animated=False),
}


# -- traces and figures, cached ---------------------------------------------------------------------------

def _trace_bytes(trace: dict) -> int:
    return sum(value.nbytes for value in trace.values() if isinstance(value, np.ndarray))


# How often one viewer may have the interpreter run new inputs (a seed, tiles, a length, the mask, the loop order not
# run before): each new trace holds Triton's one CPU interpreter, which every viewer shares, for up to ~10 s. A viewer
# may start NEW_TRACES_AT_ONCE at once, then one more every NEW_TRACE_EVERY_S: a presenter trying settings is never
# stopped, and one viewer asking for seed after seed cannot keep the interpreter from everyone else.
NEW_TRACES_AT_ONCE = 6
NEW_TRACE_EVERY_S = 10.0
VIEWER_KEY = "viewer"  # the session's own random id (a viewer is a browser session)


class TraceAllowance:
    """New traces per viewer: a token bucket each (NEW_TRACES_AT_ONCE tokens, one back every NEW_TRACE_EVERY_S),
    shared by the server's sessions; the clock is a parameter for the tests."""

    def __init__(self, at_once: int = NEW_TRACES_AT_ONCE, every_s: float = NEW_TRACE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic, viewers: int = 4096):
        self.at_once, self.every_s, self.clock, self.viewers = at_once, every_s, clock, viewers
        self._lock = threading.Lock()
        self._left: dict[str, tuple[float, float]] = {}  # viewer -> (tokens, when counted)

    def take(self, viewer: str) -> float:
        """0.0 and one token taken, or the seconds until this viewer has one (nothing taken)."""
        with self._lock:
            now = self.clock()
            tokens, then = self._left.get(viewer, (float(self.at_once), now))
            tokens = min(float(self.at_once), tokens + (now - then) / self.every_s)
            if tokens < 1.0:
                self._left[viewer] = (tokens, now)
                return (1.0 - tokens) * self.every_s
            self._left[viewer] = (tokens - 1.0, now)
            if len(self._left) > self.viewers:  # the longest-idle viewers are forgotten (they would be full again)
                for gone in sorted(self._left, key=lambda v: self._left[v][1])[:len(self._left) - self.viewers]:
                    del self._left[gone]
            return 0.0


TRACE_ALLOWANCE = TraceAllowance()


class TooManyTraces(ValueError):
    """A viewer asked the interpreter for new traces faster than TRACE_ALLOWANCE lets one viewer."""


def _viewer() -> str:
    if VIEWER_KEY not in st.session_state:
        st.session_state[VIEWER_KEY] = uuid.uuid4().hex
    return st.session_state[VIEWER_KEY]


def kernel_trace(request: TraceRequest) -> dict:
    """The kernel's tile steps on one (batch, head), and the naive kernel on the same inputs.

    On the CPU, Triton's interpreter runs one kernel at a time for the whole server (kernels.runtime): a
    viewer whose animation waits behind other viewers' is told so while it waits, and a viewer who asks for new
    traces faster than TRACE_ALLOWANCE allows is refused (TooManyTraces, a ValueError that says when to try again);
    a trace another viewer has run is shared, and costs nothing."""
    from kernels import runtime, trace
    # the message's place is made only when the viewer queues: a place made on every call would be one element
    # more on a run that builds the trace than on the next run (a cache hit), which moves the scene's chart one
    # place on and makes Streamlit draw it anew: a picture that flickers, an animation cut off as it plays
    waiting = []

    def queued(ahead: int) -> None:
        whose = "viewer's kernel run" if ahead == 1 else "viewers' kernel runs"
        waiting.append(st.empty())
        waiting[-1].info(f"Queued behind {ahead} other {whose}: Triton's CPU interpreter runs one at a time, so "
                         "this animation starts when theirs are done.", icon=":material/hourglass_top:")

    def build() -> dict:
        wait_s = TRACE_ALLOWANCE.take(_viewer()) if runtime.INTERPRET else 0.0
        if wait_s:
            raise TooManyTraces(f"this page has asked Triton's CPU interpreter for {TRACE_ALLOWANCE.at_once} new "
                                f"animations in a short time, and it runs one at a time for every viewer: the next "
                                f"new one can start in {math.ceil(wait_s)} s (those already made show at once)")
        with runtime.kernel_launch_lock(on_wait=queued):  # the trace's kernel runs re-enter it
            r = request
            return trace.trace_flash(r.seq_len, r.head_dim, r.block_m, r.block_n, r.causal, dtype=r.dtype,
                                     seed=r.seed, order=r.order).to_dict()
    try:
        return TRACES.get(request, build, _trace_bytes)
    finally:
        for place in waiting:
            place.empty()


# Building a figure holds the interpreter's one Python thread for 0.1–2 s: one build at a time for the whole
# server, so viewers who ask for new pictures at once queue behind each other instead of all slowing down
# together, and a viewer whose picture is cached (or whose scene draws none) never waits for them.
_BUILDS = threading.BoundedSemaphore(1)


def picture(request: PictureRequest, step: int = 0):
    """The figure of one view of a trace at `step`: built once per request (kept in FIGURES, bounded in bytes,
    like the traces), then shown from the step asked for."""
    def build():
        trace = kernel_trace(request.trace)
        with _BUILDS:
            return VIEWS[request.view].build(trace, request)
    figure = FIGURES.get(request, build, lambda fig: FIGURE_BYTES_PER_JSON_BYTE * len(fig.to_json()))
    return viz.animation.at_step(figure, step) if VIEWS[request.view].animated else figure


# -- the tiles a GPU can run --------------------------------------------------------------------------------
# Two reasons to run other tiles than the link asks: they need more shared memory than the GPU gives a block
# (known from its facts, before anything runs), or the kernel fails to compile or launch with them (known only
# by trying). Either way the picture shows the largest square tile below that runs, and a note says why.

@dataclass(frozen=True)
class SharedMemoryBudget:
    """What a GPU offers a thread block (costmodel.smem_bytes says what a tile shape costs)."""
    limit_bytes: int
    gpu_name: str = "the GPU"  # markdown-safe

    @classmethod
    def of(cls, facts: dict | None, gpu_name: str) -> SharedMemoryBudget | None:
        if not facts or not facts.get("smem_per_block_bytes"):
            return None
        return cls(int(facts["smem_per_block_bytes"]), gpu_name)


def _smaller_squares(block_m: int, block_n: int) -> list[int]:
    return [size for size in sorted(costmodel.TILE_SIZES, reverse=True) if size < max(block_m, block_n)]


def fit_tiles(settings: Settings, smem: SharedMemoryBudget) -> tuple[Settings, list[str]]:
    """Keep the tile sizes if they fit in shared memory, else the largest square tile that does."""
    def need(block_m: int, block_n: int) -> int:
        return costmodel.smem_bytes(block_m, block_n, settings.head_dim, settings.dtype_bytes)

    asked = need(settings.block_m, settings.block_n)
    if asked <= smem.limit_bytes:
        return settings, []
    size = next((size for size in _smaller_squares(settings.block_m, settings.block_n)
                 if need(size, size) <= smem.limit_bytes), costmodel.TILE_SIZES[0])
    note = (f"block_m × block_n: {settings.block_m}×{settings.block_n} tiles at head_dim {settings.head_dim} "
            f"{settings.dtype} need {asked / 1024:.0f} KiB of shared memory, {smem.gpu_name} has "
            f"{smem.limit_bytes / 1024:.0f} KiB per block; using {size}×{size}")
    return replace(settings, block_m=size, block_n=size), [note]


def traced_tiles(request: TraceRequest) -> tuple[TraceRequest, list[str]]:
    """The trace request the kernel can run: the asked one, or the largest square tiles below it that run,
    with a note saying why. ValueError: settings every kernel refuses, in their words."""
    label = order_label(request.order)
    try:
        kernel_trace(request)
        return request, []
    except ValueError:
        raise
    except Exception as why:  # the kernel could not be compiled or launched for these tiles
        failure = f"{type(why).__name__}: {str(why)[:160]}"
    for size in _smaller_squares(request.block_m, request.block_n):
        smaller = replace(request, block_m=size, block_n=size)
        try:
            kernel_trace(smaller)
        except Exception:
            continue
        return smaller, [f"The {label} kernel could not run {request.block_m}×{request.block_n} tiles here "
                         f"({failure}); showing {size}×{size}."]
    raise ValueError(f"the {label} kernel could not run at any tile size here ({failure})")
