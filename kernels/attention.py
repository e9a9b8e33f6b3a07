"""The library's one call: `flash_attention(q, k, v, causal=..., kernel=...)`.

Three of our kernels compute the same attention: the FA-3 style Gluon kernel (kernels/flash_v3.py; Hopper only,
fp16/bf16, head_dim 64 or 128), the FA-2 order teaching kernel (kernels/flash.py; everywhere, the interpreter
included) and the FA-1 loop order (kernels/flash_v1.py; slower by design, kept to show why FA-2 changed it).
`kernel="auto"` (the default) runs the fastest that can run these inputs on this device: FA-3 where
`v3_unavailable_reason` says it can, else FA-2. `choose_kernel` says which one, and why.
"""
from __future__ import annotations

from kernels import runtime  # noqa: F401 - first: it picks the backend before any kernel module is imported
import torch

from kernels.inputs import check_attention_inputs

KERNELS = ("auto", "fa3", "fa2", "fa1")
KERNEL_NAMES = {"fa3": "FA-3 style (Gluon, Hopper)", "fa2": "FA-2 order (the teaching kernel)",
                "fa1": "FA-1 loop order"}


def choose_kernel(q: torch.Tensor, kernel: str = "auto") -> tuple[str, str]:
    """(the kernel `flash_attention` runs for inputs like q: "fa3", "fa2" or "fa1"; a sentence saying why).

    Raises ValueError for a `kernel` not in KERNELS. A kernel asked for by name is chosen as asked: where "fa3"
    cannot run, the FA-3 kernel itself raises, with v3_unavailable_reason's sentence."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(map(repr, KERNELS))}; got {kernel!r}")
    if kernel != "auto":
        return kernel, f"{KERNEL_NAMES[kernel]}: asked for"
    from kernels.flash_v3 import v3_unavailable_reason
    reason = v3_unavailable_reason(q.device, q.dtype, q.shape[-1])
    if reason is None:
        return "fa3", f"{KERNEL_NAMES['fa3']}: the fastest of ours that runs here"
    return "fa2", f"{KERNEL_NAMES['fa2']}: {reason}"


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, return_lse: bool = False,
                    kernel: str = "auto") -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention output O = softmax(sm_scale · Q Kᵀ [causal mask]) V, by one of our flash kernels.

    q, k, v: (batch, heads, seq_len, head_dim); any seq_len ≥ 1; sm_scale > 0 (default 1/sqrt(head_dim)).
    kernel: "auto" (FA-3 on a Hopper GPU for fp16/bf16 at head_dim 64 or 128, else FA-2), "fa3", "fa2" or "fa1".
    Returns O in the input dtype, and with return_lse=True also the fp32 row log-sum-exp (natural log). Forward
    only. The inputs are checked (kernels.inputs) before a kernel is chosen; the chosen kernel's own entry point
    checks them again, which costs no copy (they come back ready)."""
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale)
    chosen, _ = choose_kernel(q, kernel)
    if chosen == "fa3":
        from kernels.flash_v3 import flash_attention_v3 as run
    elif chosen == "fa1":
        from kernels.flash_v1 import flash_attention_v1 as run
    else:
        from kernels.flash import flash_attention as run
    return run(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=return_lse)


__all__ = ["KERNELS", "KERNEL_NAMES", "choose_kernel", "flash_attention"]
