"""Is there a CUDA device at all? Asked of the driver through ctypes, without importing torch.

Importing torch and Triton takes seconds; on a machine with no GPU the app need not pay that to
learn it must show the recording. When a device exists, `kernels.runtime` makes the real decision.
"""
from __future__ import annotations

import ctypes
import os

NO_DRIVER = "no CUDA driver on this machine"
NO_DEVICE = "the CUDA driver sees no GPU"


def cuda_devices() -> tuple[int, str]:
    """(number of CUDA devices the driver sees, why none when 0)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        if driver.cuInit(0) != 0:
            return 0, NO_DEVICE
        count = ctypes.c_int(0)
        if driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0, NO_DEVICE
        return count.value, "" if count.value else NO_DEVICE
    return 0, NO_DRIVER


def interpreter_without_torch() -> str | None:
    """The reason the CPU interpreter path is certain, found without importing torch; None if unsure."""
    if os.environ.get("FLASH_LIVE_BACKEND", "").strip().lower() == "interpreter":
        return "interpreter forced by FLASH_LIVE_BACKEND=interpreter"
    if os.environ.get("TRITON_INTERPRET", "") == "1":
        return "interpreter forced by TRITON_INTERPRET=1"
    count, why = cuda_devices()
    if count == 0:
        return f"no CUDA GPU ({why}): kernels run in Triton's CPU interpreter"
    return None
