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


@pytest.fixture
def fast_fa2():
    """fa2 given a `fast` facet that counts its calls (kernels/specs.py) for the test; the registry's generation only
    ever grows (what is cached under a generation must never be read for another registry)."""
    import dataclasses
    from kernels import attention, specs
    from tests import support_kernels
    original, kept = specs.SPECS["fa2"], attention._FAST
    specs.SPECS["fa2"] = dataclasses.replace(original, fast="tests.support_kernels:counting_fast_launcher")
    specs._GENERATION[0] += 1
    attention._FAST = {}
    support_kernels.FAST_CALLS.clear()
    try:
        yield support_kernels.FAST_CALLS
    finally:
        specs.SPECS["fa2"] = original
        specs._GENERATION[0] += 1
        attention._FAST = kept


def test_a_call_like_one_checked_before_takes_the_fast_path(fast_fa2, poisoned_allocations):
    calls = fast_fa2
    q, k, v = random_qkv((1, 2, 40, 32), torch.float32, seed=11)
    first = kernels.flash_attention(q, k, v, causal=True, kernel="fa2")
    assert calls == []  # the first call is checked and runs the kernel's own call; it leaves a launcher
    again, lse = kernels.flash_attention(q, k, v, causal=True, kernel="fa2", return_lse=True)
    assert len(calls) == 1 and torch.equal(first, again)
    assert rel_error(again, reference(q, k, v, True, 32 ** -0.5)[0]) < TOLERANCE[torch.float32]
    q2, k2, v2 = random_qkv((1, 2, 40, 32), torch.float32, seed=12)  # new tensors of the same kind: fast, right
    out = kernels.flash_attention(q2, k2, v2, causal=True, kernel="fa2")
    assert len(calls) == 2 and rel_error(out, reference(q2, k2, v2, True, 32 ** -0.5)[0]) < TOLERANCE[torch.float32]


@pytest.mark.parametrize("change", ["causal", "scale", "strides", "dtype", "grad", "shape", "subclass", "int causal"])
def test_a_different_call_never_takes_another_calls_launcher(change, fast_fa2):
    calls = fast_fa2
    q, k, v = random_qkv((1, 2, 40, 32), torch.float32, seed=13)
    kernels.flash_attention(q, k, v, causal=True, kernel="fa2")
    kwargs = dict(causal=True, kernel="fa2")
    if change == "causal":
        kwargs["causal"] = False
    elif change == "scale":
        kwargs["sm_scale"] = 0.5
    elif change == "strides":
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    elif change == "dtype":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    elif change == "grad":
        q = q.clone().requires_grad_()
    elif change == "shape":
        q, k, v = (t[:, :, :39] for t in (q, k, v))
    elif change == "subclass":
        q = torch.nn.Parameter(q, requires_grad=False)
    elif change == "int causal":
        kwargs["causal"] = 1
    try:
        kernels.flash_attention(q, k, v, **kwargs)
    except (TypeError, ValueError):
        pass  # refused by the checked path, as it should be
    assert calls == []


def test_the_fast_path_forgets_a_changed_registry(fast_fa2):
    calls = fast_fa2
    q, k, v = random_qkv((1, 2, 24, 32), torch.float32, seed=14)
    kernels.flash_attention(q, k, v, kernel="fa2")
    from kernels import specs
    specs._GENERATION[0] += 1
    kernels.flash_attention(q, k, v, kernel="fa2")
    assert calls == []


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or v3_unavailable_reason() is not None, reason="needs a Hopper GPU")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape,strided", [((2, 16, 1024, 64), False), ((1, 3, 1000, 128), True),
                                           ((2, 2, 333, 256), False)])
def test_fa3_fast_path_is_the_checked_call(shape, strided, causal, poisoned_allocations):
    """The fast path's launches on Hopper give what the checked call gives, bit for bit, on new tensors, on a
    freed tensor's address with new values (the kept TMA encodings), and leave nothing unwritten."""
    from kernels import attention
    from kernels.fa3 import flash_attention_v3
    q, k, v = random_qkv(shape, torch.bfloat16, seed=21)
    if strided:  # (B, N, H, D) memory seen as (B, H, N, D)
        q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    kernels.flash_attention(q, k, v, causal=causal)
    kept = len(attention._FAST)
    for seed in (22, 23):
        fresh = random_qkv(shape, torch.bfloat16, seed=seed)
        if strided:
            fresh = tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in fresh)
        out, lse = kernels.flash_attention(*fresh, causal=causal, return_lse=True)
        want, want_lse = flash_attention_v3(*fresh, causal=causal, return_lse=True)
        assert torch.equal(out, want) and torch.equal(lse, want_lse)
        assert rel_error(out, reference(*fresh, causal, shape[-1] ** -0.5)[0]) < TOLERANCE[torch.bfloat16]
        del fresh, out, lse
    assert len(attention._FAST) == kept >= 1
    q.copy_(torch.randn_like(q))  # the same addresses, new values
    out = kernels.flash_attention(q, k, v, causal=causal)
    assert torch.equal(out, flash_attention_v3(q, k, v, causal=causal))


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or v3_unavailable_reason() is not None, reason="needs a Hopper GPU")
def test_fa3_fast_path_keeps_its_kernel_but_honours_hooks_and_the_switch():
    """Past its first launch the fast path launches the kept compiled kernel itself (runtime.CachedLaunch.repeat); a
    launch hook installed later (Proton's, a user's) still sees each launch, with FLASH_LIVE_FAST_LAUNCH's switch off
    the call goes through the JIT, and with FLASH_LIVE_DIRECT_LAUNCH's off through Triton's launcher instead of its C
    launch function (runtime.direct_launcher): the same answer every way."""
    from triton import knobs
    from kernels import runtime
    q, k, v = random_qkv((2, 4, 700, 64), torch.bfloat16, seed=31)
    first = [kernels.flash_attention(q, k, v, causal=True) for _ in range(3)]
    seen = []

    def hook(metadata):
        seen.append(metadata)
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        hooked = kernels.flash_attention(q, k, v, causal=True)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    runtime.FAST_LAUNCH = False
    try:
        through_jit = kernels.flash_attention(q, k, v, causal=True)
    finally:
        runtime.FAST_LAUNCH = True
    runtime.DIRECT_LAUNCH = False
    try:
        through_launcher = kernels.flash_attention(q, k, v, causal=True)  # Triton's launcher, not its C function
    finally:
        runtime.DIRECT_LAUNCH = True
    after = kernels.flash_attention(q, k, v, causal=True)
    from kernels import attention
    kept = [run.launch.kept for run in attention._FAST.values() if getattr(run, "launch", None)]
    launched = [k_ for k_ in kept if k_]  # (a launcher made but not yet called has kept nothing)
    assert launched and all(k_[4] is not None for k_ in launched)  # the C launch function is called directly
    assert len(seen) == 1
    assert all(torch.equal(t, first[0]) for t in (*first[1:], hooked, through_jit, through_launcher, after))
    assert rel_error(after, reference(q, k, v, True, 64 ** -0.5)[0]) < TOLERANCE[torch.bfloat16]
