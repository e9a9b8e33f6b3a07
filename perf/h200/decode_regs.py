"""Decode at batch 1, 128K–1M tokens: does the split kernel's register budget explain the 2.6–2.9 % it lost when the
merge moved into it (96 registers a thread against 128 before)? Times the shipped launch beside the same kernel
compiled with maxnreg 128 and 168, interleaved, and prints registers, times and ratios.

    python -m perf.h200.decode_regs
"""
from __future__ import annotations

import statistics

import torch

import kernels.decode as dec

VARIANTS = {"shipped": None, "maxnreg 128": 128, "maxnreg 168": 168}
REGS: dict = {}


def launcher(name, cap):
    orig = dec._SPLIT_LAUNCH

    def run(key, grid, where, args, kwargs):
        if cap is None:
            compiled = orig(key, grid, where, args, kwargs)
        else:
            compiled = orig((key, "maxnreg", cap), grid, where, args, {**kwargs, "maxnreg": cap})
        if compiled is not None and name not in REGS and hasattr(compiled, "n_regs"):
            REGS[name] = (compiled.n_regs, getattr(compiled, "n_spills", None))
        return compiled
    return run


def main():
    torch.manual_seed(0)
    orig = dec._SPLIT_LAUNCH
    print(f"{'kv_len':>8} {'variant':>12} {'regs':>5} {'spills':>6} {'µs':>8} {'÷shipped':>9} {'max|Δ|':>8}")
    for kv_len in (131072, 524288, 1 << 20):
        q = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, 8, kv_len, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        outs, times = {}, {n: [] for n in VARIANTS}
        for name, cap in VARIANTS.items():
            dec._SPLIT_LAUNCH = launcher(name, cap)
            outs[name] = dec.decode_attention(q, k, v)
        for _ in range(7):
            for name, cap in VARIANTS.items():
                dec._SPLIT_LAUNCH = launcher(name, cap)
                for _ in range(5):
                    dec.decode_attention(q, k, v)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(100):
                    dec.decode_attention(q, k, v)
                e.record()
                e.synchronize()
                times[name].append(s.elapsed_time(e) * 10)  # µs a call
        dec._SPLIT_LAUNCH = orig
        base = statistics.median(times["shipped"])
        for name in VARIANTS:
            t = statistics.median(times[name])
            regs, spills = REGS.get(name, ("?", "?"))
            diff = (outs[name].float() - outs["shipped"].float()).abs().max().item()
            print(f"{kv_len:>8} {name:>12} {regs!s:>5} {spills!s:>6} {t:>8.1f} {t / base:>9.4f} {diff:>8.2e}",
                  flush=True)
        REGS.clear()


if __name__ == "__main__":
    main()
