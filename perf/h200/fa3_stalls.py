"""Where a kernel's warps wait, instruction by instruction: Nsight Compute's warp-state samples of one launch.

    PYTHONUNBUFFERED=1 python3 -m perf.h200.fa3_stalls [--causal] [--head-dim 128]   # on the H200, under $OUT
    PYTHONUNBUFFERED=1 python3 -m perf.h200.fa3_stalls --kernel dkdv --head-dim 64 [--regs]

Runs `ncu` (SourceCounters + WarpStateStats + the pipes', memory's and launch's sections, clocks left alone) on this
module in --target mode, which launches the kernel at B=2 H=16 N=8K (bf16) twice and marks the second: the shipped
FA-3 forward (`--kernel fa3`), or the teaching backward's dK/dV or dQ kernel (`--kernel dkdv|dq`) on its shipped TMA
tiles, with `--regs` on those tiles with both passes' loop-invariant operands in registers (BackwardConfig.kv_regs,
qdo_regs). Then prints the pipes' utilisation, the stall reasons' shares over the whole kernel and over the loop
bodies (the execution count that holds the most samples), the samples per SASS opcode, and the 40 instructions with
the most samples. The .ncu-rep and the source page as CSV go to $OUT. One profile, not a timing: ncu serializes and
replays the launch.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.counters import _number as ncu_number, find_ncu

OUT = Path(os.environ.get("OUT") or "/tmp")


KERNELS = {"fa3": "_fa3_fwd", "dkdv": "_bwd_dkdv", "dq": "_bwd_dq"}


def target(kernel: str, head_dim: int, causal: bool, regs: bool) -> None:
    import torch
    from kernels.fa3 import flash_attention_v3
    q, k, v = (torch.randn(2, 16, 8192, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if kernel == "fa3":
        def call():
            flash_attention_v3(q, k, v, causal=causal)
    else:
        from dataclasses import replace
        from kernels import fa2_bwd
        config = fa2_bwd.config_for(head_dim, q.dtype, causal, tma=True)
        config = replace(config, kv_regs=regs, qdo_regs=regs)
        o, lse = flash_attention_v3(q, k, v, causal=causal, return_lse=True)
        do = torch.randn_like(q)

        def call():
            fa2_bwd.launch_backward(q, k, v, o, lse, do, causal, head_dim ** -0.5, config)
    call()
    torch.cuda.synchronize()
    call()  # the profiled one (--launch-skip 1)
    torch.cuda.synchronize()


# the details page's rows worth a line: time, the pipes, shared memory, occupancy
WANTED = ("Duration", "SM Frequency", "Compute (SM) Throughput", "Memory Throughput", "Issue Slots Busy",
          "Executed Ipc Active", "Shared Memory Bandwidth", "Achieved Occupancy", "Registers Per Thread",
          "Block Limit Registers", "Block Limit Shared Mem", "L1/TEX Hit Rate", "L2 Hit Rate", "DRAM Throughput",
          "L1/TEX Cache Throughput", "L2 Cache Throughput", "Dynamic Shared Memory Per Block")


def _number(text) -> float:
    """ncu's CSV number (bench.counters reads them), 0 for an empty or non-numeric cell."""
    return ncu_number(str(text)) or 0.0


def _shares(rows: list[dict], column: str, reasons: list[str]) -> list[tuple[str, float]]:
    """The stall reasons' shares of these instructions' samples, largest first."""
    total = sum(_number(r[column]) for r in rows) or 1.0
    sums = {reason: sum(_number(r[reason]) for r in rows) for reason in reasons}
    return sorted(((reason, value / total) for reason, value in sums.items()), key=lambda item: -item[1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="store_true")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--kernel", choices=tuple(KERNELS), default="fa3")
    ap.add_argument("--regs", action="store_true", help="dkdv, dq: both passes' operands in registers")
    a = ap.parse_args()
    if a.target:
        target(a.kernel, a.head_dim, a.causal, a.regs)
        return 0
    ncu = find_ncu()
    if ncu is None:
        raise SystemExit("no ncu on this machine")
    rep = OUT / f"{a.kernel}-stalls-d{a.head_dim}{'-causal' if a.causal else ''}{'-regs' if a.regs else ''}"
    cmd = [ncu, "--clock-control", "none", "-k", f"regex:{KERNELS[a.kernel]}", "--launch-skip", "1",
           "--launch-count", "1", "--section", "SourceCounters", "--section", "WarpStateStats", "--section",
           "SpeedOfLight", "--section", "ComputeWorkloadAnalysis", "--section", "MemoryWorkloadAnalysis",
           "--section", "Occupancy", "--section", "LaunchStats", "--import-source", "no", "-f", "-o", str(rep),
           sys.executable, "-m", "perf.h200.fa3_stalls", "--target", "--kernel", a.kernel, "--head-dim",
           str(a.head_dim)]
    cmd += ["--causal"] if a.causal else []
    cmd += ["--regs"] if a.regs else []
    print(" ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-3000:], r.stderr[-3000:], flush=True)
    details = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "details", "--csv"],
                             capture_output=True, text=True)
    (OUT / f"{rep.name}-details.csv").write_text(details.stdout)
    for row in csv.reader(io.StringIO(details.stdout)):
        if any("Warp State" in c for c in row) or any(c in WANTED for c in row):
            print("  ", " | ".join(row[-4:]))
    raw = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "raw", "--csv"], capture_output=True,
                         text=True)
    table = list(csv.reader(io.StringIO(raw.stdout)))
    if len(table) >= 3:  # header, units, then the one launch: the pipes' and shared memory's metrics the sections read
        print("\nmetrics (the raw page): pipes, shared memory")
        for name, unit, value in zip(table[0], table[1], table[-1]):
            if re.search(r"pipe_\w+_cycles_active.*pct_of_peak|inst_executed_pipe_\w+.*pct|mem_shared.*(sum|pct)"
                         r"|data_bank_conflicts|wavefronts_mem_shared", name):
                print(f"  {name:90s} {value} {unit}")
    page = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"],
                          capture_output=True, text=True)
    (OUT / f"{rep.name}-source.csv").write_text(page.stdout)
    if page.returncode != 0 or not page.stdout.strip():
        print("source page failed:", page.stderr[-2000:], details.stdout[-6000:], details.stderr[-1000:])
        return 1
    rows = list(csv.reader(io.StringIO(page.stdout)))
    header_at = next(i for i, row in enumerate(rows) if any("Source" == c.strip() for c in row))
    header = rows[header_at]
    body = [dict(zip(header, row)) for row in rows[header_at + 1:] if len(row) == len(header)]
    sample_col = next((h for h in header if "Warp Stall Sampling (All" in h), None)
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    if sample_col is None or not reasons:
        print("no sampling columns; the page has:", header)
        return 1
    total = sum(_number(r[sample_col]) for r in body)
    # the consumers' loop bodies: the execution count (programs × warps × K/V tiles) whose instructions hold the
    # most samples
    weight = Counter()
    for r in body:
        weight[_number(r["Instructions Executed"])] += _number(r[sample_col])
    most = weight.most_common(1)[0][0]
    loop = [r for r in body if _number(r["Instructions Executed"]) == most]
    loop_total = sum(_number(r[sample_col]) for r in loop)
    print(f"\nsamples: {total:.0f}; in the loop bodies ({len(loop)} instructions executed {most:.0f} times each): "
          f"{loop_total:.0f}")
    for label, rows_of in (("whole kernel", body), ("loop bodies", loop)):
        print(f"stall reasons, {label}: " + ", ".join(f"{reason[6:]} {share:.1%}"
                                                      for reason, share in _shares(rows_of, sample_col, reasons)[:8]))
    by_op = Counter()
    for r in body:
        by_op[re.sub(r"^@!?U?P\w+\s+", "", r["Source"].strip()).split(" ")[0]] += _number(r[sample_col])
    print("\nby opcode (share of all warp samples):")
    for op, n in by_op.most_common(25):
        print(f"  {op:36s} {n / total:6.1%}")
    print("\ntop instructions:")
    for r in sorted(body, key=lambda r: -_number(r[sample_col]))[:40]:
        top = max(reasons, key=lambda reason: _number(r[reason]))[6:]
        print(f"  {r.get('Address', ''):>8s} {_number(r[sample_col]) / total:6.1%} {top:14s} {r['Source'].strip()[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
