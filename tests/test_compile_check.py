"""CI compiles every shipped configuration of every kernel for real GPU targets (no GPU needed): sm_90 and sm_80 for
the `tl` kernels, sm_90 for the Gluon FA-3 kernel, under the pinned Triton. Slow-ish (a few minutes on two cores:
each configuration is a real Triton + ptxas compile), never skipped: it is the only test of what a GPU user's first
launch compiles. The backward is compiled in a representative subset (kernels/fa2_bwd.py REPRESENTATIVE: every
backward kernel, bf16 at head_dim 64 and 128 causal and not, one fp32 build; and the TMA tiles, sm_90), and the
`tl` kernels' sm_80 builds at the head_dims the bench measures (64 and 128; sm_90 builds every head_dim), and float32
builds at head_dim 64 only (on both targets; they are the slowest), to keep CI's time; `python -m bench.compile_check`
compiles all of it."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    out = tmp_path_factory.mktemp("compile-check") / "results.json"
    env = {**os.environ, "FLASH_LIVE_BACKEND": "aot"}
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-m", "bench.compile_check", "--backward", "representative", "--sm80",
                          "representative", "--fp32", "representative", "--json", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1500)
    return run, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.timeout(1600)
def test_every_configuration_compiles(check):
    run, data = check
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert data is not None and data["results"]
    failed = [r for r in data["results"] if not r["ok"]]
    assert not failed, failed
    assert "configurations compiled" in run.stdout.splitlines()[-1]


@pytest.mark.timeout(1600)
def test_every_kernel_and_target_is_covered(check):
    _, data = check
    assert data is not None
    from kernels import fa2 as flash, fa3 as flash_v3
    seen = {(r["kernel"].split(":")[-1], r["target"]) for r in data["results"]}
    for kernel in ("_attn_fwd", "_attn_fwd_fa1", "_scores_kernel", "_softmax_kernel", "_pv_kernel",
                   "_read_repeatedly"):
        assert {(kernel, "sm_90"), (kernel, "sm_80")} <= seen, kernel
    assert ("_fa3_fwd", "sm_90") in seen and ("_fa3_fwd", "sm_80") not in seen
    from kernels import fa2_bwd
    for kernel in ("_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"):  # the backward's kernels, on both targets
        assert {(kernel, "sm_90"), (kernel, "sm_80")} <= seen, kernel
    bwd_labels = {r["label"] for r in data["results"] if r["kernel"].endswith(":_bwd_dkdv")}
    assert len(bwd_labels) == len(fa2_bwd.REPRESENTATIVE) + len(fa2_bwd.TMA_CONFIGS), bwd_labels
    tma_targets = {r["target"] for r in data["results"] if r["label"].startswith("backward tma ")}
    assert tma_targets == {"sm_90"}  # TMA copies: Hopper only
    assert any(" float32 " in label for label in bwd_labels) and not any("candidate" in label for label in bwd_labels)
    flash_rows = [r for r in data["results"] if r["kernel"].endswith(":_attn_fwd")]
    # (the subset as the run's JSON reports it: what was compiled, from the run that compiled it)
    sm80_head_dims = data["sm80_head_dims"]
    assert data["sm80"] == "representative" and sm80_head_dims == [64, 128]
    assert data["fp32"] == "representative" and data["fp32_head_dims"] == [64]
    for head_dim, dtype_bytes, causal in flash.TUNED_CONFIGS:  # every tuned class; sm_80 at the bench's head_dims
        tag = f"D={head_dim} {'bfloat16' if dtype_bytes == 2 else 'float32'} {'causal' if causal else 'full'} "
        targets = {"sm_90", "sm_80"} if head_dim in sm80_head_dims else {"sm_90"}
        if dtype_bytes == 4 and head_dim not in data["fp32_head_dims"]:
            targets = set()
        assert {r["target"] for r in flash_rows if r["label"].startswith(tag)} == targets, tag
    fp32_dims = {int(m[1]) for r in data["results"] if " float32 " in r["label"]
                 for m in [re.search(r"\bD=(\d+) ", r["label"])] if m}
    assert fp32_dims == {64}, fp32_dims  # every kernel's float32 builds at head_dim 64, none elsewhere
    fp32_kernels = {r["kernel"].split(":")[-1] for r in data["results"] if " float32 " in r["label"]}
    assert {"_attn_fwd", "_attn_fwd_fa1", "_decode_split", "_bwd_dkdv", "_scores_kernel"} <= fp32_kernels
    sm80_dims = {int(m[1]) for r in data["results"] if r["target"] == "sm_80"
                 for m in [re.search(r"\bD=(\d+) ", r["label"])] if m}
    assert sm80_dims == set(sm80_head_dims), sm80_dims  # the forwards', the backward's and decode's builds alike
    fa3_rows = [r for r in data["results"] if r["kernel"].endswith(":_fa3_fwd")]
    ladder_only = [c for c in flash_v3.LADDER.values() if c not in flash_v3.SHIPPED.values()]
    # fp16 and bf16, shipped, short sequences' and the ladder; and e4m3 per shipped (head_dim, causal) and per speed
    # candidate, and per precise_pv=True configuration that is not the shipped one
    from kernels.fp8 import PV_PROMOTE_FITS, PV_PROMOTED, config_for_fp8, fp8_candidates
    precise = len(set(PV_PROMOTE_FITS) - PV_PROMOTED)
    tail8 = sum(config_for_fp8(d, c).tail_split for d, c in flash_v3.SHIPPED)  # e4m3 also built without it
    e4m3 = len(flash_v3.SHIPPED) + tail8 + len(fp8_candidates()) + precise
    tail = sum(c.tail_split for c in flash_v3.SHIPPED.values())  # also built without it: where nothing is split
    assert len(fa3_rows) == 2 * (len(flash_v3.SHIPPED) + tail + len(flash_v3.SHORT) + len(ladder_only)) + e4m3
    assert sum("where nothing is split: " in r["label"] for r in fa3_rows) == 2 * tail + tail8
    assert tail8 and sum("fp8 where nothing is split: " in r["label"] for r in fa3_rows) == tail8
    assert sum("short sequences: " in r["label"] for r in fa3_rows) == 2 * len(flash_v3.SHORT)
    assert sum("float8_e4m3fn" in r["label"] for r in fa3_rows) == e4m3
    assert sum("fp8 candidate: " in r["label"] for r in fa3_rows) == len(fp8_candidates())
    assert sum("fp8 precise_pv: " in r["label"] and "pv-promote" in r["label"] for r in fa3_rows) == precise
    for r in fa3_rows:  # the point of the Gluon kernel: wgmma (8-bit: QGMMA) in the SASS, and no spills
        assert r["hgmma"] and r["hgmma"] > 0 and r["stack"] == 0 and r["local"] == 0, r
    # the FA-3 style backward: every shipped config, fp16 and bf16, causal and not, sm_90 only; Pᵀ and dSᵀ go to the
    # tensor cores from registers (dV, dK); head_dim 128 keeps a word or two on the stack (set up once, reloaded once
    # a query block), no more
    from kernels import fa3_bwd
    bwd3 = [r for r in data["results"] if r["kernel"].endswith(":_fa3_bwd")]
    assert {r["target"] for r in bwd3} == {"sm_90"} and len(bwd3) == 2 * 2 * len(fa3_bwd.SHIPPED), bwd3
    for r in bwd3:
        assert r["hgmma"] > 0 and r["hgmma_reg_a"] > 0 and r["local"] == 0 and r["stack"] <= 16, r


def _shipped_builds(flash_v3):
    """((head_dim, causal), config, the dtypes built with it): fp16 and bf16 with the shipped config, e4m3 with
    kernels.fp8's."""
    from kernels.fp8 import config_for_fp8
    for key, config in flash_v3.SHIPPED.items():
        yield key, config, ("float16", "bfloat16")
        yield key, config_for_fp8(*key), ("float8_e4m3fn",)


@pytest.mark.timeout(1600)
def test_fa3_operands_come_from_where_the_configs_say(check):
    """P·V reads P from registers, or with p_smem (e4m3's 256-key tiles) from shared memory; with q_in_regs QKᵀ reads
    Q from registers too, so every wgmma's A operand is a register unless P goes through shared memory; without it
    the QKᵀ wgmmas read Q from shared memory."""
    _, data = check
    assert data is not None
    from kernels import fa3 as flash_v3
    rows = [r for r in data["results"] if r["kernel"].endswith(":_fa3_fwd")]
    for (head_dim, causal), config, dtypes in _shipped_builds(flash_v3):
        tag = f"D={head_dim} "
        mine = [r for r in rows if r["label"].startswith(tag) and ("causal" in r["label"]) == causal
                and any(f" {d} " in r["label"] for d in dtypes)]
        assert len(mine) == len(dtypes), (head_dim, causal, dtypes)
        for r in mine:
            assert ("q-regs" in r["label"]) == config.q_in_regs, r["label"]
            if config.p_smem and " float8_e4m3fn " in r["label"]:  # only QKᵀ's A can be in registers
                assert (r["hgmma_reg_a"] > 0) == config.q_in_regs and r["hgmma_reg_a"] < r["hgmma"], r
                continue
            assert 0 < r["hgmma_reg_a"] <= r["hgmma"], r
            if config.q_in_regs:
                assert r["hgmma_reg_a"] == r["hgmma"], r
            else:
                assert r["hgmma_reg_a"] < r["hgmma"], r
    assert flash_v3.SHIPPED[(128, False)].q_in_regs and flash_v3.SHIPPED[(128, True)].q_in_regs
    assert not flash_v3.SHIPPED[(256, False)].q_in_regs  # at 256, O takes 128 registers: Q stays in shared memory


@pytest.mark.timeout(1600)
def test_fa3_handoff_and_rescale_are_built_as_the_configs_say(check):
    """named_turns: the ping-pong hand-off arrives on hardware named barriers (ids 8 and up, 256 threads: this
    warpgroup and the next), no mbarrier; lazy_rescale: a warp vote decides whether O's multiplies run. The SASS of
    each shipped build has them exactly when its config asks."""
    _, data = check
    assert data is not None
    from kernels import fa3 as flash_v3
    rows = [r for r in data["results"] if r["kernel"].endswith(":_fa3_fwd")]
    for (head_dim, causal), config, dtypes in _shipped_builds(flash_v3):
        mine = [r for r in rows if r["label"].startswith(f"D={head_dim} ") and ("causal" in r["label"]) == causal
                and any(f" {d} " in r["label"] for d in dtypes)]
        assert len(mine) == len(dtypes), (head_dim, causal, dtypes)
        for r in mine:
            assert (r["named_arrives"] > 0) == config.named_turns, r
            assert (r["votes"] > 0) == config.lazy_rescale, r
            assert (" named" in r["label"]) == config.named_turns and (" lazy" in r["label"]) == config.lazy_rescale
    assert flash_v3.SHIPPED[(128, False)].named_turns and flash_v3.SHIPPED[(128, True)].lazy_rescale



def test_backward_subsets_list_what_they_say():
    """No compile: the backward's launches per subset, and a clear refusal of an unknown one."""
    from kernels import fa2_bwd
    import costmodel
    every = fa2_bwd.shipped_launches()
    tma = len(fa2_bwd.TMA_CONFIGS)  # and the TMA tiles, sm_90 only
    assert len(every) == len(costmodel.HEAD_DIMS) * 2 * 2 + tma  # head_dims × (bf16, fp32) × causal both
    assert [targets for label, targets, _ in every if " tma " in label] == [("sm_90",)] * tma
    few = fa2_bwd.shipped_launches("representative")
    assert len(few) == len(fa2_bwd.REPRESENTATIVE) + tma
    assert {label for label, _, _ in few} <= {label for label, _, _ in every}
    candidates = fa2_bwd.shipped_launches("candidates")
    assert len(candidates) == sum(1 + len(c) for c in fa2_bwd.CANDIDATES.values())  # with the shipped ones
    assert all(targets == ("sm_90",) and label.startswith("candidate") for label, targets, _ in candidates)
    with pytest.raises(ValueError, match="subset must be"):
        fa2_bwd.shipped_launches("some")
    from kernels import fa3_bwd  # the Gluon backward: its 8 shipped builds in every subset, its candidates apart
    assert [label for label, _, _ in fa3_bwd.shipped_launches("representative")] == \
        [label for label, _, _ in fa3_bwd.shipped_launches()]
    assert len(fa3_bwd.shipped_launches()) == 2 * 2 * len(fa3_bwd.SHIPPED)
    assert len(fa3_bwd.shipped_launches("candidates")) == 2 * sum(len(c) for c in fa3_bwd.CANDIDATES.values())
    with pytest.raises(ValueError, match="subset must be"):
        fa3_bwd.shipped_launches("some")


@pytest.mark.timeout(1600)
def test_backward_wgmmas_are_issued_in_groups(check):
    """The teaching backward's sm_90 builds under the pinned Triton issue their wgmmas in groups and wait a few
    times a step, not once per wgmma: ptxas serializes them (C7515) when the kernel's PTX writes an accumulator
    between a wgmma's issue and its wait, as triton 3.6's PTX of the not-causal dK/dV kernel does (the GPU machine's
    Triton: BENCHMARKS §1d)."""
    _, data = check
    assert data is not None
    rows = [r for r in data["results"] if r["target"] == "sm_90"
            and r["kernel"].endswith((":_bwd_dkdv", ":_bwd_dq"))]
    tma = [r for r in rows if r["label"].startswith("backward tma ") and r["kernel"].endswith(":_bwd_dkdv")]
    assert len(tma) >= 4 and {("causal" in r["label"]) for r in tma} == {True, False}, tma
    for r in rows:
        assert r["wgmma_waits"] is not None, r
        if " float32 " in r["label"] and not r["hgmma"]:
            continue  # float32's exact dots are not wgmmas
        assert r["hgmma"] > 0 and 0 < r["wgmma_waits"] < r["hgmma"] / 2, r
