"""The kernel's trace: its tile order, and the online-softmax state it kept, replayed in NumPy."""
import math

import numpy as np
import pytest
import torch

from kernels.trace import late_max_inputs, trace_flash


def replay_online_softmax(q, k, v, block_m, block_n, causal, sm_scale):
    """Step-by-step online softmax in float64, tile for tile as the kernel walks them."""
    n = q.shape[0]
    steps, row_max, row_sum, alpha, out_rows = [], [], [], [], []
    for qb in range(math.ceil(n / block_m)):
        rows = np.arange(qb * block_m, qb * block_m + block_m)
        m = np.full(block_m, -np.inf)
        l = np.zeros(block_m)
        acc = np.zeros((block_m, q.shape[1]))
        for kb in range(math.ceil(n / block_n)):
            keys = np.arange(kb * block_n, kb * block_n + block_n)
            if causal and keys[0] > min(rows[-1], n - 1):
                break
            valid = (keys[None, :] < n) & (~causal | (keys[None, :] <= rows[:, None]))
            s = np.where(valid, q[np.minimum(rows, n - 1)] @ k[np.minimum(keys, n - 1)].T * sm_scale, -np.inf)
            m_new = np.maximum(m, s.max(1))
            a = np.exp(m - m_new)
            p = np.exp(s - m_new[:, None])
            l = l * a + p.sum(1)
            acc = acc * a[:, None] + p @ np.where(keys[:, None] < n, v[np.minimum(keys, n - 1)], 0)
            m = m_new
            in_range = rows < n
            steps.append((qb, kb))
            row_max.append(np.where(in_range, m, np.nan))
            row_sum.append(np.where(in_range, l, np.nan))
            alpha.append(np.where(in_range, a, np.nan))
            out_rows.append(np.where(in_range[:, None], acc / l[:, None], np.nan))
    return np.array(steps), np.array(row_max), np.array(row_sum), np.array(alpha), np.array(out_rows)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len,block_m,block_n", [(100, 32, 16), (64, 16, 32), (50, 16, 16)])
def test_trace_matches_numpy_replay(seq_len, block_m, block_n, causal):
    trace = trace_flash(seq_len, 16, block_m, block_n, causal=causal, dtype="float32", seed=4)
    inputs = late_max_inputs(seq_len, 16, block_m, causal, torch.float32, 4)
    q, k, v = (t[0, 0].cpu().double().numpy() for t in inputs)
    steps, m, l, a, out = replay_online_softmax(q, k, v, block_m, block_n, causal, trace.sm_scale)
    assert trace.steps.tolist() == steps.tolist()
    np.testing.assert_allclose(trace.row_max, m, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trace.row_sum, l, rtol=1e-4)
    np.testing.assert_allclose(trace.alpha, a, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(trace.out_rows, out, rtol=1e-4, atol=1e-5)
    assert trace.max_abs_err < 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_trace_holds_exactly_the_tiles_the_mask_allows(causal):
    n, bm, bn = 130, 32, 16
    trace = trace_flash(n, 16, bm, bn, causal=causal, seed=2)
    expected = [(i, j) for i in range(math.ceil(n / bm)) for j in range(math.ceil(n / bn))
                if not causal or j * bn <= min((i + 1) * bm, n) - 1]
    assert [tuple(s) for s in trace.steps] == expected


def test_late_max_makes_the_rescale_matter():
    trace = trace_flash(128, 32, 32, 32, causal=False, seed=0)
    # in every query block some row's max jumps at a later tile: α well below 1 after the first step
    later = trace.steps[:, 1] > 0
    assert np.nanmin(trace.alpha[later]) < 0.5
    assert trace.to_dict()["steps"].shape == trace.steps.shape


@pytest.mark.parametrize("bad", [0, 2000, "64"])
def test_trace_rejects_bad_sizes(bad):
    with pytest.raises(ValueError):
        trace_flash(bad)
