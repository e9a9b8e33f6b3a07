"""`python -m bench`: sweep sequence lengths, print a table, write a versioned results file.

Example (what produced results/h200.json; see BENCHMARKS.md):
    python -m bench --batch 2 --heads 16 --head-dims 64,128 --causal both --timeline \
        --out results/h200.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import itertools
import sys
import tempfile
from pathlib import Path

import torch

import costmodel
from costmodel import SEQ_LENS, Shape

from bench.device import device_facts
from bench.measure import Setting, backward_algorithms, measure, model_extra_bytes, provenance, time_cuda
from bench.results import dump_results
from bench.schema import RECORD_SCHEMA, _Bad, _checked
from kernels import specs
from kernels.fa2 import FlashConfig, flash_attention
from kernels.inputs import DTYPES_BY_NAME, SUPPORTED_HEAD_DIMS
from kernels.runtime import INTERPRET

BASE = "fa2"  # the ratio table's columns are each kernel's time ÷ this one's (our teaching kernel)

RATIO_SEQ_LEN = 8192
TUNE_CANDIDATES = tuple(FlashConfig(*c) for c in (
    (128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (128, 32, 4, 3),
    (64, 128, 4, 3), (64, 32, 4, 2), (32, 32, 4, 2)))


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _shape_list(text: str) -> list[tuple[int, ...]]:
    """BATCHxHEADS or BATCHxHEADSxHEAD_DIM, comma-separated (1x32x128: Llama 3 8B's heads, at its head_dim only)."""
    usage = f"expected BATCHxHEADS[xHEAD_DIM], comma-separated (e.g. 1x32x128), got {text!r}"
    try:
        shapes = [tuple(int(v) for v in item.lower().split("x")) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(usage) from None
    if not shapes or any(len(shape) not in (2, 3) or min(shape) < 1 for shape in shapes):
        raise argparse.ArgumentTypeError(usage)
    return shapes


def _choice_list(choices, aliases=None):
    """A comma-separated list from `choices`; `aliases` maps older names to their choice (the kernels' older
    names: "flash" reads as "fa2")."""
    def parse(text: str) -> list[str]:
        values = [x.strip() for x in text.split(",") if x.strip()]
        values = [(aliases or {}).get(x, x) for x in values]
        bad = [x for x in values if x not in choices]
        if bad or not values:
            raise argparse.ArgumentTypeError(f"unknown {bad or text!r}; choose from {', '.join(choices)}")
        return values
    return parse


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-lens", type=_int_list, default=list(SEQ_LENS),
                   help="comma-separated sequence lengths (default: powers of two 1K..256K)")
    keys = specs.keys(passes=("prefill",))
    p.add_argument("--algorithms", type=_choice_list(keys, specs.aliases()), default=list(keys),
                   help=f"comma-separated, from {', '.join(keys)} (older names such as flash still read; "
                        "default: all)")
    p.add_argument("--head-dims", type=_int_list, default=[64, 128], help="comma-separated head dims (default 64,128)")
    p.add_argument("--dtypes", type=_choice_list(tuple(DTYPES_BY_NAME)), default=["bfloat16"])
    p.add_argument("--causal", choices=("both", "true", "false"), default="both")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--rep-ms", type=float, default=300.0, help="time budget of the timed repetitions per point")
    p.add_argument("--timeline", action="store_true",
                   help="also record SM timelines of the flash kernel at the bench's batch and heads, N = 8K, "
                        "head_dim 128 (the talk's setting), causal and not")
    p.add_argument("--shapes", type=_shape_list, default=[],
                   help="more (batch x heads) shapes to sweep like the main one, e.g. 1x32 (Llama 3 8B's heads)")
    p.add_argument("--fill", action="store_true",
                   help="also time FA-2 and the FA1-order kernel at a shape that fills the GPU (batch·heads ≥ "
                        "2 × SMs programs for FA1), N = 4K: the loop order's cost apart from idle SMs")
    p.add_argument("--phases", action="store_true",
                   help="also record, with Proton, what each warpgroup of one launch does over time, for the teaching "
                        "kernel (fa2) and the FA-3 style kernel (fa3): batch 1 × 4 heads, N = 4K, head_dim 128")
    p.add_argument("--phases-only", type=Path, default=None, help=argparse.SUPPRESS)  # record_phases' child
    p.add_argument("--ladder", action="store_true",
                   help="time FA-3's ideas one by one instead (kernels/ladder.py: FA-2 order, then each row of the FA-3 "
                        "kernel's LADDER, and cuDNN as the reference) side by side in one run at the FA-3 paper's "
                        "ablation shape (B2 H16, N = 8K, head_dim 128, not causal, bf16); with --phases also each "
                        "step's Proton lanes")
    p.add_argument("--fp8", action="store_true",
                   help="time our FA-3 kernel in e4m3 (kernels/fp8.py: per-tensor and per-head scales, with and "
                        "without the Hadamard rotation) beside the same kernel in bf16 in one interleaved run, at B2 "
                        "H16, N = 8K and 16K, head_dim 128 and 64, not causal, with each one's error against float64 "
                        "on random inputs, the FA-3 paper's outliers and harsher planted ones (bench/fp8.py)")
    p.add_argument("--tune", action="store_true", help="time FA-2 tile configs at seq_len 8K and print the best")
    p.add_argument("--decode", action="store_true",
                   help="time decode instead: one new token (q_len 1) of Llama 3 8B's attention (32 query heads, 8 "
                        "K/V heads, head_dim 128, bf16) against a KV cache of --kv-lens tokens at --decode-batches, "
                        "for every kernel with a KV-cache path (our split-KV kernel, contiguous and paged by "
                        f"{DECODE_PAGE_SIZE}; SDPA; our prefill kernel used as-is at q_len 1)")
    p.add_argument("--backward", action="store_true",
                   help="time the backward pass instead (records with pass \"backward\"): ours through autograd, "
                        "SDPA's cuDNN and FA-2 backwards, and standard attention's eager autograd (it keeps P: its "
                        "out-of-memory is a result), at --batch × --heads, --head-dims, --causal, bf16, N = "
                        "--seq-lens (default 1K … 64K); time_ms the backward alone, fwd_bwd_ms forward + backward, "
                        "peak_extra_bytes one forward + backward's memory beyond q, k, v and dO")
    p.add_argument("--kv-lens", type=_int_list, default=list(DECODE_KV_LENS),
                   help="--decode: comma-separated cache lengths (default 1K … 1M)")
    p.add_argument("--decode-batches", type=_int_list, default=list(DECODE_BATCHES),
                   help="--decode: comma-separated batch sizes (default 1,8,32)")
    p.add_argument("--out", type=Path, default=None, help="write a results JSON file here")
    p.add_argument("--merge-into", action="store_true",
                   help="with --out naming an existing results file: keep its records of settings this run did not "
                        "measure (the file says which command measured what), replace the rest, and the timelines "
                        "and phases this run recorded; the device facts are this run's")
    args = p.parse_args(argv)
    bad_dims = [d for d in args.head_dims if d not in SUPPORTED_HEAD_DIMS]
    if bad_dims:
        p.error(f"unsupported head dims {bad_dims}: supported are {SUPPORTED_HEAD_DIMS}")
    problem = _unwritable(args)  # what would fail at write time, said before a minute of measuring
    if problem:
        p.error(problem)
    return args


def _out_of_bounds(args: argparse.Namespace) -> str | None:
    """A value the results file's schema would refuse (bench/schema.py), so no record of it could be written."""
    values = [("batch", args.batch), ("heads", args.heads), *(("seq_len", n) for n in args.seq_lens)]
    for shape in args.shapes:
        values += [("batch", shape[0]), ("heads", shape[1])]
    for field_name, value in values:
        try:
            _checked(RECORD_SCHEMA[field_name], value)
        except _Bad as why:
            return f"{field_name} = {value} {why}: a results file cannot hold it"
    return None


def _unwritable(args: argparse.Namespace) -> str | None:
    """Why the run's results could not be written (None: they can): a value the file cannot hold, --out a folder,
    a device or in a folder that is not there or not writable, or a --merge-into file that cannot be read."""
    if args.merge_into and args.out is None:
        return "--merge-into needs --out naming the results file to merge into"
    if args.out is None or args.phases_only:
        return None
    bounds = _out_of_bounds(args)
    if bounds:
        return bounds
    out = args.out
    if out.is_dir():
        return f"--out {out} is a folder; name a file in it"
    if out.exists() and not out.is_file():
        return f"--out {out} is not a regular file (a device or a pipe): results are written to a file"
    if not out.parent.is_dir():
        return f"--out {out}: the folder {out.parent} does not exist"
    try:
        with tempfile.TemporaryFile(dir=out.parent):
            pass
    except OSError as why:
        return f"--out {out}: cannot write in {out.parent} ({why.strerror or why})"
    if args.merge_into and out.is_file():
        from bench.results import ResultsError, load_results_path
        try:
            load_results_path(out)
        except (ResultsError, OSError) as why:
            return f"--merge-into: {out} cannot be read, so nothing could be merged into it: {str(why)[:300]}"
    return None


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(records: list[dict], file=sys.stdout) -> None:
    print(f"{'algorithm':13s} {'D':>4s} {'causal':>6s} {'N':>7s} {'status':>6s} {'ms':>9s} {'TFLOPS':>7s} "
          f"{'GB/s':>7s} {'extra MiB':>10s}", file=file)
    for r in records:
        extra = None if r["peak_extra_bytes"] is None else r["peak_extra_bytes"] / 2**20
        print(f"{r['algorithm']:13s} {r['head_dim']:4d} {str(r['causal']):>6s} {r['seq_len']:7d} {r['status']:>6s} "
              f"{_fmt(r['time_ms'], '9.3f')} {_fmt(r['tflops'], '7.1f')} {_fmt(r['gbps'], '7.0f')} "
              f"{_fmt(extra, '10.1f')}", file=file)


def ratio_table(records: list[dict], seq_len: int = RATIO_SEQ_LEN, batch: int | None = None,
                heads: int | None = None) -> list[dict]:
    """The side-by-side ratios at one seq_len and one (batch, heads) (the first record's when not given), from
    records of the same run: every kernel whose spec is in the ratio table, as its time ÷ FA-2's (> 1: FA-2 is
    faster), and the memory each kernel of ours took against its design."""
    if records and batch is None:
        batch, heads = records[0]["batch"], records[0]["heads"]
    by_key = {(specs.canonical(r["algorithm"]), r["head_dim"], r["causal"], r["dtype"]): r for r in records
              if r["seq_len"] == seq_len and r["status"] == "ok" and (r["batch"], r["heads"]) == (batch, heads)}
    rows = []
    for (algo, d, causal, dtype), r in sorted(by_key.items()):
        if algo != BASE:
            continue
        row = {"head_dim": d, "causal": causal, "dtype": dtype, f"{BASE}_ms": r["time_ms"],
               f"{BASE}_tflops": r["tflops"]}
        for other in specs.keys(ratio=True):
            o = by_key.get((other, d, causal, dtype))
            row[f"{BASE}_vs_{other}"] = o["time_ms"] / r["time_ms"] if o else None
        naive, eager = by_key.get(("naive", d, causal, dtype)), by_key.get(("torch_naive", d, causal, dtype))
        row["naive_vs_torch_naive"] = eager["time_ms"] / naive["time_ms"] if naive and eager else None
        setting = Setting(BASE, Shape.of_record(r))
        row[f"{BASE}_extra_vs_o_lse"] = (r["peak_extra_bytes"] / model_extra_bytes(setting)
                                         if r["peak_extra_bytes"] else None)
        if naive and naive["peak_extra_bytes"]:
            b, h, n = naive["batch"], naive["heads"], naive["seq_len"]
            row["naive_extra_vs_s_plus_p"] = (naive["peak_extra_bytes"]
                                              / (b * h * n * n * (4 + setting.shape.dtype_bytes)))
        rows.append(row)
    return rows


def print_ratios(rows: list[dict]) -> None:
    print(f"\nratios at seq_len {RATIO_SEQ_LEN} (time of the other / time of ours; >1 means ours is faster)")
    for row in rows:
        print("  " + "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


def tune(head_dims: list[int], dtypes: list[str], causals: list[bool], batch: int, heads: int) -> None:
    for d, dtype, causal in itertools.product(head_dims, dtypes, causals):
        shape = (batch, heads, RATIO_SEQ_LEN, d)
        q, k, v = (torch.randn(shape, device="cuda", dtype=DTYPES_BY_NAME[dtype]) for _ in range(3))
        timings = []
        for cfg in TUNE_CANDIDATES:
            try:
                times = time_cuda(lambda: flash_attention(q, k, v, causal=causal, config=cfg), 50, 300)
                timings.append((sorted(times)[len(times) // 2], cfg))
            except Exception as exc:  # a config that does not fit is skipped, not fatal
                print(f"  {cfg} failed: {type(exc).__name__}", file=sys.stderr)
        timings.sort(key=lambda t: t[0])
        for ms, cfg in timings[:3]:
            print(f"tune d={d} {dtype} causal={causal}: {ms:.3f} ms {cfg}")
        del q, k, v
        torch.cuda.empty_cache()


FILL_SEQ_LEN = 4096
PHASE_SHAPE = {"batch": 1, "heads": 4, "seq_len": 4096, "head_dim": 128, "causal": False}  # one wave of programs
PHASE_PROGRAMS = 4  # programs kept of the launch (Proton records them all)


def record_phases(timeout_s: float = 420, ladder: bool = False) -> tuple[list[dict], str]:
    """The phase recordings, made in a child process (Proton changes process-wide compiler state, and a kernel
    that faults under instrumentation must not take the bench's measurements down with it)."""
    import json
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp:
        path = Path(tmp) / "phases.json"
        try:
            run = subprocess.run([sys.executable, "-m", "bench", "--phases-only", str(path),
                                  *(["--ladder"] if ladder else [])], timeout=timeout_s,
                                 stdout=sys.stderr, stderr=sys.stderr)
        except subprocess.TimeoutExpired:
            return [], f"the phase recordings took longer than {timeout_s:.0f} s"
        if run.returncode != 0 or not path.is_file():
            return [], f"the phase recordings' process failed (exit {run.returncode})"
        data = json.loads(path.read_text())
        return data["phases"], data["skipped"]


def _phase_jobs(ladder: bool) -> list[tuple[str, str | None]]:
    """(kernel, ablation step or None) to record, Gluon kernels first (a tl one turns Proton's Triton semantic on for
    the rest of the process): each kernel's shipped build, or with `ladder` each step of kernels/ladder.py."""
    from bench import phases
    if not ladder:
        return [(kernel, None) for kernel in phases.recording_order()]
    from kernels import ladder as steps
    return sorted(((s.algorithm, s.name) for s in steps.steps()), key=lambda job: job[0] == "fa2")


def record_phases_here(ladder: bool = False) -> tuple[list[dict], str]:
    """bench.phases for each kernel it knows (with `ladder`: for each ablation step, its `config` the step's name), as
    the results file keeps it; and what could not be recorded, in words (a kernel Proton could not instrument here is
    a sentence, not a lost run)."""
    from bench import phases
    kept, skipped = [], []
    for kernel, step in _phase_jobs(ladder):
        why = phases.unavailable_reason(kernel)
        if why is None:
            try:
                launcher = None
                if step is not None:
                    from kernels.ladder import proton_launcher
                    launcher = proton_launcher(step, PHASE_SHAPE["head_dim"], PHASE_SHAPE["causal"], torch.bfloat16)
                data = phases.record_phase_timeline(kernel, max_programs=PHASE_PROGRAMS, launcher=launcher,
                                                    **PHASE_SHAPE)
            except Exception as exc:  # noqa: BLE001 - a failed recording is said, the bench goes on
                why = f"{type(exc).__name__}: {str(exc)[:300]}"
            else:
                timing = data["timing"]
                kept.append({**data["shape"], "kernel": kernel, "config": step, "program_count": data["program_count"],
                             "plain_ms": timing["plain_ms"], "instrumented_launch_ms": timing["instrumented_launch_ms"],
                             "sm_clock_mhz": data["sm_clock_mhz"], "overhead": timing["overhead"],
                             "profiled_output_identical": data["profiled_output_identical"],
                             "recorded_at": data["recorded_at"], "build": data["build"],
                             "programs": [{"cta": p["cta"], "sm": p["sm"],
                                           "lanes": [{"warp": lane["warp"], "role": lane["role"],
                                                      "spans": lane["spans"]} for lane in p["lanes"]]}
                                          for p in data["programs"]]})
                print(f"phases {kernel}: {data['program_count']} programs, plain {timing['plain_ms']:.4f} ms, "
                      f"overhead {timing['overhead']}", file=sys.stderr, flush=True)
        if why:
            what = f"{kernel} ({step})" if step else kernel
            skipped.append(f"{what}: {why}")
            print(f"phases {what}: not recorded: {why}", file=sys.stderr, flush=True)
    return kept, "; ".join(skipped)


DECODE_KV_LENS = costmodel.DECODE_KV_LENS  # 1K … 1M tokens of cache
DECODE_BATCHES = (1, 8, 32)
DECODE_PAGE_SIZE = 64
DECODE_MEMORY_SHARE = costmodel.DECODE_MEMORY_SHARE  # a setting whose cache (as the kernel reads it) needs more is not timed


def decode_settings(kv_lens: list[int], batches: list[int], hbm_bytes: int | None) -> tuple[list[Setting], list[str]]:
    """The decode sweep: every kernel with a KV-cache path at each (batch, cache length), ours also paged; and the
    settings left out because their cache would not fit (said, never silently)."""
    settings, skipped = [], []
    for batch, kv_len in itertools.product(batches, kv_lens):
        shape = costmodel.decode_shape(batch, kv_len)
        for spec in specs.with_facet("kv_cache"):
            expanded = spec.key == "fa2"  # our prefill kernel has no grouped heads: K/V expanded to every head
            cache = costmodel.kv_bytes(shape.at(kv_heads=shape.heads) if expanded else shape)
            if hbm_bytes and 2 * cache > DECODE_MEMORY_SHARE * hbm_bytes:  # the cache and its copy, or its pages
                skipped.append(f"{spec.key} batch {batch} × {kv_len} keys: its cache needs {cache / 2**30:.0f} GiB")
                continue
            settings.append(Setting(spec.key, shape))
            if spec.key == "decode":
                settings.append(Setting(spec.key, shape, page_size=DECODE_PAGE_SIZE))
    return settings, skipped


def print_decode_table(records: list[dict], copy_gbps: float | None, file=sys.stdout) -> None:
    """The decode records: time per token, bandwidth on the cache's bytes and its share of the copy roof."""
    print(f"{'algorithm':13s} {'B':>3s} {'kv_len':>8s} {'page':>5s} {'splits':>6s} {'status':>6s} {'us':>10s} "
          f"{'GB/s':>7s} {'% copy':>7s}", file=file)
    for r in records:
        share = r["gbps"] / copy_gbps * 100 if r.get("gbps") and copy_gbps else None
        us = r["time_ms"] * 1e3 if r["time_ms"] is not None else None
        print(f"{r['algorithm']:13s} {r['batch']:3d} {r['kv_len']:8d} {_fmt(r.get('page_size'), '5d')} "
              f"{_fmt(r.get('num_splits'), '6d')} {r['status']:>6s} {_fmt(us, '10.1f')} {_fmt(r['gbps'], '7.0f')} "
              f"{_fmt(share, '7.1f')}", file=file)


def fill_settings(head_dims: list[int], dtypes: list[str], causals: list[bool], sm_count: int) -> list[Setting]:
    """FA-2 and the FA1-order kernel at a shape whose batch·heads (FA1's programs, one per head) is at least
    twice the SMs, so that no SM idles: there the two differ by their loop order alone."""
    heads = 64
    batch = max(1, -(-2 * sm_count // heads))
    return [Setting(a, Shape(FILL_SEQ_LEN, batch, heads, d, dt_, c))
            for dt_, d, c, a in itertools.product(dtypes, head_dims, causals, ("fa2", "fa1"))]


def _setting_key(record: dict) -> tuple:
    return (specs.canonical(record["algorithm"]), Shape.of_record(record), record.get("page_size"),
            record.get("config"), record.get("scaling"), record.get("rotation"))


def _phase_key(recording: dict) -> tuple:
    return (specs.canonical(recording["kernel"]), recording.get("config"))


def merged(path: Path, records: list[dict], timelines: list[dict], phases: list[dict], extra: dict,
           command: str, earlier=None) -> tuple[list[dict], list[dict], list[dict], dict, list[dict]]:
    """This run's records over an earlier file's: the earlier records of settings this run did not measure stay
    (with their counts), this run's replace the rest; timelines and phases are this run's where it recorded any.
    meta says which commands measured the file ("merged_from"). Phases are kept per (kernel, ablation step): a
    `--ladder --phases` run keeps the kernels' own recordings, and the other way round. The file's ring runs
    (bench.ring; this bench measures none) come back as they were, last. earlier: the file at path, when the caller
    has loaded it already."""
    if earlier is None:
        from bench.results import load_results_path
        earlier = load_results_path(path)
    fresh = {_setting_key(r) for r in records}
    kept = [r for r in earlier.records if _setting_key(r) not in fresh]
    recorded = {_phase_key(p) for p in phases}
    phases = [p for p in earlier.phases if _phase_key(p) not in recorded] + phases
    history = [earlier.meta.get("command", ""), *earlier.meta.get("merged_from", "").split(" | ")]
    extra = {**extra, "merged_from": " | ".join(c for c in history if c)[:1000],
             "ratios": merged_ratios(earlier.meta.get("ratios") or [], extra.get("ratios") or [])}
    if earlier.meta.get("ring_command") and earlier.ring:  # what measured the ring runs the merge keeps
        extra["ring_command"] = earlier.meta["ring_command"]
    copy = extra.get("decode_copy_gbps") or earlier.meta.get("decode_copy_gbps")
    if copy is not None:  # the decode records' roof stays with them until a decode run replaces both
        extra["decode_copy_gbps"] = copy
    return kept + records, timelines or earlier.timelines, phases, extra, earlier.ring


def merged_ratios(earlier: list[dict], fresh: list[dict]) -> list[dict] | None:
    """The ratio table after a merge: this run's rows (each measured side by side in this run) replace the earlier
    rows of the same (head_dim, causal, dtype); the earlier rows of the others stay. None when neither has any."""
    def key(row):
        return row.get("head_dim") or 0, bool(row.get("causal")), str(row.get("dtype"))
    measured = {key(row) for row in fresh}
    rows = [row for row in earlier if key(row) not in measured] + list(fresh)
    return sorted(rows, key=key) or None


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.phases_only:  # record_phases' child: on the interpreter it writes why nothing could be recorded
        import json
        phases, skipped = record_phases_here(ladder=args.ladder)
        try:
            args.phases_only.write_text(json.dumps({"phases": phases, "skipped": skipped}))
        except OSError as why:  # a full disk: the parent says the recordings failed, no traceback
            print(f"could not write the phase recordings to {args.phases_only}: {why}", file=sys.stderr)
            return 1
        return 0
    if INTERPRET:
        print("no CUDA GPU: the bench measures GPU kernels; on the interpreter use small N via bench.measure",
              file=sys.stderr)
        return 2
    causals = {"both": [False, True], "true": [True], "false": [False]}[args.causal]
    if args.tune:
        tune(args.head_dims, args.dtypes, causals, args.batch, args.heads)
        return 0
    facts = device_facts()  # the roofs are measured at the end, on a GPU the sweep has warmed up
    if args.decode:
        return _main_decode(args, argv, facts)
    if args.ladder or args.fp8:
        return _main_side_by_side(args, argv)
    if args.backward:
        return _main_backward(args, argv)
    shapes = [(args.batch, args.heads, d) for d in args.head_dims]
    for shape in args.shapes:  # a shape with its own head_dim is swept at that one only
        shapes += [shape] if len(shape) == 3 else [(*shape, d) for d in args.head_dims]
    settings = [Setting(a, Shape(n, b, h, d, dt_, c))
                for (b, h, d), dt_, c, a, n in itertools.product(shapes, args.dtypes, causals, args.algorithms,
                                                                 args.seq_lens)]
    if args.fill:
        settings += fill_settings(args.head_dims, args.dtypes, causals, facts["sm_count"])
    records, interrupted = sweep(settings, args.rep_ms)
    timelines = []
    if args.timeline and not interrupted:
        from kernels.trace import sm_timeline
        timelines = [sm_timeline(seq_len=RATIO_SEQ_LEN, heads=args.heads, batch=args.batch, head_dim=128,
                                 causal=c).to_dict() for c in (False, True)]
        timelines = [{**timeline, **provenance("timelines", timeline)} for timeline in timelines]
    torch.cuda.empty_cache()
    facts = device_facts(measure_bandwidth=True)
    print(f"device: {facts['name']}, copy {facts['copy_gbps']:,.0f} GB/s, L2 reads {facts['l2_gbps']:,.0f} GB/s, "
          f"bf16 matmul {facts['matmul_tflops']:,.0f} TFLOPS, max SM clock {facts['sm_clock_mhz']} MHz",
          file=sys.stderr, flush=True)
    phases, phases_skipped = record_phases() if args.phases and not interrupted else ([], "")
    print_table(records)
    ratios = ratio_table(records, batch=args.batch, heads=args.heads)
    print_ratios(ratios)
    if args.out and records:
        command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
        if interrupted:
            command += f" (interrupted: {interrupted})"
        created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        extra = {"ratios": ratios, **({"phases_skipped": phases_skipped} if phases_skipped else {})}
        return write_out(args, facts, records, timelines, command, created, extra, phases)
    return 0


def sweep(settings: list[Setting], rep_ms: float) -> tuple[list[dict], str]:
    """Each setting measured, in order; and "" or, after Ctrl-C, how far it got (the points measured are kept)."""
    records = []
    oom_at = {}
    skipped = set()
    try:
        for i, s in enumerate(settings, 1):
            n = s.shape.seq_len
            key = (s.algorithm, s.shape.at(seq_len=1, kv_len=1))
            if s.spec.max_seq_len and n > s.spec.max_seq_len:
                continue  # its spec says why: minutes of GPU time for a point the story does not need
            why = s.spec.load("unavailable")(s.shape) if s.spec.requirements and s.spec.unavailable else None
            if why:  # a peer installed apart from the app (its requirements file), not here: said once, no record
                if s.algorithm not in skipped:
                    skipped.add(s.algorithm)
                    print(f"skipping {s.algorithm}: {why}", file=sys.stderr, flush=True)
                continue
            if key in oom_at and n > oom_at[key] and not s.spec.ours:
                continue  # PyTorch's eager path past its own wall: nothing new to learn
            r = measure(s, rep_ms=rep_ms).to_dict()
            if r["status"] == "oom":
                oom_at.setdefault(key, n)
            records.append(r)
            print(f"[{i}/{len(settings)}] {s.algorithm} D={s.shape.head_dim} causal={s.shape.causal} N={n}: "
                  f"{r['status']} {_fmt(r['time_ms'], '.3f')} ms", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        done = f"{len(records)} of {len(settings)} points measured"
        print(f"\ninterrupted: {done}; keeping them (the roofs are measured next, a few seconds; Ctrl-C again "
              f"drops everything)", file=sys.stderr, flush=True)
        return records, done
    return records, ""


def write_out(args: argparse.Namespace, facts: dict, records: list[dict], timelines: list[dict], command: str,
              created: str, extra: dict, phases: list[dict]) -> int:
    """The results file, written whole or not at all (bench.results.write_atomically). Where it cannot be (a full
    disk, a --merge-into file spoiled since the start), the measurements go to a file in the system's temporary
    folder instead, and the message says where."""
    from bench.results import ResultsError
    try:
        ring = []
        if args.merge_into and args.out.is_file():
            records, timelines, phases, extra, ring = merged(args.out, records, timelines, phases, extra, command)
        dump_results(args.out, facts, records, timelines, command, created, extra, phases, ring)
    except (OSError, ResultsError) as why:
        print(f"could not write {args.out} ({why}); what it held before is unchanged", file=sys.stderr)
        rescue = Path(tempfile.gettempdir()) / f"bench-{created.replace(':', '')}.json"
        try:
            dump_results(rescue, facts, records, timelines, command, created, extra, phases)
        except (OSError, ResultsError) as again:
            print(f"could not write the measurements to {rescue} either ({again}): only the table above has them",
                  file=sys.stderr)
        else:
            print(f"the measurements are in {rescue}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


def _main_side_by_side(args, argv) -> int:
    """bench --ladder: the ablation's steps and the reference timed in one interleaved run (bench/ladder.py), their
    table with each step ÷ the one before, with --phases each step's Proton lanes. bench --fp8: e4m3 beside bf16 in
    one interleaved run with their errors (bench/fp8.py), their table. With --out the records (merged with
    --merge-into) in a file."""
    from bench import fp8, ladder
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    timed, show, what = ((ladder.time_ladder, ladder.print_ladder, "the ladder") if args.ladder
                         else (fp8.time_fp8, fp8.print_fp8, "FP8"))
    try:
        records = timed(rep_ms=args.rep_ms / 3, say=say)
    except (RuntimeError, ValueError) as why:
        print(f"{what} cannot run here: {why}", file=sys.stderr)
        return 2
    torch.cuda.empty_cache()
    facts = device_facts(measure_bandwidth=True)
    phases, phases_skipped = record_phases(ladder=True) if args.ladder and args.phases else ([], "")
    show(records)
    if not args.out:
        return 0
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    extra = {"ratios": [], **({"phases_skipped": phases_skipped} if phases_skipped else {})}
    return write_out(args, facts, records, [], command, created, extra, phases)


BACKWARD_SEQ_LENS = tuple(n for n in SEQ_LENS if n <= 65536)  # 1K … 64K


def backward_settings(args: argparse.Namespace) -> list[Setting]:
    """The backward sweep: each backward algorithm (bench.measure.backward_algorithms, those of --algorithms when
    it names any) at each head_dim, dtype, mask and length (the lengths innermost, so that PyTorch eager stops at
    its first out-of-memory)."""
    named = [a for a in args.algorithms if a in backward_algorithms()]
    algorithms = named if named and len(named) < len(backward_algorithms()) else list(backward_algorithms())
    seq_lens = BACKWARD_SEQ_LENS if args.seq_lens == list(SEQ_LENS) else args.seq_lens
    causals = {"both": [False, True], "true": [True], "false": [False]}[args.causal]
    return [Setting(a, Shape(n, args.batch, args.heads, d, dt_, c, pass_="backward"))
            for d, dt_, c, a, n in itertools.product(args.head_dims, args.dtypes, causals, algorithms, seq_lens)]


def print_backward_table(records: list[dict], file=sys.stdout) -> None:
    """The backward records: the backward alone, forward + backward, TFLOPS (2.5 × the forward's FLOPs), memory."""
    print(f"{'algorithm':13s} {'D':>4s} {'causal':>6s} {'N':>7s} {'status':>6s} {'bwd ms':>9s} {'fwd+bwd':>9s} "
          f"{'TFLOPS':>7s} {'extra MiB':>10s}", file=file)
    for r in records:
        extra = r["peak_extra_bytes"] if r["status"] == "ok" else r["needed_bytes"]
        print(f"{r['algorithm']:13s} {r['head_dim']:4d} {str(r['causal']):>6s} {r['seq_len']:7d} {r['status']:>6s} "
              f"{_fmt(r['time_ms'], '9.3f')} {_fmt(r.get('fwd_bwd_ms'), '9.3f')} {_fmt(r['tflops'], '7.1f')} "
              f"{_fmt(None if extra is None else extra / 2**20, '10.1f')}", file=file)


def backward_ratios(records: list[dict]) -> list[str]:
    """Our backward's speed against each peer's at each length both ran (peer's time ÷ ours: > 1, ours is faster)."""
    ok = {(r["algorithm"], r["head_dim"], r["causal"], r["seq_len"]): r for r in records if r["status"] == "ok"}
    lines = []
    for (algo, d, causal, n), r in sorted(ok.items()):
        if algo != BASE:
            continue
        peers = [f"÷{other} {ok[(other, d, causal, n)]['time_ms'] / r['time_ms']:.2f}"
                 for other in backward_algorithms() if other != BASE and (other, d, causal, n) in ok]
        lines.append(f"  backward D={d} {'causal' if causal else 'full  '} N={n:6d}: {BASE} "
                     f"{r['tflops']:.1f} TFLOPS  " + "  ".join(peers))
    return lines


def _main_backward(args, argv) -> int:
    """bench --backward: the backward sweep, its table and ratios, and (with --out) its records in a results file."""
    records, interrupted = sweep(backward_settings(args), args.rep_ms)
    torch.cuda.empty_cache()
    facts = device_facts(measure_bandwidth=True)
    print_backward_table(records)
    print("\nbackward: the other's time ÷ ours (> 1: ours is faster)")
    for line in backward_ratios(records):
        print(line)
    if not (args.out and records):
        return 0
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    if interrupted:
        command += f" (interrupted: {interrupted})"
    created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return write_out(args, facts, records, [], command, created, {"ratios": []}, [])


def _main_decode(args, argv, facts: dict) -> int:
    """bench --decode: the decode sweep, its table, and (with --out) its records in a results file."""
    settings, skipped = decode_settings(args.kv_lens, args.decode_batches, facts.get("hbm_bytes"))
    for line in skipped:
        print(f"not timed: {line}", file=sys.stderr)
    records = []
    for i, s in enumerate(settings, 1):
        r = measure(s, rep_ms=args.rep_ms).to_dict()
        records.append(r)
        print(f"[{i}/{len(settings)}] {s.algorithm} B={s.shape.batch} kv_len={s.shape.kv_len} page={s.page_size}: "
              f"{r['status']} {_fmt(r['time_ms'], '.4f')} ms", file=sys.stderr, flush=True)
    torch.cuda.empty_cache()
    facts = device_facts(measure_bandwidth=True)
    print_decode_table(records, facts.get("copy_gbps"))
    if args.out:
        command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
        created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        # the decode roof is this run's copy (meta.decode_copy_gbps); merged into a file, the file keeps its own
        # device facts, which its prefill records were measured against
        timelines, phases, ring, extra = [], [], [], {"ratios": [], "decode_copy_gbps": facts.get("copy_gbps")}
        if args.merge_into and args.out.is_file():
            from bench.results import load_results_path
            earlier = load_results_path(args.out)
            facts = earlier.facts
            records, timelines, phases, extra, ring = merged(args.out, records, timelines, phases, extra, command,
                                                             earlier)
        dump_results(args.out, facts, records, timelines, command, created, extra, phases, ring)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
