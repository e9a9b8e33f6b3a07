"""The FlashAttention-1-order kernel (kernels/fa1.py) against float64, and its trace: the loop order
it ran, its online-softmax state replayed in NumPy, and what each step moved checked against the cost model."""
import math

import numpy as np
import pytest
import torch

import costmodel
from kernels.fa2 import FlashConfig
from kernels.fa1 import flash_attention_v1
from costmodel import IO_TENSORS
from kernels.trace import late_max_inputs, step_io, trace_flash
from tests.support_kernels import TOLERANCE, random_qkv, reference, rel_error

# (batch, heads, seq_len, head_dim) and tiles: ragged N, every head dim, tiles of both shapes
CASES = [((2, 2, 1, 16), (16, 16)), ((1, 3, 17, 32), (16, 32)), ((2, 1, 100, 64), (32, 16)),
         ((1, 2, 257, 128), (64, 64)), ((1, 1, 70, 256), (32, 32))]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + f"-{c[1][0]}x{c[1][1]}")
def test_fa1_matches_float64_reference(case, dtype, causal, poisoned_allocations):
    shape, (block_m, block_n) = case
    q, k, v = random_qkv(shape, dtype, seed=hash((shape, causal, "fa1")) % 2**31)
    out, lse = flash_attention_v1(q, k, v, causal=causal, return_lse=True,
                                  config=FlashConfig(block_m, block_n, 4, 1))
    ref, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(shape[-1]))
    assert out.shape == q.shape and out.dtype == dtype
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite output elements"
    assert rel_error(out, ref) < TOLERANCE[dtype]
    assert torch.allclose(lse.cpu().double(), ref_lse, rtol=1e-4, atol=1e-4)


def test_fa1_default_config_and_custom_scale():
    q, k, v = random_qkv((1, 2, 45, 32), torch.float32, seed=3)
    out = flash_attention_v1(q, k, v, causal=True, sm_scale=0.3)
    assert rel_error(out, reference(q, k, v, True, 0.3)[0]) < 1e-5


@pytest.mark.parametrize("tiles", [(24, 32), (16, 8), ("64", 64)])
def test_fa1_bad_tiles_get_a_clear_error(tiles):
    q, k, v = random_qkv((1, 1, 8, 16), torch.float32, seed=2)
    with pytest.raises(ValueError, match="power of two"):
        flash_attention_v1(q, k, v, config=FlashConfig(*tiles, 4, 1))


def test_fa1_bad_inputs_get_a_clear_error():
    q, k, v = random_qkv((1, 1, 8, 16), torch.float32, seed=2)
    with pytest.raises(ValueError, match="same shape"):
        flash_attention_v1(q, k[:, :, :4], v)
    with pytest.raises(TypeError, match="causal"):
        flash_attention_v1(q, k, v, causal="yes")


def replay_fa1(q, k, v, block_m, block_n, causal, sm_scale):
    """FlashAttention-1's Algorithm 1 in float64: K/V tile outer, Q block inner, O kept normalized."""
    n, d = q.shape
    n_q, n_k = math.ceil(n / block_m), math.ceil(n / block_n)
    m = np.full(n_q * block_m, -np.inf)
    l = np.zeros(n_q * block_m)
    o = np.zeros((n_q * block_m, d))
    steps, row_max, row_sum, alpha, out = [], [], [], [], []
    for kb in range(n_k):
        keys = np.arange(kb * block_n, (kb + 1) * block_n)
        for qb in range(n_q):
            rows = np.arange(qb * block_m, (qb + 1) * block_m)
            if causal and keys[0] > min(rows[-1], n - 1):
                continue
            valid = (keys[None, :] < n) & (~causal | (keys[None, :] <= rows[:, None]))
            s = np.where(valid, q[np.minimum(rows, n - 1)] @ k[np.minimum(keys, n - 1)].T * sm_scale, -np.inf)
            m_new = np.maximum(m[rows], s.max(1))
            a = np.exp(m[rows] - m_new)
            p = np.exp(s - m_new[:, None])
            l_new = l[rows] * a + p.sum(1)
            pv = p @ np.where(keys[:, None] < n, v[np.minimum(keys, n - 1)], 0)
            o[rows] = ((l[rows] * a)[:, None] * o[rows] + pv) / l_new[:, None]
            m[rows], l[rows] = m_new, l_new
            keep = rows < n
            steps.append((qb, kb))
            row_max.append(np.where(keep, m_new, np.nan))
            row_sum.append(np.where(keep, l_new, np.nan))
            alpha.append(np.where(keep, a, np.nan))
            out.append(np.where(keep[:, None], o[rows], np.nan))
    return np.array(steps), np.array(row_max), np.array(row_sum), np.array(alpha), np.array(out)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len,block_m,block_n", [(100, 32, 16), (64, 16, 32), (50, 16, 16)])
def test_fa1_trace_matches_numpy_replay(seq_len, block_m, block_n, causal):
    trace = trace_flash(seq_len, 16, block_m, block_n, causal=causal, dtype="float32", seed=4, order="fa1")
    inputs = late_max_inputs(seq_len, 16, block_m, causal, torch.float32, 4)
    q, k, v = (t[0, 0].cpu().double().numpy() for t in inputs)
    steps, m, l, a, out = replay_fa1(q, k, v, block_m, block_n, causal, trace.sm_scale)
    assert trace.order == "fa1"
    assert trace.steps.tolist() == steps.tolist()
    schedule = costmodel.fa1_schedule(seq_len, block_m, block_n, causal)
    assert trace.steps.tolist() == [[s.q_block, s.k_block] for s in schedule]
    np.testing.assert_allclose(trace.row_max, m, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trace.row_sum, l, rtol=1e-4)
    np.testing.assert_allclose(trace.alpha, a, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(trace.out_rows, out, rtol=1e-4, atol=1e-5)
    assert trace.max_abs_err < 1e-5


def io_bytes(ranges: np.ndarray, head_dim: int, dtype_bytes: int) -> np.ndarray:
    """Bytes of each step's row ranges: Q, K, V, O rows of head_dim elements, LSE one fp32, the FA1 state
    (fp32 O, m, l) per row."""
    per_row = {"Q": head_dim * dtype_bytes, "K": head_dim * dtype_bytes, "V": head_dim * dtype_bytes,
               "O": head_dim * dtype_bytes, "LSE": 4, "state": (head_dim + 2) * 4}
    widths = np.array([per_row[name] for name in IO_TENSORS])
    return ((ranges[..., 1] - ranges[..., 0]) * widths).sum(axis=1)


@pytest.mark.parametrize("order", ["fa2", "fa1"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len,block_m,block_n,dtype_bytes", [(20, 16, 16, 2), (100, 32, 16, 4), (257, 16, 64, 2)])
def test_step_io_moves_what_the_cost_model_counts(order, causal, seq_len, block_m, block_n, dtype_bytes):
    shape = costmodel.Shape(seq_len, 1, 1, 8, {2: "bfloat16", 4: "float32"}[dtype_bytes], causal)
    if order == "fa2":
        steps = [(s.q_block, s.k_block) for s in costmodel.tile_schedule(seq_len, block_m, block_n, causal)]
        model = costmodel.step_traffic(shape, block_m, block_n)
        read, written = model["fa2_read"], model["fa2_written"]
    else:
        steps = [(s.q_block, s.k_block) for s in costmodel.fa1_schedule(seq_len, block_m, block_n, causal)]
        model = costmodel.fa1_step_traffic(shape, block_m, block_n)
        read, written = model["fa1_read"], model["fa1_written"]
    loads, stores = step_io(order, np.array(steps), seq_len, block_m, block_n)
    assert np.cumsum(io_bytes(loads, 8, dtype_bytes)).tolist() == read.tolist()
    assert np.cumsum(io_bytes(stores, 8, dtype_bytes)).tolist() == written.tolist()
    # every output row is written exactly once, by either order
    o_rows = np.zeros(seq_len, dtype=int)
    for start, end in stores[:, IO_TENSORS.index("O")]:
        o_rows[start:end] += 1
    assert (o_rows == 1).all()


def test_bench_times_fa1_only_where_one_call_is_short():
    from bench import measure
    from costmodel import Shape
    from kernels import specs
    longest = specs.spec("fa1").max_seq_len
    assert measure.flash_tiles(measure.Setting("fa1", Shape(seq_len=1024, heads=16, head_dim=64))) is not None
    with pytest.raises(ValueError, match="not timed"):
        measure.runner(measure.Setting("fa1", Shape(seq_len=2 * longest, heads=16)), None, None, None)
    s = measure.Setting("fa1", Shape(seq_len=256, heads=2, head_dim=64, dtype="float32"))
    assert measure.bytes_moved(s) == costmodel.total_bytes(
        costmodel.fa1_traffic(Shape(256, 1, 2, 64, "float32"), *measure.flash_tiles(s)))
