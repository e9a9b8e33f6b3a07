"""What the bench can time: one row per algorithm, keyed like the cost model's table (costmodel.ALGORITHM_MODELS)
and the palette's (viz/theme.py); a test checks that the three agree. A new kernel is one row here.

Torch-free at import: each row's `runner` imports its kernel when it is first asked for, so reading a results
file (which checks algorithm names against this table) costs no torch import.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import costmodel

# The FA1-order kernel runs one program per (batch, head), walking all (N / BLOCK_N)·(N / BLOCK_M) steps in turn:
# at 16K tokens that is 65536 steps, a fraction of a second on an H200; at 256K, a minute. Timed up to here.
FLASH_V1_TIMED_MAX_SEQ_LEN = 16384


@dataclass(frozen=True)
class Algorithm:
    key: str
    ours: bool         # one of our kernels (the others are PyTorch's), measured past its own out-of-memory wall
    interpreter: bool  # measured in Triton's CPU interpreter too, at small N (the others need a GPU)
    # (setting, q, k, v) -> the call to time; raises ValueError for a setting it does not run (an "error" record)
    runner: Callable[[Any, Any, Any, Any], Callable[[], Any]]
    # (setting) -> (block_m, block_n) the kernel runs it with, or None where the algorithm has no tiles we choose
    tiles: Callable[[Any], tuple[int, int] | None] = lambda setting: None
    # (setting) -> why the kernel cannot run it on this machine (None when it can)
    unavailable: Callable[[Any], str | None] = lambda setting: None


def _torch_dtype(setting):
    from kernels.inputs import DTYPES_BY_NAME
    return DTYPES_BY_NAME[setting.dtype]


def _flash(setting, q, k, v):
    from kernels.flash import flash_attention
    return lambda: flash_attention(q, k, v, causal=setting.causal)


def _flash_tiles(setting):
    from kernels.flash import config_for
    config = config_for(setting.head_dim, _torch_dtype(setting), setting.causal)
    return config.block_m, config.block_n


def _flash_v1(setting, q, k, v):
    from kernels.flash_v1 import flash_attention_v1
    if setting.seq_len > FLASH_V1_TIMED_MAX_SEQ_LEN:
        raise ValueError(f"the FA1-order kernel runs one program per head: past {FLASH_V1_TIMED_MAX_SEQ_LEN} "
                         f"tokens one call takes seconds, so it is not timed there")
    return lambda: flash_attention_v1(q, k, v, causal=setting.causal)


def _flash_v1_tiles(setting):
    from kernels.flash_v1 import config_for_v1
    config = config_for_v1(setting.head_dim, _torch_dtype(setting))
    return config.block_m, config.block_n


def _flash_v3(setting, q, k, v):
    from kernels.flash_v3 import flash_attention_v3
    return lambda: flash_attention_v3(q, k, v, causal=setting.causal)


def _flash_v3_tiles(setting):
    """(query rows per program, keys per K/V tile): its consumer warpgroups' rows together, as the grid runs."""
    from kernels.flash_v3 import config_for_v3
    if setting.head_dim not in (64, 128):
        return None
    config = config_for_v3(setting.head_dim, setting.causal)
    return config.tile_m, config.block_n


def _flash_v3_unavailable(setting):
    from kernels.flash_v3 import v3_unavailable_reason
    return v3_unavailable_reason(dtype=_torch_dtype(setting), head_dim=setting.head_dim)


def _naive(setting, q, k, v):
    from kernels.naive import naive_attention
    return lambda: naive_attention(q, k, v, causal=setting.causal)


def torch_naive_attention(q, k, v, causal: bool, sm_scale: float):
    """Standard attention in PyTorch eager, the same math as our naive kernels: fp32 scores and softmax,
    P rounded to the input dtype, O = PV."""
    import torch
    batch, heads, n, d = q.shape
    q3, k3, v3 = (t.reshape(batch * heads, n, d) for t in (q, k, v))  # (B·H, N, D)
    s = torch.bmm(q3, k3.transpose(1, 2), out_dtype=torch.float32)  # (B·H, N, N) fp32
    s.mul_(sm_scale)
    if causal:
        s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)  # (B·H, N, N)
    del s
    return torch.bmm(p, v3).reshape(batch, heads, n, d)


def _torch_naive(setting, q, k, v):
    scale = 1.0 / math.sqrt(setting.head_dim)
    return lambda: torch_naive_attention(q, k, v, setting.causal, scale)


def _sdpa(backend: str | None):
    def runner(setting, q, k, v):
        from torch.nn.functional import scaled_dot_product_attention as sdpa
        if backend is None:
            return lambda: sdpa(q, k, v, is_causal=setting.causal)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        chosen = getattr(SDPBackend, backend)

        def run():
            with sdpa_kernel(chosen):
                return sdpa(q, k, v, is_causal=setting.causal)
        return run
    return runner


ALGORITHMS: dict[str, Algorithm] = {algorithm.key: algorithm for algorithm in (
    Algorithm("flash", True, True, _flash, _flash_tiles),
    Algorithm("naive", True, True, _naive),
    Algorithm("sdpa_default", False, False, _sdpa(None)),
    Algorithm("sdpa_flash", False, False, _sdpa("FLASH_ATTENTION")),
    Algorithm("torch_naive", False, False, _torch_naive),
    Algorithm("flash_v1", True, False, _flash_v1, _flash_v1_tiles),
    Algorithm("flash_v3", True, False, _flash_v3, _flash_v3_tiles, _flash_v3_unavailable),
)}
ALGORITHM_KEYS = tuple(ALGORITHMS)
OURS = tuple(key for key, algorithm in ALGORITHMS.items() if algorithm.ours)
ON_INTERPRETER = tuple(key for key, algorithm in ALGORITHMS.items() if algorithm.interpreter)
assert ALGORITHM_KEYS == costmodel.ALGORITHMS, "bench and cost model must list the same algorithms, in one order"
