"""Ring attention's tests' helper: run kernels.ring.ring_attention in `world` CPU processes (gloo; our kernels in
Triton's interpreter), each on its shard of one whole q, k, v, and bring the shards and traces back."""
from __future__ import annotations

import os

from bench.ring import free_port


def _one_rank(rank: int, world: int, port: int, layout: str, causal: bool, q, k, v, out, kernel: str) -> None:
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from kernels.ring import RingTrace, ring_attention, shard
        trace = RingTrace()
        o, lse = ring_attention(*(shard(t, world, rank, layout) for t in (q, k, v)), causal, layout=layout,
                                return_lse=True, trace=trace, kernel=kernel)
        out[rank] = (o, lse, [s.as_dict() for s in trace.steps], trace.kernel)
    finally:
        dist.destroy_process_group()


def ring_in_processes(q, k, v, world: int, layout: str, causal: bool, kernel: str = "auto"):
    """(whole O, whole LSE, each rank's steps, the kernel key) of a ring over `world` CPU processes."""
    import torch.multiprocessing as mp
    from kernels.ring import unshard
    with mp.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_one_rank, args=(world, free_port(), layout, causal, q, k, v, out, kernel),
                           nprocs=world, start_method="fork")
        parts = [out[rank] for rank in range(world)]
    o = unshard([p[0] for p in parts], layout)
    lse = unshard([p[1].unsqueeze(-1) for p in parts], layout).squeeze(-1)
    return o, lse, [p[2] for p in parts], parts[0][3]
