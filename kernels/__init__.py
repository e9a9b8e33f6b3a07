"""Our attention kernels, on a CUDA GPU or in Triton's CPU interpreter, the library's call, and what they need to
run and be shown.

- the kernels, one file each: `fa2` (FlashAttention-2 order, the teaching kernel the animation traces), `fa1`
  (FlashAttention-1's loop order), `fa3` (FA-3 style, Gluon, Hopper only; the PTX it writes by hand in `ptx`, the
  Triton version differences in `gluon_compat`), `naive` (three kernels: S = QKᵀ, softmax, O = PV); `peers`: the
  kernels a user would pick instead (PyTorch's SDPA, eager), behind the same call; `decode` (attention of new
  queries against a contiguous or paged KV cache: split-KV flash-decoding, its own call `decode_attention`);
- `specs`: one spec per kernel, which every room of the house reads (no torch);
- `attention`: the library's one call, `flash_attention(..., kernel=...)`, dispatched through the specs;
- `runtime` (which path runs them, the interpreter's launch lock), `inputs` (argument checks), `trace` (what a
  kernel did, step by step and on the SMs), `source` (the kernels' own source, cut into phases), `reference`
  (the one float64 reference), `probe` (is there a CUDA device at all, asked without torch).

`from kernels import flash_attention, decode_attention, choose_kernel, naive_attention, backend, backend_reason` loads
torch and Triton (seconds), with `kernels.runtime` first: it decides the path and sets TRITON_INTERPRET before any
kernel is decorated. `kernels.specs`, `kernels.probe` and `kernels.source` import without either. Measurement lives in
`bench/`.
"""
from importlib import import_module

_LAZY = {"backend": "kernels.runtime", "backend_reason": "kernels.runtime",
         "flash_attention": "kernels.attention", "choose_kernel": "kernels.attention",
         "naive_attention": "kernels.naive", "decode_attention": "kernels.decode"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import_module("kernels.runtime")  # must come first: it sets TRITON_INTERPRET
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
