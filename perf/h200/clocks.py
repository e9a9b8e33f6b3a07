"""SM clock, power and throttle reasons while each kernel runs, on the H200: are two kernels timed side by side
running at the same clock?

    python3 -m perf.h200.clocks [--seconds 4] [--shape 2,16,8192,128]

For each provider (our FA-3 style kernel, our FA-2 order kernel, SDPA's default = cuDNN here), the kernel is
launched back to back for --seconds while `nvidia-smi` samples the GPU every 100 ms; the table gives, per provider,
the median SM clock, power draw, temperature, the throttle reasons seen, and the kernel's TFLOPS over that window
(events around the loop: the clocks it ran at, not the 'clocks left alone' of do_bench). Providers run twice,
interleaved (A B C A B C), after a warm-up. With --do-bench, each provider instead runs `triton.testing.do_bench`
(as perf.h200.fa3_speed times it: L2 flushed before each call, short bursts) over and over for --seconds: the clocks
and power the benchmark's ratios are measured at, and its median TFLOPS.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import time
from collections import Counter

import torch
import triton.testing

from kernels.runtime import backend  # first: the backend is chosen before any kernel is decorated
from kernels.fa2 import flash_attention
from kernels.fa3 import config_for_v3, flash_attention_v3
from perf.h200.fa3_speed import sdpa, tflops

FIELDS = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def sample_while(run, seconds: float, bench: bool = False) -> tuple[list[list[str]], float]:
    """nvidia-smi's samples while `run` repeats for `seconds`, and the ms per call: CUDA events around the loop,
    or with `bench` the median of do_bench's medians."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-lms", "100"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)  # nvidia-smi's first line
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0, calls = time.perf_counter(), 0
    start.record()
    medians = []
    while time.perf_counter() - t0 < seconds:
        if bench:
            medians.append(triton.testing.do_bench(run, return_mode="median"))
            continue
        for _ in range(5):
            run()
        calls += 5
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    out, _ = smi.communicate(timeout=10)
    rows = [[x.strip() for x in line.split(",")] for line in out.strip().splitlines() if line.count(",") == 3]
    rows = rows[3:] or rows  # the first samples are from before the loop
    return rows, statistics.median(medians) if bench else start.elapsed_time(end) / calls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--shape", default="2,16,8192,128")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--do-bench", action="store_true", help="sample while do_bench times each provider")
    parser.add_argument("--config", action="append", default=[], metavar="FIELD=VALUE,...",
                        help="also an FA-3 config: the shipped one with these fields changed (e.g. q_in_regs=1)")
    args = parser.parse_args(argv)
    assert backend() == "cuda", "needs the GPU"
    b, h, n, d = (int(x) for x in args.shape.split(","))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cudnn = sdpa(None)  # SDPA's default: cuDNN on the H200
    providers = {"fa3 (ours)": lambda: flash_attention_v3(q, k, v, causal=args.causal),
                 "fa2 (ours)": lambda: flash_attention(q, k, v, causal=args.causal),
                 "sdpa default (cuDNN)": lambda: cudnn(q, k, v, args.causal)}
    for spec in args.config:
        fields = dict(kv.split("=") for kv in spec.split(","))
        shipped = config_for_v3(d, args.causal)
        cfg = dataclasses.replace(shipped, **{f: type(getattr(shipped, f))(int(x)) for f, x in fields.items()})
        providers[f"fa3 {spec}"] = lambda cfg=cfg: flash_attention_v3(q, k, v, causal=args.causal, config=cfg)
    for run in providers.values():  # compile and warm up
        run()
    torch.cuda.synchronize()
    seen: dict[str, dict] = {p: {"rows": [], "tflops": []} for p in providers}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; B{b} H{h} N{n} D{d}"
          f"{' causal' if args.causal else ''}; {args.seconds} s per provider and round, 2 rounds"
          f"{', under do_bench' if args.do_bench else ', back to back'}", flush=True)
    for _ in range(2):
        for name, run in providers.items():
            rows, ms = sample_while(run, args.seconds, bench=args.do_bench)
            seen[name]["rows"] += rows
            seen[name]["tflops"].append(tflops(b, h, n, d, args.causal, ms))
    print(f"{'provider':24s} {'TFLOPS':>7s} {'SM MHz':>7s} {'W':>6s} {'°C':>4s}  throttle reasons seen (samples)")
    for name, s in seen.items():
        mhz = statistics.median(float(r[0]) for r in s["rows"])
        watts = statistics.median(float(r[1]) for r in s["rows"])
        temp = statistics.median(float(r[2]) for r in s["rows"])
        reasons = Counter(r[3] for r in s["rows"])
        print(f"{name:24s} {statistics.median(s['tflops']):7.1f} {mhz:7.0f} {watts:6.0f} {temp:4.0f}  "
              + ", ".join(f"{k} ({v})" for k, v in sorted(reasons.items())), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
