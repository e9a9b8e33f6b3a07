"""The kernels a user would pick instead of ours, behind the same call as ours: `fn(q, k, v, causal=...)` with q, k,
v (batch, heads, seq_len, head_dim). Their specs (kernels/specs.py) name them; the bench times them beside ours.

- `sdpa_default`: PyTorch's scaled_dot_product_attention as it picks its backend (cuDNN on an H200);
- `sdpa_flash`: the same, held to its FlashAttention-2 backend;
- `torch_naive`: standard attention in PyTorch eager, the same math as our naive kernels;
- `fa4_authors`: the FlashAttention authors' own kernels (flash-attn-4, CuTe DSL), whose Hopper forward
  (flash_attn/cute/flash_fwd_sm90.py) is the reference a GPU expert names first. Installed apart from the app
  (requirements-peers.txt); `fa4_unavailable_for` says why it cannot run here.
"""
from __future__ import annotations

import functools
import math

import torch

FA4_INSTALL = "pip install -r requirements-peers.txt"
FA4_DTYPES = ("float16", "bfloat16")


def _grouped(q, k) -> dict:
    """SDPA's keyword for K/V heads fewer than the query heads (grouped-query attention); none otherwise."""
    return {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}


def sdpa_default(q, k, v, causal: bool = False):
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    return sdpa(q, k, v, is_causal=causal, **_grouped(q, k))


def sdpa_flash(q, k, v, causal: bool = False):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return sdpa(q, k, v, is_causal=causal, **_grouped(q, k))


def torch_naive(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """Standard attention in PyTorch eager, the same math as our naive kernels: fp32 scores and softmax,
    P rounded to the input dtype, O = PV."""
    batch, heads, n, d = q.shape
    scale = 1.0 / math.sqrt(d) if sm_scale is None else sm_scale
    q3, k3, v3 = (t.reshape(batch * heads, n, d) for t in (q, k, v))  # (B·H, N, D)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        # bmm's out_dtype has no derivative: under autograd the scores come out in the input dtype and are widened
        # (softmax then keeps its fp32 output and P for the backward, as standard attention's autograd does)
        s = torch.bmm(q3, k3.transpose(1, 2)).float()
    else:
        s = torch.bmm(q3, k3.transpose(1, 2), out_dtype=torch.float32)  # (B·H, N, N) fp32
    s.mul_(scale)
    if causal:
        s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)  # (B·H, N, N)
    del s
    return torch.bmm(p, v3).reshape(batch, heads, n, d)


# -- the authors' FlashAttention-4 (CuTe DSL), Hopper forward ---------------------------------------------------------

@functools.cache
def _fa4_func():
    """(the authors' flash_attn_func, None), or (None, why it does not import): imported once, on first use (the
    CuTe DSL takes seconds to import)."""
    try:
        from flash_attn.cute.interface import flash_attn_func
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ("flash_attn", "cutlass"):
            return None, f"flash-attn-4 is not installed ({FA4_INSTALL})"
        return None, f"flash-attn-4 does not import here: {exc} ({FA4_INSTALL})"[:300]
    except Exception as exc:  # noqa: BLE001 - a broken install is a sentence, not a crash of the bench
        return None, f"flash-attn-4 does not import here: {type(exc).__name__}: {exc}"[:300]
    return flash_attn_func, None


def fa4_unavailable_for(shape, device: torch.device | None = None) -> str | None:
    """Why the authors' FA-4 Hopper forward cannot run this shape (costmodel.Shape) here; None when it can."""
    _, why = _fa4_func()
    if why:
        return why
    if shape.dtype not in FA4_DTYPES:
        return f"the authors' FA-4 runs on float16 and bfloat16 inputs, not {shape.dtype}"
    from kernels.runtime import AOT, INTERPRET
    if INTERPRET or AOT or not torch.cuda.is_available():
        return "the authors' FA-4 Hopper forward needs Hopper (sm_90); no CUDA GPU is active here"
    major, minor = torch.cuda.get_device_capability(device)
    if major != 9:
        return f"the authors' FA-4 Hopper forward needs Hopper (sm_90); this GPU is sm_{major}{minor}"
    return None


def fa4_authors(q, k, v, causal: bool = False):
    """The authors' FA-4 forward on our (batch, heads, seq_len, head_dim) tensors: theirs take (batch, seq_len,
    heads, head_dim), so each is passed as a transposed view (no copy) and O comes back the same way. Returns O
    only (theirs returns O and the LSE). RuntimeError with fa4_unavailable_for's sentence where not installed."""
    func, why = _fa4_func()
    if func is None:
        raise RuntimeError(why)
    out = func(*(t.transpose(1, 2) for t in (q, k, v)), causal=causal)
    out = out[0] if isinstance(out, tuple) else out
    return out.transpose(1, 2)


# -- decode: one new token's queries against a KV cache -------------------------------------------------------------
# Each returns (call, facts): a no-argument call to time (what it needs is built first, outside the timing) and
# what the record says of how it ran ({"page_size", "num_splits"}). q (batch, heads, q_len, head_dim), k and v
# (batch, kv_heads, kv_len, head_dim); a query row sees every key of the cache (bottom-right aligned).

def paged_cache(k, v, page_size: int, seed: int = 0):
    """The same cache in pages of page_size under a shuffled block table, as vLLM and FlashAttention lay it out:
    (k_pages, v_pages, block_table), pages (num_pages, page_size, kv_heads, head_dim), block_table (batch, pages)
    int32."""
    batch, heads, length, head_dim = k.shape
    per_sequence = -(-length // page_size)
    gen = torch.Generator(device=k.device).manual_seed(seed)
    table = torch.randperm(batch * per_sequence, device=k.device, generator=gen).to(torch.int32)
    table = table.view(batch, per_sequence)
    out = []
    for t in (k, v):
        padded = torch.nn.functional.pad(t, (0, 0, 0, per_sequence * page_size - length))
        pages = torch.empty(batch * per_sequence, page_size, heads, head_dim, device=t.device, dtype=t.dtype)
        pages[table.flatten().long()] = padded.view(batch, heads, per_sequence, page_size, head_dim).permute(
            0, 2, 3, 1, 4).reshape(batch * per_sequence, page_size, heads, head_dim)
        out.append(pages)
        del padded
    return out[0], out[1], table


def decode_ours(q, k, v, page_size: int | None = None):
    """Our split-KV decode kernel (kernels/decode.py) on a contiguous cache, or on a paged one (page_size)."""
    from kernels import decode
    table = None
    if page_size:
        k, v, table = paged_cache(k, v, page_size)
    plan, _ = decode._checked_plan(q, k, v, None, table, True, None, None, None)
    return (lambda: decode.decode_attention(q, k, v, block_table=table, causal=True),
            {"page_size": page_size or None, "num_splits": plan.splits})


def decode_sdpa_default(q, k, v, page_size: int | None = None):
    """SDPA as it picks its backend, K/V heads grouped (enable_gqa); one query row sees every key (no mask)."""
    if page_size:
        raise ValueError("SDPA reads a contiguous cache only")
    return (lambda: sdpa_default(q, k, v, causal=False)), {"page_size": None, "num_splits": None}


def decode_sdpa_flash(q, k, v, page_size: int | None = None):
    """SDPA held to its FlashAttention-2 backend, K/V heads grouped (enable_gqa)."""
    if page_size:
        raise ValueError("SDPA reads a contiguous cache only")
    return (lambda: sdpa_flash(q, k, v, causal=False)), {"page_size": None, "num_splits": None}


def decode_prefill_kernel(q, k, v, page_size: int | None = None):
    """Our prefill kernel (kernels/fa2.py) used as-is for decode: launched as a prefill launches at q_len 1, one
    program per batch·query head (its Q block padded from one row), K and V expanded to every query head (it has no
    grouped heads). What Flash-Decoding set out to fix: a handful of programs, each streaming a whole cache."""
    if page_size:
        raise ValueError("the prefill kernel reads a contiguous cache only")
    from triton.tools.tensor_descriptor import TensorDescriptor
    from kernels import fa2
    from kernels.inputs import dot_modes
    batch, heads, q_len, head_dim = q.shape
    group = heads // k.shape[1]
    if group > 1:
        k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    kv_len = k.shape[2]
    config = fa2.config_for(head_dim, q.dtype, False)
    dot_fp32, precision = dot_modes(q.dtype)
    q_pad = torch.zeros(batch, heads, config.block_m, head_dim, device=q.device, dtype=q.dtype)
    q_pad[:, :, :q_len] = q
    o_pad = torch.empty_like(q_pad)
    lse = torch.empty(batch * heads * max(kv_len, config.block_m), device=q.device, dtype=torch.float32)
    q_d, o_d = (TensorDescriptor.from_tensor(t, [1, 1, config.block_m, head_dim]) for t in (q_pad, o_pad))
    k_d, v_d = (TensorDescriptor.from_tensor(t, [1, 1, config.block_n, head_dim]) for t in (k, v))

    def call():
        fa2._attn_fwd[(1, batch * heads)](
            q_d, k_d, v_d, o_d, lse, lse, lse, lse, head_dim ** -0.5, kv_len, heads, 1,
            triton_cdiv(kv_len, config.block_n),
            *q_pad.stride(), *k.stride(), *v.stride(), *o_pad.stride(),
            HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=False, DOT_FP32=dot_fp32,
            PRECISION=precision, USE_TMA=True, TRACE=False, RECORD_SM=False, PROFILE=False,
            num_warps=config.num_warps, num_stages=config.num_stages)
        return o_pad[:, :, :q_len]
    return call, {"page_size": None, "num_splits": None}


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
