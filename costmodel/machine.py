"""The GPU as the models see it: what the L2-aware model needs of a machine, and the roofline's formulas."""
from __future__ import annotations

from dataclasses import dataclass

# bf16 dense matmul and copy ceilings are measured by the bench on the GPU (device facts); this is the spec
# width of the on-chip shared memory: 32 banks × 4 bytes per clock per SM.
SMEM_BYTES_PER_CLOCK_PER_SM = 128
REGISTER_BYTES_PER_SM = 65536 * 4  # the register file: 64K 32-bit registers per SM (sm_80, sm_90)


@dataclass(frozen=True)
class Datasheet:
    """A GPU's published peaks, as its maker's datasheet gives them: never measured here, always labelled "spec"."""
    bf16_dense_tflops: float  # tensor-core bf16, dense (the datasheets' sparse figure is twice this)
    hbm_tbps: float           # HBM bandwidth
    source: str


DATASHEETS = {
    "NVIDIA H200": Datasheet(989, 4.8, "NVIDIA H200 (SXM) datasheet: 989 TFLOPS dense BF16, 4.8 TB/s HBM3e"),
    "NVIDIA H100 80GB HBM3": Datasheet(989, 3.35, "NVIDIA H100 SXM datasheet: 989 TFLOPS dense BF16, 3.35 TB/s"),
    "NVIDIA A100-SXM4-80GB": Datasheet(312, 2.039, "NVIDIA A100 80GB SXM datasheet: 312 TFLOPS BF16, 2.039 TB/s"),
}


def datasheet(name: str | None) -> Datasheet | None:
    """The datasheet of a GPU by the name torch reports (device facts' "name"), None for one not listed."""
    return DATASHEETS.get(str(name or "").strip())

RESIDENCY_RECORDED = "measured on the recorded SM timeline"
RESIDENCY_LIVE = "measured occupancy on this GPU"
RESIDENCY_ASSUMED = "assumed: no timeline"


@dataclass(frozen=True)
class Machine:
    """What the L2-aware model needs of a GPU: its L2 and how many flash programs it runs at once."""
    l2_bytes: int
    programs_in_flight: int  # SMs × programs resident on one SM at once
    how: str  # where programs_in_flight comes from, in words
    programs_per_sm: int = 1


def machine_from_facts(facts: dict | None, programs_per_sm: int | None = None,
                       measured: str = RESIDENCY_RECORDED) -> Machine | None:
    """The model's machine from device facts (sm_count, l2_bytes); None when they are unknown.

    programs_per_sm: the flash programs resident on one SM at once (the residency), as measured: on the SM
    timeline of the recording (story.residency; `measured` then RESIDENCY_RECORDED) or as this GPU's
    occupancy (RESIDENCY_LIVE). None: 1 per SM, assumed (RESIDENCY_ASSUMED). The programs in flight, which
    share one pass over a head's K and V, are SMs × programs_per_sm.

    How the model meets the H200's counters (results/h200.json: bf16, batch 2 × 16 heads, the kernel's own
    tiles), model ÷ counted, at the residency the recorded timelines measure (2 per SM, head_dim 128):
    - up to 16K (head_dim 64: 32K), one head's K/V fits the L2: 0.88–1.34 (at 1K–2K some of the writes are
      still in L2 when the counters stop, so the model is above them);
    - head_dim 128, causal, 64K–256K: 1.02–1.07 (32K and shorter: not counted since the kernel launches causal
      programs longest first across a head group, 2026-12-04; from 64K a group is one head, the order counted);
    - head_dim 128, not causal, 32K–256K: 0.69 at 32K and 0.76 at 64K, falling to 0.52 at 256K: the GPU reads
      up to twice what the model says. The model's premise, that a wave's programs share each K/V tile through
      L2, does not hold there, and the model is not fitted to hide it;
    - head_dim 64 (no timeline of its kernel: 1 per SM assumed), 64K–256K: 2.8–3.5 causal, 0.55–1.9 not.
    With 1 per SM assumed instead, head_dim 128 not causal meets the counters at 128K–256K (0.99–1.01): a
    coincidence the timeline contradicts, not a reason to assume it (tests/test_story_truth.py pins these).
    (The shipped recording, BENCHMARKS.md; each re-recording moves these by a few hundredths.)"""
    if not facts or not facts.get("l2_bytes") or not facts.get("sm_count"):
        return None
    sm_count = int(facts["sm_count"])
    per_sm = int(programs_per_sm) if programs_per_sm else 1
    where = measured if programs_per_sm else RESIDENCY_ASSUMED
    return Machine(int(facts["l2_bytes"]), sm_count * per_sm,
                   f"{sm_count * per_sm} programs in flight ({per_sm} per SM, {where})",
                   per_sm)



# -- roofline ---------------------------------------------------------------------------------------

def arithmetic_intensity(flops: float, hbm_bytes: float) -> float | None:
    """FLOPs per HBM byte; None when no byte was moved."""
    return flops / hbm_bytes if hbm_bytes > 0 else None


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """The roofline: min(compute peak, bandwidth × intensity), in TFLOPS."""
    return min(peak_tflops, bandwidth_gbps * 1e9 * intensity / 1e12)


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """The intensity (FLOPs/byte) where the bandwidth roof meets the compute roof."""
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def sram_bandwidth_gbps(sm_count: int, sm_clock_mhz: float) -> float:
    """Shared-memory bandwidth of the whole chip by its spec width (SMEM_BYTES_PER_CLOCK_PER_SM), GB/s."""
    return sm_count * sm_clock_mhz * 1e6 * SMEM_BYTES_PER_CLOCK_PER_SM / 1e9
