"""Our flash forward side by side with its peers at B=2, H=16, N=8192, head_dim 64 and 128, causal and not;
every kernel checked against float64 first.

    python -m perf.h200.flash_speed [--tutorial PATH] [--rounds 5] [--rep-ms 60]    (on the GPU)

Ours: kernels.fa2.flash_attention as shipped (the tiles of kernels.fa2.config_for), in fp16 and bf16.
Peers, in bf16, as the bench runs them (its spec, kernels/specs.py): torch SDPA's default backend (cuDNN on the H200) and its
FLASH_ATTENTION backend (FlashAttention-2). With --tutorial, also Triton's tutorial 06 forward in fp16: PATH is a
Python file of your own (the tutorial is not part of this repository) that defines
`attention_fwd(q, k, v, causal, sm_scale) -> O` and may define `retune()`, called before each (head_dim, causal)
class, to make the tutorial's autotuner choose afresh for it (its autotune key leaves out the causal mask).

Checks: ours at N = 1, 17, 257, 1000, 4097 (fp16 and bf16), the peers at N = 1000 and 8192 (the tutorial at 8192:
it needs N to be a multiple of its tile) against kernels.reference; a kernel that fails is timed but marked WRONG.
Timing: bench.measure.time_cuda (CUDA events after warm-up, L2 flushed before each call), the median per round;
each round times every kernel of a class once, in an order rotated by one each round, and the table gives the
median over rounds. Writes flash-speed-<date>.log and .json (every median) under $OUT, else perf/h200/logs/.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

from bench.device import device_facts
from costmodel import Shape
from bench.measure import Setting, attention_flops, inputs, runner, time_cuda
from perf.h200.checks import RAGGED, require_gpu, sweep

BATCH, HEADS, SEQ_LEN = 2, 16, 8192
CLASSES = [(head_dim, causal) for head_dim in (128, 64) for causal in (False, True)]
OURS = {"ours fp16": "float16", "ours bf16": "bfloat16"}
PEERS = {"SDPA default (cuDNN) bf16": "sdpa_default", "SDPA FA2 bf16": "sdpa_flash"}
TUTORIAL = "tutorial 06 fp16"


class Log:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.lines.append(line)


def load_tutorial(path: Path | None):
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("tutorial06", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and the autotuner look their module up there
    spec.loader.exec_module(module)
    return module


def kernels_of_class(head_dim: int, causal: bool, tutorial) -> dict[str, tuple[Setting, object]]:
    """name → (the setting at the full shape, call(setting, q, k, v) or None for the bench's own call)."""
    def setting(algorithm: str, dtype: str) -> Setting:
        return Setting(algorithm, Shape(SEQ_LEN, BATCH, HEADS, head_dim, dtype, causal))

    entries = {name: (setting("fa2", dtype), None) for name, dtype in OURS.items()}
    entries.update({name: (setting(algorithm, "bfloat16"), None) for name, algorithm in PEERS.items()})
    if tutorial is not None:
        entries[TUTORIAL] = (setting("fa2", "float16"),
                             lambda s, q, k, v: tutorial.attention_fwd(q, k, v, s.shape.causal,
                                                                                s.shape.head_dim ** -0.5))
    return entries


def wrong_kernels(entries: dict, say: Log) -> set[str]:
    """The names of the kernels that fail their float64 checks (ours at ragged N, the peers at 1000 and 8192)."""
    wrong = set()
    for name, (full, call) in entries.items():
        lengths = RAGGED if name in OURS else (SEQ_LEN,) if name == TUTORIAL else (1000, SEQ_LEN)
        heads = 3 if name in OURS else 2
        settings = [Setting(full.algorithm, full.shape.at(seq_len=n, kv_len=n, batch=2, heads=heads, kv_heads=heads))
                    for n in lengths]
        if sweep(settings, call, label=name, say=say):
            wrong.add(name)
        torch.cuda.empty_cache()
    return wrong


def time_class(entries: dict, rounds: int, rep_ms: float) -> dict[str, float]:
    """Median over interleaved rounds of each kernel's median time (ms) at the full shape."""
    calls = {}
    for name, (s, call) in entries.items():
        q, k, v = inputs(s, seed=1)
        calls[name] = (lambda s=s, call=call, q=q, k=k, v=v: call(s, q, k, v)) if call else runner(s, q, k, v)
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(statistics.median(time_cuda(calls[name], warmup_ms=10, rep_ms=rep_ms)))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.h200.flash_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tutorial", type=Path, default=None, help="a file defining attention_fwd (see above)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rep-ms", type=float, default=60.0, help="timed milliseconds per kernel per round")
    args = parser.parse_args(argv)
    require_gpu("perf.h200.flash_speed")
    say, out = Log(), Path(os.environ.get("OUT") or Path(__file__).parent / "logs")
    tutorial = load_tutorial(args.tutorial)
    header = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} torch {torch.__version__} triton "
              f"{triton.__version__} cuDNN {torch.backends.cudnn.version()} {torch.cuda.get_device_name(0)}")
    say(header)
    results: dict = {"header": header, "device": device_facts(), "classes": {}}
    table = []
    for head_dim, causal in CLASSES:
        label = f"{head_dim}{' causal' if causal else ''}"
        if tutorial is not None and hasattr(tutorial, "retune"):
            tutorial.retune()
        entries = kernels_of_class(head_dim, causal, tutorial)
        wrong = wrong_kernels(entries, say)
        medians = time_class(entries, args.rounds, args.rep_ms)
        tflops = {name: attention_flops(entries[name][0]) / (ms * 1e-3) / 1e12 for name, ms in medians.items()}
        say(f"== d={label}: median of {args.rounds} interleaved rounds, B={BATCH} H={HEADS} N={SEQ_LEN}")
        for name, ms in sorted(medians.items(), key=lambda item: item[1]):
            say(f"  {name:28s} {ms:7.3f} ms {tflops[name]:6.1f} TFLOPS{'  WRONG' if name in wrong else ''}")
        results["classes"][label] = {name: {"ms": medians[name], "tflops": tflops[name], "wrong": name in wrong}
                                     for name in medians}
        table.append((label, tflops))
    say("\nTFLOPS ratios, ours / theirs, from the same interleaved rounds (> 1: ours is faster):")
    say("| head_dim, mask |" + (" vs tutorial 06 (fp16) |" if tutorial else "")
        + " vs SDPA default = cuDNN (bf16) | vs SDPA FA2 (bf16) |")
    say("|---|---|---|" + ("---|" if tutorial else ""))
    for label, t in table:
        fp16, bf16 = t["ours fp16"], t["ours bf16"]
        cudnn, fa2 = t["SDPA default (cuDNN) bf16"], t["SDPA FA2 bf16"]
        tut = f" {fp16 / t[TUTORIAL]:.3f}× ({fp16:.0f} vs {t[TUTORIAL]:.0f}) |" if tutorial else ""
        say(f"| {label} |{tut} {bf16 / cudnn:.3f}× ({bf16:.0f} vs {cudnn:.0f}) | {bf16 / fa2:.2f}× ({fa2:.0f}) |")
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d")
    (out / f"flash-speed-{stamp}.log").write_text("\n".join(say.lines) + "\n")
    (out / f"flash-speed-{stamp}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
