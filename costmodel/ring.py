"""Ring attention's plan: which chunks of the sequence each GPU holds, which blocks it computes at each step of the
ring, the work that makes, and the memory and traffic a GPU needs. Plain Python (a leaf, like the rest of costmodel).

The sequence of `seq_len` tokens is cut into equal chunks. Each of `world` ranks keeps its chunks of Q (and of the
output) for the whole run; its chunks of K and V travel round the ring, one hop per step: at step s, rank r holds
the K/V chunks that rank (r − s) mod world started with. After `world` steps every rank has met every K/V chunk.

Layouts:
- "plain": `world` chunks, rank r keeps chunk r. Causal attention then leaves rank 0 idle for all but its own
  block while the last rank computes a full block at every step: the slowest rank sets the time.
- "zigzag": 2·`world` chunks, rank r keeps chunk r and chunk 2·world − 1 − r (an early one and a late one), so
  every rank has the same causal work at every step (PyTorch's context_parallel calls it round-robin load balance).

A block is (query chunk, key chunk, kind) with kind "causal" (the diagonal: query i sees keys up to i) or "full";
blocks a causal mask hides entirely are left out.
"""
from __future__ import annotations

from dataclasses import dataclass

RING_LAYOUTS = ("plain", "zigzag")
CAUSAL_BLOCK_WORK = 0.5  # a diagonal block computes half its pairs (c(c+1)/2 of c², ½ at any size that matters)


def _check(world: int, layout: str, rank: int | None = None) -> None:
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world size must be a positive integer, got {world!r}")
    if layout not in RING_LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(RING_LAYOUTS)}, got {layout!r}")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world):
        raise ValueError(f"rank must be 0 … {world - 1}, got {rank!r}")


def ring_chunks(world: int, layout: str) -> int:
    """How many equal chunks the sequence is cut into."""
    _check(world, layout)
    return world if layout == "plain" else 2 * world


def ring_owned(world: int, rank: int, layout: str) -> tuple[int, ...]:
    """The chunks rank `rank` keeps (of Q and O for the whole run; of K and V at step 0), in sequence order."""
    _check(world, layout, rank)
    if layout == "plain":
        return (rank,)
    return (rank, 2 * world - 1 - rank)


def ring_source(world: int, rank: int, step: int) -> int:
    """The rank whose K/V chunks rank `rank` holds at step `step`."""
    if not 0 <= step < world:
        raise ValueError(f"step must be 0 … {world - 1}, got {step!r}")
    return (rank - step) % world


def ring_blocks(world: int, rank: int, step: int, layout: str, causal: bool) -> tuple[tuple[int, int, str], ...]:
    """The blocks (query chunk, key chunk, "causal" | "full") rank `rank` computes at step `step`."""
    _check(world, layout, rank)
    keys = ring_owned(world, ring_source(world, rank, step), layout)
    blocks = []
    for qc in ring_owned(world, rank, layout):
        for kc in keys:
            if not causal or kc < qc:
                blocks.append((qc, kc, "full"))
            elif kc == qc:
                blocks.append((qc, kc, "causal"))
    return tuple(blocks)


def ring_rank_work(world: int, layout: str, causal: bool) -> tuple[float, ...]:
    """Each rank's work over the whole ring, in blocks of chunk × chunk query-key pairs (a diagonal counts ½)."""
    return tuple(sum(CAUSAL_BLOCK_WORK if kind == "causal" else 1.0
                     for step in range(world) for *_, kind in ring_blocks(world, rank, step, layout, causal))
                 for rank in range(world))


def ring_step_work(world: int, rank: int, step: int, layout: str, causal: bool) -> float:
    """One rank's work at one step, in chunk × chunk blocks (a diagonal counts ½)."""
    return sum(CAUSAL_BLOCK_WORK if kind == "causal" else 1.0
               for *_, kind in ring_blocks(world, rank, step, layout, causal))


def ring_balance(world: int, layout: str, causal: bool) -> float:
    """The best parallel efficiency the layout allows when every rank waits for the busiest one: mean work ÷ the
    most any rank does (1.0: perfectly even). Plain causal: world ÷ (2·world − 1), ≈ 52 % at 8 GPUs, as
    ring-flash-attention measured. Counted with the ring's synchronous steps: a rank cannot run ahead of the K/V it
    waits for, so each step lasts as long as its busiest rank's block."""
    per_step = [max(ring_step_work(world, rank, step, layout, causal) for rank in range(world))
                for step in range(world)]
    total = sum(ring_rank_work(world, layout, causal))
    return total / (world * sum(per_step)) if sum(per_step) else 1.0


@dataclass(frozen=True)
class RingMemory:
    """What one GPU holds during a ring forward, in bytes."""
    qkvo: int          # its shard of Q, K, V and O
    kv_buffers: int    # K/V shards received: one arriving while one is computed on (two buffers turn about from the
                       # third step on; two GPUs need one: the last step sends nothing)
    accumulator: int   # the fp32 running output and log-sum-exp of its queries

    @property
    def total(self) -> int:
        return self.qkvo + self.kv_buffers + self.accumulator


def ring_memory(seq_len: int, world: int, batch: int, heads: int, head_dim: int, dtype_bytes: int,
                kv_heads: int | None = None) -> RingMemory:
    """Bytes one of `world` GPUs holds for a ring forward over `seq_len` tokens (world = 1: one GPU's flash
    attention, with no buffers and no accumulator beyond the kernel's own)."""
    kv_heads = heads if kv_heads is None else kv_heads
    local = -(-seq_len // world)
    q_o = 2 * batch * heads * local * head_dim * dtype_bytes
    kv = 2 * batch * kv_heads * local * head_dim * dtype_bytes
    if world == 1:
        return RingMemory(q_o + kv, 0, batch * heads * local * 4)
    return RingMemory(q_o + kv, min(world - 1, 2) * kv, batch * heads * local * (head_dim + 1) * 4)


def ring_kv_bytes_per_step(seq_len: int, world: int, batch: int, kv_heads: int, head_dim: int,
                           dtype_bytes: int) -> int:
    """Bytes each rank sends to the next at each step: its current K and V shard."""
    return 2 * batch * kv_heads * (-(-seq_len // world)) * head_dim * dtype_bytes


def ring_longest(world: int, memory_bytes: int, batch: int, heads: int, head_dim: int, dtype_bytes: int,
                 granule: int = 1024) -> int:
    """The longest sequence (a multiple of `granule`·2·world tokens) whose ring forward fits `memory_bytes` per GPU."""
    step = granule * 2 * world
    per_step = ring_memory(step, world, batch, heads, head_dim, dtype_bytes).total
    n = max(0, memory_bytes // per_step) * step
    while n and ring_memory(n, world, batch, heads, head_dim, dtype_bytes).total > memory_bytes:
        n -= step
    return n
