"""Our two attention kernels, on a CUDA GPU or in Triton's CPU interpreter.

`from kernels import flash_attention, naive_attention, backend, backend_reason` loads torch and Triton
(seconds), with `kernels.runtime` first: it decides the path and sets TRITON_INTERPRET before any kernel
is decorated. The plain-data modules (`bench.record`, `bench.results`,
`kernels.probe`) import without either, so reading a recording costs no torch import.
"""
from importlib import import_module

_LAZY = {"backend": "kernels.runtime", "backend_reason": "kernels.runtime",
         "flash_attention": "kernels.flash", "naive_attention": "kernels.naive"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import_module("kernels.runtime")  # must come first: it sets TRITON_INTERPRET
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
