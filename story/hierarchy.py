"""The hierarchy scene, the memory hierarchy: why staying on chip pays, in this GPU's numbers."""
from __future__ import annotations

import costmodel


def hierarchy_sentence(facts: dict | None) -> str:
    """Why staying on chip pays, in this GPU's numbers: SRAM's bandwidth (spec) over HBM's (measured)."""
    facts = facts or {}
    sm_count, clock, copy = facts.get("sm_count"), facts.get("sm_clock_mhz"), facts.get("copy_gbps")
    if not (sm_count and clock and copy):
        return ""
    sram = costmodel.sram_bandwidth_gbps(sm_count, clock)
    l2 = facts.get("l2_gbps")
    via_l2 = f", L2 {l2 / 1000:,.1f} TB/s (measured)" if l2 else ""
    sheet = costmodel.datasheet(facts.get("name"))
    hbm_spec = f"; the datasheet says {sheet.hbm_tbps:g} TB/s" if sheet else ""
    registers = (f" Closer still, each SM's {costmodel.REGISTER_BYTES_PER_SM // 1024} KiB register file (spec) holds "
                 f"what one tile computes: its scores S, probabilities P and running output O.")
    return (f" On this GPU, shared memory can deliver {sram / 1000:,.1f} TB/s (derived from the spec: "
            f"{costmodel.SMEM_BYTES_PER_CLOCK_PER_SM} B per clock × {sm_count} SMs × {clock:,.0f} MHz){via_l2}, HBM "
            f"{copy / 1000:,.2f} TB/s (measured: a copy{hbm_spec}): {sram / copy:,.0f}× more per second on chip."
            + registers)
