"""The tuned tile configs (kernels.fa2.TUNED_CONFIGS) as flash_attention picks them (kernels.fa2.config_for)
against float64: every tuned class, N = 1, 17, 257, 1000, 4097, causal and not. Run after a tuning change.

    python -m perf.h200.check_tuned    (on the GPU)
"""
from __future__ import annotations

import sys

from costmodel import Shape
from bench.measure import Setting
from kernels.fa2 import TUNED_CONFIGS, config_for
from kernels.inputs import DTYPES_BY_NAME
from perf.h200.checks import RAGGED, require_gpu, sweep

DTYPES_OF_SIZE = {2: ("float16", "bfloat16"), 4: ("float32",)}


def main() -> int:
    require_gpu("perf.h200.check_tuned")
    settings = []
    for (head_dim, dtype_bytes, causal), config in TUNED_CONFIGS.items():
        for dtype in DTYPES_OF_SIZE[dtype_bytes]:
            assert config_for(head_dim, DTYPES_BY_NAME[dtype], causal) == config, (head_dim, dtype, causal)
            settings += [Setting("fa2", Shape(n, 2, 3, head_dim, dtype, causal))
                         for n in RAGGED]
    return 1 if sweep(settings, label="tuned configs") else 0


if __name__ == "__main__":
    sys.exit(main())
