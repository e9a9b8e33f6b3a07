"""Counted HBM bytes next to the cost model's, per record of a results file (no GPU needed).

    python -m perf.local.counted_vs_model results/h200.json
"""
from __future__ import annotations

import sys
from pathlib import Path

import costmodel
from bench.results import parse_results
from costmodel import Shape
from kernels import specs


def rows(path: Path) -> list[dict]:
    loaded = parse_results(path.read_bytes(), str(path))
    table = []
    for r in loaded.records:
        if r["status"] != "ok" or r.get("dram_read_bytes") is None:
            continue
        no_cache = costmodel.total_bytes(specs.traffic(r["algorithm"], Shape.of_record(r), r.get("block_m"),
                                                       r.get("block_n")))
        counted = r["dram_read_bytes"] + r["dram_write_bytes"]
        table.append({"algorithm": r["algorithm"], "D": r["head_dim"], "causal": r["causal"], "N": r["seq_len"],
                      "model": r["bytes_moved"], "no_cache": no_cache, "counted": counted,
                      "read": r["dram_read_bytes"], "written": r["dram_write_bytes"], "l2": r["l2_bytes"],
                      "ms": r["time_ms"], "kernels": len(r.get("kernels") or [])})
    return table


def main(argv: list[str]) -> int:
    print(f"{'algorithm':13s} {'D':>4s} {'causal':>6s} {'N':>7s} {'model MB':>10s} {'no-cache MB':>11s} "
          f"{'counted MB':>10s} {'read MB':>9s} {'written MB':>10s} {'L2 MB':>10s} {'counted/model':>13s} kernels")
    for row in rows(Path(argv[0])):
        print(f"{row['algorithm']:13s} {row['D']:4d} {str(row['causal']):>6s} {row['N']:7d} {row['model'] / 1e6:10.1f} "
              f"{row['no_cache'] / 1e6:11.1f} {row['counted'] / 1e6:10.1f} {row['read'] / 1e6:9.1f} "
              f"{row['written'] / 1e6:10.1f} {(row['l2'] or 0) / 1e6:10.1f} {row['counted'] / row['model']:13.3f} "
              f"{row['kernels']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
