"""The tuned configs of perf/tune_rest.py, as flash_attention picks them (kernels.flash.config_for), against a
float64 reference: head dims 16, 32, 256 in fp16 and bf16, 64 in fp32; N = 1, 17, 257, 1000, 4097; causal and not.

    python -m perf.check_tuned   (on the GPU)
"""
import itertools
import sys

import torch

from kernels.flash import TUNED_CONFIGS, config_for, flash_attention
from perf.tune_rest import reference

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
torch.manual_seed(0)
bad = checks = 0
for (d, dtype), n, causal in itertools.product(
        [(16, torch.float16), (16, torch.bfloat16), (32, torch.float16), (32, torch.bfloat16),
         (256, torch.float16), (256, torch.bfloat16), (64, torch.float32)], (1, 17, 257, 1000, 4097), (False, True)):
    q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(3))
    assert config_for(d, dtype, causal) == TUNED_CONFIGS[(d, q.element_size(), causal)]
    ref = reference(q, k, v, causal)
    err = ((flash_attention(q, k, v, causal=causal).double() - ref).norm() / ref.norm()).item()
    checks += 1
    if not err < TOL[dtype]:
        bad += 1
        print("FAIL", d, dtype, n, causal, err)
print(f"{checks} checks of the tuned configs against float64, {bad} failures")
