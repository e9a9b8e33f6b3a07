"""Where the host's time goes in one short library call, `flash_attention` at 1K (B2 H16 d64 bf16: issue 39's
per-call goal), and what keeping Triton's encoded TMA descriptors for tensors seen before saves. One run:

- per call, host included (1,000 back-to-back calls, median of 5 interleaved rounds): SDPA default, the library's
  call (its fast path: kernels/attention.py), fa3's checked call (what the library ran before the fast path), fa2's;
- a profile of 2,000 library calls (top functions by own time).
(The first version of this script, 2026-12-04 ~12:40, timed the checked calls and one descriptor's encode, 1.6 µs.)

    python -m perf.h200.host_call
"""
from __future__ import annotations

import cProfile
import pstats
import statistics
import time

import torch
import torch.nn.functional as F

from kernels import flash_attention


def per_call_us(fn, calls=1000):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def rounds(entries, n=3):
    out = {k: [] for k in entries}
    for _ in range(n):
        for name, fn in entries.items():
            out[name].append(per_call_us(fn))
    for name, values in out.items():
        print(f"  {name:<34} {statistics.median(values):8.1f} µs   ({', '.join(f'{v:.1f}' for v in values)})",
              flush=True)
    return {k: statistics.median(v) for k, v in out.items()}


def main():
    import triton
    import triton.backends.nvidia.driver as drv
    from kernels import attention, runtime
    from kernels.fa3 import flash_attention_v3
    print("triton", triton.__version__, "torch", torch.__version__)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 16, 1024, 64, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))
    entries = {"SDPA default": lambda: F.scaled_dot_product_attention(q, k, v),
               "flash_attention auto (fast path)": lambda: flash_attention(q, k, v),
               "fa3 checked call (before)": lambda: flash_attention_v3(q, k, v),
               "flash_attention fa2 (checked)": lambda: flash_attention(q, k, v, kernel="fa2")}
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    for name, fn in entries.items():
        print(f"  check {name}: max|Δ| {(fn().double() - ref).abs().max().item():.2e}")
    print(f"fast launchers kept: {len(attention._FAST)}; encoding cache installed: "
          f"{getattr(drv.make_tensordesc_arg, 'flash_live_cache', False)}, entries {len(runtime._ENCODED)}")
    print("per call, host included (1,000 back-to-back calls, median of 5 interleaved rounds):")
    got = rounds(entries, n=5)
    base = got["SDPA default"]
    for name, t in got.items():
        print(f"  {name:<34} {t:8.1f} µs   ÷ SDPA {t / base:.3f}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        flash_attention(q, k, v)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
