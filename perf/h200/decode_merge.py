"""The decode kernel's merge at batch 1, where it sets the last few per cent (issue 39: B1 H32/8 128K at 0.96×
cuDNN): the shipped call (the wave rule's splits rounded down to the merge's load width: 32 at B1 H32/8), the shipped
configuration at the wave rule's own count (33 there: two merge loads), each of kernels.decode.CANDIDATES at the count
the call chooses with it (choose_num_splits on its merge width), and SDPA's default (cuDNN), interleaved rounds, on
one GPU.

    PYTHONUNBUFFERED=1 python3 -m perf.h200.decode_merge [--rounds 5] [--json PATH]
    SMOKE=1 python3 -m perf.h200.decode_merge       (no GPU: toy sizes in the interpreter; checks the script only)

1. Correctness: every candidate against float64 (perf.h200.decode_speed's check_case: O per sequence, the LSE to
   1e-3) at ragged lengths, q_len 1 and 4, GQA 4 and 8, contiguous and paged, 33 splits and 70 (more than one load of
   64) and the rule's own count. A WRONG answer: nothing is timed (exit 2).
2. The copy roof (decode_speed's copy_bandwidth) and, per shape (B1 H32/8 at 128K, 256K, 1M; B1 H32/32 128K), in
   each round in a rotated order: the shipped call, the shipped config at the wave rule's splits (where the call
   rounds them), each candidate at its own call's splits, SDPA's default. do_bench medians (L2 flushed), the median over rounds.
Prints per shape µs and % of the copy roof, cuDNN ÷ each (goal ≥ 1.0) and each ÷ shipped.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from perf.h200 import decode_speed as ds  # first: it picks the backend (the interpreter without a GPU)
import torch
import triton

import costmodel
from kernels import decode
from kernels.decode import decode_attention

K = ds.K
SHAPES = [(1, 32, 8, 128 * K), (1, 32, 8, 256 * K), (1, 32, 8, 1024 * K), (1, 32, 32, 128 * K)]
CHECKS = [  # decode_speed's case layout: (batch, heads_q, heads_kv, q_len, lengths, page_size, dtype, causal, splits)
    (3, 32, 8, 1, [9000, 1, 4097], 0, torch.bfloat16, True, 33),
    (2, 32, 8, 4, [20000, 777], 0, torch.bfloat16, True, 70),
    (2, 32, 4, 1, [5000, 64], 64, torch.bfloat16, False, 33),
    (1, 32, 8, 1, [70000], 0, torch.bfloat16, True, None),
]
REP_MS = 25
if ds.SMOKE:
    SHAPES = [(1, 4, 2, 300)]
    CHECKS = [(2, 4, 2, 1, [70, 1], 0, torch.bfloat16, True, 3), (2, 4, 1, 4, [90, 20], 16, torch.float16, True, 5)]


def wave_rule_splits(inputs, shipped) -> int:
    """The split count of the wave rule alone (costmodel.decode_num_splits: before choose_num_splits rounds it to the
    merge's load width)."""
    from kernels.runtime import sm_count
    return costmodel.decode_num_splits(shipped.batch * shipped.heads_kv * shipped.row_blocks,
                                       triton.cdiv(shipped.max_len, shipped.config.block_n),
                                       sm_count(inputs[0].device) * shipped.config.programs_per_sm)


def variants(inputs) -> dict:
    """name → a call: the shipped call, the shipped config at the wave rule's own splits where the call rounds them
    to the merge's load width, each candidate at the splits the call chooses with it, SDPA's default."""
    q, k, v, seqlens = inputs
    shipped = ds.plan_of(inputs, None)
    calls = {"shipped": lambda: decode_attention(q, k, v, seqlens)}
    wave = wave_rule_splits(inputs, shipped)
    if wave != shipped.splits:  # the wave rule's 33 at B1 H32/8, where the call takes one merge load's 32
        calls[f"the wave rule's {wave} splits"] = lambda: decode_attention(q, k, v, seqlens, num_splits=wave)
    for name, config in decode.CANDIDATES.items():
        calls[name] = (lambda c=config: decode_attention(q, k, v, seqlens, config=c))
    calls["SDPA default (cuDNN)"] = ds.sdpa(q, k, v, None)
    return calls


def section_check(run: ds.Run) -> bool:
    right = True
    for name, config in decode.CANDIDATES.items():
        for case in CHECKS:
            what = f"{name}: B{case[0]} H{case[1]}/{case[2]} q{case[3]} L{case[4]} page{case[5]} splits={case[8]}"
            try:
                err = ds.check_case(case, config)
                ok = err < ds.TOLERANCE[case[6]]
            except Exception as exc:  # noqa: BLE001 - a failing candidate is reported, not timed
                run.failed(what, exc)
                err, ok = float("nan"), False
            run.say(f"check {what}: max rel error {err:.2e} {'ok' if ok else 'WRONG'}")
            right = right and ok
    ds._references.clear()
    return right


def section_time(run: ds.Run, rounds: int, copy_gbps: float | None) -> list[dict]:
    rows = []
    for shape in SHAPES:
        b, hq, hkv, n = shape
        inputs = ds.make_inputs(b, hq, hkv, n)
        calls = variants(inputs)
        times: dict[str, list[float]] = {}
        us = ds.time_rounds(calls, rounds, REP_MS, times)
        nbytes = ds.cache_bytes(b, hkv, n)
        row = {"shape": shape, "splits": ds.splits_of(inputs, None), "us": us, "rounds": times}
        rows.append(row)
        cudnn = us["SDPA default (cuDNN)"]
        for name, t in us.items():
            pct = f"{100 * nbytes / t / 1e3 / copy_gbps:5.1f} % of copy" if copy_gbps else ""
            run.say(f"{ds.label(shape)} {name:34s} {t:8.1f} µs {pct}  cuDNN ÷ it {cudnn / t:6.3f}  "
                    f"÷ shipped {us['shipped'] / t:6.3f}")
        del inputs, calls
        ds.free()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    run = ds.Run()
    run.say(f"torch {torch.__version__}, {ds.backend()} ({ds.backend_reason()}); "
            f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}; candidates: "
            + "; ".join(f"{name} = {asdict(c)}" for name, c in decode.CANDIDATES.items()))
    if not section_check(run):
        run.say("WRONG answers above: nothing is timed")
        return 2
    copy_gbps = ds.copy_bandwidth(run)
    rows = section_time(run, args.rounds, copy_gbps)
    if args.json:
        args.json.write_text(json.dumps({"copy_gbps": copy_gbps, "rows": rows}, indent=1, default=str))
    run.say(f"done in {run.elapsed():.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
