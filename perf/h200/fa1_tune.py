"""The FA1-order kernel (kernels/fa1.py) tuned as FlashAttention-1's authors would tune it, on the GPU: every
candidate config checked against float64 first, then timed beside our FA-2 kernel, PyTorch eager (matmul,
softmax, matmul) and SDPA's flash backend in one run, at the talk's shape (batch 2 × 16 heads: 32 programs
unsplit, on 132 SMs) and at a shape that fills the GPU (batch 16 × 16 heads), head_dim 128, bf16.

Part 1 sweeps tiles × warps × stages at the heuristic's splits; part 2 takes the best few and varies the split
(1 program per head; FlashAttention-1's heuristic at 1, 2, 4 programs per SM); part 3 prints, for the config
picked, TFLOPS and the ratios FA-1 ÷ FA-2 and FA-1 ÷ eager at every N, with the O round-trip bytes of the
cost model (costmodel.fa1_traffic) beside K/V bytes.

    python -m perf.h200.fa1_tune            (on the GPU; about 2.5 minutes)
    python -m perf.h200.fa1_tune --other    (head_dim 64 and 256, fp32: a few tiles each)
"""
from __future__ import annotations

import itertools
import sys
import time

import torch
import triton
from triton.testing import do_bench

import costmodel
from costmodel import Shape
from kernels.fa1 import flash_attention_v1
from kernels.fa2 import FlashConfig, flash_attention
from kernels.peers import sdpa_flash, torch_naive
from kernels.reference import reference_attention, relative_error
from perf.h200.checks import require_gpu

D, DTYPE = 128, torch.bfloat16


def qkv(batch, heads, n, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(batch, heads, n, D, device="cuda", dtype=DTYPE, generator=g) for _ in range(3)]


def ms(fn) -> float:
    return do_bench(fn, warmup=25, rep=100)


def tflops(batch, heads, n, causal, t_ms) -> float:
    shape = Shape(n, batch, heads, D, "bfloat16", causal)
    return costmodel.attention_flops(shape) / (t_ms * 1e-3) / 1e12


def check(config, splits, causal) -> float:
    q, k, v = qkv(1, 3, 1000, seed=1)
    o = flash_attention_v1(q, k, v, causal=causal, config=config, splits=splits)
    return relative_error(o, reference_attention(q, k, v, causal=causal)[0])


def slots_splits(batch, heads, n, block_m, per_sm):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return costmodel.fa1_splits(batch * heads, triton.cdiv(n, block_m), sms * per_sm)


def other_classes() -> int:
    """The other shape classes (head_dim 64 and 256, fp32): a few tiles each at the talk's batch 2 × 16 heads,
    N 4096, the heuristic's splits, beside FA-2 (ms)."""
    global D, DTYPE
    for d, dtype, tiles in ((64, torch.bfloat16, ((64, 64, 4), (64, 128, 4), (128, 128, 8), (64, 256, 4))),
                            (256, torch.bfloat16, ((32, 32, 4), (64, 64, 4), (64, 128, 4), (64, 64, 8))),
                            (128, torch.float32, ((32, 32, 4), (32, 64, 4), (64, 64, 4), (64, 32, 4)))):
        D, DTYPE = d, dtype
        q, k, v = qkv(2, 16, 4096)
        t2 = ms(lambda: flash_attention(q, k, v))
        row = [f"fa2={t2:.3f}"]
        for bm, bn, w in tiles:
            config = FlashConfig(bm, bn, w, 1)
            try:
                err = check(config, 3, True)
                sp = slots_splits(2, 16, 4096, bm, 2)
                t1 = ms(lambda: flash_attention_v1(q, k, v, config=config, splits=sp))
                row.append(f"{bm}x{bn}w{w}={t1:.3f}(err {err:.0e})")
            except Exception as exc:
                row.append(f"{bm}x{bn}w{w}: {type(exc).__name__}")
        print(f"D={d} {str(dtype)[6:]} B2H16N4096: " + "  ".join(row), flush=True)
    return 0


def main() -> int:
    require_gpu("perf.h200.fa1_tune")
    if "--other" in sys.argv:
        return other_classes()
    started = time.time()
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    shapes = [(2, 16, 4096, False), (16, 16, 4096, False)]
    candidates = []
    print("\n== part 1: tiles x warps x stages (splits: heuristic, 2 programs/SM), ms ==")
    print(f"{'config':>18} {'err':>8} " + " ".join(f"{f'B{b}H{h}N{n}' + ('c' if c else ''):>14}" for b, h, n, c in shapes))
    for bm, bn, w, st in itertools.product((64, 128), (32, 64, 128), (4, 8), (1, 2, 3)):
        config = FlashConfig(bm, bn, w, st)
        try:
            err = max(check(config, 3, False), check(config, 3, True))
            if err > 2e-2:
                print(f"{bm}x{bn} w{w} s{st}: WRONG rel err {err:.2e}")
                continue
            times = []
            for b, h, n, c in shapes:
                q, k, v = qkv(b, h, n)
                sp = slots_splits(b, h, n, bm, 2)
                times.append(ms(lambda: flash_attention_v1(q, k, v, causal=c, config=config, splits=sp)))
            candidates.append((sum(times), config))
            print(f"{bm:>4}x{bn:<4} w{w} s{st} {err:8.1e} " + " ".join(f"{t:14.3f}" for t in times), flush=True)
        except Exception as exc:  # out of shared memory, registers: not a candidate
            print(f"{bm}x{bn} w{w} s{st}: {type(exc).__name__}: {str(exc)[:80]}")
    candidates.sort(key=lambda c: c[0])
    best = [c for _, c in candidates[:4]]
    print("\n== part 2: splits for the best configs (ms) ==")
    for config in best:
        for b, h, n, c in [(2, 16, 4096, False), (2, 16, 4096, True), (16, 16, 4096, False), (2, 16, 16384, False)]:
            q, k, v = qkv(b, h, n)
            row = []
            for label, sp in (("1/head", 1), ("h1", slots_splits(b, h, n, config.block_m, 1)),
                              ("h2", slots_splits(b, h, n, config.block_m, 2)),
                              ("h4", slots_splits(b, h, n, config.block_m, 4))):
                row.append(f"{label}({sp})={ms(lambda: flash_attention_v1(q, k, v, causal=c, config=config, splits=sp)):.3f}")
            print(f"{config} B{b}H{h}N{n}{'c' if c else ''}: " + "  ".join(row), flush=True)
    pick = best[0]
    print(f"\n== part 3: picked {pick} with the heuristic at 2 programs/SM, against FA-2, eager, SDPA flash ==")
    print(f"{'shape':>16} {'fa1 ms':>8} {'fa1 TF':>7} {'fa2 ms':>8} {'eager ms':>9} {'sdpa_f ms':>9} "
          f"{'fa1/fa2':>8} {'fa1/eager':>9} {'splits':>6} {'O rt GB':>8} {'KV GB':>7}")
    for b, h in ((2, 16), (16, 16)):
        for n in (1024, 2048, 4096, 8192, 16384):
            for c in (False, True):
                q, k, v = qkv(b, h, n)
                sp = slots_splits(b, h, n, pick.block_m, 2)
                t1 = ms(lambda: flash_attention_v1(q, k, v, causal=c, config=pick, splits=sp))
                t2 = ms(lambda: flash_attention(q, k, v, causal=c))
                try:
                    te = ms(lambda: torch_naive(q, k, v, causal=c))
                except torch.OutOfMemoryError:
                    te = float("nan")
                torch.cuda.empty_cache()
                ts = ms(lambda: sdpa_flash(q, k, v, causal=c))
                parts = {t.name: t for t in costmodel.fa1_traffic(Shape(n, b, h, D, "bfloat16", c),
                                                                  pick.block_m, pick.block_n, splits=sp)}
                rt = sum(t.total for name, t in parts.items() if "O, m, l" in name)
                kv = sum(t.reads for name, t in parts.items() if name.startswith("load K, V"))
                print(f"{f'B{b}H{h}N{n}' + ('c' if c else ''):>16} {t1:8.3f} {tflops(b, h, n, c, t1):7.1f} "
                      f"{t2:8.3f} {te:9.3f} {ts:9.3f} {t1 / t2:8.2f} {t1 / te:9.2f} {sp:6d} {rt / 1e9:8.2f} "
                      f"{kv / 1e9:7.2f}", flush=True)
    print(f"\ndone in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
