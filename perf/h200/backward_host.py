"""Where a short backward's time goes (issue 41): per call, host included, the FA-3 style backward alone
(`kernels.fa3_bwd.launch_backward`), through the library's autograd (`flash_attention(kernel="fa3")`, whichever path
it ships), through the custom operator `torch.ops.flash_live.attention` (what torch.compile traces), and SDPA's
cuDNN backward; then the GPU alone: the backward's own kernels, summed by torch.profiler. B2 H16 bf16, d64 and
d128, 1K, 2K and 4K tokens, causal and not; per call = 300 back-to-back calls, one synchronize, median of 3
interleaved rounds. Autograd's two paths are first held to the same gradients (to 1e-2 relative: the FA-3 style
backward adds dQ by a TMA reduce, whose order varies from call to call, so not bit for bit).

    PYTHONUNBUFFERED=1 python -m perf.h200.backward_host
"""
from __future__ import annotations

import statistics

from kernels.runtime import backend  # first: it picks the backend
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels import fa3_bwd
from kernels.attention import flash_attention
from kernels.reference import relative_error
from perf.h200.host_call import per_call_us


def per_call_ms(fn, calls=300) -> float:
    return per_call_us(fn, calls) / 1e3


def kernel_ms(fn, calls=20, warmup=5) -> dict[str, float]:
    """{CUDA kernel name: its device time in ms a call of fn}, from torch.profiler over `calls` calls after `warmup`
    untimed ones."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return {e.key: e.self_device_time_total / calls / 1e3 for e in prof.key_averages()
            if e.device_type.name == "CUDA" and e.count}


def gpu_ms(fn, calls=20) -> float:
    """The backward's own kernels' device time a call (`_fa3_bwd`, `_bwd_rows`, and the casts and fills it launches)."""
    return sum(kernel_ms(fn, calls).values())


def main() -> int:
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; ms a call (host included), B2 H16 bf16")
    print(f"{'d':>4} {'N':>6} {'mask':6} {'launch_backward':>16} {'autograd':>9} {'operator':>9} {'cuDNN':>7} "
          f"{'GPU alone':>10} {'cuDNN ÷ autograd':>17}")
    for d in (64, 128):
        for n in (1024, 2048, 4096):
            for causal in (False, True):
                gen = torch.Generator(device="cuda").manual_seed(n + d)
                q, k, v = (torch.randn(2, 16, n, d, generator=gen, device="cuda", dtype=torch.bfloat16)
                           .requires_grad_() for _ in range(3))
                do = torch.randn(2, 16, n, d, generator=gen, device="cuda", dtype=torch.bfloat16)
                scale = d ** -0.5
                with torch.no_grad():
                    o, lse = flash_attention(q, k, v, causal=causal, kernel="fa3", return_lse=True)
                out = flash_attention(q, k, v, causal=causal, kernel="fa3")
                op_out = torch.ops.flash_live.attention(q, k, v, causal, scale, "fa3")[0]
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    ref_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                grads = torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                op_grads = torch.autograd.grad(op_out, (q, k, v), do, retain_graph=True)
                same = all(relative_error(a, b) < 1e-2 for a, b in zip(grads, op_grads))
                runs = {
                    "launch": lambda: fa3_bwd.launch_backward(q, k, v, o, lse, do, causal, scale),
                    "autograd": lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True),
                    "operator": lambda: torch.autograd.grad(op_out, (q, k, v), do, retain_graph=True),
                    "cudnn": lambda: torch.autograd.grad(ref_out, (q, k, v), do, retain_graph=True),
                }
                times = {name: [] for name in runs}
                for _ in range(3):  # interleaved rounds
                    for name, fn in runs.items():
                        times[name].append(per_call_ms(fn))
                med = {name: statistics.median(ts) for name, ts in times.items()}
                print(f"{d:>4} {n:>6} {'causal' if causal else 'full':6} {med['launch']:>16.3f} {med['autograd']:>9.3f} "
                      f"{med['operator']:>9.3f} {med['cudnn']:>7.3f} {gpu_ms(runs['launch']):>10.3f} "
                      f"{med['cudnn'] / med['autograd']:>17.3f}" + ("" if same else "  GRADIENTS DIFFER"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
