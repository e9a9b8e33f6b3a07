"""FA-3, idea by idea, on the H200: every step of the ablation ladder (kernels/ladder.py: FA-2 order, then each row of
kernels.fa3.LADDER) checked against float64, then timed with cuDNN side by side in one run at the FA-3 paper's
ablation shape (B2 H16, N = 8K, head_dim 128, not causal, bf16).

    PYTHONUNBUFFERED=1 python -m perf.h200.ladder [--rounds 3] [--json PATH]

1. Correctness first: each FA-3 row (perf.h200.fa3_speed.check: ragged N 1 … 4097, causal and not, fp16 and bf16,
   late max spikes, a strided input, outputs NaN-poisoned) and FA-2 order (perf.h200.checks.sweep, ragged N, causal
   and not). A step that fails is not timed and the exit status is 1.
2. Timing: every step and cuDNN (SDPA's default) in interleaved rounds (order rotated per round), do_bench medians
   (L2 flushed), the median over rounds; TFLOPS = 4·B·H·N²·D / t.
3. The table: each step's TFLOPS and ÷ the step before (the issue's goal: each faster than the one before), and the
   last step ÷ cuDNN. The records for the app are written by the bench: `python -m bench --ladder --phases --out
   results/h200.json --merge-into`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from pathlib import Path

import torch

from perf.h200 import fa3_speed as fs
from perf.h200.checks import RAGGED, require_gpu, sweep
from bench.measure import Setting
from costmodel import Shape
from kernels import ladder

SHAPE = ("B2 H16 N8K D128", 2, 16, 8192, 128, False)
REFERENCE = "cuDNN (sdpa default)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="write the checks and timings here too")
    args = parser.parse_args(argv)
    require_gpu("perf.h200.ladder")
    threading.Thread(target=fs._watchdog, daemon=True).start()
    why = ladder.unavailable_reason()
    if why:
        fs.say(f"the ladder cannot run here: {why}")
        return 2
    steps = ladder.steps()
    fs.say(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; {len(steps)} steps")
    fs.precompile([("fa3", 128, c, dt, tuple(s.config.__dict__.values())) for s in steps if s.config
                   for c in (False, True) for dt in ("bfloat16", "float16")]
                  + [("fa2", 128, c, "bfloat16", None) for c in (False, True)])

    fs.say("== correctness (float64 reference)")
    passed = {}
    for s in steps:
        if s.config is None:
            settings = [Setting("fa2", Shape(n, 1, 2, 128, dt, c)) for n in RAGGED for c in (False, True)
                        for dt in ("bfloat16", "float16")]
            passed[s.name] = sweep(settings, call=lambda st, q, k, v: s.call(q, k, v, st.shape.causal),
                                   label=s.name, say=fs.say) == 0
        else:
            passed[s.name] = all([fs.check(s.config, 128, c, s.name) for c in (False, True)])

    calls = {s.name: (lambda q, k, v, c, s=s: s.call(q, k, v, c)) for s in steps if passed[s.name]}
    calls[REFERENCE] = fs.sdpa(None)
    fs.say(f"== timing {SHAPE[0]} bf16, {args.rounds} interleaved rounds")
    times = fs.time_all([SHAPE], lambda d, c, n, bh: calls, args.rounds)[SHAPE[0]]
    _, b, h, n, d, c = SHAPE
    tflops = {name: fs.tflops(b, h, n, d, c, statistics.median(ms)) for name, ms in times.items()}

    fs.say("")
    fs.say(f"{'step':44s} {'TFLOPS':>7s} {'÷ before':>9s}")
    before, rising = None, True
    for s in steps:
        tf = tflops.get(s.name)
        ratio = tf / before if tf and before else None
        rising &= ratio is None or ratio > 1.0
        fs.say(f"{s.name[:44]:44s} {tf if tf else float('nan'):7.1f} {f'{ratio:.3f}×' if ratio else '-':>9s}"
               + ("" if passed[s.name] else "  FAILED its checks: not timed"))
        before = tf or before
    last = tflops.get(steps[-1].name)
    fs.say(f"{REFERENCE:44s} {tflops[REFERENCE]:7.1f}   (last step ÷ cuDNN: "
           f"{last / tflops[REFERENCE] if last else float('nan'):.3f}×)")
    fs.say(f"each step faster than the one before: {'yes' if rising else 'NO'}")
    result = {"shape": SHAPE, "passed": passed, "ms_rounds": times, "tflops": tflops, "checks": fs.RESULTS["checks"],
              "each_faster": rising}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0 if all(passed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
