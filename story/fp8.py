"""FA-3's third idea, FP8: the numbers and sentences of the ablation scene's FP8 view. The presenter picks the planted
outliers (none, the FA-3 paper's, or harsher ones) and whether Q and K are rotated; the view shows each variant's
error against float64 beside the speed it gained over bf16 — measured: live on a Hopper GPU, else the recording's
FP8 records (bench --fp8), else on the CPU the emulation of e4m3 (errors only: the CPU times nothing).

A point: {"name", "scaling" ("tensor" | "head" | None for bf16), "rotation" (bool), "rel_rms" (O against float64:
RMS ÷ the reference's RMS), "speedup" (bf16 time ÷ this time, from one interleaved run; None: not timed)}.
"""
from __future__ import annotations

# outlier level → how 0.1 % of the entries are planted (None: random inputs): ("+", std) adds N(0, std²) to them (the
# FA-3 paper's numerical-error test, its Table 3; kernels.fp8.add_outliers), ("×", low, high) multiplies them by a
# factor in [low, high] (kernels.fp8.plant_outliers: up to ×100 of a normal entry, harsher than the paper's). The
# two the recording holds are kernels.fp8's PAPER_OUTLIERS and PLANTED_OUTLIERS (story imports no torch; a test holds
# them equal).
FA3_LEVEL = "+N(0, 10²): FA-3's test"
OUTLIER_LEVELS: dict[str, tuple | None] = {
    "none": None,
    FA3_LEVEL: ("+", 10.0),
    "×10–100": ("×", 10.0, 100.0),
    "×100–1000": ("×", 100.0, 1000.0),
}
RECORDED_LEVELS = ("none", FA3_LEVEL, "×10–100")  # the inputs bench --fp8 records errors on (bench.fp8.measure_errors)
VARIANTS = (("tensor", False), ("tensor", True), ("head", False), ("head", True))
RECORDED_SHAPE = (8192, 128)  # the records the view reads: B2 H16, N 8K, head_dim 128, not causal
SHAPE_TEXT = {"live": "errors at B1 H2 N4K D128, speed at B2 H16 N8K D128",
              "recorded": "B2 H16 N8K D128 (errors at B1 H2 of it)",
              "emulated": "B1 H2 N512 D128"}
EMULATED_LABEL = "CPU emulation of e4m3"
BF16 = "bf16"
RELATIVE_RMS = "relative RMS error against float64"
BENCH_COMMAND = "python -m bench --fp8 --out results/h200.json --merge-into"
PAPER_RATIO = 2.6  # FA-3 paper, Table 3: per-tensor FP8's RMSE ÷ FA-3's (per-block scales and the rotation), on its
#                    outliers: 2.4e-2 ÷ 9.1e-3


def default_level(records) -> str:
    """The level the view opens at: FA-3's test, unless the recording's FP8 records (records; None: live or no
    recording, where every level is measured or emulated) predate its errors: then ×10–100, which they hold."""
    if records and not any(r.get(level_key(FA3_LEVEL)) is not None for r in records):
        return "×10–100"
    return FA3_LEVEL


def level_key(level: str) -> str:
    """The error field a level's inputs fill (records and measure_errors): random, the paper's outliers, or ×."""
    spec = OUTLIER_LEVELS[level]
    return "err_rel_rms" if spec is None else "paper_outlier_err_rel_rms" if spec[0] == "+" else "outlier_err_rel_rms"


def inputs_text(level: str) -> str:
    spec = OUTLIER_LEVELS[level]
    if spec is None:
        return "random inputs"
    if spec[0] == "+":
        return f"the FA-3 paper's outliers (+N(0, {spec[1]:g}²) on 0.1 %)"
    return f"planted outliers {level} on 0.1 %"


def variant_name(scaling: str | None, rotation: bool) -> str:
    if scaling is None:
        return BF16
    return f"FP8 per-{scaling}{' + rotation' if rotation else ''}"


def recorded_points(records, level: str, seq_len: int = RECORDED_SHAPE[0],
                    head_dim: int = RECORDED_SHAPE[1]) -> list[dict]:
    """The points of the recording's FP8 records at (seq_len, head_dim), not causal, at a recorded outlier level
    (RECORDED_LEVELS; another gives []): each variant, then bf16 from the same records."""
    if level not in RECORDED_LEVELS:
        return []
    key = level_key(level)
    chosen = [r for r in records if r["seq_len"] == seq_len and r["head_dim"] == head_dim and not r["causal"]
              and r["status"] == "ok" and r.get(key) is not None]
    points = [{"name": variant_name(r["scaling"], r["rotation"]), "scaling": r["scaling"], "rotation": r["rotation"],
               "rel_rms": r[key], "speedup": r["bf16_time_ms"] / r["time_ms"] if r.get("bf16_time_ms") else None}
              for r in chosen]
    points.sort(key=lambda p: VARIANTS.index((p["scaling"], p["rotation"])))
    bf16 = [r.get("bf16_" + key) for r in chosen if r.get("bf16_" + key) is not None]
    if bf16:
        points.append({"name": BF16, "scaling": None, "rotation": False, "rel_rms": bf16[0], "speedup": 1.0})
    return points


def point(points: list[dict], scaling: str | None, rotation: bool) -> dict | None:
    return next((p for p in points if p["scaling"] == scaling and p["rotation"] == rotation), None)


def _lower_or_higher(ratio: float) -> str:
    """Per-tensor's error ÷ the rotated one's, in words: "2.3× lower", "1.1× higher" (never "0.9× higher"), "about
    the same" where the ratio rounds to 1.0."""
    if f"{ratio:.1f}" == "1.0":
        return "about the same"
    return f"{ratio:.1f}× lower" if ratio > 1 else f"{1 / ratio:.1f}× higher"


def rotation_sentence(points: list[dict], level: str, rotation: bool) -> str:
    """What the rotation did at this level, per-tensor (the paper's comparison), against bf16, and the speed."""
    plain, turned, bf16 = point(points, "tensor", False), point(points, "tensor", True), point(points, None, False)
    if plain is None or turned is None:
        return "No FP8 numbers at this outlier level."
    ratio = plain["rel_rms"] / turned["rel_rms"] if turned["rel_rms"] else float("inf")
    spec = OUTLIER_LEVELS[level]
    paper = f" (the FA-3 paper: {PAPER_RATIO}×, with per-block scales)" if spec and spec[0] == "+" else ""
    words = (f"On {inputs_text(level)}, per-tensor FP8's {RELATIVE_RMS} is {plain['rel_rms']:.3f}, with Q and K "
             f"rotated {turned['rel_rms']:.3f}: {_lower_or_higher(ratio)}{paper}")
    if bf16 is not None:
        words += f"; bf16's is {bf16['rel_rms']:.4f}"
    shown = turned if rotation else plain
    if shown["speedup"] is not None:
        words += f". {shown['name']} ran at {shown['speedup']:.2f}× bf16's speed"
    else:
        words += ". No speed: only a GPU times the kernel"
    return words + "."


def no_points_sentence(level: str, problem: str = "", has_records: bool = False) -> str:
    """Why the recording shows nothing at this level: not a level it records, records older than the level's errors
    (has_records: the recording holds FP8 records), or no FP8 records at all."""
    if level not in RECORDED_LEVELS:
        return (f"`bench --fp8` records errors at {', '.join(RECORDED_LEVELS)}; {level} is measured live on a "
                f"Hopper GPU or emulated on the CPU.")
    if has_records:
        return "The recording predates these errors (`python -m bench --fp8` adds them)."
    why = f" ({problem})" if problem else ""
    return f"No FP8 records{why}: `python -m bench --fp8` on a Hopper GPU."
