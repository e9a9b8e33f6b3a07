"""The roofline scene: one point per kernel that ran, where it sits against the measured roofs, in words."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_bytes
from kernels import specs
from story.records import OUT_OF_MEMORY, counted_bytes, failure_text, oom_word


NAIVE_KERNEL_LABELS = ("standard: S = QKᵀ", "standard: softmax", "standard: O = PV")


@dataclass(frozen=True)
class RoofPoint:
    label: str
    algorithm: str
    flops: float
    hbm_bytes: int
    time_ms: float
    counted: bool  # bytes from hardware counters (else the cost model)

    @property
    def intensity(self) -> float:
        return self.flops / self.hbm_bytes

    @property
    def tflops(self) -> float:
        return self.flops / (self.time_ms * 1e-3) / 1e12

    def as_dict(self) -> dict:
        return {"label": self.label, "algorithm": self.algorithm, "intensity": self.intensity,
                "tflops": self.tflops, "counted": self.counted}


def roofline_points(records: list[dict], names: dict[str, str] | None = None) -> list[RoofPoint]:
    """One point per kernel that ran at the setting: our flash, SDPA's two, and each of the standard
    attention's three kernels when their counts and times were recorded (else standard as a whole).
    records: "ok" GPU records of one setting (same N, batch, heads, head_dim, dtype, causal); names: each
    algorithm's short name (viz.theme.short_labels; the algorithm's key where not given)."""
    points = []
    on_the_roofline = specs.keys(roofline=True)  # read now: a spec added later has its point
    for record in records:
        if record["algorithm"] not in on_the_roofline or record["status"] != "ok" or not record.get("tflops"):
            continue
        shape = Shape.of_record(record)
        kernels = record.get("kernels") or []
        if record["algorithm"] == "naive" and len(kernels) == 3 and all(k.get("time_ms") for k in kernels):
            parts = costmodel.naive_traffic(shape)
            for label, part, kernel in zip(NAIVE_KERNEL_LABELS, parts, kernels):
                points.append(RoofPoint(label, "naive", part.flops,
                                        kernel["dram_read_bytes"] + kernel["dram_write_bytes"], kernel["time_ms"],
                                        True))
            continue
        counted = counted_bytes(record)
        flops = costmodel.attention_flops(shape)
        points.append(RoofPoint((names or {}).get(record["algorithm"], record["algorithm"]), record["algorithm"], flops,
                                counted if counted else record["bytes_moved"], record["time_ms"], bool(counted)))
    return [point for point in points if point.hbm_bytes > 0 and point.time_ms > 0]


def _size_range(sizes: tuple[int, ...], write: Callable[[int], str]) -> str:
    """"1–4 GiB", "4096³–16384³": the smallest and largest of a roof's measured sizes."""
    lo, hi = write(min(sizes)), write(max(sizes))
    if lo == hi:
        return lo
    lo_number, _, lo_unit = lo.partition(" ")
    return f"{lo_number}–{hi}" if lo_unit and lo_unit == hi.partition(" ")[2] else f"{lo}–{hi}"


def _cube(n: int) -> str:
    return f"{n}³"


def _roof_sizes(facts: dict | None, copy_sizes_bytes: tuple[int, ...] | None,
                matmul_sizes: tuple[int, ...] | None) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    facts = facts or {}
    return (tuple(facts.get("copy_sizes_bytes") or copy_sizes_bytes or ()) or None,
            tuple(facts.get("matmul_sizes") or matmul_sizes or ()) or None)


def roof_names(copy_sizes_bytes: tuple[int, ...] | None = None,
               matmul_sizes: tuple[int, ...] | None = None) -> dict[str, str]:
    """What each measured roof is, in a few words: {"memory": "copy of 1–4 GiB", "compute": "best of
    4096³–16384³ bf16 matmuls"} (bench/device.py COPY_SIZES_BYTES, MATMUL_SIZES); without the sizes, "sizes
    not recorded"."""
    copy = (f"copy of {_size_range(copy_sizes_bytes, lambda n: fmt_bytes(n, 0))}" if copy_sizes_bytes
            else "a device-to-device copy, sizes not recorded")
    if matmul_sizes and len(set(matmul_sizes)) > 1:
        matmul = f"best of {_size_range(matmul_sizes, _cube)} bf16 matmuls"
    else:
        matmul = f"a {_cube(matmul_sizes[0])} bf16 matmul" if matmul_sizes else "a bf16 matmul, sizes not recorded"
    return {"memory": copy, "compute": matmul}


def datasheet_of(facts: dict | None) -> costmodel.Datasheet | None:
    """The datasheet of the GPU the facts describe (by its name), None for a GPU not listed."""
    return costmodel.datasheet((facts or {}).get("name"))


def roofline_verdicts(points: list[RoofPoint], peak_tflops: float, bandwidth_gbps: float,
                      copy_sizes_bytes: tuple[int, ...] | None = None,
                      matmul_sizes: tuple[int, ...] | None = None,
                      sheet: costmodel.Datasheet | None = None) -> list[str]:
    """Each point in words: which roof bounds it and how close it runs to that roof, never past 100%: a point
    above its measured roof says so, and that the roof (how it was measured: roof_names) is a lower bound.
    sheet: the GPU's datasheet, whose peak the share is also said of (the papers' percentages are of it)."""
    ridge = costmodel.ridge_point(peak_tflops, bandwidth_gbps)
    names = roof_names(copy_sizes_bytes, matmul_sizes)
    lines = []
    for point in points:
        roof = costmodel.attainable_tflops(point.intensity, peak_tflops, bandwidth_gbps)
        memory = point.intensity < ridge
        bound = "memory-bound (left of the ridge)" if memory else "compute-bound (right of the ridge)"
        share = point.tflops / roof
        if share > 1:
            where = (f"above the measured roof: the roof ({names['memory' if memory else 'compute']}) is a lower "
                     f"bound of what the GPU can do")
        else:
            where = f"at {share:.0%} of its measured roof"
        if sheet:
            spec = (point.tflops / sheet.bf16_dense_tflops if not memory
                    else point.tflops / point.intensity / sheet.hbm_tbps)
            where += (f" ({spec:.0%} of the datasheet's "
                      f"{f'{sheet.bf16_dense_tflops:,.0f} TFLOPS' if not memory else f'{sheet.hbm_tbps:g} TB/s'})")
        lines.append(f"{point.label}: {point.intensity:,.0f} FLOPs/byte, {point.tflops:,.0f} TFLOPS, {bound}, {where}")
    return lines


def roofs_sentence(facts: dict | None, copy_sizes_bytes: tuple[int, ...] | None = None,
                   matmul_sizes: tuple[int, ...] | None = None) -> str:
    """What each roof of the roofline is, for its caption: the measured rate and how it was measured. The sizes:
    the facts' own ("copy_sizes_bytes", "matmul_sizes") where a recording says them, else those given (live:
    bench/device.py COPY_SIZES_BYTES, MATMUL_SIZES); without either, "sizes not recorded"."""
    facts = facts or {}
    peak, copy = facts.get("matmul_tflops"), facts.get("copy_gbps")
    if not peak or not copy:
        return ""
    copy_sizes, matmul = _roof_sizes(facts, copy_sizes_bytes, matmul_sizes)
    names = roof_names(copy_sizes, matmul)
    sheet = costmodel.datasheet(facts.get("name"))
    spec = (f" The datasheet's peaks (spec): {sheet.bf16_dense_tflops:,.0f} TFLOPS dense "
            f"bf16, {sheet.hbm_tbps:g} TB/s; the papers' percentages are of those." if sheet else "")
    return (f"Roofs, measured on this GPU, not datasheet peaks: bandwidth {copy / 1000:,.2f} TB/s ({names['memory']}, "
            f"bytes read + written per second); compute {peak:,.0f} TFLOPS ({names['compute']}). A measured roof is "
            f"a lower bound of what the GPU can do: a kernel may run above it.{spec}")


def roofline_text(points: list[RoofPoint], records: list[dict], facts: dict | None) -> str:
    """The roofline scene's paragraph, from the points actually drawn: where standard's kernels sit (or why no
    standard point is drawn), flash's intensity and share of the compute roof, and the FA-3 style kernel
    where it ran. records: every algorithm's records at the setting (why a kernel has no point)."""
    facts = facts or {}
    peak, copy = facts.get("matmul_tflops"), facts.get("copy_gbps")
    if not (peak and copy):
        return ""
    at_ridge = costmodel.ridge_point(peak, copy)
    sentences = [f"Left of the ridge ({at_ridge:,.0f} FLOPs per HBM byte) a kernel waits on memory; right of "
                 f"it, on arithmetic."]
    naive = [p for p in points if p.algorithm == "naive"]
    if naive:
        share = max(p.tflops / costmodel.attainable_tflops(p.intensity, peak, copy) for p in naive)
        left = all(p.intensity < at_ridge for p in naive)
        where = "left of the ridge, where the bandwidth roof caps them" if left else "on both sides of the ridge"
        close = ("one of them above the measured roof, a lower bound" if share > 1
                 else f"at up to {share:.0%} of their roof")
        sentences.append(f"The standard kernels stream the N×N scores through HBM and sit {where} ({close}).")
    else:
        standard = next((r for r in records if r["algorithm"] == "naive"), None)
        why = (oom_word(standard) if standard is not None and standard["status"] == "oom"
               else failure_text(standard) if standard is not None and standard["status"] != "ok"
               else "not measured at this setting")
        sentences.append(f"No standard point: standard attention did not run here ({why}).")
    flash = next((p for p in points if p.algorithm == "fa2"), None)
    if flash is not None:
        side = "right of the ridge" if flash.intensity >= at_ridge else "left of the ridge"
        share = flash.tflops / peak
        # its speedup comes from running on arithmetic only where it does: half the roof or more
        why = (": that is where its speedup comes from" if naive and share >= 0.5 else
               ": well below the roof, at this size the launch and the tail, not the arithmetic, set its time"
               if share < 0.5 else "")
        sentences.append(f"Flash keeps the scores on chip, does {flash.intensity:,.0f} FLOPs per byte, {side}, and "
                         f"runs at {flash.tflops:,.0f} TFLOPS, {min(share, 1):.0%} of the "
                         f"compute roof{'' if flash.tflops <= peak else ' (above it: the roof is a lower bound)'}"
                         f"{why}.")
    v3 = next((p for p in points if p.algorithm == "fa3"), None)
    if v3 is not None:
        sentences.append(f"Our FA-3 style kernel (Gluon, Hopper) does {v3.intensity:,.0f} FLOPs per byte at "
                         f"{v3.tflops:,.0f} TFLOPS, {min(v3.tflops / peak, 1):.0%} of the compute roof.")
    return " ".join(sentences)


def ridge(facts: dict | None) -> float | None:
    """The roofline's ridge: FLOPs per HBM byte where the bandwidth roof meets the compute roof (both measured)."""
    facts = facts or {}
    peak, copy = facts.get("matmul_tflops"), facts.get("copy_gbps")
    return costmodel.ridge_point(peak, copy) if peak and copy else None
