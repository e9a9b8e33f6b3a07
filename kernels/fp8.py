"""FP8 attention, FA-3's third idea: e4m3 Q, K, V through our FA-3 style kernel (kernels/fa3.py), and everything
around the kernel body: quantization with its scales, the Hadamard rotation, a CPU emulation and the error metrics.

- `quantize_fp8(x, granularity)` → (values in torch.float8_e4m3fn, float32 descale): x ≈ values · descale, one scale
  per tensor, per (batch, head), or per block of `block` rows of a head. e4m3 holds ±448 with 3 mantissa bits: the
  largest |x| of each group is mapped to 448.
- `hadamard_rotate(q, k, seed)`: Q·R and K·R with R = H·diag(±1)/√d (a Walsh–Hadamard matrix times random signs,
  seeded: the same R for Q and K). R is orthogonal, so (QR)(KR)ᵀ = QKᵀ in exact arithmetic; an outlier in one
  coordinate is spread over all d of them, so per-tensor and per-head scales waste less of e4m3's range (FA-3's
  "incoherent processing"). V is not rotated (it never meets R), so O needs no un-rotation.
- `fp8_attention(q, k, v, descale_q=, descale_k=, descale_v=)`: the kernel (Hopper only). The descales are
  float32 scalars or (batch, heads) tensors, as flash-attn's FA-3 takes them; Q's and K's fold into the softmax
  scale, V's multiplies O at the end. O comes back in bf16. `flash_attention(...)` (kernels.attention) routes e4m3
  inputs here.
- `emulate_fp8_attention(q, k, v, ...)`: the same numbers on the CPU (float64 math on e4m3-rounded Q, K, V and P),
  so the error of each scaling and of the rotation can be checked without a GPU; `attention_error(out, ref)`: max
  and RMS error against the float64 reference; `add_outliers(x)`: the FA-3 paper's test input (N(0, 10²) added to
  0.1 % of entries, its Table 3); `plant_outliers(x)`: harsher ones (0.1 % of entries ×10–100);
  `plant_sink(q, k, v)`: an attention sink (a few keys every query scores far above the rest, as trained LLMs have).

In the kernel, P (≤ 1, or ≤ 2^8 under the lazy rescale) is rounded to e4m3 per tile: 2^8 = 256 is below e4m3's
448, so the lazy rescale's threshold stays 8. e4m3's relative precision (2^-4) does not depend on magnitude for
normal numbers, so a P of 256 is no less precise than one of 1; only P below 2^-9 (×max) flushes to zero, which
the lazy threshold, by keeping P's scale up to 2^8 larger, only makes rarer. Under an attention sink most of a row's
probabilities are that small: with P ≤ 1 they flush to zero while l, summed in fp32 before the cast, still counts
them, so O loses their share (P-collapse). `Fa3Config.p_offset` (FA-3's max offset: P made 2^8 larger before the cast,
the lazy threshold lowered to match) keeps them; `emulate_fp8_attention(p_offset=)` shows the difference on the CPU.
"""
from __future__ import annotations

import math

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448
GRANULARITIES = ("tensor", "head", "block")
DEFAULT_BLOCK = 128  # rows per scale with granularity="block" (the kernel's keys per K/V tile)


def _tiny() -> float:
    return float(torch.finfo(torch.float32).tiny)


# -- quantization ----------------------------------------------------------------------------------------------------

def quantize_fp8(x: torch.Tensor, granularity: str = "head", block: int = DEFAULT_BLOCK
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, descale): x (batch, heads, seq_len, head_dim), real floating point, as e4m3 values and the float32
    descale that multiplies them back (x ≈ values.float() · descale). descale's shape: () for "tensor", (batch, heads)
    for "head", (batch, heads, ⌈seq_len / block⌉) for "block" (rows [i·block, (i+1)·block) of a head share one)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dtype == E4M3:
        raise TypeError(f"quantize_fp8 takes a float16/bfloat16/float32/float64 tensor; got "
                        f"{type(x).__name__ if not isinstance(x, torch.Tensor) else x.dtype}")
    if x.dim() != 4:
        raise ValueError(f"quantize_fp8 takes (batch, heads, seq_len, head_dim); got shape {tuple(x.shape)}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}; got {granularity!r}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive int (rows per scale); got {block!r}")
    if not torch.isfinite(x).all():
        raise ValueError("quantize_fp8: x holds inf or NaN, which no e4m3 scale represents")
    xf = x.detach().float()
    if granularity == "tensor":
        amax = xf.abs().amax()
        descale = (amax / E4M3_MAX).clamp_min(_tiny())
        scaled = xf / descale
    elif granularity == "head":
        amax = xf.abs().amax(dim=(2, 3))
        descale = (amax / E4M3_MAX).clamp_min(_tiny())
        scaled = xf / descale[:, :, None, None]
    else:
        descale = _block_amax(xf, block) / E4M3_MAX
        descale = descale.clamp_min(_tiny())
        scaled = xf / _expand_blocks(descale, block, x.shape[2])[..., None]
    values = scaled.clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return values, descale.to(torch.float32)


def _block_amax(x: torch.Tensor, block: int) -> torch.Tensor:
    batch, heads, seq_len, _ = x.shape
    n_blocks = -(-seq_len // block)
    padded = torch.zeros(batch, heads, n_blocks * block, x.shape[3], dtype=x.dtype, device=x.device)
    padded[:, :, :seq_len] = x.abs()
    return padded.view(batch, heads, n_blocks, block * x.shape[3]).amax(-1)


def _expand_blocks(descale: torch.Tensor, block: int, seq_len: int) -> torch.Tensor:
    """(batch, heads, n_blocks) → (batch, heads, seq_len): each row's block's scale."""
    return descale.repeat_interleave(block, dim=2)[:, :, :seq_len]


def dequantize_fp8(values: torch.Tensor, descale: torch.Tensor, block: int = DEFAULT_BLOCK,
                   dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """values · descale in `dtype` (descale of any shape quantize_fp8 returns)."""
    x = values.to(dtype)
    d = descale.to(dtype=dtype, device=x.device)
    if d.dim() == 0:
        return x * d
    if d.dim() == 2:
        return x * d[:, :, None, None]
    return x * _expand_blocks(d, block, x.shape[2])[..., None]


# -- the rotation ----------------------------------------------------------------------------------------------------

def hadamard_matrix(d: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """R = H_d · diag(s) / √d: H_d the Sylvester–Hadamard matrix (d a power of two), s random signs from `seed`.
    R is orthogonal (R Rᵀ = I)."""
    if isinstance(d, bool) or not isinstance(d, int) or d < 1 or d & (d - 1):
        raise ValueError(f"the Hadamard rotation needs head_dim a power of two; got {d!r}")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    gen = torch.Generator().manual_seed(int(seed))
    signs = torch.randint(0, 2, (d,), generator=gen).to(torch.float64) * 2 - 1
    return (h * signs[:, None] / math.sqrt(d)).to(dtype)


def hadamard_rotate(q: torch.Tensor, k: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q·R, K·R) along head_dim with the same seeded random-sign Hadamard R (hadamard_matrix): Q Kᵀ unchanged in
    exact arithmetic, outliers spread over head_dim. Computed in float32 (float64 for float64 inputs), returned in
    the inputs' dtype. V is not rotated: it never meets R, so O = softmax(QKᵀ)V needs no un-rotation."""
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dtype == E4M3:
            raise TypeError(f"hadamard_rotate: {name} must be a float16/bfloat16/float32/float64 tensor (rotate "
                            f"before quantizing); got {t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share head_dim; got {q.shape[-1]} and {k.shape[-1]}")
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    r = hadamard_matrix(q.shape[-1], seed, work).to(q.device)
    return (q.to(work) @ r).to(q.dtype), (k.to(work) @ r).to(k.dtype)


# -- inputs with FA-3's planted outliers ------------------------------------------------------------------------------

PAPER_OUTLIERS = ("+", 10.0)  # the FA-3 paper's Table 3: N(0, 10²) added to 0.1 % of entries (add_outliers)
PLANTED_OUTLIERS = ("×", 10.0, 100.0)  # harsher: 0.1 % of entries ×10–100 (plant_outliers)


def _chosen_entries(x: torch.Tensor, fraction: float, seed: int):
    """(a flat copy of x, the indices of `fraction` of its entries (at least one), the generator that chose them)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1]; got {fraction!r}")
    gen = torch.Generator().manual_seed(int(seed))
    flat = x.detach().reshape(-1).clone()
    count = max(1, round(fraction * flat.numel()))
    return flat, torch.randperm(flat.numel(), generator=gen)[:count].to(flat.device), gen


def plant_outliers(x: torch.Tensor, fraction: float = 1e-3, low: float = 10.0, high: float = 100.0,
                   seed: int = 0) -> torch.Tensor:
    """A copy of x with `fraction` of its entries (at least one) multiplied by a factor uniform in [low, high], chosen
    with `seed`: outliers harsher than the FA-3 paper's (add_outliers), up to ×100 of a normal entry."""
    flat, where, gen = _chosen_entries(x, fraction, seed)
    factor = low + (high - low) * torch.rand(len(where), generator=gen, dtype=torch.float64)
    flat[where] = (flat[where].double() * factor.to(flat.device)).to(flat.dtype)
    return flat.view(x.shape)


def add_outliers(x: torch.Tensor, fraction: float = 1e-3, std: float = 10.0, seed: int = 0) -> torch.Tensor:
    """A copy of x with an independent N(0, std²) added to `fraction` of its entries (at least one), chosen with
    `seed`: the FA-3 paper's numerical-error test (its Table 3: entries N(0, 1) + N(0, 100)·Bernoulli(0.001)) when x
    is N(0, 1)."""
    if not (math.isfinite(std) and std > 0):
        raise ValueError(f"std must be positive and finite; got {std!r}")
    flat, where, gen = _chosen_entries(x, fraction, seed)
    extra = std * torch.randn(len(where), generator=gen, dtype=torch.float64)
    flat[where] = (flat[where].double() + extra.to(flat.device)).to(flat.dtype)
    return flat.view(x.shape)


def with_outliers(xs, spec, seed: int = 0) -> tuple:
    """The tensors xs (Q, K, V) with outliers by `spec` — None: as they are; ("×", low, high): plant_outliers;
    ("+", std): add_outliers — each chosen with seed + its index."""
    if spec is None:
        return tuple(xs)
    if spec[0] == "×":
        return tuple(plant_outliers(t, low=spec[1], high=spec[2], seed=seed + i) for i, t in enumerate(xs))
    if spec[0] == "+":
        return tuple(add_outliers(t, std=spec[1], seed=seed + i) for i, t in enumerate(xs))
    raise ValueError(f"an outlier spec is None, ('×', low, high) or ('+', std); got {spec!r}")


def plant_sink(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gap: float = 4.0, sinks: int = 4,
               v_mean: float = 1.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Copies of q, k, v (batch, heads, seq_len, head_dim) with an attention sink, as trained LLMs have: every query
    shares a component along one direction u (8 × a unit vector), the first `sinks` keys are c·u, with c chosen so
    that their score stands about `gap` (natural-log units) above the largest of the other keys' (the median over a
    head's first 1,024 queries: each row's own gap differs by ~±12 %), and V gets a per-channel mean (`v_mean` × a
    random normal vector; the probability e4m3 loses then shows in O, where against zero-mean random values it would
    average away). seq_len must exceed `sinks`."""
    if not (isinstance(sinks, int) and not isinstance(sinks, bool) and 1 <= sinks < q.shape[2]):
        raise ValueError(f"sinks must be an int from 1 to seq_len − 1 = {q.shape[2] - 1}; got {sinks!r}")
    if not math.isfinite(gap) or not math.isfinite(v_mean):
        raise ValueError(f"gap and v_mean must be finite; got {gap!r}, {v_mean!r}")
    d = q.shape[-1]
    gen = torch.Generator().manual_seed(int(seed))
    u = torch.randn(d, generator=gen, dtype=torch.float64)
    u = u / u.norm()
    mean = v_mean * torch.randn(d, generator=gen, dtype=torch.float64)
    lift = 8.0
    q = (q.double() + lift * u.to(q.device)).to(q.dtype)
    rows = q[:, :, :1024].double()
    others = rows @ k[:, :, sinks:].double().transpose(-1, -2) / math.sqrt(d)
    c = (others.amax(-1).median().item() + gap) * math.sqrt(d) / lift
    k = k.clone()
    k[:, :, :sinks] = (c * u).to(device=k.device, dtype=k.dtype)
    v = (v.double() + mean.to(v.device)).to(v.dtype)
    return q, k, v


# -- error metrics and the CPU emulation ------------------------------------------------------------------------------

def attention_error(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    """{"max": max |out − ref|, "rms": √mean (out − ref)², "rel_rms": rms ÷ √mean ref²} in float64 (ref: the float64
    reference). NaN anywhere in out gives NaN."""
    if out.shape != ref.shape:
        raise ValueError(f"out {tuple(out.shape)} and ref {tuple(ref.shape)} differ in shape")
    diff = out.detach().to(ref.device, torch.float64) - ref.to(torch.float64)
    rms = diff.pow(2).mean().sqrt().item()
    return {"max": diff.abs().max().item(), "rms": rms, "rel_rms": rms / ref.double().pow(2).mean().sqrt().item()}


# P made 2^P_OFFSET larger before its e4m3 cast at every (head_dim, causal) (Fa3Config.p_offset): under an attention
# sink P ≤ 1 flushes most of a row's probabilities to zero. Timed on the H200 (2026-12-05, kernel alone ÷ P ≤ 1, one
# run): 0.993× and 0.990× at head_dim 128 (8K, 16K), causal 1.004×, 1.000×; 64 0.988×, 0.992×, causal 0.992×,
# 0.991×; 256 0.993×, causal 1.065×. (2^8, FA-3's: 0.90–0.99× on an H100, for the same error: the rescale threshold
# 8 − 8 = 0 rescales O in most tiles.)
P_OFFSET = 4


def emulate_fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                          sm_scale: float | None = None, granularity: str = "head", rotate: bool = False,
                          seed: int = 0, block: int = DEFAULT_BLOCK, quantize_p: bool = True,
                          p_offset: int = P_OFFSET, pv_sum=None) -> torch.Tensor:
    """O of FP8 attention as the kernel computes it, in float64 on the CPU: (rotate Q and K,) quantize Q, K, V to
    e4m3 with `granularity`, S = (Q·Kᵀ)·descales in float64, P = 2^p_offset · exp(S − row max) rounded to e4m3 (≤
    2^p_offset, as the kernel's P whenever a row's max is its final one; Fa3Config.p_offset), l summed from the
    unrounded P, O = P·V·descale_v / l. q, k, v: real (batch, heads, seq_len, head_dim) of any float dtype, not yet
    quantized. P·V is summed exactly unless pv_sum (P, V's e4m3 values → P·V, float64; V's descale applied after, as
    the kernel does: per-tensor or per-head scales only) says otherwise: the 8-bit wgmma keeps ~13 bits below the
    largest term of its sum (perf/local/fp8_accumulation.py's wgmma_sum models it; Fa3Config.pv_promote)."""
    if pv_sum is not None and granularity not in ("tensor", "head"):
        raise ValueError(f"pv_sum sums as the kernel does, which takes per-tensor or per-head scales; got "
                         f"granularity {granularity!r}")
    if isinstance(p_offset, bool) or not isinstance(p_offset, int) or not 0 <= p_offset <= 8:
        raise ValueError(f"p_offset is an int from 0 to 8; got {p_offset!r}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    q, k, v = (t.detach().cpu() for t in (q, k, v))
    if rotate:
        q, k = hadamard_rotate(q.double(), k.double(), seed)
    (q8, dq), (k8, dk), (v8, dv) = (quantize_fp8(t, granularity, block) for t in (q, k, v))
    qd, kd, vd = (dequantize_fp8(t, d, block) for t, d in ((q8, dq), (k8, dk), (v8, dv)))
    s = qd @ kd.transpose(-1, -2) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True)) * float(2 ** p_offset)
    l = p.sum(-1, keepdim=True)
    if quantize_p:
        p = p.to(E4M3).double()
    if pv_sum is None:
        return (p @ vd) / l
    return dequantize_fp8(pv_sum(p, v8.double()), dv) / l


# -- the kernel -------------------------------------------------------------------------------------------------------

def fp8_unavailable_reason(device=None, head_dim: int | None = None) -> str | None:
    """None when the FP8 kernel can run here (at `head_dim` when given), else one sentence saying why not."""
    from kernels.fa3 import v3_unavailable_reason
    why = v3_unavailable_reason(device, None, head_dim)
    return None if why is None else f"FP8 attention runs only in the FA-3 style kernel (Hopper's e4m3 wgmma): {why}"


def _fp8_overrides() -> dict:
    """(head_dim, causal) → the configuration e4m3 runs where the 16-bit one does not suit it. Head_dim 64: the 16-bit
    kernel's three consumers at 160 registers spill in e4m3 (207 stores to local memory in the sm_90 SASS: P's
    conversion to the 8-bit operand layout needs more registers), two at 240 do not. Not yet measured on the H200."""
    from kernels.fa3 import Fa3Config
    d64 = Fa3Config(64, 128, 2, 4, 240, 24, q_in_regs=True, named_turns=True, kv_paired=True, lazy_rescale=True)
    return {(64, False): d64, (64, True): d64}


P_IN_PLACE_HEAD_DIMS = (64, 128, 256)  # where e4m3 hands P to P·V in place (measured 1.03-1.10× the kernel without)
# e4m3 keeps P in fp32 across rounds and casts it at its wgmma (Fa3Config.p_late_cast) wherever P goes in place, as
# timed against the cast where P is made (non-causal on the H200, 2026-12-04: 1.10-1.21×; causal on an H100, 2026-12-05:
# 1.21× at head_dim 128, 1.27-1.30× at 64, 1.14× at 256). At P_LATE_CAST_SPILLS the sm_90 build keeps 24 bytes of
# stack with Q in registers (head_dim 128 causal; triton 3.6.0 and 3.7.1), so there Q is read from shared memory.
P_LATE_CAST_SPILLS = frozenset({(128, True)})
# 1 of every k of P's exponentials on the FMA units (Fa3Config.exp_fma), where it was timed faster (H100, 2026-12-05,
# kernel alone ÷ the late cast without it, 8K and 16K): head_dim 64 1.036×, 1.038×; 64 causal 1.017×, 1.027×.
EXP_FMA = {(64, False): 8, (64, True): 8}
# P handed to P·V through a shared-memory tile (Fa3Config.p_smem) instead of carried in registers, and the 256-key
# tiles the registers it frees make room for (with 128 they spilled 592 bytes), where it was timed faster (an H100,
# 2026-12-05 17:04, kernel alone ÷ the late cast's 128-key kernel, 8K and 16K): head_dim 128 1.066×, 1.069×; 128
# causal (2 K/V slots: 3 would need 278,872 bytes of shared memory) 1.021×, 1.034× with Q from shared memory (with Q
# in registers 1.034×, 1.047×, but the second consumer's loop then spills two words a round: 8 bytes); 64 1.026×,
# 1.044×; 64 causal 1.106×, 1.159×. At 256 the 128-key tile alone would need 246,072 bytes (a block may have 232,448):
# there O is staged for its store in the ring's K slots (Fa3Config.o_in_ring; 180,520 bytes), timed on the H200
# (2026-12-05 19:03, kernel alone ÷ the late cast's 64-key kernel, 8K): 1.090× with the overlap off, 1.131× on;
# causal 1.043× (overlap off). At 128 non-causal, three consumers of 64 rows at 160 registers with 128-key tiles and
# four K/V slots (P through shared memory is what lets them build without stack; Q read from shared memory), timed
# ÷ the 256-key pair (kernel alone, 8K and 16K): H200 19:03 1.004×, 1.037× (three slots); H100 19:12 1.052×, 1.049×
# (three slots 1.054×, 1.041×); causal 1.015×, 0.972× (H200), 1.012×, 1.006× (H100): the pair stays there.
THREE_CONSUMERS = {"num_consumers": 3, "consumer_regs": 160, "producer_regs": 32, "block_n": 128, "q_in_regs": False}
P_SMEM_TILES = {(128, False): {**THREE_CONSUMERS, "kv_stages": 4},
                (128, True): {"block_n": 256, "kv_stages": 2, "q_in_regs": False},
                (64, False): {"block_n": 256}, (64, True): {"block_n": 256},
                (256, False): {"block_n": 128, "o_in_ring": True}, (256, True): {"block_n": 128, "o_in_ring": True}}
# The in-warpgroup overlap off (the ping-pong alone hides the softmax) where it was timed faster than on (an H100,
# 2026-12-05 17:18, kernel alone, 8K and 16K): head_dim 64 1.062×, 1.065×; 256 1.076× (8K), causal 1.026×; at 128
# level (on ÷ off 0.999×, 1.005×; 1.019×, 1.016× off ÷ on in the run before), 128 causal 0.968×, 0.981×, 64 causal
# 0.997×, 1.017×: on there. At 256 with 128-key tiles and O in the ring: on ÷ off 1.038× (H200, 19:03, 8K), causal
# 1.039× (H100, 19:12): on.
NO_OVERLAP = frozenset({(128, False), (64, False)})
# The tail split (Fa3Config.tail_split, as 16-bit ships it) where tail_plan splits something: at head_dim 128 not
# causal, timed against the same config without it (an H100, 2026-12-06 03:51, kernel alone, 3 rounds): 1.015× at
# B2 H16 8K; at 16K the plan splits nothing (112 tiles past 20 whole waves), so the 2-D grid runs.
# With the overlap on too: 0.991×, 0.963× (left out). Not with precise_pv (its other tiles: not built with it).
TAIL_SPLIT = frozenset({(128, False)})


# Each tile's P·V summed into a fresh accumulator and added to O in fp32 (Fa3Config.pv_promote): the 8-bit wgmma keeps
# ~13 bits below the largest term of its sum, so under a sink, once O holds the sink's share, later tiles lose their
# small contributions. PV_PROMOTE_FITS: where it compiles without stack, and what it changes besides (at 128 the
# second accumulator beside 256-key scores spills, 352–472 bytes: 128-key tiles, P still through shared memory; at
# 256 O alone is 128 registers and it spills either way). PV_PROMOTED: where it ships, as it cost ≤ 3 % there (H200,
# 2026-12-05: 0.985×, 0.987× at head_dim 64 with 128-key tiles and P in registers; at 128 it cost 0.84× and 0.79×
# causal with P cast where it is made, and with 128-key tiles through shared memory 0.89× and 0.90–0.95× causal
# against the shipped 256-key kernel (H100, 17:12), so there it is fp8_attention(precise_pv=True)).
PV_PROMOTE_FITS = {(64, False): {}, (64, True): {},
                   (128, False): {"num_consumers": 2, "consumer_regs": 240, "producer_regs": 24, "block_n": 128,
                                  "kv_stages": 2, "q_in_regs": True, "overlap": True},
                   (128, True): {"block_n": 128, "kv_stages": 3, "q_in_regs": True}}
PV_PROMOTED = frozenset({(64, False)})


def config_for_fp8(head_dim: int, causal: bool, precise_pv: bool | None = None, seq_len: int | None = None,
                   batch_heads: int | None = None, sms: int | None = None):
    """The kernel configuration 8-bit inputs run: an override (_fp8_overrides) or else the shipped 16-bit one of
    this (head_dim, causal) (a new head_dim's 16-bit row serves e4m3 too); at P_IN_PLACE_HEAD_DIMS with P handed to
    P·V where the scores left it (Fa3Config.p_in_place: no shuffles; V's keys permuted on the host to match), and
    there also with P cast to e4m3 at its wgmma, not where it is made (Fa3Config.p_late_cast) or, at P_SMEM_TILES,
    handed over in shared memory with the tiles and consumers that makes room for (Fa3Config.p_smem), and at
    EXP_FMA with some exponentials on the FMA units. Measured on the H200 (BENCHMARKS.md, FP8; kernel alone,
    non-causal): P in place against P shuffled 1.035× (8K) and 1.052× (16K) at head_dim 128, 1.100× and 1.089× at 64, 1.043× at 256
    (8K); then the late cast against the cast where P is made 1.160× and 1.118× at 128, 1.202× and 1.211× at 64,
    1.105× at 256 (causal, on an H100: 1.21×, 1.27–1.30×, 1.14×). P is made 2^P_OFFSET larger before its cast
    everywhere, and P·V promoted to fp32 per tile at PV_PROMOTED; precise_pv True or False asks for that promotion
    or not (a ValueError where it does not fit: head_dim 256). At TAIL_SPLIT the tail split, and given the shape
    (seq_len, batch × heads, the GPU's SMs) only where tail_plan splits something (fa3.tail_split_where_it_splits)."""
    import dataclasses
    from kernels.fa3 import HOPPER_SMS, config_for_v3, tail_split_where_it_splits
    config = _fp8_overrides().get((head_dim, causal)) or config_for_v3(head_dim, causal)
    in_place = head_dim in P_IN_PLACE_HEAD_DIMS
    smem = P_SMEM_TILES.get((head_dim, causal))
    late = in_place and smem is None
    changes = dict(p_in_place=in_place, p_late_cast=late, p_smem=smem is not None,
                   exp_fma=EXP_FMA.get((head_dim, causal), 0),
                   q_in_regs=config.q_in_regs and not (late and (head_dim, causal) in P_LATE_CAST_SPILLS),
                   overlap=config.overlap and (head_dim, causal) not in NO_OVERLAP, p_offset=P_OFFSET,
                   tail_split=(head_dim, causal) in TAIL_SPLIT)
    config = dataclasses.replace(config, **{**changes, **(smem or {})})  # P_SMEM_TILES' values over the defaults
    promote = (head_dim, causal) in PV_PROMOTED if precise_pv is None else precise_pv
    if not isinstance(promote, bool):
        raise TypeError(f"precise_pv is None, True or False; got {precise_pv!r}")
    if promote:
        if (head_dim, causal) not in PV_PROMOTE_FITS:
            raise ValueError(f"precise_pv=True: P·V promoted to fp32 per tile does not fit the e4m3 kernel's registers "
                             f"at head_dim {head_dim} (it runs at {sorted({d for d, _ in PV_PROMOTE_FITS})})")
        config = dataclasses.replace(config, pv_promote=True, tail_split=False, **PV_PROMOTE_FITS[(head_dim, causal)])
    if seq_len is None or batch_heads is None:
        return config
    return tail_split_where_it_splits(config, seq_len, batch_heads, HOPPER_SMS if sms is None else sms)


def _descale_rows(name: str, d, batch: int, heads: int, device) -> torch.Tensor:
    """A descale argument (None: 1; a number or 0-d tensor; (batch, heads)) as float32 (batch·heads,). Numbers and
    CPU tensors are checked to be positive and finite; tensors on the GPU are not (that would sync every call)."""
    if d is None:
        return torch.ones(batch * heads, dtype=torch.float32, device=device)
    if isinstance(d, bool) or not isinstance(d, (int, float, torch.Tensor)):
        raise TypeError(f"{name} must be a number, a 0-d tensor or a (batch, heads) float32 tensor; got "
                        f"{type(d).__name__}")
    t = torch.as_tensor(d, dtype=torch.float32) if not isinstance(d, torch.Tensor) else d
    if t.dim() == 3:
        raise ValueError(f"{name} has per-block scales {tuple(t.shape)}: the kernel takes per-tensor or per-head "
                         f"descales (quantize_fp8(..., granularity='tensor' or 'head'))")
    if t.shape not in ((), (batch, heads)):
        raise ValueError(f"{name} must be a scalar or of shape (batch, heads) = ({batch}, {heads}); got "
                         f"{tuple(t.shape)}")
    if t.device.type == "cpu" and (not bool(torch.isfinite(t).all()) or not bool((t > 0).all())):
        raise ValueError(f"{name} must be positive and finite")  # (scales held on the GPU are not read on the
        # host: no sync per call; a bad one gives a wrong O, as flash-attn's does)
    t = t.to(device=device, dtype=torch.float32)
    return t.expand(batch, heads).reshape(batch * heads)


def fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  sm_scale: float | None = None, return_lse: bool = False, descale_q=None, descale_k=None,
                  descale_v=None, config=None,
                  precise_pv: bool | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """O = softmax(sm_scale · (dq·Q)(dk·K)ᵀ [causal]) (dv·V) from e4m3 q, k, v (batch, heads, seq_len, head_dim) on a
    Hopper GPU, in bf16; descales default to 1. With return_lse=True also the float32 row log-sum-exp.
    precise_pv: None (the shipped setting), True or False: each tile's P·V summed in a fresh accumulator and added to
    O in fp32 (config_for_fp8). Under an attention sink it lowers the error ~5–7× (H200, 2026-12-05, 4K tokens: 0.080
    → 0.0148 at head_dim 128) for 0.89× the speed at 128 (0.90–0.95× causal; an H100, 2026-12-05 17:12, against the
    shipped 256-key kernel); at 64 non-causal it ships on."""
    from kernels.fa3 import SUPPORTED_HEAD_DIMS, launch_v3
    from kernels.inputs import check_attention_inputs
    from kernels.runtime import sm_count
    q, k, v, sm_scale = check_attention_inputs(q, k, v, causal, sm_scale, fp8=True)
    batch, heads, _, head_dim = q.shape
    descale = torch.stack([_descale_rows(name, d, batch, heads, q.device)
                           for name, d in (("descale_q", descale_q), ("descale_k", descale_k),
                                           ("descale_v", descale_v))])
    if config is not None and precise_pv is not None:
        raise ValueError("fp8_attention takes a config or precise_pv, not both (precise_pv picks the config)")
    if config is None and head_dim in SUPPORTED_HEAD_DIMS:  # a bad precise_pv is said here, on any machine; the tail
        # split only where this shape's plan splits something (off CUDA one SM: nothing)
        config = config_for_fp8(head_dim, causal, precise_pv, q.shape[2], batch * heads, sm_count(q.device))
    why = fp8_unavailable_reason(q.device, head_dim)
    if why is not None:
        raise (ValueError if head_dim not in SUPPORTED_HEAD_DIMS else RuntimeError)(why)
    o, lse = launch_v3(q, k, v, causal, sm_scale, config, descale=descale)
    return (o, lse) if return_lse else o


def fp8_candidates() -> dict:
    """name → (head_dim, causal, Fa3Config): e4m3 configurations perf/h200/fp8_speed.py times beside the shipped one
    (config_for_fp8) at the shapes of their (head_dim, causal), each checked against float64 first. Tried and left
    out, as they spill in the sm_90 build (triton 3.7.1) with P carried in registers: 256-key tiles at head_dim 128
    (592 bytes of stack) and 64 (616), three consumers of 64 rows at 160 registers at 128 (288), 128-key tiles at 256
    (192–320 bytes) — P through shared memory (p_smem) is what lets them build now; three K/V slots at 128 with the
    late cast (8 bytes). Tried and left out on the H200: four K/V slots
    with P in place at head_dim 128 (0.99-1.03×); on an H100 (2026-12-05, kernel alone ÷ shipped): 1 in 16
    exponentials on the FMA units at 128 (0.997×, 1.004×), 1 in 4 at 64 (0.937×, 0.961×), 1 in 8 at 256 (0.976×), and
    1 in 8 at 128 (timed twice: 1.016×, 1.007×, then 0.995×, 0.988×; causal 1.006×, 0.983×). Predictions and
    outcomes in BENCHMARKS.md.

    Shipped from earlier candidates (each timed here first; BENCHMARKS.md §1c has the runs): P ×2^4 (P_OFFSET), P·V
    promoted at head_dim 64 (PV_PROMOTED), 256-key tiles with P through shared memory (P_SMEM_TILES), the in-warpgroup
    overlap off (NO_OVERLAP), 128-key tiles with O staged in the ring at 256 (Fa3Config.o_in_ring) and three
    consumers at 128 (THREE_CONSUMERS). Also left out (kernel alone ÷ the shipped kernel): 1 in 8 exponentials on the
    FMA units at 128 (H100: 0.996×, 0.975×; causal 0.925×, 0.912×); P·V promoted at 64 causal (H100: 0.930×, 0.935×);
    three consumers at 64 (H200: 0.974×, 0.992×); each row's max as a tree of FMNMX instead of gl.max's chain (H200:
    0.93–0.99× at every head_dim; taken out of the kernel).

    Timed and left out (H100, 2026-12-05 22:18, kernel alone ÷ shipped, 8K and 16K): three K/V slots at 128 (1.006×,
    0.996×). Then (BENCHMARKS.md §1c Phase 13; an H100, 2026-12-06 03:51, 3 rounds): the tail split at 128 shipped
    (TAIL_SPLIT: 1.015× at 8K, where it splits); the overlap on at 128 left out (1.003×, 1.004×; 1.018×, 1.001× the run
    before), and with the tail split too (0.991×, 0.963×). No candidate is open now: fp8_speed times the shipped kernels.
    """
    return {}
