"""The path choice: no GPU, or a GPU Triton cannot drive, falls back to the interpreter and says why."""
import types

import pytest
import torch

from kernels import runtime


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("FLASH_LIVE_BACKEND", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return monkeypatch


def fake_gpu(monkeypatch, capability=(9, 0), name="NVIDIA H200"):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: name)


def test_forced_interpreter(clean_env):
    clean_env.setenv("FLASH_LIVE_BACKEND", "interpreter")
    chosen = runtime.choose_backend()
    assert chosen.name == "interpreter" and "FLASH_LIVE_BACKEND" in chosen.reason


def test_no_gpu(clean_env):
    clean_env.setattr(torch.cuda, "is_available", lambda: False)
    chosen = runtime.choose_backend()
    assert chosen.name == "interpreter" and "no CUDA GPU" in chosen.reason


def test_gpu_too_old_for_triton(clean_env):
    fake_gpu(clean_env, capability=(7, 5), name="Tesla T4")
    chosen = runtime.choose_backend()
    assert chosen.name == "interpreter" and "Tesla T4" in chosen.reason and "sm_75" in chosen.reason


def test_gpu_triton_cannot_drive(clean_env):
    fake_gpu(clean_env)
    from triton.runtime import driver as triton_driver

    class Broken:
        def get_current_target(self):
            raise RuntimeError("0 active drivers")
    clean_env.setattr(triton_driver, "_active", Broken())
    chosen = runtime.choose_backend()
    assert chosen.name == "interpreter"
    assert "cannot drive" in chosen.reason and "0 active drivers" in chosen.reason


def test_gpu_triton_can_drive(clean_env):
    fake_gpu(clean_env)
    from triton.runtime import driver as triton_driver
    clean_env.setattr(triton_driver, "_active", types.SimpleNamespace(get_current_target=lambda: "cuda:90"))
    assert runtime.choose_backend().name == "cuda"


@pytest.mark.skipif(runtime.backend() != "interpreter", reason="the CPU path")
def test_device_facts_claim_nothing_without_a_gpu():
    from bench.device import device_facts
    facts = device_facts()
    assert facts["name"] == "CPU (Triton interpreter)"
    assert facts["sm_count"] is None and facts["hbm_bytes"] is None and facts["copy_gbps"] is None
    assert facts["copy_sizes_bytes"] is None and facts["matmul_sizes"] is None
    assert facts["triton"] and facts["torch"]
