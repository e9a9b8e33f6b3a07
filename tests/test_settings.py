"""URL parsing of the app's settings: hostile links become defaults plus notes, never exceptions."""
from dataclasses import fields, replace

import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

import costmodel
import page.settings as page_settings
from app import SCENE_KEYS
from app import SEQLEN_TABS as SEQLEN_TAB_NAMES
from page.pictures import VIEWS, SharedMemoryBudget, fit_tiles, loop_orders
from page.settings import QUERY_KEYS, Settings, resolve, settings_to_query
from page.settings import settings_from_query as parse_only

# the tables that own those keys
TABLES = {"scene": SCENE_KEYS, "view": tuple(VIEWS), "order": tuple(loop_orders()), "tab": tuple(SEQLEN_TAB_NAMES)}


def settings_from_query(params):
    """The link as the page reads it: parsed, then scene, view and order resolved against their tables."""
    settings, notes = parse_only(params)
    for field, keys in TABLES.items():
        settings, more = resolve(settings, field, keys)
        notes += more
    return settings, notes


DEFAULTS = settings_from_query({})[0]  # noqa: F811 (the defaults as the page shows them: the first scene, view, order)
ALLOWED = {
    **TABLES, "seq_len": page_settings.SEQ_LENS, "head_dim": page_settings.HEAD_DIMS,
    "dtype": tuple(page_settings.DTYPE_BYTES), "causal": (False, True), "block_m": page_settings.TILE_SIZES,
    "block_n": page_settings.TILE_SIZES, "trace_len": page_settings.TRACE_SEQ_LENS,
    "source": page_settings.SOURCES, "theme": page_settings.THEME_CHOICES, "model": page_settings.MODELS,
}
RANGES = {"batch": (1, page_settings.MAX_BATCH), "heads": (1, page_settings.MAX_HEADS),
          "step": (0, page_settings.MAX_STEP), "seed": (0, page_settings.MAX_SEED)}


def assert_valid(settings: Settings) -> None:
    for key, allowed in ALLOWED.items():
        assert getattr(settings, key) in allowed, key
    for key, (low, high) in RANGES.items():
        value = getattr(settings, key)
        assert type(value) is int and low <= value <= high, key
    assert page_settings.RECORDING_NAME.fullmatch(settings.recording)


valid_settings = st.builds(
    Settings,
    **{key: st.sampled_from(allowed) for key, allowed in ALLOWED.items()},
    **{key: st.integers(low, high) for key, (low, high) in RANGES.items()},
    recording=st.from_regex(page_settings.RECORDING_NAME, fullmatch=True).filter(lambda name: ".." not in name),
).map(lambda settings: page_settings.with_model(settings)[0])  # a preset fixes heads and head_dim
junk_text = st.one_of(
    st.text(max_size=120),
    st.sampled_from(["", " ", "-1", "1e9", "nan", "inf", "0x40", "99999999999999999999", "８１９２", "8_192",
                     "../../etc/passwd", "<script>alert(1)</script>", "`rm -rf`", "[x](javascript:alert(1))",
                     "True", "k", "256K", "1k", "None", "null", "\x00", "a" * 5000]),
)
junk_keys = st.one_of(st.sampled_from(QUERY_KEYS), st.text(max_size=20))
junk_values = st.one_of(junk_text, st.lists(junk_text, max_size=3), st.none(), st.integers(), st.floats())
junk_params = st.dictionaries(junk_keys, junk_values, max_size=12)


def test_no_params_gives_defaults_and_no_notes():
    assert settings_from_query({}) == (DEFAULTS, [])


def test_defaults_are_valid():
    assert_valid(DEFAULTS)


@hypothesis_settings(max_examples=300, deadline=None)
@given(junk_params)
def test_any_junk_query_gives_valid_settings(params):
    settings, notes = settings_from_query(params)
    assert_valid(settings)
    assert all(isinstance(note, str) and note for note in notes)


@hypothesis_settings(max_examples=300, deadline=None)
@given(valid_settings)
def test_round_trip_through_the_query_is_identity(settings):
    assert settings_from_query(settings_to_query(settings)) == (settings, [])


@hypothesis_settings(max_examples=300, deadline=None)
@given(valid_settings, st.sampled_from(QUERY_KEYS), junk_text)
def test_one_bad_value_is_noted_and_the_others_are_kept(settings, key, raw):
    if key in ("heads", "head_dim"):  # with a model preset the model sets them (tested below)
        settings = replace(settings, model=page_settings.CUSTOM_MODEL)
    params = settings_to_query(settings) | {key: raw}
    alone, alone_notes = settings_from_query({key: raw})
    result, notes = settings_from_query(params)
    assert_valid(result)
    if alone_notes:  # the value was rejected: one note names it, nothing else is lost
        assert len(notes) == 1 and notes[0].startswith(f"{key}:")
        assert result == replace(settings, **{key: getattr(DEFAULTS, key)})
    else:            # an accepted spelling (e.g. "8k", "BF16", "yes") means what it means alone
        assert notes == [] and result == replace(settings, **{key: getattr(alone, key)})


@pytest.mark.parametrize("params, key", [
    ({"seq_len": "abc"}, "seq_len"),
    ({"seq_len": "-8192"}, "seq_len"),
    ({"seq_len": "1000"}, "seq_len"),
    ({"seq_len": "99999999999999999999999"}, "seq_len"),
    ({"seq_len": "８１９２"}, "seq_len"),
    ({"batch": "0"}, "batch"),
    ({"heads": "100000"}, "heads"),
    ({"head_dim": "48"}, "head_dim"),
    ({"dtype": "int8"}, "dtype"),
    ({"causal": "maybe"}, "causal"),
    ({"block_m": "48"}, "block_m"),
    ({"block_n": "8"}, "block_n"),
    ({"block_n": "512"}, "block_n"),
    ({"scene": "credits"}, "scene"),
    ({"scene": str(len(SCENE_KEYS) + 1)}, "scene"),
    ({"source": "gpu"}, "source"),
    ({"theme": "neon"}, "theme"),
    ({"recording": "../secrets.json"}, "recording"),
    ({"recording": "/etc/passwd"}, "recording"),
    ({"step": "-1"}, "step"),
    ({"seed": "4294967296"}, "seed"),
    ({"seq_len": ["8192", "16384"]}, "seq_len"),
    ({"seq_len": "9" * 5000}, "seq_len"),
])
def test_each_kind_of_bad_value_falls_back_with_a_note(params, key):
    settings, notes = settings_from_query(params)
    assert getattr(settings, key) == getattr(DEFAULTS, key)
    assert len(notes) == 1 and notes[0].startswith(f"{key}:")


def test_friendly_spellings_are_accepted():
    settings, notes = settings_from_query({"seq_len": "32k", "dtype": "FP32", "causal": "yes", "scene": "6",
                                           "theme": " Dark "})
    assert notes == []
    assert (settings.seq_len, settings.dtype, settings.causal, settings.scene, settings.theme) == (
        32768, "float32", True, "tiling", "dark")


def test_unknown_keys_are_listed_once_and_capped():
    settings, notes = settings_from_query({f"junk{i}": "1" for i in range(50)})
    assert settings == DEFAULTS
    assert len(notes) == 1 and "and 45 more" in notes[0]


def test_notes_quote_values_safely_for_markdown():
    _, notes = settings_from_query({"theme": "`x`<b>[a](javascript:1)\n", "dtype": "\x00" * 3})
    assert len(notes) == 2
    for note in notes:
        assert note.count("`") % 2 == 0  # values sit whole inside code spans
        assert "\n" not in note and "\x00" not in note


def test_empty_value_list_means_not_given():
    assert settings_from_query({"seq_len": []}) == (DEFAULTS, [])


# 128 KiB per block and the cost model the kernels use (a Q tile plus two stages of K and V tiles).
SMALL_GPU = SharedMemoryBudget(limit_bytes=128 * 1024, gpu_name="a small GPU")


def test_tiles_that_fit_are_kept():
    settings = replace(DEFAULTS, block_m=128, block_n=64)
    assert fit_tiles(settings, SMALL_GPU) == (settings, [])


def test_tiles_too_big_for_shared_memory_shrink_with_a_note():
    asked, _ = settings_from_query({"block_m": "256", "block_n": "256", "head_dim": "256", "dtype": "float32"})
    settings, notes = fit_tiles(asked, SMALL_GPU)
    assert (settings.block_m, settings.block_n) == (16, 16)  # 16×16×256×4 × 5 = 80 KiB; 32×32 needs 160
    assert len(notes) == 1 and "shared memory" in notes[0] and "a small GPU" in notes[0]


@hypothesis_settings(max_examples=200, deadline=None)
@given(valid_settings)
def test_fitted_tiles_always_fit_or_are_the_smallest(settings):
    fitted, notes = fit_tiles(settings, SMALL_GPU)
    need = costmodel.smem_bytes(fitted.block_m, fitted.block_n, fitted.head_dim, fitted.dtype_bytes)
    assert need <= SMALL_GPU.limit_bytes or fitted.block_m == page_settings.TILE_SIZES[0]
    assert (fitted == settings) == (notes == [])


def test_every_setting_has_a_query_key():
    assert QUERY_KEYS == tuple(field.name for field in fields(Settings))
    assert set(settings_to_query(DEFAULTS)) == set(QUERY_KEYS)


def test_sizes_agree_with_what_the_kernels_accept():
    inputs = pytest.importorskip("kernels.inputs")
    flash = pytest.importorskip("kernels.fa2")
    assert page_settings.HEAD_DIMS == tuple(inputs.SUPPORTED_HEAD_DIMS)
    for size in page_settings.TILE_SIZES:
        costmodel.check_tiles(size, size)
    for size in (8, 48, 512, None, True, 64.0):
        with pytest.raises(ValueError):
            costmodel.check_tiles(size, size)
    assert flash.costmodel.check_tiles is costmodel.check_tiles  # the kernels check tiles by the same rule


@pytest.mark.parametrize("model, heads, head_dim", [("gpt2-small", 12, 64), ("llama3-8b", 32, 128),
                                                    ("llama3-70b", 64, 128)])
def test_a_model_preset_sets_heads_and_head_dim(model, heads, head_dim):
    settings, notes = settings_from_query({"model": model})
    assert (settings.model, settings.heads, settings.head_dim) == (model, heads, head_dim) and not notes
    assert page_settings.model_of(heads, head_dim) == model
    assert settings_from_query(settings_to_query(settings)) == (settings, [])


def test_a_link_whose_heads_disagree_with_its_model_keeps_the_model_and_says_so():
    settings, notes = settings_from_query({"model": "llama3-8b", "heads": "8", "head_dim": "64"})
    assert (settings.heads, settings.head_dim) == (32, 128)
    assert len(notes) == 2 and all("llama3-8b" in note for note in notes)


def test_an_unknown_model_is_a_note_and_the_custom_shape():
    settings, notes = settings_from_query({"model": "gpt-5", "heads": "8"})
    assert (settings.model, settings.heads) == (page_settings.CUSTOM_MODEL, 8)
    assert len(notes) == 1 and notes[0].startswith("model: `gpt-5`")


def test_grouped_kv_presets_say_so():
    for preset in page_settings.MODEL_PRESETS.values():
        assert preset.kv_heads <= preset.heads and preset.heads % preset.kv_heads == 0
        assert "config.json" in preset.source
