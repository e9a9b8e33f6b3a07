"""The causal launch order of the teaching kernels (kernels/fa2.py forward, kernels/fa2_bwd.py backward) on a GPU:
one head after another against the shipped order, the longest programs first across a group of heads whose re-read
tensors fit in L2 (costmodel.lpt_heads_per_group), timed side by side with SDPA's cuDNN and FA-2 backends (~1 min).

    PYTHONUNBUFFERED=1 python -m perf.h200.causal_order [--quick]

Groups of one head come from costmodel.schedule.LPT_L2_BYTES = 0 (the rule then gives 1); the outputs and gradients
of the two orders are compared bit for bit first (a launch order must not change a bit). B2 H16 (and B1 H32 at 8K),
bf16, causal; 3 interleaved rounds, median ms of do_bench; TFLOPS = 4·B·H·N²·D ÷ 2 (forward), × 2.5 (backward).
"""
from __future__ import annotations

import statistics
import sys

from kernels.runtime import backend  # noqa: F401  first: it picks the backend
import torch
from triton.testing import do_bench

import costmodel
from kernels.fa2 import flash_attention
from kernels.fa2_bwd import launch_backward
from kernels.peers import sdpa_default, sdpa_flash

SHIPPED_L2 = costmodel.schedule.LPT_L2_BYTES
ORDERS = {"head by head": 0, "lpt (shipped)": SHIPPED_L2}


def _in_order(l2_bytes, fn):
    def run():
        costmodel.schedule.LPT_L2_BYTES = l2_bytes
        try:
            return fn()
        finally:
            costmodel.schedule.LPT_L2_BYTES = SHIPPED_L2
    return run


def _sdpa_backward(peer, q, k, v):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out = peer(*leaves, True)
    do = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)


def _time(fns, rounds=3):
    times = {name: [] for name in fns}
    for _ in range(rounds):  # interleaved
        for name, fn in fns.items():
            times[name].append(do_bench(fn, warmup=5, rep=30))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> int:
    quick = "--quick" in sys.argv
    shapes = [(2, 16, n, d) for d in (64, 128) for n in ((4096, 8192) if quick else (4096, 8192, 16384))]
    shapes += [(1, 32, 8192, 128)]
    torch.manual_seed(0)
    same = True
    for b, h, n, d in shapes:
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        with torch.no_grad():
            o, lse = flash_attention(q, k, v, causal=True, return_lse=True)
        do = torch.randn_like(o)
        scale = d ** -0.5
        group = costmodel.lpt_heads_per_group(b * h, n, d, q.element_size())
        for pass_ in ("forward", "backward"):
            if pass_ == "forward":
                ours = {name: _in_order(l2, lambda: flash_attention(q, k, v, causal=True))
                        for name, l2 in ORDERS.items()}
                peers = {"cuDNN": lambda: sdpa_default(q, k, v, True), "SDPA FA-2": lambda: sdpa_flash(q, k, v, True)}
                flops = 4 * b * h * n * n * d / 2
            else:
                ours = {name: _in_order(l2, lambda: launch_backward(q, k, v, o, lse, do, True, scale))
                        for name, l2 in ORDERS.items()}
                peers = {"cuDNN": _sdpa_backward(sdpa_default, q, k, v),
                         "SDPA FA-2": _sdpa_backward(sdpa_flash, q, k, v)}
                flops = 2.5 * 4 * b * h * n * n * d / 2
            first, second = (fn() for fn in ours.values())
            equal = all(torch.equal(x, y) for x, y in zip(
                first if isinstance(first, tuple) else (first,), second if isinstance(second, tuple) else (second,)))
            same &= equal
            ms = _time({**ours, **peers})
            tf = {name: flops / (t * 1e-3) / 1e12 for name, t in ms.items()}
            lpt = ms["lpt (shipped)"]
            print(f"{pass_:8} B{b} H{h} N={n:6} d{d:3} causal (group {group:2}): "
                  + "  ".join(f"{name} {t:6.1f}" for name, t in tf.items())
                  + f"   lpt ÷ head by head {ms['head by head'] / lpt:.3f}  ÷ cuDNN {ms['cuDNN'] / lpt:.3f}"
                  f"  ÷ SDPA FA-2 {ms['SDPA FA-2'] / lpt:.3f}  same bits {equal}", flush=True)
        del q, k, v, o, lse, do
        torch.cuda.empty_cache()
    print("every order gave the same bits" if same else "ORDERS DIFFER", flush=True)
    return 0 if same else 2


if __name__ == "__main__":
    sys.exit(main())
