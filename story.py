"""The story's numbers: what the scenes quote, computed from records, device facts and the cost model.

Plain Python, no Streamlit, torch or Triton: the app's scenes call these and only lay the results out,
so every number a scene shows comes from one function that tests can call directly.
"""
from __future__ import annotations

from dataclasses import dataclass

import costmodel


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


def traffic_panels(seq_len: int, batch: int, heads: int, head_dim: int, dtype_bytes: int, causal: bool,
                   records: list[dict], facts: dict | None) -> TrafficPanels:
    tiles, known = flash_tiles(records, seq_len)
    shape = (seq_len, batch, heads, head_dim, dtype_bytes, causal)
    machine = costmodel.machine_from_facts(facts)
    return TrafficPanels(
        naive=costmodel.traffic("naive", *shape),
        flash_no_cache=costmodel.traffic("flash", *shape, *tiles),
        flash_l2=costmodel.traffic("flash", *shape, *tiles, machine=machine) if machine else None,
        tiles=tiles, tiles_known=known, machine=machine)


# -- the roofline --------------------------------------------------------------------------------------

ROOFLINE_ALGORITHMS = ("naive", "flash", "flash_v1", "sdpa_default", "sdpa_flash")
ROOFLINE_LABELS = {"flash": "flash (ours)", "flash_v1": "flash, FA1 order (ours)", "sdpa_default": "SDPA default",
                   "sdpa_flash": "SDPA flash", "naive": "standard (ours)"}
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


def roofline_points(records: list[dict]) -> list[RoofPoint]:
    """One point per kernel that ran at the setting: our flash, SDPA's two, and each of the standard
    attention's three kernels when their counts and times were recorded (else standard as a whole).
    records: "ok" GPU records of one setting (same N, batch, heads, head_dim, dtype, causal)."""
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
        points.append(RoofPoint(ROOFLINE_LABELS[record["algorithm"]], record["algorithm"], flops,
                                counted if counted else record["bytes_moved"], record["time_ms"], bool(counted)))
    return [point for point in points if point.hbm_bytes > 0 and point.time_ms > 0]


def roofline_verdicts(points: list[RoofPoint], peak_tflops: float, bandwidth_gbps: float) -> list[str]:
    """Each point in words: which roof bounds it and how close it runs to that roof."""
    ridge = costmodel.ridge_point(peak_tflops, bandwidth_gbps)
    lines = []
    for point in points:
        roof = costmodel.attainable_tflops(point.intensity, peak_tflops, bandwidth_gbps)
        bound = "memory-bound (left of the ridge)" if point.intensity < ridge else "compute-bound (right of the ridge)"
        lines.append(f"{point.label}: {point.intensity:,.0f} FLOPs/byte, {point.tflops:,.0f} TFLOPS, {bound}, "
                     f"at {point.tflops / roof:.0%} of its roof")
    return lines
