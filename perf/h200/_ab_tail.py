"""Temporary A/B (not shipped): the kernel before the tail split (git HEAD copy), the new kernel without and with it."""
import dataclasses, statistics, sys, time
import torch
import triton.testing
from kernels import flash_v3, _old_flash_v3
from kernels.reference import reference_attention, relative_error
from torch.nn.functional import scaled_dot_product_attention as sdpa

def tf(b, h, n, d, c, ms):
    return 4 * b * h * n * n * d / (2 if c else 1) / (ms * 1e-3) / 1e12

shapes = [(2, 16, 8192, 128, False), (2, 16, 16384, 128, False), (2, 16, 32768, 128, False),
          (1, 32, 8192, 128, False), (1, 32, 16384, 128, False), (1, 32, 32768, 128, False),
          (2, 16, 8192, 64, False), (2, 16, 32768, 64, False), (2, 16, 8192, 128, True)]
def provs(d, c):
    cfg = flash_v3.V3_CONFIGS[(d, c)]
    plain = dataclasses.replace(cfg, tail_split=False)
    split = dataclasses.replace(cfg, tail_split=True)
    oc = _old_flash_v3.V3_CONFIGS[(d, c)]
    return {"old": lambda q, k, v: _old_flash_v3.flash_attention_v3(q, k, v, causal=c, config=oc),
            "new-plain": lambda q, k, v: flash_v3.flash_attention_v3(q, k, v, causal=c, config=plain),
            "new-split": lambda q, k, v: flash_v3.flash_attention_v3(q, k, v, causal=c, config=split),
            "cudnn": lambda q, k, v: sdpa(q, k, v, is_causal=c)}
inputs = {}
for s in shapes:
    b, h, n, d, c = s
    g = torch.Generator(device="cuda").manual_seed(n + d)
    inputs[s] = tuple(torch.randn(b, h, n, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))
    q, k, v = inputs[s]
    if n == 8192:
        ref = sdpa(q.double(), k.double(), v.double(), is_causal=c) if b * h * n <= 2 * 16 * 8192 else None
        for p, fn in provs(d, c).items():
            err = relative_error(fn(q, k, v), ref)
            print(f"check {s} {p}: rel err {err:.2e}", flush=True)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
times = {}
for r in range(ROUNDS):
    for s in shapes:
        q, k, v = inputs[s]
        items = list(provs(s[3], s[4]).items())
        items = items[r % 4:] + items[:r % 4]
        for p, fn in items:
            ms = triton.testing.do_bench(lambda: fn(q, k, v), warmup=25, rep=100, return_mode="median")
            times.setdefault(s, {}).setdefault(p, []).append(ms)
    print(f"round {r + 1}/{ROUNDS}", flush=True)
print(f"{'shape':28s} {'old':>6s} {'plain':>6s} {'split':>6s} {'cudnn':>6s}  plain/old split/old split/plain  split/cudnn  old/cudnn  [spread split, old]")
for s in shapes:
    med = {p: statistics.median(v) for p, v in times[s].items()}
    t = {p: tf(*s, ms) for p, ms in med.items()}
    sp = {p: (max(v) - min(v)) / statistics.median(v) for p, v in times[s].items()}
    print(f"B{s[0]} H{s[1]} N{s[2] // 1024}K D{s[3]}{' causal' if s[4] else '':7s} {t['old']:6.1f} {t['new-plain']:6.1f} "
          f"{t['new-split']:6.1f} {t['cudnn']:6.1f}  {t['new-plain'] / t['old']:9.3f} {t['new-split'] / t['old']:9.3f} "
          f"{t['new-split'] / t['new-plain']:11.3f}  {t['new-split'] / t['cudnn']:11.3f}  {t['old'] / t['cudnn']:9.3f}"
          f"  [{sp['new-split']:.3f}, {sp['old']:.3f}]")
