"""What the page shows, as one frozen value that a URL can carry.

Every control of the app lives in the URL's query parameters, so a bookmark restores the same view.
A URL is typed by hand, pasted into chats and edited by curious people, so it is hostile input:
`settings_from_query` never raises; it keeps every value it can use and turns every one it cannot
into a short note that the app shows (values are quoted safely: notes are rendered as markdown).

No Streamlit, torch or triton import, so it is fast to import and to test. Which scenes exist is the talk's
business (app.py's table), and which views and loop orders the tiling scene has is its own: a link's scene,
view and order are checked against those tables by `resolve`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace

from costmodel import DECODE_KV_LENS, DTYPE_BYTES, HEAD_DIMS, SEQ_LENS, TILE_SIZES, TRACE_SEQ_LENS, Shape
from fmt import THEMES

SOURCES = ("live", "recorded")
MAX_BATCH = 64
MAX_HEADS = 128
MAX_SEED = 2**31 - 1
MAX_RUNG = 6  # the ablation ladder's last step (story.ablation.STEPS: FA-2 order and the six FA-3 rows)
MAX_GPUS = 1024  # a ring's GPU count (bench.schema's MAX_WORLD)
MAX_STEP = 1 << 20  # far above any schedule the animation draws; the app clamps to the real length
# "auto": charts follow the page's theme (the viewer's system setting, or Streamlit's menu)
THEME_CHOICES = ("auto", *THEMES)


@dataclass(frozen=True)
class ModelPreset:
    """A real model's attention shape, from its published configuration (config.json)."""
    label: str
    heads: int      # num_attention_heads (query heads)
    kv_heads: int   # num_key_value_heads: grouped K/V heads (GQA): the decode scene's cache has these; the prefill
                    # scenes give every query head its own K/V head
    head_dim: int   # hidden_size / num_attention_heads
    source: str
    layers: int = 1  # num_hidden_layers (n_layer): a token's KV cache is one K and one V row per layer and K/V head

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """One token's KV cache over the whole model: K and V, every layer, every K/V head (bf16 by default)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


MODEL_PRESETS: dict[str, ModelPreset] = {
    "gpt2-small": ModelPreset("GPT-2 small", 12, 12, 64,
                              "openai-community/gpt2 config.json: n_head 12, n_embd 768 → 768 / 12 = 64, n_layer 12",
                              layers=12),
    "llama3-8b": ModelPreset("Llama 3 8B", 32, 8, 128,
                             "meta-llama/Meta-Llama-3-8B config.json: num_attention_heads 32, "
                             "num_key_value_heads 8, hidden_size 4096 → 4096 / 32 = 128, num_hidden_layers 32",
                             layers=32),
    "llama3-70b": ModelPreset("Llama 3 70B", 64, 8, 128,
                              "meta-llama/Meta-Llama-3-70B config.json: num_attention_heads 64, "
                              "num_key_value_heads 8, hidden_size 8192 → 8192 / 64 = 128, num_hidden_layers 80",
                              layers=80),
}
CUSTOM_MODEL = "custom"  # heads and head_dim as set one by one
MODELS = (CUSTOM_MODEL, *MODEL_PRESETS)

_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32",
                  "float": "float32"}
_TRUE_WORDS = ("true", "1", "yes", "on")
_FALSE_WORDS = ("false", "0", "no", "off")
# a table's key ("tiling"), a position ("6"), or nothing (the table's first)
_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}|[0-9]{1,3}|", re.ASCII)
RECORDING_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\.json")  # a bare file name, never a path
_WHOLE_NUMBER = re.compile(r"([0-9]{1,10})([kK]?)", re.ASCII)  # "8192" or "8k"; no signs, spaces, "_"
_MAX_VALUE_CHARS = 80
_MAX_UNKNOWN_NOTES = 5


@dataclass(frozen=True)
class Settings:
    # scene, view and order name rows of tables that others own (the talk's scenes, the picture's views and loop
    # orders): a key or a position as typed, resolved against the table by resolve(); "" is the table's first
    scene: str = ""
    seq_len: int = 8192
    batch: int = 2
    heads: int = 16
    head_dim: int = 128
    dtype: str = "bfloat16"
    causal: bool = False
    block_m: int = 64
    block_n: int = 64
    trace_len: int = 256
    step: int = 0
    seed: int = 0
    source: str = "live"
    recording: str = "h200.json"
    theme: str = "auto"
    model: str = CUSTOM_MODEL
    view: str = ""       # the tiling scene's view (tiles, HBM ↔ SRAM, source, re-reads)
    order: str = ""      # the tiling scene's kernel: its loop order (fa2 = FA2 order, fa1 = FA1 order)
    tab: str = ""        # the sequence-length scene's tab (memory, time, throughput, table)
    part: str = ""       # the backward scene's view (the tile walk, the memory, the speed)
    kv_len: int = 131072  # the decode scene: tokens in the KV cache
    decode_batch: int = 1  # the decode scene: sequences generating at once
    rung: int = MAX_RUNG  # the ablation scene: the step whose Proton lanes show (0: FA-2 order; clamped to the steps)
    ring: str = ""       # the ring scene's view (the ring step by step, the balance, the length)
    gpus: int = 0        # the ring scene's GPU count (0: the most the recording has; one it lacks: the same)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def shape(self) -> Shape:
        """The talk's attention shape at the slider's N: what every scene's numbers are of."""
        return Shape(self.seq_len, self.batch, self.heads, self.head_dim, self.dtype, self.causal)


DEFAULTS = Settings()
QUERY_KEYS = tuple(field.name for field in fields(Settings))


class _Rejected(ValueError):
    """A query value that cannot be used; its message completes the sentence '<key>: <value> …'."""


def quoted(raw: str, limit: int = 40) -> str:
    """Untrusted text as a markdown code span: printable ASCII only, no backticks, cut at `limit`."""
    cleaned = "".join(ch if " " <= ch <= "~" and ch != "`" else "?" for ch in raw[:limit])
    return f"`{cleaned}{'…' if len(raw) > limit else ''}`" if cleaned.strip() else "an empty value"


def _count_in(raw: str) -> int:
    match = _WHOLE_NUMBER.fullmatch(raw.strip())
    if not match:
        raise _Rejected("is not a whole number")
    return int(match[1]) * (1024 if match[2] else 1)


def _whole_number(raw: str, low: int, high: int) -> int:
    value = _count_in(raw)
    if not low <= value <= high:
        raise _Rejected(f"is outside {low} … {high}")
    return value


def _one_of_numbers(raw: str, allowed: tuple[int, ...], what: str) -> int:
    value = _count_in(raw)
    if value not in allowed:
        raise _Rejected(f"is not {what} ({', '.join(_count(v) for v in allowed)})")
    return value


def _count(value: int) -> str:
    return f"{value // 1024}K" if value >= 1024 and value % 1024 == 0 else str(value)


def _one_of_names(raw: str, allowed: tuple[str, ...], aliases: Mapping[str, str] | None = None) -> str:
    name = raw.strip().lower()
    name = (aliases or {}).get(name, name)
    if name not in allowed:
        raise _Rejected(f"is not one of {', '.join(allowed)}")
    return name


def _key(raw: str) -> str:
    name = raw.strip().lower()
    if not _KEY.fullmatch(name):
        raise _Rejected("is not a name or a number")
    return name  # which keys exist is the table's to say that owns them: resolve()


def resolve(settings: Settings, field: str, keys: tuple[str, ...],
            aliases: Mapping[str, str] | None = None) -> tuple[Settings, list[str]]:
    """The settings with `field` (scene, view, order) one of `keys`, the table that owns them (app.py's scenes,
    the picture's views and loop orders): a number picks by position ("?scene=5" is what a speaker types), ""
    the first, an older name (`aliases`: a link from before a rename, "?order=flash") today's; an unknown name or
    number falls back to the first with a note."""
    raw = getattr(settings, field)
    if raw in keys:
        return settings, []
    if aliases and aliases.get(raw) in keys:
        return replace(settings, **{field: aliases[raw]}), []
    if raw.isdigit() and 1 <= int(raw) <= len(keys):
        return replace(settings, **{field: keys[int(raw) - 1]}), []
    notes = [] if raw == "" else [f"{field}: {quoted(raw)} is not one of {', '.join(keys)} (or 1 … {len(keys)}); "
                                  f"using the default {quoted(keys[0])}"]
    return replace(settings, **{field: keys[0]}), notes


def _boolean(raw: str) -> bool:
    word = raw.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise _Rejected("is not true or false")


UPLOADED_RECORDING = "uploaded"  # the link's word for numbers from an uploaded file, which a link cannot carry


def _recording(raw: str) -> str:
    if raw == UPLOADED_RECORDING:
        return raw
    if not RECORDING_NAME.fullmatch(raw) or ".." in raw:
        raise _Rejected("is not the name of a results file (like h200.json)")
    return raw


_PARSERS: dict[str, Callable[[str], object]] = {
    "scene": _key,
    "view": _key,
    "order": _key,
    "tab": _key,
    "part": _key,
    "seq_len": lambda raw: _one_of_numbers(raw, SEQ_LENS, "a power of two from 1K to 256K"),
    "batch": lambda raw: _whole_number(raw, 1, MAX_BATCH),
    "heads": lambda raw: _whole_number(raw, 1, MAX_HEADS),
    "head_dim": lambda raw: _one_of_numbers(raw, HEAD_DIMS, "a head dimension the kernels support"),
    "dtype": lambda raw: _one_of_names(raw, tuple(DTYPE_BYTES), _DTYPE_ALIASES),
    "causal": _boolean,
    "block_m": lambda raw: _one_of_numbers(raw, TILE_SIZES, "a tile size"),
    "block_n": lambda raw: _one_of_numbers(raw, TILE_SIZES, "a tile size"),
    "trace_len": lambda raw: _one_of_numbers(raw, TRACE_SEQ_LENS, "an animation length"),
    "step": lambda raw: _whole_number(raw, 0, MAX_STEP),
    "seed": lambda raw: _whole_number(raw, 0, MAX_SEED),
    "source": lambda raw: _one_of_names(raw, SOURCES),
    "recording": _recording,
    "theme": lambda raw: _one_of_names(raw, THEME_CHOICES),
    "model": lambda raw: _one_of_names(raw, MODELS),
    "kv_len": lambda raw: _one_of_numbers(raw, DECODE_KV_LENS, "a cache length from 1K to 1M (a power of two)"),
    "decode_batch": lambda raw: _whole_number(raw, 1, MAX_BATCH),
    "rung": lambda raw: _whole_number(raw, 0, MAX_RUNG),
    "ring": _key,
    "gpus": lambda raw: _whole_number(raw, 0, MAX_GPUS),
}
assert set(_PARSERS) == set(QUERY_KEYS), "every setting needs a parser"


def settings_from_query(params: Mapping[str, str | list[str]]) -> tuple[Settings, list[str]]:
    """The settings a URL asks for, and one note for every value that was ignored.

    `params` maps a key to its value, or to all its values when the key was repeated (as
    `{key: st.query_params.get_all(key) for key in st.query_params}` gives). A repeated key is
    ambiguous and falls back to its default. Tiles that do not fit a GPU's shared memory are the picture's
    business (page.pictures.fit_tiles), once the GPU is known.
    """
    chosen: dict[str, object] = {}
    notes: list[str] = []
    unknown: list[str] = []
    for key, value in params.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if key not in _PARSERS:
            unknown.append(key)
            continue
        if not values:
            continue
        if len(values) > 1:
            notes.append(f"{key}: given {len(values)} times in the link; using the default "
                         f"{quoted(_query_value(getattr(DEFAULTS, key)))}")
            continue
        raw = values[0]
        try:
            if not isinstance(raw, str):
                raise _Rejected("is not text")
            if len(raw) > _MAX_VALUE_CHARS:
                raise _Rejected("is too long to be a setting")
            chosen[key] = _PARSERS[key](raw)
        except _Rejected as why:
            notes.append(f"{key}: {quoted(str(raw))} {why}; using the default "
                         f"{quoted(_query_value(getattr(DEFAULTS, key)))}")
    if unknown:
        listed = ", ".join(quoted(str(key)) for key in unknown[:_MAX_UNKNOWN_NOTES])
        more = f" and {len(unknown) - _MAX_UNKNOWN_NOTES} more" if len(unknown) > _MAX_UNKNOWN_NOTES else ""
        notes.append(f"unknown parameter{'s' if len(unknown) > 1 else ''} {listed}{more} ignored")
    settings, model_notes = with_model(replace(DEFAULTS, **chosen), chosen)
    notes.extend(model_notes)
    return settings, notes


def with_model(settings: Settings, chosen: Mapping[str, object] | None = None) -> tuple[Settings, list[str]]:
    """A model preset sets heads and head_dim at once; values the link gives that disagree are noted."""
    preset = MODEL_PRESETS.get(settings.model)
    if preset is None:
        return settings, []
    notes = [f"{key}: {chosen[key]} disagrees with model {quoted(settings.model)} ({preset.label}: {key} "
             f"{getattr(preset, key)}); using the model's" for key in ("heads", "head_dim")
             if chosen and key in chosen and chosen[key] != getattr(preset, key)]
    return replace(settings, heads=preset.heads, head_dim=preset.head_dim), notes


def can_show(batch: int, heads: int, head_dim: int, dtype: str, causal: bool) -> bool:
    """Whether a link can hold this setting (the bounds its parsers keep)."""
    return (1 <= batch <= MAX_BATCH and 1 <= heads <= MAX_HEADS and head_dim in HEAD_DIMS and dtype in DTYPE_BYTES
            and isinstance(causal, bool))


def model_of(heads: int, head_dim: int) -> str:
    """The preset with this shape, else "custom": a control that sets heads or head_dim keeps the link honest."""
    return next((name for name, preset in MODEL_PRESETS.items()
                 if (preset.heads, preset.head_dim) == (heads, head_dim)), CUSTOM_MODEL)


def _query_value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def settings_to_query(settings: Settings) -> dict[str, str]:
    """Every setting as a query parameter, so a link keeps meaning the same even if defaults change."""
    return {key: _query_value(getattr(settings, key)) for key in QUERY_KEYS}
