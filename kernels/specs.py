"""One spec per kernel: everything the house needs to know about an algorithm, in one place.

Every room reads these specs instead of keeping a table of its own: the library's dispatch
(`flash_attention(kernel=...)`), the bench (what it times, with which tiles, why it cannot run), the results file
(which names a record may carry, and the older names it still reads), the cost model's traffic and memory for the
algorithm, the palette and legend names, the roofline and the bench's ratio table, the tiling animation (a traced
kernel's loop order, schedule and source phases), Proton's phase recordings and the ahead-of-time compile check.

A new kernel is its file in kernels/ plus one `Spec` in SPECS below (docs/architecture.md). Importing this module
costs no torch or Triton: what needs them is named as "module:function" and imported when first used (`load`).
The key is the one vocabulary of the code, the link, the results file and the library: "fa2", "fa1", "fa3",
"naive", "sdpa_default", "sdpa_flash", "torch_naive", "decode" (attention against a KV cache: its pass is "decode"),
"fa4_authors" (the FlashAttention authors' FA-4, a peer installed apart: requirements-peers.txt).
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import costmodel
from costmodel import Machine, Shape, Traffic

Tiles = tuple[int, int]
TrafficModel = Callable[[Shape, Tiles, "Machine | None", bool], "list[Traffic]"]


@dataclass(frozen=True)
class Trace:
    """A kernel the tiling animation can trace, step by step (kernels/trace.py): its loop order."""
    order_label: str                    # the loop order's short name on screen: "FA2 order"
    kv_outer: bool                      # K/V tiles in the outer loop (FA-1's order), else Q blocks (FA-2's)
    schedule: Callable                  # (seq_len, block_m, block_n, causal) -> [costmodel.Step] in run order
    step_traffic: Callable              # (shape, block_m, block_n) -> cumulative bytes per step ("<key>_bytes", …)
    traffic: Callable                   # (shape, block_m, block_n) -> its HBM traffic by phase, no cache
    traced: str                         # "module:function" (q, k, v, causal, block_m, block_n, sm_scale) -> trace
    source: str                         # its file in kernels/, shown beside the animation
    phases: tuple[tuple[str, str, bool], ...]  # (phase, the comment line that starts it, required) in run order


@dataclass(frozen=True)
class Spec:
    key: str
    label: str                          # legend name
    short: str                          # short name: a point on the roofline, a sentence of the story
    color: str                          # a colour of the palette by name (viz.theme.COLORS)
    call: str                           # "module:function" that computes it, (q, k, v, causal=..., ...): the library
                                        # dispatches to it (`library`), else the bench times it as it is
    traffic: TrafficModel               # (shape, tiles, machine or None, interpreter path) -> HBM traffic by phase
    extra_bytes: Callable[[Shape], int]  # device memory it needs beyond Q, K, V, by its design
    ours: bool = True                   # a kernel of this repository (measured past its own out-of-memory wall)
    interpreter: bool = False           # runs in Triton's CPU interpreter too (at small N)
    library: bool = False               # flash_attention(kernel=key) runs it
    auto_rank: int | None = None        # kernel="auto" tries the library's kernels by this rank, fastest first
    aliases: tuple[str, ...] = ()       # older names (results files, links) read as this key
    tiles: str | None = None            # "module:function" (shape) -> (block_m, block_n) it runs, or None
    assumed_tiles: Tiles | None = None  # tiles of a record that does not say (files before the field)
    tile_rule: Callable[[object, object], None] | None = None  # raises ValueError for tiles it cannot have run
    unavailable: str | None = None      # "module:function" (shape, device=None) -> why it cannot run, or None
    max_seq_len: int | None = None      # timed up to here (longer: minutes of GPU time), with why
    max_seq_len_why: str = ""
    roofline: bool = True               # a point on the roofline scene
    ratio: bool = False                 # a column of the bench's ratio table (its time ÷ FA-2's)
    passes: tuple[str, ...] = ("prefill",)  # what it computes (costmodel.PASSES): the scenes of that pass show it
    kv_cache: str | None = None         # "module:function" (q, k, v, page_size) -> (call, facts): how it is timed
                                        # against a KV cache (bench --decode, the decode scene); None: not there
    trace: Trace | None = None          # the tiling animation can trace it
    proton: str | None = None           # "module:function" (head_dim, causal, dtype) -> (launch, config, warps)
    compile: str | None = None          # "module:function" () -> its shipped launches, compiled ahead of time
    requirements: str | None = None     # a peer installed apart from the app (this requirements file): the scenes
                                        # show it only where it has a measurement
    backward: str | None = None         # "module:function" (q, k, v, o, lse, do, causal, sm_scale) -> (dq, dk, dv):
                                        # its backward pass; a library kernel with one is differentiable
                                        # (kernels/autograd.py) and "auto" picks among these when grad is needed
    backward_compile: str | None = None  # "module:function" (subset="all") -> the backward's launches (compile check)
    fast: str | None = None             # "module:function" (q, k, v, causal, sm_scale) -> a launcher for calls like
                                        # this checked one, or None: the library's fast path for short calls
    sources: tuple[tuple[str, tuple[str, ...]], ...] = ()  # ours: its kernel's files in kernels/, by what a record
                                        # computed ("*", a pass, or "fp8": e4m3 inputs), first match of ("fp8" when
                                        # 8-bit,) its pass, "*": the files whose code a record's build stamp digests

    def load(self, field_name: str) -> Callable:
        """The function a "module:function" field names, imported now."""
        path = getattr(self, field_name)
        if not path:
            raise ValueError(f"{self.key} has no {field_name}")
        return load(path)


def load(path: str) -> Callable:
    """The function "module:function" names, imported now (looked up afresh each time, so a patched or reloaded
    module is seen; an imported one is taken from sys.modules: a short call is bound by the host)."""
    module, _, name = path.partition(":")
    imported = sys.modules.get(module)
    return getattr(imported if imported is not None else importlib.import_module(module), name)


# -- the cost model's rows: traffic by phase for a shape, at the tiles the kernel ran -------------------------------

def _flash_model(shape: Shape, tiles: Tiles, machine: Machine | None, interpreter: bool) -> list[Traffic]:
    if machine is None:
        return costmodel.flash_traffic_no_cache(shape, *tiles)
    return costmodel.flash_traffic_l2(shape, *tiles, machine.l2_bytes, machine.programs_in_flight)


def _naive_model(shape: Shape, tiles: Tiles, machine: Machine | None, interpreter: bool) -> list[Traffic]:
    return costmodel.naive_traffic(shape, interpreter=interpreter)


def _fused_model(shape: Shape, *_) -> list[Traffic]:
    return costmodel.fused_traffic(shape)


def _torch_naive_model(shape: Shape, *_) -> list[Traffic]:
    return costmodel.torch_naive_traffic(shape)


def _fa1_model(shape: Shape, tiles: Tiles, machine: Machine | None, interpreter: bool) -> list[Traffic]:
    splits = 1  # the interpreter, or a GPU whose SMs are unknown: one program per (batch, head)
    if machine is not None and not interpreter:
        sms = machine.programs_in_flight // max(1, machine.programs_per_sm)
        splits = costmodel.fa1_splits(shape.batch * shape.heads, costmodel.n_blocks(shape.seq_len, tiles[0]),
                                      sms * costmodel.FA1_PROGRAMS_PER_SM)
    return costmodel.fa1_traffic(shape, *tiles, splits=splits)


def _decode_model(shape: Shape, tiles: Tiles, machine: Machine | None, interpreter: bool) -> list[Traffic]:
    """The decode kernel's bytes: one split (no merge) with no machine to fill, else the splits the shipped call
    chooses for the machine's SMs (kernels.decode.gpu_splits_for: its tuned settings and split heuristic)."""
    splits = 1
    if machine is not None:
        from kernels.decode import gpu_splits_for
        sm_count = max(1, machine.programs_in_flight // max(1, machine.programs_per_sm))
        splits = gpu_splits_for(shape, sm_count)
    return costmodel.decode_traffic(shape, splits)


def _decode_extra_bytes(shape: Shape) -> int:
    """The decode kernel's memory beyond Q and the cache, at the most splits its heuristic can choose (key tiles of
    64; the partials are a few MiB at most)."""
    return costmodel.decode_extra_bytes(shape, costmodel.decode_max_splits(shape.kv_len, DECODE_ASSUMED_TILES[1]))


DECODE_ASSUMED_TILES = (16, 64)  # packed query rows (a group of 4 at q_len 1, padded to 16) × keys per tile


def check_fa3_tiles(block_m: object, block_n: object) -> None:
    """The FA-3 style kernel's tiles: query rows per program and keys per K/V tile, each a multiple of 64 (wgmma's
    M per consumer warpgroup) up to 256."""
    for name, block in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(block, bool) or not isinstance(block, int) or block % 64 or not 64 <= block <= 256:
            raise ValueError(f"{name} of the FA-3 style kernel must be a multiple of 64 from 64 to 256; got {block!r}")


FA2_PHASES = (
    ("load_q", "# -- load the Q block once", True),
    ("load_k", "# -- load the K tile", True),
    ("qk", "# -- compute qk", True),
    ("softmax", "# -- update m_i and l_i", True),
    ("load_v", "# -- load the V tile", False),
    ("pv", "# -- rescale the accumulator, then add P·V --", True),
    ("write", "# -- write O and the row log-sum-exp", True),
)
FA1_PHASES = (
    ("load_kv", "# -- load the K tile and the V tile", True),
    ("load_q", "# -- load the Q block, and its O, m_i and l_i so far", True),
    ("qk", "# -- compute qk", True),
    ("softmax", "# -- update m_i and l_i", True),
    ("pv", "# -- rescale O, then add P·V", True),
    ("write", "# -- write O, m_i and l_i back to HBM", True),
)

# -- the specs, in legend order ------------------------------------------------------------------------------------

_BUILT_IN = (
    Spec("fa2", "flash (ours, Triton)", "flash (ours)", "blue", "kernels.fa2:flash_attention", _flash_model,
         costmodel.flash_extra_bytes, interpreter=True, library=True, auto_rank=1, aliases=("flash",),
         kv_cache="kernels.peers:decode_prefill_kernel",
         tiles="kernels.fa2:tiles_for", assumed_tiles=costmodel.ASSUMED_FLASH_TILES, tile_rule=costmodel.check_tiles,
         trace=Trace("FA2 order", False, costmodel.tile_schedule, costmodel.step_traffic,
                     costmodel.flash_traffic_no_cache, "kernels.fa2:flash_attention_traced", "fa2.py", FA2_PHASES),
         proton="kernels.fa2:proton_launcher", compile="kernels.fa2:shipped_launches",
         backward="kernels.fa2_bwd:launch_backward", backward_compile="kernels.fa2_bwd:shipped_launches",
         sources=(("backward", ("fa2_bwd.py", "fa2.py")), ("*", ("fa2.py",)))),
    Spec("naive", "standard (ours, 3 Triton kernels)", "standard (ours)", "vermillion",
         "kernels.naive:naive_attention", _naive_model, costmodel.naive_extra_bytes, interpreter=True,
         compile="kernels.naive:shipped_launches", sources=(("*", ("naive.py",)),)),
    Spec("sdpa_default", "PyTorch SDPA (default)", "SDPA default", "reddish_purple", "kernels.peers:sdpa_default",
         _fused_model, costmodel.fused_extra_bytes, ours=False, ratio=True,
         kv_cache="kernels.peers:decode_sdpa_default"),
    Spec("sdpa_flash", "PyTorch SDPA (flash backend)", "SDPA flash", "bluish_green", "kernels.peers:sdpa_flash",
         _fused_model, costmodel.fused_extra_bytes, ours=False, ratio=True,
         kv_cache="kernels.peers:decode_sdpa_flash"),
    Spec("torch_naive", "PyTorch eager (matmul, softmax, matmul)", "PyTorch eager", "orange",
         "kernels.peers:torch_naive", _torch_naive_model, costmodel.naive_extra_bytes, ours=False, roofline=False),
    Spec("fa1", "flash, FA1 loop order (ours, Triton)", "flash, FA1 order (ours)", "medium_purple",
         "kernels.fa1:flash_attention_v1", _fa1_model, costmodel.fa1_extra_bytes, interpreter=True, library=True,
         aliases=("flash_v1",), tiles="kernels.fa1:tiles_for", assumed_tiles=(64, 64), tile_rule=costmodel.check_tiles,
         max_seq_len=16384, max_seq_len_why="round trips ∝ N²", ratio=True,
         trace=Trace("FA1 order", True, costmodel.fa1_schedule, costmodel.fa1_step_traffic, costmodel.fa1_traffic,
                     "kernels.fa1:flash_attention_v1_traced", "fa1.py", FA1_PHASES),
         compile="kernels.fa1:shipped_launches", sources=(("*", ("fa1.py",)),)),
    Spec("fa3", "flash, FA-3 style (ours, Gluon)", "FA-3 style (ours)", "indigo", "kernels.fa3:flash_attention_v3",
         _flash_model, costmodel.flash_extra_bytes, library=True, auto_rank=0, aliases=("flash_v3",),
         tiles="kernels.fa3:tiles_for",
         assumed_tiles=(128, 128), tile_rule=check_fa3_tiles, unavailable="kernels.fa3:unavailable_for",
         ratio=True, proton="kernels.fa3:proton_launcher", compile="kernels.fa3:shipped_launches",
         backward="kernels.fa3_bwd:backward", backward_compile="kernels.fa3_bwd:shipped_launches",
         fast="kernels.fa3:fast_launcher",
         sources=(("fp8", ("fa3.py", "ptx.py", "gluon_compat.py", "fp8.py")),
                  ("backward", ("fa3_bwd.py", "ptx.py", "gluon_compat.py")),
                  ("*", ("fa3.py", "ptx.py", "gluon_compat.py")))),
    Spec("decode", "flash-decoding (ours, Triton, split-KV)", "decode (ours)", "sky_blue",
         "kernels.decode:decode_attention", _decode_model, _decode_extra_bytes, interpreter=True,
         tiles="kernels.decode:tiles_for", assumed_tiles=DECODE_ASSUMED_TILES, tile_rule=costmodel.check_tiles,
         passes=("decode",), compile="kernels.decode:shipped_launches", kv_cache="kernels.peers:decode_ours",
         sources=(("*", ("decode.py",)),)),
    Spec("fa4_authors", "FlashAttention-4, the authors' Hopper kernel", "FA-4 (the authors')", "brown",
         "kernels.peers:fa4_authors", _fused_model, costmodel.fused_extra_bytes, ours=False, ratio=True,
         unavailable="kernels.peers:fa4_unavailable_for", requirements="requirements-peers.txt"),
)

SPECS: dict[str, Spec] = {spec.key: spec for spec in _BUILT_IN}


def all_specs() -> tuple[Spec, ...]:
    """Every spec, in legend order (read at call time: a spec registered later is seen by every room)."""
    return tuple(SPECS.values())


def keys(**facet) -> tuple[str, ...]:
    """The keys of the specs whose fields have these values, in legend order: keys(ours=True), keys(ratio=True)."""
    return tuple(s.key for s in SPECS.values() if all(getattr(s, name) == value for name, value in facet.items()))


def with_facet(name: str) -> tuple[Spec, ...]:
    """The specs that have this optional facet (trace, proton, compile, tiles, ...)."""
    return tuple(s for s in SPECS.values() if getattr(s, name))


def aliases() -> dict[str, str]:
    """Every older name a results file or a link may carry, to its key today."""
    return {alias: s.key for s in SPECS.values() for alias in s.aliases}


def canonical(name: str) -> str:
    """A key, or an older name of one, as the key (unknown names come back as given)."""
    return name if name in SPECS else aliases().get(name, name)


def spec(key: str) -> Spec:
    """The spec of a key (or an older name); ValueError naming the known keys otherwise."""
    found = SPECS.get(canonical(key)) if isinstance(key, str) else None
    if found is None:
        raise ValueError(f"unknown algorithm {key!r}; known: {', '.join(SPECS)}")
    return found


_GENERATION = [0]  # bumped whenever SPECS changes: what is cached from the registry is cached under it


def generation() -> int:
    return _GENERATION[0]


@contextmanager
def registered(new: Spec) -> Iterator[Spec]:
    """A spec added for the length of a `with` block (tests: a new kernel is seen by every room)."""
    if new.key in SPECS:
        raise ValueError(f"{new.key!r} is already a spec")
    SPECS[new.key] = new
    _GENERATION[0] += 1
    try:
        yield new
    finally:
        del SPECS[new.key]
        _GENERATION[0] += 1


# -- what the cost model says of an algorithm, through its spec ----------------------------------------------------

def traffic(key: str, shape: Shape, block_m: int | None = None, block_n: int | None = None,
            machine: Machine | None = None, interpreter: bool = False) -> list[Traffic]:
    """HBM traffic of an algorithm by kernel or phase: the model behind every byte count on the page. The flash
    kernels: L2-aware when `machine` is given, else the no-cache bound; block_m × block_n are the tiles the kernel
    ran (its assumed tiles when unknown)."""
    s = spec(key)
    tiles = (block_m or s.assumed_tiles[0], block_n or s.assumed_tiles[1]) if s.assumed_tiles else (0, 0)
    return s.traffic(shape, tiles, machine, interpreter)


def extra_bytes(key: str, shape: Shape) -> int:
    """Device memory an algorithm needs beyond its inputs, by its design."""
    return spec(key).extra_bytes(shape)


# What the results file's other sections measured (kernels/source.py measured_with): the SM timeline records the
# programs of one kernel's launch; a ring run (bench.ring) runs a kernel's prefill blocks under kernels/ring.py.
SM_TIMELINE_KERNEL = "fa2"  # kernels/trace.py sm_timeline: kernels/fa2.py's flash_attention_sm_timeline
RING = "ring"               # source_files' pass of a ring run: not one of costmodel.PASSES (its blocks are prefills)
RING_SOURCE = "ring.py"


def source_files(key: str, pass_: str = "prefill", dtype: str = "") -> tuple[str, ...]:
    """The files in kernels/ whose code computed a record of this algorithm, pass and dtype (its spec's `sources`;
    () for a peer's or a spec without them). Pass RING: a ring run of ours over this kernel (bench.ring).

    Ring attention is no spec of its own (it is no algorithm a record names: it runs a spec's kernel over a process
    group), so no spec's `sources` holds kernels/ring.py. What a ring run measured is ring.py's code (the shards, the
    K/V passed round the ring, the merge by log-sum-exp) around its kernel's prefill: its build digests both, ring.py
    first. The library's dispatch between them (kernels/attention.py, runtime.py) is left out, as it is from every
    record's build: host work of microseconds beside blocks of milliseconds."""
    if pass_ == RING:
        files = source_files(key, "prefill", dtype)
        return (RING_SOURCE, *files) if files else ()
    by_what = dict(spec(key).sources)
    for what in (("fp8",) if dtype.startswith("float8") else ()) + (pass_, "*"):
        if what in by_what:
            return by_what[what]
    return ()


def named_files(key: str, pass_: str = "prefill", dtype: str = "") -> tuple[str, ...]:
    """The files the page names where a build of source_files(key, pass_, dtype) is not this copy's: the kernel's own
    file (the first; the others are helpers it shares: ptx.py, gluon_compat.py), and for a ring run kernels/ring.py
    too (a stamp says that its files changed, not which)."""
    files = source_files(key, pass_, dtype)
    return files[:2] if pass_ == RING else files[:1]


def check_tiles(key: str, block_m: object, block_n: object) -> None:
    """The tiles a record of this algorithm names, by its kernel's own rule (ValueError when they break it)."""
    rule = spec(key).tile_rule
    if rule is None:
        raise ValueError(f"{key} has no tiles of ours to name")
    rule(block_m, block_n)
