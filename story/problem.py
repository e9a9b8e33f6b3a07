"""The problem scene, N × N: the scores' memory, and where the standard kernels stop fitting the device."""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_bytes, fmt_tokens


# -- the N×N problem -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScoresMemory:
    """The problem scene's numbers: what the standard kernels hold at the talk's shape (Q, K, V, S in fp32, P, O: the
    quantity that meets the device's memory), one head's scores in the input dtype, the often-quoted 8K figure in
    fp32 and bf16, and flash's extra memory per head (it grows as O(N))."""
    per_head: int
    standard: int
    eight_k_fp32: int
    eight_k_bf16: int
    flash_per_head: int


def scores_memory(shape: Shape) -> ScoresMemory:
    """One head's scores at the shape's N, what the standard kernels hold at the whole shape, the 8K figure in fp32
    and bf16, and flash's extra memory for one head."""
    one = shape.at(batch=1)
    eight_k = one.one_head().at(seq_len=8192, kv_len=8192)
    return ScoresMemory(costmodel.scores_bytes(one.one_head()), costmodel.standard_device_bytes(shape),
                        costmodel.scores_bytes(eight_k, 4), costmodel.scores_bytes(eight_k, 2),
                        costmodel.flash_extra_bytes(one.one_head()))


def standard_wall(facts: dict | None, shape: Shape) -> dict | None:
    """The memory wall of the standard kernels at this setting on the GPU of the facts, by the one formula
    (costmodel.standard_memory_wall: Q, K, V, S in fp32, P, O), for the problem scene's figure:
    {"seq_len": the first power-of-two N that does not fit, "fits_up_to": the longest N that does, "need_bytes":
    what seq_len needs, "label": a few words for the marker, "text": the sentence}. None: device memory unknown.
    At the talk's setting on the H200 it is the 32K where the recording's standard kernels were refused before any
    launch (their S and P larger than the device): the label says what the formula says, "does not fit", and leaves
    what happened there (refused, or out of memory on another GPU) to the scenes that show the recording."""
    hbm = (facts or {}).get("hbm_bytes")
    if not hbm:
        return None
    wall = costmodel.standard_memory_wall(hbm, shape)
    setting = f"batch {shape.batch} × {shape.heads} head{'s' if shape.heads != 1 else ''}"
    return {"seq_len": wall.seq_len, "fits_up_to": wall.fits_up_to, "need_bytes": wall.need_bytes,
            "label": f"standard: does not fit from N = {fmt_tokens(wall.seq_len)}",
            "text": (f"standard attention, {setting}, head_dim {shape.head_dim}: Q, K, V, S in fp32, P and O fit "
                     f"{fmt_bytes(hbm)} up to N ≈ {fmt_tokens(wall.fits_up_to)}; at N = {fmt_tokens(wall.seq_len)} "
                     f"they need {fmt_bytes(wall.need_bytes)}")}

