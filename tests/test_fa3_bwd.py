"""The FA-3 style backward (kernels/fa3_bwd.py, Gluon, Hopper): its configurations and refusals on the CPU; on a Hopper
GPU its gradients against float64 autograd of the reference (ragged N around the tiles, causal and not, fp16 and
bf16, head_dim 64 and 128, every shipped and candidate configuration) and against the teaching backward.
The compile check (tests/test_compile_check.py) builds it for sm_90 in CI."""
import pytest
import torch

from kernels.fa3_bwd import CANDIDATES, SHIPPED, Fa3BwdConfig, launch_backward, unavailable_reason
from kernels.reference import reference_gradients, relative_error
from tests.support_kernels import random_qkv

GRAD_TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 3e-2}


def test_configs_check_what_the_kernel_can_split():
    for d, config in (*SHIPPED.items(), *((d, c) for d, by in CANDIDATES.items() for c in by.values())):
        assert config.smem_bytes(d) <= 227 * 1024 and config.maxnreg * 32 * 12 <= 65536
        assert 2 * 128 * config.consumer_regs + 128 * config.producer_regs <= 65536  # setmaxnreg's pool
        rows, cols = config.dq_part(d)  # the box the copy engine adds: a consumer's part of a query block's dQ
        assert rows == 64 and cols == (d // 2 if config.dq_split == "cols" else d)
    with pytest.raises(ValueError, match="dq_split"):
        Fa3BwdConfig(2, "heads")
    assert {d: c.dq_split for d, c in SHIPPED.items()} == {64: "cols", 128: "cols"}, "the H200 run of 2026-12-05"
    for d, by in CANDIDATES.items():  # each a build of its own beside the shipped one at its head_dim
        assert len({c.mangle() for c in (SHIPPED[d], *by.values())}) == 1 + len(by), d


@pytest.mark.parametrize("dtype,shape,words", [
    (torch.float32, (1, 2, 64, 64), "float16 and bfloat16"),
    (torch.bfloat16, (1, 2, 64, 256), "head_dim 64 and 128"),
    (torch.bfloat16, (1, 2, 64, 32), "head_dim 64 and 128"),
])
def test_what_it_cannot_run_is_said(dtype, shape, words):
    q = torch.zeros(shape, dtype=dtype)
    assert words in unavailable_reason(q)
    with pytest.raises(ValueError, match=words):
        launch_backward(q, q, q, q, torch.zeros(shape[:3]), q, False, 0.125)


def test_grouped_heads_and_other_lengths_are_refused():
    q = torch.zeros(1, 4, 64, 64, dtype=torch.bfloat16)
    assert "one shape" in unavailable_reason(q, torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16))
    assert "one shape" in unavailable_reason(q, q, torch.zeros(1, 4, 80, 64, dtype=torch.bfloat16))


def test_off_hopper_it_says_why():
    from kernels.runtime import AOT, INTERPRET
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 or AOT:
        pytest.skip("a Hopper GPU (or the ahead-of-time backend) runs it")
    reason = unavailable_reason(torch.zeros(1, 1, 8, 64, dtype=torch.bfloat16))
    assert ("interpreter" in reason) if INTERPRET else ("Hopper" in reason)


# -- on a Hopper GPU ---------------------------------------------------------------------------------------------

def _hopper():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the FA-3 style backward runs on Hopper (sm_90) only")


def _case(batch, heads, seq_len, head_dim, dtype, causal, seed, scale_q=1.0):
    from kernels import flash_attention
    q, k, v = (t.cuda() for t in random_qkv((batch, heads, seq_len, head_dim), dtype, seed))
    q = (q.float() * scale_q).to(dtype)
    o, lse = flash_attention(q, k, v, causal=causal, kernel="fa2", return_lse=True)
    do = torch.randn(o.shape, generator=torch.Generator().manual_seed(seed)).to(dtype).cuda()
    return q, k, v, o, lse, do


def _errors(grads, expected):
    return [relative_error(g, r) if r.norm() > 0 else g.abs().max().item() for g, r in zip(grads, expected)]


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_gradients_match_float64(head_dim, causal, dtype):
    """The shipped configuration at N from 1 through the tiles' edges (63, 64, 65, 127, 128, 129) to 1000 and 1337,
    and in bf16 every candidate at 1, 65, 1000 and 1337: dQ, dK, dV against float64 autograd of the reference and
    against the teaching backward."""
    _hopper()
    from kernels.fa2_bwd import launch_backward as teaching
    for seq_len in (1, 63, 64, 65, 127, 128, 129, 1000, 1337):
        configs = {"shipped": SHIPPED[head_dim]}
        if dtype == torch.bfloat16 and seq_len in (1, 65, 1000, 1337):
            configs.update(CANDIDATES.get(head_dim, {}))
        q, k, v, o, lse, do = _case(2, 3, seq_len, head_dim, dtype, causal, seed=seq_len + head_dim)
        scale = head_dim ** -0.5
        expected = reference_gradients(q, k, v, do, causal, None, device="cpu")
        ours = teaching(q, k, v, o, lse, do, causal, scale)
        for name, config in configs.items():
            grads = launch_backward(q, k, v, o, lse, do, causal, scale, config)
            assert all(g.dtype == dtype and g.shape == q.shape for g in grads)
            errs = _errors(grads, expected)
            assert max(errs) < GRAD_TOLERANCE[dtype], (name, seq_len, errs)
            # the teaching backward's within the tolerance too (a second opinion that is not float64), measured
            # against the float64 gradient's size: at N = 1 dQ and dK are zero, and both kernels' roundings of zero
            # differ by more than themselves
            for g, t, ref in zip(grads, ours, expected):
                if ref.norm() > 0:
                    assert (g.double().cpu() - t.double().cpu()).norm() / ref.norm() < GRAD_TOLERANCE[dtype], name


@pytest.mark.gpu
def test_gpu_keys_past_the_end_do_not_overflow_a_very_negative_lse():
    """Every score near −128 (q = 4·x, k = −x·…): the LSE is far below −88, where exp(0 − LSE) for a key row past N
    (loaded as zeros) overflows fp32; the kernel must give those rows P = 0 and no inf or NaN reaches dQ."""
    _hopper()
    for head_dim in (64, 128):
        base = torch.randn(1, 2, 1000, head_dim, generator=torch.Generator().manual_seed(5)).abs() + 1
        q = (4 * base).to(torch.bfloat16).cuda()
        k = (-4 * base).to(torch.bfloat16).cuda()
        v = torch.randn(1, 2, 1000, head_dim, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16).cuda()
        from kernels import flash_attention
        o, lse = flash_attention(q, k, v, kernel="fa2", return_lse=True)
        assert lse.max().item() < -88
        do = torch.randn_like(o)
        grads = launch_backward(q, k, v, o, lse, do, False, head_dim ** -0.5)
        assert all(torch.isfinite(g).all() for g in grads)
        errs = _errors(grads, reference_gradients(q, k, v, do, False, None, device="cpu"))
        assert max(errs) < GRAD_TOLERANCE[torch.bfloat16], errs


@pytest.mark.gpu
def test_gpu_strided_inputs_and_the_accumulator_padding():
    """q, k, v as views of one (B, N, 3, H, D) tensor (strides TMA takes as they are), N not a multiple of 64."""
    _hopper()
    from kernels import flash_attention
    qkv = torch.randn(2, 777, 3, 4, 128, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16).cuda()
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    o, lse = flash_attention(q, k, v, causal=True, kernel="fa2", return_lse=True)
    do = torch.randn_like(o)
    grads = launch_backward(q, k, v, o, lse, do, True, 128 ** -0.5)
    assert max(_errors(grads, reference_gradients(q, k, v, do, True, None, device="cpu"))) < 3e-2


def test_the_rows_pass_pads_lse_and_delta_for_whole_query_blocks():
    """`_bwd_rows` (a `tl` kernel: it runs in the interpreter) writes what the producer warp loads by TMA: Δ =
    rowsum(dO ∘ O) and LSE·log2 e per row, padded to whole query blocks with Δ = 0 and LSE = +inf (so P = 0 there)."""
    import math

    from kernels.fa3_bwd import _bwd_rows
    from kernels.runtime import DEVICE, INTERPRET, kernel_launch_lock
    if not INTERPRET and DEVICE.type != "cuda":
        pytest.skip("the interpreter's run (or a GPU's)")
    o, do, _ = random_qkv((2, 3, 100, 64), torch.float32, seed=4)
    lse = torch.randn(2, 3, 100, generator=torch.Generator().manual_seed(5)).to(o.device)
    rows = 128
    delta, lse2 = (torch.full((2, 3, rows), float("nan"), device=o.device) for _ in range(2))
    with kernel_launch_lock():
        _bwd_rows[(rows // 64, 6)](o, do, lse, delta, lse2, 100, rows, HEAD_DIM=64, BLOCK=64)
    assert torch.allclose(delta[..., :100], (o * do).sum(-1), rtol=1e-5, atol=1e-5)
    assert torch.allclose(lse2[..., :100], lse / math.log(2), rtol=1e-6)
    assert (delta[..., 100:] == 0).all() and (lse2[..., 100:] == float("inf")).all()
