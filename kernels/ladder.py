"""FA-3's ideas one by one, as runnable steps: the FA-2 order teaching kernel (kernels/fa2.py), then each row of the
FA-3 style kernel's ablation ladder (kernels/fa3.py `LADDER`), in order. The bench times them side by side
(`python -m bench --ladder`), the ablation scene draws them, perf/h200/ladder.py checks and times them on the H200.

A step's name is its key everywhere: the results file's `config` field, the scene's bar, the GPU script's row.
The FA-2 step's name is `FA2_STEP`; the others are the LADDER's row names as they stand in kernels/fa3.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels.runtime import INTERPRET  # noqa: F401 - first: it picks the backend before any kernel is decorated
import torch

from kernels import fa2, fa3

FA2_STEP = "FA-2 order (ours)"
SHAPE = dict(batch=2, heads=16, seq_len=8192, head_dim=128, causal=False)  # the FA-3 paper's ablation: 8K, d128


@dataclass(frozen=True)
class Step:
    name: str                     # FA2_STEP or a LADDER row's name
    algorithm: str                # the spec key of the kernel it runs: "fa2" or "fa3"
    config: fa3.Fa3Config | None  # the FA-3 configuration (None: the teaching kernel's shipped one)

    def call(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
        """O of this step's kernel (through its library call, at this step's configuration)."""
        if self.config is None:
            return fa2.flash_attention(q, k, v, causal=causal)
        return fa3.flash_attention_v3(q, k, v, causal=causal, config=self.config)


def steps() -> tuple[Step, ...]:
    """The ladder as it runs: FA-2 order, then every LADDER row in its order."""
    return (Step(FA2_STEP, "fa2", None), *(Step(name, "fa3", config) for name, config in fa3.LADDER.items()))


def step(name: str) -> Step:
    for s in steps():
        if s.name == name:
            return s
    raise ValueError(f"no ladder step {name!r}: the steps are {', '.join(repr(s.name) for s in steps())}")


def unavailable_reason(device=None) -> str | None:
    """Why the ladder cannot run here (its FA-3 rows need Hopper), None when it can."""
    return fa3.v3_unavailable_reason(device, dtype=torch.bfloat16, head_dim=SHAPE["head_dim"])


def proton_launcher(name: str, head_dim: int, causal: bool, dtype: torch.dtype):
    """As the specs' Proton facets give it (bench/phases.py): (launch(q, k, v, causal, scale, profile), the config as
    plain data, the warps to sample, the language) for one step of the ladder."""
    s = step(name)
    if s.config is None:
        return fa2.proton_launcher(head_dim, causal, dtype)
    config = s.config

    def launch(q, k, v, causal, scale, profile=False):
        return fa3.launch_v3(q, k, v, causal, scale, config, profile=profile)
    producer_group = 4 * config.num_consumers  # one warp per consumer warpgroup, every warp of the producer's group
    return (launch, {**config.__dict__, "tile_m": config.tile_m},
            [4 * i for i in range(config.num_consumers)] + list(range(producer_group, producer_group + 4)), "gluon")
