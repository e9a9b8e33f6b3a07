"""The flash kernels' own source, cut into the phases the animation shows (no torch, no Triton).

The kernels mark each phase with a comment line that starts with a fixed prefix (`# -- compute qk`, …; a traced
kernel's spec lists them, kernels/specs.py); this module reads the kernel file at run time and finds those lines, so
the source beside the animation is always the code that ran. A phase runs from its comment line down to the line
before the next phase comment, the next comment or loop at its own depth, an instrumentation hook (HOOKS), or the
end of its block.
A missing phase comment is an error (tests/test_picture.py keeps it that way).
"""
from __future__ import annotations

import functools
import hashlib
import io
import tokenize
from pathlib import Path

from costmodel import IO_TENSORS
from kernels import specs

KERNEL_DIR = Path(__file__).resolve().parent
# Lines that are instrumentation, not the algorithm (the trace, the SM timeline, Proton's scopes): they end a phase.
HOOKS = ("if TRACE", "if RECORD_SM", "if PROFILE", "_enter(", "_exit(", "_record_step(")


def _traced(order: str) -> specs.Trace:
    keys = tuple(spec.key for spec in specs.with_facet("trace"))
    if order not in keys:
        raise ValueError(f"order must be one of {keys}, got {order!r}")
    return specs.spec(order).trace


PHASE_TITLES = {
    "load_q": "load the Q block", "load_k": "load the K tile", "load_v": "load the V tile",
    "load_kv": "load the K and V tiles", "qk": "S = QKᵀ", "softmax": "new max m, α, P = exp(S − m), l",
    "pv": "rescale O, O += P·V", "write": "write to HBM",
}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _ends_phase(line: str, indent: int, prefixes: tuple[str, ...]) -> bool:
    text = line.strip()
    if not text:
        return False
    return (_indent(line) < indent or text.startswith(prefixes) or text.startswith(HOOKS)
            or (_indent(line) == indent and text.startswith(("#", "for "))))


def kernel_source(order: str, text: str | None = None) -> dict:
    """The kernel of a loop order (a traced spec: "fa2", kernels/fa2.py; "fa1", kernels/fa1.py) as plain data:
    "path", "lines" (the file's lines) and "phases": {name: [first, last]} 1-based inclusive line numbers
    of each phase found, in the order they run. `text` replaces the file's text (tests).
    Raises ValueError naming the missing comment when a required phase comment is gone."""
    trace = _traced(order)
    filename, phases = trace.source, trace.phases
    path = KERNEL_DIR / filename
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    prefixes = tuple(prefix for _, prefix, _ in phases)
    spans: dict[str, list[int]] = {}
    for name, prefix, required in phases:
        starts = [i for i, line in enumerate(lines) if line.strip().startswith(prefix)]
        if not starts:
            if required:
                raise ValueError(f"{filename} has no line starting with {prefix!r}: the source view is anchored "
                                 f"on the kernel's phase comments")
            continue
        start = starts[0]
        indent = _indent(lines[start])
        end = start + 1
        while end < len(lines) and not _ends_phase(lines[end], indent, prefixes):
            end += 1
        while end - 1 > start and not lines[end - 1].strip():
            end -= 1  # no trailing blank lines
        spans[name] = [start + 1, end]
    return {"order": order, "path": f"kernels/{filename}", "lines": lines, "phases": spans}


def step_phases(order: str, loads, stores, phases: dict[str, list[int]]) -> list[list[str]]:
    """The phases each step of a trace ran, in source order, from what the step loaded and stored
    (a trace's `loads` / `stores`: (T, len(IO_TENSORS), 2) row ranges)."""
    q, k, o = IO_TENSORS.index("Q"), IO_TENSORS.index("K"), IO_TENSORS.index("O")
    kv_outer = _traced(order).kv_outer  # K/V tile outer (FA1 order): O, m, l are written back every step
    result = []
    for load, store in zip(loads, stores):
        moved = {"load_q": load[q][1] > load[q][0], "load_k": load[k][1] > load[k][0],
                 "load_kv": load[k][1] > load[k][0], "write": store[o][1] > store[o][0] or kv_outer}
        result.append([name for name in phases if moved.get(name, True)])
    return result


# -- a kernel's build: what a record was measured with ------------------------------------------------------------

BUILD_CHARS = 12  # hex digits of a build stamp
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_STATEMENT_START = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def code_tokens(text: str) -> list[str]:
    """A Python file's code as tokens, without what does not run: comments, blank lines, and statements that are
    only a string (docstrings). Each f-string is one token, its text as written, whatever the Python version
    (3.12 tokenizes f-strings into parts: the bench's GPU machine and the app's may differ)."""
    lines = text.splitlines(keepends=True)

    def between(start: tuple[int, int], end: tuple[int, int]) -> str:
        (r0, c0), (r1, c1) = start, end
        if r0 == r1:
            return lines[r0 - 1][c0:c1]
        return lines[r0 - 1][c0:] + "".join(lines[r0:r1 - 1]) + lines[r1 - 1][:c1]

    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    raw: list[tuple[int, str]] = []
    depth, opened = 0, (0, 0)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if fstring_start is not None and tok.type == fstring_start:
            if depth == 0:
                opened = tok.start
            depth += 1
            continue
        if fstring_end is not None and tok.type == fstring_end:
            depth -= 1
            if depth == 0:
                raw.append((tokenize.STRING, between(opened, tok.end)))
            continue
        if depth or tok.type in _SKIPPED:
            continue
        raw.append((tok.type, tok.string if tok.type not in _STATEMENT_START else tokenize.tok_name[tok.type]))
    kept: list[str] = []
    dropped = False
    for i, (kind, string) in enumerate(raw):
        if kind == tokenize.NEWLINE and dropped:  # the docstring's own line end
            dropped = False
            continue
        dropped = (kind == tokenize.STRING and (i == 0 or raw[i - 1][0] in _STATEMENT_START)
                   and (i + 1 == len(raw) or raw[i + 1][0] == tokenize.NEWLINE))
        if not dropped:
            kept.append(string)
    return kept


def build_stamp(files: tuple[str, ...], root: Path = KERNEL_DIR) -> str:
    """The build of a kernel: a digest of the code of its files in kernels/ (code_tokens: a comment or docstring
    edited leaves it as it was; any change to what runs, its shipped configurations included, changes it). Each
    file's digest is kept while its size and modification time stay (tokenizing fa3.py takes ~30 ms: a live page
    stamps every record it measures)."""
    digest = hashlib.sha256()
    for name in files:
        path = Path(root) / name
        stat = path.stat()
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(_file_digest(str(path), stat.st_size, stat.st_mtime_ns))
        digest.update(b"\0")
    return digest.hexdigest()[:BUILD_CHARS]


@functools.lru_cache(maxsize=256)
def _file_digest(path: str, size: int, mtime_ns: int) -> bytes:
    """The digest of one file's code tokens (size and mtime_ns: the key that sees an edit)."""
    return hashlib.sha256("\x1f".join(code_tokens(Path(path).read_text(encoding="utf-8"))).encode()).digest()


def record_build(algorithm: str, pass_: str = "prefill", dtype: str = "", root: Path = KERNEL_DIR) -> str | None:
    """The build stamp of our kernel that computes this algorithm's records of this pass and dtype, as the files in
    `root` are now; None for a peer's (its version is the device facts' torch, or its package's)."""
    files = specs.source_files(algorithm, pass_, dtype)
    return build_stamp(files, root) if files else None


# -- which code an entry of a results file measured: its records and its other sections ----------------------------

# section -> an entry's (spec key, pass, dtype) as specs.source_files takes them, or None where it is not ours (a
# timeline says no dtype: its kernel's files are the same for every 16-bit one)
_MEASURED = {
    "records": lambda e: (e["algorithm"], e.get("pass") or "prefill", e["dtype"]),
    "timelines": lambda e: (specs.SM_TIMELINE_KERNEL, "prefill", e.get("dtype") or ""),
    "phases": lambda e: (e["kernel"], "prefill", e["dtype"]),
    "ring": lambda e: (e["kernel"], specs.RING, e["dtype"]) if e["impl"] == "ours" else None,
}
SECTIONS = tuple(_MEASURED)


def measured_with(section: str, entry: dict) -> tuple[str, str, str] | None:
    """The (spec key, pass, dtype) whose files an entry of a results file's section measured (record_build's and the
    page's build_now's arguments): a record's algorithm, pass and dtype; an SM timeline's kernel
    (specs.SM_TIMELINE_KERNEL); a phase recording's kernel (bench/phases.py); a ring run of ours, its kernel under
    kernels/ring.py (specs.RING). None where it measured no code of ours: a peer's record, PyTorch's
    context_parallel."""
    what = _MEASURED[section](entry)
    if what is None:
        return None
    key = specs.canonical(what[0])
    return (key, *what[1:]) if key in specs.SPECS and specs.source_files(key, *what[1:]) else None


def entry_build(section: str, entry: dict, root: Path = KERNEL_DIR) -> str | None:
    """The build stamp an entry of this section carries, as the files in `root` are now (None: no code of ours)."""
    what = measured_with(section, entry)
    return record_build(*what, root=root) if what else None
