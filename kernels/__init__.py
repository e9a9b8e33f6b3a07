"""Our two attention kernels, on a CUDA GPU or in Triton's CPU interpreter.

`kernels.runtime` is imported first: it decides the path and sets TRITON_INTERPRET before any
kernel module is decorated.
"""
from kernels.runtime import backend, backend_reason  # noqa: I001  (must run before the kernels import)
from kernels.flash import flash_attention
from kernels.naive import naive_attention

__all__ = ["backend", "backend_reason", "flash_attention", "naive_attention"]
