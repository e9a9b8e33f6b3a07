"""The compare scene, standard vs flash side by side: the three traffic models at the talk's setting, and the GPU's counts."""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_bytes
from kernels import specs
from story.records import OUT_OF_MEMORY, counted_bytes_at, oom_word, record_at


@dataclass(frozen=True)
class TrafficPanels:
    """The compare scene's three models of HBM traffic at one setting, with the assumptions they rest on."""
    naive: list[costmodel.Traffic]
    flash_no_cache: list[costmodel.Traffic]
    flash_l2: list[costmodel.Traffic] | None  # None when the GPU's L2 and SM count are unknown
    tiles: tuple[int, int]                    # the flash tiles the models use
    tiles_known: bool                         # False: the record did not say, the spec's assumed tiles
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
        if record["algorithm"] == "fa2" and record["seq_len"] == seq_len and record.get("block_m"):
            return (record["block_m"], record["block_n"]), True
    for record in records:  # the kernel's tiles depend on head_dim, dtype and causal, not on N
        if record["algorithm"] == "fa2" and record.get("block_m"):
            return (record["block_m"], record["block_n"]), True
    return specs.spec("fa2").assumed_tiles, False


def traffic_panels(shape: Shape, records: list[dict], facts: dict | None, programs_per_sm: int | None = None,
                   measured: str = costmodel.RESIDENCY_RECORDED) -> TrafficPanels:
    """The three traffic models at this setting: flash with the tiles its record says it ran, and L2-aware
    on the GPU of the facts with programs_per_sm resident on each SM (story.residency of the recording's
    timelines, `measured` saying where it comes from; None: 1 per SM, assumed: costmodel.machine_from_facts)."""
    tiles, known = flash_tiles(records, shape.seq_len)
    machine = costmodel.machine_from_facts(facts, programs_per_sm, measured)
    return TrafficPanels(
        naive=specs.traffic("naive", shape),
        flash_no_cache=specs.traffic("fa2", shape, *tiles),
        flash_l2=specs.traffic("fa2", shape, *tiles, machine=machine) if machine else None,
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


@dataclass(frozen=True)
class HbmBytes:
    """Standard's and flash's HBM bytes at one setting by the cost model, and as the GPU counted them for the
    recorded run (None where not counted). The ratio is always the model's; ratio_note says so in words
    where no counted ratio stands beside it (standard did not run, or nothing was counted)."""
    naive: int
    flash: int
    naive_counted: int | None
    flash_counted: int | None
    ratio_note: str | None = None  # "model: standard out of memory"; None: counted too

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
        """The ratio card's title: counted where the GPU counted both, else the model's, and says which."""
        return "Standard ÷ flash (model)" if self.modelled else "Standard ÷ flash (counted)"

    @property
    def headline_ratio(self) -> float:
        """The ratio the page leads with: the GPU's count where it counted both kernels, else the cost model's."""
        return self.counted_ratio or self.ratio

    @property
    def headline_source(self) -> str:
        return "cost model" if self.modelled else "counted by the GPU"

    @property
    def flash_model_over_counted(self) -> float | None:
        return self.flash / self.flash_counted if self.flash_counted else None

    @property
    def naive_model_over_counted(self) -> float | None:
        return self.naive / self.naive_counted if self.naive_counted else None


def hbm_bytes(panels: TrafficPanels, records: list[dict], seq_len: int) -> HbmBytes:
    naive_counted = counted_bytes_at(records, "naive", seq_len)
    flash_counted = counted_bytes_at(records, "fa2", seq_len)
    naive = record_at(records, "naive", seq_len)
    note = None
    if naive is not None and naive["status"] == "oom":
        note = f"model: standard {oom_word(naive)}"  # one line under the card: "model: standard out of memory"
    elif naive is not None and naive["status"] != "ok":
        note = "model: standard failed"
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


MODEL_AGREES = 0.20  # the cost model and the counters agree within this (model ÷ counted in 0.8 … 1.2)


def model_off(moved: HbmBytes, panels: TrafficPanels) -> str:
    """Where the flash model is more than 20 % off the count: which way, and why (costmodel.machine says where
    each regime holds on the H200)."""
    ratio = moved.flash_model_over_counted
    if ratio is None or abs(ratio - 1) <= MODEL_AGREES:
        return ""
    small = panels.machine is not None and panels.flash_bytes <= 4 * panels.machine.l2_bytes
    if ratio > 1 and small:
        return (f"Flash's model is {ratio:.2f}× the count here, outside ±{MODEL_AGREES:.0%}: all its traffic is a few "
                f"times the L2, part of the output is still in L2 when the counters stop, and the model counts every "
                f"byte to HBM.")
    if ratio > 1:
        return (f"Flash's model is {ratio:.2f}× the count here, outside ±{MODEL_AGREES:.0%}: the GPU found more of "
                f"the K/V tiles in L2 than the model's premise (one wave of programs sharing each tile) allows, as "
                f"causal programs, short and uneven, share more. Not fitted to hide it.")
    return (f"Flash's model is {ratio:.2f}× the count here, outside ±{MODEL_AGREES:.0%}: the GPU read more than the "
            f"model's premise allows (a wave of programs sharing each K/V tile through L2); where one head's K and V "
            f"no longer fit in L2 beside the others', the tiles are read again from HBM. Not fitted to hide it.")


def _tile_bytes(shape: Shape, order: str, block_m: int, block_n: int) -> tuple[int, int]:
    flash = int(specs.spec(order).trace.step_traffic(shape, block_m, block_n)[f"{order}_bytes"][-1])
    naive = int(costmodel.step_traffic(shape, block_m, block_n)["naive_bytes"][-1])
    return flash, naive


def tiles_bytes_sentence(seq_len: int, head_dim: int, dtype: str, causal: bool, order: str, block_m: int,
                         block_n: int) -> str:
    """The tiling animation's "HBM bytes so far" said as what it is (the cost model's count of the traced kernel's
    loads and stores, one head), and, where flash ends above standard (small tiles over a short sequence), why,
    with what the largest tiles would move."""
    shape = Shape(seq_len, 1, 1, head_dim, dtype, causal)
    flash, naive = _tile_bytes(shape, order, block_m, block_n)
    sentence = "HBM bytes so far: the cost model's count of each kernel's loads and stores for this head."
    if flash <= naive:
        return sentence
    why = ("the FA1 order sends every Q block's O, m and l to HBM and back at each K/V tile" if order == "fa1"
           else "every Q block re-reads K and V")
    sentence += (f" At {block_m}×{block_n} tiles flash ends above standard ({fmt_bytes(flash)} against "
                 f"{fmt_bytes(naive)}): {why}, and with tiles this small that costs more than writing and reading S "
                 f"and P; both grow as N², so only larger tiles change it")
    big = min(costmodel.TILE_SIZES[-1], 1 << (seq_len - 1).bit_length())
    if (big, big) != (block_m, block_n):
        flash_big, naive_big = _tile_bytes(shape, order, big, big)
        sentence += f" (at {big}×{big}: {fmt_bytes(flash_big)} against {fmt_bytes(naive_big)})"
    return sentence + "."
