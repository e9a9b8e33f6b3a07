"""Compile every shipped configuration of every kernel for real GPU targets, ahead of time, with no GPU.

    FLASH_LIVE_BACKEND=aot python3 -m bench.compile_check [--jobs N] [--json PATH] [--only KEY] [--cache]
        [--backward all|representative|candidates] [--sm80 all|representative] [--fp32 all|representative]

CI has no GPU and the H200 runs another Triton (3.6) than our pin (3.7.1), so without this a GPU user's first
launch under the pinned Triton would be its first compile. Each kernel's spec (kernels/specs.py) names the function
that lists what it ships (`compile`: (label, targets, launch) per configuration); this drives each launch with small
CPU tensors, captures it (kernel, arguments, launch options) instead of running it, and hands the capture to the same
binder and compile that a real launch uses, with the target set to sm_90 and, for the `tl` kernels, sm_80 (the
Gluon FA-3 kernel is Hopper only). The bench's own L2 bandwidth kernel (bench/l2_read.py) is compiled too. Nothing
is launched. Prints a table (registers, stack, shared memory from the cubin) and exits non-zero if any configuration
fails to compile. Triton's private launch machinery it leans on is in bench/triton_private.py.
"""
from __future__ import annotations

import os

if __name__ == "__main__":  # run as the program: compile only, no launches (before kernels.runtime is imported).
    # Not on import: the variable would stay in the importer's environment and every subprocess it starts would
    # compile without launching (a test that imported this module made the ring bench's outputs garbage in CI)
    os.environ.setdefault("FLASH_LIVE_BACKEND", "aot")

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

from kernels import runtime  # noqa: E402  first: the backend is chosen here

import torch  # noqa: E402
import triton  # noqa: E402

from bench import triton_private  # noqa: E402
from kernels import specs  # noqa: E402

TARGETS = {"sm_90": 90, "sm_80": 80}
BANDWIDTH = "bandwidth"  # the bench's L2 read kernel, besides the kernels' specs


@dataclass
class Entry:
    kernel: str           # module:function of the JIT kernel
    label: str            # the configuration, in words
    target: str           # "sm_90" | "sm_80"
    fn: object = field(repr=False, default=None)
    args: tuple = field(repr=False, default=())
    kwargs: dict = field(repr=False, default_factory=dict)


@dataclass
class Result:
    kernel: str
    label: str
    target: str
    ok: bool
    seconds: float
    regs: int | None = None
    stack: int | None = None
    local: int | None = None
    shared: int | None = None  # bytes of shared memory the launch asks for
    hgmma: int | None = None   # wgmma instructions in the SASS (sm_90 matrix kernels)
    hgmma_reg_a: int | None = None  # of those, the ones whose A operand comes from registers (not shared memory)
    named_arrives: int | None = None  # arrives on our named barriers (the FA-3 kernel's ping-pong hand-off)
    votes: int | None = None  # warp votes (the FA-3 kernel's conditional rescale)
    wgmma_waits: int | None = None  # waits on issued wgmmas (WARPGROUP.DEPBAR); as many as wgmmas: issued one by one
    error: str = ""


# -- capture: run a launcher, keep its kernel launches instead of running them --------------------

def _capture(call) -> list[tuple]:
    with triton_private.captured_launches() as launches:
        call()
    if not launches:
        raise RuntimeError("the launcher launched no kernel")
    return launches


# -- what is shipped ------------------------------------------------------------------------------

def kernel_sets() -> tuple[str, ...]:
    """What --only can name: the specs with a compile facet, and the bench's bandwidth kernel."""
    return (*(spec.key for spec in specs.with_facet("compile")), BANDWIDTH)


BACKWARD_SUBSETS = ("all", "representative", "candidates")
SUBSETS = ("all", "representative")  # --sm80 and --fp32
# --sm80 representative (CI's time): the sm_80 builds of the head_dims the bench measures; sm_90 keeps every one
SM80_HEAD_DIMS = (64, 128)
# --fp32 representative (CI's time): float32 builds at head_dim 64 only, on both targets. They are the slowest builds
# (4-15 s each, 16-bit ones 1-3 s): at every head_dim they took 437 of the CI subset's 1,010 compile-seconds here
# (2026-12-07). 16-bit builds keep every head_dim; the interpreter tests run the float32 paths at every head_dim.
FP32_HEAD_DIMS = (64,)


def _sm80_keeps(label: str) -> bool:
    """Whether --sm80 representative builds this configuration for sm_80: one at a head_dim the bench measures, or
    one without a head_dim (the bench's L2 read)."""
    head_dim = _head_dim(label)
    return head_dim is None or head_dim in SM80_HEAD_DIMS


def _fp32_keeps(label: str) -> bool:
    """Whether --fp32 representative builds this configuration: 16-bit or 8-bit, or float32 at head_dim 64."""
    head_dim = _head_dim(label)
    return " float32 " not in f" {label} " or head_dim is None or head_dim in FP32_HEAD_DIMS


def _head_dim(label: str) -> int | None:
    """The head_dim a configuration's label names (`D=64 `), None where it names none (the bench's L2 read)."""
    m = re.search(r"\bD=(\d+) ", label)
    return int(m.group(1)) if m else None


def _spec_entries(spec, backward: str = "all", sm80: str = "all", fp32: str = "all") -> list[Entry]:
    entries = []
    if backward == "candidates":  # the backward's tile candidates alone
        shipped = spec.load("backward_compile")(backward) if spec.backward_compile else []
    else:
        shipped = spec.load("compile")() + (spec.load("backward_compile")(backward) if spec.backward_compile else [])
    for label, targets, launch in shipped:  # its forward's launches, then its backward's
        if sm80 == "representative" and not _sm80_keeps(label):
            targets = tuple(t for t in targets if t != "sm_80")
        if fp32 == "representative" and not _fp32_keeps(label):
            targets = ()
        if not targets:
            continue
        for fn, args, kwargs in _capture(launch):
            entries += [Entry(_name(fn), label, target, fn, args, kwargs) for target in targets]
    return entries


def _bandwidth_entries() -> list[Entry]:
    from bench import l2_read
    x, out = torch.empty(l2_read.L2_BLOCK * 4, dtype=torch.float16), torch.empty(4, dtype=torch.float32)
    return [Entry(_name(fn), "L2 read", t, fn, args, kwargs)
            for fn, args, kwargs in _capture(lambda: l2_read.read_repeatedly(x, out, l2_read.L2_BLOCK, 64))
            for t in TARGETS]


def _name(fn) -> str:
    return f"{fn.fn.__module__}:{fn.fn.__name__}"


def _entries(only: list[str] | None = None, backward: str = "all", sm80: str = "all",
             fp32: str = "all") -> list[Entry]:
    entries = []
    for spec in specs.with_facet("compile"):
        if not only or spec.key in only:
            entries += _spec_entries(spec, backward, sm80, fp32)
    if (not only or BANDWIDTH in only) and backward != "candidates":
        entries += _bandwidth_entries()
    unique, seen = [], set()
    for e in entries:  # several launchers share a kernel (naive's matmuls at every seq_len): compile each once
        key = (e.kernel, e.target, triton_private.launch_key(e.fn, e.args, e.kwargs, TARGETS[e.target]))
        if key not in seen:
            seen.add(key)
            unique.append(e)
    return unique


# -- compile one ----------------------------------------------------------------------------------

def compile_entry(fn, args: tuple, kwargs: dict, capability: int):
    """Compile one captured launch for cuda:<capability> through the binder and compile a launch uses."""
    return triton_private.compile_launch(fn, args, kwargs, capability)


_CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def _cubin_facts(cubin: bytes, sass: bool) -> dict:
    """Registers, stack and local memory from the cubin; with `sass`, the wgmma count from the disassembly
    (half a second a kernel, so only where wgmma is the point: the Gluon kernel, and the backward's sm_90 builds,
    whose wgmmas triton 3.6 may leave serialized: BENCHMARKS §1d)."""
    facts: dict = {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            usage = subprocess.run([str(_CUOBJDUMP), "-res-usage", f.name], capture_output=True, text=True,
                                   timeout=60).stdout
            listing = subprocess.run([str(_CUOBJDUMP), "-sass", f.name], capture_output=True, text=True,
                                     timeout=60).stdout if sass else None
        except (OSError, subprocess.SubprocessError):
            return facts
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", usage)
    if m:
        facts.update(regs=int(m[1]), stack=int(m[2]), local=int(m[3]))
    if listing is not None:
        facts["hgmma"] = len(re.findall(r"\b[HQ]GMMA\.", listing))  # QGMMA: 8-bit operands
        # `HGMMA.64x128x16.F32.BF16 R24, R180, gdesc[UR8], …`: A from registers; `R24, gdesc[UR8], …`: from smem
        facts["hgmma_reg_a"] = len(re.findall(r"\b[HQ]GMMA\.\S+\s+R\d+,\s*R\d+,", listing))
        # the ping-pong hand-off through named barriers (`BAR.ARV 0x8, 0x100`: ids 8 and up, 256 threads), and the
        # conditional rescale's warp vote (`VOTE.ANY`) before the branch around the multiplies
        facts["named_arrives"] = len(re.findall(r"\bBAR\.ARV\s+0x[89a-f],\s*0x100", listing))
        facts["votes"] = len(re.findall(r"\bVOTE\.ANY\b", listing))
        # ptxas's C7515 ("wgmma.mma_async instructions are serialized") shows as one wait per wgmma
        facts["wgmma_waits"] = len(re.findall(r"\bWARPGROUP\.DEPBAR\b", listing))
    return facts


def _reads_sass(e: Entry) -> bool:
    return e.fn.is_gluon() or (e.target == "sm_90" and e.kernel.endswith((":_bwd_dkdv", ":_bwd_dq")))


def serialized(r: Result) -> bool:
    """Whether a build issues each of its wgmmas alone (a wait per wgmma, ptxas's C7515), where the SASS was read."""
    return bool(r.hgmma) and r.wgmma_waits is not None and r.wgmma_waits >= r.hgmma


_ENTRIES: list[Entry] = []  # filled in the parent before the workers fork


def _compile_one(index: int) -> Result:
    e = _ENTRIES[index]
    start = time.perf_counter()
    try:
        kernel = compile_entry(e.fn, e.args, e.kwargs, TARGETS[e.target])
        facts = _cubin_facts(kernel.asm["cubin"], sass=_reads_sass(e))
        return Result(e.kernel, e.label, e.target, True, time.perf_counter() - start,
                      shared=kernel.metadata.shared, **facts)
    except Exception as exc:  # noqa: BLE001 - every failure is a row of the table
        message = f"{type(exc).__name__}: {exc}".strip().splitlines()
        return Result(e.kernel, e.label, e.target, False, time.perf_counter() - start,
                      error=" | ".join(line.strip() for line in message if line.strip())[-600:])


def run_check(only: list[str] | None = None, jobs: int | None = None, backward: str = "all",
              sm80: str = "all", fp32: str = "all") -> list[Result]:
    if not runtime.AOT:
        raise SystemExit(f"bench.compile_check needs FLASH_LIVE_BACKEND=aot (this process chose "
                         f"{runtime.backend()!r}: {runtime.backend_reason()})")
    _ENTRIES[:] = _entries(only, backward, sm80, fp32)
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1:
        return [_compile_one(i) for i in range(len(_ENTRIES))]
    with get_context("fork").Pool(jobs) as pool:
        return pool.map(_compile_one, range(len(_ENTRIES)), chunksize=1)


def _table(results: list[Result]) -> str:
    rows = [("kernel", "configuration", "target", "ok", "regs", "stack", "smem", "hgmma", "waits", "s")]
    for r in results:
        rows.append((r.kernel.split(":")[-1], r.label, r.target, "ok" if r.ok else "FAIL",
                     str(r.regs if r.regs is not None else "-"), str(r.stack if r.stack is not None else "-"),
                     str(r.shared if r.shared is not None else "-"), str(r.hgmma if r.hgmma is not None else "-"),
                     (f"{r.wgmma_waits}" + (" serial" if serialized(r) else "")) if r.wgmma_waits is not None
                     else "-", f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    for r in results:
        if not r.ok:
            lines.append(f"FAILED {r.kernel} [{r.label}] {r.target}: {r.error}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=None, help="compile in this many processes (default: cores)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--only", action="append", choices=kernel_sets(), help="only these kernels (spec keys)")
    parser.add_argument("--backward", choices=BACKWARD_SUBSETS, default="all",
                        help="the backwards' launches: all shipped (default), a representative few (CI's time: "
                             "kernels/fa2_bwd.py REPRESENTATIVE), or only the tile candidates (nothing else)")
    parser.add_argument("--sm80", choices=SUBSETS, default="all",
                        help="the sm_80 builds: all (default), or those at head_dim 64 and 128 only (CI's time; "
                             "sm_90 builds every configuration either way)")
    parser.add_argument("--fp32", choices=SUBSETS, default="all",
                        help="the float32 builds: all (default), or those at head_dim 64 only (CI's time; 16-bit "
                             "builds keep every head_dim either way)")
    parser.add_argument("--cache", action="store_true", help="use Triton's disk cache (default: a fresh one, so "
                                                             "every configuration really compiles)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compile-check-cache-") as cache:
        if not args.cache:
            os.environ["TRITON_CACHE_DIR"] = cache
        results = run_check(args.only, args.jobs, args.backward, args.sm80, args.fp32)
    elapsed = time.perf_counter() - start
    print(_table(results))
    failed = [r for r in results if not r.ok]
    per_target = {t: sum(r.ok for r in results if r.target == t) for t in TARGETS}
    print(f"compile_check: triton {triton.__version__}: {len(results) - len(failed)}/{len(results)} configurations "
          f"compiled ({', '.join(f'{t}: {n}' for t, n in per_target.items())}) in {elapsed:.0f} s"
          + (f"; {len(failed)} FAILED" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps({"triton": triton.__version__, "seconds": elapsed, "sm80": args.sm80,
                                         "sm80_head_dims": list(SM80_HEAD_DIMS) if args.sm80 == "representative"
                                         else None, "fp32": args.fp32,
                                         "fp32_head_dims": list(FP32_HEAD_DIMS) if args.fp32 == "representative"
                                         else None, "results": [asdict(r) for r in results]}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
