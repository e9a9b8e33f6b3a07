"""The story's numbers: what the scenes quote, computed from records, device facts and the cost model.

Plain Python, no Streamlit, torch or Triton: the app's scenes call these and only lay the results out,
so every number a scene shows comes from one function that tests can call directly.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import costmodel
from fmt import fmt_bytes, fmt_ms, fmt_ratio, fmt_tokens


@dataclass(frozen=True)
class TrafficPanels:
    """The compare scene's three models of HBM traffic at one setting, with the assumptions they rest on."""
    naive: list[costmodel.Traffic]
    flash_no_cache: list[costmodel.Traffic]
    flash_l2: list[costmodel.Traffic] | None  # None when the GPU's L2 and SM count are unknown
    tiles: tuple[int, int]                    # the flash tiles the models use
    tiles_known: bool                         # False: the record did not say, costmodel.ASSUMED_FLASH_TILES
    machine: costmodel.Machine | None

    @property
    def naive_bytes(self) -> int:
        return costmodel.total_bytes(self.naive)

    @property
    def flash_bytes(self) -> int:
        """Flash's best model: L2-aware where the GPU is known, else the no-cache bound."""
        return costmodel.total_bytes(self.flash_l2 if self.flash_l2 is not None else self.flash_no_cache)


def flash_tiles(records: list[dict], seq_len: int) -> tuple[tuple[int, int], bool]:
    """The tiles the timed flash kernel ran at this setting (from its record), and whether a record said so."""
    for record in records:
        if record["algorithm"] == "flash" and record["seq_len"] == seq_len and record.get("block_m"):
            return (record["block_m"], record["block_n"]), True
    for record in records:  # the kernel's tiles depend on head_dim, dtype and causal, not on N
        if record["algorithm"] == "flash" and record.get("block_m"):
            return (record["block_m"], record["block_n"]), True
    return costmodel.ASSUMED_FLASH_TILES, False


def residency(timelines: list[dict], head_dim: int, causal: bool, block_m: int | None = None) -> int | None:
    """Programs of the flash kernel resident on one SM at once, as an SM timeline of its kernel measured them
    (timeline_stats' max_per_sm): from the timelines of this head_dim and mask (and Q block, when given), the
    most any of them reached; None where no timeline is of this kernel (the model then assumes 1 per SM)."""
    reached = [timeline_stats(t)["max_per_sm"] for t in timelines or ()
               if t["head_dim"] == head_dim and bool(t["causal"]) == bool(causal)
               and (block_m is None or t["block_m"] == block_m)]
    return max(reached) if reached and max(reached) > 0 else None


def traffic_panels(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                   records: list[dict], facts: dict | None, programs_per_sm: int | None = None,
                   measured: str = costmodel.RESIDENCY_RECORDED) -> TrafficPanels:
    """The three traffic models at this setting: flash with the tiles its record says it ran, and L2-aware
    on the GPU of the facts with programs_per_sm resident on each SM (story.residency of the recording's
    timelines, `measured` saying where it comes from; None: 1 per SM, assumed: costmodel.machine_from_facts)."""
    tiles, known = flash_tiles(records, seq_len)
    shape = (seq_len, batch, heads, head_dim, dtype_bytes, causal)
    machine = costmodel.machine_from_facts(facts, programs_per_sm, measured)
    return TrafficPanels(
        naive=costmodel.traffic("naive", *shape),
        flash_no_cache=costmodel.traffic("flash", *shape, *tiles),
        flash_l2=costmodel.traffic("flash", *shape, *tiles, machine=machine) if machine else None,
        tiles=tiles, tiles_known=known, machine=machine)


def tiles_text(tiles: tuple[int, int]) -> str:
    """"128×64 tiles": the words every traffic number of flash carries."""
    return f"{tiles[0]}×{tiles[1]} tiles"


def compare_titles(panels: TrafficPanels) -> dict[str, str]:
    """The compare figure's panel titles, keyed like its panels; flash's say at which tiles."""
    at = tiles_text(panels.tiles)
    return {"naive": "standard: 3 kernels", "flash_no_cache": f"flash, no cache (paper's bound), {at}",
            "flash_l2": f"flash, L2-aware model, {at}"}


def compare_caption(panels: TrafficPanels) -> str:
    """The compare scene's caption: the tiles flash's numbers are at, the L2 model's machine, and the counts."""
    tiles = "its recorded tiles" if panels.tiles_known else "assumed tiles: the record does not say"
    l2 = (f"L2-aware: {fmt_bytes(panels.machine.l2_bytes)} L2, {panels.machine.how}" if panels.machine
          else "no L2 model: GPU unknown")
    return (f"Cost model: flash at {tiles_text(panels.tiles)} ({tiles}); {l2}. Counted: Nsight Compute, "
            f"recorded run.")


# -- the roofline --------------------------------------------------------------------------------------

ROOFLINE_ALGORITHMS = ("naive", "flash", "flash_v1", "flash_v3", "sdpa_default", "sdpa_flash")
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


def _counted_bytes(record: dict) -> int | None:
    if record.get("dram_read_bytes") is None or record.get("dram_write_bytes") is None:
        return None
    return record["dram_read_bytes"] + record["dram_write_bytes"]


def roofline_points(records: list[dict], names: dict[str, str] | None = None) -> list[RoofPoint]:
    """One point per kernel that ran at the setting: our flash, SDPA's two, and each of the standard
    attention's three kernels when their counts and times were recorded (else standard as a whole).
    records: "ok" GPU records of one setting (same N, batch, heads, head_dim, dtype, causal); names: each
    algorithm's short name (viz.theme.short_labels; the algorithm's key where not given)."""
    points = []
    for record in records:
        if record["algorithm"] not in ROOFLINE_ALGORITHMS or record["status"] != "ok" or not record.get("tflops"):
            continue
        shape = (record["seq_len"], record["batch"], record["heads"], record["head_dim"],
                 costmodel.dtype_bytes(record["dtype"]), record["causal"])
        kernels = record.get("kernels") or []
        if record["algorithm"] == "naive" and len(kernels) == 3 and all(k.get("time_ms") for k in kernels):
            parts = costmodel.naive_traffic(*shape)
            for label, part, kernel in zip(NAIVE_KERNEL_LABELS, parts, kernels):
                points.append(RoofPoint(label, "naive", part.flops,
                                        kernel["dram_read_bytes"] + kernel["dram_write_bytes"], kernel["time_ms"],
                                        True))
            continue
        counted = _counted_bytes(record)
        flops = costmodel.attention_flops(record["seq_len"], record["batch"], record["heads"], record["head_dim"],
                                          record["causal"])
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


def roofline_verdicts(points: list[RoofPoint], peak_tflops: float, bandwidth_gbps: float,
                      copy_sizes_bytes: tuple[int, ...] | None = None,
                      matmul_sizes: tuple[int, ...] | None = None) -> list[str]:
    """Each point in words: which roof bounds it and how close it runs to that roof, never past 100%: a point
    above its measured roof says so, and that the roof (how it was measured: roof_names) is a lower bound."""
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
            where = f"at {share:.0%} of its roof"
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
    return (f"Roofs, measured on this GPU, not datasheet peaks: bandwidth {copy / 1000:,.2f} TB/s ({names['memory']}, "
            f"bytes read + written per second); compute {peak:,.0f} TFLOPS ({names['compute']}). A measured roof is "
            f"a lower bound of what the GPU can do: a kernel may run above it.")


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
        why = (OUT_OF_MEMORY if standard is not None and standard["status"] == "oom"
               else failure_text(standard) if standard is not None and standard["status"] != "ok"
               else "not measured at this setting")
        sentences.append(f"No standard point: standard attention did not run here ({why}).")
    flash = next((p for p in points if p.algorithm == "flash"), None)
    if flash is not None:
        side = "right of the ridge" if flash.intensity >= at_ridge else "left of the ridge"
        sentences.append(f"Flash keeps the scores on chip, does {flash.intensity:,.0f} FLOPs per byte, {side}, and "
                         f"runs at {flash.tflops:,.0f} TFLOPS, {min(flash.tflops / peak, 1):.0%} of the "
                         f"compute roof{'' if flash.tflops <= peak else ' (above it: the roof is a lower bound)'}"
                         f"{': that is where its speedup comes from' if naive else ''}.")
    v3 = next((p for p in points if p.algorithm == "flash_v3"), None)
    if v3 is not None:
        sentences.append(f"Our FA-3 style kernel (Gluon, Hopper) does {v3.intensity:,.0f} FLOPs per byte at "
                         f"{v3.tflops:,.0f} TFLOPS, {min(v3.tflops / peak, 1):.0%} of the compute roof.")
    return " ".join(sentences)


# -- the headline and the takeaways ------------------------------------------------------------------

OUT_OF_MEMORY = "out of memory"


def record_at(records: list[dict], algorithm: str, seq_len: int) -> dict | None:
    return next((r for r in records if r["algorithm"] == algorithm and r["seq_len"] == seq_len), None)


def first_out_of_memory(records: list[dict]) -> dict | None:
    """The shortest length at which the standard kernels ran out of memory: the wall on the slider."""
    walls = [record for record in records if record["algorithm"] == "naive" and record["status"] == "oom"]
    return min(walls, key=lambda record: record["seq_len"], default=None)


@dataclass(frozen=True)
class Headline:
    naive_bytes: int   # extra memory the standard kernels need (model: S, P, O)
    flash_bytes: int   # extra memory flash needs (model: O, LSE)
    speedup: str       # measured naive time / flash time at the slider's N, "out of memory", or "—"
    speedup_why: str   # the two times, the wall (what it needs, which allocation failed), or the reason


def headline(records: list[dict], seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int,
             missing_reason: str = "not measured at this setting") -> Headline:
    """The headline's three numbers. records: flash and naive records of the current setting."""
    shape = (seq_len, batch, heads, head_dim, dtype_bytes)
    memory = costmodel.naive_extra_bytes(*shape), costmodel.flash_extra_bytes(*shape)
    naive, flash = record_at(records, "naive", seq_len), record_at(records, "flash", seq_len)
    if naive is not None and naive["status"] == "oom":
        flash_ran = f"; flash ran in {fmt_ms(flash['time_ms'])}" if flash and flash["status"] == "ok" else ""
        return Headline(*memory, OUT_OF_MEMORY, f"standard attention: {OUT_OF_MEMORY} ({oom_text(naive)}){flash_ran}")
    row = next((row for row in speedup_table(records) if row["seq_len"] == seq_len), None)
    if row is None:
        return Headline(*memory, "—", missing_reason)
    if row["speedup"] is None:
        return Headline(*memory, "—", row["note"] or "one of the two did not run")
    return Headline(*memory, f"{row['speedup']:.1f}×",
                    f"standard {fmt_ms(row['naive_ms'])} → flash {fmt_ms(row['flash_ms'])}")


@dataclass(frozen=True)
class HbmBytes:
    """Standard's and flash's HBM bytes at one setting by the cost model, and as the GPU counted them for the
    recorded run (None where not counted). The ratio is always the model's; ratio_note says so in words
    where no counted ratio stands beside it (standard did not run, or nothing was counted)."""
    naive: int
    flash: int
    naive_counted: int | None
    flash_counted: int | None
    ratio_note: str | None = None  # "model only: standard did not run (out of memory)"; None: counted too

    @property
    def ratio(self) -> float:
        return self.naive / self.flash

    @property
    def counted_ratio(self) -> float | None:
        return self.naive_counted / self.flash_counted if self.naive_counted and self.flash_counted else None

    @property
    def modelled(self) -> bool:
        """The ratio has no counted ratio to stand beside: it is the model's alone."""
        return self.counted_ratio is None

    @property
    def ratio_title(self) -> str:
        """The ratio card's title: says "model" where no count stands beside the number."""
        return "Standard ÷ flash (model)" if self.modelled else "Standard ÷ flash"

    @property
    def flash_model_over_counted(self) -> float | None:
        return self.flash / self.flash_counted if self.flash_counted else None

    @property
    def naive_model_over_counted(self) -> float | None:
        return self.naive / self.naive_counted if self.naive_counted else None


def hbm_bytes(panels: TrafficPanels, records: list[dict], seq_len: int) -> HbmBytes:
    naive_counted = counted_bytes_at(records, "naive", seq_len)
    flash_counted = counted_bytes_at(records, "flash", seq_len)
    naive = record_at(records, "naive", seq_len)
    note = None
    if naive is not None and naive["status"] == "oom":
        note = f"model only: standard did not run ({OUT_OF_MEMORY})"
    elif naive is not None and naive["status"] != "ok":
        note = "model only: standard did not run (error)"
    elif not (naive_counted and flash_counted):
        note = "model only: not counted" if naive is not None else "model only: not measured at this setting"
    return HbmBytes(panels.naive_bytes, panels.flash_bytes, naive_counted, flash_counted, note)


def model_vs_counted(moved: HbmBytes, panels: TrafficPanels) -> str:
    """Model ÷ counted in words, for the compare scene: how far each model is from what the GPU read and wrote
    on the recorded run, with the residency the L2-aware model used; "" when nothing was counted."""
    parts = []
    if moved.naive_model_over_counted:
        parts.append(f"standard {moved.naive_model_over_counted:.2f}")
    if moved.flash_model_over_counted:
        which = (f"L2-aware model, {panels.machine.how}" if panels.flash_l2 is not None and panels.machine
                 else "no-cache bound")
        parts.append(f"flash {moved.flash_model_over_counted:.2f} ({which})")
    if not parts:
        return ""
    return "Model ÷ counted: " + "; ".join(parts) + "."


def takeaways(records: list[dict], at_length: list[dict], panels: TrafficPanels, facts: dict | None, gpu: str,
              seq_len: int, batch: int, heads: int, head_dim: int, dtype: str, scene: dict[str, int],
              max_abs_err: float | None = None, trace_len: int | None = None) -> list[str]:
    """The takeaways as markdown points, each resting on a number another scene shows.

    records: flash and naive over the slider's lengths; at_length: every algorithm's records at seq_len;
    gpu: the GPU's name, already safe to show as markdown; scene: scene key → its number on the page."""
    e = costmodel.dtype_bytes(dtype)
    numbers = headline(records, seq_len, batch, heads, head_dim, e)
    at = f"at {fmt_tokens(seq_len)} tokens (batch {batch} × {heads} heads, head_dim {head_dim}, {dtype})"
    naive_here = record_at(records, "naive", seq_len)
    oom_here = naive_here is not None and naive_here["status"] == "oom"
    points = [f"**Memory: O(N²) → O(N).** Standard attention needs {fmt_bytes(numbers.naive_bytes)} beyond its "
              f"inputs {at}; flash needs {fmt_bytes(numbers.flash_bytes)} (scene {scene['headline']})."]
    if oom_here:
        points.append(f"**Traffic.** Standard attention could not run here: {OUT_OF_MEMORY} ({oom_text(naive_here)}), "
                      f"so it moved nothing; flash's HBM traffic is {fmt_bytes(panels.flash_bytes)} by the "
                      f"L2-aware model (scene {scene['compare']}).")
    else:
        moved = hbm_bytes(panels, records, seq_len)
        counted = (f"; the GPU's counters read {fmt_bytes(moved.naive_counted)} and {fmt_bytes(moved.flash_counted)}"
                   if moved.counted_ratio else "")
        points.append(f"**Traffic, not FLOPs.** Both do the same matmuls, but standard moves "
                      f"{fmt_bytes(moved.naive)} through HBM and flash {fmt_bytes(moved.flash)}, {fmt_ratio(moved.ratio)} "
                      f"less (cost model{counted}; scene {scene['compare']}).")
    peak, copy = (facts or {}).get("matmul_tflops"), (facts or {}).get("copy_gbps")
    points_here = roofline_points([r for r in at_length if r["seq_len"] == seq_len])
    flash_point = next((p for p in points_here if p.algorithm == "flash"), None)
    naive_points = [p for p in points_here if p.algorithm == "naive"]
    if peak and copy and flash_point and naive_points:
        ridge = costmodel.ridge_point(peak, copy)
        worst = max(naive_points, key=lambda p: p.intensity)
        points.append(
            f"**Memory-bound → compute-bound.** The ridge of {gpu}'s roofline is at {ridge:,.0f} FLOPs per HBM byte. "
            f"Standard's kernels sit left of it (at most {worst.intensity:,.0f} FLOPs/byte): the bandwidth roof "
            f"({copy / 1000:,.2f} TB/s) caps them. Flash does {flash_point.intensity:,.0f} FLOPs per byte, right of "
            f"the ridge, and runs at {flash_point.tflops:,.0f} TFLOPS, {flash_point.tflops / peak:.0%} of the "
            f"measured {peak:,.0f} TFLOPS matmul roof (scene {scene['roofline']}).")
    if numbers.speedup.endswith("×"):
        moved = hbm_bytes(panels, records, seq_len)
        points.append(
            f"**Speed: {numbers.speedup}, less than the {fmt_ratio(moved.ratio)} in bytes.** Measured on {gpu}: "
            f"{numbers.speedup_why}. Once the bytes are gone, arithmetic sets flash's time, so the speedup is the "
            f"standard kernels' bandwidth-bound time over flash's compute-bound time (scenes {scene['headline']}, "
            f"{scene['seqlen']}).")
    wall = first_out_of_memory(records)
    if wall:
        points.append(f"**The wall.** On {gpu} the standard kernels ran {OUT_OF_MEMORY} at "
                      f"{fmt_tokens(wall['seq_len'])} tokens ({oom_text(wall)}); flash kept going "
                      f"(scene {scene['seqlen']}).")
    if max_abs_err is not None and trace_len:
        points.append(f"**Exact, not approximate.** On the same random inputs ({trace_len} tokens, {dtype}), flash "
                      f"and the standard kernels differ by at most {max_abs_err:.1e}: rounding, nothing more "
                      f"(scene {scene['tiling']}).")
    return points


def counted_bytes_at(records: list[dict], algorithm: str, seq_len: int) -> int | None:
    """HBM bytes the GPU's counters read for this algorithm's run at seq_len, or None (not counted, not run)."""
    record = record_at(records, algorithm, seq_len)
    return _counted_bytes(record) if record and record["status"] == "ok" else None


def hierarchy_sentence(facts: dict | None) -> str:
    """Why staying on chip pays, in this GPU's numbers: SRAM's bandwidth (spec) over HBM's (measured)."""
    facts = facts or {}
    sm_count, clock, copy = facts.get("sm_count"), facts.get("sm_clock_mhz"), facts.get("copy_gbps")
    if not (sm_count and clock and copy):
        return ""
    sram = costmodel.sram_bandwidth_gbps(sm_count, clock)
    l2 = facts.get("l2_gbps")
    via_l2 = f", L2 {l2 / 1000:,.1f} TB/s (measured)" if l2 else ""
    return (f" On this GPU, shared memory can deliver {sram / 1000:,.1f} TB/s (spec){via_l2}, HBM "
            f"{copy / 1000:,.2f} TB/s (measured): {sram / copy:,.0f}× more per second on chip.")


# -- the wall: what an out-of-memory record says --------------------------------------------------------

def oom_need(record: dict) -> int | None:
    """Bytes the algorithm needs at the record's setting (the cost model's design need), else what the failed
    allocation asked for."""
    if record["algorithm"] in costmodel.EXTRA_BYTES:
        return costmodel.extra_bytes(record["algorithm"], record["seq_len"], record["batch"], record["heads"],
                                     record["head_dim"], costmodel.dtype_bytes(record["dtype"]))
    return record.get("needed_bytes")


REFUSED_BEFORE_LAUNCH = "refused before any launch"  # kernels/inputs.py: S and P larger than the whole device


def oom_text(record: dict) -> str:
    """"needs 192.0 GiB; a 64.0 GiB allocation failed": the model's total and what was measured. The one
    wording of the wall: the chart, the speedup table, the headline and the takeaways all use it."""
    parts = []
    need = oom_need(record)
    if need:
        parts.append(f"needs {fmt_bytes(need)}")
    if record.get("needed_bytes"):
        if REFUSED_BEFORE_LAUNCH in str(record.get("message") or ""):  # our library's own check, not the allocator
            parts.append(f"{fmt_bytes(record['needed_bytes'])} refused before any launch")
        else:
            parts.append(f"a {fmt_bytes(record['needed_bytes'])} allocation failed")
    return "; ".join(parts)


def wall_text(record: dict) -> str:
    """"out of memory at N = 32K (needs 192.2 GiB; a 64.0 GiB allocation failed)"."""
    needed = f" ({oom_text(record)})" if oom_text(record) else ""
    return f"{OUT_OF_MEMORY} at N = {fmt_tokens(record['seq_len'])}{needed}"


def first_wall(records: list[dict]) -> dict | None:
    """The first out-of-memory record of these: standard's, if it has one (the memory chart's shaded wall)."""
    oom = [r for r in records if r["status"] == "oom"]
    naive = [r for r in oom if r["algorithm"] == "naive"]
    return min(naive or oom, key=lambda r: r["seq_len"], default=None)


def failure_text(record: dict) -> str:
    """Why a record has no timing: "out of memory (needs …; a 64.0 GiB allocation failed)" or "error: …"."""
    if record["status"] == "oom":
        needs = oom_text(record)
        return OUT_OF_MEMORY + (f" ({needs})" if needs else "")
    return f"error: {record.get('message') or 'unknown'}"


def with_failures(records: list[dict]) -> list[dict]:
    """The records as the memory and timing charts draw them: each failed one carries its `failure` text, each
    out-of-memory one the bytes it needs (`need_bytes`, where its ✕ sits on the memory chart)."""
    return [r if r["status"] == "ok" else {**r, "failure": failure_text(r), "need_bytes": oom_need(r)}
            for r in records]


def memory_wall(records: list[dict]) -> dict | None:
    """The memory chart's shaded wall: where the first out-of-memory record is, and what it says."""
    wall = first_wall(records)
    return {"seq_len": wall["seq_len"], "text": wall_text(wall)} if wall else None


def standard_wall(facts: dict | None, batch: int, heads: int, head_dim: int, dtype_bytes: int) -> dict | None:
    """The memory wall of the standard kernels at this setting on the GPU of the facts, by the one formula
    (costmodel.standard_memory_wall: Q, K, V, S in fp32, P, O), for the problem scene's figure:
    {"seq_len": the first power-of-two N that does not fit, "fits_up_to": the longest N that does, "need_bytes":
    what seq_len needs, "label": a few words for the marker, "text": the sentence}. None: device memory unknown.
    At the talk's setting on the H200 it is the 32K where the recording's standard kernels ran out of memory."""
    hbm = (facts or {}).get("hbm_bytes")
    if not hbm:
        return None
    wall = costmodel.standard_memory_wall(hbm, batch, heads, head_dim, dtype_bytes)
    setting = f"batch {batch} × {heads} head{'s' if heads != 1 else ''}"
    return {"seq_len": wall.seq_len, "fits_up_to": wall.fits_up_to, "need_bytes": wall.need_bytes,
            "label": f"standard: {OUT_OF_MEMORY} from N = {fmt_tokens(wall.seq_len)}",
            "text": (f"standard attention, {setting}, head_dim {head_dim}: Q, K, V, S in fp32, P and O fit "
                     f"{fmt_bytes(hbm)} up to N ≈ {fmt_tokens(wall.fits_up_to)}; at N = {fmt_tokens(wall.seq_len)} "
                     f"they need {fmt_bytes(wall.need_bytes)}")}


# -- the speedup table ----------------------------------------------------------------------------------

SPEEDUP_NAMES = {"flash": "flash", "naive": "standard"}


def speedup_table(records: list[dict]) -> list[dict]:
    """Per sequence length: flash and standard (naive) median ms, the speedup naive / flash, and a note
    where one of them failed or ran in the interpreter. Rows sorted by seq_len, plain values."""
    by_len: dict[int, dict[str, dict]] = {}
    for record in sorted(records, key=lambda r: r["seq_len"]):
        if record["algorithm"] in SPEEDUP_NAMES:
            by_len.setdefault(record["seq_len"], {})[record["algorithm"]] = record
    table = []
    for seq_len, pair in sorted(by_len.items()):
        times = {a: pair[a]["time_ms"] if a in pair and pair[a]["status"] == "ok" else None for a in SPEEDUP_NAMES}
        notes = [f"{SPEEDUP_NAMES[a]}: {failure_text(r)}" for a, r in sorted(pair.items(), key=lambda item: item[0])
                 if r["status"] != "ok"]
        if any(r.get("timing_kind") == "interpreter" for r in pair.values()):
            notes.append("CPU interpreter times, not GPU speed")
        both = times["flash"] and times["naive"]
        table.append({"seq_len": seq_len, "tokens": fmt_tokens(seq_len), "flash_ms": times["flash"],
                      "naive_ms": times["naive"], "speedup": times["naive"] / times["flash"] if both else None,
                      "note": "; ".join(notes)})
    return table


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


# -- the N×N problem -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScoresMemory:
    """The problem scene's numbers: the scores of one head and of all heads at N, the often-quoted 8K figure in
    fp32 and bf16, and flash's extra memory per head (it grows as O(N))."""
    per_head: int
    all_heads: int
    eight_k_fp32: int
    eight_k_bf16: int
    flash_per_head: int


def scores_memory(seq_len: int, heads: int, head_dim: int, dtype_bytes: int) -> ScoresMemory:
    return ScoresMemory(costmodel.scores_bytes(seq_len, dtype_bytes=dtype_bytes),
                        costmodel.scores_bytes(seq_len, heads=heads, dtype_bytes=dtype_bytes),
                        costmodel.scores_bytes(8192, dtype_bytes=4), costmodel.scores_bytes(8192, dtype_bytes=2),
                        costmodel.flash_extra_bytes(seq_len, 1, 1, head_dim, dtype_bytes))


# -- the evolution scene ---------------------------------------------------------------------------------

# Why a kernel of ours is not timed past some length, by its design (bench/algorithms.py stops it there).
NOT_TIMED_WHY = {"flash_v1": "one program per head"}


def _no_number(algorithm: str, at_length: dict | None, history: list[dict], seq_len: int | None) -> str:
    """Why an algorithm has no TFLOPS at seq_len: its record's failure, or what its records at other lengths
    of the setting say (out of memory from a shorter length, not timed past the longest it ran), else not
    recorded."""
    if at_length is not None:
        return OUT_OF_MEMORY if at_length["status"] == "oom" else failure_text(at_length)
    mine = [r for r in history if r["algorithm"] == algorithm]
    shorter_oom = [r["seq_len"] for r in mine if r["status"] == "oom" and seq_len and r["seq_len"] < seq_len]
    if shorter_oom:
        return f"{OUT_OF_MEMORY} (from {fmt_tokens(min(shorter_oom))})"
    timed = [r["seq_len"] for r in mine if r["status"] == "ok"]
    if timed and seq_len and max(timed) < seq_len:
        why = NOT_TIMED_WHY.get(algorithm)
        return f"not timed past {fmt_tokens(max(timed))}" + (f" ({why})" if why else "")
    return "not recorded"


def evolution_points(records: list[dict], seq_len: int | None = None, history: list[dict] | None = None,
                     algorithms: tuple[str, ...] = costmodel.ALGORITHMS) -> list[dict]:
    """The evolution chart's measured entries: one per algorithm the cost model's table knows (in its order),
    with its TFLOPS, or None and a note saying why there is no number: "out of memory", "not timed past 16K
    (one program per head)", "not recorded"…

    records: every algorithm's records at seq_len (one setting); history: the same setting's records at other
    lengths (why an algorithm with no record here stopped earlier), optional."""
    entries = []
    for algorithm in algorithms:
        here = [r for r in records if r["algorithm"] == algorithm and (seq_len is None or r["seq_len"] == seq_len)]
        record = next((r for r in here if r["status"] == "ok" and r.get("tflops")), here[0] if here else None)
        if record is not None and record["status"] == "ok" and record.get("tflops"):
            entries.append({"algorithm": algorithm, "tflops": record["tflops"], "note": None})
        else:
            entries.append({"algorithm": algorithm, "tflops": None,
                            "note": _no_number(algorithm, record, history or [], seq_len)})
    return entries


# -- FA-1 order: loop order or idle SMs ------------------------------------------------------------------

@dataclass(frozen=True)
class Fa1Gap:
    """How much slower our FA1-order kernel is than our FA-2 kernel at the talk's shape, split into what the
    loop order costs (the ratio at a shape that fills the GPU) and what one program per batch·head leaves idle
    (the rest). Ratios are FA1-order time ÷ FA-2 time; None where the records are missing."""
    seq_len: int                   # the talk's length, where talk_ratio is taken
    talk_ratio: float | None       # at the talk's shape, at seq_len
    programs: int                  # the FA1-order kernel's programs at the talk's shape: batch·heads
    sm_count: int | None
    split_seq_len: int | None      # where the filling shape was timed (the split uses both shapes there)
    filling: tuple[int, int] | None  # (batch, heads) of the shape that fills the GPU
    loop_order: float | None       # the ratio at the filling shape
    idle_sms: float | None         # the talk shape's ratio at split_seq_len ÷ loop_order
    sentence: str


def _time_ratio(records: list[dict], seq_len: int, batch: int, heads: int) -> float | None:
    def time(algorithm: str) -> float | None:
        return next((r["time_ms"] for r in records if r["algorithm"] == algorithm and r["seq_len"] == seq_len
                     and r["batch"] == batch and r["heads"] == heads and r["status"] == "ok" and r.get("time_ms")),
                    None)
    v1, v2 = time("flash_v1"), time("flash")
    return v1 / v2 if v1 and v2 else None


def fa1_gap(records: list[dict], seq_len: int, batch: int, heads: int, head_dim: int, dtype: str, causal: bool,
            sm_count: int | None) -> Fa1Gap:
    """The talk-shape gap between our FA1-order and FA-2 kernels, split into loop order and idle SMs.

    records: the recording's records of every shape (filtered here to head_dim, dtype, causal). The filling
    shape: a (batch, heads) whose batch·heads ≥ 2 × sm_count, where flash_v1 and flash both ran at one length
    that the talk's shape ran too (the one closest to seq_len)."""
    mine = [r for r in records if r["head_dim"] == head_dim and r["dtype"] == dtype and bool(r["causal"]) == causal]
    talk = _time_ratio(mine, seq_len, batch, heads)
    programs = batch * heads
    split = None
    if sm_count:
        shapes = sorted({(r["seq_len"], r["batch"], r["heads"]) for r in mine
                         if r["batch"] * r["heads"] >= 2 * sm_count and r["algorithm"] == "flash_v1"},
                        key=lambda s: (abs(s[0].bit_length() - seq_len.bit_length()), -s[0], -s[1] * s[2]))
        for n, b, h in shapes:
            filling, at_talk = _time_ratio(mine, n, b, h), _time_ratio(mine, n, batch, heads)
            if filling and at_talk:
                split = (n, (b, h), filling, at_talk / filling)
                break
    shape = f"batch {batch} × {heads} heads"
    on = f" on {sm_count} SMs" if sm_count else ""
    if talk is None:
        sentence = (f"Our FA1-order and FA-2 kernels were not both timed at {fmt_tokens(seq_len)} tokens for {shape}: "
                    f"no gap to split.")
    else:
        sentence = (f"At the talk's shape ({shape}: {programs} programs{on}) our FA1-order kernel takes "
                    f"{fmt_ratio(talk)} the FA-2 kernel's time at {fmt_tokens(seq_len)} tokens.")
    if split is None:
        needed = f" (batch·heads ≥ {2 * sm_count})" if sm_count else ""
        sentence += (f" Which part is loop order and which is idle SMs needs both kernels timed at a shape that "
                     f"fills the GPU{needed}: not recorded.")
        return Fa1Gap(seq_len, talk, programs, sm_count, None, None, None, None, sentence)
    n, (b, h), loop, idle = split
    sentence += (f" At a shape that fills the GPU (batch {b} × {h} heads, {fmt_tokens(n)} tokens) the gap is "
                 f"{fmt_ratio(loop)}: that is the loop order (the FA-2 paper: about 2×). The other "
                 f"{fmt_ratio(idle)} is SMs left idle by one program per batch·head (the talk's shape at "
                 f"{fmt_tokens(n)}: {fmt_ratio(loop * idle)} ÷ {fmt_ratio(loop)}).")
    return Fa1Gap(seq_len, talk, programs, sm_count, n, (b, h), loop, idle, sentence)


def runs_sentence(meta: dict | None) -> str:
    """What a results file merged from several bench runs (bench --merge-into) makes of a comparison between its
    points: "" for a file of one run."""
    earlier = [command for command in str((meta or {}).get("merged_from") or "").split(" | ") if command.strip()]
    if not earlier:
        return ""
    return f"Points from {len(earlier) + 1} bench runs: across runs, times spread a few per cent."


def ridge(facts: dict | None) -> float | None:
    """The roofline's ridge: FLOPs per HBM byte where the bandwidth roof meets the compute roof (both measured)."""
    facts = facts or {}
    peak, copy = facts.get("matmul_tflops"), facts.get("copy_gbps")
    return costmodel.ridge_point(peak, copy) if peak and copy else None


# -- inside one program: what each warpgroup did, by Proton (a results file's "phases") -----------------------

PHASE_KERNELS = ("flash", "flash_v3")  # the teaching kernel (FA-2 order), the FA-3 style kernel: drawn in this order
GEMM_PHASES = ("qk", "pv")


def _program_span(program: dict) -> tuple[int, int]:
    spans = [s for lane in program["lanes"] for s in lane["spans"]]
    return min(s[1] for s in spans), max(s[2] for s in spans)


def _union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def gemm_busy(program: dict) -> float:
    """Share of the program's time (first record to last) during which some warpgroup is inside a GEMM scope
    (qk or pv): the tensor cores' busy fraction as the scopes can tell it. A warpgroup in a GEMM scope is issuing a
    wgmma or waiting on one; an issued wgmma also runs on after its scope ends (FA-3 overlaps it with softmax)."""
    start, end = _program_span(program)
    busy = _union([(s[1], s[2]) for lane in program["lanes"] for s in lane["spans"] if s[0] in GEMM_PHASES])
    return busy / (end - start) if end > start else 0.0


def phase_fractions(lane: dict) -> dict[str, float]:
    """Share of the lane's recorded span spent in each phase."""
    spans = lane["spans"]
    if not spans:
        return {}
    total = max(s[2] for s in spans) - min(s[1] for s in spans)
    out: dict[str, float] = {}
    for name, start, end in spans:
        out[name] = out.get(name, 0.0) + (end - start) / total if total else 0.0
    return out


def softmax_overlap(program: dict) -> float | None:
    """Of the time the first consumer spends in its softmax, the share during which another warpgroup is inside a
    GEMM scope: the ping-pong, measured. None with one warpgroup (the teaching kernel: nothing can overlap)."""
    lanes = [lane for lane in program["lanes"] if not lane.get("role", "").startswith("producer")]
    if len(lanes) < 2:
        return None
    soft = [(a, b) for n, a, b in lanes[0]["spans"] if n == "softmax"]
    busy = [(a, b) for lane in lanes[1:] for n, a, b in lane["spans"] if n in GEMM_PHASES]
    total = sum(b - a for a, b in soft)
    if not total:
        return None
    covered = sum(max(0, min(b, d) - max(a, c)) for a, b in soft for c, d in busy)
    return min(1.0, covered / total)


def _typical_program(recording: dict) -> dict:
    """The recorded program of median length (not the fastest or the slowest of the few kept)."""
    programs = sorted(recording["programs"], key=lambda p: _program_span(p)[1] - _program_span(p)[0])
    return programs[len(programs) // 2]


LANE_NAMES = {"producer": "producer warp (TMA loads)", "warpgroup 0": "its one warpgroup (every phase)"}


@dataclass(frozen=True)
class PhaseKernel:
    """One kernel's recorded program, as the scene shows and quotes it."""
    kernel: str
    label: str                # the kernel's short name (viz.theme.short_labels, passed in)
    cta: int
    sm: int
    microseconds: float       # the program's span, first record to last, at the recorded SM clock
    gemm_busy: float
    softmax_overlap: float | None
    rate_share: float | None  # its measured TFLOPS at the talk's setting ÷ the measured matmul roof
    lanes: list[dict]         # [{"label", "spans": [[phase, start_us, end_us], ...]}] for viz.phases_figure


def phase_kernels(phases: list[dict], records: list[dict], facts: dict | None,
                  names: dict[str, str] | None = None) -> list[PhaseKernel]:
    """The kernels with a recorded program, in PHASE_KERNELS order. records: every algorithm's at the talk's setting
    (the measured TFLOPS the busy fraction is checked against); names: each algorithm's short name."""
    roof = (facts or {}).get("matmul_tflops")
    out = []
    for kernel in PHASE_KERNELS:
        recording = next((p for p in phases if p["kernel"] == kernel), None)
        if recording is None:
            continue
        program = _typical_program(recording)
        clock_mhz = recording.get("sm_clock_mhz") or 1000.0  # Proton's own assumption when the clock is unknown
        start, end = _program_span(program)
        to_us = 1.0 / clock_mhz
        lanes = [{"label": LANE_NAMES.get(lane["role"], lane["role"]),
                  "spans": [[s[0], (s[1] - start) * to_us, (s[2] - start) * to_us] for s in lane["spans"]]}
                 for lane in program["lanes"]]
        measured = next((r for r in records if r["algorithm"] == kernel and r["status"] == "ok" and r.get("tflops")),
                        None)
        out.append(PhaseKernel(kernel, (names or {}).get(kernel, kernel), program["cta"], program["sm"],
                               (end - start) * to_us, gemm_busy(program), softmax_overlap(program),
                               measured["tflops"] / roof if measured and roof else None, lanes))
    return out


BUSY_AGREES = 0.10  # the scopes' busy fraction and the rate's share of the roof agree within this


def busy_sentence(k: PhaseKernel) -> str:
    """The busy fraction against the kernel's measured rate ÷ roof: within 10 %, or what the scopes count that the
    rate does not."""
    busy = f"{k.label}: some warpgroup is inside a GEMM scope {k.gemm_busy:.0%} of the program's time"
    if k.rate_share is None:
        return busy + "; no measured rate at the talk's setting to check it against."
    rate = f"its measured rate is {k.rate_share:.0%} of the matmul roof"
    if abs(k.gemm_busy - k.rate_share) <= BUSY_AGREES:
        return f"{busy}, and {rate}: the two agree within {BUSY_AGREES:.0%}."
    return (f"{busy}; {rate}. They differ: a GEMM scope counts a warpgroup issuing a wgmma and waiting for it, not "
            f"the tensor cores' cycles (an issued wgmma is not a busy tensor core), and one program is not the "
            f"whole launch (its prologue, tail and the other programs on the SM).")


def phases_sentence(kernels: list[PhaseKernel]) -> str:
    """What to look at, in this recording's numbers."""
    fa2 = next((k for k in kernels if k.kernel == "flash"), None)
    fa3 = next((k for k in kernels if k.kernel == "flash_v3"), None)
    parts = []
    if fa2:
        parts.append(f"In {fa2.label} one warpgroup does everything in turn: while it runs the softmax (green) no "
                     f"GEMM (orange, purple) of its program runs.")
    if fa3 and fa3.softmax_overlap is not None:
        parts.append(f"In {fa3.label} a producer warp loads while two consumers take turns: "
                     f"{fa3.softmax_overlap:.0%} of the first consumer's softmax time the other is inside a GEMM.")
    elif fa3:
        parts.append(f"In {fa3.label} no consumer's softmax overlaps another's GEMM in this recording: that is a "
                     f"finding about our kernel, not drawn as if it did.")
    return " ".join(parts)


# -- the SM timeline's caption: the talk's setting, or plainly another ---------------------------------------

def timeline_caption(timeline: dict, seq_len: int, batch: int, heads: int, head_dim: int, causal: bool,
                     live: bool) -> str:
    """Where the timeline comes from and its setting, saying plainly when it is not the talk's."""
    where = "Measured now" if live else "Recorded"
    shown = (f"{fmt_tokens(timeline['seq_len'])} tokens, batch {timeline['batch']} × {timeline['heads']} heads, "
             f"head_dim {timeline['head_dim']}, block_m {timeline['block_m']}{', causal' if timeline['causal'] else ''}")
    talk = (seq_len, batch, heads, head_dim, causal)
    if (timeline["seq_len"], timeline["batch"], timeline["heads"], timeline["head_dim"],
            bool(timeline["causal"])) == talk:
        return f"{where} at the talk's setting: {shown}."
    return (f"{where}: {shown}: not the talk's setting ({fmt_tokens(seq_len)} tokens, batch {batch} × {heads} heads, "
            f"head_dim {head_dim}{', causal' if causal else ''}); the recording holds timelines of this one only.")


# -- the takeaways as slides: a number and a line each ---------------------------------------------------------

@dataclass(frozen=True)
class Slide:
    title: str    # a few words
    number: str   # the number the audience remembers
    line: str     # one line that says what it is (markdown-safe)
    scene: int    # the scene that shows it


def takeaway_slides(records: list[dict], at_length: list[dict], panels: TrafficPanels, facts: dict | None,
                    seq_len: int, batch: int, heads: int, head_dim: int, dtype: str, scene: dict[str, int],
                    max_abs_err: float | None = None, trace_len: int | None = None) -> list[Slide]:
    """The takeaways as slides, the same numbers as `takeaways` (which says them in sentences): memory, traffic,
    where flash sits on the roofline, the speedup, the wall, exactness, and the FA-3 style kernel where it ran."""
    e = costmodel.dtype_bytes(dtype)
    numbers = headline(records, seq_len, batch, heads, head_dim, e)
    n = fmt_tokens(seq_len)
    slides = [Slide("Memory: O(N²) → O(N)", f"{fmt_bytes(numbers.naive_bytes)} → {fmt_bytes(numbers.flash_bytes)}",
                    f"extra memory at {n} tokens, standard → flash", scene["headline"])]
    naive_here = record_at(records, "naive", seq_len)
    moved = hbm_bytes(panels, records, seq_len)
    if naive_here is None or naive_here["status"] != "oom":
        counted = (f" (the GPU counted {fmt_ratio(moved.counted_ratio)})" if moved.counted_ratio else "")
        slides.append(Slide("Traffic, not FLOPs", f"{fmt_ratio(moved.ratio)} fewer bytes",
                            f"through HBM at {n}, same matmuls{counted}", scene["compare"]))
    peak, copy = (facts or {}).get("matmul_tflops"), (facts or {}).get("copy_gbps")
    flash_point = next((p for p in roofline_points([r for r in at_length if r["seq_len"] == seq_len])
                        if p.algorithm == "flash"), None)
    if peak and copy and flash_point:
        slides.append(Slide("Compute-bound", f"{flash_point.intensity:,.0f} FLOPs/byte",
                            f"flash is right of the ridge ({costmodel.ridge_point(peak, copy):,.0f}), at "
                            f"{min(flash_point.tflops / peak, 1.0):.0%} of the matmul roof", scene["roofline"]))
    if numbers.speedup.endswith("×"):
        slides.append(Slide("Speed", numbers.speedup, f"faster at {n}: arithmetic, not bytes, now sets the time",
                            scene["seqlen"]))
    wall = first_out_of_memory(records)
    if wall:
        slides.append(Slide("The wall", fmt_tokens(wall["seq_len"]),
                            f"tokens: standard ran {OUT_OF_MEMORY}; flash kept going", scene["seqlen"]))
    v3 = record_at(at_length, "flash_v3", seq_len)
    flash = record_at(at_length, "flash", seq_len)
    sdpa = record_at(at_length, "sdpa_default", seq_len)
    if v3 and v3["status"] == "ok" and v3.get("tflops"):
        versus = "".join(f", {v3['tflops'] / other['tflops']:.2f}× {name}" for other, name in
                         ((sdpa, "PyTorch SDPA's default"), (flash, "our FA-2-order kernel"))
                         if other and other["status"] == "ok" and other.get("tflops"))
        slides.append(Slide("FA-3 style, ours", f"{v3['tflops']:,.0f} TFLOPS",
                            f"on Hopper at {n}: producer warp, ping-pong consumers{versus}", scene["evolution"]))
    if max_abs_err is not None and trace_len:
        slides.append(Slide("Exact, not approximate", f"{max_abs_err:.1e}",
                            f"max |O_flash − O_standard| on the same inputs ({trace_len} tokens): rounding",
                            scene["tiling"]))
    return slides
