"""What our flash kernel actually did, as plain arrays for the app's animation and SM timeline.

`trace_flash` runs the kernel in trace mode at small N (interpreter on CPU, or the GPU) on inputs
made to show the online softmax at work: in every query block one row meets its largest score late,
so the running max jumps and the rescale factor α = exp(m_old − m_new) matters. The same inputs go
through the naive kernel, so the last frame can show max |O_flash − O_standard|.

Which kernel runs is the `order`: a kernel whose spec has a trace facet (kernels/specs.py): "fa2" (kernels/fa2.py,
Q block outer) or "fa1" (kernels/fa1.py, K/V tile outer), whose steps come in the order the kernel ran them, read
from the kernel's own step counter. Both traces say what each step loaded from and stored to HBM (`loads`, `stores`: row ranges
of Q, K, V, O, LSE and FA1's fp32 O, m, l), the picture of the HBM ↔ SRAM view.

`sm_timeline` runs the kernel at a real size on the GPU recording, per program, the SM it ran on and
its start and end (%globaltimer): waves of blocks across the SMs, and causal load imbalance.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from costmodel import IO_TENSORS
from kernels import specs
from kernels.fa2 import config_for, flash_attention_sm_timeline
from kernels.inputs import DTYPES_BY_NAME
from kernels.naive import naive_attention
from kernels.runtime import DEVICE, INTERPRET, backend, kernel_launch_lock

TRACE_MAX_SEQ_LEN = 1024
# What the traced inputs are, in one sentence the animation's caption shows: the planted key is what makes the
# running max jump late (to m ≈ 15 or more), not a property of random data.
LATE_MAX_INPUTS = ("random normal inputs; in every Q block one key planted to meet its row's max late "
                   "(k = 1.5·q)")


def orders() -> tuple[str, ...]:
    """The kernels a trace can come from: the specs with a trace facet (their loop orders)."""
    return tuple(spec.key for spec in specs.with_facet("trace"))


def _traced(order: str) -> specs.Spec:
    if order not in orders():
        raise ValueError(f"order must be one of {orders()}, got {order!r}")
    return specs.spec(order)


@dataclass(frozen=True)
class FlashTrace:
    seq_len: int
    head_dim: int
    block_m: int
    block_n: int
    causal: bool
    sm_scale: float
    dtype: str
    backend: str
    seed: int
    steps: np.ndarray         # (T, 2) int: (q_block, k_block) in the kernel's order
    row_max: np.ndarray       # (T, block_m): running max m, natural-log units; NaN past seq_len
    row_sum: np.ndarray       # (T, block_m): running sum l
    alpha: np.ndarray         # (T, block_m): rescale factor applied at the step
    out_rows: np.ndarray      # (T, block_m, head_dim): the block's acc / l after the step
    out_flash: np.ndarray     # (seq_len, head_dim)
    out_naive: np.ndarray  # (seq_len, head_dim)
    max_abs_err: float        # max |O_flash − O_standard|
    scores: np.ndarray        # (seq_len, seq_len) float64 sm_scale·QKᵀ, NaN where the causal mask hides a key
    order: str = "fa2"        # which kernel: a spec with a trace facet ("fa2": kernels/fa2.py, "fa1": kernels/fa1.py)
    loads: np.ndarray | None = None   # (T, len(IO_TENSORS), 2) int: rows [start, end) loaded from HBM
    stores: np.ndarray | None = None  # (T, len(IO_TENSORS), 2) int: rows [start, end) stored to HBM
    inputs: str = LATE_MAX_INPUTS     # what q, k, v are, in one sentence (late_max_inputs plants one key a block)

    def to_dict(self) -> dict:
        return asdict(self)


def late_max_inputs(seq_len: int, head_dim: int, block_m: int, causal: bool, dtype: torch.dtype, seed: int):
    """Random q, k, v (1, 1, N, D) where the last row of each query block meets its top score late:
    its key is the last one that row can see (the diagonal when causal, the last key otherwise), planted as
    k = 1.5·q (LATE_MAX_INPUTS says so wherever the trace is shown)."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn((1, 1, seq_len, head_dim), generator=gen, dtype=torch.float64) for _ in range(3))
    for block, row in enumerate(range(block_m - 1, seq_len + block_m - 1, block_m)):
        row = min(row, seq_len - 1)
        key = row if causal else max(seq_len - 1 - block, 0)
        k[0, 0, key] = q[0, 0, row] * 1.5
    return tuple(t.to(dtype).to(DEVICE) for t in (q, k, v))


def step_io(order: str, steps: np.ndarray, seq_len: int, block_m: int, block_n: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """What each step of a kernel loads from and stores to HBM, as the kernels' code does it: row ranges
    [start, end) per IO_TENSORS entry, int64 (T, len(IO_TENSORS), 2); an empty range where it moves none.

    Q block outer (FA2 order, kernels/fa2.py): the Q block at its first step, the K and V tiles every step, O and the
    LSE at the Q block's last step. K/V tile outer (FA1 order, kernels/fa1.py): the K and V tiles when the outer loop
    reaches them, the Q block every step, the block's O, m, l ("state") read back at every step but its first
    and written back at every step but its last, where O and the LSE are written instead."""
    kv_outer = _traced(order).trace.kv_outer
    steps = np.asarray(steps, dtype=np.int64).reshape(-1, 2)
    q_block, k_block = steps[:, 0], steps[:, 1]
    rows = np.stack([q_block * block_m, np.minimum((q_block + 1) * block_m, seq_len)], axis=1)
    cols = np.stack([k_block * block_n, np.minimum((k_block + 1) * block_n, seq_len)], axis=1)
    first = np.ones(len(steps), dtype=bool)  # the Q block's first step, in the kernel's order
    last = np.ones(len(steps), dtype=bool)
    seen: set[int] = set()
    for t, block in enumerate(q_block.tolist()):
        first[t] = block not in seen
        seen.add(block)
    seen.clear()
    for t in range(len(steps) - 1, -1, -1):
        last[t] = int(q_block[t]) not in seen
        seen.add(int(q_block[t]))
    loads = np.zeros((len(steps), len(IO_TENSORS), 2), dtype=np.int64)
    stores = np.zeros_like(loads)
    q, k, v, o, lse, state = range(len(IO_TENSORS))
    if not kv_outer:
        loads[:, q] = np.where(first[:, None], rows, 0)
        loads[:, k] = loads[:, v] = cols
        stores[:, o] = stores[:, lse] = np.where(last[:, None], rows, 0)
    else:
        tile_start = np.r_[True, k_block[1:] != k_block[:-1]]
        loads[:, k] = loads[:, v] = np.where(tile_start[:, None], cols, 0)
        loads[:, q] = rows
        loads[:, state] = np.where(first[:, None], 0, rows)
        stores[:, state] = np.where(last[:, None], 0, rows)
        stores[:, o] = stores[:, lse] = np.where(last[:, None], rows, 0)
    return loads, stores


def trace_flash(seq_len: int = 256, head_dim: int = 64, block_m: int = 64, block_n: int = 64,
                causal: bool = False, dtype: str = "float32", seed: int = 0, order: str = "fa2") -> FlashTrace:
    """Run a traced kernel (order: "fa2", kernels/fa2.py; "fa1", kernels/fa1.py) in trace mode on one (batch, head)
    and return its step-by-step state, in the order the kernel ran the steps."""
    if not isinstance(seq_len, int) or not 1 <= seq_len <= TRACE_MAX_SEQ_LEN:
        raise ValueError(f"the traced animation runs at 1 ≤ seq_len ≤ {TRACE_MAX_SEQ_LEN}; got {seq_len!r}")
    if dtype not in DTYPES_BY_NAME:
        raise ValueError(f"unsupported dtype {dtype!r}: use one of {tuple(DTYPES_BY_NAME)}")
    traced = specs.load(_traced(order).trace.traced)
    torch_dtype = DTYPES_BY_NAME[dtype]
    q, k, v = late_max_inputs(seq_len, head_dim, block_m, causal, torch_dtype, seed)
    sm_scale = 1.0 / math.sqrt(head_dim)
    with kernel_launch_lock():  # one viewer's trace runs both kernels before the next viewer's starts
        o_flash, _, trace = traced(q, k, v, causal, block_m, block_n, sm_scale)
        o_std = naive_attention(q, k, v, causal=causal, sm_scale=sm_scale)
    stats = trace.stats[0].cpu().double().numpy()  # (n_q, n_k, 3, block_m)
    outs = trace.out[0].cpu().double().numpy()     # (n_q, n_k, block_m, head_dim)
    visited = ~np.isnan(stats[:, :, 1, 0])          # steps the kernel ran (l is never NaN there)
    steps = np.argwhere(visited)                    # row-major: q block, then k blocks ascending
    if getattr(trace, "order", None) is not None:  # the kernel numbered its steps as it ran them (FA1 order)
        ran_at = trace.order[0].cpu().numpy()[steps[:, 0], steps[:, 1]]
        steps = steps[np.argsort(ran_at, kind="stable")]
    rows_valid = (steps[:, :1] * block_m + np.arange(block_m)[None, :]) < seq_len  # (T, block_m)
    pick = (steps[:, 0], steps[:, 1])

    def per_step(stat: int) -> np.ndarray:
        return np.where(rows_valid, stats[pick][:, stat], np.nan)

    q64, k64 = q[0, 0].cpu().double(), k[0, 0].cpu().double()
    scores = (q64 @ k64.T * sm_scale).numpy()
    if causal:
        scores[np.triu_indices(seq_len, 1)] = np.nan
    o_flash_np = o_flash[0, 0].cpu().double().numpy()
    o_std_np = o_std[0, 0].cpu().double().numpy()
    loads, stores = step_io(order, steps, seq_len, block_m, block_n)
    return FlashTrace(
        seq_len=seq_len, head_dim=head_dim, block_m=block_m, block_n=block_n, causal=causal, sm_scale=sm_scale,
        dtype=dtype, backend=backend(), seed=seed, steps=steps,
        row_max=per_step(0), row_sum=per_step(1), alpha=per_step(2),
        out_rows=np.where(rows_valid[:, :, None], outs[pick], np.nan),
        out_flash=o_flash_np, out_naive=o_std_np,
        max_abs_err=float(np.max(np.abs(o_flash_np - o_std_np))), scores=scores,
        order=order, loads=loads, stores=stores, inputs=LATE_MAX_INPUTS,
    )


@dataclass(frozen=True)
class SmTimeline:
    sm_count: int
    seq_len: int
    heads: int
    batch: int
    head_dim: int
    block_m: int
    causal: bool
    sm_id: list[int]
    t_start_ns: list[int]
    t_end_ns: list[int]
    q_block: list[int]
    bh: list[int]

    def to_dict(self) -> dict:
        return asdict(self)


def sm_timeline(seq_len: int = 16384, heads: int = 32, batch: int = 1, head_dim: int = 128,
                causal: bool = False, dtype: str = "bfloat16", seed: int = 0) -> SmTimeline:
    """Which SM ran which program of the flash kernel, and when (GPU only)."""
    if INTERPRET:
        raise ValueError("the SM timeline needs a GPU; without one, use the recorded timelines in results/")
    torch_dtype = DTYPES_BY_NAME[dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, generator=gen, device="cuda").to(torch_dtype) for _ in range(3))
    flash_attention_sm_timeline(q, k, v, causal)  # warm-up: compile outside the recorded run
    _, sm = flash_attention_sm_timeline(q, k, v, causal)
    sm = sm.cpu()  # (B·H, n_q, 3)
    n_q = sm.shape[1]
    start = sm[..., 1] - sm[..., 1].min()
    end = sm[..., 2] - sm[..., 1].min()
    q_block = torch.arange(n_q).expand(sm.shape[0], n_q)
    bh = torch.arange(sm.shape[0])[:, None].expand(sm.shape[0], n_q)
    return SmTimeline(
        sm_count=torch.cuda.get_device_properties(0).multi_processor_count, seq_len=seq_len, heads=heads,
        batch=batch, head_dim=head_dim, block_m=config_for(head_dim, torch_dtype, causal).block_m, causal=causal,
        sm_id=sm[..., 0].flatten().tolist(), t_start_ns=start.flatten().tolist(), t_end_ns=end.flatten().tolist(),
        q_block=q_block.flatten().tolist(), bh=bh.flatten().tolist(),
    )
