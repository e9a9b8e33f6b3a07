"""Stamp a results file's entries that predate `recorded_at` and `build` from the file's git history: its records
(bench/record.py) and the entries of its other sections, SM timelines, phase recordings and ring runs
(bench/schema.py PROVENANCE_SCHEMA).

    python -m perf.local.stamp_records results/h200.json            # says what it would stamp
    python -m perf.local.stamp_records results/h200.json --write    # and writes it

An entry's measurement is the commit that first holds it with its present times (a record's status, median and
percentiles; a timeline's programs; a phase recording's times; a ring run's status, median and percentiles):
`recorded_at` is that version's `meta.created` (the bench run that wrote it, to the minute; where one commit carried
several runs, the last of them; a ring run's, the time its `meta.ring_command` says: bench.ring adds its runs to a file
the bench made and leaves its created as it was), and `build` is kernels/source.py's stamp of the code of ours it
measured (source.measured_with) as that commit has it (None where one of its files was not in it). The measurement ran
on a copy of the working tree of about that time, so a stamp from history says which committed code the entry came
with, not more. Entries that already say when they were measured keep what they have; a peer's gets no build.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.cli import _setting_key
from bench.results import parse_results, ring_key, write_atomically
from bench.schema import TIMELINE_ARRAYS, TIMELINE_SCHEMA
from kernels import source, specs

REPO = Path(__file__).resolve().parents[2]


def _git(*args: str, repo: Path = REPO) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _key(record: dict) -> tuple:
    """A measured setting, as `bench --merge-into` tells records apart (bench/cli.py _setting_key), on a raw record
    of any schema version (the fields older files lack read as the results reader reads them)."""
    return _setting_key({**record, "kv_len": record.get("kv_len") or record["seq_len"],
                         "kv_heads": record.get("kv_heads") or record["heads"], "pass": record.get("pass") or "prefill"})


def _times(record: dict) -> tuple:
    return (record.get("status"), record.get("time_ms"), record.get("time_ms_p20"), record.get("time_ms_p80"))


def _minute(created: str) -> str | None:
    """meta.created ("2026-12-05T19:05:59Z") as a record's recorded_at ("2026-12-05T19:05Z")."""
    return created[:16] + "Z" if len(created) >= 16 and created[10] == "T" else None


def _created(meta: dict) -> str | None:
    return _minute(str(meta.get("created", "")))


def _ring_created(meta: dict) -> str | None:
    """When the ring runs of a version were measured: the time bench.ring wrote after its command
    ("python -m bench.ring … (2026-12-04T11:59:09Z)"), else the file's created."""
    said = re.search(r"\(([0-9T:-]+Z)\)$", str(meta.get("ring_command") or ""))
    return _minute(said[1]) if said else _created(meta)


@dataclass(frozen=True)
class Section:
    """How the entries of one section of the file are told apart in its history."""
    name: str                              # its key in the file, and kernels/source.py's section
    key: Callable[[dict], tuple]           # what it measured: one entry per key in a version of the file
    times: Callable[[dict], tuple]         # what it measured it as: another version's other times are another run
    label: Callable[[dict], str]           # the entry in words
    when: Callable[[dict], str | None] = _created  # a version's meta -> when its entries of this section were run


SECTIONS = (
    Section("records", _key, _times,
            lambda r: f"{r['algorithm']} N={r['seq_len']} d={r['head_dim']} {r.get('pass') or 'prefill'}"),
    Section("timelines", lambda t: tuple(t[key] for key in TIMELINE_SCHEMA),
            lambda t: tuple(tuple(t[key]) for key in TIMELINE_ARRAYS),
            lambda t: f"timeline N={t['seq_len']} d={t['head_dim']}{' causal' if t['causal'] else ''}"),
    Section("phases", lambda p: (specs.canonical(p["kernel"]), p.get("config"), p["batch"], p["heads"], p["seq_len"],
                                 p["head_dim"], p["causal"], p["dtype"]),
            lambda p: (p["program_count"], p["plain_ms"], p["instrumented_launch_ms"], p["overhead"]),
            lambda p: f"phases {p['kernel']} {p.get('config') or 'shipped'}"),
    Section("ring", ring_key, _times,
            lambda r: f"ring {r['impl']} {r['layout']} {r['rotate']} K={r['world_size']} N={r['seq_len']}",
            _ring_created),
)
assert tuple(s.name for s in SECTIONS) == source.SECTIONS, "a section of the file that stamp_records does not stamp"


def origins(path: str, repo: Path = REPO) -> dict[str, dict[tuple, tuple[tuple, str, str | None]]]:
    """Per section, per entry of the file's last committed version (its key): (its times, the commit that first held
    them, when that version says they were run). path: the file's path in the repository."""
    found: dict[str, dict[tuple, tuple[tuple, str, str | None]]] = {section.name: {} for section in SECTIONS}
    for commit in _git("log", "--reverse", "--format=%H", "--", path, repo=repo).split():
        try:
            doc = json.loads(_git("show", f"{commit}:{path}", repo=repo))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
        for section in SECTIONS:
            when, seen = section.when(doc.get("meta") or {}), found[section.name]
            for entry in doc.get(section.name) or []:
                try:
                    key, times = section.key(entry), section.times(entry)
                except (KeyError, TypeError, ValueError):
                    continue  # an entry of a schema this script does not read: what it measured is unknown
                if key not in seen or seen[key][0] != times:
                    seen[key] = (times, commit, when)
    return found


def _build_at(commit: str, files: tuple[str, ...], cache: dict, repo: Path = REPO) -> str | None:
    if not files:
        return None
    if (commit, files) not in cache:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                for name in files:
                    (Path(tmp) / name).write_text(_git("show", f"{commit}:kernels/{name}", repo=repo),
                                                  encoding="utf-8")
                cache[commit, files] = source.build_stamp(files, Path(tmp))
            except subprocess.CalledProcessError:  # a file the kernel has now was not in that commit
                cache[commit, files] = None
    return cache[commit, files]


def stamp(path: Path, write: bool, repo: Path = REPO, kernels: Path = source.KERNEL_DIR) -> list[str]:
    """Stamp the entries of the results file at `path` (in the git repository `repo`) from its history; say, per
    section, how many are of the code in `kernels` now (stale_lines)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    parse_results(path.read_bytes(), str(path))  # refuse a file the app would refuse
    relative = str(path.resolve().relative_to(Path(repo).resolve()))
    history = origins(relative, repo)
    cache: dict = {}
    lines = []
    for section in SECTIONS:
        entries = raw.get(section.name) or []
        if not entries:
            continue
        stamped = 0
        for entry in entries:
            if entry.get("recorded_at"):  # stamped already (its build None where the commit lacked a file of it)
                continue
            origin = history[section.name].get(section.key(entry))
            if origin is None or origin[0] != section.times(entry):
                lines.append(f"not in the file's history with these times: {section.label(entry)}")
                continue
            _, commit, when = origin
            entry["recorded_at"] = when
            if not entry.get("build"):
                what = source.measured_with(section.name, entry)
                entry["build"] = _build_at(commit, specs.source_files(*what), cache, repo) if what else None
            stamped += 1
        by_day: dict[str, int] = {}
        for entry in entries:
            by_day[str(entry.get("recorded_at"))[:10]] = by_day.get(str(entry.get("recorded_at"))[:10], 0) + 1
        lines.append(f"{stamped} of {len(entries)} {section.name} stamped; {section.name} by day: "
                     + ", ".join(f"{day} {n}" for day, n in sorted(by_day.items())))
        lines += stale_lines(entries, kernels, section.name)
    if write:
        text = json.dumps(raw, indent=1, allow_nan=False)
        parse_results(text.encode(), str(path))  # what is written reads back
        write_atomically(path, text)
        lines.append(f"wrote {path}")
    return lines


def stale_lines(entries: list[dict], kernels: Path = source.KERNEL_DIR, section: str = "records") -> list[str]:
    """Per kernel of ours, pass and dtype: how many entries of the section are this copy's code, how many an earlier
    version's (what the page says beside them), and how many say nothing of their build."""
    counts: dict[tuple, list[int]] = {}
    for entry in entries:
        what = source.measured_with(section, entry)
        if what is None:
            continue
        now = source.record_build(*what, root=kernels)
        row = counts.setdefault(what, [0, 0, 0])
        row[0 if entry.get("build") == now else 1 if entry.get("build") else 2] += 1
    named = "" if section == "records" else f"{section} "
    return [f"  {named}{' '.join(filter(None, what))}: {this} this copy's code, {earlier} an earlier version's, "
            f"{unknown} unknown" for what, (this, earlier, unknown) in sorted(counts.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--write", action="store_true", help="write the stamps into the file")
    args = parser.parse_args(argv)
    for line in stamp(args.path, args.write):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
