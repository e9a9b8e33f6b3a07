"""Inside one program: what each warpgroup of a flash kernel does over time, measured with Proton.

`record_phase_timeline(kernel, ...)` runs one launch of a kernel whose spec has a Proton facet (kernels/specs.py: the
FA-3 style kernel "fa3", kernels/fa3.py, and the teaching kernel "fa2", kernels/fa2.py, FA-2 order) built with its
PROFILE constexpr on, under Proton's intra-kernel instrumentation (`proton.start(backend="instrumentation")`), and
returns plain data: per program (CTA) the SM it ran on and, per sampled warp (one per warpgroup), the phases it went
through as (phase, start, end) in Proton's clock units (cycles; the Chrome trace Proton writes divides them by 1000
and calls them µs, i.e. it assumes 1 GHz), plus the SM clock read beside the run and the plain vs instrumented time.

Phases are the kernel's phase comments: producer `load` (wait for a free ring slot, issue the K and V TMA copies);
consumer `wait` (K/V landed? our turn at the tensor cores?), `qk` (issue QKᵀ and P·V, wait for QKᵀ), `softmax`,
`pv` (wait for the P·V issued in `qk`, hand P over), `epilogue`. The teaching kernel has one warpgroup that does it
all in turn: `load` (the K tile: with software pipelining, the wait for a copy issued an iteration ahead), `qk`,
`softmax`, `pv` (the V tile, the rescale and P·V), `epilogue`. A scope is what a warp is doing (issuing, waiting,
computing), not whether the tensor cores are busy: a wgmma issued in `qk` runs on during `softmax`.

The shipped kernels are untouched: PROFILE=False compiles to the same SASS as before the scopes existed (checked),
and the instrumented build is a separate compile (Proton's mode is part of Triton's cache key).

The teaching kernel is a Triton-DSL (`tl`) kernel: Proton instruments those only after
`pl.enable_semantic("triton")`, and warns that Triton's loop pipelining and instruction scheduling can move a tl
kernel's records; its lanes are read with that caveat (the page says so).
"""
from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

from kernels.runtime import INTERPRET  # first: it picks the backend before any kernel is decorated
import torch

import costmodel
from bench import triton_private
from bench.measure import provenance
from kernels import specs

PHASES = ("load", "wait", "qk", "softmax", "pv", "epilogue")
_PID = re.compile(r"Core\s*(\d+)\s+CTA\s*(\d+)")
_TID = re.compile(r"warp\s+(\d+)")


def kernels() -> tuple[str, ...]:
    """The kernels Proton can record: the specs with a Proton facet, in legend order."""
    return tuple(spec.key for spec in specs.with_facet("proton"))


def recording_order() -> tuple[str, ...]:
    """kernels() with the Gluon ones first: recording a `tl` kernel turns Proton's Triton semantic on for the rest of
    the process, and the Gluon kernels are instrumented without it."""
    return tuple(sorted(kernels(), key=lambda key: _launcher(key, 128, False, torch.bfloat16)[3] != "gluon"))


def unavailable_reason(kernel: str = "fa3") -> str | None:
    """None when `kernel` can be recorded here; otherwise one sentence saying why not."""
    if kernel not in kernels():
        return f"unknown kernel {kernel!r}: one of {', '.join(kernels())}"
    if INTERPRET:
        return "Proton's intra-kernel instrumentation runs on a GPU, not in Triton's CPU interpreter"
    spec = specs.spec(kernel)
    reason = spec.load("unavailable")(costmodel.Shape(4096, 1, 4, 128)) if spec.unavailable else None
    if reason:
        return reason
    try:
        import triton.profiler.language  # noqa: F401 (Proton is there)
    except Exception:  # noqa: BLE001
        return "this Triton has no Proton (triton.profiler.language)"
    return None


def _sm_clock_mhz() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
        return float(out.stdout.strip().splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def parse_chrome_trace(path: Path | str, kernel_name: str | None = None) -> list[dict]:
    """Proton's Chrome trace (instrumentation backend) as plain data: one entry per CTA, sorted by CTA id:
    {"cta", "sm", "init_ns", "post_final_ns", "lanes": [{"warp", "spans": [[phase, start, end], ...]}]};
    start/end in Proton's cycle units (SM clock cycles with clock32), relative to the CTA's first recorded event.
    Triton 3.6 writes pid "<kernel> Core<SM> CTA<id>", tid "warp <id> (line <n>)", ts/dur = cycles / 1000 and args
    {"Finalization Time (ns)", "Frequency (MHz)": 1000.0, "call_stack"}; init/post-final times (newer Protons) are
    None there."""
    events = json.loads(Path(path).read_text())["traceEvents"]
    ctas: dict[int, dict] = {}
    for e in events:
        if e.get("ph") != "X" or "pid" not in e or "tid" not in e or e.get("cat") in ("flow", "call_path"):
            continue
        pid, tid = _PID.search(str(e["pid"])), _TID.search(str(e["tid"]))
        if not pid or not tid or (kernel_name and kernel_name not in str(e["pid"])):
            continue
        sm, cta, warp = int(pid[1]), int(pid[2]), int(tid[1])
        start = round(float(e["ts"]) * 1000)  # back to Proton's clock units (it wrote cycles / 1000)
        end = start + round(float(e["dur"]) * 1000)
        entry = ctas.setdefault(cta, {"cta": cta, "sm": sm, "lanes": {}})
        args = e.get("args") or {}
        entry.setdefault("init_ns", args.get("Init Time (ns)"))
        entry.setdefault("post_final_ns", args.get("Post Final Time (ns)"))
        entry["lanes"].setdefault(warp, []).append([e["name"], start, end])
    out = []
    for cta in sorted(ctas):
        entry = ctas[cta]
        origin = min(s[1] for spans in entry["lanes"].values() for s in spans)
        lanes = [{"warp": warp, "spans": sorted([[n, a - origin, b - origin] for n, a, b in spans],
                                                key=lambda s: (s[1], s[2]))}
                 for warp, spans in sorted(entry["lanes"].items())]
        out.append({**entry, "lanes": lanes})
    return out


def name_roles(lanes: list[dict], warp_specialized: bool = True) -> None:
    """Name each sampled warp's warpgroup by what it recorded: in a warp-specialized kernel (the FA-3 style one) the
    producer loads and the consumers compute; in the teaching kernel every warpgroup does all of it in turn."""
    consumer = 0
    for lane in lanes:
        names = {s[0] for s in lane["spans"]}
        if not warp_specialized:
            lane["role"] = f"warpgroup {lane['warp'] // 4}"
        elif "load" in names:
            lane["role"] = "producer"
        else:
            lane["role"] = f"consumer {consumer}"
            consumer += 1
        lane["warpgroup"] = lane["warp"] // 4


def _kernel_ms(fn, reps: int = 10) -> float:
    """GPU time of one call (median): the GPU sleeps first while the host builds the launch (descriptors,
    allocations), so the events bracket the kernel, not the Python around it (do_bench at this size would time the
    host)."""
    import statistics
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        triton_private.gpu_sleep(2_000_000)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _launcher(kernel: str, head_dim: int, causal: bool, dtype: torch.dtype):
    """(launch(q, k, v, causal, scale, profile), config as plain data, warps to sample, "triton" or "gluon"): what the
    kernel's spec names as its Proton launcher."""
    return specs.spec(kernel).load("proton")(head_dim, causal, dtype)


def record_phase_timeline(kernel: str = "fa3", batch: int = 1, heads: int = 4, seq_len: int = 4096,
                          head_dim: int = 128, causal: bool = False, dtype: torch.dtype = torch.bfloat16,
                          max_programs: int | None = 8, seed: int = 0, launcher=None) -> dict:
    """Record one launch of `kernel` with Proton; return plain data (see the module docstring):

    {"kernel", "shape": {...}, "config": {...}, "sm_clock_mhz", "sampled_warps", "programs": [per CTA: "cta", "sm",
    "lanes": [{"warp", "warpgroup", "role", "spans": [[phase, start, end], ...]}]], "program_count", "timing":
    {"plain_ms", "longest_program_cycles", "longest_program_ms_at_clock", "overhead", "instrumented_launch_ms"},
    "proton": {"triton", "mode", "raw_sample"}, "profiled_output_identical", "recorded_at", "build"}. Raises
    RuntimeError with unavailable_reason's sentence where it cannot run. The default shape fills about one wave of an
    H200 (128 programs of 128 query rows); `max_programs` keeps the first that many CTAs (None: all). `launcher`: a
    (launch, config, warps, language) of that kernel to record instead of its spec's (an ablation step,
    kernels/ladder.py)."""
    reason = unavailable_reason(kernel)
    if reason:
        raise RuntimeError(reason)
    import triton
    import triton.profiler as proton
    import triton.profiler.language as pl

    launch, config, warps, semantic = launcher or _launcher(kernel, head_dim, causal, dtype)
    if semantic == "triton":
        pl.enable_semantic("triton")  # Proton records tl kernels' scopes only when asked to
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device="cuda", generator=gen).to(dtype) for _ in range(3))
    scale = head_dim ** -0.5
    plain_ms = _kernel_ms(lambda: launch(q, k, v, causal, scale))
    o_plain, _ = launch(q, k, v, causal, scale)
    sampled = ",".join(str(w) for w in warps)
    mode = proton.mode.Default(sampling_strategy="selective", sampling_options=sampled, buffer_type="global",
                               optimizations="clock32")
    with tempfile.TemporaryDirectory(prefix="phase-timeline-") as tmp:
        base = str(Path(tmp) / kernel)
        proton.start(base, data="trace", backend="instrumentation", mode=mode)
        try:
            o_profiled, _ = launch(q, k, v, causal, scale, profile=True)
            torch.cuda.synchronize()
        finally:
            proton.finalize()
        proton.start(base + "-timed", data="trace", backend="instrumentation", mode=mode)
        try:  # the instrumented launch as Proton runs it (its own buffer handling included), timed like the plain one
            instrumented_launch_ms = _kernel_ms(lambda: launch(q, k, v, causal, scale, profile=True), reps=5)
        finally:
            proton.finalize()
        trace = Path(base + ".chrome_trace")
        programs = parse_chrome_trace(trace)
        raw = json.loads(trace.read_text())["traceEvents"]
        raw_sample = [e for e in raw if _PID.search(str(e.get("pid", "")))][:4]
    for program in programs:
        name_roles(program["lanes"], warp_specialized=semantic == "gluon")
    longest = max(max(s[2] for lane in p["lanes"] for s in lane["spans"]) for p in programs)
    clock = _sm_clock_mhz()
    return {
        "kernel": kernel,
        "shape": {"batch": batch, "heads": heads, "seq_len": seq_len, "head_dim": head_dim, "causal": causal,
                  "dtype": str(dtype).removeprefix("torch.")},
        "config": config,
        "sm_clock_mhz": clock,
        "sampled_warps": [int(w) for w in sampled.split(",")],
        "programs": programs[:max_programs] if max_programs else programs,
        "program_count": len(programs),
        # plain_ms: the shipped kernel's GPU time at this shape (one wave: about one program's time);
        # longest_program_*: the longest instrumented program, first to last record (cycles, and ms at the SM clock
        # read beside the run); overhead: the latter over the former, an estimate of what the scopes cost inside the
        # kernel; instrumented_launch_ms: the PROFILE launch timed like the plain one while Proton runs, which is
        # dominated by Proton's own per-launch buffer handling (tens of ms), not by the kernel
        "timing": {"plain_ms": plain_ms, "longest_program_cycles": longest,
                   "longest_program_ms_at_clock": longest / (clock * 1e3) if clock else None,
                   "overhead": (longest / (clock * 1e3) / plain_ms - 1) if clock else None,
                   "instrumented_launch_ms": instrumented_launch_ms},
        "proton": {"triton": triton.__version__, "mode": str(mode), "raw_sample": raw_sample},
        "profiled_output_identical": bool(torch.equal(o_plain, o_profiled)),
        # when, and our kernel's build (a ladder step's too: its spec's files, as its records say)
        **provenance("phases", {"kernel": kernel, "dtype": str(dtype).removeprefix("torch.")}),
    }


def main() -> int:
    """On the H200: record both kernels at the talk's class (D=128) and print a summary; JSON under $OUT."""
    import os
    out = Path(os.environ.get("OUT") or ".")
    results = {}
    for kernel in recording_order():  # the Gluon kernel first: the tl one turns on Proton's Triton semantic
        label = f"{kernel} D128 full"
        try:
            data = record_phase_timeline(kernel)
        except Exception as exc:  # noqa: BLE001 - print it and keep the other run
            print(f"{label}: {type(exc).__name__}: {exc}")
            continue
        results[label] = data
        t = data["timing"]
        print(f"{label}: {data['program_count']} programs traced; plain kernel {t['plain_ms']:.4f} ms; longest "
              f"instrumented program {t['longest_program_cycles']} cycles; launch under Proton "
              f"{t['instrumented_launch_ms']:.1f} ms; profiled O identical: {data['profiled_output_identical']}")
        for program in data["programs"][:2]:  # the shares and the overlap: story.phase_kernels, on the page
            print(f"  CTA {program['cta']} on SM {program['sm']}: " + ", ".join(
                f"warp {lane['warp']} {lane['role']} {len(lane['spans'])} spans" for lane in program["lanes"]))
    (out / "phase_timeline.json").write_text(json.dumps(results))
    return 0 if results else 1


if __name__ == "__main__":
    raise SystemExit(main())
