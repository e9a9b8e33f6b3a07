"""The takeaways' decode and training cards (and their sentences): each number the one its scene shows, from the
scene's own story functions at the setting the scene is given; absent where the recording has no number; in the
talk's order, with the scene's number."""
import dataclasses

import pytest

import story
from fmt import fmt_bytes, fmt_tokens
from page.settings import Settings
from page.stage import backward_records, shipped_recording
from story import backward, decode
from tests.support_app import assert_no_exception, metric_values, open_app, page_text

RECORDING = shipped_recording()  # as the page holds it: the ablation's steps and FP8 kept apart
DECODE, TRAINING = "Generating: split-KV decode", "Training: O + LSE, not P"


def scenes() -> dict[str, int]:
    from app import SCENES
    return {scene.key: number for number, scene in enumerate(SCENES, start=1)}


def talk(settings: Settings, **evidence) -> tuple[story.Evidence, dict[str, int]]:
    """What scene_takeaways gathers from the shipped recording at these settings (the prefill cards' records at the
    talk's shape; the decode scene's records, cache length and roof; the backward scene's records)."""
    shape = settings.shape
    same = [r for r in RECORDING.records if r.get("pass", "prefill") == "prefill" and r["batch"] == shape.batch
            and r["heads"] == shape.heads and r["head_dim"] == shape.head_dim and r["dtype"] == shape.dtype
            and r["causal"] == shape.causal]
    records = [r for r in same if r["algorithm"] in ("fa2", "naive")]
    found = backward_records(RECORDING)
    made = story.Evidence(records, [r for r in same if r["seq_len"] == shape.seq_len],
                          story.traffic_panels(shape, records, RECORDING.facts), RECORDING.facts, "NVIDIA H200",
                          max_abs_err=7.8e-3, trace_len=256, ring=RECORDING.ring, decode=decode_evidence(settings),
                          backward=story.BackwardEvidence(tuple(found), tuple(found), tuple(RECORDING.records)))
    return dataclasses.replace(made, **evidence), scenes()


def decode_evidence(settings: Settings, records=None) -> story.DecodeEvidence:
    records = story.decode_records(RECORDING.records) if records is None else records
    return story.DecodeEvidence(tuple(records), settings.decode_batch, settings.kv_len,
                                story.decode_copy_roof(RECORDING.meta, RECORDING.facts))


def card(evidence, settings, numbers, title):
    found = [s for s in story.takeaway_slides(evidence, settings.shape, numbers) if s.title == title]
    assert len(found) <= 1
    return found[0] if found else None


def point(evidence, settings, numbers, bold):
    found = [p for p in story.takeaways(evidence, settings.shape, numbers) if p.startswith(f"**{bold}")]
    assert len(found) <= 1
    return found[0] if found else None


def decode_scene(settings: Settings):
    """The decode scene's rows and sentence at these settings, by its own functions and inputs (app.scene_decode)."""
    roof = story.decode_copy_roof(RECORDING.meta, RECORDING.facts)
    rows = story.decode_rows(story.decode_records(RECORDING.records), settings.decode_batch, settings.kv_len, roof)
    return rows, story.decode_sentence(rows, settings.decode_batch, settings.kv_len, RECORDING.facts.get("sm_count"))


# -- decode ----------------------------------------------------------------------------------------------------

def test_the_decode_card_at_the_scenes_default_is_its_own_number_and_setting():
    settings = Settings()
    assert (settings.decode_batch, settings.kv_len) == (1, 131072)  # the decode scene's default: 1 × 128K
    evidence, numbers = talk(settings)
    slide = card(evidence, settings, numbers, DECODE)
    rows, sentence = decode_scene(settings)
    ours, cudnn, prefill = decode.row(rows, "decode"), decode.row(rows, "sdpa_default"), decode.row(rows, "fa2")
    assert slide.number == f"{ours.share:.0%} of the copy roof"
    assert f"{slide.number} measured in the same run" in sentence  # the scene says the same per cent
    times = decode.prefill_times(ours, prefill)
    assert f"{times} ours" in sentence and "prefill" not in slide.line  # the card's two lines: in the words only
    assert f"{decode.prefill_times(ours, prefill)} as long" in point(evidence, settings, numbers, "Generating")
    assert f"{decode.versus_sdpa(ours, cudnn)} SDPA's default" in slide.line
    assert f"{ours.time_us:,.0f} µs/token" in slide.line and f"takes {ours.time_us:,.0f} µs" in sentence
    assert slide.line.startswith("Llama 3 8B, 1 × 128K tokens: ") and "(recorded)" in slide.line
    assert slide.scene == numbers["decode"] == 10
    # the recording's claim the card rests on (README's numbers): 143 µs, 88 % of the roof, 23× the prefill kernel
    assert (slide.number, f"{ours.time_us:,.0f}", times) == ("88% of the copy roof", "143", "23×")


@pytest.mark.parametrize(("batch", "kv_len", "words"), [(1, 1024, "mostly fixed costs"),
                                                       (1, 524288, "reads only"), (32, 8192, "32 × 8K tokens")])
def test_the_decode_card_follows_the_links_setting_and_says_what_the_scene_says_there(batch, kv_len, words):
    settings = dataclasses.replace(Settings(), decode_batch=batch, kv_len=kv_len)
    evidence, numbers = talk(settings)
    slide = card(evidence, settings, numbers, DECODE)
    rows, sentence = decode_scene(settings)
    ours = decode.row(rows, "decode")
    assert slide.number == f"{ours.share:.0%} of the copy roof" and f"{slide.number} measured" in sentence
    assert words in slide.line and f"× {fmt_tokens(kv_len)} tokens" in slide.line
    said = point(evidence, settings, numbers, "Generating")
    assert slide.number in said and f"(recorded; scene {numbers['decode']})" in said
    assert decode.roof_words(ours) in said and decode.roof_words(ours) in sentence


def test_no_decode_records_or_none_at_the_setting_gives_no_decode_card_nor_sentence():
    settings = Settings()
    for evidence, numbers in (talk(settings, decode=decode_evidence(settings, records=())),
                              talk(settings, decode=None)):
        assert card(evidence, settings, numbers, DECODE) is None
        assert point(evidence, settings, numbers, "Generating") is None
    untimed = dataclasses.replace(settings, decode_batch=8, kv_len=1 << 20)  # past the bench's share of the GPU
    assert not decode.row(decode_scene(untimed)[0], "decode")
    evidence, numbers = talk(untimed)
    assert card(evidence, untimed, numbers, DECODE) is None and point(evidence, untimed, numbers, "Generating") is None
    # our kernel failed where the others ran: no card either (the scene quotes no number of ours there)
    failed = [{**r, "status": "error", "time_ms": None, "gbps": None} if r["algorithm"] == "decode" else r
              for r in story.decode_records(RECORDING.records)]
    evidence, numbers = talk(settings, decode=decode_evidence(settings, records=failed))
    assert card(evidence, settings, numbers, DECODE) is None


def test_the_decode_roof_is_the_one_the_decode_run_measured():
    assert story.decode_copy_roof({"decode_copy_gbps": 4000.0}, {"copy_gbps": 4300.0}) == 4000.0
    assert story.decode_copy_roof({}, {"copy_gbps": 4300.0}) == 4300.0
    assert story.decode_copy_roof(None, None) is None


# -- training ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("seq_len", "causal"), [(8192, False), (8192, True), (1024, False), (65536, True)])
def test_the_training_card_is_the_backward_scenes_memory_and_speed(seq_len, causal):
    settings = dataclasses.replace(Settings(), seq_len=seq_len, causal=causal)
    shape = settings.shape
    evidence, numbers = talk(settings)
    slide = card(evidence, settings, numbers, TRAINING)
    recorded = backward.at_setting(backward_records(RECORDING), shape)
    memory = backward.memory_sentence(shape, RECORDING.facts["hbm_bytes"], recorded)
    standard, flash, less = backward.training_memory(shape)
    assert slide.number == f"{fmt_bytes(standard)} → {fmt_bytes(flash)}"
    assert f"at least {fmt_bytes(standard)}" in memory
    assert f"{fmt_bytes(flash)} with the gradients, {less} less" in memory  # what the scene's caption says
    bars = backward.tflops_bars(backward_records(RECORDING), RECORDING.records, shape)
    mine = backward.ours_against(bars)
    assert f"runs at {mine.vs_cudnn} cuDNN's" in backward.tflops_sentence(bars, shape)
    assert f"FA-3 style (ours) backward {mine.vs_cudnn} cuDNN's (recorded)" in slide.line
    assert f"at {fmt_tokens(shape.seq_len)}" in slide.line and slide.scene == numbers["backward"] == 7
    said = point(evidence, settings, numbers, "Training")
    assert f"{mine.bar.tflops:,.0f} TFLOPS, {mine.vs_cudnn} cuDNN's" in said
    forward = f"{mine.vs_forward} its own forward's"  # where its forward was timed at this N (not at 1K), as the scene
    assert (forward in said) == (mine.vs_forward is not None) == (f"It reaches {forward}" in
                                                                 backward.tflops_sentence(bars, shape))
    wall = backward.training_wall(recorded)  # the memory chart's wall, in its own words
    assert wall and backward.training_wall(recorded)["text"][1:] in said and f"scene {numbers['backward']}" in said


def test_where_no_backward_was_timed_at_the_talks_n_the_training_card_quotes_no_speed():
    settings = dataclasses.replace(Settings(), seq_len=262144)  # the recording timed the backward up to 64K
    evidence, numbers = talk(settings)
    assert backward.ours_against(backward.tflops_bars(backward_records(RECORDING), RECORDING.records,
                                                      settings.shape)) is None
    slide = card(evidence, settings, numbers, TRAINING)
    standard, flash, _ = backward.training_memory(settings.shape)
    assert slide.number == f"{fmt_bytes(standard)} → {fmt_bytes(flash)}" and "cuDNN" not in slide.line
    assert "at 256K" in slide.line
    assert "TFLOPS" not in point(evidence, settings, numbers, "Training")


def test_without_backward_records_the_training_card_keeps_the_formula_and_quotes_no_speed():
    settings = Settings()
    evidence, numbers = talk(settings, backward=story.BackwardEvidence((), (), ()))
    slide = card(evidence, settings, numbers, TRAINING)
    standard, flash, _ = backward.training_memory(settings.shape)
    assert slide.number == f"{fmt_bytes(standard)} → {fmt_bytes(flash)}"
    assert "cuDNN" not in slide.line and "recorded" not in slide.line
    said = point(evidence, settings, numbers, "Training")
    assert "TFLOPS" not in said and "formula, a lower bound" in said  # the chart's wall by the formula
    evidence, numbers = talk(settings, backward=None)
    assert card(evidence, settings, numbers, TRAINING) is None


def test_a_live_backward_is_said_live():
    settings = Settings()
    found = backward_records(RECORDING)
    evidence, numbers = talk(settings, backward=story.BackwardEvidence(tuple(found), tuple(found),
                                                                       tuple(RECORDING.records), live=True))
    assert "(live)" in card(evidence, settings, numbers, TRAINING).line
    assert "(measured live)" in point(evidence, settings, numbers, "Training")


# -- both: the talk's order and the scenes' numbers ---------------------------------------------------------

def test_the_cards_keep_the_talks_order_and_the_words_name_each_scene():
    settings = Settings()
    evidence, numbers = talk(settings)
    slides = story.takeaway_slides(evidence, settings.shape, numbers)
    order = [s.scene for s in slides]
    assert order[-1] == numbers["tiling"] and order[:-1] == sorted(order[:-1])  # exactness closes the talk
    assert {numbers["backward"], numbers["decode"]} <= set(order)
    moved = {**numbers, "decode": 41, "backward": 42}  # numbers read from the table, not written in
    points = story.takeaways(evidence, settings.shape, moved)
    assert "(recorded; scene 41)" in point(evidence, settings, moved, "Generating")
    assert "(scene 42)" in point(evidence, settings, moved, "Training")
    assert [s.scene for s in story.takeaway_slides(evidence, settings.shape, moved) if s.title in (DECODE, TRAINING)] \
        == [42, 41]
    # every card has its sentence; the speed card's line holds the wall's too (one scene shows both): two sentences
    speed = next(s for s in slides if s.title == "Speed")
    assert "; standard refused from 32K" in speed.line and len(points) == len(slides) + 1
    assert len(slides) <= 9  # three rows of three: the canvas holds no more without scrolling


def test_past_the_wall_the_wall_has_its_own_card():
    settings = dataclasses.replace(Settings(), seq_len=65536)  # the recording's standard kernels refused from 32K
    evidence, numbers = talk(settings)
    slides = story.takeaway_slides(evidence, settings.shape, numbers)
    assert "Speed" not in [s.title for s in slides]
    (wall,) = [s for s in slides if s.title == "The wall"]
    assert wall.number == "32K" and wall.line.startswith("tokens: standard refused, too big for the GPU") and wall.scene == numbers["seqlen"]


def test_the_page_shows_both_cards_from_the_shipped_recording():
    app = open_app(scene="takeaways")
    assert_no_exception(app)
    settings = Settings()
    rows, _ = decode_scene(settings)
    standard, flash, _ = backward.training_memory(settings.shape)
    assert f"{decode.row(rows, 'decode').share:.0%} of the copy roof" in metric_values(app)
    assert f"{fmt_bytes(standard)} → {fmt_bytes(flash)}" in metric_values(app)
    text = page_text(app)
    assert f"· scene {scenes()['decode']}" in text and f"· scene {scenes()['backward']}" in text
    assert "**Generating: one token against the cache.**" in text and "**Training: O and the LSE, not P.**" in text


def test_the_page_follows_the_links_cache_length():
    app = open_app(scene="takeaways", kv_len="1024")
    assert_no_exception(app)
    rows, _ = decode_scene(dataclasses.replace(Settings(), kv_len=1024))
    assert f"{decode.row(rows, 'decode').share:.0%} of the copy roof" in metric_values(app)
    assert "1K cached tokens" in page_text(app)
