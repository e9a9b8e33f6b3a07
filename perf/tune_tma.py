"""H200: shipped flash vs the TMA experiment (several configs, warp specialization on/off) vs SDPA at
B=2, H=16, N=8192 bf16; correctness of the experiment first. Also the cost of SM-trace recording."""
import sys
import torch, triton.testing
sys.path.insert(0, "."); sys.path.insert(0, "perf")
from flash_tma import flash_tma
from kernels import flash_attention
from kernels.flash import config_for, flash_attention_sm_timeline
from kernels.measure import _time_cuda
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F

def med(fn):
    t = sorted(_time_cuda(fn, 50, 400)); return t[len(t) // 2]

for d, causal in ((128, False), (128, True), (64, False), (64, True)):
    q, k, v = (torch.randn(2, 16, 8192, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    fl = 4 * 2 * 16 * 8192 ** 2 * d / (2 if causal else 1)
    rows = {"ours": med(lambda: flash_attention(q, k, v, causal=causal))}
    rows["ours+sm_trace"] = med(lambda: flash_attention_sm_timeline(q, k, v, causal))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        rows["cudnn"] = med(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        rows["sdpa_flash"] = med(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    for bm, bn, w, s, ws in ((128, 64, 8, 3, False), (128, 128, 8, 3, False), (128, 64, 8, 4, False),
                             (128, 128, 8, 2, False), (128, 64, 4, 3, True), (128, 128, 4, 3, True), (128, 64, 8, 3, True)):
        name = f"tma{bm}x{bn}w{w}s{s}{'ws' if ws else ''}"
        try:
            o = flash_tma(q, k, v, causal, bm, bn, w, s, ws)
            err = ((o.double() - ref.double()).norm() / ref.double().norm()).item()
            if not err < 1e-2:
                print(name, "WRONG", err); continue
            rows[name] = med(lambda: flash_tma(q, k, v, causal, bm, bn, w, s, ws))
        except Exception as exc:
            print(name, "failed", repr(exc)[:200])
    for name, ms in sorted(rows.items(), key=lambda x: x[1]):
        print(f"d={d} causal={causal} {name:24s} {ms:7.3f} ms {fl / ms / 1e9:6.1f} TFLOPS  ours/this {rows['ours'] / ms:5.3f}")
    del q, k, v; torch.cuda.empty_cache()
