"""First H200 call: kernels compile and agree with float64 on the GPU; trace mode is bit-exact;
a first sweep of flash tile configs against torch SDPA at the issue's benchmark shape.

    python -m perf.smoke   (on the GPU)
"""
import itertools, math, sys, time
import torch, triton, triton.testing
import kernels
from kernels.flash import FlashConfig, flash_attention, flash_attention_traced, flash_attention_sm_timeline
from kernels.naive import naive_attention
from bench.device import device_facts
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F

print(kernels.backend(), kernels.backend_reason(), triton.__version__, torch.__version__)
print(device_facts(measure_bandwidth=True))
torch.manual_seed(0)

def ref(q, k, v, causal, scale):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool, device=s.device), 1), float("-inf"))
    return torch.softmax(s, -1) @ v

bad = 0
t0 = time.time()
for dtype, d, n, causal in itertools.product((torch.float32, torch.float16, torch.bfloat16), (16, 32, 64, 128, 256),
                                             (1, 17, 257, 1000), (False, True)):
    q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(3))
    r = ref(q, k, v, causal, d ** -0.5)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    for name, fn in (("flash", flash_attention), ("naive", naive_attention)):
        try:
            o = fn(q, k, v, causal=causal)
            err = ((o.double() - r).norm() / r.norm()).item()
        except Exception as exc:
            err = float("inf"); print("EXC", name, dtype, d, n, causal, repr(exc)[:300])
        if not err < tol:
            bad += 1; print("FAIL", name, dtype, d, n, causal, err)
print(f"correctness sweep done in {time.time()-t0:.0f}s, failures: {bad}")

# trace mode bit-exact vs untraced with the same tiles
q, k, v = (torch.randn(1, 2, 300, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for causal in (False, True):
    o_t, _, tr = flash_attention_traced(q, k, v, causal, 64, 64, record_sm=True)
    cfg = FlashConfig(64, 64, tr and 4, 2)
    o_u = flash_attention(q, k, v, causal=causal, config=FlashConfig(64, 64, kernels.flash.config_for(64, q.dtype, causal).num_warps, 2))
    sm = tr.sm
    print("trace causal", causal, "bit-exact", torch.equal(o_t, o_u), "steps recorded",
          int((~torch.isnan(tr.stats[..., 0, 0])).sum()), "sm range", int(sm[..., 0].min()), int(sm[..., 0].max()),
          "dur>0", bool((sm[..., 2] > sm[..., 1]).all()))

# benchmark shape: B=2, H=16, N=8192, bf16
B, H, N = 2, 16, 8192
rows = []
def bench(fn):
    return triton.testing.do_bench(fn, warmup=100, rep=400, return_mode="median")
for d, causal in ((128, False), (128, True), (64, False), (64, True)):
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    tf = lambda ms: flops / ms / 1e9
    res = {}
    for be, name in ((SDPBackend.FLASH_ATTENTION, "sdpa_flash"), (SDPBackend.CUDNN_ATTENTION, "sdpa_cudnn"), (SDPBackend.EFFICIENT_ATTENTION, "sdpa_eff")):
        try:
            with sdpa_kernel(be):
                res[name] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        except Exception as exc:
            print(name, "failed", repr(exc)[:200])
    res["sdpa_default"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    for bm, bn, w, s in ((128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 8, 4),
                         (64, 64, 4, 3), (128, 32, 4, 3), (128, 128, 4, 3), (64, 128, 4, 3), (128, 64, 4, 4)):
        cfg = FlashConfig(bm, bn, w, s)
        try:
            o = flash_attention(q, k, v, causal=causal, config=cfg)
            res[f"flash{bm}x{bn}w{w}s{s}"] = bench(lambda: flash_attention(q, k, v, causal=causal, config=cfg))
        except Exception as exc:
            print("cfg", cfg, "failed", repr(exc)[:200])
    try:
        res["naive"] = bench(lambda: naive_attention(q, k, v, causal=causal))
    except Exception as exc:
        print("naive failed", repr(exc)[:300])
    for name, ms in sorted(res.items(), key=lambda x: x[1]):
        print(f"d={d} causal={causal} {name:24s} {ms:8.3f} ms {tf(ms):7.1f} TFLOPS")
    del q, k, v
    torch.cuda.empty_cache()
