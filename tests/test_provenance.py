"""When and with which code a record was measured: the build stamp of our kernels' code (kernels/source.py), the
records' recorded_at and build (bench), the results file's check of them, and what the page says of them."""
import json
import re
from pathlib import Path

import pytest

import story
from bench import results
from bench.measure import Setting, make_record, recorded_now
from bench.schema import RECORDED_AT_PATTERN
from costmodel import Shape
from kernels import source, specs
from tests.support_app import assert_no_exception, badges, open_app, page_text, upload, uploaded_recording

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "results" / "h200.json"

KERNEL = '''"""The module's docstring."""
import triton  # a comment


def launch(x, n):
    """What it does."""
    # the body
    label = f"{n!r} rows, {{braces}}"

    return x * 2 + n, label  # trailing


class Config:
    """A config."""
    block = 64
'''


def _stamp(tmp_path: Path, text: str) -> str:
    (tmp_path / "k.py").write_text(text, encoding="utf-8")
    return source.build_stamp(("k.py",), tmp_path)


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("# a comment", "# another comment"),
    lambda t: t.replace('"""What it does."""', '"""What it does, said at more length\n    over two lines."""'),
    lambda t: t.replace('"""The module\'s docstring."""', ""),
    lambda t: t.replace("    # the body\n", "").replace("\n\n    return", "\n    return"),
    lambda t: t.replace("def launch(x, n):", "def launch(x,\n           n):"),
    lambda t: t.replace('    """A config."""\n', '    """A config."""\n    "a string that is a statement"\n'),
], ids=["comment", "docstring", "module-docstring", "blank-lines-and-comment-lines", "line-break-in-brackets",
        "string-statement"])
def test_what_does_not_run_leaves_the_build_as_it_was(tmp_path, edit):
    assert _stamp(tmp_path, edit(KERNEL)) == _stamp(tmp_path, KERNEL)


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("x * 2", "x * 3"),
    lambda t: t.replace("block = 64", "block = 128"),
    lambda t: t.replace("{n!r} rows", "{n!r} row"),
    lambda t: t.replace("    label = f", "    lbl = f").replace(", label", ", lbl"),
    lambda t: t.replace("    return x", "    if n:\n        return x").replace("\n\n\nclass", "\n    return None\n\n\nclass"),
], ids=["constant", "shipped-config", "f-string", "name", "control-flow"])
def test_a_change_to_what_runs_changes_the_build(tmp_path, edit):
    changed = edit(KERNEL)
    assert changed != KERNEL, "the edit must change the text"
    assert _stamp(tmp_path, changed) != _stamp(tmp_path, KERNEL)


def test_the_build_is_the_same_digest_whatever_python_tokenizes_it(tmp_path):
    """The bench's GPU machine (Python 3.12: f-strings come as parts) and the app's must agree on one file: each
    f-string is one token as written, so the digest of this fixed text is fixed (3.11, 3.12 and 3.13 give it). A
    change to how stamps are made leaves every recorded build unmatched: re-stamp results files with it."""
    assert _stamp(tmp_path, KERNEL) == "0cef73646f21"
    tokens = source.code_tokens(KERNEL)
    assert 'f"{n!r} rows, {{braces}}"' in tokens
    assert "# a comment" not in " ".join(tokens) and "What it does." not in " ".join(tokens)
    assert tokens[:3] == ["import", "triton", "NEWLINE"]


def test_a_kernels_files_by_what_a_record_computed():
    assert specs.source_files("fa3", "prefill", "bfloat16") == ("fa3.py", "ptx.py", "gluon_compat.py")
    assert specs.source_files("fa3", "backward", "bfloat16")[0] == "fa3_bwd.py"
    assert "fp8.py" in specs.source_files("fa3", "prefill", "float8_e4m3fn")
    assert specs.source_files("fa2", "backward", "bfloat16")[0] == "fa2_bwd.py"
    assert specs.source_files("fa2", "decode", "bfloat16") == ("fa2.py",)
    assert specs.source_files("decode", "decode", "bfloat16") == ("decode.py",)
    for peer in specs.keys(ours=False):
        assert specs.source_files(peer) == () and source.record_build(peer) is None
    for key in specs.keys(ours=True):
        assert specs.spec(key).sources, f"{key} is ours: its records need a build"
        for _, files in specs.spec(key).sources:
            assert all((source.KERNEL_DIR / name).is_file() for name in files), files


def test_a_stamp_sees_an_edit_to_its_file(tmp_path):
    before = _stamp(tmp_path, KERNEL)
    assert _stamp(tmp_path, KERNEL.replace("block = 64", "block = 640")) != before  # kept per (size, mtime)
    assert _stamp(tmp_path, KERNEL) == before


def test_a_fresh_record_says_when_and_with_which_build():
    record = make_record(Setting("fa3", Shape(seq_len=1024, batch=1, heads=2, head_dim=64)), "ok", "Test GPU",
                         "cuda", [1.0, 1.0, 1.0])
    assert re.fullmatch(RECORDED_AT_PATTERN, record.recorded_at) and record.recorded_at <= recorded_now()
    assert record.build == source.record_build("fa3", "prefill", "bfloat16")
    peer = make_record(Setting("sdpa_default", Shape(seq_len=1024, batch=1, heads=2, head_dim=64)), "ok", "Test GPU",
                       "cuda", [1.0])
    assert peer.build is None and peer.recorded_at


def _file_with(**fields) -> bytes:
    doc = json.loads(uploaded_recording())
    doc["records"][0].update(fields)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("field, value", [
    ("recorded_at", "yesterday"), ("recorded_at", "2026-13-01T00:00Z"), ("recorded_at", 20261206),
    ("build", "ABCDEF012345"), ("build", "abc"), ("build", "<script>0000"),
])
def test_a_bad_stamp_is_dropped_with_a_note_and_the_file_still_loads(field, value):
    loaded = results.parse_results(_file_with(**{field: value}), "upload")
    assert loaded.records[0][field] is None
    assert any(field in note for note in loaded.notes), loaded.notes


def test_good_stamps_are_kept_and_older_files_load_without_them():
    loaded = results.parse_results(_file_with(recorded_at="2026-12-04T17:34Z", build="0123456789ab"), "upload")
    assert (loaded.records[0]["recorded_at"], loaded.records[0]["build"]) == ("2026-12-04T17:34Z", "0123456789ab")
    doc = json.loads(uploaded_recording())
    for record in doc["records"]:
        record.pop("recorded_at"), record.pop("build")
    older = results.parse_results(json.dumps(doc).encode(), "older")
    assert not older.notes and all(r["recorded_at"] is None and r["build"] is None for r in older.records)


def test_every_record_of_the_shipped_recording_says_when_and_ours_with_which_build():
    loaded = results.load_results_path(RECORDING)
    for record in loaded.records:
        assert record["recorded_at"], record["algorithm"]
        assert record["recorded_at"][:16] <= loaded.meta["created"][:16] + "Z"
        ours = bool(specs.source_files(record["algorithm"], record["pass"], record["dtype"]))
        assert (record["build"] is not None) <= ours, "a peer's record has no build of ours"


def test_the_days_said_are_the_records_own():
    records = [{"recorded_at": "2026-12-05T19:05Z"}, {"recorded_at": "2026-12-04T10:22Z"}, {"recorded_at": None}]
    assert story.recorded_days(records, "2026-12-06T01:00:00Z") == "2026-12-04 to 12-05"
    assert story.recorded_days(records[1:], "2026-12-06T01:00:00Z") == "2026-12-04"
    assert story.recorded_days(records[2:], "2026-12-06T01:00:00Z") == "2026-12-06"  # undated: the file's date
    assert story.recorded_label("NVIDIA H200", records[:1]) == "recorded on NVIDIA H200, 2026-12-05"


def test_records_of_other_code_are_named_with_their_files():
    def now(key, pass_, dtype):
        return {"fa3": "a" * 12, "decode": "b" * 12}.get(key)
    records = [
        {"algorithm": "decode", "pass": "decode", "dtype": "bfloat16", "build": "c" * 12},
        {"algorithm": "flash_v3", "pass": "prefill", "dtype": "bfloat16", "build": "d" * 12},  # an older name
        {"algorithm": "fa3", "pass": "backward", "dtype": "bfloat16", "build": "a" * 12},
        {"algorithm": "sdpa_default", "pass": "prefill", "dtype": "bfloat16", "build": None},
        {"algorithm": "fa2", "pass": "prefill", "dtype": "bfloat16", "build": None},  # before stamps: nothing said
    ]
    stale = story.earlier_code(records, now)
    assert stale == (("fa3", ("fa3.py",)), ("decode", ("decode.py",)))  # legend order
    sentence = story.earlier_code_sentence(stale)
    assert sentence == "Measured with an earlier version of kernels/fa3.py and kernels/decode.py than this copy runs."
    assert story.earlier_code(records[2:], now) == () and story.earlier_code_sentence(()) == ""
    assert story.earlier_code(records, lambda *_: None) == (), "this copy's build unknown: nothing is said"


def test_a_chart_subtitle_says_when_and_which_files_changed():
    records = [{"algorithm": "decode", "pass": "decode", "dtype": "bfloat16", "build": "c" * 12,
                "recorded_at": "2026-12-04T17:34Z"}]
    stale = story.earlier_code(records, lambda *what: "b" * 12)
    assert story.recorded_subtitle(records, "", stale) == "recorded 2026-12-04; code changed since: decode.py"
    assert story.recorded_subtitle(records, "", ()) == "recorded 2026-12-04"
    assert story.recorded_subtitle([], "", ()) == ""


def test_the_decode_chart_says_when_its_bars_were_recorded(monkeypatch):
    import page.stage
    from tests.support_app import plotly_specs
    monkeypatch.setattr(page.stage, "build_now", lambda *what: "f" * 12)
    app = open_app(scene="decode")
    assert_no_exception(app)
    titles = [spec["layout"].get("title", {}).get("text", "") for spec in plotly_specs(app)]
    bandwidth = next(title for title in titles if "time per token" in title)
    assert re.search(r"<sup>recorded 20\d\d-\d\d-\d\d.*; code changed since: .*decode\.py</sup>", bandwidth), bandwidth


def test_the_page_dates_an_upload_by_its_records():
    app = upload(open_app(scene="headline", seq_len="2048"), uploaded_recording())
    assert_no_exception(app)
    assert "RECORDED on Test GPU, 2026-01-02" in badges(app)


@pytest.mark.parametrize("scene", ["evolution", "seqlen"])
def test_the_page_says_when_figures_come_from_other_code(monkeypatch, scene):
    import page.stage
    monkeypatch.setattr(page.stage, "build_now", lambda *what: "f" * 12)  # this copy's code: another build
    app = open_app(scene=scene, seq_len="8192")
    assert_no_exception(app)
    assert "Measured with an earlier version of kernels/fa2.py" in page_text(app)
    monkeypatch.setattr(page.stage, "build_now", lambda *what: None)  # unknown here: nothing said
    app = open_app(scene=scene, seq_len="8192")
    assert "with an earlier version" not in page_text(app)


def test_a_record_that_measured_nothing_is_never_said_to_be_measured_with_earlier_code():
    """A record refused before any launch, out of memory or failed measured nothing, whatever code it carries the
    build of: only a finished record (or a timeline, a phase recording: no status) is said to be measured with an
    earlier version."""
    base = {"algorithm": "naive", "pass": "prefill", "dtype": "bfloat16", "build": "c" * 12}
    failed = [{**base, "status": "oom", "message": "out of memory, refused before any launch: S (fp32) and P need "
                                                   "more memory than the device has"},
              {**base, "status": "oom", "message": "CUDA out of memory. Tried to allocate 64.00 GiB"},
              {**base, "status": "error", "message": "illegal memory access"}]
    assert story.earlier_code(failed, lambda *what: "f" * 12) == ()
    assert story.earlier_code([*failed, {**base, "status": "ok"}], lambda *what: "f" * 12) == (("naive", ("naive.py",)),)
    assert story.earlier_code([{"kernel": "fa3", "dtype": "bfloat16", "build": "c" * 12}], lambda *what: "f" * 12,
                              "phases") != ()


def test_the_evolution_scene_says_what_happened_where_standard_was_refused(monkeypatch):
    """At 256K the recording's standard kernels were refused before any launch (S and P larger than the device) and
    nothing of them was measured: the caption says so and why, and claims no earlier kernels/naive.py there; at 16K,
    where standard attention was measured with an earlier build, it still does."""
    import page.stage
    monkeypatch.setattr(page.stage, "build_now", lambda *what: "f" * 12)  # every stamped record: an earlier build
    said = page_text(open_app(scene="evolution", seq_len="262144"))
    assert "kernels/naive.py" not in said
    assert ("At 256K standard (ours) was refused before any launch (needs 12.0 TiB beyond Q, K, V; 12.0 TiB for S and "
            "P; the device has 139.8 GiB).") in said
    assert "kernels/naive.py" in page_text(open_app(scene="evolution", seq_len="16384"))


def test_the_stamping_script_reads_dates_and_counts_builds():
    from perf.local import stamp_records
    assert stamp_records._minute("2026-12-05T19:05:59Z") == "2026-12-05T19:05Z"
    assert stamp_records._minute("") is None and stamp_records._minute("yesterday, late") is None
    now = source.record_build("decode", "decode", "bfloat16")
    base = {"algorithm": "decode", "pass": "decode", "dtype": "bfloat16"}
    lines = stamp_records.stale_lines([{**base, "build": now}, {**base, "build": "0" * 12}, {**base, "build": None},
                                       {"algorithm": "sdpa_default", "pass": "decode", "dtype": "bfloat16"}])
    assert lines == ["  decode decode bfloat16: 1 this copy's code, 1 an earlier version's, 1 unknown"]
    record = {"algorithm": "flash", "seq_len": 1024, "batch": 2, "heads": 16, "head_dim": 64, "dtype": "bfloat16",
              "causal": False}  # a schema-1 record: an older name, no pass or K/V fields
    assert stamp_records._key(record) == stamp_records._key({**record, "algorithm": "fa2", "pass": "prefill",
                                                             "kv_len": 1024, "kv_heads": 16})


def test_the_backward_caption_speaks_of_the_bars_it_draws(monkeypatch):
    """The TFLOPS view draws one length: its caption dates and names the code of those bars' records only (the
    scene's other lengths may come from other days and other code)."""
    import page.stage
    loaded = results.load_results_path(RECORDING)
    fa3 = {r["seq_len"]: r for r in loaded.records if r["algorithm"] == "fa3" and r["pass"] == "backward"
           and r["head_dim"] == 128 and not r["causal"] and r["batch"] == 2 and r["heads"] == 16}
    assert fa3[8192]["build"] != fa3[32768]["build"], "the recording's fa3 backward at 8K and 32K: two builds"
    monkeypatch.setattr(page.stage, "build_now", lambda key, pass_, dtype: fa3[8192]["build"]
                        if (key, pass_) == ("fa3", "backward") else "f" * 12)
    at_8k = page_text(open_app(scene="backward", part="speed", seq_len="8192"))
    assert "kernels/fa2_bwd.py" in at_8k and "kernels/fa3_bwd.py" not in at_8k
    from story import backward
    drawn = backward.bar_records([r for r in loaded.records if r["pass"] == "backward"], loaded.records,
                                 Shape(seq_len=8192, batch=2, heads=16, head_dim=128))
    assert f"Source: recorded on NVIDIA H200, {story.recorded_days(drawn)}." in at_8k
    at_32k = page_text(open_app(scene="backward", part="speed", seq_len="32768"))
    assert "kernels/fa3_bwd.py" in at_32k


def test_bar_records_are_the_drawn_length_only():
    from story import backward
    loaded = results.load_results_path(RECORDING)
    shape = Shape(seq_len=8192, batch=2, heads=16, head_dim=128)
    drawn = backward.bar_records([r for r in loaded.records if r["pass"] == "backward"], loaded.records, shape)
    assert drawn and {r["seq_len"] for r in drawn} == {8192}
    assert {(r["algorithm"], r["pass"]) for r in drawn} <= {(a, p) for a, p, _ in backward.BARS}


def test_the_stamping_script_dates_and_builds_records_from_a_files_history(tmp_path):
    """A repository of two commits: a results file and the kernel then, then the kernel's code changed. The
    records are stamped with the first commit's run time and the first kernel's build; against the kernel of
    now they read as an earlier version's."""
    import subprocess
    from perf.local import stamp_records

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       check=True, capture_output=True)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "results").mkdir()
    fa2 = tmp_path / "kernels" / "fa2.py"
    fa2.write_text("BLOCK = 64\n", encoding="utf-8")
    (tmp_path / "kernels" / "naive.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    doc = json.loads(uploaded_recording())
    doc["meta"]["created"] = "2026-12-01T09:30:59Z"
    for record in doc["records"]:
        record.pop("recorded_at"), record.pop("build")
    results_file = tmp_path / "results" / "r.json"
    results_file.write_text(json.dumps(doc), encoding="utf-8")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "the first run")
    first = source.build_stamp(("fa2.py",), tmp_path / "kernels")
    fa2.write_text("BLOCK = 128  # the code changed\n", encoding="utf-8")
    git("commit", "-q", "-am", "the kernel changed")

    lines = stamp_records.stamp(results_file, write=True, repo=tmp_path, kernels=tmp_path / "kernels")
    stamped = json.loads(results_file.read_text(encoding="utf-8"))["records"]
    assert all(r["recorded_at"] == "2026-12-01T09:30Z" for r in stamped)
    assert {r["build"] for r in stamped if r["algorithm"] == "fa2"} == {first}
    assert "  fa2 prefill bfloat16: 0 this copy's code, 3 an earlier version's, 0 unknown" in lines
    assert "  naive prefill bfloat16: 3 this copy's code, 0 an earlier version's, 0 unknown" in lines
    again = stamp_records.stamp(results_file, write=False, repo=tmp_path, kernels=tmp_path / "kernels")
    assert again[0].startswith("0 of 6 records stamped"), "stamped records keep their stamps"


def test_the_headline_card_says_when_its_speedup_comes_from_other_code(monkeypatch):
    """The headline's caption has no room for the sentence the other scenes say: the speedup card's label carries it
    (the recording's FA-2 and naive records, this copy's code another build), and nothing where the build is
    unknown here."""
    import page.stage
    monkeypatch.setattr(page.stage, "build_now", lambda *what: "f" * 12)
    app = open_app(scene="headline", seq_len="8192")
    assert_no_exception(app)
    assert "Speedup · earlier kernels" in [m.label for m in app.metric]
    monkeypatch.setattr(page.stage, "build_now", lambda *what: None)
    app = open_app(scene="headline", seq_len="8192")
    assert "Speedup" in [m.label for m in app.metric] and "Speedup · earlier kernels" not in [m.label for m in app.metric]


def test_the_evolution_caption_words_each_failure_as_the_wall_does():
    """Every kind of failure the caption can meet, in the wall's own wording (story.records.oom_text): our refusal
    before launch, the allocator's out of memory (with what it tried), and an error with its message."""
    from story.records import oom_text
    base = {"pass": "prefill", "dtype": "bfloat16", "batch": 1, "heads": 32, "head_dim": 128, "causal": False,
            "seq_len": 131072}
    allocator = {**base, "algorithm": "sdpa_math", "status": "oom", "needed_bytes": 64 * 2 ** 30,
                 "message": "CUDA out of memory. Tried to allocate 64.00 GiB"}
    error = {**base, "algorithm": "fa1", "status": "error", "message": "illegal memory access"}
    finished = {**base, "algorithm": "fa3", "status": "ok"}
    said = story.failed_here_sentence([allocator, error, finished], 131072, {"sdpa_math": "SDPA math", "fa1": "FA-1"},
                                      150 * 2 ** 30)
    assert said == (f"At 128K SDPA math ran out of memory ({oom_text(allocator)}; the device has 150.0 GiB) and FA-1 "
                    "failed (error: illegal memory access).")
    assert "a 64.0 GiB allocation failed" in said
    assert story.failed_here_sentence([finished], 131072, {}) == ""
    assert story.failed_here_sentence([allocator], 8192, {}) == ""  # another setting's failure is not said here
