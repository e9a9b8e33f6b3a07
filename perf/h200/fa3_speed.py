"""The FA-3 style Gluon kernel on the H200: checked against float64, then timed beside its peers, in one call.

    PYTHONUNBUFFERED=1 python3 -m perf.h200.fa3_speed [--variants] [--shapes goal|8k|quick] [--rounds 3]
    PYTHONUNBUFFERED=1 python3 -m perf.h200.fa3_speed --fa4 [--json PATH]     (issue 40: ours against the authors')

--fa4 (about 3–4 minutes): every shipped config (head_dim 64, 128, 256) and its candidates (fa4_candidates) checked
against float64 as in 1., the authors' FlashAttention-4 (flash-attn-4: its Hopper forward, kernels.peers.fa4_authors)
checked the same way when it is installed; then ours, FA-4 and SDPA default (cuDNN) timed in the same interleaved
rounds at issue 40's table shapes, at 32K, and at head_dim 256 (B2 H8 8K and 16K), the candidates beside them; the
table gives ours ÷ FA-4 and ours ÷ cuDNN. Without flash-attn-4 the run goes on and says "not installed"
(requirements-peers.txt; on a machine without a package index, PYTHONPATH to an unpacked copy).

1. Correctness first: every FA-3 config (the shipped table, and with --variants the candidates below) on random
   inputs against kernels.reference (float64), ragged N (1, 17, 255, 1000, 4097), its causal mode, fp16 and bf16,
   outputs poisoned with NaN beforehand; plus a non-contiguous input per head_dim. A config that fails is not timed.
2. Timing, side by side in one run: ours FA-3 (the config the library runs at the shape: config_for_v3; at N=8K
   the variants too), ours FA-2
   (kernels.fa2.flash_attention), the authors' FA-4 where installed, SDPA default (cuDNN on the H200; at 8K also SDPA with CUDNN_ATTENTION forced,
   to show the default is cuDNN) and SDPA's FLASH_ATTENTION backend. triton.testing.do_bench (L2 flushed before each
   call) gives a median per round; rounds interleave every shape and provider (order rotated per round); the table
   gives the median over rounds, in TFLOPS = 4·B·H·N²·D / t (half that when causal) and ratios.
3. The table last; the full JSON and a log under $OUT (or perf/h200/logs/).

A watchdog ends the process (exit 3) if nothing progresses for STALL_S seconds: a deadlocked kernel must not eat
the lease. Kernels are compiled first in parallel worker processes (Triton's disk cache), outside the timings.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time
import traceback
from dataclasses import replace
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import torch

from kernels.runtime import backend, backend_reason  # first: picks the backend before any kernel is decorated
from costmodel import Shape, lpt_heads_per_group
from kernels.fa2 import config_for, flash_attention
from kernels.fa3 import (SHIPPED, Fa3Config, config_for_v3, flash_attention_v3, tail_split_where_it_splits,
                         v3_unavailable_reason)
from kernels.runtime import sm_count
from kernels.peers import fa4_authors, fa4_unavailable_for
from kernels.reference import reference_attention, relative_error

OUT = Path(os.environ.get("OUT") or Path(__file__).parent / "logs")
RAGGED = (1, 17, 255, 1000, 4097)
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
LSE_TOLERANCE = 1e-4
STALL_S = 60

# (label, batch, heads, seq_len, head_dim, causal)
GOAL_SHAPES = [(f"B{b} H{h} N{n // 1024}K D{d}{' causal' if c else ''}", b, h, n, d, c)
               for (b, h) in ((2, 16),) for n in (8192, 16384, 32768) for d in (128, 64) for c in (False, True)]
GOAL_SHAPES += [(f"B1 H32 N{n // 1024}K D128{' causal' if c else ''}", 1, 32, n, 128, c)
                for n in (8192, 16384, 32768) for c in (False, True)]
# issue 40's table (B2 H16 and B1 H32 at 8K, B2 H16 at 16K), 32K, and FA-3's headline head_dim 256 (B2 H8)
FA4_SHAPES = [(f"B{b} H{h} N{n // 1024}K D{d}{' causal' if c else ''}", b, h, n, d, c)
              for (b, h, n, d) in ((2, 16, 8192, 64), (2, 16, 8192, 128), (1, 32, 8192, 128), (2, 16, 16384, 64),
                                   (2, 16, 16384, 128), (2, 16, 32768, 64), (2, 16, 32768, 128), (2, 8, 8192, 256),
                                   (2, 8, 16384, 256))
              for c in (False, True)]
FA4_RAGGED = (17, 1000, 4097)  # the authors' kernel compiles per shape class: fewer lengths than ours
SHAPE_SETS = {"fa4": FA4_SHAPES, "goal": GOAL_SHAPES, "8k": [s for s in GOAL_SHAPES if s[3] == 8192 and s[1] == 2],
              "quick": [s for s in GOAL_SHAPES if s[3] == 8192 and s[1] == 2 and s[4] == 128],
              "d128": [s for s in GOAL_SHAPES if s[4] == 128]}


def variants(head_dim: int, causal: bool) -> dict[str, Fa3Config]:
    """Candidates beside the shipped config of a class: the conditional rescale taken out, the named-barrier turns
    and paired K/V ring taken out, and at head_dim 128 the other ring depth and the config with none of those three
    (the `LADDER` row "+ Q in registers"). Experiments that changed the kernel's code rather than its config are in
    git history, their figures in BENCHMARKS.md, "Tried and lost"."""
    shipped = SHIPPED[(head_dim, causal)]
    # each of the shipped loop changes taken back out, and at D=128 the other ring depth and none of them
    cands = [replace(shipped, lazy_rescale=False), replace(shipped, named_turns=False, kv_paired=False)]
    if head_dim == 128:
        cands += [replace(shipped, kv_stages=5 - shipped.kv_stages),  # kv2 <-> kv3
                  replace(shipped, named_turns=False, kv_paired=False, lazy_rescale=False, kv_stages=2)]  # LADDER row 3
    if head_dim == 256:  # at 128 accumulator registers a thread, the overlap's extra live S tile may cost more than
        cands += [replace(shipped, overlap=False)]  # it hides: the ping-pong alone, both products waited together
    return {name(c): c for c in cands if c != shipped}


def fa4_candidates(head_dim: int, causal: bool) -> dict[str, Fa3Config]:
    """--fa4's candidates beside the shipped config (BENCHMARKS.md §3b–3c: each with its prediction and outcome). None
    now. Timed and left out (an H100, 2026-12-06, ÷ shipped at 8K / 16K / 32K): at head_dim 64 1 exponential in 8 on the
    FMA units (0.937–0.960×, causal 0.927–0.954×), a ring of 3 K/V slots (0.986–1.011×), the softmax overlap not causal
    (0.966–0.985×, as on the H200 before); at 256 causal the ring without named barriers or pairing (1.026× at 8K,
    0.969× at 16K). Q in registers at 64 keeps 104–120 bytes of stack in the sm_90 build (triton 3.7.1).

    Head_dim 64 causal, timed beside FA-4 on an H100 (2026-12-07 07:30, ÷ shipped at 8K / 16K / 32K): the shipped
    config without the in-warpgroup overlap 1.005 / 0.961 / 0.999, with the named-barrier turns and paired ring 1.024
    / 0.972 / 1.016 (overlap off too: 1.010 / 0.984 / 0.975), without lpt 0.913 / 0.950 / 0.999. The key walk from the
    diagonal down (commit 5d93545, every causal class; 08:10): 0.981 / 1.004 / 0.964 at 64, 1.024 / 0.966 / 0.980 at
    128 (B1 H32 8K 0.983), 1.006 / 0.986 at 256."""
    return {}


def name(c: Fa3Config) -> str:
    return f"fa3 {c.label}"


# -- log and watchdog -------------------------------------------------------------------------------

LOG: list[str] = []
_beat = [time.monotonic(), "start"]


def say(*parts) -> None:
    line = " ".join(str(p) for p in parts)
    print(line, flush=True)
    LOG.append(line)
    _beat[0] = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "fa3_speed.log", "a") as f:
        f.write(line + "\n")


def beat(what: str) -> None:
    _beat[0], _beat[1] = time.monotonic(), what


def _watchdog() -> None:
    while True:
        time.sleep(5)
        if time.monotonic() - _beat[0] > STALL_S:
            say(f"WATCHDOG: no progress for {STALL_S} s during {_beat[1]!r}: a hung kernel? exiting")
            _dump()
            os._exit(3)


RESULTS: dict = {"checks": [], "timings": {}, "errors": []}


def _dump() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fa3_speed.json").write_text(json.dumps(RESULTS, indent=1, default=str))


# -- compile first, in parallel --------------------------------------------------------------------

def _compile_job(kind: str, head_dim: int, causal: bool, dtype_name: str, config: tuple | None) -> str:
    dtype = getattr(torch, dtype_name)
    q, k, v = (torch.randn(1, 1, 256, head_dim, device="cuda", dtype=dtype) for _ in range(3))
    if kind == "fa3":
        flash_attention_v3(q, k, v, causal=causal, config=Fa3Config(*config))
    else:
        flash_attention(q, k, v, causal=causal)
    torch.cuda.synchronize()
    return f"{kind} D={head_dim} {'causal' if causal else 'full'} {dtype_name} {config or ''}"


def precompile(jobs: list[tuple]) -> None:
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 4), mp_context=get_context("spawn")) as ex:
        futures = [ex.submit(_compile_job, *job) for job in jobs]
        for f in as_completed(futures):
            try:
                beat(f"compiled {f.result()}")
            except Exception as exc:  # the check below reports the failing config properly
                say(f"  precompile failed: {type(exc).__name__}: {str(exc)[:300]}")
    say(f"compiled {len(jobs)} kernels in {time.perf_counter() - start:.0f} s (parallel, Triton disk cache)")


# -- correctness -----------------------------------------------------------------------------------

def _poison(*nbytes: int) -> None:
    """Leave NaN-filled blocks of these sizes in PyTorch's caching allocator: the kernel's O and LSE are allocated
    next and get them, so an element the kernel never writes stays NaN and fails the check."""
    blocks = [torch.full(((n + 3) // 4,), float("nan"), device="cuda") for n in nbytes]
    del blocks


def _random_qkv(n: int, head_dim: int, seed: int, late_spikes: bool) -> tuple[torch.Tensor, ...]:
    """(2, 3, n, head_dim) random q, k, v in float32. late_spikes: rows whose max jumps late, by far more than 2^8
    (what makes a conditional rescale rescale): a few keys in later tiles scaled up 30×, so rows with a positive
    score on them move their max there and the rest do not."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(2, 3, n, head_dim, device="cuda", generator=gen) for _ in range(3))
    if late_spikes:
        for pos in range(200, n, 450):
            k[:, :, pos] *= 30.0
    return q, k, v


def _check_one(config: Fa3Config, head_dim: int, causal: bool, label: str, dtype, n: int,
               late_spikes: bool) -> bool:
    """One float64 comparison (O and the LSE), its outputs poisoned with NaN first; recorded and said if wrong."""
    what = f"{label} {dtype} N={n}{' late spikes' if late_spikes else ''}"
    beat(f"check {what}")
    seed = (77 if late_spikes else 1000) * n + head_dim + causal
    q, k, v = (t.to(dtype) for t in _random_qkv(n, head_dim, seed, late_spikes))
    _poison(q.numel() * 2, 2 * 3 * n * 4)
    try:
        o, lse = flash_attention_v3(q, k, v, causal=causal, return_lse=True, config=config)
        torch.cuda.synchronize()
        ref_o, ref_lse = reference_attention(q, k, v, causal)
        err, lse_err = relative_error(o, ref_o), relative_error(lse, ref_lse)
        good = err < TOLERANCE[dtype] and lse_err < LSE_TOLERANCE  # NaN compares False
    except Exception as exc:
        err = lse_err = float("nan")
        good = False
        RESULTS["errors"].append(f"{what}: {traceback.format_exc()[-1500:]}")
        say(f"  ERROR {what}: {type(exc).__name__}: {str(exc)[:300]}")
    RESULTS["checks"].append({"config": label, "dtype": f"{dtype}{' late spikes' if late_spikes else ''}",
                              "seq_len": n, "causal": causal, "head_dim": head_dim, "rel_err": err,
                              "lse_rel_err": lse_err, "ok": good})
    if not good:
        say(f"  WRONG {what}: rel err {err:.2e}, LSE {lse_err:.2e}")
    return good


def _check_lpt(config: Fa3Config, head_dim: int, label: str) -> bool:
    """`lpt` only reorders the programs: at 13 heads and a length where a group of heads is smaller than 13 (the last
    group short), O and the LSE must equal, bit for bit, those of the same config without it (outputs poisoned)."""
    n = 16384 if head_dim == 64 else 8192
    group = lpt_heads_per_group(13, n, head_dim, 2)
    beat(f"check {label} lpt N={n}")
    gen = torch.Generator(device="cuda").manual_seed(n + head_dim)
    q, k, v = (torch.randn(1, 13, n, head_dim, device="cuda", generator=gen, dtype=torch.bfloat16) for _ in range(3))
    outs = []
    for cfg in (config, replace(config, lpt=False)):
        _poison(q.numel() * 2, 13 * n * 4)
        outs.append(flash_attention_v3(q, k, v, causal=True, return_lse=True, config=cfg))
    good = all(torch.equal(a, b) for a, b in zip(*outs))
    RESULTS["checks"].append({"config": label, "dtype": f"bf16 13 heads, groups of {group}, equal to lpt off",
                              "seq_len": n, "causal": True, "head_dim": head_dim, "ok": good})
    if not good:
        say(f"  WRONG {label} N={n} 13 heads in groups of {group}: lpt changed the output")
    return good


def check(config: Fa3Config, head_dim: int, causal: bool, label: str) -> bool:
    ok = True
    for dtype in (torch.bfloat16, torch.float16):
        for n in RAGGED:
            ok &= _check_one(config, head_dim, causal, label, dtype, n, late_spikes=False)
        for n in (1000, 4097):
            ok &= _check_one(config, head_dim, causal, label, dtype, n, late_spikes=True)
    # a non-contiguous input: (B, N, H, D) memory viewed as (B, H, N, D)
    q, k, v = (torch.randn(2, 700, 3, head_dim, device="cuda").bfloat16().transpose(1, 2) for _ in range(3))
    o = flash_attention_v3(q, k, v, causal=causal, config=config)
    err = relative_error(o, reference_attention(q, k, v, causal)[0])
    RESULTS["checks"].append({"config": label, "dtype": "bf16 strided", "seq_len": 700, "causal": causal,
                              "head_dim": head_dim, "rel_err": err, "ok": err < 1e-2})
    ok &= err < 1e-2
    if config.lpt and causal:
        ok &= _check_lpt(config, head_dim, label)
    say(f"  {label:44s} D={head_dim} {'causal' if causal else 'full  '}: {'ok' if ok else 'FAILED'}")
    return ok


def check_fa4(head_dims) -> dict[int, bool | None]:
    """The authors' FA-4 against float64 as ours is checked (O only: our peer call returns O), bf16 and fp16, causal
    and not, ragged N, per head_dim: True (right), False (a WRONG answer: the run fails) or None (not installed, or it
    raised at that head_dim: said, not timed there)."""
    why = fa4_unavailable_for(Shape(1024, 1, 1, 128, "bfloat16"))
    RESULTS["fa4_unavailable"] = why
    if why:
        say(f"  FA-4 (the authors'): {why}: not timed")
        return {d: None for d in head_dims}
    verdicts = {}
    for d in head_dims:
        ok, raised = True, None
        for causal in (False, True):
            for dtype in (torch.bfloat16, torch.float16):
                for n in FA4_RAGGED:
                    what = f"fa4 (authors) D={d} {'causal' if causal else 'full'} {dtype} N={n}"
                    beat(f"check {what}")
                    q, k, v = (t.to(dtype) for t in _random_qkv(n, d, 1000 * n + d + causal, False))
                    _poison(q.numel() * 2)
                    try:
                        o = fa4_authors(q, k, v, causal=causal)
                        torch.cuda.synchronize()
                        err = relative_error(o, reference_attention(q, k, v, causal)[0])
                        good = err < TOLERANCE[dtype]  # NaN compares False
                    except Exception as exc:  # e.g. a head_dim its Hopper forward does not take
                        raised = raised or f"{type(exc).__name__}: {str(exc)[:300]}"
                        RESULTS["errors"].append(f"{what}: {traceback.format_exc()[-1500:]}")
                        continue
                    RESULTS["checks"].append({"config": "fa4 (authors)", "dtype": str(dtype), "seq_len": n,
                                              "causal": causal, "head_dim": d, "rel_err": err, "ok": good})
                    if not good:
                        say(f"  WRONG {what}: rel err {err:.2e}")
                    ok &= good
        verdicts[d] = None if raised and ok else ok
        state = f"raised ({raised}): not timed at D={d}" if raised and ok else ("ok" if ok else "FAILED")
        say(f"  {'fa4 (authors), flash-attn-4':44s} D={d}: {state}")
    return verdicts


# -- timing ----------------------------------------------------------------------------------------

def sdpa(backend_name: str | None):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    def run(q, k, v, causal):
        if backend_name is None:
            return scaled_dot_product_attention(q, k, v, is_causal=causal)
        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def tflops(b, h, n, d, causal, ms) -> float:
    return 4 * b * h * n * n * d / (2 if causal else 1) / (ms * 1e-3) / 1e12


def time_all(shapes, providers_for, rounds: int) -> dict:
    import triton.testing
    inputs, times = {}, {}
    for r in range(rounds):
        for label, b, h, n, d, c in shapes:
            if label not in inputs:
                gen = torch.Generator(device="cuda").manual_seed(n + d)
                inputs[label] = tuple(torch.randn(b, h, n, d, device="cuda", generator=gen, dtype=torch.bfloat16)
                                      for _ in range(3))
            q, k, v = inputs[label]
            providers = list(providers_for(d, c, n, b * h).items())
            shift = r % len(providers)
            for pname, fn in providers[shift:] + providers[:shift]:
                beat(f"time {label} {pname} round {r}")
                try:
                    ms = triton.testing.do_bench(lambda: fn(q, k, v, c), warmup=25, rep=100, return_mode="median")
                except Exception as exc:
                    say(f"  {label} {pname}: {type(exc).__name__}: {str(exc)[:200]}")
                    ms = float("nan")
                times.setdefault(label, {}).setdefault(pname, []).append(ms)
        say(f"round {r + 1}/{rounds} done")
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", action="store_true", help="check and time the candidate configs too")
    parser.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="goal")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check-only", action="store_true")
    parser.add_argument("--fa4", action="store_true", help="issue 40: ours against the authors' FA-4 and cuDNN at "
                                                           "its 18 shapes, and fa4_candidates where it names any")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.fa4:
        args.shapes = "fa4"
    threading.Thread(target=_watchdog, daemon=True).start()

    import triton
    versions = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(), "backend": backend(), "backend_reason": backend_reason()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        versions.update(gpu=props.name, sm_count=props.multi_processor_count,
                        capability=f"{props.major}.{props.minor}")
    RESULTS["versions"] = versions
    say(json.dumps(versions))
    reason = v3_unavailable_reason()
    if reason:
        say(f"FA-3 kernel unavailable: {reason}")
        return 2

    def extra(d, c):  # the candidates checked and timed beside the shipped config of a class
        return variants(d, c) if args.variants else fa4_candidates(d, c) if args.fa4 else {}

    configs: dict[str, tuple[Fa3Config, int, bool]] = {}
    for (d, c), cfg in SHIPPED.items():
        configs[f"shipped {name(cfg)}|{d}|{c}"] = (cfg, d, c)
        for vname, vcfg in extra(d, c).items():
            configs[f"{vname}|{d}|{c}"] = (vcfg, d, c)
    jobs = [("fa3", d, c, dt, tuple(cfg.__dict__.values())) for cfg, d, c in configs.values()
            for dt in ("bfloat16", "float16")]
    # _check_lpt's reference (the same config with lpt off), where it is not a config of the run already
    refs = {(replace(cfg, lpt=False), d) for cfg, d, c in configs.values() if cfg.lpt and c}
    jobs += [("fa3", d, True, "bfloat16", tuple(ref.__dict__.values())) for ref, d in refs
             if (ref, d, True) not in configs.values()]
    if not args.fa4:
        jobs += [("fa2", d, c, "bfloat16", None) for d in (64, 128) for c in (False, True)]
    precompile(jobs)

    say("== correctness (float64 reference, ragged N, fp16 + bf16, NaN-poisoned outputs)")
    passed = {}
    for key, (cfg, d, c) in configs.items():
        passed[key] = check(cfg, d, c, key.split("|")[0])
    shapes = SHAPE_SETS[args.shapes]
    fa4_ok = check_fa4(sorted({s[4] for s in shapes}))
    for d, verdict in fa4_ok.items():
        if verdict is False:
            passed[f"fa4 (authors)|{d}"] = False
    _dump()
    if args.check_only:
        return 0 if all(passed.values()) else 1

    sms = sm_count(torch.device("cuda"))

    def providers_for(d, c, n, bh):
        out = {}
        shipped_key = f"shipped {name(SHIPPED[(d, c)])}|{d}|{c}"
        if passed.get(shipped_key):  # the config the library runs at this shape (config_for_v3: the tail split
            # only where it splits something, the short-sequence config where it finishes first)
            cfg = config_for_v3(d, c, n, bh, sms)
            out["fa3"] = lambda q, k, v, causal, cfg=cfg: flash_attention_v3(q, k, v, causal=causal, config=cfg)
        for vname, vcfg in extra(d, c).items():
            if passed.get(f"{vname}|{d}|{c}"):
                vcfg = tail_split_where_it_splits(vcfg, n, bh, sms)
                out[vname] = lambda q, k, v, causal, cfg=vcfg: flash_attention_v3(q, k, v, causal=causal, config=cfg)
        if fa4_ok.get(d):
            out["fa4 (authors)"] = fa4_authors
        out["sdpa default"] = sdpa(None)
        if args.fa4:  # ours, theirs, cuDNN: nothing else in these rounds
            return out
        out["fa2 (ours)"] = lambda q, k, v, causal: flash_attention(q, k, v, causal=causal)
        out["sdpa flash"] = sdpa("FLASH_ATTENTION")
        if n == 8192:
            out["sdpa cudnn"] = sdpa("CUDNN_ATTENTION")
        return out

    say(f"== timing {len(shapes)} shapes, {args.rounds} interleaved rounds (do_bench medians, bf16)")
    times = time_all(shapes, providers_for, args.rounds)
    table = []
    for label, b, h, n, d, c in shapes:
        med = {p: statistics.median(v) for p, v in times[label].items()}
        tf = {p: tflops(b, h, n, d, c, ms) for p, ms in med.items()}
        spread = {p: (max(v) - min(v)) / statistics.median(v) for p, v in times[label].items()}
        RESULTS["timings"][label] = {"shape": [b, h, n, d, c], "ms_rounds": times[label], "ms": med, "tflops": tf,
                                     "spread": spread}
        table.append((label, tf))
    _dump()

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(RESULTS, indent=1, default=str))

    say("")
    say(f"== {versions.get('gpu', 'no GPU')}, torch {versions['torch']}, triton {versions['triton']}, cuDNN {versions['cudnn']}, "
        f"{versions['date']}: TFLOPS (median of {args.rounds} rounds), bf16")
    if args.fa4:
        fa4_table(table)
        return 0 if all(passed.values()) else 1
    if args.variants:
        say("-- FA-3 variants (TFLOPS, ÷ shipped)")
        for label, tf in table:
            for p, value in tf.items():
                if p.startswith("fa3 ") and "fa3" in tf:
                    say(f"  {label:24s} {p:44s} {value:6.1f}  {value / tf['fa3']:.3f}×")
    say(f"{'shape':24s} {'fa3':>6s} {'fa2':>6s} {'cudnn':>6s} {'sdpaFA':>6s} {'fa4':>6s}  {'÷cudnn':>6s} {'÷fa2':>6s} "
        f"{'÷fa4':>6s}  goal")
    nan = float("nan")
    for label, tf in table:
        fa3 = tf.get("fa3", nan)
        cudnn = tf["sdpa default"]
        fa4 = tf.get("fa4 (authors)", nan)
        goal = 1.05 if "D128" in label else 1.0
        verdict = "met" if fa3 / cudnn >= goal else f"<{goal:.2f}"
        forced = f"  (forced cuDNN {tf['sdpa cudnn']:.1f})" if "sdpa cudnn" in tf else ""
        say(f"{label:24s} {fa3:6.1f} {tf['fa2 (ours)']:6.1f} {cudnn:6.1f} {tf['sdpa flash']:6.1f} {fa4:6.1f}  "
            f"{fa3 / cudnn:6.3f} {fa3 / tf['fa2 (ours)']:6.3f} {fa3 / fa4:6.3f}  {verdict}{forced}")
    if RESULTS.get("fa4_unavailable"):
        say(f"fa4 (authors): not timed: {RESULTS['fa4_unavailable']}")
    return 0 if all(passed.values()) else 1


def fa4_table(table) -> None:
    """Issue 40's table: ours, the authors' FA-4 and cuDNN side by side, the ratios and the goals (≥ 1.0× FA-4,
    ≥ 1.05× cuDNN); then the candidates ÷ the shipped config."""
    nan = float("nan")
    say(f"{'shape':24s} {'ours':>6s} {'FA-4':>6s} {'cuDNN':>6s}  {'÷FA-4':>6s} {'÷cuDNN':>6s}  goals (≥1.00× FA-4, "
        f"≥1.05× cuDNN)")
    for label, tf in table:
        ours, fa4, cudnn = tf.get("fa3", nan), tf.get("fa4 (authors)", nan), tf.get("sdpa default", nan)
        verdicts = [f"FA-4 {'met' if ours / fa4 >= 1.0 else 'MISSED'}" if fa4 == fa4 else "FA-4 not timed",
                    f"cuDNN {'met' if ours / cudnn >= 1.05 else 'MISSED'}"]
        say(f"{label:24s} {ours:6.1f} {fa4:6.1f} {cudnn:6.1f}  {ours / fa4:6.3f} {ours / cudnn:6.3f}  "
            f"{', '.join(verdicts)}")
    if RESULTS.get("fa4_unavailable"):
        say(f"FA-4 (the authors'): not timed: {RESULTS['fa4_unavailable']}")
    say("-- candidates (fa4_candidates), TFLOPS and ÷ shipped")
    for label, tf in table:
        for p, value in tf.items():
            if p.startswith("fa3 ") and "fa3" in tf:
                say(f"  {label:24s} {p:52s} {value:6.1f}  {value / tf['fa3']:.3f}×")


if __name__ == "__main__":
    sys.exit(main())
