"""The backward pass: our FA-2 order backward (kernels/fa2_bwd.py) against float64 autograd of the reference, through
`flash_attention`'s autograd (kernels/autograd.py); what the forward saves; refusals; the spec facet; torch.compile.
CPU tests run the kernels in Triton's interpreter; the gpu-marked ones run real sizes on a GPU."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import flash_attention, specs
from kernels.attention import choose_kernel
from kernels.fa2_bwd import BackwardConfig, launch_backward
from kernels.reference import reference_gradients, relative_error
from tests.support_kernels import random_qkv, reference

GRAD_TOLERANCE = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 3e-2}


def _leaves(shape, dtype, seed, device=None):
    q, k, v = random_qkv(shape, dtype, seed)
    return tuple(t.to(device or t.device).requires_grad_() for t in (q, k, v))


def _check_grads(q, k, v, causal, kernel="auto", sm_scale=None, tolerance=None):
    out = flash_attention(q, k, v, causal=causal, kernel=kernel, sm_scale=sm_scale)
    gen = torch.Generator().manual_seed(q.shape[2])
    do = torch.randn(out.shape, generator=gen).to(out.dtype).to(out.device)
    out.backward(do)
    expected = reference_gradients(q, k, v, do, causal, sm_scale, device="cpu")
    tolerance = tolerance or GRAD_TOLERANCE[q.dtype]
    for name, t, ref in zip("qkv", (q, k, v), expected):
        assert t.grad is not None and t.grad.dtype == t.dtype and t.grad.shape == t.shape, name
        # one key (N = 1): softmax is constant in the scores, so dQ and dK are exactly zero (compared absolutely)
        err = relative_error(t.grad, ref) if ref.norm() > 0 else t.grad.abs().max().item()
        assert err < tolerance, f"d{name}: relative error {err:.2e} ≥ {tolerance:.0e}"


@pytest.mark.parametrize("seq_len,causal,dtype,head_dim", [
    (1, False, torch.float32, 16),
    (1, True, torch.float16, 32),
    (37, False, torch.float32, 32),
    (37, True, torch.bfloat16, 16),
    (100, True, torch.float32, 64),
    (100, False, torch.float16, 64),
    (130, True, torch.float16, 32),
    (130, False, torch.bfloat16, 32),
    (130, True, torch.float32, 16),
])
def test_gradients_match_float64_autograd(seq_len, causal, dtype, head_dim):
    _check_grads(*_leaves((1, 2, seq_len, head_dim), dtype, seed=seq_len + head_dim), causal)


@pytest.mark.parametrize("causal", [False, True])
def test_small_tiles_cover_the_mask_exactly(causal):
    """Tiles much smaller than N: several full query steps per dK/dV program and key steps per dQ program, besides
    the diagonal and the ragged tail (the interpreter's shipped 64-tiles see few of each); and the ragged tail walked
    first (tail_first: what the head_dim 128 Hopper tiles do when not causal; causal ignores it)."""
    q, k, v = random_qkv((1, 2, 75, 16), torch.float32, seed=9)
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    do = torch.randn_like(o)
    for config in (BackwardConfig(16, 32, 32, 16, 4, 1), BackwardConfig(16, 16, 16, 16, 4, 1),
                   BackwardConfig(16, 64, 64, 32, 4, 1), BackwardConfig(16, 32, 32, 16, 4, 1, tail_first=True),
                   BackwardConfig(32, 64, 64, 32, 4, 1, tail_first=True)):
        grads = launch_backward(q, k, v, o, lse, do, causal, 0.25, config)
        for got, ref in zip(grads, reference_gradients(q, k, v, do, causal, 0.25)):
            assert relative_error(got, ref) < 1e-5, config


def test_the_causal_launch_order_by_head_groups_gives_the_same_bits(monkeypatch):
    """Under causal the programs take their (block, head) by groups of heads, the longest first
    (costmodel.lpt_heads_per_group): groups of 1 (one head after another), of 2 over 5 heads (a short last group)
    and of all 5 give the same gradients bit for bit, and right ones; a wrong map would skip or repeat a block."""
    import costmodel
    q, k, v = random_qkv((1, 5, 75, 16), torch.float32, seed=11)
    o, lse = flash_attention(q, k, v, causal=True, return_lse=True)
    do = torch.randn_like(o)
    per_head = 2 * 75 * 16 * 4  # the two re-read tensors of one head, fp32
    runs = []
    for heads in (1, 2, 5):
        monkeypatch.setattr(costmodel.schedule, "LPT_L2_BYTES", heads * per_head)
        assert costmodel.lpt_heads_per_group(5, 75, 16, 4) == heads
        runs.append(launch_backward(q, k, v, o, lse, do, True, 0.25, BackwardConfig(16, 32, 32, 16, 4, 1)))
    for got, ref in zip(runs[0], reference_gradients(q, k, v, do, True, 0.25)):
        assert relative_error(got, ref) < 1e-5
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(other, runs[0]))


def test_backward_refuses_tiles_that_do_not_nest():
    q, k, v = random_qkv((1, 1, 8, 16), torch.float32, seed=1)
    o, lse = flash_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="multiple of block_m1"):
        launch_backward(q, k, v, o, lse, o, False, 0.25, BackwardConfig(32, 16, 16, 16, 4, 1))


def test_non_contiguous_inputs_and_a_custom_scale():
    """(B, N, H, D) memory seen as (B, H, N, D): the gradients come back for the views, in their shape."""
    gen = torch.Generator().manual_seed(4)
    bnhd = [torch.randn(1, 45, 2, 32, generator=gen).requires_grad_() for _ in range(3)]
    q, k, v = (t.transpose(1, 2) for t in bnhd)
    assert not q.is_contiguous()
    out = flash_attention(q, k, v, causal=True, sm_scale=0.3)
    do = torch.randn(out.shape, generator=gen)
    out.backward(do)
    for leaf, ref in zip(bnhd, reference_gradients(q, k, v, do, True, 0.3)):
        assert relative_error(leaf.grad.transpose(1, 2), ref) < 1e-5


def test_gradcheck_against_finite_differences():
    """torch.autograd.gradcheck wants float64, which the kernels do not take (fp16, bf16, fp32: Triton's tl.dot has
    no float64 path worth shipping); in fp32 with a step and tolerances fp32 can resolve, its fast mode still
    compares our backward with finite differences of our own forward."""
    q, k, v = _leaves((1, 1, 5, 16), torch.float32, seed=2)
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, causal=True), (q, k, v), eps=1e-2,
                                    atol=1e-2, rtol=5e-2, fast_mode=True, nondet_tol=0.0)


def test_the_forward_saves_o_and_lse_only():
    """What autograd keeps between forward and backward: q, k, v, O (B, H, N, D) and the LSE (B, H, N), no N×N."""
    q, k, v = _leaves((1, 2, 96, 16), torch.float32, seed=3)
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = flash_attention(q, k, v, causal=True)
    assert sorted(saved) == sorted([((1, 2, 96, 16), torch.float32)] * 4 + [((1, 2, 96), torch.float32)])
    assert max(torch.Size(s).numel() for s, _ in saved) < 96 * 96
    out.sum().backward()  # and they are enough
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_return_lse_with_grad_gives_a_detached_lse():
    q, k, v = _leaves((1, 1, 20, 16), torch.float32, seed=5)
    out, lse = flash_attention(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    assert relative_error(lse, reference(q, k, v, False, 0.25)[1]) < 1e-5


@pytest.mark.parametrize("kernel", ["fa1"])
def test_a_kernel_without_backward_names_the_one_that_has_it(kernel):
    q, k, v = _leaves((1, 1, 8, 16), torch.float32, seed=6)
    with pytest.raises(ValueError, match=rf"kernel='{kernel}' is forward only.*kernel='fa2'"):
        flash_attention(q, k, v, kernel=kernel)
    with pytest.raises(ValueError, match="kernel='fa2'"):
        choose_kernel(q, kernel)
    from kernels.fa1 import flash_attention_v1
    with pytest.raises(ValueError, match="kernel='fa2'"):
        flash_attention_v1(q, k, v)
    with torch.no_grad():  # no gradient wanted: runs
        flash_attention(q, k, v, kernel=kernel)


def test_the_split_kv_path_refuses_grad_naming_fa2():
    q = torch.randn(1, 4, 3, 16, requires_grad=True)
    k, v = torch.randn(1, 2, 9, 16), torch.randn(1, 2, 9, 16)
    with pytest.raises(ValueError, match="kernel='decode' is forward only.*kernel='fa2'"):
        flash_attention(q, k, v)


def test_auto_picks_a_kernel_with_a_backward_when_grad_is_needed():
    """A faster library kernel without a backward (registered for the test, as fa3 is on a Hopper GPU) is "auto"'s
    choice for inference and passed over for training; giving it a backward is one field of its spec."""
    fa2 = specs.spec("fa2")
    fast = specs.Spec("fast_fwd", "fast", "fast", "black", fa2.call, fa2.traffic, fa2.extra_bytes, library=True,
                      auto_rank=-1)
    q, k, v = _leaves((1, 1, 8, 16), torch.float32, seed=7)
    with specs.registered(fast):
        with torch.no_grad():
            assert choose_kernel(q)[0] == "fast_fwd"
        chosen, why = choose_kernel(q)
        assert chosen == "fa2" and "no backward pass" in why
        assert flash_attention(q, k, v).grad_fn is not None
    with specs.registered(specs.Spec("fast_both", "fast", "fast", "black", fa2.call, fa2.traffic, fa2.extra_bytes,
                                     library=True, auto_rank=-1, backward=fa2.backward)):
        assert choose_kernel(q)[0] == "fast_both"
        _check_grads(q, k, v, False, kernel="fast_both")


def test_eager_calls_and_the_operators_give_the_same_gradients():
    """Eager calls run autograd.Function `_Eager` (less dispatch), torch.compile the operators: one forward, one
    backward, the same bits."""
    q, k, v = _leaves((1, 2, 40, 16), torch.float32, seed=9)
    out = flash_attention(q, k, v, causal=True, kernel="fa2")
    assert type(out.grad_fn).__name__ == "_EagerBackward"
    eager = torch.autograd.grad(out.sum(), (q, k, v))
    o, _ = torch.ops.flash_live.attention(q, k, v, True, 16 ** -0.5, "fa2")
    assert torch.equal(o, out)
    for a, b in zip(eager, torch.autograd.grad(o.sum(), (q, k, v))):
        assert torch.equal(a, b)


def test_torch_compile_traces_the_custom_op():
    """The operator has a fake (shapes without a launch), so torch.compile traces through forward and backward."""
    q, k, v = _leaves((1, 1, 24, 16), torch.float32, seed=8)

    def loss(q, k, v):
        return (torch.ops.flash_live.attention(q, k, v, True, 0.25, "fa2")[0] * 2).sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    compiled(q, k, v).backward()
    got = [t.grad.clone() for t in (q, k, v)]
    expected = reference_gradients(q, k, v, torch.full((1, 1, 24, 16), 2.0), True, 0.25)
    for g, ref in zip(got, expected):
        assert relative_error(g, ref) < 1e-5


# -- on the GPU, at real sizes ----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_gradients_match_float64(dtype, head_dim, causal):
    _check_grads(*_leaves((2, 3, 1000, head_dim), dtype, seed=head_dim + causal, device="cuda"), causal,
                 kernel="fa2")


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [16, 32, 256])
def test_gpu_gradients_other_head_dims_and_fp32(head_dim):
    for dtype in (torch.bfloat16, torch.float32):
        _check_grads(*_leaves((1, 2, 333, head_dim), dtype, seed=head_dim, device="cuda"), True, kernel="fa2")


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gpu_fa3_trains_through_autograd(head_dim, causal):
    """kernel="fa3" is differentiable: its FA-3 style backward (kernels/fa3_bwd.py) at head_dim 64 and 128, the
    teaching backward at 256, against float64 autograd, ragged N."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the FA-3 style kernels run on Hopper")
    _check_grads(*_leaves((2, 3, 1000, head_dim), torch.bfloat16, seed=head_dim + causal, device="cuda"), causal,
                 kernel="fa3")


@pytest.mark.gpu
def test_gpu_auto_trains_on_a_kernel_with_a_backward_and_the_saved_memory_is_linear():
    q, k, v = _leaves((1, 4, 8192, 128), torch.bfloat16, seed=10, device="cuda")
    hopper = torch.cuda.get_device_capability()[0] == 9
    assert choose_kernel(q)[0] == ("fa3" if hopper else "fa2")  # the fastest library kernel with a backward
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out = flash_attention(q, k, v, causal=True)
    held = torch.cuda.memory_allocated() - before  # what the graph keeps: O and the LSE
    assert held <= out.numel() * 2 + 4 * 8192 * 4 + 2**20
    out.sum().backward()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len", [1, 100, 130])
def test_tma_tiles_give_the_pointer_tiles_gradients(causal, seq_len):
    """The TMA candidate (BackwardConfig.tma: Q, K, V, dO through 4-D tensor descriptors, rows past N loaded as zeros)
    against float64 and against the pointer loads on the same tiles (the interpreter emulates the descriptors; on
    the H200 the GPU test below), ragged N so the edge steps load past the head's last row."""
    from kernels.runtime import INTERPRET
    if not INTERPRET:
        pytest.skip("the interpreter's run; the GPU's is test_gpu_tma_tiles_match_float64")
    q, k, v = random_qkv((1, 2, seq_len, 16), torch.bfloat16, seed=seq_len + causal)
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    do = torch.randn(o.shape, generator=torch.Generator().manual_seed(seq_len)).to(o.dtype)
    tiles = BackwardConfig(32, 64, 64, 32, 4, 1)
    pointer = launch_backward(q, k, v, o, lse, do, causal, 0.25, tiles)
    tma = launch_backward(q, k, v, o, lse, do, causal, 0.25, BackwardConfig(32, 64, 64, 32, 4, 1, tma=True))
    assert all(torch.equal(a, b) for a, b in zip(tma, pointer))
    expected = reference_gradients(q, k, v, do, causal, 0.25, device="cpu")
    for g, ref in zip(tma, expected):
        assert (relative_error(g, ref) if ref.norm() > 0 else g.abs().max().item()) < GRAD_TOLERANCE[torch.bfloat16]


def test_tma_tiles_refuse_what_a_descriptor_cannot_take():
    q, k, v = random_qkv((1, 1, 40, 16), torch.float32, seed=3)
    o, lse = flash_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="fp16 or bf16"):
        launch_backward(q, k, v, o, lse, o, False, 0.25, BackwardConfig(16, 32, 32, 16, 4, 1, tma=True))
    q16, k16, v16 = (t.to(torch.bfloat16) for t in (q, k, v))
    odd = torch.randn(1, 1, 40, 20, dtype=torch.bfloat16)[..., :16]  # rows 40 bytes apart: not 16-byte strides
    with pytest.raises(ValueError, match="16-byte aligned strides"):
        launch_backward(odd, k16, v16, q16, lse, q16, False, 0.25, BackwardConfig(16, 32, 32, 16, 4, 1, tma=True))


def test_tma_tiles_ship_where_they_were_timed_faster(monkeypatch):
    """config_for picks the TMA tiles (TMA_CONFIGS) for 16-bit inputs of the shape classes where they were timed
    faster when the inputs can take them, and the pointer tiles otherwise (fp32, inputs a descriptor cannot take, the
    classes not listed: 256); tma_capable asks the GPU (CPU tensors: never). Only head_dim 128 causal keeps its
    loop-invariant operands in registers (timed 1.012-1.114x its pointer tiles; at d64 they lost 0.67-0.77x)."""
    from kernels import fa2_bwd
    monkeypatch.setattr(fa2_bwd, "INTERPRET", False)  # the GPU's choice, asked without one
    assert set(fa2_bwd.TMA_CONFIGS) == {(64, False), (128, False), (64, True), (128, True)}
    for (d, causal), config in fa2_bwd.TMA_CONFIGS.items():
        assert config.tma
        assert fa2_bwd.config_for(d, torch.bfloat16, causal, tma=True) == config
        assert fa2_bwd.config_for(d, torch.float16, causal, tma=True) == config
        assert not fa2_bwd.config_for(d, torch.bfloat16, causal).tma
        assert not fa2_bwd.config_for(d, torch.float32, causal, tma=True).tma
    # the ragged tail first only at head_dim 128 not causal: under triton 3.6 1.10x there, 0.76x at 64 (§1d)
    assert {key for key, c in fa2_bwd.TMA_CONFIGS.items() if c.tail_first} == {(128, False)}
    regs = {key for key, c in fa2_bwd.TMA_CONFIGS.items() if c.kv_regs or c.qdo_regs}
    assert regs == {(128, True)} and fa2_bwd.TMA_CONFIGS[(128, True)].kv_regs and fa2_bwd.TMA_CONFIGS[(128, True)].qdo_regs
    pointer = fa2_bwd.config_for(128, torch.bfloat16, True)  # without TMA (before Hopper): the pointer tiles, no
    assert not pointer.tma and not pointer.kv_regs and not pointer.qdo_regs  # register operands (timed only with TMA)
    assert not fa2_bwd.config_for(256, torch.bfloat16, False, tma=True).tma
    # the dQ pass steps 64 keys at d64 (TMA) and at d128 causal (pointers): the sweep of 2026-12-07
    assert fa2_bwd.config_for(64, torch.bfloat16, False, tma=True).block_n2 == 64
    assert fa2_bwd.config_for(64, torch.bfloat16, True, tma=True).block_n2 == 64
    assert fa2_bwd.config_for(128, torch.bfloat16, True, tma=True).block_n2 == 64
    q = torch.randn(1, 1, 64, 64, dtype=torch.bfloat16)
    assert not fa2_bwd.tma_capable(q, q, q, q)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_tma_tiles_match_float64(head_dim, causal):
    """The TMA tiles (shipped where kernels/fa2_bwd.py TMA_CONFIGS lists the class: all four here) against float64 autograd, ragged N, and against the pointer loads' tiles of the same
    shape: the same products in the same order, so equal up to a bf16 rounding where the compiler picks another
    wgmma shape (in the interpreter they are bit for bit equal). Without a config, launch_backward picks the TMA tiles
    where they ship: the same bits."""
    from dataclasses import replace
    from kernels.fa2_bwd import TMA_CONFIGS, config_for, tma_capable
    shipped = (head_dim, causal) in TMA_CONFIGS
    config = TMA_CONFIGS[(head_dim, causal)] if shipped else replace(config_for(head_dim, torch.bfloat16, causal),
                                                                      tma=True)
    assert config.tma and config_for(head_dim, torch.bfloat16, causal, tma=True).tma == shipped
    for seq_len in (1, 1000, 1337):
        q, k, v = random_qkv((2, 3, seq_len, head_dim), torch.bfloat16, seed=seq_len + head_dim)
        q, k, v = (t.cuda() for t in (q, k, v))
        o, lse = flash_attention(q, k, v, causal=causal, kernel="fa2", return_lse=True)
        do = torch.randn(o.shape, generator=torch.Generator().manual_seed(seq_len)).to(o.dtype).cuda()
        expected = reference_gradients(q, k, v, do, causal, None, device="cpu")
        grads = launch_backward(q, k, v, o, lse, do, causal, head_dim ** -0.5, config)
        for label, g, ref in zip("qkv", grads, expected):
            err = relative_error(g, ref) if ref.norm() > 0 else g.abs().max().item()
            assert err < GRAD_TOLERANCE[torch.bfloat16], f"N={seq_len} d{label}: {err:.2e}"
        pointer = launch_backward(q, k, v, o, lse, do, causal, head_dim ** -0.5, replace(config, tma=False))
        assert all(relative_error(a, b) < 4e-3 for a, b in zip(grads, pointer) if b.norm() > 0), f"N={seq_len}"
        assert tma_capable(q, k, v, do) and not tma_capable(q.float(), k.float(), v.float(), do.float())
        if shipped:  # the library's own pick
            picked = launch_backward(q, k, v, o, lse, do, causal, head_dim ** -0.5)
            assert all(torch.equal(a, b) for a, b in zip(picked, grads)), f"N={seq_len}"


REGS_SCRIPT = """
import os
os.environ["FLASH_LIVE_BACKEND"] = "aot"  # compile, never launch
import torch
from bench.compile_check import _capture, _cubin_facts, compile_entry
from kernels import fa2_bwd
from kernels.inputs import example_qkv
q = example_qkv(128, torch.bfloat16)[0]
lse = torch.zeros(q.shape[:3])
for name, config in (("shipped", fa2_bwd.TMA_CONFIGS[(128, True)]),
                     ("off", fa2_bwd.replace(fa2_bwd.TMA_CONFIGS[(128, True)], kv_regs=False, qdo_regs=False))):
    for fn, args, kwargs in _capture(lambda: fa2_bwd._launch_backward(q, q, q, q, lse, q, True, 0.125, config)):
        if fn.fn.__name__ != "_bwd_preprocess":
            facts = _cubin_facts(compile_entry(fn, args, kwargs, 90).asm["cubin"], True)
            print(name, fn.fn.__name__, facts["hgmma"], facts["hgmma_reg_a"], facts["stack"])
"""


def test_register_operands_reach_the_sm90_build():
    """BackwardConfig.kv_regs and qdo_regs (shipped at head_dim 128 causal) do what they say in the sm_90 build: every
    wgmma of the dK/dV and dQ kernels takes its first operand from registers (with them off, only the products whose
    first operand the kernel computes: P, dS), within 8 bytes of stack. Compiled ahead of time, no GPU."""
    env = {**os.environ, "FLASH_LIVE_BACKEND": "aot"}
    env.pop("TRITON_INTERPRET", None)  # this process's interpreter: the child compiles for a real target
    done = subprocess.run([sys.executable, "-c", REGS_SCRIPT], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = {tuple(line.split()[:2]): [int(x) for x in line.split()[2:]] for line in done.stdout.splitlines()
            if line.startswith(("shipped ", "off "))}
    assert len(rows) == 4, done.stdout
    for kernel in ("_bwd_dkdv", "_bwd_dq"):
        hgmma, reg_a, stack = rows[("shipped", kernel)]
        assert hgmma > 0 and reg_a == hgmma and stack <= 8, (kernel, rows)
        hgmma_off, reg_a_off, _ = rows[("off", kernel)]
        assert hgmma_off == hgmma and reg_a_off < hgmma_off, (kernel, rows)


CAP_SCRIPT = """
import os
os.environ["FLASH_LIVE_BACKEND"] = "aot"  # compile, never launch
import torch
from bench.compile_check import _capture, _cubin_facts, compile_entry
from kernels import fa2_bwd
from kernels.inputs import example_qkv
q = example_qkv(64, torch.bfloat16)[0]
lse = torch.zeros(q.shape[:3])
for name in ("128 regs", "tail first 128 regs"):
    config = fa2_bwd.CANDIDATES[(64, False)][name]
    for fn, args, kwargs in _capture(lambda: fa2_bwd._launch_backward(q, q, q, q, lse, q, False, 0.125, config)):
        if fn.fn.__name__ == "_bwd_dkdv":
            facts = _cubin_facts(compile_entry(fn, args, kwargs, 90).asm["cubin"], True)
            print("row", name.replace(" ", "_"), facts["regs"], facts["stack"], facts["hgmma"], facts["wgmma_waits"])
"""


def test_a_register_cap_reaches_the_sm90_build():
    """BackwardConfig.dkdv_maxnreg does what it says in the sm_90 build of the pinned Triton: the head_dim 64
    not-causal candidates capped at 128 registers a thread (two programs of 8 warps an SM) build within the cap,
    without stack, and the tail-first one keeps its wgmmas in groups. Without the cap 3.7.1's build takes 132 and
    3.6's tail-first one 135 (BENCHMARKS §1d). Compiled ahead of time, no GPU."""
    env = {**os.environ, "FLASH_LIVE_BACKEND": "aot"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", CAP_SCRIPT], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = {line.split()[1]: [int(x) for x in line.split()[2:]] for line in done.stdout.splitlines()
            if line.startswith("row ")}
    assert set(rows) == {"128_regs", "tail_first_128_regs"}, done.stdout
    for regs, stack, hgmma, waits in rows.values():
        assert regs <= 128 and stack == 0 and hgmma > 0, rows
    regs, stack, hgmma, waits = rows["tail_first_128_regs"]
    assert waits < hgmma / 2, rows


GROUPS_SCRIPT = """
import os
os.environ["FLASH_LIVE_BACKEND"] = "aot"  # compile, never launch
import torch, triton
from bench.compile_check import _capture, _cubin_facts, compile_entry
from kernels import fa2_bwd
from kernels.inputs import example_qkv
print("triton", triton.__version__)
for (head_dim, causal), config in fa2_bwd.TMA_CONFIGS.items():
    q = example_qkv(head_dim, torch.bfloat16)[0]
    lse = torch.zeros(q.shape[:3])
    for fn, args, kwargs in _capture(lambda: fa2_bwd._launch_backward(q, q, q, q, lse, q, causal, 0.125, config)):
        if fn.fn.__name__ != "_bwd_preprocess":
            facts = _cubin_facts(compile_entry(fn, args, kwargs, 90).asm["cubin"], True)
            print("row", head_dim, int(causal), int(config.tail_first), fn.fn.__name__, facts["hgmma"],
                  facts["wgmma_waits"])
"""


@pytest.mark.gpu
def test_gpu_machines_triton_issues_the_shipped_wgmmas_in_groups():
    """The Hopper tiles (TMA_CONFIGS) compiled for sm_90 by the Triton installed here (the GPU machine's, 3.6 on the
    H200 box; tests/test_compile_check.py checks the pinned one) wait on their wgmmas a few times a step, not once per
    wgmma: every causal build, every dQ build, and the not-causal dK/dV builds that walk the ragged tail first
    (tail_first), which triton 3.6 serialized (ptxas C7515) with the full blocks first. Head_dim 64 not causal keeps
    the full blocks first: under 3.6 its serialized build measured faster (BENCHMARKS §1d), so it is not held to
    groups here. Compiled ahead of time: it needs the GPU machine's Triton, not its GPU."""
    env = {**os.environ, "FLASH_LIVE_BACKEND": "aot"}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", GROUPS_SCRIPT], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("row ")]
    from kernels.fa2_bwd import TMA_CONFIGS
    assert len(rows) == 2 * len(TMA_CONFIGS), done.stdout
    held = [row for row in rows if row[1] == "1" or row[2] == "1" or row[3] != "_bwd_dkdv"]
    assert len(held) == len(rows) - 1, done.stdout  # all but head_dim 64's not-causal dK/dV build
    for head_dim, causal, tail_first, kernel, hgmma, waits in held:
        assert 0 < int(waits) < int(hgmma) / 2, (done.stdout.splitlines()[0], head_dim, causal, kernel, hgmma, waits)
