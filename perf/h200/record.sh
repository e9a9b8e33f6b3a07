#!/usr/bin/env bash
# Re-record results/h200.json on the H200 in one call (the commands of BENCHMARKS.md's shipped recording): a Proton
# smoke first (a phase recording that hangs must not eat the lease), then the bench, then the counters. Outputs
# and logs go to $OUT.
set -u
OUT=${OUT:-perf/h200/logs}
PHASES=--phases
if ! timeout 120 python3 -m bench --phases-only /tmp/phases-smoke.json > "$OUT/phases-smoke.log" 2>&1; then
    echo "phase smoke failed: bench runs without --phases (the file keeps its earlier phases)"; PHASES=
fi
tail -3 "$OUT/phases-smoke.log"
timeout 400 python3 -m bench --batch 2 --heads 16 --head-dims 64,128 --causal both --rep-ms 100 --timeline --fill \
    $PHASES --out results/h200.json > "$OUT/bench.log" 2>&1
echo "bench exit $?"; tail -6 "$OUT/bench.log"
timeout 200 python3 -m bench.counters --results results/h200.json --only-missing > "$OUT/counters.log" 2>&1
echo "counters exit $?"; tail -3 "$OUT/counters.log"
cp results/h200.json "$OUT/h200.json"
