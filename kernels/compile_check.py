"""Compile every shipped configuration of every kernel for real GPU targets, ahead of time, with no GPU.

    FLASH_LIVE_BACKEND=aot python3 -m kernels.compile_check [--jobs N] [--json PATH] [--only NAME] [--all-dtypes]
                                                           [--cache]

CI has no GPU and the H200 runs another Triton (3.6) than our pin (3.7.1), so without this a GPU user's first
launch under the pinned Triton would be its first compile. This drives each kernel module's own launcher with
small CPU tensors, captures the launch (kernel, arguments, launch options) instead of running it, and hands the
capture to the same binder and compile that a real launch uses, with the target set to sm_90 (every kernel) and
sm_80 (the `tl` kernels; the Gluon FA-3 kernel is Hopper only). Nothing is launched. Prints a table (registers,
stack, shared memory from the cubin) and exits non-zero if any configuration fails to compile.

Coupling to the kernel modules, all in `_entries()` below: kernels.flash `launch_flash` (its `use_tma` and
`longest_first` keywords), `TUNED_CONFIGS`, `config_for` (and `trace_sm`, as `flash_attention_sm_timeline` calls it); kernels.flash_v1
`launch_flash_v1`, `config_for_v1`; kernels.naive `naive_attention`, `_softmax_launch`'s seq_len classes via
costmodel; kernels.l2_read `read_repeatedly`; kernels.flash_v3 `launch_v3`, `V3_CONFIGS`.
A launcher that changes its arguments changes what is compiled here; one that is renamed fails the check loudly.
"""
from __future__ import annotations

import os

os.environ.setdefault("FLASH_LIVE_BACKEND", "aot")  # before kernels.runtime is imported: compile only, no launches

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

from kernels import runtime  # noqa: E402  first: the backend is chosen here

import torch  # noqa: E402
import triton  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

TARGETS = {"sm_90": 90, "sm_80": 80}
# The tuned tables are keyed by dtype bytes: one 16-bit dtype covers each 16-bit configuration (bf16, what the bench
# times); --all-dtypes adds float16 (twice the compiles). The FA-3 kernel always gets both.
SIXTEEN_BIT = [torch.bfloat16]


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
    error: str = ""


# -- capture: run a launcher, keep its kernel launches instead of running them --------------------

@contextmanager
def _captured_launches():
    launches: list[tuple[JITFunction, tuple, dict]] = []
    original = JITFunction.run

    def record(self, *args, grid, warmup, **kwargs):
        launches.append((self, args, kwargs))

    JITFunction.run = record
    try:
        yield launches
    finally:
        JITFunction.run = original


def _capture(call) -> list[tuple[JITFunction, tuple, dict]]:
    with _captured_launches() as launches:
        call()
    if not launches:
        raise RuntimeError("the launcher launched no kernel")
    return launches


def _qkv(head_dim: int, dtype: torch.dtype, seq_len: int = 128, batch: int = 1, heads: int = 2):
    # CPU tensors: the launchers only read shapes, strides, dtypes and (for alignment) data pointers
    return tuple(torch.randn(batch, heads, seq_len, head_dim).to(dtype) for _ in range(3))


# -- what is shipped ------------------------------------------------------------------------------

def _flash_entries() -> list[Entry]:
    import costmodel
    from kernels import flash
    entries = []
    classes = {(d, b, c) for d in costmodel.HEAD_DIMS for b in (2, 4) for c in (False, True)} | set(flash.TUNED_CONFIGS)
    for head_dim, dtype_bytes, causal in sorted(classes):
        for dtype in (SIXTEEN_BIT if dtype_bytes == 2 else (torch.float32,)):
            config = flash.config_for(head_dim, dtype, causal)
            tuned = "tuned" if (head_dim, dtype_bytes, causal) in flash.TUNED_CONFIGS else "default"
            cfg = f"{config.block_m}x{config.block_n} w{config.num_warps} s{config.num_stages}"
            base = f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} {cfg} ({tuned})"
            # on Hopper 16-bit inputs take the TMA path (pointer loads when strides are unaligned); fp32 and
            # older GPUs take pointer loads
            paths = [("sm_90", True), ("sm_90", False), ("sm_80", False)] if dtype_bytes == 2 else \
                [("sm_90", False), ("sm_80", False)]
            for target, use_tma in paths:
                q, k, v = _qkv(head_dim, dtype)
                for fn, args, kwargs in _capture(lambda: flash.launch_flash(q, k, v, causal, 0.125, config,
                                                                              use_tma=use_tma)):
                    entries.append(Entry(_name(fn), f"{base} {'tma' if use_tma else 'pointers'}", target,
                                         fn, args, kwargs))
            if dtype_bytes == 2:  # the app's SM timeline on the H200 (flash_attention_sm_timeline): recording on
                q, k, v = _qkv(head_dim, dtype)
                sm = torch.empty((2, 1, 3), dtype=torch.int64)
                for fn, args, kwargs in _capture(lambda: flash.launch_flash(q, k, v, causal, 0.125, config,
                                                                              trace_sm=sm, use_tma=True)):
                    entries.append(Entry(_name(fn), f"{base} sm-timeline", "sm_90", fn, args, kwargs))
    return entries


def _flash_v1_entries() -> list[Entry]:
    import costmodel
    from kernels import flash_v1
    entries = []
    for head_dim in costmodel.HEAD_DIMS:
        for dtype in SIXTEEN_BIT + [torch.float32]:
            for causal in (False, True):
                config = flash_v1.config_for_v1(head_dim, dtype)
                label = (f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} "
                         f"{config.block_m}x{config.block_n} w{config.num_warps}")
                q, k, v = _qkv(head_dim, dtype)
                for fn, args, kwargs in _capture(lambda: flash_v1.launch_flash_v1(q, k, v, causal, 0.125, config)):
                    entries += [Entry(_name(fn), label, t, fn, args, kwargs) for t in TARGETS]
    return entries


def _naive_entries() -> list[Entry]:
    import costmodel
    from kernels import naive
    entries = []
    # the softmax kernel's constexprs follow seq_len: one row block per power of two up to the single-pass limit,
    # then the two-pass kernel
    seq_lens = [16 << i for i in range((costmodel.SOFTMAX_SINGLE_PASS_MAX // 16).bit_length())]
    seq_lens.append(costmodel.SOFTMAX_SINGLE_PASS_MAX + 16)
    for head_dim in costmodel.HEAD_DIMS:
        for dtype in SIXTEEN_BIT + [torch.float32]:
            for causal in (False, True):
                for seq_len in (seq_lens if head_dim == 64 else seq_lens[:1]):  # softmax: dtype, not head_dim
                    q, k, v = _qkv(head_dim, dtype, seq_len=seq_len, heads=1)
                    label = f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} N={seq_len}"
                    for fn, args, kwargs in _capture(lambda: naive.naive_attention(q, k, v, causal=causal)):
                        entries += [Entry(_name(fn), label, t, fn, args, kwargs) for t in TARGETS]
    return entries


def _bandwidth_entries() -> list[Entry]:
    from kernels import l2_read
    x, out = torch.empty(l2_read.L2_BLOCK * 4, dtype=torch.float16), torch.empty(4, dtype=torch.float32)
    return [Entry(_name(fn), "L2 read", t, fn, args, kwargs)
            for fn, args, kwargs in _capture(lambda: l2_read.read_repeatedly(x, out, l2_read.L2_BLOCK, 64))
            for t in TARGETS]


def _fa3_entries() -> list[Entry]:
    from kernels import flash_v3
    entries = []
    for (head_dim, causal), config in sorted(flash_v3.V3_CONFIGS.items()):
        for dtype in flash_v3.SUPPORTED_DTYPES:
            q, k, v = _qkv(head_dim, dtype, seq_len=1000)
            label = f"D={head_dim} {str(dtype)[6:]} {'causal' if causal else 'full'} {config.label}"
            for fn, args, kwargs in _capture(lambda: flash_v3.launch_v3(q, k, v, causal, 0.125, config)):
                entries.append(Entry(_name(fn), label, "sm_90", fn, args, kwargs))  # wgmma: Hopper only
    return entries


KERNEL_SETS = {"flash": _flash_entries, "flash_v1": _flash_v1_entries, "naive": _naive_entries,
               "bandwidth": _bandwidth_entries, "flash_v3": _fa3_entries}


def _name(fn: JITFunction) -> str:
    return f"{fn.fn.__module__}:{fn.fn.__name__}"


def _entries(only: list[str] | None = None) -> list[Entry]:
    entries = []
    for name, make in KERNEL_SETS.items():
        if not only or name in only:
            entries += make()
    unique, seen = [], set()
    for e in entries:  # several launchers share a kernel (naive's matmuls at every seq_len): compile each once
        key = (e.kernel, e.target, _launch_key(e))
        if key not in seen:
            seen.add(key)
            unique.append(e)
    return unique


def _launch_key(e: Entry) -> str:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature
    backend = make_backend(GPUTarget("cuda", TARGETS[e.target], 32))
    binder = create_function_from_signature(e.fn.signature, e.fn.params, backend)
    _, specialization, options = binder(*e.args, **e.kwargs)
    return repr((specialization, sorted(options.items())))


# -- compile one ----------------------------------------------------------------------------------

def compile_entry(fn: JITFunction, args: tuple, kwargs: dict, capability: int):
    """Compile one captured launch for cuda:<capability> through the binder and compile a launch uses."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    kwargs = dict(kwargs)  # what JITFunction.run adds before binding
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
    if fn.is_gluon():
        from triton.experimental.gluon._runtime import GluonASTSource as source_cls
    else:
        source_cls = ASTSource
    return triton.compile(source_cls(fn, signature, constexprs, attrs), target=target, options=options.__dict__)


_CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def _cubin_facts(cubin: bytes, sass: bool) -> dict:
    """Registers, stack and local memory from the cubin; with `sass`, the wgmma count from the disassembly
    (half a second a kernel, so only for the Gluon kernel, whose point is wgmma)."""
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
        facts["hgmma"] = len(re.findall(r"\bHGMMA\.", listing))
        # `HGMMA.64x128x16.F32.BF16 R24, R180, gdesc[UR8], …`: A from registers; `R24, gdesc[UR8], …`: from smem
        facts["hgmma_reg_a"] = len(re.findall(r"\bHGMMA\.\S+\s+R\d+,\s*R\d+,", listing))
        # the ping-pong hand-off through named barriers (`BAR.ARV 0x8, 0x100`: ids 8 and up, 256 threads), and the
        # conditional rescale's warp vote (`VOTE.ANY`) before the branch around the multiplies
        facts["named_arrives"] = len(re.findall(r"\bBAR\.ARV\s+0x[89a-f],\s*0x100", listing))
        facts["votes"] = len(re.findall(r"\bVOTE\.ANY\b", listing))
    return facts


_ENTRIES: list[Entry] = []  # filled in the parent before the workers fork


def _compile_one(index: int) -> Result:
    e = _ENTRIES[index]
    start = time.perf_counter()
    try:
        kernel = compile_entry(e.fn, e.args, e.kwargs, TARGETS[e.target])
        facts = _cubin_facts(kernel.asm["cubin"], sass=e.fn.is_gluon())
        return Result(e.kernel, e.label, e.target, True, time.perf_counter() - start,
                      shared=kernel.metadata.shared, **facts)
    except Exception as exc:  # noqa: BLE001 - every failure is a row of the table
        message = f"{type(exc).__name__}: {exc}".strip().splitlines()
        return Result(e.kernel, e.label, e.target, False, time.perf_counter() - start,
                      error=" | ".join(line.strip() for line in message if line.strip())[-600:])


def run_check(only: list[str] | None = None, jobs: int | None = None) -> list[Result]:
    if not runtime.AOT:
        raise SystemExit(f"kernels.compile_check needs FLASH_LIVE_BACKEND=aot (this process chose "
                         f"{runtime.backend()!r}: {runtime.backend_reason()})")
    _ENTRIES[:] = _entries(only)
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1:
        return [_compile_one(i) for i in range(len(_ENTRIES))]
    with get_context("fork").Pool(jobs) as pool:
        return pool.map(_compile_one, range(len(_ENTRIES)), chunksize=1)


def _table(results: list[Result]) -> str:
    rows = [("kernel", "configuration", "target", "ok", "regs", "stack", "smem", "hgmma", "s")]
    for r in results:
        rows.append((r.kernel.split(":")[-1], r.label, r.target, "ok" if r.ok else "FAIL",
                     str(r.regs if r.regs is not None else "-"), str(r.stack if r.stack is not None else "-"),
                     str(r.shared if r.shared is not None else "-"), str(r.hgmma if r.hgmma is not None else "-"),
                     f"{r.seconds:.1f}"))
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
    parser.add_argument("--only", action="append", choices=sorted(KERNEL_SETS), help="only these kernel sets")
    parser.add_argument("--all-dtypes", action="store_true", help="float16 as well as bfloat16 for the tl kernels")
    parser.add_argument("--cache", action="store_true", help="use Triton's disk cache (default: a fresh one, so "
                                                             "every configuration really compiles)")
    args = parser.parse_args(argv)
    if args.all_dtypes:
        SIXTEEN_BIT[:] = [torch.float16, torch.bfloat16]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compile-check-cache-") as cache:
        if not args.cache:
            os.environ["TRITON_CACHE_DIR"] = cache
        results = run_check(args.only, args.jobs)
    elapsed = time.perf_counter() - start
    print(_table(results))
    failed = [r for r in results if not r.ok]
    per_target = {t: sum(r.ok for r in results if r.target == t) for t in TARGETS}
    print(f"compile_check: triton {triton.__version__}: {len(results) - len(failed)}/{len(results)} configurations "
          f"compiled ({', '.join(f'{t}: {n}' for t, n in per_target.items())}) in {elapsed:.0f} s"
          + (f"; {len(failed)} FAILED" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps({"triton": triton.__version__, "seconds": elapsed,
                                         "results": [asdict(r) for r in results]}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
