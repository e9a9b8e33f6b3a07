"""Tiles that fit the GPU's shared memory (kernels/runtime.py fit_shared_memory, and each kernel's smaller_tiles): a
tile tuned on a Hopper (232,448 bytes a block) may need more than an A100 (166,912) or a consumer Ampere, Ada or
Blackwell card (101,376) has, and Triton refuses such a launch (OutOfResources). On the CPU: the fallback's loop
against a stand-in launch, and the shrink chains of every shipped configuration. On a GPU: the kernels under a
lowered limit, in a subprocess (Triton checks the limit once per compiled kernel, so the process must start with
it)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernels import decode, fa1, fa2, fa2_bwd, naive, runtime  # first: kernels.runtime picks Triton's backend
import torch
from triton.runtime.errors import OutOfResources

import costmodel

ROOT = Path(__file__).resolve().parents[1]
CONSUMER_LIMIT = 101_376  # bytes of shared memory a block on sm_86, sm_89 and sm_120 cards
A100_LIMIT = 166_912


def _bytes(c: fa2.FlashConfig, head_dim: int = 64, size: int = 4) -> int:
    """A stand-in for a build's shared memory: staged K and V tiles and the Q tile (grows with each knob)."""
    return size * head_dim * (2 * c.num_stages * c.block_n + c.block_m)


class _Launch:
    """run(config): raises Triton's OutOfResources where the stand-in build exceeds `limit`; counts its calls."""

    def __init__(self, limit: int, name: str = "shared memory"):
        self.limit, self.name, self.calls = limit, name, []

    def __call__(self, c):
        self.calls.append(c)
        if _bytes(c) > self.limit:
            raise OutOfResources(_bytes(c), self.limit, self.name)
        return ("ran", c)


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch):
    monkeypatch.setattr(runtime, "_FITTED", {})


def test_a_config_that_fits_runs_as_it_is_and_nothing_is_remembered():
    run = _Launch(10**9)
    config = fa2.TUNED_CONFIGS[(64, 4, False)]
    assert runtime.fit_shared_memory(run, config, fa2.smaller_tiles, ("k",), "x") == ("ran", config)
    assert run.calls == [config] and runtime._FITTED == {}


def test_the_first_smaller_config_that_fits_runs_and_is_remembered_for_the_next_call():
    config = fa2.TUNED_CONFIGS[(64, 4, False)]  # fp32 d64, 64×128, 3 stages: 180,480 bytes on sm_80, over an A100
    chain = [config]
    while _bytes(chain[-1]) > A100_LIMIT:
        chain.append(fa2.smaller_tiles(chain[-1]))
    run = _Launch(A100_LIMIT)
    assert runtime.fit_shared_memory(run, config, fa2.smaller_tiles, ("k",), "x") == ("ran", chain[-1])
    assert run.calls == chain and len(chain) > 1
    assert chain[-1].block_m == config.block_m and chain[-1].block_n == config.block_n  # fewer stages came first
    assert runtime.fitted_config(("k",), config) == chain[-1]
    again = _Launch(A100_LIMIT)
    runtime.fit_shared_memory(again, config, fa2.smaller_tiles, ("k",), "x")
    assert again.calls == [chain[-1]]  # straight to the tiles that fitted
    other = _Launch(A100_LIMIT)
    runtime.fit_shared_memory(other, config, fa2.smaller_tiles, ("another device",), "x")
    assert other.calls == chain  # remembered per key


def test_other_failures_pass_through():
    config = fa2.TUNED_CONFIGS[(64, 4, False)]
    with pytest.raises(OutOfResources, match="threads"):
        runtime.fit_shared_memory(_Launch(1, name="threads"), config, fa2.smaller_tiles, ("k",), "x")

    def broken(c):
        raise RuntimeError("not a resource")
    with pytest.raises(RuntimeError, match="not a resource"):
        runtime.fit_shared_memory(broken, config, fa2.smaller_tiles, ("k",), "x")


def test_when_nothing_fits_the_error_names_the_kernel_the_limit_and_the_tiles_tried():
    run = _Launch(100)
    config = fa2.FlashConfig(32, 32, 2, 2)
    with pytest.raises(ValueError, match=r"the FA-2 order kernel: no tile shape fits this GPU's 100 bytes") as info:
        runtime.fit_shared_memory(run, config, fa2.smaller_tiles, ("k",), "the FA-2 order kernel")
    assert run.calls[0] == config and run.calls[-1] == fa2.FlashConfig(16, 16, 1, 1)
    assert str(config) in str(info.value) and isinstance(info.value.__cause__, OutOfResources)


def _chain(config, shrink):
    out = [config]
    while (nxt := shrink(out[-1])) is not None:
        assert nxt != out[-1]
        out.append(nxt)
        assert len(out) < 64
    return out


@pytest.mark.parametrize("config", sorted({*fa2.TUNED_CONFIGS.values(),
                                           *(fa2._default_config(d, b) for d in costmodel.HEAD_DIMS for b in (2, 4)),
                                           *(fa1.config_for_v1(d, t) for d in costmodel.HEAD_DIMS
                                             for t in (torch.bfloat16, torch.float32))}, key=repr), ids=repr)
def test_every_forward_config_shrinks_through_valid_tiles_to_the_smallest(config):
    chain = _chain(config, fa2.smaller_tiles)
    for before, c in zip(chain, chain[1:]):
        costmodel.check_tiles(c.block_m, c.block_n)
        assert 1 <= c.num_warps <= before.num_warps and c.num_stages >= 1
        if c.block_m < config.block_m:  # rows halved: at most one warp per 16 of them
            assert c.num_warps <= max(1, c.block_m // 16)
    assert chain[-1] == fa2.FlashConfig(16, 16, 1, 1)
    assert [c.num_stages for c in chain] == sorted((c.num_stages for c in chain), reverse=True)


@pytest.mark.parametrize("key", sorted({(d, dt, c, t) for d in costmodel.HEAD_DIMS
                                        for dt in (torch.bfloat16, torch.float32)
                                        for c in (False, True) for t in (False, True)}, key=repr), ids=repr)
def test_every_backward_config_shrinks_through_valid_tiles_to_the_smallest(monkeypatch, key):
    monkeypatch.setattr(fa2_bwd, "INTERPRET", False)  # the GPU's choice
    head_dim, dtype, causal, tma = key
    chain = _chain(fa2_bwd.config_for(head_dim, dtype, causal, tma=tma), fa2_bwd.smaller_tiles)
    for c in chain:
        fa2_bwd._check_config(c)
        assert c.tma == chain[0].tma
    last = chain[-1]
    assert (last.block_m1, last.block_n1, last.block_m2, last.block_n2, last.num_stages) == (16, 16, 16, 16, 1)


@pytest.mark.parametrize("config", sorted({*decode.TUNED_DECODE_CONFIGS.values(), *decode.TUNED_PAGED_DECODE_CONFIGS.values(),
                                           *decode.HOST_BOUND_DECODE_CONFIGS.values(),
                                           *(decode._default_decode_config(d, b) for d in costmodel.HEAD_DIMS
                                             for b in (2, 4))}, key=repr), ids=repr)
def test_every_decode_config_shrinks_to_the_smallest(config):
    chain = _chain(config, decode.smaller_decode_config)
    for before, c in zip(chain, chain[1:]):
        costmodel.check_tiles(c.max_block_m, c.block_n)
        assert c.num_stages <= before.num_stages and c.tma == config.tma and c.merge_splits == config.merge_splits
    last = chain[-1]
    assert (last.block_n, last.num_stages, last.max_block_m) == (16, 1, 16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("head_dim", costmodel.HEAD_DIMS)
def test_every_naive_matmul_tile_shrinks_to_the_smallest(monkeypatch, head_dim, dtype):
    monkeypatch.setattr(naive, "INTERPRET", False)  # the GPU's choice
    chain = _chain(naive._matmul_tiles(head_dim, dtype), naive.smaller_matmul_tiles)
    for before, (block_m, block_n, warps, stages) in zip(chain, chain[1:]):
        costmodel.check_tiles(block_m, block_n)
        assert 1 <= warps <= before[2] and 1 <= stages <= before[3]
    assert chain[-1][:2] == (16, 16) and chain[-1][3] == 1 and chain[-1][2] == 1


GPU_SCRIPT = textwrap.dedent("""
    import sys, torch, triton.compiler.compiler as cc
    LIMIT = int(sys.argv[1])
    cc.max_shared_mem = lambda device: LIMIT  # what the lent card would say if it were a smaller one
    from kernels import decode, fa1, fa2, fa2_bwd, naive, runtime
    from kernels.reference import reference_attention, reference_gradients, relative_error
    torch.manual_seed(0)
    tol = {torch.bfloat16: 1e-2, torch.float32: 1e-5}
    for kernel, head_dim, dtype, causal in [("fa2", 64, torch.float32, False), ("fa2", 256, torch.bfloat16, True),
                                            ("fa1", 256, torch.bfloat16, False), ("fa2", 128, torch.bfloat16, True)]:
        q, k, v = (torch.randn(1, 2, 1000, head_dim, device="cuda").to(dtype) for _ in range(3))
        if kernel == "fa1":
            out = fa1.flash_attention_v1(q, k, v, causal=causal)
        else:
            out = fa2.flash_attention(q, k, v, causal=causal)
        err = relative_error(out, reference_attention(q, k, v, causal)[0])
        assert err < tol[dtype], (kernel, head_dim, dtype, causal, err)
        print(kernel, head_dim, str(dtype)[6:], causal, f"{err:.1e}", "ok")
    # the teaching backward at head_dim 128, causal and not
    for causal in (False, True):
        q, k, v = (torch.randn(1, 2, 1000, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o, lse = fa2.flash_attention(q, k, v, causal=causal, return_lse=True)
        do = torch.randn_like(o)
        grads = fa2_bwd.launch_backward(q, k, v, o, lse, do, causal, 128 ** -0.5)
        refs = reference_gradients(q, k, v, do, causal)
        errs = [relative_error(g, r) for g, r in zip(grads, refs)]
        assert max(errs) < 3e-2, (causal, errs)
        print("backward 128", causal, " ".join(f"{e:.1e}" for e in errs), "ok")
    # the naive kernels (S and P through HBM) at head_dim 128 in bf16 and 256 in fp32
    for head_dim, dtype in ((128, torch.bfloat16), (256, torch.float32)):
        q, k, v = (torch.randn(1, 2, 300, head_dim, device="cuda").to(dtype) for _ in range(3))
        err = relative_error(naive.naive_attention(q, k, v), reference_attention(q, k, v, False)[0])
        assert err < tol[dtype] * 10, (head_dim, dtype, err)  # P rounded to the input dtype
        print("naive", head_dim, str(dtype)[6:], f"{err:.1e}", "ok")
    # decode at head_dim 128 against a small cache (the host-bound settings: 4 stages), GQA 32/8
    q = torch.randn(1, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(1, 8, 4000, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = decode.decode_attention(q, kc, vc)
    again = decode.decode_attention(q, kc, vc)  # the plan that fitted, straight away
    err = relative_error(out, reference_attention(q, kc, vc, False)[0])
    assert err < 1e-2 and torch.equal(out, again), err
    print("decode 128", f"{err:.1e}", "ok")
    fitted = {key[0]: config for (key, first), config in runtime._FITTED.items()}
    print("fitted", sorted(fitted))
    assert {"fa2", "fa1", "fa2_bwd", "naive"} <= set(fitted), fitted
""")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_kernels_fall_back_to_tiles_a_consumer_card_holds():
    """With Triton told the GPU gives a block 101,376 bytes (a consumer Ampere, Ada or Blackwell card), the tiles
    tuned on a Hopper that need more fall back to smaller ones, and the answers still match float64: the FA-2
    order forward (fp32 head_dim 64, bf16 256 causal, bf16 128 causal), the FA-1 order forward (bf16 256), the
    teaching backward (bf16 128, causal and not), the naive kernels (bf16 128, fp32 256) and decode (bf16 128, a
    small cache's 4-stage settings)."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", GPU_SCRIPT, str(CONSUMER_LIMIT)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.count(" ok") == 9, done.stdout


A100_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["FLASH_LIVE_BACKEND"] = "aot"  # compile, never launch
    import torch
    from bench.compile_check import _capture, compile_entry
    from kernels import fa1, fa2
    from kernels.inputs import example_qkv
    LIMIT = int(sys.argv[1])
    cases = [("fa2", 64, torch.float32, fa2.config_for(64, torch.float32, False),
              lambda q, c: fa2._launch_flash(q, q, q, False, 0.125, c, None, None, False, False)),
             ("fa1", 256, torch.bfloat16, fa1.config_for_v1(256, torch.bfloat16),
              lambda q, c: fa1._launch_flash_v1(q, q, q, False, 0.125, c, None, 1))]
    for name, head_dim, dtype, config, launch in cases:
        q = example_qkv(head_dim, dtype)[0]
        chain = []
        while config is not None:
            (fn, args, kwargs), = _capture(lambda: launch(q, config))
            shared = compile_entry(fn, args, kwargs, 80).metadata.shared
            chain.append((config, shared))
            if shared <= LIMIT:
                break
            config = fa2.smaller_tiles(config)
        print(name, head_dim, str(dtype)[6:], " -> ".join(f"{c.block_m}x{c.block_n} w{c.num_warps} s{c.num_stages}"
                                                         f" {s}" for c, s in chain))
""")


def test_the_shipped_tiles_an_a100_cannot_hold_fall_back_to_tiles_its_build_fits():
    """The two shipped forward tiles whose sm_80 builds need more than an A100's 166,912 bytes a block (found by
    compiling every configuration, 2026-12-07): fa2 at fp32 head_dim 64 and fa1 at bf16 head_dim 256. Compiled
    ahead of time for sm_80 along smaller_tiles' chain: the first does not fit, a later one does, within two
    steps."""
    env = {**os.environ, "FLASH_LIVE_BACKEND": "aot"}
    env.pop("TRITON_INTERPRET", None)  # this process's interpreter: the child compiles for real targets
    done = subprocess.run([sys.executable, "-c", A100_SCRIPT, str(A100_LIMIT)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("fa2 ", "fa1 "))]
    assert len(lines) == 2, done.stdout
    for line in lines:
        sizes = [int(step.split()[-1]) for step in line.split(" -> ")]
        assert sizes[0] > A100_LIMIT and sizes[-1] <= A100_LIMIT and 2 <= len(sizes) <= 3, line
