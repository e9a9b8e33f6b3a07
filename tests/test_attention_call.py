"""The library's one call, `kernels.flash_attention(..., kernel=...)`: which of our kernels it runs, and that the
choice computes the same attention. On the CPU path (interpreter) "auto" is FA-2 and says why; on a Hopper GPU it
is FA-3 for fp16/bf16 at head_dim 64/128/256 and FA-2 otherwise."""
import math

import pytest
import torch

import kernels
from kernels.attention import choose_kernel, kernel_choices
from kernels.fa2 import flash_attention as teaching_kernel
from kernels.fa3 import v3_unavailable_reason
from kernels.runtime import DEVICE, INTERPRET
from tests.support_kernels import TOLERANCE, random_qkv, reference, rel_error


def test_the_package_call_is_the_dispatcher():
    assert kernels.flash_attention is kernels.attention.flash_attention
    assert kernels.choose_kernel is choose_kernel
    assert kernel_choices() == ("auto", "fa3", "fa2", "fa1")


@pytest.mark.skipif(not INTERPRET, reason="the interpreter path")
def test_auto_on_the_interpreter_is_fa2_and_says_why():
    q = torch.randn(1, 2, 37, 64, dtype=torch.bfloat16)
    chosen, why = choose_kernel(q)
    assert chosen == "fa2" and "interpreter" in why
    q, k, v = random_qkv((1, 2, 37, 64), torch.float32, seed=4)
    out, lse = kernels.flash_attention(q, k, v, causal=True, return_lse=True)
    plain, plain_lse = teaching_kernel(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, plain) and torch.equal(lse, plain_lse)  # the same kernel, the same numbers


@pytest.mark.skipif(not INTERPRET, reason="the interpreter path")
def test_fa3_asked_for_where_it_cannot_run_says_why():
    q, k, v = random_qkv((1, 1, 20, 64), torch.bfloat16, seed=1)
    with pytest.raises(RuntimeError, match="interpreter"):
        kernels.flash_attention(q, k, v, kernel="fa3")
    q32 = q.float()
    with pytest.raises(TypeError, match="float16 and bfloat16"):
        kernels.flash_attention(q32, q32, q32, kernel="fa3")


def test_an_unknown_kernel_is_refused_with_the_choices():
    q, k, v = random_qkv((1, 1, 8, 16), torch.float32, seed=2)
    with pytest.raises(ValueError, match="'auto', 'fa3', 'fa2', 'fa1'"):
        kernels.flash_attention(q, k, v, kernel="fa4")


def test_inputs_are_checked_before_a_kernel_is_chosen():
    q = torch.randn(1, 1, 8, 16, device=DEVICE)
    with pytest.raises(ValueError, match="sm_scale must be a positive"):
        kernels.flash_attention(q, q, q, sm_scale=-1.0, kernel="fa4")


@pytest.mark.parametrize("kernel", ["fa2", "fa1"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_each_portable_kernel_matches_float64(kernel, causal, poisoned_allocations):
    q, k, v = random_qkv((1, 2, 45, 32), torch.float32, seed=7 + causal)
    out, lse = kernels.flash_attention(q, k, v, causal=causal, return_lse=True, kernel=kernel)
    ref, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(32))
    assert choose_kernel(q, kernel)[0] == kernel
    assert torch.isfinite(out).all() and rel_error(out, ref) < TOLERANCE[torch.float32]
    assert torch.allclose(lse.cpu().double(), ref_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or v3_unavailable_reason() is not None, reason="needs a Hopper GPU")
@pytest.mark.parametrize("dtype,head_dim,expected", [(torch.bfloat16, 128, "fa3"), (torch.float16, 64, "fa3"), (torch.bfloat16, 256, "fa3"),
                                                     (torch.float32, 128, "fa2"), (torch.bfloat16, 32, "fa2")])
def test_auto_on_hopper_is_the_fastest_that_runs(dtype, head_dim, expected, poisoned_allocations):
    q, k, v = random_qkv((2, 3, 1000, head_dim), dtype, seed=head_dim)
    assert choose_kernel(q)[0] == expected
    out = kernels.flash_attention(q, k, v, causal=True)
    assert rel_error(out, reference(q, k, v, True, head_dim ** -0.5)[0]) < TOLERANCE[dtype]
