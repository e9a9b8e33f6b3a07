"""The GPU's facts and roofs, measured: its memory hierarchy (from the driver), and the bandwidth and matmul
rate the roofline and the hierarchy draw (docs/data-contracts.md, "Device facts").

Roofs are measured as the best of several sizes, each larger than the L2 where the L2 must not serve it: a
"roof" that a kernel beats is a measurement of the wrong thing (an L2 hit, a small matmul).

- copy: device-to-device copies of 1, 2 and 4 GiB, read + write bytes / s (each 17× the H200's L2 or more).
- matmul: dense bf16 products of 4096³, 8192³ and 16384³ through PyTorch (cuBLAS), on random data.
- L2: a kernel that reads an L2-resident buffer over and over (bench/l2_read.py): a copy through PyTorch of a
  buffer small enough to stay in L2 takes a few microseconds, so launch overhead would dominate its timing.
"""
from __future__ import annotations

import platform
import subprocess

from kernels.runtime import INTERPRET  # first: it sets TRITON_INTERPRET before @triton.jit runs below
import torch
import triton.testing

from bench.l2_read import L2_BLOCK, read_repeatedly

COPY_SIZES_BYTES = (1 << 30, 2 << 30, 4 << 30)
MATMUL_SIZES = (4096, 8192, 16384)


def versions() -> dict:
    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }


def _nvidia_smi(field: str) -> str | None:
    """One field of `nvidia-smi --query-gpu` for GPU 0, or None where nvidia-smi cannot tell."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _max_sm_clock_mhz() -> float | None:
    value = _nvidia_smi("clocks.max.sm")
    try:
        return float(value) if value else None
    except ValueError:
        return None


def measure_copy_gbps(nbytes: int) -> float:
    """Device-to-device copy bandwidth in GB/s of one size, counting bytes read plus bytes written (median)."""
    src = torch.empty(nbytes // 2, dtype=torch.float16, device="cuda").uniform_(-1, 1)
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (ms * 1e-3) / 1e9


def measure_matmul_tflops(size: int) -> float:
    """Dense bf16 matrix product rate through PyTorch (cuBLAS) of one size, TFLOPS, on random data."""
    a, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ms = triton.testing.do_bench(lambda: a @ b, warmup=50, rep=300, return_mode="median")
    del a, b
    torch.cuda.empty_cache()
    return 2 * size**3 / (ms * 1e-3) / 1e12


def copy_roof_gbps() -> float:
    """The bandwidth roof: the best copy rate over COPY_SIZES_BYTES (all far larger than the L2)."""
    return max(measure_copy_gbps(size) for size in COPY_SIZES_BYTES)


def matmul_roof_tflops() -> float:
    """The compute roof: the best bf16 matmul rate over MATMUL_SIZES."""
    return max(measure_matmul_tflops(size) for size in MATMUL_SIZES)


def device_facts(measure_bandwidth: bool = False) -> dict:
    """The memory hierarchy of the GPU in use (docs/data-contracts.md, "Device facts").

    On the interpreter path there is no GPU: the values are None and the name says so.
    """
    facts = {"name": "CPU (Triton interpreter)", "sm_count": None, "smem_per_sm_bytes": None,
             "smem_per_block_bytes": None, "l2_bytes": None, "hbm_bytes": None, "copy_gbps": None,
             "compute_capability": None, "driver": None, "matmul_tflops": None, "l2_gbps": None,
             "sm_clock_mhz": None, "copy_sizes_bytes": None, "matmul_sizes": None, **versions()}
    if INTERPRET:
        return facts
    props = torch.cuda.get_device_properties(0)
    facts.update(
        name=props.name,
        sm_count=props.multi_processor_count,
        smem_per_sm_bytes=getattr(props, "shared_memory_per_multiprocessor", None),
        smem_per_block_bytes=getattr(props, "shared_memory_per_block_optin", None),
        l2_bytes=getattr(props, "L2_cache_size", None),
        hbm_bytes=props.total_memory,
        compute_capability=f"{props.major}.{props.minor}",
        driver=_nvidia_smi("driver_version"),
        sm_clock_mhz=_max_sm_clock_mhz(),
    )
    if measure_bandwidth:  # the roofs of the roofline and the hierarchy's bandwidths, measured on this GPU
        facts["copy_gbps"] = copy_roof_gbps()
        facts["l2_gbps"] = measure_l2_read_gbps()
        facts["matmul_tflops"] = matmul_roof_tflops()
        facts["copy_sizes_bytes"], facts["matmul_sizes"] = list(COPY_SIZES_BYTES), list(MATMUL_SIZES)
    return facts


def measure_l2_read_gbps(buffer_bytes: int | None = None, repeats: int = 64) -> float:
    """GB/s of reads served by L2: a buffer of a quarter of the L2, read `repeats` times by 4 programs per SM."""
    if INTERPRET:
        raise ValueError("the L2 bandwidth is a GPU measurement")
    props = torch.cuda.get_device_properties(0)
    programs = 4 * props.multi_processor_count
    buffer_bytes = buffer_bytes or props.L2_cache_size // 4
    slice_elems = max(L2_BLOCK, buffer_bytes // 2 // programs // L2_BLOCK * L2_BLOCK)  # fp16 elements per program
    x = torch.randn(programs * slice_elems, device="cuda", dtype=torch.float16)
    out = torch.empty(programs, device="cuda", dtype=torch.float32)
    run = lambda: read_repeatedly(x, out, slice_elems, repeats)  # noqa: E731
    ms = triton.testing.do_bench(run, warmup=25, rep=200, return_mode="median")
    return x.numel() * 2 * repeats / (ms * 1e-3) / 1e9
