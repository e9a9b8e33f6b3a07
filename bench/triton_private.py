"""The Triton (and torch) internals the bench leans on, in one place.

The ahead-of-time compile check (bench/compile_check.py):

Triton has no public API to compile a kernel launch for a GPU that is not there, so the check does what
`JITFunction.run` does without launching: it catches the launch (`JITFunction.run`), binds its arguments as a launch
binds them (`triton.runtime.jit.create_function_from_signature`, `JITFunction._pack_args`), and compiles the result
(`triton.compile` on an `ASTSource`, or Gluon's `GluonASTSource`). The phase recordings (bench/phases.py): a GPU
that waits a few microseconds before a timed kernel (`torch.cuda._sleep`), so the events bracket the kernel and not
the host building its launch. Every one of these is private and moves between versions; `check()` names the ones
this Triton and torch lack, and tests/test_private_apis.py fails loudly when an upgrade moves them.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def check() -> list[str]:
    """The private names this Triton lacks (empty: all there)."""
    missing = []
    try:
        from triton.runtime.jit import JITFunction, create_function_from_signature  # noqa: F401
    except ImportError as exc:
        return [f"triton.runtime.jit: {exc}"]
    missing += [f"JITFunction.{name}" for name in ("run", "_pack_args", "is_gluon") if not hasattr(JITFunction, name)]
    try:
        from triton.compiler import ASTSource, make_backend  # noqa: F401
        from triton.backends.compiler import GPUTarget  # noqa: F401
    except ImportError as exc:
        missing.append(f"triton.compiler: {exc}")
    try:
        from triton.experimental.gluon._runtime import GluonASTSource  # noqa: F401
    except ImportError as exc:
        missing.append(f"triton.experimental.gluon._runtime.GluonASTSource: {exc}")
    import torch
    if not callable(getattr(torch.cuda, "_sleep", None)):
        missing.append("torch.cuda._sleep")
    return missing


def gpu_sleep(cycles: int) -> None:
    """Keep the current CUDA stream busy for about `cycles` GPU clock cycles (torch.cuda._sleep)."""
    import torch
    torch.cuda._sleep(cycles)


@contextmanager
def captured_launches() -> Iterator[list[tuple]]:
    """Inside the block, a kernel launch is recorded as (JITFunction, args, kwargs) instead of running."""
    from triton.runtime.jit import JITFunction
    launches: list[tuple] = []
    original = JITFunction.run

    def record(self, *args, grid, warmup, **kwargs):
        launches.append((self, args, kwargs))

    JITFunction.run = record
    try:
        yield launches
    finally:
        JITFunction.run = original


def _binder(fn, capability: int):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature
    backend = make_backend(GPUTarget("cuda", capability, 32))
    return backend, create_function_from_signature(fn.signature, fn.params, backend)


def launch_key(fn, args: tuple, kwargs: dict, capability: int) -> str:
    """What tells two captured launches of one kernel apart: their specialization and launch options."""
    _, binder = _binder(fn, capability)
    _, specialization, options = binder(*args, **kwargs)
    return repr((specialization, sorted(options.items())))


def compile_launch(fn, args: tuple, kwargs: dict, capability: int):
    """Compile one captured launch for cuda:<capability> through the binder and compile a launch uses."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    backend, binder = _binder(fn, capability)
    kwargs = dict(kwargs)  # what JITFunction.run adds before binding
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    bound_args, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
    if fn.is_gluon():
        from triton.experimental.gluon._runtime import GluonASTSource as source_cls
    else:
        source_cls = ASTSource
    return triton.compile(source_cls(fn, signature, constexprs, attrs), target=GPUTarget("cuda", capability, 32),
                          options=options.__dict__)
