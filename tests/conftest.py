"""Shared test set-up: the repo root on sys.path, the `gpu` marker, random-input and poison helpers."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config, items):
    import kernels
    if kernels.backend() == "cuda":
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU Triton can drive ({kernels.backend_reason()})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
