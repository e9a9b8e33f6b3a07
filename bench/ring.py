"""Ring attention over several GPUs, timed beside PyTorch's context_parallel and our one-GPU kernel, in one run.

    torchrun --nproc-per-node=K -m bench.ring [--seq-lens 262144,1048576] [--out results/h200.json]
    python -m bench.ring --world K …      (the bench starts its K processes itself)

One process per GPU (NCCL); on a machine without a GPU, K CPU processes (gloo) run our kernels in Triton's
interpreter at small N. For each total sequence length (B, H, D as given, causal unless --no-causal):

- ours (kernels/ring.py) in each layout (plain, zigzag), and PyTorch's
  `torch.distributed.tensor.experimental.context_parallel` over SDPA (its load-balanced layout, which is zigzag, with
  each of its K/V rotations: all-to-all and all-gather), timed round by round in turn: the time of one forward is
  the slowest rank's, from a barrier to its end; the median and 20th/80th percentiles of the rounds;
- our kernel on one GPU over the whole sequence (rank 0, the others waiting), for the parallel efficiency
  one-GPU time ÷ (K × ring time);
- one traced forward of ours per layout: each rank's steps (whose K/V, which blocks, compute and exposed wait);
- one hop of a K/V shard with nothing else running (what the compute has to hide);
- correctness: each layout's output against the float64 reference at a small sequence (--check-seq-len).

Prints a table of times and ratios; with --out adds the runs to that results file's "ring" section (rank 0 writes).
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import statistics
import sys
import time

import costmodel
from costmodel import RING_LAYOUTS

CP_ROTATES = ("alltoall", "allgather")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.ring", description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=None, help="start this many processes here (without torchrun)")
    p.add_argument("--seq-lens", default=None,
                   help="total tokens, comma-separated (default: 128K per GPU, and 1M on a GPU; 16·world tokens a "
                        "chunk on the CPU)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=None, help="default 32 on a GPU, 2 on the CPU")
    p.add_argument("--head-dim", type=int, default=None, help="default 128 on a GPU, 32 on the CPU")
    p.add_argument("--dtype", default="bfloat16", choices=tuple(costmodel.DTYPE_BYTES))
    p.add_argument("--no-causal", action="store_true")
    p.add_argument("--layouts", default=",".join(RING_LAYOUTS))
    p.add_argument("--no-peer", action="store_true", help="leave out PyTorch's context_parallel")
    p.add_argument("--no-one-gpu", action="store_true", help="leave out our kernel on one GPU")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--check-seq-len", type=int, default=None,
                   help="the correctness check's total tokens (default 200 a chunk: not a multiple of any tile)")
    p.add_argument("--out", type=str, default=None, help="a results file (python -m bench made it): the runs are "
                                                         "added to its \"ring\" section")
    args = p.parse_args(argv)
    if args.world is not None and args.world < 1:
        p.error("--world must be at least 1")
    if args.rounds < 1 or args.warmup < 0:
        p.error("--rounds must be at least 1 and --warmup at least 0")
    try:
        args.layouts = tuple(x.strip() for x in args.layouts.split(",") if x.strip())
        bad = [x for x in args.layouts if x not in RING_LAYOUTS]
        if bad or not args.layouts:
            raise ValueError(f"layouts must be some of {', '.join(RING_LAYOUTS)}")
        args.seq_lens = None if args.seq_lens is None else tuple(int(x) for x in args.seq_lens.split(","))
        if args.seq_lens is not None and any(n < 1 for n in args.seq_lens):
            raise ValueError("sequence lengths must be positive")
    except ValueError as why:
        p.error(str(why))
    return args


# -- the processes ------------------------------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port free on this machine now (the process group's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(rank: int, world: int, port: int, argv: list[str]) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    code = run(parse_args(argv))
    if code:
        raise SystemExit(code)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if "RANK" in os.environ or args.world is None:
        if "RANK" not in os.environ:
            print("start it under torchrun (torchrun --nproc-per-node=K -m bench.ring …) or give --world K",
                  file=sys.stderr)
            return 2
        return run(args)
    import torch.multiprocessing as mp
    from kernels.probe import cuda_devices
    gpus = cuda_devices()[0]
    if gpus and args.world > gpus:
        print(f"--world {args.world} needs {args.world} GPUs; this machine has {gpus}", file=sys.stderr)
        return 2
    mp.start_processes(_child, args=(args.world, free_port(), argv), nprocs=args.world,
                       start_method="spawn" if gpus else "fork")
    return 0


# -- one process ---------------------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    from kernels.runtime import INTERPRET

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    gpu = torch.cuda.is_available() and not INTERPRET
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world,
                            **({"device_id": torch.device("cuda", torch.cuda.current_device())} if gpu else {}))
    try:
        bench = RingBench(args, world, rank, gpu)
        runs = bench.all()
        if rank == 0:
            print_table(runs)
            if args.out:
                write_runs(args.out, runs, "python -m bench.ring " + " ".join(sys.argv[1:]))
        return 0
    finally:
        dist.barrier()
        dist.destroy_process_group()


class RingBench:
    def __init__(self, args, world: int, rank: int, gpu: bool):
        import torch
        self.args, self.world, self.rank, self.gpu = args, world, rank, gpu
        self.device = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
        self.dtype = getattr(torch, args.dtype)
        self.heads = args.heads or (32 if gpu else 2)
        self.head_dim = args.head_dim or (128 if gpu else 32)
        self.causal = not args.no_causal
        chunk = 2 * world
        self.seq_lens = args.seq_lens or ((131072 * world, 1 << 20) if gpu else (16 * chunk,))
        self.check_len = args.check_seq_len or 200 * chunk
        self.name = torch.cuda.get_device_name(self.device) if gpu else "CPU (Triton interpreter)"

    # timing ------------------------------------------------------------------------------------------------------
    def _sync(self):
        import torch
        if self.gpu:
            torch.cuda.synchronize(self.device)

    def _slowest(self, ms: float) -> float:
        import torch
        import torch.distributed as dist
        t = torch.tensor([ms], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def once(self, fn) -> float:
        """One call, from a barrier to the last rank's end, in ms."""
        import torch
        import torch.distributed as dist
        dist.barrier()
        self._sync()
        if self.gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return self._slowest(start.elapsed_time(end))
        t0 = time.perf_counter()
        fn()
        return self._slowest((time.perf_counter() - t0) * 1e3)

    # inputs ------------------------------------------------------------------------------------------------------
    def whole(self, n: int, seed: int):
        """The same whole q, k, v on every rank (one seed), random normal: never zeros."""
        import torch
        g = torch.Generator(device=self.device).manual_seed(seed)
        shape = (self.args.batch, self.heads, n, self.head_dim)
        return tuple(torch.randn(shape, generator=g, device=self.device, dtype=torch.float32).to(self.dtype)
                     for _ in range(3))

    # the parts ---------------------------------------------------------------------------------------------------
    def check(self, layout: str) -> float:
        """Max |O − float64 reference| of the ring over check_len tokens (rank 0 holds the answer)."""
        import torch
        import torch.distributed as dist
        from kernels.reference import reference_attention
        from kernels.ring import ring_attention, shard, unshard
        q, k, v = self.whole(self.check_len, seed=1)
        mine = ring_attention(*(shard(t, self.world, self.rank, layout) for t in (q, k, v)), self.causal,
                              layout=layout)
        parts = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(parts, mine.contiguous())
        out = unshard(parts, layout)
        ref = reference_attention(q, k, v, causal=self.causal)[0]
        return float((out.double() - ref).abs().max().item())

    def kv_hop_ms(self, n: int) -> float:
        import torch
        import torch.distributed as dist
        local = n // self.world
        buf = torch.randn((2, self.args.batch, self.heads, local, self.head_dim), device=self.device).to(self.dtype)
        into = torch.empty_like(buf)
        nxt, prv = (self.rank + 1) % self.world, (self.rank - 1) % self.world

        def hop():
            for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, buf, nxt), dist.P2POp(dist.irecv, into, prv)]):
                work.wait()
        hop()
        return statistics.median(self.once(hop) for _ in range(5))

    def all(self) -> list[dict]:
        runs = []
        checks = {}
        if self.world > 1:
            for layout in self.args.layouts:
                checks[layout] = self.check(layout)
                self.say(f"check {layout}: max |O − float64| = {checks[layout]:.3g} over {self.check_len} tokens")
        for n in self.seq_lens:
            runs += self.at(n, checks)
        return runs

    def say(self, line: str) -> None:
        if self.rank == 0:
            print(line, file=sys.stderr, flush=True)

    def base(self, n: int, impl: str, layout: str, rotate: str, kernel: str) -> dict:
        return {"impl": impl, "layout": layout, "rotate": rotate, "kernel": kernel, "world_size": self.world,
                "seq_len": n, "batch": self.args.batch, "heads": self.heads, "head_dim": self.head_dim,
                "dtype": self.args.dtype, "causal": self.causal, "device": self.name,
                "timing_kind": "cuda" if self.gpu else "interpreter", "status": "ok", "message": "",
                "time_ms": None, "time_ms_p20": None, "time_ms_p80": None}

    def at(self, n: int, checks: dict) -> list[dict]:
        import torch
        from bench.measure import percentiles, provenance
        from kernels.attention import choose_kernel, flash_attention
        from kernels.ring import ring_attention, shard
        if n % costmodel.ring_chunks(self.world, "zigzag"):
            raise SystemExit(f"{n} tokens do not cut into {2 * self.world} equal chunks: give a multiple of "
                             f"{2 * self.world}")
        self.say(f"N = {n}: {self.world} ranks × {n // self.world} tokens")
        q, k, v = self.whole(n, seed=0)
        kernel = choose_kernel(q)[0]
        candidates, runs, shards = {}, {}, {}
        for layout in self.args.layouts:
            shards[layout] = mine = tuple(shard(t, self.world, self.rank, layout) for t in (q, k, v))
            candidates[("ours", layout, "p2p")] = (
                lambda mine=mine, layout=layout: ring_attention(*mine, self.causal, layout=layout))
            runs[("ours", layout, "p2p")] = self.base(n, "ours", layout, "p2p", kernel)
        one_gpu = None
        if not self.args.no_one_gpu:
            one_gpu = self.one_gpu(q, k, v, flash_attention)
        peer = None
        if not self.args.no_peer and self.gpu and self.world > 1:
            peer = self.peer_context(q, k, v)
            if peer is not None:
                for rotate in CP_ROTATES:
                    candidates[("torch_cp", "zigzag", rotate)] = (lambda rotate=rotate: self.cp_call(peer, rotate))
                    runs[("torch_cp", "zigzag", rotate)] = self.base(n, "torch_cp", "zigzag", rotate,
                                                                     "sdpa (default backend)")
        times = {key: [] for key in candidates}
        failed = {}
        try:
            for round_ in range(self.args.warmup + self.args.rounds):
                for key, fn in candidates.items():
                    if key in failed:
                        continue
                    try:
                        ms = self.once(fn)
                    except torch.OutOfMemoryError as why:
                        failed[key] = ("oom", str(why).split("\n")[0][:400])
                        torch.cuda.empty_cache()
                        continue
                    if round_ >= self.args.warmup:
                        times[key].append(ms)
        finally:
            if peer is not None:
                peer[0].__exit__(None, None, None)
        out = []
        for key, run in runs.items():
            if key in failed:
                run.update(status=failed[key][0], message=failed[key][1])
            else:
                median, p20, p80 = percentiles(times[key])
                run.update(time_ms=median, time_ms_p20=p20, time_ms_p80=p80)
            if key[0] == "ours":
                run["one_gpu_ms"] = one_gpu
                run["check_seq_len"] = self.check_len if key[1] in checks else None
                run["check_err"] = checks.get(key[1])
                if run["status"] == "ok":
                    self.traced(run, shards[key[1]], key[1])
            out.append(run)
        del candidates, shards, q, k, v
        if self.gpu:
            torch.cuda.empty_cache()
        hop = self.kv_hop_ms(n) if self.world > 1 else None
        for run in out:
            if run["impl"] == "ours":
                run["kv_step_ms"] = hop
            run.update(provenance("ring", run))  # ours: the build of kernels/ring.py and the kernel its blocks ran
        return out

    def traced(self, run: dict, mine: tuple, layout: str) -> None:
        """One forward of ours with its per-rank trace, gathered to every rank."""
        import torch.distributed as dist
        from kernels.ring import RingTrace, ring_attention
        trace = RingTrace()
        ring_attention(*mine, self.causal, layout=layout, trace=trace)
        gathered = [None] * self.world
        dist.all_gather_object(gathered, [s.as_dict() for s in trace.steps])
        steps = [s for part in gathered for s in part]
        run["steps"] = [{**s, **{t: round(s[t], 4) for t in ("start_ms", "compute_ms", "wait_ms")}} for s in steps]
        run["rank_compute_ms"] = [round(sum(s["compute_ms"] for s in part), 4) for part in gathered]
        run["rank_wait_ms"] = [round(sum(s["wait_ms"] for s in part), 4) for part in gathered]
        run["kernel"] = trace.kernel

    def one_gpu(self, q, k, v, flash_attention) -> float | None:
        """Our kernel over the whole sequence on rank 0's GPU (the others wait): median of the rounds, or None."""
        import torch
        import torch.distributed as dist
        result = [None]
        if self.rank == 0:
            try:
                for _ in range(self.args.warmup):
                    flash_attention(q, k, v, causal=self.causal)
                ts = []
                for _ in range(self.args.rounds):
                    self._sync()
                    if self.gpu:
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        flash_attention(q, k, v, causal=self.causal)
                        e.record()
                        e.synchronize()
                        ts.append(s.elapsed_time(e))
                    else:
                        t0 = time.perf_counter()
                        flash_attention(q, k, v, causal=self.causal)
                        ts.append((time.perf_counter() - t0) * 1e3)
                result = [statistics.median(ts)]
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
        dist.broadcast_object_list(result, src=0)
        return result[0]

    # PyTorch's context parallelism ---------------------------------------------------------------------------------
    def peer_context(self, q, k, v):
        """context_parallel entered over copies of q, k, v (it shards its buffers in place): (the context, its q, k,
        v shards), or None where this PyTorch lacks it."""
        try:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor.experimental import context_parallel
        except ImportError as why:
            self.say(f"no context_parallel in this PyTorch ({why}): the peer is left out")
            return None
        mesh = init_device_mesh("cuda", (self.world,))
        bufs = [t.clone() for t in (q, k, v)]
        ctx = context_parallel(mesh, buffers=bufs, buffer_seq_dims=[2, 2, 2], no_restore_buffers=set(bufs))
        ctx.__enter__()
        return ctx, bufs

    def cp_call(self, peer, rotate: str):
        import torch.nn.functional as F
        from torch.distributed.tensor.experimental._attention import set_rotate_method
        set_rotate_method(rotate)
        q, k, v = peer[1]
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


# -- out -----------------------------------------------------------------------------------------------------------

def print_table(runs: list[dict]) -> None:
    print(f"{'N':>9} {'K':>2} {'impl':>9} {'layout':>7} {'rotate':>9} {'ms':>10} {'p20':>10} {'p80':>10} "
          f"{'1-GPU ms':>10} {'eff':>6} {'÷best cp':>8} {'wait %':>7} {'err':>8}")
    for run in runs:
        peers = [r["time_ms"] for r in runs if r["impl"] == "torch_cp" and r["seq_len"] == run["seq_len"]
                 and r["time_ms"]]
        t = run["time_ms"]
        eff = (run.get("one_gpu_ms") / (run["world_size"] * t)) if t and run.get("one_gpu_ms") else None
        vs = (min(peers) / t) if t and peers else None
        wait = None
        if run.get("rank_wait_ms") and t:
            wait = max(w / (w + c) for w, c in zip(run["rank_wait_ms"], run["rank_compute_ms"]) if w + c > 0)
        print(f"{run['seq_len']:>9} {run['world_size']:>2} {run['impl']:>9} {run['layout']:>7} {run['rotate']:>9} "
              f"{_f(t, '.2f'):>10} {_f(run['time_ms_p20'], '.2f'):>10} {_f(run['time_ms_p80'], '.2f'):>10} "
              f"{_f(run.get('one_gpu_ms'), '.2f'):>10} {_f(eff, '.3f'):>6} {_f(vs, '.3f'):>8} "
              f"{_f(wait and 100 * wait, '.1f'):>7} {_f(run.get('check_err'), '.2e'):>8}"
              + (f"  {run['status']}: {run['message'][:80]}" if run["status"] != "ok" else ""), flush=True)


def _f(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def write_runs(out: str, runs: list[dict], command: str) -> None:
    from pathlib import Path
    from bench.results import add_ring_runs
    created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    add_ring_runs(Path(out), runs, command, created)
    print(f"wrote {len(runs)} ring runs into {out}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
