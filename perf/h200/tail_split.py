"""The tail split (kernels.fa3.Fa3Config.tail_split) against the same config without it, on the H200 (or any Hopper
GPU), at non-causal shapes where `tail_plan` splits something: bf16 at head_dim 64 (8K: one short wave), 128 (8K:
parts over three short waves; 16K, 32K: one), 256 (B2 H8 16K: over four) and e4m3 at 128 (8K), plus shapes where
nothing is split (level expected: the shipped rule runs the unsplit config there, config_for_v3 / config_for_fp8).

    PYTHONUNBUFFERED=1 python -m perf.h200.tail_split [--rounds 5] [--json PATH] [--dtype bf16|e4m3]

1. Checks: each shape's split output against the unsplit one on the same inputs: rows of the whole waves bit for
   bit, the split rows within bf16's rounding (the merge of bf16 parts; e4m3: within its own), the LSE within fp32's.
2. Timing: the launch alone (launch_v3: kernel, and the merge where something is split; e4m3 with Vᵀ made once
   beforehand, as fp8_speed times the kernel), interleaved rounds (order alternated), do_bench medians with L2
   flushed, the median over rounds; TFLOPS = 4·B·H·N²·D / t. The table: both, and split ÷ unsplit.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path

import torch

# (dtype, batch, heads, seq_len, head_dim)
SHAPES = (("bf16", 2, 16, 8192, 64), ("bf16", 2, 16, 16384, 64), ("bf16", 2, 16, 8192, 128),
          ("bf16", 1, 32, 8192, 128), ("bf16", 2, 16, 16384, 128), ("bf16", 2, 16, 32768, 128),
          ("bf16", 2, 8, 16384, 256), ("bf16", 2, 8, 8192, 256), ("e4m3", 2, 16, 8192, 128),
          ("e4m3", 2, 16, 16384, 128))


def _setup(dtype: str, b: int, h: int, n: int, d: int):
    """(launch(config) -> (O, LSE), the unsplit config) for one shape, on fixed random inputs."""
    from kernels.fa3 import SHIPPED, launch_v3, v_transposed
    from kernels.fp8 import config_for_fp8, quantize_fp8
    gen = torch.Generator(device="cuda").manual_seed(n + d)
    x = [torch.randn(b, h, n, d, generator=gen, device="cuda") for _ in range(3)]
    if dtype == "bf16":
        q, k, v = (t.bfloat16() for t in x)
        return (lambda config: launch_v3(q, k, v, False, d ** -0.5, config)), SHIPPED[(d, False)]
    config = config_for_fp8(d, False)
    (q, dq), (k, dk), (v, dv) = (quantize_fp8(t, "head") for t in x)
    descale = torch.stack([s.reshape(-1).float() for s in (dq, dk, dv)]).contiguous()
    vt = v_transposed(v, config.block_n if config.p_in_place else None)
    return (lambda c: launch_v3(q, k, vt, False, d ** -0.5, c, descale=descale, v_is_transposed=True)), config


def check(launch, base, split, b, h, n, dtype: str = "bf16") -> dict:
    """The split launch against the unsplit one on the same inputs: the rows of the whole waves bit for bit; the split
    rows within bf16's rounding in 16-bit (a merge of bf16 parts), within e4m3's in 8-bit (each part quantizes its P
    against its own running max: up to 0.0033 apart at 8K on the H200, 2026-12-06; the tests hold them to float64)."""
    from kernels.fa3 import tail_plan
    o0, l0 = launch(base)
    o1, l1 = launch(split)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n_tiles = -(-n // base.tile_m)
    main, splits, per = tail_plan(n_tiles * b * h, -(-n // base.block_n), sms)
    tile_of_row = (torch.arange(b * h, device="cuda")[:, None] * n_tiles
                   + torch.arange(n, device="cuda")[None, :] // base.tile_m).reshape(b, h, n)
    tail = tile_of_row >= main if splits > 1 else torch.zeros_like(tile_of_row, dtype=torch.bool)
    same = bool(torch.equal(o0[~tail], o1[~tail]) and torch.equal(l0[~tail], l1[~tail]))
    d_o = (o1[tail].float() - o0[tail].float()).abs().max().item() if tail.any() else 0.0
    d_l = (l1[tail] - l0[tail]).abs().max().item() if tail.any() else 0.0
    rel, floor, lse_tol = (2 ** -7, 2e-3, 1e-4) if dtype == "bf16" else (2 ** -4, 1e-2, 1e-3)
    ok = same and d_o <= floor + rel * o0.float().abs().max().item() and d_l <= lse_tol
    return {"plan": [main, splits, per], "whole_waves_bit_equal": same, "split_rows_max_abs_dO": d_o,
            "split_rows_max_abs_dLSE": d_l, "ok": ok}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--dtype", choices=("bf16", "e4m3"), default=None, help="only this dtype's shapes")
    return _run(parser.parse_args(argv), SHAPES)


def _run(args, shapes) -> int:
    import triton
    import triton.testing
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    rows, failed = [], 0
    for dtype, b, h, n, d in shapes:
        if args.dtype and dtype != args.dtype:
            continue
        launch, base = _setup(dtype, b, h, n, d)
        split, base = dataclasses.replace(base, tail_split=True), dataclasses.replace(base, tail_split=False)
        row = {"dtype": dtype, "shape": [b, h, n, d], "config": base.label, **check(launch, base, split, b, h, n, dtype)}
        if not row["ok"]:
            failed += 1
            print(f"WRONG {row}", flush=True)
            continue
        times = {"unsplit": [], "split": []}
        for r in range(args.rounds):
            order = ("unsplit", "split") if r % 2 == 0 else ("split", "unsplit")
            for name in order:
                config = base if name == "unsplit" else split
                times[name].append(triton.testing.do_bench(lambda: launch(config), warmup=25, rep=200,
                                                           return_mode="median"))
        ms = {k: statistics.median(v) for k, v in times.items()}
        flops = 4 * b * h * n * n * d
        row.update({f"{k}_ms": v for k, v in ms.items()}, ratio=ms["unsplit"] / ms["split"])
        rows.append(row)
        print(f"{dtype} B{b} H{h} N{n} D{d} plan (main, splits, key tiles a part) {tuple(row['plan'])}: unsplit "
              f"{flops / ms['unsplit'] / 1e9:.1f} TFLOPS, split {flops / ms['split'] / 1e9:.1f}, split ÷ unsplit "
              f"{row['ratio']:.3f} (max |dO| of the split rows {row['split_rows_max_abs_dO']:.1e})", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
