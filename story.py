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
