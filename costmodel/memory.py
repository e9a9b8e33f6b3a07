"""Memory: what each algorithm holds on the device beyond its inputs, where the standard kernels stop fitting, and
what one program keeps on chip."""
from __future__ import annotations

from dataclasses import dataclass

from costmodel.shape import LSE_BYTES, SCORE_BYTES, Shape

SHARED_MEMORY, REGISTERS = "shared memory", "registers"
FA1_STATE_BYTES = 4  # O, m and l travel between FA1 steps in fp32


def scores_bytes(shape: Shape, dtype_bytes: int | None = None) -> int:
    """Bytes of the seq_len × kv_len score matrix for every (batch, query head), in `dtype_bytes` per score (default:
    the shape's dtype)."""
    e = shape.dtype_bytes if dtype_bytes is None else dtype_bytes
    return shape.seq_len * shape.kv_len * e * shape.batch * shape.heads


def output_bytes(shape: Shape) -> int:
    """Bytes of O (like Q) for every (batch, query head)."""
    return shape.batch * shape.heads * shape.seq_len * shape.head_dim * shape.dtype_bytes


def naive_extra_bytes(shape: Shape) -> int:
    """Device memory the standard kernels need beyond Q, K, V: S in fp32, P in dtype, and O (bytes)."""
    return scores_bytes(shape, SCORE_BYTES) + scores_bytes(shape) + output_bytes(shape)


def flash_extra_bytes(shape: Shape) -> int:
    """Device memory the flash kernel needs beyond Q, K, V: O in dtype and the fp32 LSE (bytes)."""
    return output_bytes(shape) + shape.batch * shape.heads * shape.seq_len * LSE_BYTES


def fused_extra_bytes(shape: Shape) -> int:
    """Device memory a fused kernel (SDPA) needs beyond Q, K, V at the least: O."""
    return output_bytes(shape)


PARTIAL_BYTES = 4  # the decode kernel's split partials (O and LSE) are fp32


def decode_partial_bytes(shape: Shape, num_splits: int) -> int:
    """The decode kernel's split partials: per query row and split, O (head_dim) and the LSE in fp32; none with one
    split (the split kernel then writes O and the LSE itself)."""
    if num_splits <= 1:
        return 0
    return shape.batch * shape.heads * shape.seq_len * num_splits * (shape.head_dim + 1) * PARTIAL_BYTES


def decode_extra_bytes(shape: Shape, num_splits: int) -> int:
    """Device memory the decode kernel needs beyond Q and the KV cache: O, the fp32 LSE and the split partials."""
    return flash_extra_bytes(shape) + decode_partial_bytes(shape, num_splits)


def kv_bytes(shape: Shape) -> int:
    """Bytes of K and V together: the cache a decode step streams."""
    return 2 * shape.batch * shape.kv_heads * shape.kv_len * shape.head_dim * shape.dtype_bytes


def inputs_bytes(shape: Shape) -> int:
    """Bytes of the inputs Q, K and V for every (batch, head)."""
    return output_bytes(shape) + kv_bytes(shape)


def standard_device_bytes(shape: Shape) -> int:
    """Device memory our naive kernels hold at once: the inputs Q, K, V and naive_extra_bytes (S in fp32, P, O)."""
    return inputs_bytes(shape) + naive_extra_bytes(shape)


def fa1_state_bytes_per_row(head_dim: int) -> int:
    """Bytes of one row's running state in HBM between FA1 steps: O (head_dim fp32), m and l."""
    return (head_dim + 2) * FA1_STATE_BYTES


def fa1_extra_bytes(shape: Shape) -> int:
    """Device memory the FA1-order kernel needs beyond Q, K, V: O, the LSE and the fp32 O, m, l it keeps in HBM
    between steps (bytes)."""
    return flash_extra_bytes(shape) + shape.batch * shape.heads * shape.seq_len * fa1_state_bytes_per_row(
        shape.head_dim)


@dataclass(frozen=True)
class MemoryWall:
    """Where the standard kernels stop fitting a device: the longest N whose memory fits, and the first power
    of two past it (a slider stop), with what it needs there."""
    hbm_bytes: int
    fits_up_to: int  # the longest N (tokens) whose standard_device_bytes fit in hbm_bytes (0: none)
    seq_len: int     # the first power-of-two N that does not fit
    need_bytes: int  # standard_device_bytes at seq_len


MAX_WALL_SEQ_LEN = 1 << 30  # the search's upper end: no device holds one head's N×N scores past this


def standard_memory_wall(hbm_bytes: int, shape: Shape) -> MemoryWall:
    """The memory wall of the standard kernels at this shape (its N aside: every query against every key) on a
    device of hbm_bytes: the one formula the problem scene draws and the recorded out-of-memory records meet (at
    batch 2 × 16 heads, head_dim 128, bf16 on the H200's 139.8 GiB: fits up to N ≈ 27.2K, out of memory from the
    32K stop)."""
    return memory_wall(hbm_bytes, lambda n: standard_device_bytes(shape.at(seq_len=n, kv_len=n)))


def memory_wall(hbm_bytes: int, need) -> MemoryWall:
    """Where need(N) (bytes, growing with N) first outgrows a device of hbm_bytes: the longest N that fits and the
    first power of two past it."""
    lo, hi = 0, MAX_WALL_SEQ_LEN  # need(lo) fits (0 tokens need nothing); need(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= hbm_bytes else (lo, mid)
    first = 1 << lo.bit_length()  # the first power of two above lo
    return MemoryWall(int(hbm_bytes), lo, first, need(first))


def gradients_bytes(shape: Shape) -> int:
    """Bytes of dQ, dK and dV, each like its input."""
    return inputs_bytes(shape)


def standard_training_bytes(shape: Shape) -> int:
    """What a training step of standard attention (PyTorch eager autograd, kernels/peers.py's torch_naive) holds
    beyond Q, K, V and dO at the least: what autograd saves for the backward (softmax's fp32 output and P in dtype,
    N × N each per (batch, head; one tensor in fp32, where the cast to dtype is none), and O) and the gradients. The
    backward's own dP and dS come on top of it."""
    p_bytes = scores_bytes(shape) if shape.dtype_bytes != SCORE_BYTES else 0
    return scores_bytes(shape, SCORE_BYTES) + p_bytes + output_bytes(shape) + gradients_bytes(shape)


def flash_training_bytes(shape: Shape) -> int:
    """What a training step of flash attention (kernels/fa2.py, kernels/fa2_bwd.py) holds beyond Q, K, V and dO:
    the forward saves O and the fp32 LSE, the backward adds Δ (one fp32 per row) and the gradients."""
    return flash_extra_bytes(shape) + shape.batch * shape.heads * shape.seq_len * LSE_BYTES + gradients_bytes(shape)


def standard_training_wall(hbm_bytes: int, shape: Shape) -> MemoryWall:
    """Where a standard training step (Q, K, V, dO and standard_training_bytes) first outgrows hbm_bytes (its
    `need_bytes` counts the inputs too)."""
    return memory_wall(hbm_bytes, lambda n: (standard_training_bytes(shape.at(seq_len=n, kv_len=n))
                                             + inputs_bytes(shape.at(seq_len=n, kv_len=n)) + output_bytes(
                                                 shape.at(seq_len=n, kv_len=n))))


def smem_bytes(block_m: int, block_n: int, head_dim: int, dtype_bytes: int, num_stages: int = 2) -> int:
    """Shared memory a flash tile shape needs, roughly: the Q block plus `num_stages` buffered K and V tiles."""
    return block_m * head_dim * dtype_bytes + num_stages * 2 * block_n * head_dim * dtype_bytes


def on_chip_buffers(block_m: int, block_n: int, head_dim: int, dtype_bytes: int) -> dict[str, dict[str, int]]:
    """What one program of either order holds on chip at a step (bytes), by where it lives:
    - shared memory (SRAM): the Q block and the K and V tiles, in the input dtype (tl.load / TMA fill them;
      the kernel double-buffers K and V: smem_bytes);
    - registers: the S tile, m, l and the O accumulator, in fp32 (tl.dot's results stay in the warps'
      registers; kernels/fa2.py keeps them for a whole Q block, kernels/fa1.py reloads m, l and O
      from HBM every step)."""
    e, f = dtype_bytes, FA1_STATE_BYTES
    return {
        SHARED_MEMORY: {"Q block": block_m * head_dim * e, "K tile": block_n * head_dim * e,
                        "V tile": block_n * head_dim * e},
        REGISTERS: {"S tile": block_m * block_n * f, "m": block_m * f, "l": block_m * f,
                    "O acc": block_m * head_dim * f},
    }


def sram_buffers(block_m: int, block_n: int, head_dim: int, dtype_bytes: int) -> dict[str, int]:
    """Every buffer of on_chip_buffers in one dict, shared memory's first (bytes)."""
    return {name: size for place in on_chip_buffers(block_m, block_n, head_dim, dtype_bytes).values()
            for name, size in place.items()}
