"""The backward scene's tile walk (kernels/fa2_bwd.visit_order) pinned to the tiles the kernels really read: a NaN put
into one Q block (or one K block) reaches exactly the dK (or dQ) blocks of the programs whose loops load it, in
Triton's interpreter. Then the scene's numbers and figure built from it."""
from dataclasses import replace

import pytest
import torch

from kernels.fa2_bwd import config_for, launch_backward, visit_order

HEAD_DIM = 16


def _nan_blocks(grad: torch.Tensor, block: int) -> set[int]:
    rows = torch.isnan(grad[0, 0]).any(dim=-1)
    return {i // block for i in range(grad.shape[2]) if rows[i]}


def _inputs(seq_len: int):
    gen = torch.Generator().manual_seed(seq_len)
    q, k, v, o, do = (torch.randn((1, 1, seq_len, HEAD_DIM), generator=gen) * 0.3 for _ in range(5))
    return q, k, v, o, torch.zeros((1, 1, seq_len)), do


@pytest.mark.parametrize("seq_len,causal,tail_first", [(200, False, False), (200, False, True), (200, True, False),
                                                       (256, True, False)])
def test_the_walk_is_the_tiles_each_pass_reads(seq_len, causal, tail_first):
    config = replace(config_for(HEAD_DIM, torch.float32), tail_first=tail_first)
    walk = visit_order(seq_len, causal, config)
    n_q1 = -(-seq_len // config.block_m1)
    n_k2 = -(-seq_len // config.block_n2)
    for poisoned in range(n_q1):  # the dK/dV pass: which programs (K/V blocks) load Q block `poisoned`
        q, k, v, o, lse, do = _inputs(seq_len)
        q[:, :, poisoned * config.block_m1:(poisoned + 1) * config.block_m1] = float("nan")
        _, dk, _ = launch_backward(q, k, v, o, lse, do, causal, 0.25, config)
        expected = {kv for qb, kv in walk["dkdv"] if qb == poisoned}
        assert _nan_blocks(dk, config.block_n1) == expected, f"Q block {poisoned}"
    for poisoned in range(n_k2):  # the dQ pass: which programs (Q blocks) load K block `poisoned`
        q, k, v, o, lse, do = _inputs(seq_len)
        k[:, :, poisoned * config.block_n2:(poisoned + 1) * config.block_n2] = float("nan")
        dq, _, _ = launch_backward(q, k, v, o, lse, do, causal, 0.25, config)
        expected = {qb for qb, kb in walk["dq"] if kb == poisoned}
        assert _nan_blocks(dq, config.block_m2) == expected, f"K block {poisoned}"


def test_each_pass_visits_each_tile_once_column_by_column_and_row_by_row():
    walk = visit_order(256, False)
    assert walk["dkdv"] == [(i, j) for j in range(4) for i in range(4)], "dK/dV: a column of Q blocks per K/V block"
    assert walk["dq"] == [(i, j) for i in range(4) for j in range(4)], "dQ: a row of K/V blocks per Q block"
    causal = visit_order(256, True)
    assert sorted(causal["dkdv"]) == sorted(causal["dq"]) == [(i, j) for i in range(4) for j in range(i + 1)]
    assert causal["dq"][0] == (3, 0), "under causal the dQ pass starts with the longest row"


def test_a_tail_first_program_walks_the_ragged_tail_before_the_full_blocks():
    """BackwardConfig.tail_first (the head_dim 128 Hopper tiles, not causal): each dK/dV program visits the ragged
    last query block first, then the full ones in order; under causal the order stays diagonal, full, tail."""
    config = replace(config_for(HEAD_DIM, torch.float32), tail_first=True)
    step = config.block_m1
    walk = visit_order(200, False, config)["dkdv"]
    tail = 200 // step
    per_program = -(-200 // step)
    assert walk[:per_program] == [(tail, 0)] + [(i, 0) for i in range(tail)]
    assert visit_order(200, False, replace(config, tail_first=False))["dkdv"][:per_program] == [
        (i, 0) for i in range(per_program)]
    assert visit_order(200, True, config) == visit_order(200, True, replace(config, tail_first=False))
    assert visit_order(192, False, config) == visit_order(192, False, replace(config, tail_first=False)), "no tail"
