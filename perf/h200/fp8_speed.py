"""FP8 (e4m3) attention in our FA-3 style kernel on the H200: its error, checked and tabled, then its speed beside bf16.

    PYTHONUNBUFFERED=1 python3 -m perf.h200.fp8_speed [--json PATH] [--rounds 3]

1. The CPU-emulated error table first (kernels.fp8.emulate_fp8_attention, float64 math on e4m3-rounded inputs and
   P): max and RMS error against float64 of bf16 inputs, fp8 per-tensor, per-head and per-block scales, each with
   and without the Hadamard rotation, on random inputs, the FA-3 paper's outliers (N(0, 10²) added to 0.1 % of
   entries), harsher planted ones (0.1 % ×10–100) and under an attention sink (kernels.fp8.plant_sink), where P
   ×2^4 before its cast (Fa3Config.p_offset) is shown too.
   It needs no GPU kernel, so it is printed even when the kernel fails.
2. Correctness of the kernel: e4m3 Q, K, V (per-head scales) against float64 attention on the dequantized inputs
   (only P's rounding and O's bf16 differ: relative error < 5 %) and on the unquantized inputs (< 10 %), ragged N
   (1, 17, 255, 1000, 4097), causal and not, head_dim 64, 128 and 256, outputs poisoned with NaN beforehand; per-tensor
   scales too. A failure is printed and nothing is timed.
3. The kernel's error table (the same metrics, measured): bf16 ours (FA-3), fp8 per-tensor, fp8 per-head, fp8 +
   rotation (per-tensor and per-head), on the same four kinds of input, at B1 H4 N4096 D128; then
   each candidate's error beside the shipped kernel's on the three kinds of input, at its (head_dim, causal).
4. Timing, interleaved rounds (triton.testing.do_bench medians, order rotated per round): our FA-3 kernel in bf16
   against the same kernel in e4m3 (its call includes transposing V: kernels/fa3.py says why), B2 H16 8K and 16K,
   D128 and D64, causal and not, and B2 H8 8K D256 causal and not; TFLOPS = 4·B·H·N²·D (÷2 causal) ÷ t;
   fp8 ÷ bf16 (goal ≥ 1.5 at D128 non-causal).
   In the same rounds, at every shape: the shipped e4m3 kernel alone ("fp8 kernel only": Vᵀ and the descales
   prepared outside the timed call, so the transpose's cost is the difference) and each candidate configuration of
   kernels.fp8.fp8_candidates() at the shapes of its (head_dim, causal) (kernel only, checked against float64 first
   like the shipped one; a wrong candidate is left out of the timing and reported), each ÷ the shipped fp8 call,
   ÷ the shipped kernel alone and ÷ bf16.
Exit status: 0 all good; 1 a check failed or the kernel could not run (the emulated table is still printed); 3 the
watchdog (no progress for a minute: a hung kernel).
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
from pathlib import Path

import torch

from kernels.runtime import backend, backend_reason, sm_count  # first: picks the backend before any kernel is decorated
from kernels.fp8 import (PAPER_OUTLIERS, PLANTED_OUTLIERS, attention_error, config_for_fp8, dequantize_fp8,
                         emulate_fp8_attention, fp8_attention, fp8_candidates, fp8_unavailable_reason,
                         hadamard_rotate, plant_sink, quantize_fp8, with_outliers)
from kernels.reference import reference_attention, relative_error
from kernels.fa3 import tail_split_where_it_splits

RAGGED = (1, 17, 255, 1000, 4097)
DEQUANT_TOL, FLOAT64_TOL, LSE_TOL = 0.05, 0.10, 1e-3
STALL_S = 90
# (label, batch, heads, seq_len, head_dim, causal, goal of fp8 ÷ bf16 or None)
SHAPES = [(f"B2 H16 N{n // 1024}K D{d}{' causal' if c else ''}", 2, 16, n, d, c, 1.5 if d == 128 and not c else None)
          for d in (128, 64) for c in (False, True) for n in (8192, 16384)] + [
    (f"B2 H8 N8K D256{' causal' if c else ''}", 2, 8, 8192, 256, c, None) for c in (False, True)]


class Run:
    """The log, printed as it goes, and the JSON record."""

    def __init__(self):
        self.start = time.perf_counter()
        self.beat = time.monotonic()
        self.record: dict = {"emulated": [], "checks": [], "measured_error": [], "candidate_error": [], "timings": {},
                             "failures": []}

    def say(self, *parts) -> None:
        self.beat = time.monotonic()
        print(f"[{time.perf_counter() - self.start:6.1f}s] " + " ".join(str(p) for p in parts), flush=True)

    def failed(self, what: str, exc: BaseException) -> None:
        self.say(f"FAILED {what}: {type(exc).__name__}: {str(exc).strip()[:400]}")
        self.record["failures"].append({"what": what, "error": f"{type(exc).__name__}: {exc}"[:2000],
                                        "trace": traceback.format_exc()[-2000:]})

    def watchdog(self) -> None:
        while True:
            time.sleep(5)
            if time.monotonic() - self.beat > STALL_S:
                print(f"WATCHDOG: no progress for {STALL_S} s: a hung kernel? exiting", flush=True)
                os._exit(3)


# the paper's: N(0, 10²) added to 0.1 % of entries (kernels.fp8.add_outliers); planted: 0.1 % ×10–100; the sink:
# kernels.fp8.plant_sink, gap 4
INPUTS = ("random", "the paper's outliers", "planted outliers", "attention sink")


def _inputs(shape, seed: int, kind: str, device: str) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device=device).manual_seed(seed)
    qkv = [torch.randn(shape, generator=gen, device=device) for _ in range(3)]
    if kind == "attention sink":
        return plant_sink(*qkv, gap=4.0, seed=seed)
    spec = {"planted outliers": PLANTED_OUTLIERS, "the paper's outliers": PAPER_OUTLIERS}.get(kind)
    return with_outliers(qkv, spec, seed)


def _row(run: Run, table: str, what: str, inputs: str, err: dict) -> None:
    run.record[table].append({"what": what, "inputs": inputs, **err})
    run.say(f"  {what:32s} {inputs:16s} max {err['max']:9.3e}  rms {err['rms']:9.3e}  rel rms {err['rel_rms']:7.4f}")


# -- 1. the CPU-emulated errors ---------------------------------------------------------------------------------------

def section_emulated(run: Run) -> None:
    run.say("== error against float64, CPU emulation (B1 H2 N512 D128, not causal; the sink at N4096)")
    for name in INPUTS:
        q, k, v = _inputs((1, 2, 4096 if name == "attention sink" else 512, 128), 5, name, "cpu")
        ref = reference_attention(q.double(), k.double(), v.double())[0]
        _row(run, "emulated", "bf16 inputs (exact math)", name,
             attention_error(reference_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())[0], ref))
        for g in ("tensor", "head", "block"):
            for rotate in (False, True):
                out = emulate_fp8_attention(q, k, v, granularity=g, rotate=rotate)
                _row(run, "emulated", f"fp8 per-{g}{' + rotation' if rotate else ''}", name, attention_error(out, ref))
        out = emulate_fp8_attention(q, k, v, granularity="head", p_offset=4)
        _row(run, "emulated", "fp8 per-head, P×2^4 before cast", name, attention_error(out, ref))


# -- compile first, in parallel (Triton's disk cache), outside the checks and timings -----------------------------

def _compile_job(head_dim: int, causal: bool, fp8: bool, candidate: str = "") -> str:
    from kernels.fa3 import flash_attention_v3
    x = [torch.randn(1, 1, 256, head_dim, device="cuda") for _ in range(3)]
    if fp8:
        config = fp8_candidates()[candidate][2] if candidate else None
        (q, dq), (k, dk), (v, dv) = (quantize_fp8(t, "head") for t in x)
        fp8_attention(q, k, v, causal, descale_q=dq, descale_k=dk, descale_v=dv, config=config)
    else:
        flash_attention_v3(*(t.bfloat16() for t in x), causal=causal)
    torch.cuda.synchronize()
    return f"{candidate or ('fp8' if fp8 else 'bf16')} D={head_dim} {'causal' if causal else 'full'}"


def precompile(run: Run) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context
    jobs = [(d, c, f) for d in (64, 128, 256) for c in (False, True) for f in (True, False)]
    jobs += [(d, c, True, name) for name, (d, c, _) in fp8_candidates().items()]
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=get_context("spawn")) as ex:
        for future in as_completed([ex.submit(_compile_job, *job) for job in jobs]):
            try:
                run.say(f"  compiled {future.result()}")
            except Exception as exc:  # noqa: BLE001 - the checks below report a failing build properly
                run.say(f"  precompile failed: {type(exc).__name__}: {str(exc).strip()[:300]}")


# -- 2. correctness of the kernel ---------------------------------------------------------------------------------------

def _poison(*nbytes: int) -> None:
    """NaN-filled blocks left in the caching allocator: O and the LSE get them, so an unwritten element fails."""
    blocks = [torch.full(((n + 3) // 4,), float("nan"), device="cuda") for n in nbytes]
    del blocks


def check_one(run: Run, n: int, head_dim: int, causal: bool, granularity: str, config=None, name: str = "") -> bool:
    what = f"{name or 'fp8'} per-{granularity} D={head_dim} {'causal' if causal else 'full'} N={n}"
    x = _inputs((2, 3, n, head_dim), n * 3 + head_dim + causal, "random", "cuda")
    (q, dq), (k, dk), (v, dv) = (quantize_fp8(t, granularity) for t in x)
    _poison(q.numel() * 2, 2 * 3 * n * 4)
    try:
        o, lse = fp8_attention(q, k, v, causal, return_lse=True, descale_q=dq, descale_k=dk, descale_v=dv,
                               config=config)
        torch.cuda.synchronize()
        ref, ref_lse = reference_attention(*(dequantize_fp8(t, d) for t, d in ((q, dq), (k, dk), (v, dv))), causal)
        errs = (relative_error(o, ref), relative_error(lse, ref_lse), relative_error(o, reference_attention(*x, causal)[0]))
        good = errs[0] < DEQUANT_TOL and errs[1] < LSE_TOL and errs[2] < FLOAT64_TOL and o.dtype == torch.bfloat16
    except Exception as exc:  # noqa: BLE001 - a compile error or a crash is a failed check, reported
        run.failed(what, exc)
        errs, good = (float("nan"),) * 3, False
    run.record["checks"].append({"what": what, "rel_err_dequantized": errs[0], "lse_rel_err": errs[1],
                                 "rel_err_float64": errs[2], "ok": good})
    if not good:
        run.say(f"  WRONG {what}: O vs dequantized {errs[0]:.2e} (< {DEQUANT_TOL}), LSE {errs[1]:.2e} (< {LSE_TOL}), "
                f"O vs float64 {errs[2]:.2e} (< {FLOAT64_TOL})")
    return good


def section_check(run: Run) -> bool:
    run.say("== correctness: e4m3 kernel against float64 (ragged N, causal and not, D64/D128/D256, NaN-poisoned O)")
    ok = True
    for head_dim in (64, 128, 256):
        for causal in (False, True):
            for n in RAGGED:
                ok &= check_one(run, n, head_dim, causal, "head")
            ok &= check_one(run, 1000, head_dim, causal, "tensor")
            run.say(f"  D={head_dim} {'causal' if causal else 'full  '} ({config_for_fp8(head_dim, causal).label}): "
                    f"{'ok' if ok else 'FAILED so far'}")
    return ok


def section_check_candidates(run: Run) -> dict:
    """name → (head_dim, causal, config) of the candidates whose answers are right (ragged N, per-head and
    per-tensor); a wrong or failing one is reported and left out of the timing."""
    run.say("== correctness of the candidate configurations (same checks)")
    right = {}
    for name, (head_dim, causal, config) in fp8_candidates().items():
        ok = all([check_one(run, n, head_dim, causal, "head", config, name) for n in RAGGED]
                 + [check_one(run, 1000, head_dim, causal, "tensor", config, name)])
        run.say(f"  {name} ({config.label}): {'ok' if ok else 'WRONG: not timed'}")
        if ok:
            right[name] = (head_dim, causal, config)
    return right


# -- 3. the kernel's measured errors ------------------------------------------------------------------------------------

def section_measured_error(run: Run) -> None:
    from kernels.fa3 import flash_attention_v3
    run.say("== error against float64, measured on the GPU (B1 H4 N4096 D128, not causal)")
    for name in INPUTS:
        x = _inputs((1, 4, 4096, 128), 11, name, "cuda")
        ref = reference_attention(*x)[0]
        _row(run, "measured_error", "bf16 ours (FA-3)", name,
             attention_error(flash_attention_v3(*(t.bfloat16() for t in x)), ref))
        for g in ("tensor", "head"):
            for rotate in (False, True):
                q, k = hadamard_rotate(x[0], x[1], seed=0) if rotate else x[:2]
                (q8, dq), (k8, dk), (v8, dv) = (quantize_fp8(t, g) for t in (q, k, x[2]))
                out = fp8_attention(q8, k8, v8, descale_q=dq, descale_k=dk, descale_v=dv)
                _row(run, "measured_error", f"fp8 per-{g}{' + rotation' if rotate else ''}", name,
                     attention_error(out, ref))


def section_candidate_error(run: Run, candidates: dict) -> None:
    """Each candidate's error beside the shipped e4m3 kernel's, per-head scales, at its (head_dim, causal), on every
    kind of input: the ones that change P's rounding (Fa3Config.p_offset) are there for their error, not speed."""
    run.say("== the candidates' error against float64 beside the shipped kernel's (B1 H4 N4096, per-head scales)")
    for name, (head_dim, causal, config) in candidates.items():
        for kind in INPUTS:
            x = _inputs((1, 4, 4096, head_dim), 13, kind, "cuda")
            ref = reference_attention(*x, causal)[0]
            (q8, dq), (k8, dk), (v8, dv) = (quantize_fp8(t, "head") for t in x)
            for what, cfg in (("shipped", None), (name, config)):
                out = fp8_attention(q8, k8, v8, causal, descale_q=dq, descale_k=dk, descale_v=dv, config=cfg)
                _row(run, "candidate_error", f"D{head_dim}{' causal' if causal else ''} {what}"[:32], kind,
                     attention_error(out, ref))


# -- 4. timing ----------------------------------------------------------------------------------------------------------

def tflops(b, h, n, d, causal, ms) -> float:
    return 4 * b * h * n * n * d / (2 if causal else 1) / (ms * 1e-3) / 1e12


def _kernel_only(q8, k8, v8, descales, causal: bool, config):
    """The e4m3 launch alone: Vᵀ and the (3, B·H) descale rows made here, once, outside the timed call."""
    from kernels.fa3 import launch_v3, v_transposed
    b, h, _, d = q8.shape
    vt = v_transposed(v8, config.block_n if config.p_in_place else None)
    descale = torch.stack([t.expand(b, h).reshape(b * h) for t in descales]).float().contiguous()
    return lambda: launch_v3(q8, k8, vt, causal, d ** -0.5, config, descale=descale, v_is_transposed=True)


def section_timing(run: Run, rounds: int, candidates: dict) -> list[tuple]:
    import triton.testing
    from kernels.fa3 import flash_attention_v3
    run.say(f"== timing: {len(SHAPES)} shapes, {rounds} interleaved rounds (do_bench medians); candidates: "
            f"{', '.join(candidates) or 'none'}")
    data = {}
    for label, b, h, n, d, c, _ in SHAPES:
        x = _inputs((b, h, n, d), n + d, "random", "cuda")
        (q8, dq), (k8, dk), (v8, dv) = (quantize_fp8(t, "head") for t in x)
        bf = tuple(t.bfloat16() for t in x)
        del x
        data[label] = {"bf16 fa3": lambda bf=bf, c=c: flash_attention_v3(*bf, causal=c),
                       "fp8 fa3": lambda a=(q8, k8, v8), s=(dq, dk, dv), c=c: fp8_attention(
                           *a, c, descale_q=s[0], descale_k=s[1], descale_v=s[2])}
        data[label]["fp8 kernel only"] = _kernel_only(q8, k8, v8, (dq, dk, dv), c, config_for_fp8(
            d, c, None, n, b * h, sm_count(q8.device)))  # (the config the call runs at this shape)
        for name, (head_dim, causal, config) in candidates.items():
            if (head_dim, causal) == (d, c):
                data[label][f"fp8 {name}"] = _kernel_only(q8, k8, v8, (dq, dk, dv), c, tail_split_where_it_splits(
                    config, n, b * h, sm_count(q8.device)))  # (the tail split only where it splits, as the call)
    times: dict = {}
    for r in range(rounds):
        for label, *_ in SHAPES:
            providers = list(data[label].items())
            shift = r % len(providers)
            for name, fn in providers[shift:] + providers[:shift]:
                try:
                    ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
                except Exception as exc:  # noqa: BLE001
                    run.failed(f"time {label} {name}", exc)
                    ms = float("nan")
                times.setdefault(label, {}).setdefault(name, []).append(ms)
        run.say(f"round {r + 1}/{rounds} done")
    table = []
    for label, b, h, n, d, c, goal in SHAPES:
        med = {p: statistics.median(v) for p, v in times[label].items()}
        tf = {p: tflops(b, h, n, d, c, ms) for p, ms in med.items()}
        run.record["timings"][label] = {"shape": [b, h, n, d, c], "ms_rounds": times[label], "ms": med, "tflops": tf}
        table.append((label, tf, goal))
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="write the record here")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    run = Run()
    threading.Thread(target=run.watchdog, daemon=True).start()
    import triton
    versions = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "torch": torch.__version__, "triton": triton.__version__, "backend": backend(),
                "backend_reason": backend_reason()}
    if torch.cuda.is_available():
        versions["gpu"] = torch.cuda.get_device_name(0)
    run.record["versions"] = versions
    run.say(json.dumps(versions))
    status = 0
    try:
        section_emulated(run)
    except Exception as exc:  # noqa: BLE001
        run.failed("emulated errors", exc)
        status = 1
    why = fp8_unavailable_reason()
    table = []
    right = False
    candidates: dict = {}
    if why is not None:
        run.say(f"the FP8 kernel cannot run here: {why}")
    else:
        precompile(run)
        right = section_check(run)
        candidates = section_check_candidates(run) if right else {}
        if not right:
            run.say("WRONG answers above: nothing is timed (fix the kernel first)")
    if not right:
        status = 1
    else:
        for name, section in (("measured errors", lambda: section_measured_error(run)),
                              ("candidates' errors", lambda: section_candidate_error(run, candidates)),
                              ("timing", lambda: table.extend(section_timing(run, args.rounds, candidates)))):
            try:
                section()
            except Exception as exc:  # noqa: BLE001
                run.failed(name, exc)
                status = 1
    if table:
        run.say("")
        run.say(f"== {versions.get('gpu')}, torch {versions['torch']}, triton {versions['triton']}: TFLOPS, "
                f"median of {args.rounds} rounds (fp8: per-head descales, V transposed in the call)")
        run.say(f"{'shape':24s} {'bf16':>7s} {'fp8':>7s} {'fp8÷bf16':>9s}  goal")
        for label, tf, goal in table:
            ratio = tf["fp8 fa3"] / tf["bf16 fa3"]
            verdict = "" if goal is None else ("met" if ratio >= goal else f"< {goal}")
            run.say(f"{label:24s} {tf['bf16 fa3']:7.1f} {tf['fp8 fa3']:7.1f} {ratio:9.3f}  {verdict}")
        run.say("")
        run.say("== the shipped e4m3 kernel alone and the candidates (kernel only: Vᵀ and descales made beforehand)")
        run.say(f"{'shape':24s} {'what':48s} {'TFLOPS':>7s} {'÷fp8':>6s} {'÷ship':>6s} {'÷bf16':>6s}")
        for label, tf, _ in table:
            for name, value in tf.items():
                if name.startswith("fp8 ") and name != "fp8 fa3":
                    run.say(f"{label:24s} {name:48s} {value:7.1f} {value / tf['fp8 fa3']:6.3f} "
                            f"{value / tf['fp8 kernel only']:6.3f} {value / tf['bf16 fa3']:6.3f}")
    run.record["seconds"] = time.perf_counter() - run.start
    run.record["status"] = status
    if args.json:
        args.json.write_text(json.dumps(run.record, indent=1, default=str))
        run.say(f"wrote {args.json}")
    run.say(f"done in {run.record['seconds']:.0f} s, {len(run.record['failures'])} failures, "
            f"{sum(not c['ok'] for c in run.record['checks'])} wrong checks: exit {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
