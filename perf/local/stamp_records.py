"""Stamp a results file's records that predate `recorded_at` and `build` (bench/record.py) from the file's git history.

    python -m perf.local.stamp_records results/h200.json            # says what it would stamp
    python -m perf.local.stamp_records results/h200.json --write    # and writes it

A record's measurement is the commit that first holds it with its present times (its status, median and
percentiles): `recorded_at` is that version's `meta.created` (the bench run that wrote it, to the minute; where one
commit carried several runs, the last of them), and `build` is kernels/source.py's stamp of our kernel's files as
that commit has them (None where one of them was not in it). The measurement ran on a copy of the working tree of
about that time, so a stamp from history says which committed code the record came with, not more. Records that
already say when they were measured keep what they have; a peer's record gets no build.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.cli import _setting_key
from bench.results import parse_results, write_atomically
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


def origins(path: str, repo: Path = REPO) -> dict[tuple, tuple[tuple, str, str | None]]:
    """Per setting of the file's last committed version: (its times, the commit that first held them, that
    version's meta.created). path: the file's path in the repository."""
    found: dict[tuple, tuple[tuple, str, str | None]] = {}
    for commit in _git("log", "--reverse", "--format=%H", "--", path, repo=repo).split():
        try:
            doc = json.loads(_git("show", f"{commit}:{path}", repo=repo))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
        created = _minute(str(doc.get("meta", {}).get("created", "")))
        for record in doc.get("records", []):
            try:
                key = _key(record)
            except (KeyError, TypeError, ValueError):
                continue  # a record of a schema this script does not read: its setting is unknown
            if key not in found or found[key][0] != _times(record):
                found[key] = (_times(record), commit, created)
    return found


def _build_at(commit: str, algorithm: str, pass_: str, dtype: str, cache: dict, repo: Path = REPO) -> str | None:
    files = specs.source_files(algorithm, pass_, dtype)
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
    """Stamp the records of the results file at `path` (in the git repository `repo`) from its history; say how many
    are of the code in `kernels` now (stale_lines)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    parse_results(path.read_bytes(), str(path))  # refuse a file the app would refuse
    relative = str(path.resolve().relative_to(Path(repo).resolve()))
    history = origins(relative, repo)
    cache: dict = {}
    lines, stamped = [], 0
    for record in raw["records"]:
        if record.get("recorded_at"):  # stamped already (its build None where the commit lacked a file of it)
            continue
        origin = history.get(_key(record))
        if origin is None or origin[0] != _times(record):
            lines.append(f"not in the file's history with these times: {record['algorithm']} N={record['seq_len']} "
                         f"d={record['head_dim']} {record.get('pass') or 'prefill'}")
            continue
        _, commit, created = origin
        record.setdefault("recorded_at", None)
        record["recorded_at"] = record["recorded_at"] or created
        if not record.get("build"):
            record["build"] = _build_at(commit, specs.canonical(record["algorithm"]), record.get("pass") or "prefill",
                                        record["dtype"], cache, repo)
        stamped += 1
    by_day: dict[str, int] = {}
    for record in raw["records"]:
        by_day[str(record.get("recorded_at"))[:10]] = by_day.get(str(record.get("recorded_at"))[:10], 0) + 1
    lines.append(f"{stamped} of {len(raw['records'])} records stamped; records by day: "
                 + ", ".join(f"{day} {n}" for day, n in sorted(by_day.items())))
    lines += stale_lines(raw["records"], kernels)
    if write:
        text = json.dumps(raw, indent=1, allow_nan=False)
        parse_results(text.encode(), str(path))  # what is written reads back
        write_atomically(path, text)
        lines.append(f"wrote {path}")
    return lines


def stale_lines(records: list[dict], kernels: Path = source.KERNEL_DIR) -> list[str]:
    """Per kernel and pass of ours: how many records are this copy's code, how many an earlier version's (what the
    page says beside them), and how many say nothing of their build."""
    counts: dict[tuple, list[int]] = {}
    for record in records:
        key = specs.canonical(record["algorithm"])
        what = (record.get("pass") or "prefill", record["dtype"])
        if not specs.source_files(key, *what):
            continue
        now = source.record_build(key, *what, root=kernels)
        row = counts.setdefault((key, *what), [0, 0, 0])
        row[0 if record.get("build") == now else 1 if record.get("build") else 2] += 1
    return [f"  {key} {pass_} {dtype}: {this} this copy's code, {earlier} an earlier version's, {unknown} unknown"
            for (key, pass_, dtype), (this, earlier, unknown) in sorted(counts.items())]


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
