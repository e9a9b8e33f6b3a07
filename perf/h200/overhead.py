"""Where a short attention call's time goes on the host: microseconds per call of each step of our FA-2
kernel's call (input checks, config, TMA descriptors, the launch itself), of the whole call with and without TMA
descriptors, of SDPA's flash backend, and of a CUDA graph replay, at a length where the GPU's work is a few
microseconds (batch 1 × 1 head, N 128, head_dim 128, bf16). Host time per call: 2,000 calls back to back, one
synchronize at the end; the GPU time of one call beside it (CUDA events over the same loop).

    python -m perf.h200.overhead    (on the GPU; under a minute)
"""
from __future__ import annotations

import sys
import time

import torch
import triton

from kernels import fa2
from kernels.inputs import check_attention_inputs
from kernels.peers import sdpa_flash
from perf.h200.checks import require_gpu

CALLS = 2000


def per_call_us(fn, calls: int = CALLS) -> tuple[float, float]:
    """(host µs per call, GPU-stream µs per call) over `calls` calls back to back."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host, start.elapsed_time(end) * 1e3 / calls


def main() -> int:
    require_gpu("perf.h200.overhead")
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    for n in (128, 1024, 2048):
        q, k, v = (torch.randn(1 if n == 128 else 2, 1 if n == 128 else 16, n, 128, device="cuda",
                               dtype=torch.bfloat16) for _ in range(3))
        config = fa2.config_for(128, q.dtype, False)
        rows = [
            ("check_attention_inputs", lambda: check_attention_inputs(q, k, v, False, None)),
            ("config_for", lambda: fa2.config_for(128, q.dtype, False)),
            ("TMA descriptors x4", lambda: [fa2.TensorDescriptor.from_tensor(t, [1, 1, 64, 128]) for t in (q, k, v, q)]),
            ("launch_flash, TMA", lambda: fa2.launch_flash(q, k, v, False, 0.088, config, use_tma=True)),
            ("launch_flash, no TMA", lambda: fa2.launch_flash(q, k, v, False, 0.088, config, use_tma=False)),
            ("flash_attention (whole call)", lambda: fa2.flash_attention(q, k, v)),
            ("SDPA flash backend", lambda: sdpa_flash(q, k, v)),
        ]
        print(f"\nB{q.shape[0]} H{q.shape[1]} N{n} D128 bf16 ({config}):")
        print(f"{'step':>32} {'host us/call':>13} {'stream us/call':>15}")
        for label, fn in rows:
            try:
                host, gpu = per_call_us(fn)
                print(f"{label:>32} {host:13.1f} {gpu:15.1f}", flush=True)
            except Exception as exc:
                print(f"{label:>32} {type(exc).__name__}: {str(exc)[:90]}")
        try:
            static = fa2.flash_attention(q, k, v)
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                fa2.flash_attention(q, k, v)
                torch.cuda.synchronize()
                with torch.cuda.graph(graph):
                    static = fa2.flash_attention(q, k, v)
            torch.cuda.synchronize()
            host, gpu = per_call_us(graph.replay)
            print(f"{'CUDA graph replay':>32} {host:13.1f} {gpu:15.1f}   (out finite: "
                  f"{bool(torch.isfinite(static).all())})", flush=True)
        except Exception as exc:
            print(f"{'CUDA graph replay':>32} {type(exc).__name__}: {str(exc)[:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
