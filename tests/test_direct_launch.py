"""kernels.runtime.direct_launcher: a compiled kernel launched by calling Triton's C launch function directly must hand
it exactly what Triton's own launcher (CudaLauncher.__call__ and, for host TMA descriptors, wrap_handle_tensordesc's
`inner`) hands it. Here, without a GPU: a CudaLauncher of the installed Triton built around a recording stand-in for
the C function, called both ways; the GPU tests (tests/test_fa3.py) check the launches' outputs."""
from __future__ import annotations

import types

import pytest
import torch

from kernels import runtime

drv = pytest.importorskip("triton.backends.nvidia.driver")
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402


class Recorder:
    """Stands in for the C launch function (no `__code__`, as a C function has none): keeps each call's arguments."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


def flat(call):
    """A recorded call as one list: Triton 3.7 passes the kernel's arguments as one sequence (a list or a tuple: the C
    function takes either), 3.6 spread out."""
    return [*call[:-1], *call[-1]] if runtime.launcher_layout() == "3.7" else list(call)


def fake_compiled(signature: dict, metas):
    """A CompiledKernel stand-in whose `run` is a real CudaLauncher of this Triton (its __init__ skipped: no GPU, no
    compiled launcher), launching into a Recorder."""
    raw = Recorder()
    launcher = drv.CudaLauncher.__new__(drv.CudaLauncher)
    launcher.launch = drv.wrap_handle_tensordesc(raw, signature, metas)
    launcher.num_ctas = 1
    launcher.global_scratch_size = launcher.profile_scratch_size = 0
    launcher.global_scratch_align = launcher.profile_scratch_align = 1
    launcher.launch_cooperative_grid, launcher.launch_pdl = False, True
    launcher.arg_annotations, launcher.kernel_signature = ("annotations",), b"signature"  # (3.7 reads them)
    return types.SimpleNamespace(run=launcher, function=0xF00, packed_metadata=(4, 1, 0)), raw


def descriptor(t, block):
    return TensorDescriptor(base=t, shape=list(t.shape), strides=list(t.stride()), block_shape=block)


@pytest.mark.parametrize("with_descriptors", [True, False])
def test_a_direct_launch_hands_the_c_function_what_tritons_launcher_does(with_descriptors):
    assert runtime.launcher_layout() in ("3.6", "3.7")
    q, o = torch.randn(1, 2, 64, 64), torch.randn(1, 2, 64, 64)
    lse = torch.randn(1, 2, 64)
    if with_descriptors:
        signature = {0: "tensordesc<fp32[1, 1, 64, 64]>", 1: "*fp32", 2: "fp32", 3: "i32",
                     4: "tensordesc<fp32[1, 1, 64, 64]>", 5: "constexpr", 6: "constexpr"}
        args = (descriptor(q, [1, 1, 64, 64]), lse, 0.5, 64, descriptor(o, [1, 1, 64, 64]))
    else:
        signature = {0: "*fp32", 1: "*fp32", 2: "fp32", 3: "i32", 4: "constexpr", 5: "constexpr"}
        args = (q, lse, 0.5, 64)
    tail = (128, True)
    compiled, raw = fake_compiled(signature, None)  # metadata None: descriptors expand without encoding (no GPU)
    compiled.run(3, 2, 1, 77, compiled.function, compiled.packed_metadata, None, None, None, *args, *tail)
    direct = runtime.direct_launcher(compiled, (3, 2, 1), tail)
    assert direct is not None
    direct(77, args)
    assert len(raw.calls) == 2
    theirs, ours = (flat(c) for c in raw.calls)
    assert len(theirs) == len(ours) and all(a is b or a == b for a, b in zip(theirs, ours))
    given = 15 + len(args) + len(tail) if runtime.launcher_layout() == "3.7" else 13 + len(args) + len(tail)
    # each descriptor became (base or encoded map, shape, strides, …): more arguments than were given
    assert (len(ours) > given) if with_descriptors else (len(ours) == given)


def test_a_launcher_that_needs_scratch_memory_is_launched_as_before():
    compiled, _ = fake_compiled({0: "*fp32", 1: "constexpr"}, None)
    compiled.run.global_scratch_size = 256
    assert runtime.direct_launcher(compiled, (1, 1, 1), (4,)) is None


def test_an_unknown_python_launcher_is_launched_as_before():
    compiled, _ = fake_compiled({0: "*fp32", 1: "constexpr"}, None)
    compiled.run.launch = lambda *args: None  # not the C function, not wrap_handle_tensordesc's inner
    assert runtime.direct_launcher(compiled, (1, 1, 1), (4,)) is None


def test_an_unknown_launcher_layout_declines(monkeypatch):
    compiled, _ = fake_compiled({0: "*fp32", 1: "constexpr"}, None)
    monkeypatch.setattr(runtime, "launcher_layout", lambda: None)
    assert runtime.direct_launcher(compiled, (1, 1, 1), (4,)) is None


def test_the_expander_follows_install_encoding_caches_replacement(monkeypatch):
    """make_tensordesc_arg is looked up per call: the encoding cache (or a later patch) is used once installed."""
    seen = []
    expand = runtime.descriptor_expander([1], [None], ("c",))
    monkeypatch.setattr(drv, "make_tensordesc_arg", lambda arg, meta: seen.append(arg) or ["enc", arg])
    assert expand(("a", "desc", "b")) == ["a", "enc", "desc", "b", "c"]
    assert seen == ["desc"]


def test_a_discard_buffer_grows_and_keeps_what_it_outgrew():
    device = torch.device("cpu")
    runtime._DISCARDED.pop(device, None)
    small = runtime.discard_buffer(device, 10)
    assert small.dtype == torch.float32 and small.numel() >= 10
    assert runtime.discard_buffer(device, 10) is small  # shared
    big = runtime.discard_buffer(device, 5000)
    assert big.numel() >= 5000 and big is not small
    assert any(t is small for t in runtime._OUTGROWN)  # never freed: a queued launch may still write it
    runtime._DISCARDED.pop(device, None)
