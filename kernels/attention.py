"""The library's one call: `flash_attention(q, k, v, causal=..., kernel=...)`, dispatched through the specs.

Our kernels that compute this attention are the specs with `library` set (kernels/specs.py): the FA-3 style Gluon
kernel (kernels/fa3.py; Hopper only, fp16/bf16, head_dim 64, 128 or 256), the FA-2 order teaching kernel (kernels/fa2.py;
everywhere, the interpreter included) and the FA-1 loop order (kernels/fa1.py; slower by design, kept to show why
FA-2 changed it). `kernel="auto"` (the default) runs the fastest that can run these inputs on this device (the specs'
`auto_rank`, each asked why it cannot run); `choose_kernel` says which one, and why.
"""
from __future__ import annotations

from kernels import runtime  # noqa: F401 - first: it picks the backend before any kernel module is imported
import functools

import torch

from costmodel import Shape
from kernels import specs
from kernels.autograd import attention as autograd_attention, needs_grad, no_backward_message
from kernels.inputs import DTYPE_NAMES, check_attention_inputs


def kernel_choices() -> tuple[str, ...]:
    """What `kernel=` takes: "auto", then the library's kernels, those "auto" tries first leading."""
    return _kernel_choices(specs.generation())


@functools.lru_cache(maxsize=8)
def _kernel_choices(_generation: int) -> tuple[str, ...]:
    ours = specs.with_facet("library")
    ranked = sorted((s for s in ours if s.auto_rank is not None), key=lambda s: s.auto_rank)
    return ("auto", *(s.key for s in ranked), *(s.key for s in ours if s.auto_rank is None))


def _why_not(spec: specs.Spec, q: torch.Tensor) -> str | None:
    """Why a kernel of the library cannot run inputs like q here (None: it can)."""
    return _why_not_for(spec, tuple(q.shape), q.dtype, q.device)


def _why_not_for(spec: specs.Spec, shape: tuple, dtype: torch.dtype, device: torch.device) -> str | None:
    if not spec.unavailable:
        return None
    batch, heads, seq_len, head_dim = shape
    return spec.load("unavailable")(Shape(seq_len, batch, heads, head_dim, DTYPE_NAMES[dtype]), device)


def choose_kernel(q: torch.Tensor, kernel: str = "auto") -> tuple[str, str]:
    """(the kernel `flash_attention` runs for inputs like q, e.g. "fa3" or "fa2"; a sentence saying why).

    q is checked as flash_attention checks it (kernels.inputs: a TypeError for what is not a tensor the kernels take,
    a ValueError for a shape they refuse), so a kernel is named only for inputs it then accepts. Raises ValueError for
    a `kernel` not in kernel_choices(), and RuntimeError for a kernel asked for by name that cannot run inputs like q
    here, saying why (flash_attention lets that kernel raise its own error)."""
    _check_choice(kernel)
    grad = needs_grad(q)
    q = check_attention_inputs(q, q, q, False, None)[0]
    if kernel != "auto":
        spec = specs.spec(kernel)
        if grad and spec.backward is None:
            raise ValueError(no_backward_message(kernel, "q"))
        why = _why_not(spec, q)
        if why is not None:
            raise RuntimeError(f"kernel={kernel!r} cannot run these inputs here: {why}")
        return kernel, f"{spec.short}: asked for"
    return _auto(q, grad)


def _check_choice(kernel) -> None:
    choices = kernel_choices()
    if not isinstance(kernel, str) or kernel not in choices:
        raise ValueError(f"kernel must be one of {', '.join(map(repr, choices))}; got {kernel!r}"[:300])


def _auto(q: torch.Tensor, backward: bool = False) -> tuple[str, str]:
    """The fastest of the library's kernels that can run checked inputs like q here (with backward: and has a
    backward pass, for inputs that require grad), and why. Asked once per shape, dtype and device (a short call is
    bound by the host)."""
    return _auto_for(tuple(q.shape), q.dtype, q.device, backward, specs.generation())


@functools.lru_cache(maxsize=1024)
def _auto_for(shape: tuple, dtype: torch.dtype, device: torch.device, backward: bool,
              _generation: int) -> tuple[str, str]:
    passed_over = []
    for key in kernel_choices()[1:]:
        spec = specs.spec(key)
        if spec.auto_rank is None:
            continue
        why = "no backward pass (an input requires grad)" if backward and spec.backward is None else None
        why = f"{spec.short}: {why}" if why else _why_not_for(spec, shape, dtype, device)
        if why is None:
            first = not passed_over
            return key, f"{spec.short}: {'the fastest of ours that runs here' if first else '; '.join(passed_over)}"
        passed_over.append(why)
    raise RuntimeError("no kernel of ours can run these inputs here: " + "; ".join(passed_over))


def _grouped_or_ragged(q, k) -> bool:
    """q and k are 4-D tensors of one batch and head_dim that differ in length or heads: the split-KV kernel's inputs
    (anything else is left to the one-shape check, and its errors)."""
    return (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == k.dim() == 4
            and q.shape[0] == k.shape[0] and q.shape[3] == k.shape[3]
            and (q.shape[2] != k.shape[2] or q.shape[1] != k.shape[1]))


# The fast path: a short call is bound by the host (issue 39: 1K tokens at batch 2 × 16 heads is ~10 µs of GPU work),
# so a call like one checked before (the same shapes, strides, dtypes, devices, 16-byte alignment, causal, scale and
# kernel, no autograd, plain tensors) goes straight to the launcher that call's kernel made for it (its spec's `fast`).
_FAST: dict = {}
MAX_FAST = 256  # launchers kept; past it, start afresh


def _fast_key(q, k, v, causal, sm_scale, kernel):
    """The key of a call the fast path may take, or None (anything but plain dense tensors, a bool causal and a float
    or default scale, or autograd recording)."""
    if (type(q) is not torch.Tensor or type(k) is not torch.Tensor or type(v) is not torch.Tensor
            or (causal is not True and causal is not False) or not (sm_scale is None or type(sm_scale) is float)
            or type(kernel) is not str):
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return None
    strided = torch.strided
    if q.layout is not strided or k.layout is not strided or v.layout is not strided or q.is_nested or k.is_nested \
            or v.is_nested:  # (a nested tensor has no sizes to key by; the checked path refuses both, saying why)
        return None
    return (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype, q.device,
            k.device, v.device, q.data_ptr() % 16, k.data_ptr() % 16, v.data_ptr() % 16, causal, sm_scale, kernel,
            specs.generation())


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, return_lse: bool = False,
                    kernel: str = "auto", descale_q=None, descale_k=None,
                    descale_v=None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention output O = softmax(sm_scale · Q Kᵀ [causal mask]) V, by one of our flash kernels.

    q, k, v: (batch, heads, seq_len, head_dim); any seq_len ≥ 1; sm_scale > 0 (default 1/sqrt(head_dim)).
    kernel: "auto" (FA-3 on a Hopper GPU for fp16/bf16 at head_dim 64, 128 or 256, else FA-2) or one of
    kernel_choices(). Returns O in the input dtype, and with return_lse=True also the fp32 row log-sum-exp (natural
    log). Differentiable where the kernel has a backward pass (its spec's `backward`: FA-2's and FA-3's): with autograd on
    and an input that requires grad, "auto" picks among those kernels, and a kernel named without one raises a
    ValueError naming those that have one. The forward then saves O and the LSE, no N×N matrix (kernels/autograd.py);
    the LSE returned is detached. The inputs are checked (kernels.inputs) before a kernel is chosen; the chosen kernel's own
    entry point checks them again, which costs no copy (they come back ready). A kernel asked for by name that cannot
    run here raises its own error.

    q and k, v of different lengths, or fewer K/V heads than query heads (grouped-query attention: heads a multiple
    of k's heads), run on the split-KV kernel (kernels/decode.py), causal aligned bottom-right as FlashAttention
    aligns it: query i sees keys up to kv_len − q_len + i. Only "auto" takes them (the prefill kernels need q, k, v of
    one shape).

    FP8 (flash-attn's API): torch.float8_e4m3fn q, k, v with descale_q, descale_k, descale_v (float32 scalars or
    (batch, heads) tensors; None: 1) run on the FA-3 style kernel (Hopper only; kernel "auto" or "fa3") and return
    O in bf16 (kernels/fp8.py: quantize_fp8 makes values and descales, hadamard_rotate spreads Q's and K's outliers).
    Descales with 16-bit inputs are refused."""
    descales = (descale_q, descale_k, descale_v)
    key = _fast_key(q, k, v, causal, sm_scale, kernel) if descale_q is descale_k is descale_v is None else None
    if key is not None:
        run = _FAST.get(key)
        if run is not None:
            o, lse = run(q, k, v, bool(return_lse))
            return (o, lse) if return_lse else o
    if isinstance(q, torch.Tensor) and q.dtype == torch.float8_e4m3fn:
        _check_choice(kernel)
        if kernel not in ("auto", "fa3"):
            raise ValueError(f"float8_e4m3fn inputs run only on the FA-3 style kernel (kernel 'auto' or 'fa3'); "
                             f"got kernel={kernel!r}")
        from kernels.fp8 import fp8_attention
        return fp8_attention(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=return_lse, descale_q=descale_q,
                             descale_k=descale_k, descale_v=descale_v)
    if any(d is not None for d in descales):
        raise ValueError("descale_q, descale_k and descale_v are the scales of float8_e4m3fn inputs; these are "
                         f"{getattr(q, 'dtype', type(q).__name__)} (quantize them with kernels.fp8.quantize_fp8)")
    if _grouped_or_ragged(q, k):
        if kernel != "auto":
            _check_choice(kernel)
            raise ValueError(f"kernel={kernel!r} needs q, k and v of one shape (batch, heads, seq_len, head_dim); "
                             f"q {tuple(q.shape)} against k {tuple(k.shape)} runs with kernel='auto' (the split-KV "
                             f"kernel)")
        from kernels.decode import decode_attention
        return decode_attention(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=return_lse)
    grad = needs_grad(q, k, v)
    given = (q, k, v)
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale)
    _check_choice(kernel)
    chosen = kernel if kernel != "auto" else _auto(q, grad)[0]
    spec = specs.spec(chosen)
    if key is not None and spec.fast and not grad and all(a is b for a, b in zip(given, (q, k, v))):
        run = spec.load("fast")(q, k, v, causal, sm_scale)
        if run is not None:
            if len(_FAST) >= MAX_FAST:
                _FAST.clear()
            _FAST[key] = run
    if grad:  # recorded for autograd: the forward saves O and the LSE, the backward is the kernel's spec's
        if spec.backward is None:
            name = next(n for n, t in (("q", q), ("k", k), ("v", v)) if t.requires_grad)
            raise ValueError(no_backward_message(chosen, name))
        return autograd_attention(q, k, v, causal, sm_scale, chosen, return_lse)
    return spec.load("call")(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=return_lse)


__all__ = ["choose_kernel", "flash_attention", "kernel_choices"]
