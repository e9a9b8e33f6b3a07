"""A tile sweep for flash shape classes: 24 candidates (block_m 64/128 × block_n 32/64/128 × 4/8 warps × 2/3
stages). Each is checked against float64 at N=1000 (no multiple of any tile), causal and not, then timed at the
benchmark shape (B=2, H=16, N=8192), non-causal; the best and the shipped config (kernels.fa2.config_for)
are then timed causal and not, side by side, with SDPA's default beside them. A winner goes into
kernels.fa2.TUNED_CONFIGS by hand (then `python -m perf.h200.check_tuned`).

    python -m perf.h200.tune_rest [HEAD_DIM:DTYPE ...]   (on the GPU; default: the classes below; e.g. 128:bfloat16)
"""
from __future__ import annotations

import itertools
import statistics
import sys
import time

import torch
import triton

from costmodel import Shape
from bench.measure import Setting, attention_flops, inputs, runner, time_cuda
from kernels.fa2 import FlashConfig, config_for, flash_attention
from kernels.inputs import DTYPES_BY_NAME
from perf.h200.checks import require_gpu, sweep

B, H, N = 2, 16, 8192
CLASSES = ((16, "bfloat16"), (32, "bfloat16"), (256, "bfloat16"), (64, "float32"), (128, "float32"))
CANDIDATES = [FlashConfig(*c) for c in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3))]


def median_ms(fn, warmup_ms: float = 25, rep_ms: float = 150) -> float:
    return statistics.median(time_cuda(fn, warmup_ms, rep_ms))


def with_config(config: FlashConfig):
    return lambda s, q, k, v: flash_attention(q, k, v, causal=s.shape.causal, config=config)


def tune(head_dim: int, dtype: str) -> None:
    start = time.time()
    checks = [Setting("fa2", Shape(1000, 1, 2, head_dim, dtype, c)) for c in (False, True)]
    full = Setting("fa2", Shape(N, B, H, head_dim, dtype))
    q, k, v = inputs(full, seed=0)
    timed = []
    for config in CANDIDATES:
        said: list[str] = []
        if sweep(checks, with_config(config), label=str(config), say=said.append):
            print("\n".join(said))  # it does not fit in shared memory, does not compile, or is wrong
            continue
        timed.append((median_ms(lambda: flash_attention(q, k, v, config=config)), config))
    timed.sort(key=lambda t: t[0])
    print(f"\nd={head_dim} {dtype}: {len(timed)}/{len(CANDIDATES)} candidates correct, {time.time() - start:.0f} s")
    for ms, config in timed[:3]:
        print(f"  top: {ms:.3f} ms {config}")
    best = timed[0][1]
    for causal in (False, True):
        s = Setting("fa2", Shape(N, B, H, head_dim, dtype, causal))
        shipped = config_for(head_dim, DTYPES_BY_NAME[dtype], causal)
        t_shipped = median_ms(lambda: flash_attention(q, k, v, causal=causal, config=shipped), 50, 400)
        t_best = median_ms(lambda: flash_attention(q, k, v, causal=causal, config=best), 50, 400)
        t_sdpa = median_ms(runner(Setting("sdpa_default", Shape(N, B, H, head_dim, dtype, causal)), q, k, v), 50, 400)
        print(f"  causal={causal}: shipped {shipped} {t_shipped:.3f} ms | best {t_best:.3f} ms "
              f"({attention_flops(s) / t_best / 1e9:.0f} TFLOPS) = {t_shipped / t_best:.2f}x the shipped | "
              f"SDPA default {t_sdpa:.3f} ms (SDPA/ours {t_sdpa / t_best:.2f})")
    del q, k, v
    torch.cuda.empty_cache()


def main(argv: list[str]) -> int:
    require_gpu("perf.h200.tune_rest")
    classes = [(int(d), dtype) for d, dtype in (arg.split(":") for arg in argv)] or list(CLASSES)
    print(torch.__version__, triton.__version__, torch.cuda.get_device_name())
    for head_dim, dtype in classes:
        tune(head_dim, dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
