"""Both kernels against a float64 reference, on the CPU interpreter (or the GPU when present)."""
import math

import pytest
import torch

import kernels
from kernels import specs
from kernels import naive_attention
from kernels.fa2 import FlashConfig, flash_attention  # the teaching kernel (kernels.flash_attention picks one)
from kernels.runtime import DEVICE
from tests.support_kernels import TOLERANCE, random_qkv, reference, rel_error

# (batch, heads, seq_len, head_dim): every head dim, seq_lens that are not multiples of the tile
SHAPES = [(2, 2, 1, 16), (1, 3, 17, 32), (2, 2, 100, 64), (1, 2, 257, 128), (1, 1, 70, 256)]
KERNELS = {"fa2": flash_attention, "naive": naive_attention}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(KERNELS))
def test_matches_float64_reference(name, shape, dtype, causal, poisoned_allocations):
    q, k, v = random_qkv(shape, dtype, seed=hash((name, shape, causal)) % 2**31)
    out = KERNELS[name](q, k, v, causal=causal)
    ref, _ = reference(q, k, v, causal, 1 / math.sqrt(shape[-1]))
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite output elements"
    assert rel_error(out, ref) < TOLERANCE[dtype]


@pytest.mark.parametrize("causal", [False, True])
def test_flash_lse_and_custom_scale(causal, poisoned_allocations):
    q, k, v = random_qkv((2, 2, 45, 32), torch.float32, seed=3)
    out, lse = flash_attention(q, k, v, causal=causal, sm_scale=0.3, return_lse=True)
    ref, ref_lse = reference(q, k, v, causal, 0.3)
    assert rel_error(out, ref) < 1e-5
    assert lse.shape == (2, 2, 45) and lse.dtype == torch.float32
    assert torch.allclose(lse.cpu().double(), ref_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_m,block_n", [(16, 32), (32, 16), (16, 16)])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_any_tile_shape(block_m, block_n, causal):
    """Tiles smaller or larger than each other: the causal split must still cover exactly the mask."""
    q, k, v = random_qkv((1, 2, 75, 16), torch.float32, seed=block_m + block_n)
    out = flash_attention(q, k, v, causal=causal, config=FlashConfig(block_m, block_n, 4, 1))
    assert rel_error(out, reference(q, k, v, causal, 0.25)[0]) < 1e-5


@pytest.mark.parametrize("name", list(KERNELS))
def test_non_contiguous_inputs(name):
    """(B, N, H, D) memory seen as (B, H, N, D), and a last dimension with stride 2."""
    gen = torch.Generator().manual_seed(11)
    bnhd = [torch.randn(2, 33, 3, 32, generator=gen).to(DEVICE) for _ in range(2)]
    q, k = (t.transpose(1, 2) for t in bnhd)
    v = torch.randn(2, 3, 33, 64, generator=gen).to(DEVICE)[..., ::2]
    assert not q.is_contiguous() and v.stride(-1) == 2
    out = KERNELS[name](q, k, v, causal=True)
    assert rel_error(out, reference(q, k, v, True, 32 ** -0.5)[0]) < 1e-5


def test_flash_allocates_no_n_by_n_buffer(poisoned_allocations):
    q, k, v = random_qkv((1, 1, 257, 16), torch.float32, seed=5)
    poisoned_allocations.clear()
    flash_attention(q, k, v)
    sizes = [math.prod(shape) for shape, _ in poisoned_allocations]
    assert ((1, 1, 257, 16), torch.float32) in poisoned_allocations  # O
    assert ((1, 1, 257), torch.float32) in poisoned_allocations      # LSE
    assert max(sizes) < 257 * 257, f"flash allocated an N×N-sized buffer: {poisoned_allocations}"


@pytest.mark.parametrize("causal", [False, True])
def test_naive_materializes_s_and_p(causal, poisoned_allocations):
    q, k, v = random_qkv((1, 2, 130, 16), torch.bfloat16, seed=6)
    poisoned_allocations.clear()
    out, s, p = naive_attention(q, k, v, causal=causal, return_intermediates=True)
    assert ((1, 2, 130, 130), torch.float32) in poisoned_allocations  # S, fp32
    assert ((1, 2, 130, 130), torch.bfloat16) in poisoned_allocations  # P, input dtype
    q64, k64 = q.cpu().double(), k.cpu().double()
    expected_s = q64 @ k64.transpose(-1, -2) * 0.25
    lower = torch.ones(130, 130, dtype=torch.bool).tril()
    visible = lower if causal else torch.ones_like(lower)
    assert torch.allclose(s.cpu().double()[..., visible], expected_s[..., visible], rtol=1e-5, atol=1e-5)
    p64 = p.cpu().double()
    assert torch.allclose(p64.sum(-1), torch.ones(1, 2, 130, dtype=torch.float64), atol=2e-2)
    if causal:
        assert (p64[..., ~lower] == 0).all(), "P must hold zeros where the causal mask hides a key"
    assert rel_error(out, reference(q, k, v, causal, 0.25)[0]) < 1e-2


def _bad_inputs():
    good = random_qkv((1, 2, 8, 16), torch.float32, seed=1)
    q, k, v = good
    return [
        ("not a tensor", (q.tolist(), k, v), {}, TypeError, "torch.Tensor"),
        ("3-D", (q[0], k[0], v[0]), {}, ValueError, "4-D"),
        ("shape mismatch", (q, k[:, :, :4], v), {}, ValueError, "same shape"),
        ("dtype mismatch", (q, k.half(), v), {}, TypeError, "one dtype"),
        ("unsupported dtype", (q.double(), k.double(), v.double()), {}, TypeError, "unsupported dtype"),
        ("integer dtype", (q.int(), k.int(), v.int()), {}, TypeError, "unsupported dtype"),
        ("head_dim 48", tuple(torch.randn(1, 1, 8, 48).to(DEVICE) for _ in range(3)), {}, ValueError, "head_dim"),
        ("empty sequence", (q[:, :, :0], k[:, :, :0], v[:, :, :0]), {}, ValueError, "empty sequence"),
        ("zero heads", (q[:, :0], k[:, :0], v[:, :0]), {}, ValueError, "at least 1"),
        ("other device", (q, k, v.to("meta")), {}, ValueError, "different devices"),
        ("causal not bool", good, {"causal": "yes"}, TypeError, "causal"),
        ("sm_scale nan", good, {"sm_scale": float("nan")}, ValueError, "sm_scale"),
        ("sm_scale text", good, {"sm_scale": "0.1"}, ValueError, "sm_scale"),
        ("sparse", (q.to_sparse(), k, v), {}, TypeError, "dense"),
        ("requires grad", (q.clone().requires_grad_(), k, v), {}, ValueError, "forward only"),
    ]


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("case", _bad_inputs(), ids=lambda c: c[0])
def test_bad_input_gets_a_clear_error(name, case):
    _, args, kwargs, error, words = case
    if case[0] == "requires grad" and specs.spec(name).backward:  # differentiable: recorded, not refused
        assert KERNELS[name](*args, **kwargs).grad_fn is not None
        return
    with pytest.raises(error, match=words):
        KERNELS[name](*args, **kwargs)


@pytest.mark.parametrize("name", list(KERNELS))
def test_tensors_that_require_grad_run_under_no_grad(name):
    q, k, v = (t.clone().requires_grad_() for t in random_qkv((1, 1, 8, 16), torch.float32, seed=3))
    with torch.no_grad():
        out = KERNELS[name](q, k, v)
    assert not out.requires_grad
    assert rel_error(out, reference(q.detach(), k.detach(), v.detach(), False, 0.25)[0]) < 1e-4


def test_tensors_on_the_wrong_device_for_the_active_path():
    q, k, v = (torch.randn(1, 1, 8, 16, device="meta") for _ in range(3))  # neither CPU nor the GPU
    for fn in KERNELS.values():
        with pytest.raises(ValueError, match="is active"):
            fn(q, k, v)


@pytest.mark.parametrize("tiles", [(24, 32), (16, 8), (512, 16), ("64", 64)])
def test_bad_tile_sizes(tiles):
    q, k, v = random_qkv((1, 1, 8, 16), torch.float32, seed=2)
    with pytest.raises(ValueError, match="power of two"):
        flash_attention(q, k, v, config=FlashConfig(*tiles, 4, 1))


def test_backend_is_reported():
    assert kernels.backend() in ("cuda", "interpreter")
    assert isinstance(kernels.backend_reason(), str) and kernels.backend_reason()


def test_the_tma_alignment_check_keeps_no_tensor_alive_and_its_copy_is_aligned():
    """runtime.tma_aligned is asked of every input of every call: it must not hold on to them (a cache keyed by
    tensors would keep each one, and its device memory, alive); tma_ready's copy of a misaligned contiguous view is
    aligned (its `.contiguous()` would be the view itself)."""
    import gc
    import weakref

    from kernels.runtime import tma_aligned, tma_ready
    t = torch.zeros(4, 16, 64, dtype=torch.bfloat16)
    ref = weakref.ref(t)
    assert tma_aligned(t)
    del t
    gc.collect()
    assert ref() is None
    view = torch.zeros(1 + 4 * 16 * 64, dtype=torch.bfloat16)[1:].view(4, 16, 64)  # contiguous, base 2 bytes off
    assert view.is_contiguous() and not tma_aligned(view) and not tma_aligned(view.contiguous())
    ready = tma_ready(view)
    assert tma_aligned(ready) and torch.equal(ready, view)
