"""Why P made larger before its e4m3 cast helps the FP8 kernel less than the CPU emulation says, in a model (no GPU).

    python -m perf.local.fp8_accumulation [--seq-len 1024] [--bits 13]

kernels.fp8.emulate_fp8_attention sums P·V exactly (float64). Hopper's 8-bit wgmma does not: it adds each k-step's
32 products into its fp32 accumulator after aligning them to the largest term, keeping about 13–14 bits below it
(DeepSeek-V3's report measured ~14 on the H800; FA-3 and Triton's Hopper default leave it so). Under an attention
sink O holds the sink's large share from the first tile on, so the many small contributions of later tiles lose
their low bits — and making P 2^4 larger (Fa3Config.p_offset) does not change that ratio. This script sums P·V the
model's way (`wgmma_sum`, given to kernels.fp8.emulate_fp8_attention as its pv_sum), with and without promotion
(each tile's P·V into a fresh accumulator, added in float64: Fa3Config.pv_promote), on kernels.fp8.plant_sink's
inputs, and prints the relative RMS error of O against float64.
A model, not the hardware: what it predicts is checked on the GPU by
tests/test_fp8.py::test_fp8_kernel_under_a_sink_with_p_made_larger_and_p_v_promoted.
"""
from __future__ import annotations

import argparse
import functools

import torch

from kernels.fp8 import attention_error, emulate_fp8_attention, plant_sink
from kernels.reference import reference_attention

K_STEP = 32   # wgmma's K for 8-bit operands
TILE = 128    # keys per K/V tile at head_dim 64 and 128 (the shipped e4m3 configurations)


def _truncate(x: torch.Tensor, ulp: torch.Tensor) -> torch.Tensor:
    return torch.trunc(x / ulp) * ulp


def wgmma_sum(p: torch.Tensor, v: torch.Tensor, bits: int, promote: bool = False) -> torch.Tensor:
    """P·V (float64 (..., M, N) @ (..., N, D)) summed as the model of the 8-bit wgmma: per k-step of 32 keys, the
    accumulator and the 32 products truncated to `bits` bits below the largest of them, then added. promote: each
    tile of TILE keys into a fresh accumulator, added to O exactly."""
    out = torch.zeros(*p.shape[:-1], v.shape[-1], dtype=torch.float64)
    acc = torch.zeros_like(out)
    for k0 in range(0, p.shape[-1], K_STEP):
        if promote and k0 % TILE == 0:
            out, acc = out + acc, torch.zeros_like(acc)
        prod = p[..., k0:k0 + K_STEP].unsqueeze(-1) * v[..., k0:k0 + K_STEP, :].unsqueeze(-3)  # (..., M, 32, D)
        top = torch.maximum(prod.abs().amax(-2), acc.abs()).clamp_min(1e-300)
        ulp = torch.pow(2.0, torch.floor(torch.log2(top)) - bits)
        acc = _truncate(acc, ulp) + _truncate(prod, ulp.unsqueeze(-2)).sum(-2)
    return out + acc


def sink_errors(seq_len: int, head_dim: int, causal: bool, bits: int, gap: float = 4.0) -> dict[str, float]:
    """Relative RMS error of O against float64 under a sink: kernels.fp8.emulate_fp8_attention (e4m3 Q, K, V with
    per-head scales, and P) with P·V summed exactly, the model's way, and the model's way promoted per tile; P ≤ 1 and
    P ×2^4 (the kernel's)."""
    gen = [torch.Generator().manual_seed(s) for s in (70, 71, 72)]
    q, k, v = plant_sink(*(torch.randn(1, 2, seq_len, head_dim, generator=g) for g in gen), gap=gap)
    ref = reference_attention(q.double(), k.double(), v.double(), causal)[0]
    sums = {"exact": None, "wgmma": functools.partial(wgmma_sum, bits=bits),
            "wgmma, promoted": functools.partial(wgmma_sum, bits=bits, promote=True)}
    return {f"P ×2^{offset}, {name}": attention_error(
                emulate_fp8_attention(q, k, v, causal, p_offset=offset, pv_sum=pv_sum), ref)["rel_rms"]
            for offset in (0, 4) for name, pv_sum in sums.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--bits", type=int, default=13, help="bits the model keeps below the largest term")
    args = ap.parse_args(argv)
    for head_dim, causal in ((128, False), (128, True), (64, False)):
        errs = sink_errors(args.seq_len, head_dim, causal, args.bits)
        print(f"D{head_dim}{' causal' if causal else ''}, sink gap 4, N {args.seq_len}, {args.bits} bits: "
              + "  ".join(f"{k} {v:.4f}" for k, v in errs.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
