"""Ring attention: one attention over a sequence cut across the ranks of a process group (several GPUs, or CPU
processes with gloo), each block computed by our kernels, the blocks merged with their log-sum-exps.

Each rank keeps its shard of Q (the chunks `costmodel.ring_owned` names) and passes its K/V shard to the next rank
round the ring, one hop per step, while it computes on the K/V it holds: `torch.distributed` point-to-point sends
and receives (NCCL on GPUs, where they run on NCCL's own stream beside the kernels; gloo on the CPU). After `world`
steps each rank has met every K/V shard. Each step's blocks (`costmodel.ring_blocks`: the layout's plan) run on
our kernels through the library's call (`flash_attention(..., return_lse=True)`); a block's output O_b and its
log-sum-exp L_b join the running output by the online softmax's algebra, in fp32:

    L = log(e^L_acc + e^L_b),   O_acc ← O_acc·e^(L_acc − L) + O_b·e^(L_b − L)

the same merge split-KV decode does across its splits (kernels/decode.py).

Layouts (costmodel/ring.py): "plain" (rank r keeps the r-th of `world` chunks: causal leaves the early ranks idle)
and "zigzag" (rank r keeps chunks r and 2·world − 1 − r of 2·world: every rank does the same causal work). `shard`
cuts a whole tensor into a rank's shard and `unshard` puts the shards back in sequence order.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

import costmodel
from costmodel import RING_LAYOUTS, ring_blocks, ring_owned, ring_source
from kernels.runtime import DEVICE  # noqa: F401 - first: it sets TRITON_INTERPRET before any kernel is decorated
from kernels.attention import choose_kernel, flash_attention


def _check_layout(layout: str) -> None:
    if layout not in RING_LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(map(repr, RING_LAYOUTS))}; got {layout!r}"[:200])


def shard(x: torch.Tensor, world: int, rank: int, layout: str = "zigzag", seq_dim: int = 2) -> torch.Tensor:
    """Rank `rank`'s shard of a whole tensor `x` (its chunks along `seq_dim`, in sequence order, contiguous). The
    sequence must cut into the layout's equal chunks (world of them, plain; 2·world, zigzag)."""
    _check_layout(layout)
    chunks = costmodel.ring_chunks(world, layout)
    length = x.shape[seq_dim]
    if length % chunks:
        raise ValueError(f"{length} tokens do not cut into {chunks} equal chunks ({layout} layout over {world} "
                         f"ranks): give a sequence length that is a multiple of {chunks}")
    pieces = x.chunk(chunks, dim=seq_dim)
    return torch.cat([pieces[c] for c in ring_owned(world, rank, layout)], dim=seq_dim).contiguous()


def unshard(shards: list[torch.Tensor], layout: str = "zigzag", seq_dim: int = 2) -> torch.Tensor:
    """The whole tensor back from every rank's shard (shards[r] from rank r), in sequence order."""
    _check_layout(layout)
    world = len(shards)
    pieces: dict[int, torch.Tensor] = {}
    for rank, part in enumerate(shards):
        owned = ring_owned(world, rank, layout)
        for c, piece in zip(owned, part.chunk(len(owned), dim=seq_dim)):
            pieces[c] = piece
    return torch.cat([pieces[c] for c in range(costmodel.ring_chunks(world, layout))], dim=seq_dim)


@dataclass
class RingStep:
    """What one rank did at one step of one forward: whose K/V it held, its blocks, and when (ms after the forward
    began on this rank): `compute_ms` its blocks and their merges, `wait_ms` then waiting for the next K/V shard (the
    hand-off's part that compute did not hide)."""
    rank: int
    step: int
    src: int
    blocks: list[list]
    start_ms: float = 0.0
    compute_ms: float = 0.0
    wait_ms: float = 0.0

    def as_dict(self) -> dict:
        return {"rank": self.rank, "step": self.step, "src": self.src, "start_ms": self.start_ms,
                "compute_ms": self.compute_ms, "wait_ms": self.wait_ms, "blocks": self.blocks}


@dataclass
class RingTrace:
    """Pass one to `ring_attention(trace=...)`: it is filled with this rank's steps (times read once the forward
    has finished: on a GPU the call synchronizes, so a traced forward is not for timing)."""
    steps: list[RingStep] = field(default_factory=list)
    kernel: str = ""

    def compute_ms(self) -> float:
        return sum(s.compute_ms for s in self.steps)

    def wait_ms(self) -> float:
        return sum(s.wait_ms for s in self.steps)


class _Clock:
    """Marks on this rank's timeline: CUDA events on a GPU (read after a synchronize), the host's clock on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> int:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())
        return len(self.marks) - 1

    def ms(self, a: int, b: int) -> float:
        if self.cuda:
            return max(0.0, self.marks[a].elapsed_time(self.marks[b]))
        return max(0.0, (self.marks[b] - self.marks[a]) * 1e3)

    def finish(self) -> None:
        if self.cuda:
            self.marks[-1].synchronize()


def _merge(acc_o: torch.Tensor, acc_lse: torch.Tensor, o: torch.Tensor, lse: torch.Tensor) -> None:
    """acc ← acc ⊕ (o, lse), in place, fp32 (views of a chunk's rows are merged where they lie)."""
    new = torch.logaddexp(acc_lse, lse)
    acc_o.mul_(torch.exp(acc_lse - new).unsqueeze(-1))
    acc_o.addcmul_(o, torch.exp(lse - new).unsqueeze(-1))
    acc_lse.copy_(new)


def _rank_of(group, group_rank: int) -> int:
    return group_rank if group is None else dist.get_global_rank(group, group_rank)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, *, group=None,
                   layout: str = "zigzag", sm_scale: float | None = None, kernel: str = "auto",
                   return_lse: bool = False, trace: RingTrace | None = None):
    """Attention over a sequence sharded across the ranks of `group` (None: the default group): q, k, v are this
    rank's shards, (batch, heads, local tokens, head_dim), as `shard` cuts them for `layout`; every rank calls this
    with the same shapes, causal, layout and kernel. Returns this rank's shard of O (and with return_lse=True its fp32
    log-sum-exp, natural log). kernel: the library's choice for each block ("auto": FA-3 style on Hopper, FA-2
    elsewhere, in Triton's interpreter on the CPU). Forward only (no autograd)."""
    _check_layout(layout)
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("ring_attention runs inside a torch.distributed process group: start it under torchrun "
                           "(or call torch.distributed.init_process_group) first")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-D tensor (batch, heads, local tokens, head_dim); got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"q, k and v shards must have one shape; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    if any(t.requires_grad for t in (q, k, v)) and torch.is_grad_enabled():
        raise ValueError("ring_attention is a forward pass only: no gradient would flow (call it under "
                         "torch.no_grad(), or detach the inputs)")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    kernel_key = choose_kernel(q, kernel)[0]
    owned = ring_owned(world, rank, layout)
    local = q.shape[2]
    if local % len(owned):
        raise ValueError(f"a {layout} shard holds {len(owned)} equal chunks; {local} local tokens do not cut into "
                         f"{len(owned)} (`shard` cuts a whole tensor for you)")
    clock = _Clock(q.device) if trace is not None else None
    if clock is not None:
        trace.kernel = kernel_key
        begin = clock.mark()

    kv = torch.stack((k, v))  # one buffer to pass round the ring
    buffers = [torch.empty_like(kv) for _ in range(min(world - 1, 2))]
    send_to, recv_from = _rank_of(group, (rank + 1) % world), _rank_of(group, (rank - 1) % world)
    acc_o = acc_lse = None
    marks = []  # traced: per step (step, src, blocks, and its started, computed and waited marks)
    for step in range(world):
        current = kv if step == 0 else buffers[(step - 1) % 2]
        pending = []
        if step < world - 1:  # the next K/V shard travels while this one is computed on
            pending = dist.batch_isend_irecv([dist.P2POp(dist.isend, current, send_to, group),
                                              dist.P2POp(dist.irecv, buffers[step % 2], recv_from, group)])
        src = ring_source(world, rank, step)
        blocks = ring_blocks(world, rank, step, layout, causal)
        started = clock.mark() if clock is not None else None
        acc_o, acc_lse = _compute(q, current[0], current[1], blocks, owned, ring_owned(world, src, layout),
                                  causal and step == 0, sm_scale, kernel_key, acc_o, acc_lse)
        computed = clock.mark() if clock is not None else None
        for work in pending:
            work.wait()
        if clock is not None:
            marks.append((step, src, blocks, started, computed, clock.mark()))
    out = acc_o.to(q.dtype)
    if clock is not None:
        clock.finish()
        trace.steps = [RingStep(rank, step, src, [list(b) for b in blocks], clock.ms(begin, started),
                                clock.ms(started, computed), clock.ms(computed, waited))
                       for step, src, blocks, started, computed, waited in marks]
    return (out, acc_lse) if return_lse else out


def ring_simulate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, world: int, causal: bool = False, *,
                  layout: str = "zigzag", sm_scale: float | None = None, kernel: str = "auto") -> torch.Tensor:
    """The ring's arithmetic in one process: every rank's steps in turn on the whole q, k, v (batch, heads, tokens,
    head_dim), no communication; returns the whole O. The same blocks, kernel calls and merges as ring_attention,
    so one GPU (or the interpreter) checks them at any world size."""
    _check_layout(layout)
    kernel_key = choose_kernel(q, kernel)[0]
    shards = [[shard(t, world, rank, layout) for t in (q, k, v)] for rank in range(world)]
    outs = []
    for rank in range(world):
        acc_o = acc_lse = None
        for step in range(world):
            src = ring_source(world, rank, step)
            acc_o, acc_lse = _compute(shards[rank][0], shards[src][1], shards[src][2],
                                      ring_blocks(world, rank, step, layout, causal), ring_owned(world, rank, layout),
                                      ring_owned(world, src, layout), causal and step == 0, sm_scale, kernel_key,
                                      acc_o, acc_lse)
        outs.append(acc_o.to(q.dtype))
    return unshard(outs, layout)


def _compute(q, k, v, blocks, q_chunks, k_chunks, own_causal, sm_scale, kernel, acc_o, acc_lse):
    """One step's blocks on our kernel, merged into the running (acc_o, acc_lse); the first step starts them.
    Step 0 of a causal ring is the local causal attention (a rank's chunks are in sequence order, so the diagonal
    of its concatenated shard is the mask); a step whose blocks cover every (query, key) pair is one call; any
    other step runs its blocks chunk by chunk."""
    every_pair = len(blocks) == len(q_chunks) * len(k_chunks) and all(kind == "full" for *_, kind in blocks)
    if own_causal or every_pair:
        o, lse = flash_attention(q, k, v, causal=own_causal, sm_scale=sm_scale, return_lse=True, kernel=kernel)
        if acc_o is None:
            return o.float(), lse.float()
        _merge(acc_o, acc_lse, o, lse)
        return acc_o, acc_lse
    if acc_o is None:
        raise AssertionError("the first step of the ring covers every local query (its own diagonal)")
    c = q.shape[2] // len(q_chunks)
    for qc, kc, kind in blocks:
        qi, ki = q_chunks.index(qc), k_chunks.index(kc)
        rows = slice(qi * c, (qi + 1) * c)
        o, lse = flash_attention(q[:, :, rows], k[:, :, ki * c:(ki + 1) * c], v[:, :, ki * c:(ki + 1) * c],
                                 causal=kind == "causal", sm_scale=sm_scale, return_lse=True, kernel=kernel)
        _merge(acc_o[:, :, rows], acc_lse[:, :, rows], o, lse)
    return acc_o, acc_lse
