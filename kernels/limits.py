"""What the kernels accept and what a tile shape costs: plain Python, importable without torch or Triton
(the app checks settings with it before the heavy imports)."""
from __future__ import annotations

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


def smem_bytes(block_m: int, block_n: int, head_dim: int, dtype_bytes: int, num_stages: int = 2) -> int:
    """Shared memory a flash tile shape needs, roughly: the Q block plus `num_stages` buffered K and V tiles."""
    return block_m * head_dim * dtype_bytes + num_stages * 2 * block_n * head_dim * dtype_bytes
