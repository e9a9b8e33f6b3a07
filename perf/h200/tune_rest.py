"""Tile configs for the shape classes that ran on untuned defaults: head_dim 16, 32, 256 in 2-byte dtypes and
fp32 at head_dim 64, 128. For each class: every candidate is checked against a float64 reference at N=1000
(not a multiple of any tile), causal and not, then timed at the benchmark shape (B=2, H=16, N=8192),
non-causal; the best and the current default are then timed causal too, side by side, with SDPA beside them.

    python -m perf.tune_rest [64:float32 ...]   (on the GPU; prints one table per class; default: all)
"""
import itertools
import sys
import time

import torch
import torch.nn.functional as F
import triton

from kernels.flash import FlashConfig, _default_config, flash_attention
from bench.measure import time_cuda

B, H, N = 2, 16, 8192
CLASSES = ((16, torch.bfloat16), (32, torch.bfloat16), (256, torch.bfloat16), (64, torch.float32),
           (128, torch.float32))
CANDIDATES = [FlashConfig(*c) for c in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3))]
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


def reference(q, k, v, causal):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def median_ms(fn, warmup_ms=25, rep_ms=150):
    times = time_cuda(fn, warmup_ms, rep_ms)
    return sorted(times)[len(times) // 2]


def main():
    classes = [c for c in CLASSES if str(c[0]) in sys.argv[1:] or f"{c[0]}:{str(c[1])[6:]}" in sys.argv[1:]] or CLASSES
    print(torch.__version__, triton.__version__, torch.cuda.get_device_name())
    torch.manual_seed(0)
    for d, dtype in classes:
        start = time.time()
        small = [torch.randn(1, 2, 1000, d, device="cuda", dtype=dtype) for _ in range(3)]
        refs = {c: reference(*small, c) for c in (False, True)}
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
        ok, timed = [], []
        for cfg in CANDIDATES:
            try:
                errs = [((flash_attention(*small, causal=c, config=cfg).double() - refs[c]).norm() / refs[c].norm()).item()
                        for c in (False, True)]
            except Exception as exc:  # does not fit in shared memory, or does not compile
                print(f"  {cfg}: {type(exc).__name__}")
                continue
            if not max(errs) < TOL[dtype]:
                print(f"  {cfg}: WRONG, rel err {max(errs):.2e}")
                continue
            ok.append(cfg)
            timed.append((median_ms(lambda: flash_attention(q, k, v, config=cfg)), cfg))
        timed.sort(key=lambda t: t[0])
        default = _default_config(d, q.element_size())
        best = timed[0][1]
        print(f"\nd={d} {str(dtype)[6:]}: {len(ok)}/{len(CANDIDATES)} candidates correct, {time.time() - start:.0f} s")
        for ms, cfg in timed[:3]:
            print(f"  top: {ms:.3f} ms {cfg}")
        for causal in (False, True):
            flops = 4 * B * H * N * N * d / (2 if causal else 1)
            t_default = median_ms(lambda: flash_attention(q, k, v, causal=causal, config=default), 50, 400)
            t_best = median_ms(lambda: flash_attention(q, k, v, causal=causal, config=best), 50, 400)
            t_sdpa = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), 50, 400)
            print(f"  causal={causal}: default {default} {t_default:.3f} ms | best {t_best:.3f} ms "
                  f"({flops / t_best / 1e9:.0f} TFLOPS) = {t_default / t_best:.2f}x the default | "
                  f"SDPA default {t_sdpa:.3f} ms (SDPA/ours {t_sdpa / t_best:.2f})")
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
