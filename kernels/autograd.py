"""Our attention as a differentiable PyTorch operator: forward by a library kernel, backward by its spec's `backward`.

Two custom operators (torch.library.custom_op, each with a fake so torch.compile traces through them without running
a kernel): `flash_live::attention` (q, k, v, causal, sm_scale, kernel) -> (O, LSE) and `flash_live::attention_bwd`.
The forward saves q, k, v, O and the LSE (one fp32 per row) for the backward: never P, nothing of size N×N. The
backward runs the kernel's spec's `backward` ("module:function" (q, k, v, o, lse, do, causal, sm_scale) -> (dq, dk,
dv), kernels/specs.py): a kernel gains autograd by naming one there. Eager calls take a torch.autograd.Function
with the same forward, saved tensors and backward (`_Eager`), whose dispatch costs less host time; torch.compile
traces the operators.
"""
from __future__ import annotations

import torch

from kernels import specs


def needs_grad(*tensors) -> bool:
    """Whether autograd would record a call on these tensors."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def with_backward() -> tuple[str, ...]:
    """The keys of the library's kernels that have a backward."""
    return tuple(s.key for s in specs.with_facet("backward") if s.library)


def _call(q, k, v, causal, sm_scale, kernel):
    """(O, LSE) by the kernel's spec's call: the forward both paths below run."""
    return specs.spec(kernel).load("call")(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True)


def _call_backward(do, q, k, v, o, lse, causal, sm_scale, kernel):
    """(dQ, dK, dV) by the kernel's spec's backward: the backward both paths below run."""
    return specs.spec(kernel).load("backward")(q, k, v, o, lse, do, causal, sm_scale)


@torch.library.custom_op("flash_live::attention", mutates_args=())
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
               kernel: str) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return _call(q, k, v, causal, sm_scale, kernel)


@_attention.register_fake
def _attention_fake(q, k, v, causal, sm_scale, kernel):
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.custom_op("flash_live::attention_bwd", mutates_args=())
def _attention_bwd(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, causal: bool, sm_scale: float,
                   kernel: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _call_backward(do, q, k, v, o, lse, causal, sm_scale, kernel)


@_attention_bwd.register_fake
def _attention_bwd_fake(do, q, k, v, o, lse, causal, sm_scale, kernel):
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))


def _setup_context(ctx, inputs, output):
    q, k, v, causal, sm_scale, kernel = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)  # O and one LSE per row: what the backward recomputes S and P from
    ctx.causal, ctx.sm_scale, ctx.kernel = causal, sm_scale, kernel


def _gradients(ctx, do, run_backward):
    """The inputs' gradients from the saved tensors by `run_backward` (the operator, or _call_backward eagerly)."""
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = run_backward(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale, ctx.kernel)
    return dq, dk, dv, None, None, None


def _backward(ctx, do, _dlse):
    # the LSE is an output for return_lse=True callers; a gradient through it is not supported (refused by
    # `attention` below, so _dlse is None or zeros here)
    return _gradients(ctx, do, _attention_bwd)


_attention.register_autograd(_backward, setup_context=_setup_context)


class _Eager(torch.autograd.Function):
    """The same forward, saved tensors and backward as the operators above, for eager calls: their dispatch (schema,
    fake and alias checks) cost a short backward on the H200 more host time than its kernels (BENCHMARKS.md §1d).
    torch.compile traces the operators instead."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, kernel):
        o, lse = _call(q, k, v, causal, sm_scale, kernel)
        _setup_context(ctx, (q, k, v, causal, sm_scale, kernel), (o, lse))
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        return _gradients(ctx, do, _call_backward)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float, kernel: str,
              return_lse: bool = False):
    """O (and the LSE with return_lse) of checked inputs by `kernel`, recorded for autograd. The kernel must have a
    backward (kernels/specs.py). The LSE comes back detached: the backward takes no gradient through it."""
    if specs.spec(kernel).backward is None:
        raise ValueError(no_backward_message(kernel))
    run = _attention if torch.compiler.is_compiling() else _Eager.apply
    o, lse = run(q, k, v, causal, float(sm_scale), kernel)
    return (o, lse.detach()) if return_lse else o


def no_backward_message(kernel: str, name: str = "an input") -> str:
    """The error for a tensor that requires grad given to a kernel without a backward: which kernels have one."""
    have = with_backward()
    if not have:
        return f"{name} requires grad, but no kernel of ours has a backward pass: call under torch.no_grad()"
    named = " or ".join(f"kernel={key!r}" for key in have)
    return (f"{name} requires grad, but kernel={kernel!r} is forward only (no backward pass): use "
            f"flash_attention(..., {named}), which has one, or call under torch.no_grad() / pass .detach()")
