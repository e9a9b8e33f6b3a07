"""When and with which code the results file's other sections were measured: SM timelines, Proton's phase
recordings and ring runs carry recorded_at and build as records do (kernels/source.py measured_with, entry_build),
the results file checks them, stamp_records stamps them from git history, and the timeline, inside and ring scenes
date their own entries and say when their code has changed since."""
import copy
import functools
import json
import re
import subprocess
from pathlib import Path

import pytest

import story
from bench import results
from bench.measure import provenance, recorded_now
from bench.schema import RECORDED_AT_PATTERN
from kernels import source, specs
from tests.support_app import assert_no_exception, open_app, page_text, upload

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "results" / "h200.json"
OLD = "0" * 12  # a build no code of this copy has


def _shipped() -> dict:
    return json.loads(RECORDING.read_bytes())


# -- which code each entry measured --------------------------------------------------------------------------------

def test_each_section_names_the_code_its_entries_measured():
    assert source.measured_with("timelines", {}) == ("fa2", "prefill", "")
    assert source.measured_with("phases", {"kernel": "flash_v3", "dtype": "bfloat16"}) == ("fa3", "prefill", "bfloat16")
    ours = {"impl": "ours", "kernel": "fa3", "dtype": "bfloat16"}
    assert source.measured_with("ring", ours) == ("fa3", specs.RING, "bfloat16")
    assert source.measured_with("ring", {**ours, "impl": "torch_cp", "kernel": "sdpa (default backend)"}) is None
    assert source.measured_with("records", {"algorithm": "sdpa_flash", "dtype": "bfloat16"}) is None
    # a ring run's code is kernels/ring.py around its kernel's prefill: no spec's sources name ring.py
    assert specs.source_files("fa3", specs.RING, "bfloat16") == (specs.RING_SOURCE, *specs.source_files("fa3"))
    assert all(specs.RING_SOURCE not in files for spec in specs.all_specs() for _, files in spec.sources)
    assert specs.named_files("fa3", specs.RING, "bfloat16") == ("ring.py", "fa3.py")
    assert source.entry_build("ring", ours) not in (None, source.record_build("fa3"))


def test_what_the_bench_writes_says_when_and_with_which_build():
    ring = provenance("ring", {"impl": "ours", "kernel": "fa2", "dtype": "bfloat16"})
    assert re.fullmatch(RECORDED_AT_PATTERN, ring["recorded_at"]) and ring["recorded_at"] <= recorded_now()
    assert ring["build"] == source.record_build("fa2", specs.RING, "bfloat16")
    assert provenance("ring", {"impl": "torch_cp", "kernel": "sdpa (default backend)", "dtype": "bfloat16"})[
        "build"] is None
    assert provenance("timelines", {})["build"] == source.record_build(specs.SM_TIMELINE_KERNEL)
    assert provenance("phases", {"kernel": "fa3", "dtype": "bfloat16"})["build"] == source.record_build("fa3")


# -- the results file's check --------------------------------------------------------------------------------------

def _file_with(section: str, **fields) -> bytes:
    doc = _shipped()
    doc[section][0].update(fields)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("section", ["timelines", "phases", "ring"])
@pytest.mark.parametrize("field, value", [
    ("recorded_at", "yesterday"), ("recorded_at", "2026-12-04T24:00Z"), ("recorded_at", 20261204),
    ("build", "ABCDEF012345"), ("build", "abc"), ("build", ["0" * 12]),
])
def test_a_bad_stamp_in_a_section_is_dropped_with_a_note(section, field, value):
    loaded = results.parse_results(_file_with(section, **{field: value}), "upload")
    assert getattr(loaded, section)[0][field] is None
    assert [note for note in loaded.notes if field in note and "ignored" in note], loaded.notes


@pytest.mark.parametrize("section", ["timelines", "phases", "ring"])
def test_good_stamps_are_kept_and_sections_without_them_load(section):
    loaded = results.parse_results(_file_with(section, recorded_at="2026-12-03T01:02Z", build="0123456789ab"))
    entry = getattr(loaded, section)[0]
    assert (entry["recorded_at"], entry["build"]) == ("2026-12-03T01:02Z", "0123456789ab") and not loaded.notes
    doc = _shipped()
    for entry in doc[section]:
        entry.pop("recorded_at"), entry.pop("build")
    older = results.parse_results(json.dumps(doc).encode(), "older")
    assert not older.notes
    assert all(e["recorded_at"] is None and e["build"] is None for e in getattr(older, section))


def test_every_entry_of_the_shipped_recording_says_when_and_ours_which_build():
    loaded = results.load_results_path(RECORDING)
    assert not loaded.notes
    for section in ("timelines", "phases", "ring"):
        entries = getattr(loaded, section)
        assert entries and all(re.fullmatch(RECORDED_AT_PATTERN, e["recorded_at"]) for e in entries), section
        for entry in entries:
            assert entry["recorded_at"][:16] <= loaded.meta["created"][:16] + "Z"
            if source.measured_with(section, entry) is None:
                assert entry["build"] is None, "PyTorch's context_parallel has no build of ours"
    ours = [r for r in loaded.ring if r["impl"] == "ours"]
    assert ours and all(r["build"] for r in ours)
    # bench.ring's runs are dated by the time its command says, not by the file's created (the bench run's)
    assert {r["recorded_at"] for r in loaded.ring} == {"2026-12-04T11:59Z"} != {loaded.meta["created"][:16] + "Z"}


# -- the page: each scene dates its own entries and names changed code ----------------------------------------------

def _upload(scene: str, section: str, build, **params):
    doc = _shipped()
    for entry in doc[section]:
        entry["build"] = build(entry)
        entry["recorded_at"] = "2026-11-30T10:00Z"
    app = upload(open_app(scene=scene, **params), json.dumps(doc).encode())
    assert_no_exception(app)
    return page_text(app)


@pytest.mark.parametrize("scene, section, params, files", [
    ("timeline", "timelines", {}, "kernels/fa2.py"),
    ("inside", "phases", {}, "kernels/fa2.py and kernels/fa3.py"),
    ("ring", "ring", {}, "kernels/fa3.py and kernels/ring.py"),
    ("ring", "ring", {"ring": "balance"}, "kernels/fa3.py and kernels/ring.py"),
    ("ring", "ring", {"ring": "length"}, "kernels/fa3.py and kernels/ring.py"),
])
def test_a_scene_says_when_its_entries_come_from_other_code(scene, section, params, files):
    stale = _upload(scene, section, lambda entry: OLD, **params)
    assert f"Measured with an earlier version of {files} than this copy runs." in stale
    assert "2026-11-30" in stale, "the scene dates its own entries, not the file"
    current = _upload(scene, section, lambda entry: source.entry_build(section, entry), **params)
    assert "with an earlier version" not in current and "2026-11-30" in current


def test_the_scenes_date_the_shipped_entries_by_their_own_days(monkeypatch):
    import page.stage
    monkeypatch.setattr(page.stage, "build_now", lambda *what: None)  # this copy's code unknown: nothing said of it
    loaded = results.load_results_path(RECORDING)
    timeline = page_text(open_app(scene="timeline"))
    assert f"Recorded {story.recorded_days(loaded.timelines)} at the talk's setting" in timeline
    inside = page_text(open_app(scene="inside"))
    shipped = [phases for phases in loaded.phases if phases["config"] is None]  # the ablation's steps: not here
    assert f"Recorded on NVIDIA H200, {story.recorded_days(shipped)}: one launch" in inside
    ring = page_text(open_app(scene="ring"))
    assert "recorded on NVIDIA H200, 2026-12-04." in ring and "with an earlier version" not in ring


def test_a_peers_ring_run_says_nothing_of_our_code():
    runs = [{"impl": "torch_cp", "kernel": "sdpa (default backend)", "dtype": "bfloat16", "build": OLD}]
    assert story.earlier_code(runs, lambda *what: "f" * 12, "ring") == ()
    ours = [{**runs[0], "impl": "ours", "kernel": "fa3"}]
    assert story.earlier_code(ours, lambda *what: "f" * 12, "ring") == (("fa3", ("fa3.py", "ring.py")),)
    assert story.earlier_code(ours, lambda *what: OLD, "ring") == ()


# -- stamps from the file's git history ----------------------------------------------------------------------------

def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args], check=True,
                   capture_output=True)


def test_the_stamping_script_stamps_every_section_from_a_files_history(tmp_path):
    """Three commits: the first run (a timeline, a phase recording, ring runs of ours and PyTorch's) with the kernels
    then; a second ring run of one setting with kernels/ring.py changed; then kernels/fa2.py changed. Each entry is
    dated by the version that first held its times (a ring run by its command's time) and stamped with the code of
    that commit."""
    from perf.local import stamp_records
    git = functools.partial(_git, tmp_path)
    kernels, files = tmp_path / "kernels", ("fa2.py", "fa3.py", "ptx.py", "gluon_compat.py", "naive.py", "ring.py")
    kernels.mkdir()
    (tmp_path / "results").mkdir()
    for name in files:
        (kernels / name).write_text(f"NAME = {name!r}\n", encoding="utf-8")
    doc = _shipped()
    doc["meta"] = {**doc["meta"], "created": "2026-12-01T09:30:59Z",
                   "ring_command": "python -m bench.ring --out r.json (2026-12-01T11:00:00Z)"}
    for section in ("records", "timelines", "phases", "ring"):
        for entry in doc[section]:
            entry.pop("recorded_at", None), entry.pop("build", None)
    doc["records"] = [r for r in doc["records"] if r["algorithm"] == "naive"][:2]
    doc["timelines"], doc["phases"] = doc["timelines"][:1], doc["phases"][:1]
    ours = next(r for r in doc["ring"] if r["impl"] == "ours")
    peer = next(r for r in doc["ring"] if r["impl"] == "torch_cp")
    doc["ring"] = [ours, peer]
    path = tmp_path / "results" / "r.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "the first run")
    first = {name: source.build_stamp(specs.source_files(*what), kernels) for name, what in
             (("timeline", ("fa2", "prefill", "")), ("phases", ("fa3", "prefill", "bfloat16")))}

    (kernels / "ring.py").write_text("NAME = 'ring, faster'\n", encoding="utf-8")
    rerun = copy.deepcopy(ours)
    rerun.update(time_ms=ours["time_ms"] * 0.9, time_ms_p20=ours["time_ms_p20"] * 0.9,
                 time_ms_p80=ours["time_ms_p80"] * 0.9)
    doc["ring"] = [rerun, peer]
    doc["meta"]["ring_command"] = "python -m bench.ring --out r.json (2026-12-02T08:15:42Z)"
    path.write_text(json.dumps(doc), encoding="utf-8")
    git("commit", "-q", "-am", "the ring again, with ring.py changed")
    (kernels / "fa2.py").write_text("NAME = 'fa2, changed'\n", encoding="utf-8")
    git("commit", "-q", "-am", "the teaching kernel changed")

    lines = stamp_records.stamp(path, write=True, repo=tmp_path, kernels=kernels)
    stamped = json.loads(path.read_text(encoding="utf-8"))
    timeline, phase = stamped["timelines"][0], stamped["phases"][0]
    assert (timeline["recorded_at"], timeline["build"]) == ("2026-12-01T09:30Z", first["timeline"])
    assert (phase["recorded_at"], phase["build"]) == ("2026-12-01T09:30Z", first["phases"])
    mine, theirs = stamped["ring"]
    assert mine["recorded_at"] == "2026-12-02T08:15Z", "the second ring run's time, from its command"
    assert mine["build"] == source.entry_build("ring", mine, kernels), "ring.py and fa3.py as they are now"
    assert (theirs["recorded_at"], theirs["build"]) == ("2026-12-01T11:00Z", None)
    assert "1 of 1 timelines stamped; timelines by day: 2026-12-01 1" in lines
    assert "  timelines fa2 prefill: 0 this copy's code, 1 an earlier version's, 0 unknown" in lines
    assert "  phases fa3 prefill bfloat16: 1 this copy's code, 0 an earlier version's, 0 unknown" in lines
    assert "2 of 2 ring stamped; ring by day: 2026-12-01 1, 2026-12-02 1" in lines
    assert "  ring fa3 ring bfloat16: 1 this copy's code, 0 an earlier version's, 0 unknown" in lines
    assert not results.load_results_path(path).notes
    again = stamp_records.stamp(path, write=False, repo=tmp_path, kernels=kernels)
    assert [line.split(";")[0] for line in again if " stamped" in line] == [
        "0 of 2 records stamped", "0 of 1 timelines stamped", "0 of 1 phases stamped", "0 of 2 ring stamped"]


def test_an_entry_not_in_the_history_with_its_times_is_named_and_left_alone(tmp_path):
    from perf.local import stamp_records
    git = functools.partial(_git, tmp_path)
    git("init", "-q")
    (tmp_path / "README").write_text("a repository whose history never held the results file\n", encoding="utf-8")
    git("add", "-A")
    git("commit", "-q", "-m", "a start")
    doc = _shipped()
    for entry in doc["phases"]:
        entry.pop("recorded_at"), entry.pop("build")
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    lines = stamp_records.stamp(tmp_path / "r.json", write=False, repo=tmp_path)
    assert "not in the file's history with these times: phases fa3 shipped" in lines
    assert any(line.startswith(f"0 of {len(doc['phases'])} phases stamped") for line in lines)

