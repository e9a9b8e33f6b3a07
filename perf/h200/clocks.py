"""SM clock, power and throttle reasons while each kernel runs, on the H200: are two kernels timed side by side
running at the same clock?

    python3 -m perf.h200.clocks [--seconds 4] [--shape 2,16,8192,128]

For each provider (our FA-3 style kernel, our FA-2 order kernel, SDPA's default = cuDNN here), the kernel is
launched back to back for --seconds while `nvidia-smi` samples the GPU every 100 ms; the table gives, per provider,
the median SM clock, power draw, temperature, the throttle reasons seen, and the kernel's TFLOPS over that window
(events around the loop: the clocks it ran at, not the 'clocks left alone' of do_bench). Providers run twice,
interleaved (A B C A B C), after a warm-up.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections import Counter

import torch

from kernels.runtime import backend  # first: the backend is chosen before any kernel is decorated
from kernels.flash import flash_attention
from kernels.flash_v3 import flash_attention_v3
from perf.h200.fa3_speed import sdpa, tflops

FIELDS = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def sample_while(run, seconds: float) -> tuple[list[list[str]], float, int]:
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-lms", "100"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)  # nvidia-smi's first line
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0, calls = time.perf_counter(), 0
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(5):
            run()
        calls += 5
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    out, _ = smi.communicate(timeout=10)
    rows = [[x.strip() for x in line.split(",")] for line in out.strip().splitlines() if line.count(",") == 3]
    return rows[3:] or rows, start.elapsed_time(end), calls  # the first samples are from before the loop


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--shape", default="2,16,8192,128")
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args(argv)
    assert backend() == "cuda", "needs the GPU"
    b, h, n, d = (int(x) for x in args.shape.split(","))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cudnn = sdpa(None)  # SDPA's default: cuDNN on the H200
    providers = {"fa3 (ours)": lambda: flash_attention_v3(q, k, v, causal=args.causal),
                 "fa2 (ours)": lambda: flash_attention(q, k, v, causal=args.causal),
                 "sdpa default (cuDNN)": lambda: cudnn(q, k, v, args.causal)}
    for run in providers.values():  # compile and warm up
        run()
    torch.cuda.synchronize()
    seen: dict[str, dict] = {p: {"rows": [], "tflops": []} for p in providers}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; B{b} H{h} N{n} D{d}"
          f"{' causal' if args.causal else ''}; {args.seconds} s per provider and round, 2 rounds", flush=True)
    for _ in range(2):
        for name, run in providers.items():
            rows, ms, calls = sample_while(run, args.seconds)
            seen[name]["rows"] += rows
            seen[name]["tflops"].append(tflops(b, h, n, d, args.causal, ms / calls))
    print(f"{'provider':22s} {'TFLOPS':>7s} {'SM MHz':>7s} {'W':>6s} {'°C':>4s}  throttle reasons seen (samples)")
    for name, s in seen.items():
        mhz = statistics.median(float(r[0]) for r in s["rows"])
        watts = statistics.median(float(r[1]) for r in s["rows"])
        temp = statistics.median(float(r[2]) for r in s["rows"])
        reasons = Counter(r[3] for r in s["rows"])
        print(f"{name:22s} {statistics.median(s['tflops']):7.1f} {mhz:7.0f} {watts:6.0f} {temp:4.0f}  "
              + ", ".join(f"{k} ({v})" for k, v in sorted(reasons.items())), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
