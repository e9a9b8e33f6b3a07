"""Where the FA-3 kernel's warps wait, instruction by instruction: Nsight Compute's warp-state samples of one launch.

    PYTHONUNBUFFERED=1 python3 -m perf.h200.fa3_stalls [--causal] [--head-dim 128]   # on the H200, under $OUT

Runs `ncu` (SourceCounters + WarpStateStats, clocks left alone) on this module in --target mode, which launches the
shipped FA-3 kernel at B=2 H=16 N=8K (bf16) twice and marks the second; then prints the stall reasons summed over
the whole kernel and per SASS opcode, and the 40 instructions with the most samples. The .ncu-rep and the source
page as CSV go to $OUT. One profile, not a timing: ncu serializes and replays the launch.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

OUT = Path(os.environ.get("OUT") or "/tmp")


def target(head_dim: int, causal: bool) -> None:
    import torch
    from kernels.flash_v3 import flash_attention_v3
    q, k, v = (torch.randn(2, 16, 8192, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flash_attention_v3(q, k, v, causal=causal)
    torch.cuda.synchronize()
    flash_attention_v3(q, k, v, causal=causal)  # the profiled one (--launch-skip 1)
    torch.cuda.synchronize()


def ncu_path() -> str:
    for c in ("ncu", "/usr/local/cuda/bin/ncu"):
        if subprocess.run(["which", c], capture_output=True).returncode == 0 or Path(c).exists():
            return c
    raise SystemExit("no ncu on this machine")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="store_true")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--head-dim", type=int, default=128)
    a = ap.parse_args()
    if a.target:
        target(a.head_dim, a.causal)
        return 0
    ncu = ncu_path()
    rep = OUT / f"fa3-stalls-d{a.head_dim}{'-causal' if a.causal else ''}"
    cmd = [ncu, "--clock-control", "none", "-k", "regex:_fa3_fwd", "--launch-skip", "1", "--launch-count", "1",
           "--section", "SourceCounters", "--section", "WarpStateStats", "--import-source", "no", "-f", "-o", str(rep),
           sys.executable, "-m", "perf.h200.fa3_stalls", "--target", "--head-dim", str(a.head_dim)]
    cmd += ["--causal"] if a.causal else []
    print(" ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-3000:], r.stderr[-3000:], flush=True)
    page = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"],
                          capture_output=True, text=True)
    (OUT / f"{rep.name}-source.csv").write_text(page.stdout)
    if page.returncode != 0 or not page.stdout.strip():
        print("source page failed:", page.stderr[-2000:])
        details = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "details", "--csv"],
                                 capture_output=True, text=True)
        print(details.stdout[-6000:], details.stderr[-1000:])
        return 1
    details = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--page", "details", "--csv"],
                             capture_output=True, text=True)
    (OUT / f"{rep.name}-details.csv").write_text(details.stdout)
    for row in csv.reader(io.StringIO(details.stdout)):
        if any("Warp State" in c for c in row) or any("Duration" == c for c in row) or any("SM Frequency" == c for c in row):
            print("  ", " | ".join(row[-4:]))
    rows = list(csv.reader(io.StringIO(page.stdout)))
    header_at = next(i for i, row in enumerate(rows) if any("Source" == c.strip() for c in row))
    header = rows[header_at]
    body = [dict(zip(header, row)) for row in rows[header_at + 1:] if len(row) == len(header)]
    stall_cols = [h for h in header if h.startswith("stall_") or "Warp Stall Sampling" in h or h.startswith("Stall")]
    print("columns:", header)
    sample_col = next((h for h in header if "Warp Stall Sampling (All" in h), None)
    if sample_col is None:
        print("no sampling column")
        return 1

    def num(x):
        try:
            return float(str(x).replace(",", ""))
        except ValueError:
            return 0.0
    total = sum(num(r[sample_col]) for r in body)
    by_op = Counter()
    for r in body:
        op = re.sub(r"^@!?U?P\w+\s+", "", r["Source"].strip()).split(" ")[0]
        by_op[op] += num(r[sample_col])
    print(f"\nsamples: {total:.0f}; by opcode (share of all warp samples):")
    for op, n in by_op.most_common(25):
        print(f"  {op:36s} {n / total:6.1%}")
    print("\ntop instructions:")
    top = sorted(body, key=lambda r: -num(r[sample_col]))[:40]
    for r in top:
        print(f"  {r.get('Address', ''):>8s} {num(r[sample_col]) / total:6.1%}  {r['Source'].strip()[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
