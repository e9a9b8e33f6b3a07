"""The decode scene's animation data: our split-KV kernel (kernels/decode.py) run in trace mode on a small paged cache
(the CPU interpreter without a GPU, the GPU live), turned into plain data for viz.decode_trace_figure.

One sequence, 4 query heads sharing one K/V head, head_dim 64, a cache of 1,024 tokens in pages of 16 under a
shuffled block table, 4 splits: what each split's program read, the running (m, l) of head 0's row after each of
its key blocks, each split's final (m, l), and the merge, checked against the kernel's own LSE and a float64
reference. Built once per (seed, device) in this process.
"""
from __future__ import annotations

import functools
import math
import threading

TRACE_KV_LEN = 1024
TRACE_PAGE_SIZE = 16
TRACE_SPLITS = 4
TRACE_HEADS, TRACE_HEAD_DIM = 4, 64
_BUILDS = threading.Lock()


@functools.lru_cache(maxsize=4)
def decode_trace(seed: int = 0) -> dict:
    """The trace as plain data (docs/data-contracts.md, "DecodeTrace"): lists and numbers only."""
    import torch

    from kernels import decode
    from kernels.peers import paged_cache
    from kernels.reference import reference_decode
    from kernels.runtime import DEVICE
    with _BUILDS:
        gen = torch.Generator(device=DEVICE).manual_seed(seed)
        q = torch.randn(1, TRACE_HEADS, 1, TRACE_HEAD_DIM, generator=gen, device=DEVICE)
        k, v = (torch.randn(1, 1, TRACE_KV_LEN, TRACE_HEAD_DIM, generator=gen, device=DEVICE) for _ in range(2))
        k_pages, v_pages, table = paged_cache(k, v, TRACE_PAGE_SIZE, seed=seed)
        out, lse, trace = decode.decode_attention_traced(q, k_pages, v_pages, block_table=table,
                                                         num_splits=TRACE_SPLITS)
        ref_out, ref_lse = reference_decode(q, k, v)
    steps = trace.steps[0, 0, :, 0].cpu()     # (splits, steps, 2, block_m)
    finals = trace.splits[0, 0, :, 0].cpu()   # (splits, 2, block_m)
    block_n = trace.block_n
    key_blocks = math.ceil(TRACE_KV_LEN / block_n)
    per_split = math.ceil(key_blocks / TRACE_SPLITS)
    split_of_block = [min(kb // per_split, TRACE_SPLITS - 1) for kb in range(key_blocks)]
    running = [[(float(steps[s, t, 0, 0]), float(steps[s, t, 1, 0])) for t in range(steps.shape[1])
                if not math.isnan(float(steps[s, t, 1, 0]))] for s in range(TRACE_SPLITS)]
    final = [(float(finals[s, 0, 0]), float(finals[s, 1, 0])) for s in range(TRACE_SPLITS)]
    merged = math.log(sum(l_s * math.exp(m_s) for m_s, l_s in final if l_s > 0))
    return {"kv_len": TRACE_KV_LEN, "page_size": TRACE_PAGE_SIZE, "block_n": block_n, "splits": TRACE_SPLITS,
            "heads": TRACE_HEADS, "head_dim": TRACE_HEAD_DIM,
            "block_table": [int(p) for p in table[0].cpu()], "split_of_block": split_of_block,
            "running": running, "final": final, "merged_lse": merged,
            "kernel_lse": float(lse[0, 0, 0]), "reference_lse": float(ref_lse[0, 0, 0]),
            "max_abs_err": float((out.double().cpu() - ref_out.double().cpu()).abs().max()),
            "device": "GPU" if DEVICE.type == "cuda" else "CPU (Triton interpreter)"}
