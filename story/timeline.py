"""The timeline scene, the kernel's programs on the SMs: what a timeline measures (waves, occupancy, busy SMs), its caption,
and the residency the L2-aware model takes from it."""
from __future__ import annotations

import numpy as np

from costmodel import Shape
from fmt import fmt_tokens


def residency(timelines: list[dict], head_dim: int, causal: bool, block_m: int | None = None) -> int | None:
    """Programs of the flash kernel resident on one SM at once, as an SM timeline of its kernel measured them
    (timeline_stats' max_per_sm): from the timelines of this head_dim and mask (and Q block, when given), the
    most any of them reached; None where no timeline is of this kernel (the model then assumes 1 per SM)."""
    reached = [timeline_stats(t)["max_per_sm"] for t in timelines or ()
               if t["head_dim"] == head_dim and bool(t["causal"]) == bool(causal)
               and (block_m is None or t["block_m"] == block_m)]
    return max(reached) if reached and max(reached) > 0 else None


# -- the SM timeline --------------------------------------------------------------------------------------

def timeline_stats(timeline: dict) -> dict[str, float]:
    """programs; max_per_sm: the most programs resident on one SM at once (the occupancy the kernel reached);
    waves: programs / (SMs × max_per_sm), the bands the picture shows; makespan_us (first start to last end,
    µs); utilization: time SMs were busy (at least one program resident) / (SMs × makespan).

    Exact integer arithmetic per SM (Python ints where a sum could pass 2⁶³): any timeline the results file
    admits gives numbers in range."""
    sm_id, start, end = (np.asarray(timeline[key], dtype=np.int64) for key in ("sm_id", "t_start_ns", "t_end_ns"))
    sm_count = int(timeline["sm_count"])
    if sm_id.size == 0:
        return {"programs": 0, "waves": 0.0, "makespan_us": 0.0, "utilization": 0.0, "max_per_sm": 0}
    origin = int(start.min())
    makespan = int(end.max()) - origin
    order = np.lexsort((start, sm_id))  # by SM, then by start
    sm_sorted, lo, hi = sm_id[order], start[order] - origin, end[order] - origin
    bounds = np.flatnonzero(np.diff(sm_sorted)) + 1
    busy, max_per_sm = 0, 0
    for group_lo, group_hi in zip(np.split(lo, bounds), np.split(hi, bounds)):
        reached = np.concatenate(([group_lo[0]], np.maximum.accumulate(group_hi)[:-1]))  # furthest end before
        busy += int(np.maximum(0, group_hi - np.maximum(group_lo, reached)).sum(dtype=object))
        # programs resident at once: +1 at each start, −1 at each end (ends first at a tie), running sum
        events = np.concatenate([group_lo, group_hi])
        steps = np.concatenate([np.ones(group_lo.size, dtype=np.int64), -np.ones(group_lo.size, dtype=np.int64)])
        max_per_sm = max(max_per_sm, int(np.cumsum(steps[np.lexsort((steps, events))]).max()))
    return {
        "max_per_sm": max_per_sm,
        "programs": int(sm_id.size),
        "waves": sm_id.size / (sm_count * max(max_per_sm, 1)),
        "makespan_us": makespan / 1e3,
        "utilization": min(busy / (sm_count * makespan), 1.0) if makespan else 0.0,
    }


# -- the SM timeline's caption: the talk's setting, or plainly another ---------------------------------------

def timeline_caption(timeline: dict, shape: Shape, live: bool, days: str = "") -> str:
    """Where the timeline comes from (recorded: on which days, story.recorded_days) and its setting, saying plainly
    when it is not the talk's shape."""
    seq_len, batch, heads, head_dim, causal = shape.seq_len, shape.batch, shape.heads, shape.head_dim, shape.causal
    where = "Measured now" if live else " ".join(filter(None, ("Recorded", days)))
    shown = (f"{fmt_tokens(timeline['seq_len'])} tokens, batch {timeline['batch']} × {timeline['heads']} heads, "
             f"head_dim {timeline['head_dim']}, block_m {timeline['block_m']}{', causal' if timeline['causal'] else ''}")
    talk = (seq_len, batch, heads, head_dim, causal)
    if (timeline["seq_len"], timeline["batch"], timeline["heads"], timeline["head_dim"],
            bool(timeline["causal"])) == talk:
        return f"{where} at the talk's setting: {shown}."
    return (f"{where}: {shown}: not the talk's setting ({fmt_tokens(seq_len)} tokens, batch {batch} × {heads} heads, "
            f"head_dim {head_dim}{', causal' if causal else ''}); the recording holds timelines of this one only.")
