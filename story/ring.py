"""The ring scene, "Past one GPU: ring attention": what a recording's ring runs (bench.ring) say at one GPU count.

A ring run is one forward of one attention layer over `seq_len` tokens cut across `world_size` GPUs: ours (each
layout: plain, zigzag; K/V passed point-to-point, kernels/ring.py) or PyTorch's context_parallel (zigzag, with its
all-to-all or all-gather rotation). Derived here, once:

- parallel efficiency: our kernel's time on one GPU over the whole sequence ÷ (K × the ring's time);
- ours ÷ PyTorch: the best context_parallel time ÷ ours, at the same GPU count, length and shape;
- exposed communication per rank: its wait for the next K/V shard ÷ (that wait + its compute), from the traced
  forward;
- the layout's balance: measured, the ranks' mean compute ÷ the most any rank computed; modelled,
  costmodel.ring_balance.

Every sentence here is true whatever the recording holds: no ring runs, one layout, no PyTorch peer, no one-GPU
time, runs that ran out of memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import RING_LAYOUTS
from fmt import fmt_bytes, fmt_ms, fmt_ratio, fmt_tokens, markdown_text
from story.records import recorded_label

OURS, PEER = "ours", "torch_cp"
RING_COMMAND = "torchrun --nproc-per-node=K -m bench.ring --out results/h200.json"
CPU_COMMAND = "python -m bench.ring --world K"
WALL_WORLDS = (1, 2, 4, 8)  # the GPU counts whose memory wall the length view draws (modelled)
ROTATE_WORDS = {"p2p": "point-to-point", "alltoall": "all-to-all", "allgather": "all-gather"}
LAYOUT_WORDS = {"plain": "plain: GPU r keeps chunk r of K", "zigzag": "zigzag: GPU r keeps chunks r and 2K−1−r of 2K"}
ROWS_NOTE = ("Time: the median of the timed rounds, one forward over all GPUs. Efficiency: our kernel on one GPU over "
             "the whole sequence ÷ (K × the ring's time). PyTorch ÷ ours: context_parallel's best rotation's time ÷ "
             "ours. Exposed wait: the most any GPU waited for K/V its compute did not hide, ÷ its wait and compute, "
             "in one traced forward.")
INTRO = ("Past one GPU the sequence is cut across K GPUs. Each keeps its chunks of Q and passes its chunk of K and V "
         "to the next GPU round a ring, one hop per step, while it computes on the chunk it holds; after K steps "
         "every query has met every key, and the partial outputs merge by their log-sum-exps, as the tiles do inside "
         "one kernel.")


# -- which runs -----------------------------------------------------------------------------------------------------

def ok(run: dict) -> bool:
    return run["status"] == "ok" and run.get("time_ms") is not None


def shape_key(run: dict) -> tuple:
    """A run's attention apart from its length and GPU count: (batch, heads, head_dim, dtype, causal)."""
    return run["batch"], run["heads"], run["head_dim"], run["dtype"], run["causal"]


def ring_worlds(runs: list[dict]) -> tuple[int, ...]:
    """The GPU counts with a finished run."""
    return tuple(sorted({r["world_size"] for r in runs if ok(r)}))


def pick_world(runs: list[dict], asked: int) -> int | None:
    """The GPU count the link asks for where a run finished at it, else the largest recorded (None: no run finished)."""
    worlds = ring_worlds(runs)
    if not worlds:
        return None
    return asked if asked in worlds else worlds[-1]


def pick_shape(runs: list[dict], world: int) -> tuple | None:
    """The attention shape with the most finished runs at `world` GPUs (causal first, then more heads on a tie)."""
    counts: dict[tuple, int] = {}
    for r in runs:
        if r["world_size"] == world and ok(r):
            counts[shape_key(r)] = counts.get(shape_key(r), 0) + 1
    if not counts:
        return None
    return max(counts, key=lambda key: (counts[key], key[4], key[1] * key[0], key[2]))


def runs_at(runs: list[dict], world: int, shape: tuple, seq_len: int | None = None) -> list[dict]:
    """Every run (finished or not) at `world` GPUs and `shape`, at `seq_len` if given, ours first."""
    here = [r for r in runs if r["world_size"] == world and shape_key(r) == shape
            and (seq_len is None or r["seq_len"] == seq_len)]
    return sorted(here, key=lambda r: (r["seq_len"], r["impl"] != OURS, r["layout"], r["rotate"]))


def ring_lengths(runs: list[dict], world: int, shape: tuple) -> tuple[int, ...]:
    return tuple(sorted({r["seq_len"] for r in runs_at(runs, world, shape) if ok(r)}))


def traced(runs: list[dict], world: int, shape: tuple) -> tuple[int | None, dict[str, dict]]:
    """The longest length at which ours finished with a trace, and there ours' traced run per layout (in
    RING_LAYOUTS' order)."""
    lengths = [r["seq_len"] for r in runs_at(runs, world, shape) if r["impl"] == OURS and ok(r) and r.get("steps")]
    if not lengths:
        return None, {}
    seq_len = max(lengths)
    found = {r["layout"]: r for r in runs_at(runs, world, shape, seq_len) if r["impl"] == OURS and ok(r)
             and r.get("steps")}
    return seq_len, {layout: found[layout] for layout in RING_LAYOUTS if layout in found}


# -- derived numbers ------------------------------------------------------------------------------------------------

def efficiency(run: dict) -> float | None:
    """One GPU's time over the whole sequence ÷ (K × the ring's time): 1.0 is a perfect K-fold speedup."""
    if not ok(run) or not run.get("one_gpu_ms"):
        return None
    return run["one_gpu_ms"] / (run["world_size"] * run["time_ms"])


def best_peer(runs: list[dict], run: dict) -> dict | None:
    """PyTorch's fastest finished context_parallel run at `run`'s GPU count, length and shape."""
    peers = [r for r in runs if r["impl"] == PEER and ok(r) and r["world_size"] == run["world_size"]
             and r["seq_len"] == run["seq_len"] and shape_key(r) == shape_key(run)]
    return min(peers, key=lambda r: r["time_ms"], default=None)


def vs_peer(runs: list[dict], run: dict) -> float | None:
    """PyTorch's best time ÷ ours (above 1: ours is faster)."""
    peer = best_peer(runs, run)
    if run["impl"] != OURS or peer is None or not ok(run):
        return None
    return peer["time_ms"] / run["time_ms"]


def comm_shares(run: dict) -> list[float] | None:
    """Each rank's exposed wait for K/V ÷ (its wait + its compute), from the traced forward (None: no trace)."""
    waits, computes = run.get("rank_wait_ms"), run.get("rank_compute_ms")
    if not waits or not computes:
        return None
    return [w / (w + c) if w + c > 0 else 0.0 for w, c in zip(waits, computes)]


def measured_balance(run: dict) -> float | None:
    """The ranks' mean compute ÷ the most any rank computed (1.0: even), from the traced forward."""
    computes = run.get("rank_compute_ms")
    if not computes or not max(computes):
        return None
    return sum(computes) / len(computes) / max(computes)


def model_balance(run: dict) -> float:
    return costmodel.ring_balance(run["world_size"], run["layout"], run["causal"])


def best_ours(runs: list[dict], world: int, shape: tuple, seq_len: int) -> dict | None:
    """Our fastest finished layout at this GPU count, length and shape."""
    mine = [r for r in runs_at(runs, world, shape, seq_len) if r["impl"] == OURS and ok(r)]
    return min(mine, key=lambda r: r["time_ms"], default=None)


def one_gpu_ms(runs: list[dict], shape: tuple, seq_len: int, world: int | None = None) -> float | None:
    """Our kernel on one GPU over the whole `seq_len` (timed beside the ring; `world`'s runs first)."""
    found = [r for r in runs if r["impl"] == OURS and shape_key(r) == shape and r["seq_len"] == seq_len
             and r.get("one_gpu_ms")]
    found.sort(key=lambda r: r["world_size"] != world)
    return found[0]["one_gpu_ms"] if found else None


@dataclass(frozen=True)
class RingRow:
    """One run as the scene lists it."""
    label: str
    impl: str
    layout: str
    rotate: str
    world: int
    seq_len: int
    time_ms: float | None
    efficiency: float | None
    vs_peer: float | None
    comm_share: float | None   # the most exposed of its ranks
    status: str
    why: str = ""

    @property
    def time_words(self) -> str:
        if self.time_ms is not None:
            return fmt_ms(self.time_ms)
        return "out of memory" if self.status == "oom" else "failed"


def run_label(run: dict) -> str:
    if run["impl"] == OURS:
        return f"ours, {run['layout']}"
    return f"PyTorch context_parallel, {ROTATE_WORDS.get(run['rotate'], run['rotate'])}"


def ring_rows(runs: list[dict], world: int, shape: tuple, seq_len: int) -> list[RingRow]:
    rows = []
    for r in runs_at(runs, world, shape, seq_len):
        shares = comm_shares(r) if ok(r) else None
        rows.append(RingRow(run_label(r), r["impl"], r["layout"], r["rotate"], world, seq_len,
                            r["time_ms"] if ok(r) else None, efficiency(r), vs_peer(runs, r),
                            max(shares) if shares else None, r["status"], r.get("message") or ""))
    return rows


# -- the words -------------------------------------------------------------------------------------------------------

def shape_words(shape: tuple) -> str:
    batch, heads, head_dim, dtype, causal = shape
    return f"batch {batch} × {heads} heads, head_dim {head_dim}, {dtype}{', causal' if causal else ''}"


def source_words(runs: list[dict], gpu: str) -> str:
    """Where and when the runs were timed: on GPUs ("recorded on NVIDIA H200, 2026-12-04": their own days; no day
    where they say none), or in Triton's CPU interpreter (then only the shape of things holds)."""
    if runs and all(r["timing_kind"] == "interpreter" for r in runs):
        return ("timed in Triton's CPU interpreter at a small length (CPU processes, gloo): the plan and the "
                "balance hold, the times are not a GPU's")
    return recorded_label(markdown_text(gpu), runs) if gpu else "recorded"


def rate_words(bytes_per_s: float) -> str:
    """A hop's rate in decimal units, as links are quoted: 357 GB/s; a CPU run's 31 MB/s."""
    value, unit = (bytes_per_s / 1e9, "GB/s") if bytes_per_s >= 1e9 else (bytes_per_s / 1e6, "MB/s")
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def share_words(share: float) -> str:
    """A small share as a per cent that never reads 0.0 %."""
    return "under 0.1%" if share < 0.001 else f"{share:.1%}"


def gpus(world: int) -> str:
    return f"{world} GPU{'s' if world != 1 else ''}"


def sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def failure(run: dict) -> str:
    word = "out of memory" if run["status"] == "oom" else "failed"  # (RingRow.time_words says it alike)
    return f"{run_label(run)}: {word}"


def no_runs_line(has_recording: bool) -> str:
    where = "This recording has no ring runs" if has_recording else "There is no recording to show"
    return (f"{where}: ring attention runs on several GPUs at once, so it is recorded, not measured on each visit. "
            f"`{RING_COMMAND}` records it on K GPUs into the results file (`{CPU_COMMAND}` runs the same on the CPU, "
            f"in Triton's interpreter at a small length).")


def layout_sentence(runs: list[dict], world: int, shape: tuple, seq_len: int) -> str:
    """What zigzag buys over plain at this length, measured and by the cost model."""
    here = {r["layout"]: r for r in runs_at(runs, world, shape, seq_len) if r["impl"] == OURS}
    causal = shape[4]
    if not causal:
        start = (f"Without a causal mask every block is full: both layouts give each GPU the same work (the cost "
                 f"model's balance {costmodel.ring_balance(world, 'plain', False):.0%}).")
    else:
        start = (f"Causal attention gives later queries more keys. Cut plainly, GPU 0 has only its own diagonal block "
                 f"while GPU {world - 1} computes at every step (the cost model's balance on {gpus(world)}: "
                 f"{costmodel.ring_balance(world, 'plain', True):.0%}); zigzag gives every GPU an early and a late "
                 f"chunk ({costmodel.ring_balance(world, 'zigzag', True):.0%}).")
    done = {layout: r for layout, r in here.items() if ok(r)}
    parts = [start]
    if len(done) == 2:
        plain, zigzag = done["plain"], done["zigzag"]
        ratio = plain["time_ms"] / zigzag["time_ms"]
        which = (f"zigzag {fmt_ratio(ratio)} faster" if ratio >= 1.03 else
                 f"plain {fmt_ratio(1 / ratio)} faster" if ratio <= 1 / 1.03 else "level")
        parts.append(f"Measured at {fmt_tokens(seq_len)} tokens on {gpus(world)}: plain {fmt_ms(plain['time_ms'])}, "
                     f"zigzag {fmt_ms(zigzag['time_ms'])}, {which}.")
        spread = [(layout, measured_balance(r)) for layout, r in done.items() if measured_balance(r) is not None]
        if spread:
            parts.append("The GPUs' measured compute, mean ÷ most: " + ", ".join(
                f"{layout} {value:.0%}" for layout, value in spread) + ".")
    elif len(done) == 1:
        (layout, run), = done.items()
        parts.append(f"Only the {layout} layout finished at {fmt_tokens(seq_len)} tokens on {gpus(world)}: "
                     f"{fmt_ms(run['time_ms'])}.")
    else:
        parts.append(f"Neither layout finished at {fmt_tokens(seq_len)} tokens on {gpus(world)}.")
    failed = [failure(r) for r in here.values() if not ok(r)]
    if failed:
        parts.append(sentence_case("; ".join(failed)) + ".")
    return " ".join(parts)


def handoff_sentence(run: dict) -> str:
    """The hop of a K/V shard against the compute it hides behind, and the wait that was left (one run of ours)."""
    world, steps = run["world_size"], run.get("steps") or []
    if world == 1:
        return "On one GPU there is no ring: nothing is handed on."
    shard = costmodel.ring_kv_bytes_per_step(run["seq_len"], world, run["batch"], run["heads"], run["head_dim"],
                                             costmodel.DTYPE_BYTES[run["dtype"]])
    parts = []
    # the steps that hand a shard on (all but the last) and compute: what the hop has to hide behind
    covering = [s["compute_ms"] for s in steps if s["step"] < world - 1 and s["blocks"]]
    hop = run.get("kv_step_ms")
    if hop:
        parts.append(f"Handing one GPU's K/V shard ({fmt_bytes(shard)}) to the next alone takes {fmt_ms(hop)} "
                     f"({rate_words(shard / hop * 1e3)}).")
        if covering:
            shortest = min(covering)
            if shortest >= hop:
                parts.append(f"The shortest step that hands one on computes for {fmt_ms(shortest)}, "
                             f"{fmt_ratio(shortest / hop)} as long: the hop hides behind the compute.")
            else:
                parts.append(f"The shortest step that hands one on computes for only {fmt_ms(shortest)}: "
                             f"the hop cannot hide behind it.")
    else:
        parts.append(f"Each step hands one GPU's K/V shard ({fmt_bytes(shard)}) to the next; its hop alone was not "
                     f"timed.")
    shares = comm_shares(run)
    if shares:
        worst = max(range(len(shares)), key=shares.__getitem__)
        said = (f"under 0.1% of every GPU's time" if shares[worst] < 0.001 else
                f"at most {share_words(shares[worst])} of a GPU's time (GPU {worst}: "
                f"{fmt_ms(run['rank_wait_ms'][worst])})")
        parts.append(f"Measured in one traced forward ({run['layout']}), the wait the compute did not hide is {said}.")
    return " ".join(parts)


def layer_sentence(runs: list[dict], world: int, shape: tuple) -> str:
    """One attention layer's forward at the longest length ours finished on `world` GPUs: one GPU, ours on the ring,
    PyTorch's context_parallel."""
    lengths = [r["seq_len"] for r in runs_at(runs, world, shape) if r["impl"] == OURS and ok(r)]
    if not lengths:
        peers = [r for r in runs_at(runs, world, shape) if r["impl"] == PEER and ok(r)]
        if not peers:
            return f"No run finished on {gpus(world)} at this shape."
        longest = max(peers, key=lambda r: (r["seq_len"], -r["time_ms"]))
        return (f"Ours did not finish on {gpus(world)}; PyTorch's context_parallel took "
                f"{fmt_ms(best_peer(runs, longest)['time_ms'])} at {fmt_tokens(longest['seq_len'])} tokens.")
    seq_len = max(lengths)
    ours = best_ours(runs, world, shape, seq_len)
    one = one_gpu_ms(runs, shape, seq_len, world)
    parts = [f"One attention layer's forward over {fmt_tokens(seq_len)} tokens ({shape_words(shape)}):"]
    pieces = [f"one GPU {fmt_ms(one)}" if one else "one GPU not timed",
              f"ours on {gpus(world)} {fmt_ms(ours['time_ms'])} ({ours['layout']})"]
    eff = efficiency(ours)
    peer = best_peer(runs, ours)
    if peer:
        pieces.append(f"PyTorch's context_parallel {fmt_ms(peer['time_ms'])} "
                      f"({ROTATE_WORDS.get(peer['rotate'], peer['rotate'])})")
    parts.append(", ".join(pieces) + ".")
    if eff is not None:
        speedup = one / ours["time_ms"]
        how = f"{speedup:.2f}× faster than" if speedup >= 1 else f"{1 / speedup:.2f}× slower than"
        parts.append(f"The ring is {how} one GPU: {eff:.0%} parallel efficiency (one GPU ÷ ({world} × the ring)).")
    if peer:
        ratio = peer["time_ms"] / ours["time_ms"]
        verdict = "ours faster" if ratio >= 1.03 else "PyTorch faster" if ratio <= 1 / 1.03 else "level"
        parts.append(f"PyTorch's time ÷ ours: {ratio:.2f} ({verdict}).")
    else:
        parts.append(f"PyTorch's context_parallel was not timed at {fmt_tokens(seq_len)} tokens on {gpus(world)}.")
    return " ".join(parts)


@dataclass(frozen=True)
class Wall:
    """The longest sequence whose ring forward fits one GPU's memory on `world` GPUs, by the cost model."""
    world: int
    seq_len: int


def memory_walls(shape: tuple, hbm_bytes: int | None, worlds: tuple[int, ...] = WALL_WORLDS) -> list[Wall]:
    if not hbm_bytes:
        return []
    batch, heads, head_dim, dtype, _ = shape
    return [Wall(w, costmodel.ring_longest(w, hbm_bytes, batch, heads, head_dim, costmodel.DTYPE_BYTES[dtype]))
            for w in sorted(set(worlds))]


def memory_sentence(walls: list[Wall], hbm_bytes: int | None, gpu: str, longest_timed: int | None = None) -> str:
    """The walls in words; `longest_timed`: the longest length a run finished at (the wall's distance from it)."""
    if not walls:
        return "The memory wall needs the GPU's memory size, which this recording lacks."
    one = next((w for w in walls if w.world == 1), None)
    most = walls[-1]
    parts = [f"By the cost model (dashed), {markdown_text(gpu) or 'this GPU'}'s {fmt_bytes(hbm_bytes)} hold"]
    if one:
        parts.append(f"the Q, K, V and O of {fmt_tokens(one.seq_len)} tokens at this shape on one GPU;")
    parts.append(f"{gpus(most.world)} in a ring hold {fmt_tokens(most.seq_len)} (each a 1/{most.world} share, and the "
                 f"K/V in flight and an fp32 output).")
    two = next((w for w in walls if w.world == 2), None)
    if one and two and two.seq_len < 1.1 * one.seq_len:
        parts.append(f"Two GPUs hold about what one does ({fmt_tokens(two.seq_len)}): the fp32 output and the K/V in "
                     f"flight take what halving Q, K, V and O frees.")
    if one and longest_timed and one.seq_len >= 2 * longest_timed:
        parts.append(f"One GPU's wall lies {one.seq_len / longest_timed:.0f}× past the longest length timed "
                     f"({fmt_tokens(longest_timed)}): what the ring buys first is time.")
    return " ".join(parts)


def length_caption(runs: list[dict], world: int, shape: tuple) -> str:
    """What the length chart leaves to words: the runs that did not finish."""
    failed = [f"{failure(r)} at {fmt_tokens(r['seq_len'])} on {gpus(r['world_size'])}"
              for r in runs if not ok(r) and shape_key(r) == shape]
    return ("Not drawn: " + "; ".join(failed) + ".") if failed else ""


# -- what the figures get -----------------------------------------------------------------------------------------

def animation_runs(chosen: dict[str, dict]) -> list[dict]:
    """The traced runs as the ring animation draws them (viz.ring_steps_figure)."""
    return [{"layout": layout, "world_size": r["world_size"], "seq_len": r["seq_len"], "time_ms": r["time_ms"],
             "steps": r["steps"]} for layout, r in chosen.items()]


def balance_bars(chosen: dict[str, dict]) -> list[dict]:
    """Each traced layout's compute per GPU, with its measured and modelled balance (viz.ring_balance_figure)."""
    return [{"layout": layout, "rank_compute_ms": r["rank_compute_ms"], "rank_wait_ms": r.get("rank_wait_ms"),
             "measured": measured_balance(r), "model": model_balance(r)}
            for layout, r in chosen.items() if r.get("rank_compute_ms")]


def length_series(runs: list[dict], shape: tuple) -> list[dict]:
    """Measured points over the length (viz.ring_length_figure): our kernel on one GPU, and for each GPU count ours
    (the faster layout at each length) and PyTorch's context_parallel (its faster rotation)."""
    here = [r for r in runs if shape_key(r) == shape and ok(r)]
    series = []
    lengths = sorted({r["seq_len"] for r in here})
    one = [(n, one_gpu_ms(here, shape, n)) for n in lengths]
    if any(ms for _, ms in one):
        series.append({"kind": "one", "world": 1, "label": "ours on one GPU",
                       "points": [{"seq_len": n, "time_ms": ms, "note": "our kernel over the whole sequence"}
                                  for n, ms in one if ms]})
    for world in sorted({r["world_size"] for r in here}):
        for impl, label in ((OURS, f"ours, ring on {gpus(world)}"), (PEER, f"PyTorch context_parallel, {gpus(world)}")):
            points = []
            for n in lengths:
                at = [r for r in here if r["impl"] == impl and r["world_size"] == world and r["seq_len"] == n]
                if at:
                    best = min(at, key=lambda r: r["time_ms"])
                    how = best["layout"] if impl == OURS else ROTATE_WORDS.get(best["rotate"], best["rotate"])
                    points.append({"seq_len": n, "time_ms": best["time_ms"], "note": how})
            if points:
                series.append({"kind": impl, "world": world, "label": label, "points": points})
    return series
