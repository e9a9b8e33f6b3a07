"""bench --fp8's records (schema 5): written, read back beside the bf16 kernel's own records, refused when they do
not say their scaling, kept apart from the 16-bit scenes; the speed candidates' configurations."""
import json

import pytest

from bench import cli
from bench import fp8 as bench_fp8
from bench import results as res
from costmodel import FP8_DTYPE
from tests.support_fp8 import FACTS, bf16_fa3, doc, fp8_run, parse

def test_fp8_records_carry_scaling_rotation_errors_and_the_bf16_time():
    records = fp8_run()
    assert [(r["scaling"], r["rotation"]) for r in records] == list(bench_fp8.VARIANTS)
    r = records[1]
    assert r["dtype"] == FP8_DTYPE and r["algorithm"] == "fa3" and r["status"] == "ok"
    assert r["time_ms"] == pytest.approx(1.1) and r["bf16_time_ms"] == pytest.approx(1.65)
    assert r["outlier_err_rel_rms"] == pytest.approx(0.1122) and records[0]["outlier_err_rel_rms"] == 0.1475
    assert r["bf16_err_rel_rms"] == 0.0037 and r["bf16_outlier_err_rel_rms"] == 0.0115
    assert r["paper_outlier_err_rel_rms"] == 0.042 and records[0]["paper_outlier_err_rel_rms"] == 0.098
    assert r["bf16_paper_outlier_err_rel_rms"] == 0.0031 and r["paper_outlier_err_rms"] == 0.019
    assert r["tflops"] == pytest.approx(4 * 2 * 16 * 8192 ** 2 * 128 / 1.1e-3 / 1e12)
    from kernels.fp8 import config_for_fp8
    assert (r["block_m"], r["block_n"]) == (config_for_fp8(128, False).tile_m, config_for_fp8(128, False).block_n)


def test_a_failed_variant_is_an_error_record_without_a_time():
    records = fp8_run({bench_fp8.variant_name("head", True): "RuntimeError: boom"})
    bad = records[3]
    assert bad["status"] == "error" and bad["time_ms"] is None and "boom" in bad["message"]
    assert bad["scaling"] == "head" and bad["rotation"] is True


def test_fp8_records_round_trip_beside_the_bf16_kernels_record(tmp_path):
    path = tmp_path / "fp8.json"
    res.dump_results(path, dict(FACTS), [bf16_fa3(), *fp8_run()], [], "python -m bench --fp8", "today")
    loaded = res.load_results_path(path)
    assert len(loaded.records) == 5, "four e4m3 variants and bf16 at the same shape: no conflict"
    assert [r["dtype"] for r in loaded.records] == ["bfloat16"] + [FP8_DTYPE] * 4
    assert loaded.records[0]["scaling"] is None and loaded.records[0]["rotation"] is None
    assert loaded.records[2]["outlier_err_rel_rms"] == pytest.approx(0.1122)
    assert json.loads(path.read_text())["schema_version"] == 5 and not loaded.notes


def test_an_older_file_reads_without_fp8_fields():
    old = doc([bf16_fa3()])
    old["schema_version"] = 4
    for key in ("scaling", "rotation", "err_max", "bf16_time_ms"):
        del old["records"][0][key]
    loaded = parse(old)
    assert loaded.records[0]["scaling"] is None and loaded.records[0]["bf16_time_ms"] is None and not loaded.notes


def test_fp8_records_from_before_the_papers_outliers_read_without_them():
    """results/h200.json's FP8 records predate the paper's outliers (paper_outlier_err_*): they read, without them."""
    records = fp8_run()
    for r in records:
        for key in ("paper_outlier_err_max", "paper_outlier_err_rms", "paper_outlier_err_rel_rms",
                    "bf16_paper_outlier_err_rel_rms"):
            del r[key]
    loaded = parse(doc([bf16_fa3(), *records]))
    assert not loaded.notes and loaded.records[1]["outlier_err_rel_rms"] == 0.1475
    assert loaded.records[1]["paper_outlier_err_rel_rms"] is None


@pytest.mark.parametrize("field, value, why", [("scaling", None, "says its scaling"), ("scaling", "block", "says its"),
                                               ("rotation", None, "rotation"), ("rotation", "yes", "rotation")])
def test_an_fp8_record_without_its_scaling_or_rotation_refuses_the_file(field, value, why):
    records = fp8_run()
    records[0][field] = value
    with pytest.raises(res.ResultsError, match=why):
        parse(doc(records))


def test_a_bf16_record_with_a_scaling_refuses_the_file():
    record = bf16_fa3()
    record["scaling"] = "head"
    with pytest.raises(res.ResultsError, match="only float8_e4m3fn records are scaled"):
        parse(doc([record]))


def test_two_fp8_records_of_one_variant_with_different_times_refuse_the_file():
    records = fp8_run()
    twin = dict(records[0], time_ms=1.2, time_ms_p20=1.2, time_ms_p80=1.2)
    twin["tflops"] = records[0]["tflops"] * records[0]["time_ms"] / 1.2
    twin["gbps"] = records[0]["gbps"] * records[0]["time_ms"] / 1.2
    with pytest.raises(res.ResultsError, match="same setting"):
        parse(doc([*records, twin]))


def test_a_bad_error_value_is_dropped_with_a_note():
    records = fp8_run()
    records[0]["err_rel_rms"] = -1.0
    loaded = parse(doc(records))
    assert loaded.records[0]["err_rel_rms"] is None and any("err_rel_rms" in n for n in loaded.notes)


def test_an_fp8_speed_above_the_16_bit_roof_is_not_refused():
    records = fp8_run()  # 1,000 TFLOPS against a 720 TFLOPS bf16 matmul roof: e4m3 runs at twice the rate
    assert records[0]["tflops"] > 1.25 * FACTS["matmul_tflops"]
    assert len(parse(doc(records)).records) == 4


def test_merge_keeps_each_variant_and_the_bf16_record_apart(tmp_path):
    path = tmp_path / "h200.json"
    res.dump_results(path, dict(FACTS), [bf16_fa3(), *fp8_run()], [], "python -m bench", "today")
    again = fp8_run()[2:]  # a later run of the per-head variants only
    records, *_ = cli.merged(path, again, [], [], {"ratios": []}, "python -m bench --fp8 --merge-into")
    assert len(records) == 5
    assert len({cli._setting_key(r) for r in records}) == 5


def test_the_page_keeps_fp8_records_out_of_the_16_bit_scenes():
    from page import stage
    recording = stage._as_recording("test.json", parse(doc([bf16_fa3(), *fp8_run()])))
    assert [r["dtype"] for r in recording.records] == ["bfloat16"]
    assert len(recording.fp8) == 4 and not recording.ladder


def test_the_table_prints_each_variant_against_bf16():
    lines = []
    bench_fp8.print_fp8(fp8_run(), lines.append)
    assert len(lines) == 5 and "fp8 per-head + rotation" in lines[4]
    assert f"{1.65 / 1.1:7.3f}" in lines[1] and "0.1122" in lines[2] and "0.0420" in lines[2]


def test_the_speed_candidates_are_distinct_configurations_of_supported_head_dims():
    from kernels.fa3 import SUPPORTED_HEAD_DIMS
    from kernels.fp8 import config_for_fp8, fp8_candidates
    candidates = fp8_candidates()
    assert len(candidates) <= 10  # (one fp8_speed run: each is timed at its 2 shapes × 3 rounds)
    kernels = list(candidates.values())  # (head_dim, causal, config): one build each
    assert len(set(kernels)) == len(kernels)
    for head_dim, causal, config in candidates.values():
        assert head_dim in SUPPORTED_HEAD_DIMS and causal in (False, True)
        assert config != config_for_fp8(head_dim, causal), "a candidate differs from what ships"


def test_the_kernel_alone_takes_only_a_transposed_8_bit_v():
    import torch
    from kernels.fa3 import Fa3Config, launch_v3
    config = Fa3Config(64, 128, 2, 2, 240, 24)
    q = torch.zeros(1, 1, 64, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="v_is_transposed takes v_transposed"):
        launch_v3(q, q, q, False, 0.1, config, v_is_transposed=True)  # 16-bit inputs have no Vᵀ
    q8 = q.to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=r"\(B, H, D, ≥ N\); got \(1, 1, 64, 128\)"):
        launch_v3(q8, q8, q8, False, 0.1, config, descale=torch.ones(3, 1), v_is_transposed=True)


@pytest.mark.parametrize("block", [None, 64, 128])
@pytest.mark.parametrize("seq_len", [1, 17, 128, 300])
def test_v_transposed_is_vt_padded_and_in_the_p_in_place_order(block, seq_len):
    """The 8-bit kernel's Vᵀ (one Triton kernel, here in the interpreter): (B, H, D, N padded), zeros past seq_len;
    with P in place each tile's keys in p_in_place_order, so that P'·V' = P·V; strided V read as it lies."""
    import torch
    from kernels.fa3 import p_in_place_order, v_transposed
    gen = torch.Generator().manual_seed(seq_len)
    v = torch.randn(2, 3, seq_len, 64, generator=gen).to(torch.float8_e4m3fn)
    step = block or 16
    padded = -(-seq_len // step) * step
    order = p_in_place_order(block) if block else None
    want = torch.zeros(2, 3, 64, padded)
    for pos in range(padded):
        key = pos if block is None else pos - pos % block + order[pos % block]
        if key < seq_len:
            want[..., pos] = v[:, :, key, :].float()
    for given in (v, v.transpose(1, 2).contiguous().transpose(1, 2)):
        got = v_transposed(given, block)
        assert got.dtype == torch.float8_e4m3fn and got.shape == (2, 3, 64, padded)
        assert torch.equal(got.float(), want)
    if block:
        assert sorted(order) == list(range(block)) and order[:8] == [0, 1, 8, 9, 2, 3, 10, 11]
        p = torch.randn(5, block, generator=gen)
        vv = torch.randn(block, 7, generator=gen)
        assert torch.allclose(p[:, order] @ vv[order], p @ vv, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of 16"):
        p_in_place_order(40)


def test_e4m3_ships_p_in_place_where_it_was_measured():
    from kernels.fp8 import P_IN_PLACE_HEAD_DIMS, config_for_fp8
    for head_dim in (64, 128, 256):
        for causal in (False, True):
            assert config_for_fp8(head_dim, causal).p_in_place == (head_dim in P_IN_PLACE_HEAD_DIMS)


def test_e4m3_hands_p_over_through_shared_memory_or_late_and_reads_q_from_shared_memory_where_registers_would_spill():
    """Every e4m3 configuration hands P over in place: through shared memory at P_SMEM_TILES (256-key tiles for a
    pair at 64 and 128, three consumers of 128-key tiles at 128 non-causal, 128-key tiles with O in the ring at
    256), else cast late; Q leaves the registers where the late cast would spill, and for three consumers."""
    from kernels.fa3 import SUPPORTED_HEAD_DIMS, config_for_v3
    from kernels.fp8 import (EXP_FMA, P_LATE_CAST_SPILLS, P_SMEM_TILES, PV_PROMOTE_FITS, THREE_CONSUMERS,
                             config_for_fp8)
    for d in SUPPORTED_HEAD_DIMS:
        for c in (False, True):
            config = config_for_fp8(d, c)
            assert config.p_in_place and config.p_late_cast != config.p_smem, (d, c)
            assert config.p_smem == ((d, c) in P_SMEM_TILES), (d, c)
            if config.p_smem:
                want = 128 if d == 256 or config.num_consumers == 3 else 256
                assert config.block_n == want and config.o_in_ring == (d == 256), (d, c)
                assert config.num_consumers == 2 or not config.q_in_regs, (d, c)
            assert config.exp_fma == EXP_FMA.get((d, c), 0), (d, c)
            if (d, c) in P_LATE_CAST_SPILLS and not config.p_smem:
                assert config_for_v3(d, c).q_in_regs and not config.q_in_regs, (d, c)
            for precise in (True, False):
                if (d, c) in PV_PROMOTE_FITS:
                    assert config_for_fp8(d, c, precise).pv_promote == precise
    three = config_for_fp8(128, False)
    assert all(getattr(three, k) == v for k, v in THREE_CONSUMERS.items()) and three.kv_stages == 4
    assert config_for_fp8(128, False, True).num_consumers == 2  # precise_pv: the pair with 128-key tiles
    assert (128, True) in P_LATE_CAST_SPILLS and config_for_fp8(64, False).q_in_regs
    assert not config_for_fp8(128, True).q_in_regs  # with Q in registers its 256-key build spills 8 bytes a round
    assert EXP_FMA and all(k in (4, 8, 16) for k in EXP_FMA.values())
