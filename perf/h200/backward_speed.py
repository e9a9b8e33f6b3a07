"""The backwards on the H200, the teaching one (kernels/fa2_bwd.py) and the FA-3 style one (kernels/fa3_bwd.py):
correctness, then time beside SDPA's backwards (~3 min a section).

    PYTHONUNBUFFERED=1 python -m perf.h200.backward_speed [--json PATH] [--only check,rows,candidates,fa3,memory,split]
        [--head-dims 256,64]

Each section runs on its own: an exception prints its traceback and the next section still runs (wrong gradients in
a. still stop the timing: exit 2).

a. dq, dk, dv of ours against float64 autograd of the reference: bf16 and fp16, d64 and d128, causal and not,
   ragged N (1, 1000, 1337). A wrong answer: exit 2 before anything is timed.
b. backward alone (fwd outside the timing), ours vs SDPA cuDNN and SDPA FA-2, B2 H16, 8K and 16K, d64 and d128,
   causal and not, bf16: interleaved rounds, median ms; TFLOPS = 2.5 × 4·B·H·N²·D (halved when causal); ratios.
c. candidates (kernels/fa2_bwd.py CANDIDATES, by head_dim and mask) beside the shipped configs: first their gradients
   against the shipped tiles' at ragged N (1, 1000, 1337; B2 H3), then B2 H16 4K, 8K and 16K, bf16: the backward
   kernels alone from one forward's O and LSE, interleaved rounds, each ÷ shipped (> 1: the candidate is faster),
   and its gradients against the shipped tiles' (relative error).
d. the FA-3 style backward (kernels/fa3_bwd.py, Hopper): its configurations' gradients against float64 (ragged N),
   then B2 H16 4K, 8K and 16K bf16, d64 and d128, causal and not, beside the teaching backward and SDPA's cuDNN and
   FA-2 backwards in interleaved rounds (`fa3`; ~3 min).
e. peak extra memory of fwd+bwd at 64K (B1 H16 d128 causal): ours vs O + LSE + dQ + dK + dV.
f. where the teaching backward's time goes (`split`; not in the default run): B2 H16 8K and 16K bf16, d64 and d128,
   causal and not, each CUDA kernel's time under torch.profiler (10 backwards), ours (Δ, dK/dV, dQ) beside SDPA's
   FA-2 backward (its own kernels), with the tile products each of ours executes (dK/dV 4, dQ 3 per tile pair) as
   TFLOPS of executed work.
"""
from __future__ import annotations

import json
import statistics
import sys
import traceback

from kernels.runtime import backend  # first: it picks the backend
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from kernels.fa2 import flash_attention  # differentiable: its backward is kernels/fa2_bwd.py
from kernels.fa2_bwd import CANDIDATES, config_for, launch_backward
from kernels.reference import reference_gradients, relative_error
from perf.h200.backward_host import kernel_ms

TOL = {torch.bfloat16: 3e-2, torch.float16: 5e-3}
# `--head-dims 256,64`: the candidates section takes only these head_dims' CANDIDATES (all of them without it)
HEAD_DIMS = ([int(d) for d in sys.argv[sys.argv.index("--head-dims") + 1].split(",")]
             if "--head-dims" in sys.argv else None)


def check() -> bool:
    ok = True
    for dtype in (torch.bfloat16, torch.float16):
        for d in (64, 128):
            for causal in (False, True):
                for n in (1, 1000, 1337):
                    gen = torch.Generator(device="cuda").manual_seed(n + d)
                    q, k, v = (torch.randn(2, 3, n, d, generator=gen, device="cuda").to(dtype).requires_grad_()
                               for _ in range(3))
                    out = flash_attention(q, k, v, causal=causal)
                    do = torch.randn(out.shape, generator=gen, device="cuda").to(dtype)
                    out.backward(do)
                    refs = reference_gradients(q, k, v, do, causal)
                    errs = [relative_error(t.grad, r) if r.norm() > 0 else t.grad.abs().max().item()
                            for t, r in zip((q, k, v), refs)]
                    good = max(errs) < TOL[dtype]
                    ok &= good
                    print(f"check {str(dtype)[6:]:8} d{d} {'causal' if causal else 'full  '} N={n:5}: "
                          f"dq {errs[0]:.1e} dk {errs[1]:.1e} dv {errs[2]:.1e} {'ok' if good else 'WRONG'}")
    return ok


def _bwd_timer(fn, q, k, v, causal):
    out = fn(q, k, v, causal)
    do = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)


def ours(q, k, v, causal):
    return flash_attention(q, k, v, causal=causal)


def sdpa(backend_):
    def run(q, k, v, causal):
        with sdpa_kernel(backend_):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


PEERS = {"ours": ours, "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "sdpa_fa2": sdpa(SDPBackend.FLASH_ATTENTION)}


def time_all(rounds=3):
    rows = []
    for n in (8192, 16384):
        for d in (64, 128):
            for causal in (False, True):
                q, k, v = (torch.randn(2, 16, n, d, device="cuda", dtype=torch.bfloat16).requires_grad_()
                           for _ in range(3))
                timers = {name: _bwd_timer(fn, q, k, v, causal) for name, fn in PEERS.items()}
                times = {name: [] for name in PEERS}
                for _ in range(rounds):  # interleaved
                    for name, t in timers.items():
                        times[name].append(do_bench(t, warmup=5, rep=30))
                flops = 2.5 * 4 * 2 * 16 * n * n * d / (2 if causal else 1)
                ms = {name: statistics.median(ts) for name, ts in times.items()}
                row = {"n": n, "d": d, "causal": causal, "ms": ms,
                       "tflops": {name: flops / (t * 1e-3) / 1e12 for name, t in ms.items()}}
                rows.append(row)
                tf = row["tflops"]
                print(f"N={n:6} d{d:3} {'causal' if causal else 'full  '}  " + "  ".join(
                    f"{name} {tf[name]:6.1f}" for name in PEERS)
                      + f"  ours/fa2 {tf['ours'] / tf['sdpa_fa2']:.2f}  ours/cudnn {tf['ours'] / tf['sdpa_cudnn']:.2f}")
                del timers
    return rows


def _ragged_case(n, d, causal):
    """(q, k, v, O, LSE, dO) at B2 H3, N = n, bf16, seeded by n and d: the forward's O and LSE from our kernel."""
    gen = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v = (torch.randn(2, 3, n, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3))
    with torch.no_grad():
        o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    do = torch.randn(o.shape, generator=gen, device="cuda").to(torch.bfloat16)
    return q, k, v, o, lse, do


def _ragged_agreement(d, causal, configs, seq_lens=(1, 1000, 1337)):
    """Each candidate's gradients against the shipped tiles' at ragged N (the edge steps, which the timed shapes,
    multiples of every tile, never take): the largest relative error, or the failure."""
    out, vs64 = {}, {}

    def worst(grads, refs):
        return max(relative_error(g, r) if r.norm() > 0 else (g - r).abs().max().item() for g, r in zip(grads, refs))

    for n in seq_lens:
        q, k, v, o, lse, do = _ragged_case(n, d, causal)
        scale = d ** -0.5
        shipped = launch_backward(q, k, v, o, lse, do, causal, scale, config_for(d, q.dtype, causal, tma=True))
        refs = reference_gradients(q, k, v, do, causal)
        vs64.setdefault("shipped", {})[n] = worst(shipped, refs)
        for name, config in configs.items():
            try:
                grads = launch_backward(q, k, v, o, lse, do, causal, scale, config)
                err = worst(grads, shipped)
                vs64.setdefault(name, {})[n] = worst(grads, refs)
            except Exception as exc:  # noqa: BLE001 - reported, and the candidate is not timed
                err = f"FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            out.setdefault(name, {})[n] = err
    for name, by_n in out.items():
        print(f"ragged d{d} {'causal' if causal else 'full  '} {name:18} grads vs shipped "
              + "  ".join(f"N={n}: {e:.1e}" if isinstance(e, float) else f"N={n}: {e}" for n, e in by_n.items()))
    for name, by_n in vs64.items():  # the tolerance the check section holds the shipped tiles to
        bad = [n for n, e in by_n.items() if not e < TOL[torch.bfloat16]]
        print(f"ragged d{d} {'causal' if causal else 'full  '} {name:18} vs float64 "
              + "  ".join(f"N={n}: {e:.1e}" for n, e in by_n.items()) + (f"  WRONG at N={bad}" if bad else ""))
    return out


def candidates(rounds=3, seq_lens=(4096, 8192, 16384)):
    keys = [key for key in CANDIDATES if HEAD_DIMS is None or key[0] in HEAD_DIMS]
    rows = []
    for d, causal in keys:
        _ragged_agreement(d, causal, CANDIDATES[(d, causal)])
    for n, (d, causal) in ((n, key) for n in seq_lens for key in keys):
        configs = CANDIDATES[(d, causal)]
        q, k, v = (torch.randn(2, 16, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        scale = d ** -0.5
        with torch.no_grad():
            o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
        do = torch.randn_like(o)
        tiles = {"shipped": config_for(d, q.dtype, causal, tma=True), **configs}
        shipped_grads = launch_backward(q, k, v, o, lse, do, causal, scale, tiles["shipped"])
        times, errs = {name: [] for name in tiles}, {}
        for name, config in list(tiles.items())[1:]:
            try:
                grads = launch_backward(q, k, v, o, lse, do, causal, scale, config)
                errs[name] = max(relative_error(g, r) for g, r in zip(grads, shipped_grads))
                if all(torch.equal(g, r) for g, r in zip(grads, shipped_grads)):
                    errs[name] = 0.0  # bit for bit (what a candidate that only reorders the launch must give)
            except Exception as exc:  # noqa: BLE001 - one candidate that fails to build or run: skip it
                print(f"candidate d{d} {'causal' if causal else 'full'} {name}: FAILED {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:200]}")
                del times[name]
        for _ in range(rounds):  # interleaved
            for name in times:
                times[name].append(do_bench(
                    lambda c=tiles[name]: launch_backward(q, k, v, o, lse, do, causal, scale, c),
                    warmup=5, rep=20))
        ms = {name: statistics.median(ts) for name, ts in times.items()}
        flops = 2.5 * 4 * 2 * 16 * n * n * d / (2 if causal else 1)
        for name, t in ms.items():
            ratio = ms["shipped"] / t
            print(f"tiles N={n:6} d{d:3} {'causal' if causal else 'full  '} {name:18} {t:7.3f} ms "
                  f"{flops / (t * 1e-3) / 1e12:6.1f} TFLOPS  ÷shipped {ratio:.3f}"
                  + (f"  grads vs shipped {errs[name]:.1e}" if name in errs else ""))
            rows.append({"n": n, "d": d, "causal": causal, "tiles": name, "config": vars(tiles[name]),
                         "ms": t, "vs_shipped": ratio, "rel_err_vs_shipped": errs.get(name)})
        del q, k, v, o, lse, do, shipped_grads
    return rows


def fa3_backward(rounds=3, seq_lens=(4096, 8192, 16384)):
    """The FA-3 style backward (kernels/fa3_bwd.py): every configuration's gradients against float64 first (ragged N,
    B2 H3, bf16; one that is wrong, or fails, is not timed), then B2 H16 bf16 side by side in interleaved rounds: its
    shipped configs and CANDIDATES, the teaching backward (both from one forward's O and LSE, with their Δ pass and
    dQ's cast), SDPA's cuDNN and FA-2 backwards (autograd, the backward alone)."""
    from kernels import fa3_bwd
    rows, good = [], {}
    for d in (64, 128):
        for causal in (False, True):
            configs = {"shipped": fa3_bwd.SHIPPED[d], **fa3_bwd.CANDIDATES[d]}
            worst = {name: 0.0 for name in configs}
            for n in (1, 65, 1000, 1337):
                q, k, v, o, lse, do = _ragged_case(n, d, causal)
                refs = reference_gradients(q, k, v, do, causal)
                for name, config in configs.items():
                    if worst[name] is None:
                        continue
                    try:
                        grads = fa3_bwd.launch_backward(q, k, v, o, lse, do, causal, d ** -0.5, config)
                        err = max(relative_error(g, r) if r.norm() > 0 else g.abs().max().item()
                                  for g, r in zip(grads, refs))
                        worst[name] = max(worst[name], err) if err == err else float("nan")
                    except Exception as exc:  # noqa: BLE001 - reported; the config is not timed
                        print(f"fa3 bwd d{d} {'causal' if causal else 'full'} {name}: FAILED {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200]}")
                        worst[name] = None
            for name, err in worst.items():
                ok = err is not None and err < TOL[torch.bfloat16]
                print(f"fa3 bwd check d{d} {'causal' if causal else 'full  '} {name:28} worst rel err "
                      f"{err if err is None else f'{err:.1e}'} {'ok' if ok else 'WRONG: not timed'}")
                if ok:
                    good.setdefault((d, causal), {})[name] = configs[name]
    for n in seq_lens:
        for d in (64, 128):
            for causal in (False, True):
                configs = good.get((d, causal), {})
                q, k, v = (torch.randn(2, 16, n, d, device="cuda", dtype=torch.bfloat16).requires_grad_()
                           for _ in range(3))
                with torch.no_grad():
                    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
                do = torch.randn_like(o)
                scale = d ** -0.5
                timers = {f"fa3 {name}": (lambda c=config: fa3_bwd.launch_backward(q, k, v, o, lse, do, causal,
                                                                                  scale, c))
                          for name, config in configs.items()}
                timers["fa2_bwd"] = lambda: launch_backward(q, k, v, o, lse, do, causal, scale)
                timers["sdpa_cudnn"] = _bwd_timer(PEERS["sdpa_cudnn"], q, k, v, causal)
                timers["sdpa_fa2"] = _bwd_timer(PEERS["sdpa_fa2"], q, k, v, causal)
                times = {name: [] for name in timers}
                for _ in range(rounds):  # interleaved
                    for name, t in timers.items():
                        times[name].append(do_bench(t, warmup=5, rep=30))
                ms = {name: statistics.median(ts) for name, ts in times.items()}
                flops = 2.5 * 4 * 2 * 16 * n * n * d / (2 if causal else 1)
                for name, t in ms.items():
                    line = (f"fa3 bwd N={n:6} d{d:3} {'causal' if causal else 'full  '} {name:32} {t:7.3f} ms "
                            f"{flops / (t * 1e-3) / 1e12:6.1f} TFLOPS  ÷cudnn {ms['sdpa_cudnn'] / t:.3f}  "
                            f"÷fa2_bwd {ms['fa2_bwd'] / t:.3f}")
                    if "fa3 shipped" in ms:
                        line += f"  ÷fa3 shipped {ms['fa3 shipped'] / t:.3f}"
                    print(line)
                    rows.append({"n": n, "d": d, "causal": causal, "kernel": name, "ms": t,
                                 "tflops": flops / (t * 1e-3) / 1e12, "vs_cudnn": ms["sdpa_cudnn"] / t})
                del timers, q, k, v, o, lse, do
                torch.cuda.empty_cache()
    return rows


def memory_64k():
    n, d = 65536, 128
    q, k, v = (torch.randn(1, 16, n, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    do = torch.randn_like(q)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = flash_attention(q, k, v, causal=True)
    grads = torch.autograd.grad(out, (q, k, v), do)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    ideal = 4 * q.numel() * 2 + 16 * n * 4  # O, dQ, dK, dV + LSE
    print(f"memory 64K B1 H16 d128 causal: peak extra {peak / 2**20:.0f} MiB, O+LSE+grads {ideal / 2**20:.0f} MiB, "
          f"ratio {peak / ideal:.3f}")
    del grads
    return {"peak_extra_bytes": peak, "ideal_bytes": ideal}


def split(seq_lens=(8192, 16384)):
    """Section f: each kernel's share of the teaching backward and of SDPA FA-2's."""
    rows = []
    products = {"_bwd_dkdv": 4, "_bwd_dq": 3}
    for n in seq_lens:
        for d in (64, 128):
            for causal in (False, True):
                q, k, v = (torch.randn(2, 16, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                scale = d ** -0.5
                with torch.no_grad():
                    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
                do = torch.randn_like(o)
                ours_t = kernel_ms(lambda: launch_backward(q, k, v, o, lse, do, causal, scale), 10, 1)
                qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
                fa2_t = kernel_ms(_bwd_timer(sdpa(SDPBackend.FLASH_ATTENTION), qg, kg, vg, causal), 10, 1)
                pair = 2 * 2 * 16 * n * n * d / (2 if causal else 1)  # one tile product over every pair
                label = f"N={n:6} d{d:3} {'causal' if causal else 'full  '}"
                for who, times in (("ours", ours_t), ("sdpa_fa2", fa2_t)):
                    total = sum(times.values())
                    print(f"split {label} {who:8} total {total:7.3f} ms  " + "  ".join(
                        f"{name[:40]} {t:.3f} ms ({t / total:.0%}"
                        + (f", {products[name] * pair / (t * 1e-3) / 1e12:.0f} TFLOPS executed" if name in products
                           else "") + ")"
                        for name, t in sorted(times.items(), key=lambda kv: -kv[1]) if t > 0.001 * total))
                    rows.append({"n": n, "d": d, "causal": causal, "who": who, "ms": times})
                del q, k, v, o, lse, do, qg, kg, vg
    return rows


def _section(name, fn, result):
    try:
        result[name] = fn()
    except Exception:  # noqa: BLE001 - print it, and run the next section
        print(f"section {name!r} FAILED:")
        traceback.print_exc(file=sys.stdout)
        result[name] = None
    torch.cuda.empty_cache()


def main() -> int:
    if backend() != "cuda":
        print("needs a CUDA GPU")
        return 1
    result = {}
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    for name, fn in (("check", check), ("rows", time_all), ("candidates", candidates), ("fa3", fa3_backward),
                     ("memory", memory_64k), ("split", split)):
        if (name in only) if only is not None else name != "split":  # split: only when asked for
            _section(name, fn, result)
        if name == "check" and result.get("check") is False:
            print("WRONG gradients: nothing timed")
            return 2
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
