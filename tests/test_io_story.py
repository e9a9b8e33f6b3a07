"""The IO story on the page agrees with the cost model at every slider stop, causal and not (AppTest, recorded
source), and the recording's own bytes_moved agree with the same model."""
import pytest
from streamlit.testing.v1 import AppTest

import costmodel
from costmodel import Shape
from kernels import specs
import story
from page.settings import DEFAULTS
from bench.results import load_results
from tests.support_app import APP, assert_no_exception, metric_values
from fmt import fmt_bytes

def S(seq_len, batch, heads, head_dim, dtype_bytes, causal):
    """The cost model's shape as these tests write it: (N, batch, heads, head_dim, bytes per element, causal)."""
    return Shape(seq_len, batch, heads, head_dim, {2: "bfloat16", 4: "float32"}[dtype_bytes], causal)


RECORDED = load_results("h200.json")
SHAPE = (DEFAULTS.batch, DEFAULTS.heads, DEFAULTS.head_dim, DEFAULTS.dtype_bytes)


def open_scene(scene: str, seq_len: int, causal: bool) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"source": "recorded", "scene": scene, "seq_len": str(seq_len),
                             "causal": str(causal).lower()})
    return app.run()


def expected_flash_bytes(seq_len: int, causal: bool) -> int:
    """Flash's L2-aware bytes with the tiles the recording says the kernel ran."""
    records = [r for r in RECORDED.records if r["algorithm"] == "fa2" and r["head_dim"] == DEFAULTS.head_dim
               and r["causal"] == causal]
    tiles = next(((r["block_m"], r["block_n"]) for r in records if r.get("block_m")), specs.spec("fa2").assumed_tiles)
    # programs per SM as the recording's SM timeline of this kernel measured them (story.residency)
    machine = costmodel.machine_from_facts(RECORDED.facts, story.residency(RECORDED.timelines, DEFAULTS.head_dim,
                                                                           causal))
    return costmodel.total_bytes(specs.traffic("fa2", S(seq_len, *SHAPE, causal), *tiles, machine=machine))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", costmodel.SEQ_LENS)
def test_compare_and_headline_numbers_are_the_cost_model_at_every_stop(seq_len, causal):
    compare = open_scene("compare", seq_len, causal)
    assert_no_exception(compare)
    naive = costmodel.total_bytes(costmodel.naive_traffic(S(seq_len, *SHAPE, causal)))
    flash = expected_flash_bytes(seq_len, causal)
    standard_shown, flash_shown, _ = metric_values(compare)
    assert (standard_shown, flash_shown) == (fmt_bytes(naive), fmt_bytes(flash))
    headline = open_scene("headline", seq_len, causal)
    assert_no_exception(headline)
    memory = metric_values(headline)[:2]
    shape = S(seq_len, *SHAPE, False)
    assert memory == [fmt_bytes(costmodel.naive_extra_bytes(shape)), fmt_bytes(costmodel.flash_extra_bytes(shape))]


def test_the_recordings_bytes_moved_are_the_cost_models():
    """What the bench wrote as bytes_moved is the cost model's, for the machine the bench models (1 program per SM:
    bench.measure has no timeline when it times; the scenes model the measured residency, BENCHMARKS.md)."""
    machine = costmodel.machine_from_facts(RECORDED.facts)
    checked = 0
    for r in RECORDED.records:
        if r["algorithm"] not in ("fa2", "naive"):
            continue
        if r["pass"] == "backward":  # a backward's bytes: the least any backward moves (bench.measure)
            assert r["bytes_moved"] == costmodel.backward_least_bytes(Shape.of_record(r)), r
            continue
        if r["pass"] == "decode":  # a decode record's bytes: the cache's K and V once, Q and O (bench.measure)
            assert r["bytes_moved"] == costmodel.total_bytes(costmodel.decode_traffic(Shape.of_record(r), 1)), r
            continue
        model = specs.traffic(r["algorithm"], Shape.of_record(r), r.get("block_m"), r.get("block_n"), machine=machine)
        assert r["bytes_moved"] == costmodel.total_bytes(model), r
        checked += 1
    assert checked >= 36


@pytest.mark.parametrize("causal", [False, True])
def test_past_the_wall_the_compare_card_and_the_evolution_point_say_out_of_memory(causal):
    records = [r for r in RECORDED.records if r["head_dim"] == DEFAULTS.head_dim and r["causal"] == causal
               and r["batch"] == DEFAULTS.batch and r["heads"] == DEFAULTS.heads]
    wall = story.first_out_of_memory(records)
    assert wall is not None
    compare = open_scene("compare", costmodel.SEQ_LENS[-1], causal)
    assert_no_exception(compare)
    assert compare.metric[0].delta == f"did not run: {story.oom_word(story.record_at(records, 'naive', costmodel.SEQ_LENS[-1]))}"
    assert compare.metric[0].delta == "did not run: refused before any launch"  # the library's check, not the allocator
    assert not any("did not run" in caption.value for caption in compare.caption)  # said once, on the card
    evolution = open_scene("evolution", costmodel.SEQ_LENS[-1], causal)
    assert_no_exception(evolution)
    spec = evolution.get("plotly_chart")[0].proto.spec
    assert story.REFUSED in spec and "not measured" not in spec
