"""The decode kernel (kernels/decode.py) on the H200, in one run of about 6 minutes (each section has a time guard,
the whole run stops at 7.5 minutes; a failing shape or backend prints a line and the rest goes on; a WRONG answer
stops the run before anything is timed).

    python -m perf.h200.decode_speed            (from the repository root, on the GPU; torch, triton, numpy only)
    OUT=dir python -m perf.h200.decode_speed    (decode_speed.json goes to dir; default: the current directory)
    QUICK=1 python -m perf.h200.decode_speed    (fewer candidates and shapes: about 2 minutes)
    SMOKE=1 python -m perf.h200.decode_speed    (no GPU: every section at toy sizes in Triton's CPU interpreter, to
                                                 check the script itself; its numbers mean nothing)

a. correctness: ours (shipped configs) against float64 at ragged lengths (1, a page boundary, not a tile multiple),
   q_len 1 and 4, causal or not, GQA 1/4/8 and MQA, contiguous and paged (pages of 16, 64, 256 under shuffled block
   tables), bf16/fp16/fp32, split counts chosen, 1 and several. Any WRONG answer: the run stops (exit 2).
b. the roof: a device copy of 1 and 2 GiB, bytes read + written ÷ time (the best of the two).
c. tiles: (block_n, num_warps, num_stages) candidates at (1, 32, 8, 128K) and (64, 32, 8, 16K), each checked
   against float64 before it is timed; the best few go on.
d. the sweep, bf16, head_dim 128, q_len 1, 32 query / 8 K/V heads, batch 1/8/32/64 × cache 1K/4K/16K/64K/128K: the
   best few tiles × split counts (the heuristic's, 1, and those of 1-4 programs per SM): the best per shape and how
   far the shipped choice (config_for_decode + the split heuristic) is from it. Ends with the line to paste into
   TUNED_DECODE_CONFIGS (the config best over all shapes, geometric mean of time ÷ that shape's best).
e. the goal table at the sweep's shapes and the issue's (1,32,8,128K) (8,32,8,32K) (64,32,8,4K) (1,32,32,128K)
   (16,32,32,8K): median µs (do_bench, L2 flushed; the median of 3 interleaved rounds) and GB/s of the cache (K+V bytes ÷ time) of ours (shipped
   choice, and the sweep's best), SDPA default (cuDNN; enable_gqa), SDPA FLASH_ATTENTION, our prefill kernel
   (kernels/fa2.py's _attn_fwd) launched as a prefill launches at q_len 1 (one program per batch·query head, K/V
   expanded to the query heads outside the timing; skipped past 24 GiB), each as % of the copy roof, and the ratios:
   SDPA default ÷ ours (goal >= 1.0), ours % of copy (goal >= 90), prefill-q1 ÷ ours (goal >= 8 at 1,32,8,128K).
   The peers run non-causal (at q_len 1 the same attention; SDPA's is_causal would align top-left) and must agree
   with ours before they are timed.
f. paged vs contiguous: pages of 16, 64 and 256 under a shuffled block table at four shapes, timed with the
   contiguous call in 3 interleaved rounds: time ÷ contiguous (goal <= 1.05 at page 64).
g. per call, host included (wall time of 1000 back-to-back calls ÷ 1000, no flush; median of 3 interleaved
   rounds): ours at batch 1 (32, 8) heads 1K and 4K with cache_seqlens and without (SDPA takes none: the
   like-for-like call), SDPA default there; kernels.fa2.flash_attention and the library's kernels.flash_attention
   ("auto") at 1K B2 H16 d64 vs SDPA default there; then one call of
   ours captured in a CUDA graph: replay == eager, replay follows a new q written into the captured buffer, and the
   replay's per-call time.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

from kernels.runtime import backend, backend_reason  # first: it sets TRITON_INTERPRET where there is no GPU
import torch
import triton
from triton.testing import do_bench

from kernels import decode
from kernels.decode import DecodeConfig, config_for_decode, decode_attention
from kernels.reference import reference_decode, relative_error

QUICK = os.environ.get("QUICK", "") not in ("", "0")
SMOKE = os.environ.get("SMOKE", "") not in ("", "0")
DEV = "cpu" if SMOKE else "cuda"
D, DTYPE, HQ, HKV = (32 if SMOKE else 128), torch.bfloat16, 32, 8
K = 1024
GRID = [(b, HQ, HKV, n * K) for b in ((1, 64) if QUICK else (1, 8, 32, 64))
        for n in ((4, 128) if QUICK else (1, 4, 16, 64, 128))]
ISSUE_SHAPES = [(1, 32, 8, 128 * K), (8, 32, 8, 32 * K), (64, 32, 8, 4 * K), (1, 32, 32, 128 * K),
                (16, 32, 32, 8 * K)]
TILE_SHAPES = [(1, 32, 8, 128 * K), (64, 32, 8, 16 * K)]
TILE_CANDIDATES = [(32, 2, 4), (32, 4, 4), (64, 2, 4), (64, 4, 2), (64, 4, 3), (64, 4, 4), (64, 4, 5), (64, 8, 3),
                   (128, 4, 2), (128, 4, 3), (128, 4, 4), (128, 8, 2), (128, 8, 3), (256, 4, 2), (256, 8, 2),
                   (256, 8, 3)]  # (block_n, num_warps, num_stages)
if QUICK:
    TILE_CANDIDATES = [(64, 4, 3), (64, 4, 4), (128, 4, 2), (128, 4, 3), (128, 8, 3)]
PROGRAMS_PER_SM = (1, 2, 3, 4)
PAGE_SHAPES = [(1, 32, 8, 128 * K), (8, 32, 8, 32 * K), (32, 32, 8, 16 * K), (64, 32, 8, 4 * K)]
PAGE_SIZES = (16, 64, 256)
TOP = 3
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
BUDGET_S = {"check": 45, "tiles": 70, "sweep": 110, "goal": 90, "paged": 45, "per_call": 30}
DEADLINE_S = 450  # the whole run: sections past it are skipped
PREFILL_MAX_BYTES = 24 << 30  # K/V expanded to the query heads for the prefill kernel, at most
REP_SWEEP_MS, REP_GOAL_MS = 10, 25
GOAL_ROUNDS = 3  # interleaved rounds of the goal table and the paged comparison (time_rounds)
PER_CALL_LENGTHS, PREFILL_PER_CALL_N, COPY_BYTES = (1 * K, 4 * K), 1024, (1 << 30, 2 << 30)
if SMOKE:  # toy sizes, for the interpreter
    HQ, HKV = 4, 2
    GRID = [(1, HQ, HKV, 200), (2, HQ, HKV, 100)]
    ISSUE_SHAPES = [(1, 4, 1, 150)]
    TILE_SHAPES = GRID[:1]
    TILE_CANDIDATES = [(32, 4, 1), (64, 4, 1)]
    PROGRAMS_PER_SM = (1, 2)
    PAGE_SHAPES, PAGE_SIZES = GRID[:1], (16, 64)
    PER_CALL_LENGTHS, PREFILL_PER_CALL_N, COPY_BYTES = (64, 128), 64, (1 << 20,)


class Run:
    """The log (printed as it goes) and the JSON record."""

    def __init__(self):
        self.start = time.perf_counter()
        self.record: dict = {"sections": {}, "quick": QUICK}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def say(self, *parts) -> None:
        print(f"[{self.elapsed():6.1f}s] " + " ".join(str(p) for p in parts), flush=True)

    def failed(self, what: str, exc: BaseException) -> None:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        self.say(f"FAILED {what}: {type(exc).__name__}: {first}")
        self.record.setdefault("failures", []).append({"what": what, "error": f"{type(exc).__name__}: {exc}"[:2000],
                                                       "trace": traceback.format_exc()[-2000:]})

    def deadline(self, section: str) -> float:
        """When this section stops: its own budget, or the whole run's deadline, whichever comes first."""
        return time.perf_counter() + max(0.0, min(BUDGET_S[section], DEADLINE_S - self.elapsed()))


def bench_us(fn, rep_ms: float) -> float:
    """Median µs of fn over do_bench's runs (each after an L2 flush)."""
    if SMOKE:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e6
    return do_bench(fn, warmup=max(2, rep_ms // 4), rep=rep_ms, return_mode="median") * 1e3


def sync() -> None:
    if not SMOKE:
        torch.cuda.synchronize()


def free() -> None:
    if not SMOKE:
        torch.cuda.empty_cache()


def cache_bytes(batch, heads_kv, length, dtype=DTYPE, head_dim=D) -> int:
    """K and V of the cache: the bytes a decode step must read."""
    return 2 * batch * heads_kv * length * head_dim * torch.empty((), dtype=dtype).element_size()


def label(shape) -> str:
    b, hq, hkv, n = shape
    return f"B{b} H{hq}/{hkv} {n // K}K" if n % K == 0 else f"B{b} H{hq}/{hkv} L{n}"


def make_inputs(batch, heads_q, heads_kv, length, q_len=1, dtype=DTYPE, lengths=None, seed=0, head_dim=D):
    """(q, k, v, cache_seqlens) on the GPU: random caches of `length` keys, seqlens `lengths` (default: full)."""
    gen = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(batch, heads_q, q_len, head_dim, device=DEV, generator=gen).to(dtype)
    k, v = (torch.randn(batch, heads_kv, length, head_dim, device=DEV, generator=gen, dtype=dtype)
            for _ in range(2))
    seqlens = torch.tensor(lengths or [length] * batch, dtype=torch.int32, device=DEV)
    return q, k, v, seqlens


def paged(k, v, page_size, seed=0):
    """The same cache in pages of page_size under a shuffled block table: (k_pages, v_pages, block_table), pages
    (num_pages, page_size, heads_kv, head_dim) as vLLM and FlashAttention lay them out."""
    batch, heads, length, head_dim = k.shape
    max_pages = math.ceil(length / page_size)
    gen = torch.Generator(device=DEV).manual_seed(seed)
    table = torch.randperm(batch * max_pages, device=DEV, generator=gen).to(torch.int32).view(batch, max_pages)
    out = []
    for t in (k, v):
        pad = torch.nn.functional.pad(t, (0, 0, 0, max_pages * page_size - length))
        pages = torch.empty(batch * max_pages, page_size, heads, head_dim, device=DEV, dtype=t.dtype)
        pages[table.flatten().long()] = pad.view(batch, heads, max_pages, page_size, head_dim).permute(
            0, 2, 3, 1, 4).reshape(batch * max_pages, page_size, heads, head_dim)
        out.append(pages)
        del pad
    return out[0], out[1], table


def sdpa(q, k, v, backend_name: str | None):
    """SDPA on these tensors (GQA through enable_gqa), its default choice or one backend pinned."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    gqa = q.shape[1] != k.shape[1]

    def call():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    if backend_name is None:
        return call

    def pinned():
        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return call()
    return pinned


# -- a. correctness ------------------------------------------------------------------------------------

CHECKS = [  # (batch, heads_q, heads_kv, q_len, lengths, page_size, dtype, causal, num_splits)
    (3, 32, 8, 1, [5000, 1, 777], 0, torch.bfloat16, True, None),
    (3, 32, 8, 4, [5000, 4, 777], 64, torch.bfloat16, True, None),
    (3, 32, 8, 4, [4096, 64, 1000], 64, torch.bfloat16, False, 5),
    (2, 16, 16, 4, [3001, 129], 16, torch.float16, True, 7),
    (2, 32, 4, 1, [2048, 999], 0, torch.float32, False, 3),
    (2, 32, 1, 1, [9000, 17], 256, torch.bfloat16, True, None),
    (2, 32, 32, 1, [9000, 4097], 0, torch.float16, True, 1),
    (1, 32, 8, 1, [70000], 64, torch.bfloat16, True, None),
]
if SMOKE:
    CHECKS = [(2, 4, 2, 1, [70, 1], 0, torch.bfloat16, True, None), (2, 4, 1, 4, [64, 20], 16, torch.float16, True, 3),
              (1, 4, 4, 1, [90], 64, torch.float32, False, 1)]
_references: dict = {}


def check_case(case, config=None, seed=1) -> float:
    """Max relative error of O over the sequences against float64 (inf where the LSE is off by more than 1e-3 or
    anything is not finite); the inputs and the reference are made once per case."""
    batch, hq, hkv, q_len, lengths, page, dtype, causal, splits = case
    key = (repr(case[:-1]), seed)  # the inputs and reference do not depend on the split count
    if key not in _references:
        q, k, v, seqlens = make_inputs(batch, hq, hkv, max(lengths), q_len, dtype, lengths, seed)
        table = None
        if page:
            k, v, table = paged(k, v, page, seed)
        _references.clear()  # one case's inputs at a time
        _references[key] = (q, k, v, seqlens, table), reference_decode(q, k, v, seqlens, table, causal)
    (q, k, v, seqlens, table), (ref, ref_lse) = _references[key]
    out, lse = decode_attention(q, k, v, seqlens, table, causal=causal, num_splits=splits, return_lse=True,
                                config=config)
    if not (torch.isfinite(out).all() and torch.isfinite(lse).all()):
        return float("inf")
    worst = max(relative_error(out[b], ref[b]) for b in range(batch))
    lse_err = (lse.double().cpu() - ref_lse).abs().max().item()
    return worst if lse_err < 1e-3 else float("inf")


def section_check(run: Run) -> bool:
    """True when every case that ran is right (a case that raises counts as wrong)."""
    rows, deadline, right = [], run.deadline("check"), True
    for case in CHECKS:
        if time.perf_counter() > deadline:
            run.say("check: time guard reached, remaining cases skipped")
            break
        name = (f"B{case[0]} H{case[1]}/{case[2]} q{case[3]} L{case[4]} page{case[5]} {str(case[6])[6:]} "
                f"{'causal' if case[7] else 'full'} splits={case[8]}")
        try:
            err = check_case(case)
            ok = err < TOLERANCE[case[6]]
            run.say(f"check {name}: max rel error {err:.2e} {'ok' if ok else 'WRONG'}")
            rows.append({"case": name, "max_rel_error": err, "ok": ok})
        except Exception as exc:  # noqa: BLE001
            run.failed(f"check {name}", exc)
            rows.append({"case": name, "ok": False})
            ok = False
        right = right and ok
    _references.clear()
    run.record["sections"]["check"] = rows
    return right


# -- b. the roof ----------------------------------------------------------------------------------------

def copy_bandwidth(run: Run) -> float | None:
    """GB/s of a device copy (bytes read + written), the best of two sizes well past the L2."""
    best = None
    for nbytes in COPY_BYTES:
        try:
            src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=DEV).normal_()
            dst = torch.empty_like(src)
            us = bench_us(lambda: dst.copy_(src), REP_GOAL_MS)
            gbps = 2 * nbytes / us / 1e3
            run.say(f"copy {nbytes >> 20} MiB: {us:.1f} µs, {gbps:.0f} GB/s (read + write)")
            best = max(best or 0.0, gbps)
            src = dst = None  # released (the timed lambdas hold them)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"copy {nbytes}", exc)
    free()
    return best


# -- c. tiles, d. the sweep ------------------------------------------------------------------------------

_checked: dict = {}
SWEEP_CHECK = (2, 32, 8, 1, [3000, 1029], 0, torch.bfloat16, True, None)
if SMOKE:
    SWEEP_CHECK = (2, 4, 2, 1, [100, 29], 0, torch.bfloat16, True, None)


def config_is_right(run: Run, config: DecodeConfig, page: int = 0, splits: int = 5) -> bool:
    """A swept config is checked before it is timed, once per compiled variant (one split or several, paged or
    not); a wrong one is never timed, and the run says so."""
    key = (replace(config, programs_per_sm=0), page, splits == 1)
    if key not in _checked:
        case = (*SWEEP_CHECK[:5], page, *SWEEP_CHECK[6:8], 1 if splits == 1 else 5)
        try:
            _checked[key] = check_case(case, config) < TOLERANCE[torch.bfloat16]
            if not _checked[key]:  # a wrong answer: the kernel has a bug at this config
                run.say(f"WRONG: {config} page {page} {'one split' if splits == 1 else 'splits'}: not timed")
                run.record.setdefault("wrong_configs", []).append(f"{config} page {page} splits {splits}")
        except Exception as exc:  # noqa: BLE001 - out of shared memory, a compile error: not a candidate
            _checked[key] = False
            if "OutOfResources" in type(exc).__name__ or "out of resource" in str(exc):
                run.say(f"does not fit: {_short(config)} ({str(exc).splitlines()[0][:120]}): not a candidate")
            else:
                run.failed(f"config {config} page {page}", exc)
    return _checked[key]


def plan_of(inputs, config, table=None, num_splits=None):
    """What decode_attention runs on these inputs (its config, split count, layout)."""
    q, k, v, seqlens = inputs
    return decode._checked_plan(q, k, v, seqlens, table, True, None, num_splits, config)[0]


def splits_of(inputs, config, table=None, num_splits=None) -> int:
    return plan_of(inputs, config, table, num_splits).splits


def time_ours(run: Run, inputs, config: DecodeConfig | None, rep_ms: float, table=None,
              num_splits: int | None = None) -> tuple[float | None, int]:
    """(median µs, or None where the config is wrong; its split count) of decode_attention on these inputs."""
    q, k, v, seqlens = inputs
    plan = plan_of(inputs, config, table, num_splits)
    if not config_is_right(run, plan.config, plan.page_size, plan.splits):
        return None, plan.splits
    return bench_us(lambda: decode_attention(q, k, v, seqlens, table, config=config, num_splits=num_splits),
                    rep_ms), plan.splits


def section_tiles(run: Run) -> list[DecodeConfig]:
    """The best TOP tile configs over TILE_SHAPES (geometric mean of time ÷ each shape's best)."""
    record = run.record["sections"]["tiles"] = []
    deadline = run.deadline("tiles")
    times: dict = {}
    for shape in TILE_SHAPES:
        try:
            inputs = make_inputs(*shape)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"inputs {label(shape)}", exc)
            continue
        nbytes = cache_bytes(shape[0], shape[2], shape[3])
        for block_n, warps, stages in TILE_CANDIDATES:
            if time.perf_counter() > deadline:
                run.say("tiles: time guard reached, remaining candidates skipped")
                break
            config = DecodeConfig(block_n, warps, stages)
            try:
                us, splits = time_ours(run, inputs, config, REP_SWEEP_MS)
            except Exception as exc:  # noqa: BLE001
                run.failed(f"time {config} at {label(shape)}", exc)
                continue
            if us is None:
                continue
            times.setdefault(config, {})[shape] = us
            record.append({"shape": shape, "config": asdict(config), "splits": splits, "us": us})
            run.say(f"tiles {label(shape)}: n{block_n} w{warps} s{stages} splits {splits}: {us:8.1f} µs "
                    f"{nbytes / us / 1e3:6.0f} GB/s")
        del inputs
        free()
    complete = {c: t for c, t in times.items() if len(t) == len(TILE_SHAPES)} or times
    if not complete:
        return [config_for_decode(D, DTYPE)]
    best_of = {s: min(t[s] for t in complete.values() if s in t) for s in TILE_SHAPES if
               any(s in t for t in complete.values())}
    score = {c: math.exp(statistics.fmean(math.log(t[s] / best_of[s]) for s in t)) for c, t in complete.items()}
    top = sorted(score, key=score.get)[:TOP]
    run.say("tiles: best " + ", ".join(f"n{c.block_n} w{c.num_warps} s{c.num_stages} ({score[c]:.3f}×)" for c in top))
    shipped = config_for_decode(D, DTYPE)
    return top + ([shipped] if shipped not in top else [])


def section_sweep(run: Run, tiles: list[DecodeConfig], copy_gbps: float | None) -> dict:
    """Per GRID shape: the best (config, split count); the shipped choice's time beside it."""
    record = run.record["sections"]["sweep"] = []
    deadline = run.deadline("sweep")
    best: dict = {}
    all_times: dict = {}  # shape -> {(config, splits or None): us}
    for shape in GRID:
        if time.perf_counter() > deadline:
            run.say("sweep: time guard reached, remaining shapes skipped")
            break
        batch, hq, hkv, length = shape
        try:
            inputs = make_inputs(*shape, seed=3)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"inputs {label(shape)}", exc)
            continue
        times: dict = {}
        shipped_splits = splits_of(inputs, None)
        try:
            times[("shipped", None)] = time_ours(run, inputs, None, REP_SWEEP_MS)[0]
        except Exception as exc:  # noqa: BLE001
            run.failed(f"shipped at {label(shape)}", exc)
        for config in tiles:
            counts = {1} | {splits_of(inputs, replace(config, programs_per_sm=p)) for p in PROGRAMS_PER_SM}
            for splits in sorted(counts):
                if time.perf_counter() > deadline:
                    break
                try:
                    us, _ = time_ours(run, inputs, config, REP_SWEEP_MS, num_splits=splits)
                except Exception as exc:  # noqa: BLE001
                    run.failed(f"time {config} splits {splits} at {label(shape)}", exc)
                    continue
                if us is not None:
                    times[(config, splits)] = us
        del inputs
        free()
        times = {k: t for k, t in times.items() if t is not None}
        if not times:
            continue
        all_times[shape] = times
        (config, splits), us = min(((k, t) for k, t in times.items() if k[0] != "shipped"),
                                   key=lambda kt: kt[1], default=(("shipped", None), times.get(("shipped", None))))
        nbytes = cache_bytes(batch, hkv, length)
        shipped_us = times.get(("shipped", None))
        best[shape] = (config, splits)
        row = {"shape": shape, "best_config": asdict(config) if config != "shipped" else "shipped",
               "best_splits": splits, "best_us": us, "shipped_us": shipped_us,
               "shipped_splits": shipped_splits,
               "times": {f"{k[0] if k[0] == 'shipped' else _short(k[0])} splits {k[1]}": t for k, t in times.items()}}
        record.append(row)
        pct = f" {100 * nbytes / us / 1e3 / copy_gbps:4.0f}% of copy" if copy_gbps else ""
        run.say(f"sweep {label(shape)}: best {_short(config) if config != 'shipped' else 'shipped'} splits {splits} "
                f"{us:8.1f} µs {nbytes / us / 1e3:6.0f} GB/s{pct}; shipped {shipped_us or float('nan'):8.1f} µs "
                f"(splits {row['shipped_splits']}, {(shipped_us or float('nan')) / us:.2f}× the best)")
    overall = None
    configs = {k[0] for t in all_times.values() for k in t if k[0] != "shipped"}
    if all_times and configs:
        # per config, its best split count at each shape; scored by the geometric mean of time ÷ the shape's best
        def at(config, times):
            found = [t for (c, _), t in times.items() if c == config]
            return min(found) if found else None
        usable = [c for c in configs if all(at(c, t) is not None for t in all_times.values())]
        if usable:
            score = {c: math.exp(statistics.fmean(math.log(at(c, t) / min(t.values())) for t in all_times.values()))
                     for c in usable}
            overall = min(score, key=score.get)
            run.say(f"best tile over the sweep (geo-mean {score[overall]:.3f}× each shape's best, its best split "
                    f"count each): TUNED_DECODE_CONFIGS[({D}, 2)] = {overall}")
            run.record["sections"]["sweep_overall"] = {"config": asdict(overall), "geomean_vs_best": score[overall]}
    best["overall"] = overall
    return best


def _short(config: DecodeConfig) -> str:
    return f"n{config.block_n} w{config.num_warps} s{config.num_stages}{'' if config.tma else ' no-TMA'}"


# -- e. the goal table --------------------------------------------------------------------------------

def prefill_at_q1(q, k, v):
    """Our prefill kernel (kernels/fa2.py's _attn_fwd) launched as a prefill launches at q_len 1: one query block per
    batch·head (grid (1, B·H)), Q padded to the block, K/V already expanded to the query heads. Non-causal."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    from kernels import fa2
    from kernels.inputs import dot_modes
    config = fa2.config_for(q.shape[-1], q.dtype, False)
    dot_fp32, precision = dot_modes(q.dtype)  # on the GPU: bf16 operands, as a prefill launch
    batch, heads, kv_len, head_dim = k.shape
    q_pad = torch.zeros(batch, heads, config.block_m, head_dim, device=q.device, dtype=q.dtype)
    q_pad[:, :, :1] = q
    o_pad = torch.empty_like(q_pad)
    lse = torch.empty(batch * heads * kv_len, device=q.device, dtype=torch.float32)  # rows < kv_len are written
    q_d, o_d = (TensorDescriptor.from_tensor(t, [1, 1, config.block_m, head_dim]) for t in (q_pad, o_pad))
    k_d, v_d = (TensorDescriptor.from_tensor(t, [1, 1, config.block_n, head_dim]) for t in (k, v))

    def call():
        fa2._attn_fwd[(1, batch * heads)](
            q_d, k_d, v_d, o_d, lse, lse, lse, lse, head_dim ** -0.5, kv_len, heads, 1, 0,
            *q_pad.stride(), *k.stride(), *v.stride(), *o_pad.stride(),
            HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=False, DOT_FP32=dot_fp32,
            PRECISION=precision, USE_TMA=True, TRACE=False, RECORD_SM=False, PROFILE=False,
            num_warps=config.num_warps, num_stages=config.num_stages)
        return o_pad[:, :, :1]
    return call


GOAL_NAMES = ["ours", "ours best", "SDPA default", "SDPA FA2", "prefill q1"]


def time_rounds(calls: dict, rounds: int, rep_ms: float, times: dict | None = None) -> dict:
    """name → median µs over `rounds` interleaved rounds, each round in a rotated order: right after a heavy run the
    first calls timed run slow for a few hundred ms (an H100, 2026-12-06: the first of a shape's variants after the
    sweep 1.08–1.15× the same call a second later), and the rotation keeps that off any one of them. `times`, where
    given, receives every round's µs by name."""
    names = list(calls)
    times = {} if times is None else times
    times.update({name: [] for name in names})
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(bench_us(calls[name], rep_ms))
    return {name: statistics.median(t) for name, t in times.items()}


def section_goal(run: Run, best: dict, copy_gbps: float | None) -> list[dict]:
    rows, deadline = [], run.deadline("goal")
    shapes = list(dict.fromkeys(ISSUE_SHAPES + GRID))  # the issue's first
    for shape in shapes:
        if time.perf_counter() > deadline:
            run.say("goal: time guard reached, remaining shapes skipped")
            break
        batch, hq, hkv, length = shape
        nbytes = cache_bytes(batch, hkv, length)
        row = {"shape": shape, "cache_bytes": nbytes, "us": {}, "splits": None, "best": None}
        try:
            q, k, v, seqlens = make_inputs(*shape, seed=2)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"inputs {label(shape)}", exc)
            continue
        calls: dict = {}  # name → a call checked against ours; timed together below, in interleaved rounds
        try:
            ours = decode_attention(q, k, v, seqlens)
            row["splits"] = splits_of((q, k, v, seqlens), None)
            calls["ours"] = lambda: decode_attention(q, k, v, seqlens)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"ours at {label(shape)}", exc)
            q = k = v = None  # released (the timed lambdas hold them)
            continue
        found = best.get(shape)
        if found and found[0] != "shipped":
            config, splits = found
            row["best"] = f"{_short(config)} splits {splits}"
            calls["ours best"] = lambda: decode_attention(q, k, v, seqlens, config=config, num_splits=splits)
        expanded = []  # K/V repeated to the query heads, made once (outside the timed region) where a peer needs it

        def kv_expanded():
            if not expanded:
                expanded.extend(t.repeat_interleave(hq // hkv, dim=1) for t in (k, v))
            return expanded
        for name, pinned in (("SDPA default", None), ("SDPA FA2", "FLASH_ATTENTION")):
            try:
                fn = sdpa(q, k, v, pinned)
                try:
                    err = relative_error(fn(), ours.double())
                except RuntimeError as exc:  # a backend without GQA: K/V expanded to the query heads first
                    if hq == hkv or 2 * nbytes * hq // hkv > PREFILL_MAX_BYTES:
                        raise
                    run.say(f"{name} at {label(shape)} with enable_gqa: {str(exc).splitlines()[0][:160]}; timing it "
                            f"on K/V expanded to the query heads")
                    fn = sdpa(q, *kv_expanded(), pinned)
                    row.setdefault("expanded", []).append(name)
                    err = relative_error(fn(), ours.double())
                if not err < 2e-2:
                    run.say(f"{name} at {label(shape)} disagrees with ours: {err:.2e} (not timed)")
                    continue
                calls[name] = fn
            except Exception as exc:  # noqa: BLE001
                run.failed(f"{name} at {label(shape)}", exc)
        if nbytes * hq // hkv <= PREFILL_MAX_BYTES:
            try:
                fn = prefill_at_q1(q, *kv_expanded())
                err = relative_error(fn(), ours.double())
                if not err < 2e-2:
                    raise AssertionError(f"prefill at q_len 1 disagrees with ours: {err:.2e}")
                calls["prefill q1"] = fn
            except Exception as exc:  # noqa: BLE001
                run.failed(f"prefill q1 at {label(shape)}", exc)
        try:
            row["us"] = time_rounds(calls, GOAL_ROUNDS, REP_GOAL_MS)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"timing at {label(shape)}", exc)
        q = k = v = seqlens = ours = fn = calls = None  # released (the timed lambdas hold them)
        expanded.clear()
        free()
        row["gbps"] = {name: nbytes / us / 1e3 for name, us in row["us"].items()}
        if copy_gbps:
            row["pct_of_copy"] = {name: 100 * g / copy_gbps for name, g in row["gbps"].items()}
        run.say(f"goal {label(shape)}: " + ", ".join(f"{n} {us:.1f} µs ({row['gbps'][n]:.0f} GB/s)"
                                                     for n, us in row["us"].items()))
        rows.append(row)
    run.record["sections"]["goal"] = rows
    return rows


# -- f. paged vs contiguous -----------------------------------------------------------------------------

def section_paged(run: Run) -> list[dict]:
    rows, deadline = [], run.deadline("paged")
    for shape in PAGE_SHAPES:
        if time.perf_counter() > deadline:
            run.say("paged: time guard reached, remaining shapes skipped")
            break
        row = {"shape": shape, "us": {}}
        try:
            q, k, v, seqlens = make_inputs(*shape, seed=4)
            ours = decode_attention(q, k, v, seqlens)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"contiguous at {label(shape)}", exc)
            continue
        calls = {"contiguous": lambda: decode_attention(q, k, v, seqlens)}  # timed together, interleaved rounds
        for page in PAGE_SIZES:
            if time.perf_counter() > deadline:
                break
            try:
                k_p, v_p, table = paged(k, v, page, seed=5)
                out = decode_attention(q, k_p, v_p, seqlens, table)
                err = relative_error(out, ours.double())
                if not err < 1e-2:
                    raise AssertionError(f"paged (page {page}) differs from contiguous: {err:.2e}")
                calls[f"page {page}"] = (lambda k_p=k_p, v_p=v_p, table=table:
                                         decode_attention(q, k_p, v_p, seqlens, table))
                row.setdefault("config", {})[page] = _short(config_for_decode(D, DTYPE, page))
                k_p = v_p = table = out = None  # released (the timed lambdas hold them)
            except Exception as exc:  # noqa: BLE001
                run.failed(f"page {page} at {label(shape)}", exc)
        try:
            row["us"] = time_rounds(calls, GOAL_ROUNDS, REP_GOAL_MS)
        except Exception as exc:  # noqa: BLE001
            run.failed(f"paged timing at {label(shape)}", exc)
            continue
        calls = None
        q = k = v = seqlens = ours = None  # released (the timed lambdas hold them)
        free()
        base = row["us"]["contiguous"]
        run.say(f"paged {label(shape)}: contiguous {base:.1f} µs; " + ", ".join(
            f"{n} {us:.1f} µs ({us / base:.3f}×, {row['config'][int(n.split()[1])]})"
            for n, us in row["us"].items() if n != "contiguous"))
        rows.append(row)
    run.record["sections"]["paged"] = rows
    return rows


# -- g. per call, CUDA graph ------------------------------------------------------------------------------

PER_CALL_ROUNDS = 3


def per_call_us(fn, calls: int = 1000) -> float:
    if SMOKE:
        calls = 2
    for _ in range(20 if not SMOKE else 1):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def section_per_call_and_graph(run: Run) -> dict:
    out: dict = {}
    entries = {}
    for n in PER_CALL_LENGTHS:
        q, k, v, seqlens = make_inputs(1, HQ, HKV, n, seed=6)
        entries[f"ours {label((1, HQ, HKV, n))}"] = (lambda q=q, k=k, v=v, s=seqlens: decode_attention(q, k, v, s))
        # SDPA takes no lengths: the like-for-like call is ours without them (the whole cache, as SDPA reads it)
        entries[f"ours without lengths {label((1, HQ, HKV, n))}"] = (lambda q=q, k=k, v=v: decode_attention(q, k, v))
        entries[f"SDPA default {label((1, HQ, HKV, n))}"] = sdpa(q, k, v, None)
    try:
        from kernels.fa2 import flash_attention
        gen = torch.Generator(device=DEV).manual_seed(7)
        n = PREFILL_PER_CALL_N
        q2, k2, v2 = (torch.randn(2, 16, n, 64, device=DEV, generator=gen, dtype=DTYPE) for _ in range(3))
        entries[f"fa2 prefill B2 H16 N{n} d64"] = lambda: flash_attention(q2, k2, v2)
        from kernels import flash_attention as library_call  # the library's one call: "auto" picks the kernel
        entries[f"flash_attention (auto) B2 H16 N{n} d64"] = lambda: library_call(q2, k2, v2)
        entries[f"SDPA default B2 H16 N{n} d64"] = sdpa(q2, k2, v2, None)
    except Exception as exc:  # noqa: BLE001
        run.failed("prefill per call inputs", exc)
    rounds: dict = {}
    for _ in range(1 if SMOKE else PER_CALL_ROUNDS):  # interleaved rounds: the host's clock drifts between them
        for name, fn in entries.items():
            try:
                rounds.setdefault(name, []).append(per_call_us(fn))
            except Exception as exc:  # noqa: BLE001
                run.failed(f"per call {name}", exc)
                entries[name] = lambda: None
    for name, values in rounds.items():
        out[name] = statistics.median(values)
        run.say(f"per call {name}: {out[name]:.1f} µs (host included; median of "
                f"{', '.join(f'{v:.1f}' for v in values)})")
    try:  # capture one call, replay it, compare with eager
        if SMOKE:
            raise RuntimeError("no CUDA graph in the interpreter (SMOKE)")
        q, k, v, seqlens = make_inputs(1, HQ, HKV, 4 * K, seed=8)
        static_q = q.clone()
        eager = decode_attention(static_q, k, v, seqlens)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            decode_attention(static_q, k, v, seqlens)  # warm up on a side stream, as torch advises
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = decode_attention(static_q, k, v, seqlens)
        graph.replay()
        sync()
        same = torch.equal(captured, eager)
        static_q.copy_(torch.randn_like(static_q))
        graph.replay()
        follows = torch.equal(captured, decode_attention(static_q, k, v, seqlens))
        out["graph replay B1 4K"] = per_call_us(graph.replay)
        out["graph_equal_to_eager"], out["graph_follows_new_q"] = same, follows
        run.say(f"CUDA graph: replay == eager: {same}; after a new q: {follows}; replay per call "
                f"{out['graph replay B1 4K']:.1f} µs")
        if not (same and follows):
            run.record.setdefault("failures", []).append({"what": "CUDA graph replay differs from eager"})
    except Exception as exc:  # noqa: BLE001
        run.failed("CUDA graph", exc)
    run.record["sections"]["per_call"] = out
    return out


# -- the tables ------------------------------------------------------------------------------------------

def tables(rows: list[dict], paged_rows: list[dict], copy_gbps: float | None, calls: dict) -> str:
    roof = copy_gbps or float("nan")
    head = (f"decode, bf16, head_dim {D}, q_len 1: µs (median, L2 flushed) and % of the device copy's "
            f"{roof:.0f} GB/s (read + write) reached by the cache's K+V bytes ÷ time")
    lines = [head, f"{'shape':>18} " + " ".join(f"{n:>19}" for n in GOAL_NAMES)
             + f" {'cuDNN/ours':>10} {'ours %copy':>10} {'prefill/ours':>12} {'splits':>6}"]
    for row in rows:
        us, gbps = row["us"], row["gbps"]
        cells = [f"{us[n]:9.1f} {100 * gbps[n] / roof:6.0f}%copy" if n in us else f"{'-':>19}" for n in GOAL_NAMES]
        ratio = us["SDPA default"] / us["ours"] if "ours" in us and "SDPA default" in us else float("nan")
        pct = 100 * gbps["ours"] / roof if "ours" in gbps else float("nan")
        pf = us["prefill q1"] / us["ours"] if "prefill q1" in us and "ours" in us else float("nan")
        lines.append(f"{label(row['shape']):>18} " + " ".join(cells)
                     + f" {ratio:9.2f}x {pct:9.0f}% {pf:11.1f}x {row['splits'] or '-':>6}")
    lines.append("cuDNN/ours: SDPA default's time ÷ ours (goal >= 1.0); ours %copy: goal >= 90; prefill/ours: goal "
                 ">= 8 at B1 H32/8 128K. 'ours' is the shipped choice (config_for_decode + split heuristic); 'ours "
                 "best' the sweep's best tile and split count at that shape.")
    if paged_rows:
        lines.append("")
        lines.append("paged ÷ contiguous (time; shuffled block table; goal <= 1.05 at page 64):")
        for row in paged_rows:
            base = row["us"].get("contiguous")
            lines.append(f"{label(row['shape']):>18} contiguous {base:8.1f} µs  " + "  ".join(
                f"{n} {us / base:.3f}x" for n, us in row["us"].items() if n != "contiguous"))
    lines.append("")
    lines.append("per call, host included (µs): " + ", ".join(f"{n} {v:.1f}" for n, v in calls.items()
                                                             if isinstance(v, float)))
    return "\n".join(lines)


def main() -> int:
    if backend() != ("interpreter" if SMOKE else "cuda"):
        sys.exit(f"python -m perf.h200.decode_speed needs a CUDA GPU (SMOKE=1: the interpreter): {backend_reason()}")
    run = Run()
    if SMOKE:
        run.record["device"] = {"name": "CPU interpreter (SMOKE: numbers mean nothing)", "triton": triton.__version__}
    else:
        props = torch.cuda.get_device_properties(0)
        run.record["device"] = {"name": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
                                "triton": triton.__version__, "cudnn": torch.backends.cudnn.version()}
    run.say(run.record["device"], "QUICK" if QUICK else "")
    out_dir = Path(os.environ.get("OUT", "."))
    right = section_check(run)
    rows, paged_rows, calls, copy_gbps = [], [], {}, None
    if not right:
        run.say("WRONG answers above: nothing is timed (fix the kernel first)")
    else:
        copy_gbps = copy_bandwidth(run)
        run.record["copy_gbps"] = copy_gbps
        best: dict = {}
        try:
            best = section_sweep(run, section_tiles(run), copy_gbps)
        except Exception as exc:  # noqa: BLE001
            run.failed("sweep", exc)
        if run.record.get("wrong_configs"):
            run.say(f"WRONG configs were seen in the sweep: {run.record['wrong_configs']}")
        for name, section, args in (("goal", section_goal, (best, copy_gbps)), ("paged", section_paged, ()),
                                    ("per call", section_per_call_and_graph, ())):
            if run.elapsed() > DEADLINE_S and name != "per call":
                run.say(f"{name}: the run's deadline has passed, skipped")
                continue
            try:
                result = section(run, *args)
            except Exception as exc:  # noqa: BLE001
                run.failed(name, exc)
                continue
            if name == "goal":
                rows = result
            elif name == "paged":
                paged_rows = result
            else:
                calls = result
    text = tables(rows, paged_rows, copy_gbps, calls)
    run.record["table"] = text
    run.record["seconds"] = run.elapsed()
    path = out_dir / "decode_speed.json"
    try:
        path.write_text(json.dumps(run.record, indent=1, default=str))
    except OSError as exc:
        run.failed(f"write {path}", exc)
    wrong = sum(not r.get("ok", True) for r in run.record["sections"].get("check", []))
    failures = len(run.record.get("failures", [])) + wrong + len(run.record.get("wrong_configs", []))
    print(f"\nwrote {path} ({run.record['seconds']:.0f} s, {failures} failures, {wrong} wrong checks)\n")
    print(text, flush=True)
    return 2 if wrong or run.record.get("wrong_configs") else (1 if failures else 0)


if __name__ == "__main__":
    sys.exit(main())
