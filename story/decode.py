"""The decode scene, "Generating: one token against the cache": what the recording's decode records say at one cache
length and batch (time per token, the bandwidth reached on the cache's bytes against the copy roof measured in the
same run, our kernel against SDPA and against our prefill kernel used as-is), and how big a model's KV cache is.

Decode records (bench --decode) are one new token (q_len 1) of Llama 3 8B's attention, 32 query heads sharing 8 K/V
heads, head_dim 128, bf16, against a cache of kv_len tokens; their bytes_moved is the cache's K and V read once with
Q and O, so their GB/s is the bandwidth reached on the work itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import costmodel
from fmt import fmt_bytes, fmt_ratio, fmt_tokens
from kernels import specs
from story.headline import LAUNCH_BOUND_MS

OURS = "decode"
MODEL = "Llama 3 8B"  # whose attention the decode records time (costmodel.decode_shape)
PAGED = "paged"  # a row of our kernel on a paged cache
LATENCY_BOUND_SHARE = 0.5  # a call under LAUNCH_BOUND_MS that reaches less than this share of the roof: fixed costs


@dataclass(frozen=True)
class DecodeRow:
    """One kernel at the setting: its time per token and the bandwidth it reached."""
    key: str                 # the spec's key, or "paged" for our kernel on a paged cache
    label: str
    time_us: float | None
    gbps: float | None
    share: float | None      # of the copy roof
    splits: int | None
    page_size: int | None
    status: str
    why: str = ""            # a failed record's message

    @property
    def latency_bound(self) -> bool:
        """Short and far from the roof: its time is fixed costs (the launch, the first round trips to memory, the
        merge), not the cache's bytes. (The recording times the GPU: each call follows an L2 flush long enough to hide
        the host's launch; BENCHMARKS.md §1b has the host's per-call figures.)"""
        return (self.time_us is not None and self.time_us < LAUNCH_BOUND_MS * 1e3
                and (self.share or 0) < LATENCY_BOUND_SHARE)


def cache_bytes(batch: int, kv_len: int) -> int:
    """The bytes of K and V a decode step reads at the recording's attention (costmodel.decode_shape)."""
    return costmodel.kv_bytes(costmodel.decode_shape(batch, kv_len))


def decode_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("pass") == "decode"]


def decode_batches(records: list[dict]) -> tuple[int, ...]:
    return tuple(sorted({r["batch"] for r in decode_records(records)}))


def decode_lengths(records: list[dict], batch: int) -> tuple[int, ...]:
    return tuple(sorted({r["kv_len"] for r in decode_records(records) if r["batch"] == batch}))


def missing_sentence(records: list[dict], batch: int, kv_len: int, hbm_bytes: int | None = None) -> str:
    """Why the scene has no numbers at (batch, kv_len), and where the recording has them: a cache too big for the
    bench to time on this GPU (it and its copy past costmodel.DECODE_MEMORY_SHARE of the memory), then the lengths it
    timed at this batch, or the batches it timed at all."""
    if not decode_records(records):
        return "this recording has no decode records (`python -m bench --decode` makes them)"
    cache = cache_bytes(batch, kv_len)
    at = (f"the recording timed no decode at {fmt_tokens(kv_len)} tokens × {sequences(batch)} (a cache of "
          f"{fmt_bytes(cache)}")
    if hbm_bytes and 2 * cache > costmodel.DECODE_MEMORY_SHARE * hbm_bytes:
        at += (f": with its copy more than the bench's {costmodel.DECODE_MEMORY_SHARE:.0%} of this GPU's "
               f"{fmt_bytes(hbm_bytes)}")
    at += ")"
    lengths = decode_lengths(records, batch)
    if not lengths:
        return f"{at}; it has batches {', '.join(map(str, decode_batches(records)))}"
    span = fmt_tokens(lengths[0]) if len(lengths) == 1 else f"{fmt_tokens(lengths[0])} to {fmt_tokens(lengths[-1])}"
    return f"{at}; at {sequences(batch)} it has {span}"


def decode_rows(records: list[dict], batch: int, kv_len: int, copy_gbps: float | None) -> list[DecodeRow]:
    """The kernels timed at (batch, kv_len), ours first (contiguous, then paged), then the others in legend order."""
    here = [r for r in decode_records(records) if r["batch"] == batch and r["kv_len"] == kv_len]
    order = {spec.key: i for i, spec in enumerate(specs.all_specs())}
    here.sort(key=lambda r: (r["algorithm"] != OURS, r.get("page_size") is not None, order.get(r["algorithm"], 99)))
    rows = []
    for r in here:
        paged = r["algorithm"] == OURS and r.get("page_size")
        spec = specs.SPECS.get(r["algorithm"])
        label = spec.short if spec else r["algorithm"]
        if r["algorithm"] == "fa2":
            label = "our prefill kernel at q_len 1"
        if paged:
            label = f"{label}, paged by {r['page_size']}"
        ok = r["status"] == "ok" and r.get("time_ms")
        rows.append(DecodeRow(PAGED if paged else r["algorithm"], label, r["time_ms"] * 1e3 if ok else None,
                              r.get("gbps") if ok else None,
                              r["gbps"] / copy_gbps if ok and r.get("gbps") and copy_gbps else None,
                              r.get("num_splits"), r.get("page_size"), r["status"], r.get("message") or ""))
    return rows


def row(rows: list[DecodeRow], key: str) -> DecodeRow | None:
    return next((r for r in rows if r.key == key and r.time_us is not None), None)


def _versus(speedup: float) -> str:
    """How ours compares with another kernel whose time ÷ ours is `speedup`: level within 3 %, in per cent within
    10 % ("1.0× slower" would say nothing), else as a ratio."""
    if 0.97 <= speedup <= 1.03:
        return "level with"
    slower = speedup < 1
    factor = 1 / speedup if slower else speedup
    amount = f"{factor - 1:.0%}" if factor < 1.1 else fmt_ratio(factor)
    return f"{amount} {'slower' if slower else 'faster'} than"


def copy_roof(meta: dict | None, facts: dict | None) -> float | None:
    """The copy roof decode is measured against: the one the decode bench measured in its own run, else the GPU's."""
    return (meta or {}).get("decode_copy_gbps") or (facts or {}).get("copy_gbps")


def sequences(batch: int) -> str:
    return f"{batch} sequence{'s' if batch > 1 else ''}"


def prefill_times(ours: DecodeRow, prefill: DecodeRow) -> str:
    """"23×": our prefill kernel used as-is takes this many times our decode kernel's time."""
    return fmt_ratio(prefill.time_us / ours.time_us)


def versus_sdpa(ours: DecodeRow, cudnn: DecodeRow) -> str:
    """"4% slower than": ours against SDPA's default (cuDNN) at the same setting."""
    return _versus(cudnn.time_us / ours.time_us)


def splits_words(ours: DecodeRow) -> str:
    """"33 splits of the cache per sequence and K/V head": how our kernel cut the cache at this setting."""
    return f"{ours.splits or 1} split{'s' if (ours.splits or 1) > 1 else ''} of the cache per sequence and K/V head"


def roof_words(ours: DecodeRow) -> str:
    """"88% of the copy roof measured in the same run", and why decode can pass it where it does."""
    where = f"{ours.share:.0%} of the copy roof measured in the same run" if ours.share else "no roof recorded"
    if ours.share and ours.share > 1:
        where += " (a copy reads and writes every byte; decode only reads, and can pass it)"
    return where


def decode_sentence(rows: list[DecodeRow], batch: int, kv_len: int, sm_count: int | None) -> str:
    """What the scene's numbers say, true at every stop: the job (stream the cache once), ours against the roof and
    cuDNN, where fixed costs rather than bandwidth are the time, and what our prefill kernel does with one query row."""
    ours, cudnn, prefill = row(rows, OURS), row(rows, "sdpa_default"), row(rows, "fa2")
    shape = costmodel.decode_shape(batch, kv_len)
    parts = [f"One new token of {MODEL}'s attention ({shape.heads} query heads sharing {shape.kv_heads} K/V heads, "
             f"head_dim {shape.head_dim}, bf16) "
             f"for {sequences(batch)} against {fmt_tokens(kv_len)} cached tokens each: "
             f"the whole job is to read the cache's K and V once, {fmt_bytes(cache_bytes(batch, kv_len))}."]
    if ours is None:
        parts.append("Our split-KV kernel was not timed at this setting.")
        return " ".join(parts)
    where = roof_words(ours)
    parts.append(f"Our split-KV kernel ({splits_words(ours)}) takes {ours.time_us:,.0f} µs: {where}.")
    if ours.latency_bound:
        at_roof = f" would take {ours.time_us * ours.share:,.0f} µs at the copy roof" if ours.share else " is small"
        parts.append(f"At this size the cache{at_roof}: the rest is fixed costs (the launch on the GPU, the first "
                     f"round trips to memory, the merge of the splits), not bandwidth.")
    if cudnn is not None:
        parts.append(f"That is {versus_sdpa(ours, cudnn)} SDPA's default (cuDNN), {cudnn.time_us:,.0f} µs.")
    if prefill is not None:
        programs = batch * shape.heads
        idle = f", {programs} programs on {sm_count} SMs" if sm_count else ""
        times = prefill_times(ours, prefill)
        used = (f"Our prefill kernel used as-is (one program per query head, each streaming a whole cache{idle}, no "
                f"grouped heads) takes {prefill.time_us:,.0f} µs, {times} ours")
        if ours.latency_bound:  # (the prefill kernel's own low share is its design: too few programs, K/V per head)
            parts.append(used + ": at this size both calls are mostly fixed costs, not bandwidth.")
        else:
            parts.append(used + ": the problem Flash-Decoding's split of the cache solved.")
    return " ".join(parts)


@dataclass(frozen=True)
class CacheRow:
    """A model's KV cache: per token (its real K/V heads), as if every query head had its own, and what fits."""
    label: str
    layers: int
    kv_heads: int
    heads: int
    per_token: int           # bytes, bf16, K and V of every layer
    per_token_mha: int       # the same with a K/V head per query head
    tokens_fit: int          # tokens of cache that fit in the device's memory (weights aside)
    sequences_fit: int       # sequences of kv_len tokens that fit


def kv_cache_rows(presets: dict, hbm_bytes: int | None, kv_len: int) -> list[CacheRow]:
    """Each model preset's KV cache against the device's memory (all of it, the model's weights left aside: an upper
    bound of what a serving system can give the cache)."""
    rows = []
    for preset in presets.values():
        per_token = preset.kv_bytes_per_token()
        mha = 2 * preset.layers * preset.heads * preset.head_dim * 2
        tokens = int(hbm_bytes // per_token) if hbm_bytes else 0
        rows.append(CacheRow(preset.label, preset.layers, preset.kv_heads, preset.heads, per_token, mha, tokens,
                             tokens // kv_len if kv_len else 0))
    return rows


def kv_cache_table(rows: list[CacheRow], kv_len: int, hbm_bytes: int | None) -> list[dict]:
    """The cache table as the page shows it (strings)."""
    memory = fmt_bytes(hbm_bytes) if hbm_bytes else "the device"
    return [{"model": r.label,
             "layers × K/V heads (query heads)": f"{r.layers} × {r.kv_heads} ({r.heads})",
             "KV cache per token": fmt_bytes(r.per_token)
             + (f" ({fmt_ratio(r.per_token_mha / r.per_token)} smaller than one K/V head per query head)"
                if r.per_token_mha != r.per_token else ""),
             f"tokens in {memory}": f"{r.tokens_fit:,}",
             f"sequences of {fmt_tokens(kv_len)}": f"{r.sequences_fit:,}"} for r in rows]
