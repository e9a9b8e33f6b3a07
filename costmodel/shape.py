"""The attention shape, one frozen value, and the constants every formula of the cost model shares."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

# -- constants --------------------------------------------------------------------------------------

SEQ_LENS = tuple(1 << power for power in range(10, 19))  # 1K … 256K tokens: the slider's stops
DECODE_KV_LENS = tuple(1024 << i for i in range(11))  # the decode scene's cache lengths: 1K … 1M tokens
DECODE_MEMORY_SHARE = 0.35  # bench --decode times no setting whose cache and its copy need more of the GPU's memory
TRACE_SEQ_LENS = (64, 128, 256, 512)  # the animation runs the real kernel (in the CPU interpreter: ~10 ms a tile)
HEAD_DIMS = (16, 32, 64, 128, 256)  # what the teaching kernels accept
TILE_SIZES = (16, 32, 64, 128, 256)  # flash tiles: powers of two, at least MIN_TILE
MIN_TILE = 16  # the smallest tile tl.dot accepts on a GPU
DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}
# FP8 (kernels/fp8.py): e4m3 Q, K, V. Records may carry it (bench --fp8), the page's dtype setting does not: the
# 16-bit kernels' scenes never run it, so it is not in DTYPE_BYTES, which the settings offer
FP8_DTYPE = "float8_e4m3fn"
ELEMENT_BYTES: dict[str, int] = {**DTYPE_BYTES, FP8_DTYPE: 1}
SCORE_BYTES = 4  # the naive kernels keep S in fp32
LSE_BYTES = 4  # flash writes one fp32 log-sum-exp per query row
LN2 = math.log(2.0)  # the flash kernel keeps its running max in log2 units
LOG2_E = 1.0 / LN2
PASSES = ("prefill", "decode", "backward")  # what a measurement of attention computes (a record's "pass")


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name such as "bfloat16" (a "torch." prefix is accepted)."""
    name = str(dtype).removeprefix("torch.")
    if name not in ELEMENT_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(ELEMENT_BYTES)}")
    return ELEMENT_BYTES[name]


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class Shape:
    """One attention problem: what every formula of the cost model, every measurement and every scene takes.

    seq_len: query rows (tokens) per sequence; kv_len: keys per sequence (None: seq_len, as in prefill, where every
    query meets every key; decode has seq_len 1 against a cache of kv_len); heads: query heads; kv_heads: K/V heads
    (None: heads; fewer is grouped-query attention, heads a multiple of them). causal: query i of seq_len sees the
    keys up to kv_len − seq_len + i (aligned bottom-right, as FlashAttention does; the diagonal when the two agree).
    pass_: what is computed ("prefill", "decode", "backward": a record's "pass")."""
    seq_len: int
    batch: int = 1
    heads: int = 1
    head_dim: int = 128
    dtype: str = "bfloat16"
    causal: bool = False
    kv_len: int | None = None
    kv_heads: int | None = None
    pass_: str = "prefill"

    def __post_init__(self):
        for name in ("seq_len", "batch", "heads", "head_dim"):
            _positive_int(name, getattr(self, name))
        dtype_bytes(self.dtype)
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be True or False, got {self.causal!r}")
        if self.kv_len is None:
            object.__setattr__(self, "kv_len", self.seq_len)
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _positive_int("kv_len", self.kv_len)
        _positive_int("kv_heads", self.kv_heads)
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.pass_ not in PASSES:
            raise ValueError(f"pass must be one of {', '.join(PASSES)}, got {self.pass_!r}")

    @property
    def dtype_bytes(self) -> int:
        return dtype_bytes(self.dtype)

    @property
    def group(self) -> int:
        """Query heads per K/V head (1: every query head has its own)."""
        return self.heads // self.kv_heads

    def at(self, **changes) -> Shape:
        """The same shape with some fields changed (a length, one head, one sequence)."""
        return replace(self, **changes)

    def one_head(self) -> Shape:
        """One sequence and one head of this shape: what a kernel trace or a per-head formula covers."""
        return replace(self, batch=1, heads=1, kv_heads=1)

    @classmethod
    def of_record(cls, record: dict) -> Shape:
        """The shape a measurement record (docs/data-contracts.md) was taken at; older records lack kv_len, kv_heads
        and pass, which then default."""
        return cls(record["seq_len"], record["batch"], record["heads"], record["head_dim"], record["dtype"],
                   bool(record["causal"]), record.get("kv_len"), record.get("kv_heads"),
                   record.get("pass") or "prefill")

    def record_fields(self) -> dict:
        """The shape as a record's fields (bench.record.Record)."""
        return {"seq_len": self.seq_len, "batch": self.batch, "heads": self.heads, "head_dim": self.head_dim,
                "dtype": self.dtype, "causal": self.causal, "kv_len": self.kv_len, "kv_heads": self.kv_heads,
                "pass": self.pass_}


def visible_pairs(shape: Shape) -> float:
    """(query, key) pairs one head computes: seq_len · kv_len, or under a causal mask the papers' convention for
    the visible part, seq_len · kv_len − seq_len²/2 (N²/2 when the two agree; ≈ kv_len for one decode row)."""
    pairs = float(shape.seq_len) * shape.kv_len
    return pairs - shape.seq_len * shape.seq_len / 2 if shape.causal else pairs


def attention_flops(shape: Shape) -> float:
    """Matmul FLOPs of the forward pass: QKᵀ and PV, 2·D per (query, key) pair each, per query head; halved under a
    causal mask (the convention of the FlashAttention papers: visible_pairs)."""
    return 4.0 * shape.batch * shape.heads * shape.head_dim * visible_pairs(shape)


BACKWARD_FLOPS_FACTOR = 2.5  # the backward's matmuls per forward's: 5 (S again, dP, dV, dK, dQ) against 2 (S, O)


def pass_flops(shape: Shape) -> float:
    """Matmul FLOPs of what the shape's pass computes: the forward's (attention_flops) for a prefill or decode; for
    a backward, BACKWARD_FLOPS_FACTOR × the forward's (the convention of the FlashAttention papers' backward TFLOPS)."""
    flops = attention_flops(shape)
    return BACKWARD_FLOPS_FACTOR * flops if shape.pass_ == "backward" else flops


def backward_least_bytes(shape: Shape) -> int:
    """HBM bytes any backward must move at least: Q, K, V, O and dO read once, dQ, dK, dV written once, and the
    forward's LSE read (one fp32 per query row)."""
    qo = shape.batch * shape.heads * shape.seq_len * shape.head_dim * shape.dtype_bytes
    kv = shape.batch * shape.kv_heads * shape.kv_len * shape.head_dim * shape.dtype_bytes
    return 4 * qo + 4 * kv + shape.batch * shape.heads * shape.seq_len * LSE_BYTES


# The decode recording's attention (bench --decode, the decode scene): Llama 3 8B's, 32 query heads sharing 8 K/V
# heads, head_dim 128, bf16, one new token (q_len 1) against the cache.
DECODE_HEADS, DECODE_KV_HEADS, DECODE_HEAD_DIM = 32, 8, 128


def decode_shape(batch: int, kv_len: int) -> Shape:
    """One new token of the decode recording's attention for `batch` sequences against kv_len cached tokens each."""
    return Shape(1, batch, DECODE_HEADS, DECODE_HEAD_DIM, "bfloat16", True, kv_len=kv_len, kv_heads=DECODE_KV_HEADS,
                 pass_="decode")
