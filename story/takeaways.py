"""The takeaways scene: the same numbers as the scenes that show them, in sentences and as slides."""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from costmodel import Shape
from fmt import fmt_bytes, fmt_ratio, fmt_tokens
from kernels import specs
from story.compare import TrafficPanels, hbm_bytes
from story.headline import Headline, compute_bound, headline, launch_bound, speedup_words
from story.records import (OUT_OF_MEMORY, first_out_of_memory, oom_card_word, oom_text, oom_word, record_at,
                           refused)
from story.roofline import roofline_points
from story import backward, decode, ring


def ring_evidence(runs) -> tuple[dict, float, float | None] | None:
    """(our fastest layout at the most GPUs and the longest length with a one-GPU time, its parallel efficiency, its
    speed over PyTorch's context_parallel or None) from a recording's ring runs, as the ring scene shows them; None
    where no such run finished."""
    runs = list(runs)
    world = ring.pick_world(runs, 0)
    shape = ring.pick_shape(runs, world) if world else None
    for seq_len in sorted(ring.ring_lengths(runs, world, shape), reverse=True) if shape else ():
        best = ring.best_ours(runs, world, shape, seq_len)
        if best is not None and ring.efficiency(best) is not None:
            return best, ring.efficiency(best), ring.vs_peer(runs, best)
    return None


def _of_datasheet(tflops: float, facts: dict | None, short: bool = False) -> str:
    """", 54% of the datasheet's 989": a rate's share of the GPU's datasheet peak, where the GPU is listed."""
    sheet = costmodel.datasheet((facts or {}).get("name"))
    if not sheet:
        return ""
    share = f"{tflops / sheet.bf16_dense_tflops:.0%}"
    return f", {share} of spec" if short else f", {share} of the datasheet's {sheet.bf16_dense_tflops:,.0f}"


@dataclass(frozen=True)
class DecodeEvidence:
    """The decode scene's inputs (always a recording's, `python -m bench --decode`): its decode records, the link's
    sequences and cache length, and the copy roof of the run that timed them (story.decode.copy_roof)."""
    records: tuple[dict, ...]
    batch: int
    kv_len: int
    copy_gbps: float | None


@dataclass(frozen=True)
class BackwardEvidence:
    """The backward scene's inputs: the quoted recording's backward records (its memory view reads them at the talk's
    setting), and its speed view's backward and forward records (timed now where a live page times them)."""
    recorded: tuple[dict, ...]
    backward: tuple[dict, ...]
    forward: tuple[dict, ...]
    live: bool = False


@dataclass(frozen=True)
class Evidence:
    """What the takeaways rest on: every number in them is one another scene shows."""
    records: list[dict]              # FA-2 and naive over the slider's lengths
    at_length: list[dict]            # every algorithm's records at the slider's length
    panels: TrafficPanels            # the compare scene's traffic models
    facts: dict | None               # the GPU's facts
    gpu: str = "the GPU"             # its name, already safe to show as markdown
    max_abs_err: float | None = None  # the exactness check of the tiling scene, and its length
    trace_len: int | None = None
    ring: tuple = ()                 # the recording's ring runs (bench.ring): the ring scene's
    decode: DecodeEvidence | None = None      # the decode scene's, at the link's batch and cache length
    backward: BackwardEvidence | None = None  # the backward scene's, at the talk's shape


_SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11, "float32": 24}  # with the implicit bit


def _precision(dtype: str) -> str:
    """' (bfloat16 keeps 8 significant bits: a value's last bit is 1/256 of it)' — why an error of ~1e-2 is rounding."""
    bits = _SIGNIFICANT_BITS.get(dtype)
    return f" ({dtype} keeps {bits} significant bits: a value's last bit is 1/{2 ** bits:,} of it)" if bits else ""


def fa3_evidence(at_length: list[dict], seq_len: int) -> tuple[dict, list[tuple[float, str]]] | None:
    """Our FA-3 style kernel's record at seq_len and its speed ÷ each of PyTorch SDPA's default and our FA-2-order
    kernel measured there (the takeaways' FA-3 card and its words); None where it has no number here."""
    v3 = record_at(at_length, "fa3", seq_len)
    if not (v3 and v3["status"] == "ok" and v3.get("tflops")):
        return None
    others = ((record_at(at_length, "sdpa_default", seq_len), "SDPA's default"),
              (record_at(at_length, "fa2", seq_len), "our FA-2-order kernel"))
    return v3, [(v3["tflops"] / other["tflops"], name) for other, name in others
                if other and other["status"] == "ok" and other.get("tflops")]


def decode_evidence(found: DecodeEvidence | None) -> tuple[decode.DecodeRow, decode.DecodeRow | None,
                                                          decode.DecodeRow | None] | None:
    """(ours, SDPA's default or None, our prefill kernel as-is or None): the decode scene's rows at its setting
    (story.decode.decode_rows), ours timed there; None where it was not."""
    if found is None:
        return None
    rows = decode.decode_rows(list(found.records), found.batch, found.kv_len, found.copy_gbps)
    ours = decode.row(rows, decode.OURS)
    return (ours, decode.row(rows, "sdpa_default"), decode.row(rows, "fa2")) if ours else None


def _decode_setting(found: DecodeEvidence) -> str:
    """"Llama 3 8B, 1 sequence, 128K cached tokens": the decode scene's own setting, not the talk's shape."""
    return f"{decode.MODEL}, {decode.sequences(found.batch)}, {fmt_tokens(found.kv_len)} cached tokens"


def _decode_roof(ours: decode.DecodeRow) -> str:
    """"88% of the copy roof" (the decode scene's share), else the time per token where no roof was recorded."""
    return f"{ours.share:.0%} of the copy roof" if ours.share else f"{ours.time_us:,.0f} µs a token"


def _decode_point(evidence: Evidence, scene: dict[str, int]) -> str | None:
    """The decode scene's numbers in words: ours against the copy roof, SDPA's default and our prefill kernel."""
    found = decode_evidence(evidence.decode)
    if not found:
        return None
    ours, cudnn, prefill = found
    said = (f"**Generating: one token against the cache.** Decode's whole job is to read the KV cache once per token. "
            f"{_decode_setting(evidence.decode)} (the decode scene's setting, not the talk's): our split-KV kernel "
            f"({decode.splits_words(ours)}) takes {ours.time_us:,.0f} µs a token"
            + (f", {ours.gbps / 1000:,.2f} TB/s, {decode.roof_words(ours)}" if ours.gbps else ""))
    if ours.latency_bound:
        said += ", mostly fixed costs at this size, not bandwidth"
    if cudnn:
        said += f"; {decode.versus_sdpa(ours, cudnn)} SDPA's default (cuDNN), {cudnn.time_us:,.0f} µs"
    if prefill:
        said += (f"; our prefill kernel used as-is takes {prefill.time_us:,.0f} µs, "
                 f"{decode.prefill_times(ours, prefill)} as long")
    return said + f" (recorded; scene {scene['decode']})."


def _backward_point(evidence: Evidence, shape: Shape, scene: dict[str, int]) -> str | None:
    """The backward scene's numbers in words: what a training step keeps, the memory chart's wall, our backward's
    speed against cuDNN's and its own forward's."""
    found = backward_evidence(evidence, shape)
    if not found:
        return None
    (standard, flash, less), wall, mine = found
    said = (f"**Training: O and the LSE, not P.** For the backward, standard attention's autograd keeps the N × N "
            f"probabilities: a training step at N = {fmt_tokens(shape.seq_len)} keeps at least {fmt_bytes(standard)} "
            f"for attention; flash keeps O and one LSE per row, {fmt_bytes(flash)}, {less} less "
            f"(scene {scene['backward']}).")
    if wall:
        said += f" {ring.sentence_case(wall['text'])}."
    if not mine:
        return said
    versus = [f"{ratio} {whose}" for ratio, whose in ((mine.vs_cudnn, "cuDNN's"),
                                                      (mine.vs_forward, "its own forward's")) if ratio]
    return (said + f" The backward of {specs.spec(mine.bar.algorithm).short} runs {mine.bar.tflops:,.0f} TFLOPS"
            + (f", {' and '.join(versus)}" if versus else "")
            + f" ({'measured live' if evidence.backward.live else 'recorded'}).")


def backward_evidence(evidence: Evidence, shape: Shape) -> tuple | None:
    """((standard's bytes, flash's, how many times less) a training step keeps at the talk's shape, the memory
    chart's wall or None, our backward against cuDNN's and its forward or None): the backward scene's own numbers
    (story.backward); None without the scene's inputs."""
    found = evidence.backward
    if found is None:
        return None
    records = backward.at_setting(list(found.recorded), shape)
    hbm_bytes = (evidence.facts or {}).get("hbm_bytes")
    wall = backward.training_wall(records) or backward.formula_wall(shape, hbm_bytes)
    bars = backward.tflops_bars(list(found.backward), list(found.forward), shape)
    return backward.training_memory(shape), wall, backward.ours_against(bars)


def takeaways(evidence: Evidence, shape: Shape, scene: dict[str, int]) -> list[str]:
    """The takeaways as markdown points at the talk's shape, each resting on a number another scene shows.
    scene: scene key → its number on the page."""
    records, at_length, panels, facts, gpu = (evidence.records, evidence.at_length, evidence.panels, evidence.facts,
                                              evidence.gpu)
    max_abs_err, trace_len = evidence.max_abs_err, evidence.trace_len
    seq_len, batch, heads, head_dim, dtype = shape.seq_len, shape.batch, shape.heads, shape.head_dim, shape.dtype
    numbers = headline(records, shape)
    at = f"at {fmt_tokens(seq_len)} tokens (batch {batch} × {heads} heads, head_dim {head_dim}, {dtype})"
    naive_here = record_at(records, "naive", seq_len)
    oom_here = naive_here is not None and naive_here["status"] == "oom"
    points = [f"**Memory: O(N²) → O(N).** Standard attention needs {fmt_bytes(numbers.naive_bytes)} beyond its "
              f"inputs {at}; flash needs {fmt_bytes(numbers.flash_bytes)} (scene {scene['headline']})."]
    if oom_here:
        points.append(f"**Traffic.** Standard attention could not run here: {oom_word(naive_here)} ({oom_text(naive_here)}), "
                      f"so it moved nothing; flash's HBM traffic is {fmt_bytes(panels.flash_bytes)} by the "
                      f"L2-aware model (scene {scene['compare']}).")
    else:
        moved = hbm_bytes(panels, records, seq_len)
        if moved.counted_ratio:
            points.append(f"**Traffic, not FLOPs.** Both do the same matmuls, but the GPU's counters read standard "
                          f"moving {fmt_bytes(moved.naive_counted)} through HBM and flash "
                          f"{fmt_bytes(moved.flash_counted)}, {fmt_ratio(moved.counted_ratio)} less (the cost model: "
                          f"{fmt_bytes(moved.naive)} and {fmt_bytes(moved.flash)}; scene {scene['compare']}).")
        else:
            points.append(f"**Traffic, not FLOPs.** Both do the same matmuls, but standard moves "
                          f"{fmt_bytes(moved.naive)} through HBM and flash {fmt_bytes(moved.flash)}, "
                          f"{fmt_ratio(moved.ratio)} less (cost model; scene {scene['compare']}).")
    peak, copy = (facts or {}).get("matmul_tflops"), (facts or {}).get("copy_gbps")
    points_here = roofline_points([r for r in at_length if r["seq_len"] == seq_len])
    flash_point = next((p for p in points_here if p.algorithm == "fa2"), None)
    naive_points = [p for p in points_here if p.algorithm == "naive"]
    if peak and copy and flash_point and naive_points:
        ridge = costmodel.ridge_point(peak, copy)
        worst = max(naive_points, key=lambda p: p.intensity)
        points.append(
            f"**Memory-bound → compute-bound.** The ridge of {gpu}'s roofline is at {ridge:,.0f} FLOPs per HBM byte. "
            f"Standard's kernels sit left of it (at most {worst.intensity:,.0f} FLOPs/byte): the bandwidth roof "
            f"({copy / 1000:,.2f} TB/s) caps them. Flash does {flash_point.intensity:,.0f} FLOPs per byte, right of "
            f"the ridge, and runs at {flash_point.tflops:,.0f} TFLOPS, {flash_point.tflops / peak:.0%} of the "
            f"measured {peak:,.0f} TFLOPS matmul roof{_of_datasheet(flash_point.tflops, facts)} "
            f"(scene {scene['roofline']}).")
    points.append(_backward_point(evidence, shape, scene))
    flash_here = record_at(records, "fa2", seq_len)
    if numbers.speedup.endswith("×"):
        moved = hbm_bytes(panels, records, seq_len)
        speed = float(numbers.speedup.rstrip("×"))
        if launch_bound(flash_here, records):
            why = ("At this size both calls are short enough that launching them takes much of their time: this "
                   "compares launches more than algorithms" if launch_bound(naive_here, records) else
                   "At this size flash's call is short enough that launching it takes much of its time: the "
                   "speedup undersells its kernel")
        elif compute_bound(flash_here, facts) and speed > 1:
            why = ("Once the bytes are gone, arithmetic sets flash's time, so the speedup is the standard kernels' "
                   "bandwidth-bound time over flash's compute-bound time")
        else:
            why = "Flash runs here well below the matmul roof: neither bytes nor arithmetic alone sets its time"
        points.append(
            f"**Speed: {speedup_words(speed)}, against {fmt_ratio(moved.headline_ratio)} fewer bytes.** Measured on {gpu}: "
            f"{numbers.speedup_why}. {why} (scenes {scene['headline']}, {scene['seqlen']}).")
    wall = first_out_of_memory(records)
    if wall:
        did = "were refused before any launch" if refused(wall) else f"ran {OUT_OF_MEMORY}"
        points.append(f"**The wall.** On {gpu} the standard kernels {did} at "
                      f"{fmt_tokens(wall['seq_len'])} tokens ({oom_text(wall)}); flash kept going "
                      f"(scene {scene['seqlen']}).")
    found = ring_evidence(evidence.ring)
    if found:
        best, eff, peer = found
        points.append(f"**Past one GPU.** The ring cut {fmt_tokens(best['seq_len'])} tokens "
                      f"({ring.shape_words(ring.shape_key(best))}) across "
                      f"{best['world_size']} GPUs ({best['layout']} layout) and ran {eff:.0%} as efficiently as a "
                      f"perfect {best['world_size']}-fold speedup of one GPU"
                      + (f", {peer:.2f}× PyTorch's context_parallel" if peer else "")
                      + f" (recorded; scene {scene['ring']}).")
    points.append(_decode_point(evidence, scene))
    fa3 = fa3_evidence(at_length, seq_len)
    if fa3:  # the slides' FA-3 card, in words
        v3, ratios = fa3
        versus = " and ".join(f"{ratio:.2f}× {name}" for ratio, name in ratios)
        points.append(f"**FA-3 style, ours.** On Hopper a producer warp loads tiles by TMA while two consumer "
                      f"warpgroups take turns on the tensor cores: our Gluon kernel runs {v3['tflops']:,.0f} TFLOPS "
                      f"{at}" + (f", {versus}" if versus else "") + f" (scene {scene['evolution']}).")
    if max_abs_err is not None and trace_len:
        points.append(f"**Exact, not approximate.** On the same random inputs ({trace_len} tokens, {dtype}), flash "
                      f"and the standard kernels differ by at most {max_abs_err:.1e}: rounding, nothing more"
                      f"{_precision(dtype)} "
                      f"(scene {scene['tiling']}).")
    return [point for point in points if point]


# -- the takeaways as slides: a number and a line each ---------------------------------------------------------

@dataclass(frozen=True)
class Slide:
    title: str    # a few words
    number: str   # the number the audience remembers
    line: str     # one line that says what it is (markdown-safe)
    scene: int    # the scene that shows it


def takeaway_slides(evidence: Evidence, shape: Shape, scene: dict[str, int]) -> list[Slide]:
    """The takeaways as slides, the same numbers as `takeaways` (which says them in sentences), in the talk's order:
    memory, traffic, where flash sits on the roofline, what training keeps (the backward), the speedup with the wall
    (the wall alone past it), the ring past one GPU where it was recorded, decode where it was recorded, the FA-3
    style kernel where it ran; exactness last. Nine at most: three rows of three fit the 1920 × 1080 canvas."""
    records, at_length, panels, facts = evidence.records, evidence.at_length, evidence.panels, evidence.facts
    max_abs_err, trace_len = evidence.max_abs_err, evidence.trace_len
    seq_len = shape.seq_len
    numbers = headline(records, shape)
    n = fmt_tokens(seq_len)
    slides = [Slide("Memory: O(N²) → O(N)", f"{fmt_bytes(numbers.naive_bytes)} → {fmt_bytes(numbers.flash_bytes)}",
                    f"extra memory at {n} tokens, standard → flash", scene["headline"])]
    naive_here = record_at(records, "naive", seq_len)
    moved = hbm_bytes(panels, records, seq_len)
    if naive_here is None or naive_here["status"] != "oom":
        slides.append(Slide("Traffic, not FLOPs", f"{fmt_ratio(moved.headline_ratio)} fewer bytes",
                            f"through HBM at {n} ({'model' if moved.modelled else 'counted'}), same matmuls",
                            scene["compare"]))
    peak, copy = (facts or {}).get("matmul_tflops"), (facts or {}).get("copy_gbps")
    flash_point = next((p for p in roofline_points([r for r in at_length if r["seq_len"] == seq_len])
                        if p.algorithm == "fa2"), None)
    flash_here = record_at(records, "fa2", seq_len)
    if peak and copy and flash_point:
        ridge = costmodel.ridge_point(peak, copy)
        side = "right" if flash_point.intensity >= ridge else "left"
        title = "Compute-bound" if compute_bound(flash_here, facts) else f"{side.capitalize()} of the ridge"
        slides.append(Slide(title, f"{flash_point.intensity:,.0f} FLOPs/byte",
                            f"flash, {side} of the ridge ({ridge:,.0f}): {min(flash_point.tflops / peak, 1.0):.0%} "
                            f"of the measured roof{_of_datasheet(flash_point.tflops, facts, short=True)}",
                            scene["roofline"]))
    slides.append(_backward_slide(evidence, shape, scene))
    slides.append(_speed_slide(numbers, records, facts, seq_len, scene))
    found = ring_evidence(evidence.ring)
    if found:
        best, eff, peer = found
        slides.append(Slide("Past one GPU", f"{eff:.0%} efficient",
                            f"ring over {best['world_size']} GPUs, {fmt_tokens(best['seq_len'])} tokens, "
                            f"{best['layout']}" + (f": {peer:.2f}× PyTorch's context_parallel" if peer else ""),
                            scene["ring"]))
    slides.append(_decode_slide(evidence, scene))
    fa3 = fa3_evidence(at_length, seq_len)
    if fa3:
        v3, ratios = fa3
        versus = "".join(f", {ratio:.2f}× {name}" for ratio, name in ratios)
        slides.append(Slide("FA-3 style, ours", f"{v3['tflops']:,.0f} TFLOPS",
                            f"at {n}: producer warp, ping-pong consumers{versus}", scene["evolution"]))
    if max_abs_err is not None and trace_len:
        slides.append(Slide("Exact, not approximate", f"{max_abs_err:.1e}",
                            f"max |O_flash − O_standard| on the same inputs ({trace_len} tokens): "
                            f"{shape.dtype.replace('bfloat16', 'bf16').replace('float16', 'fp16')} rounding",
                            scene["tiling"]))
    return [slide for slide in slides if slide]


def _speed_slide(numbers: Headline, records: list[dict], facts: dict | None, seq_len: int,
                 scene: dict[str, int]) -> Slide | None:
    """The sequence-length scene's card: the measured speedup at the talk's N, and in its line where standard hit
    the wall (the same scene shows both); past the wall, the wall alone."""
    n = fmt_tokens(seq_len)
    naive_here, flash_here = record_at(records, "naive", seq_len), record_at(records, "fa2", seq_len)
    wall = first_out_of_memory(records)
    if not numbers.speedup.endswith("×"):
        return Slide("The wall", fmt_tokens(wall["seq_len"]), f"tokens: standard {oom_card_word(wall)}, too big for "
                     "the GPU; flash kept going", scene["seqlen"]) if wall else None
    speed = float(numbers.speedup.rstrip("×"))
    line = (f"at {n}: both calls are mostly their launch here" if launch_bound(flash_here, records) and
            launch_bound(naive_here, records) else
            f"at {n}: flash's call is mostly its launch here" if launch_bound(flash_here, records) else
            f"at {n}: arithmetic, not bytes, sets the time" if compute_bound(flash_here, facts) and speed > 1
            else f"at {n}")
    beyond = f"; standard {oom_card_word(wall)} from {fmt_tokens(wall['seq_len'])}" if wall else ""
    return Slide("Speed", numbers.speedup, f"{speedup_words(speed).split(' ', 1)[1]} {line}{beyond}", scene["seqlen"])


def _backward_slide(evidence: Evidence, shape: Shape, scene: dict[str, int]) -> Slide | None:
    """The backward scene's card: what a training step keeps at the talk's N, standard → flash; our backward
    against cuDNN's where it was measured."""
    found = backward_evidence(evidence, shape)
    if not found:
        return None
    (standard, flash, _), _, mine = found
    speed = (f"; {specs.spec(mine.bar.algorithm).short} backward {mine.vs_cudnn} cuDNN's "
             f"({'live' if evidence.backward.live else 'recorded'})" if mine and mine.vs_cudnn else "")
    return Slide("Training: O + LSE, not P", f"{fmt_bytes(standard)} → {fmt_bytes(flash)}",
                 f"kept for the backward at {fmt_tokens(shape.seq_len)}{speed}", scene["backward"])


def _decode_slide(evidence: Evidence, scene: dict[str, int]) -> Slide | None:
    """The decode scene's card at its own setting: ours against the copy roof, SDPA's default, our prefill kernel."""
    found = decode_evidence(evidence.decode)
    if not found:
        return None
    ours, cudnn, _ = found
    at = evidence.decode  # its own setting, in a card's few words (two lines: nine cards fit the canvas); the
    # prefill kernel's time, the scene's Flash-Decoding point, is in the words (_decode_point)
    line = f"{decode.MODEL}, {at.batch} × {fmt_tokens(at.kv_len)} tokens: {ours.time_us:,.0f} µs/token"
    line += ", mostly fixed costs" if ours.latency_bound else ""
    line += "; reads only, a copy also writes" if (ours.share or 0) > 1 else ""
    line += f"; {decode.versus_sdpa(ours, cudnn)} SDPA's default" if cudnn else ""
    return Slide("Generating: split-KV decode", _decode_roof(ours), line + " (recorded)", scene["decode"])
