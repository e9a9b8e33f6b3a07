"""First call on a new GPU: which path runs the kernels, the device's facts and measured roofs, then our flash and
naive kernels against float64 at every dtype and head dim they support, at ragged N, causal and not.

    python -m perf.h200.smoke          (on the GPU; then `python -m pytest -m gpu tests/`)
"""
from __future__ import annotations

import itertools
import sys
import time

from bench.device import device_facts, versions
from costmodel import Shape
from bench.measure import Setting
from costmodel import HEAD_DIMS
from kernels.runtime import backend_reason
from perf.h200.checks import RAGGED, TOLERANCE, require_gpu, sweep


def main() -> int:
    require_gpu("perf.h200.smoke")
    print(backend_reason(), versions())
    print(device_facts(measure_bandwidth=True))
    start = time.time()
    failures = 0
    for algorithm in ("fa2", "naive"):
        settings = [Setting(algorithm, Shape(n, 2, 3, d, dtype, causal))
                    for dtype, d, n, causal in itertools.product(TOLERANCE, HEAD_DIMS, RAGGED, (False, True))]
        failures += sweep(settings, label=algorithm)
    print(f"float64 sweep done in {time.time() - start:.0f} s, failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
