"""Compile the FA1-order kernel (kernels/flash_v1.py) for an H100/H200 (sm_90) on a machine without a GPU.

Triton's interpreter runs the kernel's Python, not its compiler: loop-carried types, layouts and shared
memory are only checked when the kernel is compiled. This script compiles it, through PTX and ptxas, at the
tile shapes config_for_v1 picks for every head dim and dtype (and in trace mode), and prints each one's
shared memory; a failure prints the compiler's message.

    python -m perf.fa1_compile_check
"""
from __future__ import annotations

import contextlib
import inspect
import os
import sys
import types

import torch

# kernels.runtime would choose the interpreter here (no GPU): stand in for it, so @triton.jit builds kernels
os.environ.pop("TRITON_INTERPRET", None)
runtime = types.ModuleType("kernels.runtime")
runtime.INTERPRET, runtime.DEVICE, runtime.kernel_launch_lock = False, torch.device("cuda"), contextlib.nullcontext
sys.modules["kernels.runtime"] = runtime

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kernels import flash_v1  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
FP32_BUFFERS = ("LSE", "O_ACC", "M", "L", "TRACE_STATS", "TRACE_OUT")


def signature(params: list[str], dtype: str, trace: bool) -> dict[str, str]:
    types_ = {}
    for name in params:
        if name in ("Q", "K", "V", "O"):
            types_[name] = f"*{dtype}"
        elif name in FP32_BUFFERS or (name == "TRACE_ORDER" and not trace):
            types_[name] = "*fp32"
        elif name == "TRACE_ORDER":
            types_[name] = "*i32"
        elif name == "sm_scale":
            types_[name] = "fp32"
        elif name.isupper():
            types_[name] = "constexpr"
        else:
            types_[name] = "i32"
    return types_


def main() -> int:
    kernel = flash_v1._attn_fwd_fa1
    params = list(inspect.signature(kernel.fn).parameters)
    failures = 0
    for dtype, torch_dtype in DTYPES.items():
        for head_dim in (16, 32, 64, 128, 256):
            config = flash_v1.config_for_v1(head_dim, torch_dtype)
            for causal, trace in ((False, False), (True, False), (True, True)):
                constexprs = {"HEAD_DIM": head_dim, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n,
                              "CAUSAL": causal, "DOT_FP32": False, "PRECISION": "ieee" if dtype == "fp32" else "tf32",
                              "TRACE": trace}
                source = ASTSource(kernel, signature(params, dtype, trace),
                                   constexprs={(params.index(k),): v for k, v in constexprs.items()})
                what = (f"{dtype} head_dim {head_dim:3d} {config.block_m}x{config.block_n}"
                        f"{' causal' if causal else ''}{' trace' if trace else ''}")
                try:
                    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                              options={"num_warps": config.num_warps, "num_stages": config.num_stages})
                    print(f"{what}: ok, {compiled.metadata.shared / 1024:.0f} KiB shared memory")
                except Exception as exc:  # the compiler's own words
                    failures += 1
                    print(f"{what}: FAILED {type(exc).__name__}: {str(exc)[:1000]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
