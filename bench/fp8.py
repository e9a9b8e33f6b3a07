"""FA-3's third idea as records: our FA-3 kernel with e4m3 Q, K, V (kernels/fp8.py) timed beside the same kernel in
bf16, in one interleaved run, with the error each costs against float64.

`python -m bench --fp8 --out FILE [--merge-into]` writes them; the FP8 view of the ablation scene reads them (or runs
`time_fp8` live on a Hopper GPU).

Per shape (B2 H16, 8K and 16K, head_dim 128 and 64, not causal) one record per FP8 variant: scaling per tensor or per
head, with and without the Hadamard rotation of Q and K (both done before the timed call, as FA-3 assumes them fused
into the operation before; the call transposes V, kernels/fa3.py says why). Each record carries:
- its time (dtype float8_e4m3fn) and the bf16 kernel's time at the same shape from the same rounds (bf16_time_ms);
- its error against float64 attention on the unquantized inputs, on random inputs (err_*), on the FA-3 paper's
  outliers (paper_outlier_err_*: N(0, 10²) added to 0.1 % of entries, its Table 3) and on harsher planted ones
  (outlier_err_*: 0.1 % of entries ×10–100), measured at batch 1 with 2 heads of the record's seq_len and head_dim
  (ERROR_BATCH, ERROR_HEADS: a float64 reference of all 32 heads at 16K would not fit);
- the bf16 kernel's relative RMS error on the same inputs.
No bf16 record is written: the bf16 time sits in the FP8 record, so the file's own bf16 fa3 records stay those of
the main sweep.
"""
from __future__ import annotations

import dataclasses
import statistics

import torch

from bench.measure import GPU_LOCK, GPU_LOCK_TIMEOUT_S, Setting, make_record, time_interleaved
from costmodel import FP8_DTYPE, Shape

SHAPES = tuple(Shape(n, 2, 16, d, FP8_DTYPE, False) for d in (128, 64) for n in (8192, 16384))
VARIANTS = (("tensor", False), ("tensor", True), ("head", False), ("head", True))  # (scaling, rotation)
ERROR_BATCH, ERROR_HEADS = 1, 2
ROUNDS = 3
BF16 = "bf16 fa3"


def variant_name(scaling: str, rotation: bool) -> str:
    return f"fp8 per-{scaling}{' + rotation' if rotation else ''}"


def _quantized(x: tuple, scaling: str, rotation: bool, seed: int = 0) -> tuple:
    """(q8, k8, v8, dq, dk, dv): x's Q and K rotated if asked, then all three quantized with `scaling`."""
    from kernels.fp8 import hadamard_rotate, quantize_fp8
    q, k, v = x
    if rotation:
        q, k = hadamard_rotate(q, k, seed)
    (q8, dq), (k8, dk), (v8, dv) = (quantize_fp8(t, scaling) for t in (q, k, v))
    return q8, k8, v8, dq, dk, dv


def _fp8_call(quantized: tuple, causal: bool):
    from kernels.fp8 import fp8_attention
    q8, k8, v8, dq, dk, dv = quantized
    return lambda: fp8_attention(q8, k8, v8, causal, descale_q=dq, descale_k=dk, descale_v=dv)


def _random(shape: Shape, seed: int, batch: int | None = None, heads: int | None = None) -> tuple:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    size = (batch or shape.batch, heads or shape.heads, shape.seq_len, shape.head_dim)
    return tuple(torch.randn(size, generator=gen, device="cuda") for _ in range(3))


ERROR_PREFIXES = ("err_", "outlier_err_", "paper_outlier_err_")  # the records' error fields: random inputs, the
# harsher planted outliers, the FA-3 paper's (error_kinds)


def error_kinds() -> dict:
    """Each error prefix → its inputs' outliers (kernels.fp8.with_outliers's spec)."""
    from kernels.fp8 import PAPER_OUTLIERS, PLANTED_OUTLIERS
    return dict(zip(ERROR_PREFIXES, (None, PLANTED_OUTLIERS, PAPER_OUTLIERS)))


def measure_errors(shape: Shape, seed: int = 0, batch: int = ERROR_BATCH, heads: int = ERROR_HEADS,
                   kinds: dict | None = None) -> dict:
    """name (variant_name or BF16) → {prefix + "max", … "rms", … "rel_rms"} for each prefix of `kinds` (prefix →
    outlier spec; default error_kinds()): O against float64 attention on the unquantized inputs with that prefix's
    outliers, at batch × heads of the shape."""
    from kernels.fa3 import flash_attention_v3
    from kernels.fp8 import attention_error, with_outliers
    from kernels.reference import reference_attention
    errors: dict[str, dict] = {}
    for prefix, spec in (kinds or error_kinds()).items():
        x = with_outliers(_random(shape, seed + 1, batch, heads), spec, seed)
        ref = reference_attention(*x, shape.causal)[0]
        outs = {BF16: flash_attention_v3(*(t.bfloat16() for t in x), causal=shape.causal)}
        for scaling, rotation in VARIANTS:
            outs[variant_name(scaling, rotation)] = _fp8_call(_quantized(x, scaling, rotation, seed), shape.causal)()
        for name, out in outs.items():
            err = attention_error(out, ref)
            errors.setdefault(name, {}).update({prefix + key: value for key, value in err.items()})
        del ref, outs
        torch.cuda.empty_cache()
    return errors


def fp8_records(shape: Shape, times_ms: dict[str, list[float]], errors: dict[str, dict], device: str,
                failures: dict[str, str] | None = None) -> list[dict]:
    """One record per variant (an "error" record, without a time, where it failed), with the bf16 kernel's median
    time and errors beside it, and the tiles the e4m3 kernel ran."""
    from kernels.fp8 import config_for_fp8
    config = config_for_fp8(shape.head_dim, shape.causal)  # its tiles: the tail split (shape and SMs) keeps them
    bf16 = times_ms.get(BF16) or []
    bf16_err = errors.get(BF16, {})
    records = []
    for scaling, rotation in VARIANTS:
        name = variant_name(scaling, rotation)
        why = (failures or {}).get(name)
        setting = Setting("fa3", shape)
        if why is not None or not times_ms.get(name):
            record = make_record(setting, "error", device, "cuda", message=why or "not timed")
        else:
            record = make_record(setting, "ok", device, "cuda", times_ms[name])
        err = {prefix + key: errors.get(name, {}).get(prefix + key)
               for prefix in ERROR_PREFIXES for key in ("max", "rms", "rel_rms")}
        record = dataclasses.replace(
            record, block_m=config.tile_m, block_n=config.block_n, scaling=scaling, rotation=rotation,
            bf16_time_ms=statistics.median(bf16) if bf16 else None, bf16_err_rel_rms=bf16_err.get("err_rel_rms"),
            bf16_outlier_err_rel_rms=bf16_err.get("outlier_err_rel_rms"),
            bf16_paper_outlier_err_rel_rms=bf16_err.get("paper_outlier_err_rel_rms"), **err)
        records.append(record.to_dict())
    return records


def time_fp8(shapes=SHAPES, rounds: int = ROUNDS, rep_ms: float = 100.0, seed: int = 0,
             say=lambda line: None) -> list[dict]:
    """Every variant and bf16 per shape in `rounds` interleaved rounds (order rotated per round, L2 flushed before
    each call), then their errors: the records of fp8_records. Raises RuntimeError where the e4m3 kernel cannot run
    (no Hopper GPU), TimeoutError when other sessions hold the GPU."""
    from kernels.fa3 import flash_attention_v3
    from kernels.fp8 import fp8_unavailable_reason
    why = fp8_unavailable_reason()
    if why:
        raise RuntimeError(why)
    if not GPU_LOCK.acquire(timeout=GPU_LOCK_TIMEOUT_S):
        raise TimeoutError(f"the GPU stayed busy for {GPU_LOCK_TIMEOUT_S:.0f} s (other sessions are measuring)")
    try:
        device = torch.cuda.get_device_name(0)
        records = []
        for shape in shapes:
            x = _random(shape, seed)
            calls = {BF16: lambda bf=tuple(t.bfloat16() for t in x), c=shape.causal: flash_attention_v3(*bf, causal=c)}
            for scaling, rotation in VARIANTS:
                calls[variant_name(scaling, rotation)] = _fp8_call(_quantized(x, scaling, rotation, seed),
                                                                   shape.causal)
            del x
            times, failures = time_interleaved(calls, rounds, rep_ms)
            del calls
            torch.cuda.empty_cache()
            errors = measure_errors(shape, seed)
            records += fp8_records(shape, times, errors, device, failures)
            say(f"fp8 N={shape.seq_len} D={shape.head_dim}: timed and checked")
        return records
    finally:
        GPU_LOCK.release()
        torch.cuda.empty_cache()


def print_fp8(records: list[dict], say=print) -> None:
    """Per record: TFLOPS, fp8 ÷ bf16 from the same rounds, and the relative RMS errors (random, the paper's outliers,
    the ×10–100 ones; bf16's beside)."""
    say(f"{'shape':16s} {'variant':26s} {'TFLOPS':>7s} {'÷ bf16':>7s} {'rel RMS':>8s} {'paper':>7s} {'×10-100':>8s} "
        f"{'bf16 (rand/paper/×)':>22s}")
    for r in records:
        shape = f"N{r['seq_len'] // 1024}K D{r['head_dim']}{' causal' if r['causal'] else ''}"
        name = variant_name(r["scaling"], r["rotation"])
        ratio = r["bf16_time_ms"] / r["time_ms"] if r["time_ms"] and r["bf16_time_ms"] else float("nan")
        nan = float("nan")
        say(f"{shape:16s} {name:26s} {r['tflops'] or nan:7.1f} {ratio:7.3f} {r['err_rel_rms'] or nan:8.4f} "
            f"{r['paper_outlier_err_rel_rms'] or nan:7.4f} {r['outlier_err_rel_rms'] or nan:8.4f} "
            f"{r['bf16_err_rel_rms'] or nan:8.4f}/{r['bf16_paper_outlier_err_rel_rms'] or nan:.4f}/"
            f"{r['bf16_outlier_err_rel_rms'] or nan:.4f}"
            + ("" if r["status"] == "ok" else f"  {r['status']}: {r['message'][:80]}"))
