"""Where the host's time goes in one short library call, `flash_attention` at 1K (B2 H16 d64 bf16: issue 39's
per-call goal), and what keeping Triton's encoded TMA descriptors for tensors seen before saves. One run:

- per call, host included (1,000 back-to-back calls, median of 5 interleaved rounds): SDPA default, the library's
  call (its fast path: kernels/attention.py), fa3's checked call (what the library ran before the fast path), fa2's;
- where a call's time goes: the host alone (calls queued behind a GPU kept busy, so none waits for the GPU) and the
  GPU alone (a CUDA graph of the calls replayed: no host between them), for SDPA and the library's call;
- short sequences on the GPU alone: the FA-3 style kernel's shipped config beside one of fewer query rows a program
  (more programs to fill 132 SMs), B2 H16 d64 and d128, 512 to 4K tokens, causal and not, interleaved rounds;
- a profile of 2,000 library calls (top functions by own time).
Since 2026-12-06 the library's call launches through Triton's C launch function directly (kernels/runtime.py
direct_launcher) and writes an LSE nobody asked for into a shared buffer: "Triton's launcher" times the same call
through Triton's launcher, as before; "return_lse=True" with the LSE allocated.
With --variants, instead: variants of the short-sequence config (kernels/fa3.py SHORT; its 2 K/V slots against 4
among them) at head_dim 64 where it runs (512 and 1K not causal, 512 to 4K causal), each checked against float64 at N = 1000, then GPU alone, each ÷
SHORT's config in the same interleaved rounds.
(The first version of this script, 2026-12-04 ~12:40, timed the checked calls and one descriptor's encode, 1.6 µs.)

    python -m perf.h200.host_call            # add --quick to leave out the short-sequence configs
"""
from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
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


def host_only_us(fn, calls=200):
    """Host time a call: the calls are queued behind ~0.1 s of GPU spinning, so none waits on the GPU."""
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t / calls * 1e6


def gpu_only_us(fn, calls=50, replays=10):
    """GPU time a call: `calls` calls captured in one CUDA graph, replayed; no host work between them."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (calls * replays)


def through_tritons_launcher(fn):
    """fn with the fast path's launch through Triton's launcher (its Python layers) instead of a direct call of its C
    launch function (kernels.runtime.direct_launcher); the switch costs two global writes a call."""
    from kernels import runtime

    def call():
        runtime.DIRECT_LAUNCH = False
        try:
            return fn()
        finally:
            runtime.DIRECT_LAUNCH = True
    return call


def where_time_goes(q, k, v, n=5):
    entries = {"SDPA default": lambda: F.scaled_dot_product_attention(q, k, v),
               "flash_attention auto (fast path)": lambda: flash_attention(q, k, v),
               "  the same, Triton's launcher": through_tritons_launcher(lambda: flash_attention(q, k, v))}
    got = {(name, kind): [] for name in entries for kind in ("host", "gpu")}
    for _ in range(n):
        for name, fn in entries.items():
            got[(name, "host")].append(host_only_us(fn))
            got[(name, "gpu")].append(gpu_only_us(fn))
    print(f"where the time goes, B{q.shape[0]} H{q.shape[1]} N{q.shape[2]} d{q.shape[3]} (median of {n} rounds):")
    for name in entries:
        h, g = (statistics.median(got[(name, kind)]) for kind in ("host", "gpu"))
        print(f"  {name:<34} host alone {h:6.1f} µs   GPU alone {g:6.1f} µs")


def interleaved_gpu_us(calls: dict, rounds_n: int) -> dict:
    """name → median GPU-alone µs of calls[name]() (gpu_only_us), the calls taken in turn round by round."""
    times = {name: [] for name in calls}
    for _ in range(rounds_n):
        for name, fn in calls.items():
            times[name].append(gpu_only_us(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def short_configs(rounds_n=5):
    """The shipped configs (SHIPPED: 192 query rows a program at head_dim 64) beside fewer rows a program: SHORT's
    config at head_dim 64, one consumer of 64 rows at 128."""
    from kernels.fa3 import SHORT, Fa3Config, config_for_v3, launch_v3
    print("short sequences, GPU alone (CUDA graph replay), B2 H16 bf16; µs a call; candidate ÷ shipped (> 1: faster):")
    rows = []
    for d in (64, 128):
        for causal in (False, True):
            fewer = SHORT[(64, causal)] if d == 64 else Fa3Config(64, 128, 1, 2, 240, 24, overlap=False)
            configs = {"shipped": config_for_v3(d, causal), "fewer rows": fewer}
            for n in (512, 1024, 2048, 4096):
                g = torch.Generator(device="cuda").manual_seed(n + d)
                q, k, v = (torch.randn(2, 16, n, d, device="cuda", generator=g, dtype=torch.bfloat16)
                           for _ in range(3))
                scale = d ** -0.5
                ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
                ok = {name: (launch_v3(q, k, v, causal, scale, c)[0].double() - ref).abs().max().item()
                      for name, c in configs.items()}
                calls = {name: (lambda c=c: launch_v3(q, k, v, causal, scale, c)) for name, c in configs.items()}
                calls["SDPA default"] = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                med = interleaved_gpu_us(calls, rounds_n)
                print(f"  d{d:3} {'causal' if causal else 'full  '} N={n:5}: shipped {med['shipped']:7.1f}  "
                      f"fewer rows ({fewer.num_consumers}×{fewer.block_m}) {med['fewer rows']:7.1f}  "
                      f"÷shipped {med['shipped'] / med['fewer rows']:.3f}   SDPA {med['SDPA default']:7.1f}   "
                      f"max|Δ| {ok['shipped']:.1e} / {ok['fewer rows']:.1e}", flush=True)
                rows.append({"d": d, "causal": causal, "n": n, **med})
    return rows


def short_variants(rounds_n=7):
    import dataclasses
    from kernels.fa3 import SHORT, launch_v3
    print("variants of the short-sequence config, GPU alone (CUDA graph replay), B2 H16 d64 bf16; ÷ SHORT (> 1: faster)")
    rows = []
    for causal, lengths in ((False, (512, 1024)), (True, (512, 1024, 2048, 4096))):
        short = SHORT[(64, causal)]
        variants = {"SHORT": short,
                    "kv4": dataclasses.replace(short, kv_stages=4),
                    "no lazy": dataclasses.replace(short, lazy_rescale=False),
                    "64 keys": dataclasses.replace(short, block_n=64),
                    "no overlap": dataclasses.replace(short, overlap=False),
                    "no q-regs": dataclasses.replace(short, q_in_regs=False)}
        g = torch.Generator(device="cuda").manual_seed(7)
        q, k, v = (torch.randn(2, 3, 1000, 64, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        for name, c in variants.items():
            err = (launch_v3(q, k, v, causal, 0.125, c)[0].double() - ref).abs().max().item()
            print(f"  check {'causal' if causal else 'full'} {name}: max|Δ| {err:.1e} {'ok' if err < 2e-2 else 'WRONG'}")
            if err >= 2e-2:
                return rows
        for n in lengths:
            q, k, v = (torch.randn(2, 16, n, 64, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))
            med = interleaved_gpu_us({name: (lambda c=c: launch_v3(q, k, v, causal, 0.125, c))
                                      for name, c in variants.items()}, rounds_n)
            print(f"  {'causal' if causal else 'full  '} N={n:5}: " + "  ".join(
                f"{name} {t:6.1f} ({med['SHORT'] / t:.3f})" for name, t in med.items()), flush=True)
            rows.append({"causal": causal, "n": n, **med})
    return rows


def main():
    import triton
    import triton.backends.nvidia.driver as drv
    from kernels import attention, runtime
    from kernels.fa3 import flash_attention_v3
    print("triton", triton.__version__, "torch", torch.__version__)
    if "--variants" in sys.argv:
        short_variants()
        return
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 16, 1024, 64, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))
    entries = {"SDPA default": lambda: F.scaled_dot_product_attention(q, k, v),
               "flash_attention auto (fast path)": lambda: flash_attention(q, k, v),
               "  the same, Triton's launcher": through_tritons_launcher(lambda: flash_attention(q, k, v)),
               "  the same, return_lse=True": lambda: flash_attention(q, k, v, return_lse=True)[0],
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
    where_time_goes(q, k, v)
    if "--quick" not in sys.argv:  # (--quick: the per-call and where-the-time-goes tables and the profile only)
        short_configs()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        flash_attention(q, k, v)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
