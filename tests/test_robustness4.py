"""Robustness, round 4 (issue 44): a bench that keeps what it measured and never spoils a results file, uploads
that cannot slow the page or crash a scene, the library's softmax scale and launch lock, choose_kernel, the tiling
legend at 4K/8K, and how often one viewer may ask the interpreter for new inputs. (The browser's items, the
navigation buttons, the animation while it plays and tiny windows, are in tests/test_browser_robust.py.)"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import cli, results
from bench.measure import Setting, make_record
from tests.support_app import uploaded_recording

ROOT = Path(__file__).resolve().parents[1]
FACTS = {**json.loads(uploaded_recording())["device"], "matmul_tflops": 900.0, "l2_gbps": 9000.0,
         "sm_clock_mhz": 1980.0}  # as a GPU measures them at the end of a sweep


# -- 2, 3: the bench writes its file whole or not at all, checks before measuring, keeps what it measured --------

def _record(setting: Setting, rep_ms: float = 0) -> object:
    ms = setting.shape.seq_len / 1024 * (3 if setting.algorithm == "naive" else 1)  # as tests/support_app's file
    return make_record(setting, "ok", "Test GPU", "cuda", [ms] * 3, peak=setting.shape.seq_len * 1000)


@pytest.fixture
def fake_gpu(monkeypatch):
    """bench.cli as on a GPU, with made-up measurements; the settings measured, in order."""
    measured = []

    def measure(setting, rep_ms):
        measured.append(setting)
        return _record(setting)
    monkeypatch.setattr(cli, "INTERPRET", False)
    monkeypatch.setattr(cli, "measure", measure)
    monkeypatch.setattr(cli, "device_facts", lambda measure_bandwidth=False: dict(FACTS))
    monkeypatch.setattr(cli.torch.cuda, "empty_cache", lambda: None)
    return measured


SWEEP = ["--seq-lens", "1024,2048", "--algorithms", "fa2,naive", "--head-dims", "128", "--causal", "false"]


def test_the_fake_gpu_sweep_writes_a_file_the_app_reads(fake_gpu, tmp_path):
    out = tmp_path / "run.json"
    assert cli.main([*SWEEP, "--out", str(out)]) == 0
    assert len(results.load_results_path(out).records) == 4 == len(fake_gpu)


def test_a_peer_that_is_not_installed_is_skipped_once_not_recorded(fake_gpu, tmp_path, monkeypatch, capsys):
    """The authors' FA-4 (a peer installed apart: requirements-peers.txt) is in the bench's default algorithms; where
    it is not installed the sweep says so once and records nothing for it, the others as before."""
    from kernels import peers
    monkeypatch.setattr(peers, "_fa4_func", lambda: (None, "flash-attn-4 is not installed (pip install -r "
                                                            "requirements-peers.txt)"))
    out = tmp_path / "run.json"
    sweep = ["--seq-lens", "1024,2048", "--algorithms", "fa2,fa4_authors", "--head-dims", "128", "--causal", "false"]
    assert cli.main([*sweep, "--out", str(out)]) == 0
    assert [s.algorithm for s in fake_gpu] == ["fa2", "fa2"]
    assert {r["algorithm"] for r in results.load_results_path(out).records} == {"fa2"}
    said = capsys.readouterr().err
    assert said.count("skipping fa4_authors: flash-attn-4 is not installed") == 1
    monkeypatch.setattr(peers, "_fa4_func", lambda: (object(), None))  # installed: it is measured (here, faked)
    monkeypatch.setattr(peers, "fa4_unavailable_for", lambda shape, device=None: None)
    fake_gpu.clear()
    assert cli.main([*sweep, "--out", str(tmp_path / "run2.json")]) == 0
    assert sorted(s.algorithm for s in fake_gpu) == ["fa2", "fa2", "fa4_authors", "fa4_authors"]


def test_a_write_that_fails_part_way_leaves_the_earlier_file_as_it_was(tmp_path):
    """A full disk, simulated by the kernel: the file-size limit (RLIMIT_FSIZE) stops the write after 2,000 bytes
    with EFBIG, in a process of its own. Before: the file was truncated and left as 2,000 bytes of invalid JSON."""
    out = tmp_path / "h200.json"
    out.write_bytes(uploaded_recording())
    before = out.read_bytes()
    script = textwrap.dedent(f"""
        import json, resource, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from bench import results
        doc = json.loads(open({str(out)!r}).read())
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG from write(), not a signal that kills the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, resource.RLIM_INFINITY))
        try:
            results.dump_results(__import__("pathlib").Path({str(out)!r}), doc["device"], doc["records"], [],
                                 "python -m bench " + "x" * 900, "today")
        except OSError as why:
            print("refused", why.errno)
        """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "FLASH_LIVE_BACKEND": "interpreter"})
    assert "refused" in run.stdout, run.stderr[-2000:]
    assert out.read_bytes() == before, "the earlier recording is untouched"
    results.load_results_path(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h200.json"], "no temporary file left behind"


@pytest.mark.parametrize("case", ["missing folder", "/dev/full", "a folder", "corrupt --merge-into", "--heads 5000",
                                  "--batch 70000", "--shapes 1x9000", "--seq-lens 2**25", "--merge-into alone"])
def test_what_would_fail_at_write_time_is_refused_before_measuring(fake_gpu, tmp_path, capsys, case):
    out = tmp_path / "run.json"
    extra = {"missing folder": ["--out", str(tmp_path / "nowhere" / "run.json")],
             "/dev/full": ["--out", "/dev/full"],
             "a folder": ["--out", str(tmp_path)],
             "corrupt --merge-into": ["--out", str(out), "--merge-into"],
             "--heads 5000": ["--out", str(out), "--heads", "5000"],
             "--batch 70000": ["--out", str(out), "--batch", "70000"],
             "--shapes 1x9000": ["--out", str(out), "--shapes", "1x9000"],
             "--seq-lens 2**25": ["--out", str(out), "--seq-lens", str(2**25)],
             "--merge-into alone": ["--merge-into"]}[case]
    if case == "corrupt --merge-into":
        out.write_text('{"schema": "flash-live-results", "records": [')
    if case == "/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with pytest.raises(SystemExit) as exit_:
        cli.main([*SWEEP, *extra])
    assert exit_.value.code == 2
    assert not fake_gpu, "nothing was measured"
    said = capsys.readouterr().err
    words = {"missing folder": "does not exist", "/dev/full": "not a regular file", "a folder": "is a folder",
             "corrupt --merge-into": "cannot be read", "--heads 5000": "heads = 5000",
             "--batch 70000": "batch = 70000", "--shapes 1x9000": "heads = 9000", "--seq-lens 2**25": "seq_len",
             "--merge-into alone": "needs --out"}[case]
    assert words in said, said


def test_ctrl_c_after_k_of_n_points_keeps_the_k(fake_gpu, tmp_path, monkeypatch):
    out = tmp_path / "run.json"
    real = cli.measure

    def interrupted(setting, rep_ms):
        if len(fake_gpu) == 3:
            raise KeyboardInterrupt
        return real(setting, rep_ms)
    monkeypatch.setattr(cli, "measure", interrupted)
    assert cli.main([*SWEEP, "--seq-lens", "1024,2048,4096", "--out", str(out)]) == 0
    loaded = results.load_results_path(out)
    assert len(loaded.records) == 3
    assert "interrupted: 3 of 6 points measured" in loaded.meta["command"]


def test_a_full_disk_at_write_time_keeps_the_file_and_the_measurements(fake_gpu, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run.json"
    out.write_bytes(uploaded_recording())
    before = out.read_bytes()
    rescue = tmp_path / "rescue"
    rescue.mkdir()
    real = results.write_atomically

    def full(path, text):
        if Path(path).parent == tmp_path:
            raise OSError(28, "No space left on device")
        real(path, text)
    monkeypatch.setattr(results, "write_atomically", full)
    monkeypatch.setattr(cli.tempfile, "gettempdir", lambda: str(rescue))
    assert cli.main([*SWEEP, "--out", str(out)]) == 1
    assert out.read_bytes() == before
    said = capsys.readouterr().err
    assert "No space left on device" in said and "unchanged" in said
    kept = list(rescue.iterdir())
    assert len(kept) == 1 and str(kept[0]) in said and len(results.load_results_path(kept[0]).records) == 4


def test_the_phase_recorder_child_on_a_full_disk_says_so_without_a_traceback():
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    run = subprocess.run([sys.executable, "-m", "bench", "--phases-only", "/dev/full"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "FLASH_LIVE_BACKEND": "interpreter"})
    assert run.returncode == 1
    assert "Traceback" not in run.stderr and "could not write the phase recordings" in run.stderr, run.stderr[-2000:]


# -- 6: a number too big for a float, and versions that are not whole numbers ---------------------------------

HUGE = 10**400  # valid JSON: 401 digits


def _doc(change) -> bytes:
    doc = json.loads(uploaded_recording())
    change(doc)
    return json.dumps(doc).encode()


def _phases(doc):
    doc["phases"] = [{"kernel": "fa2", "batch": 1, "heads": 4, "seq_len": 4096, "head_dim": 128, "causal": False,
                      "dtype": "bfloat16", "program_count": 4, "plain_ms": 1.0, "instrumented_launch_ms": 1.2,
                      "sm_clock_mhz": 1980.0, "overhead": 0.1, "profiled_output_identical": True,
                      "programs": [{"cta": 0, "sm": 0, "lanes": [{"warp": 0, "role": "warpgroup 0",
                                                                   "spans": [["qk", 0, 10], ["softmax", 10, 20]]}]}]}]


HUGE_FIELDS = {
    "time_ms": (lambda doc: doc["records"][0].update(time_ms=HUGE), "time_ms"),
    "batch": (lambda doc: doc["records"][0].update(batch=HUGE), "batch"),
    "bytes_moved": (lambda doc: doc["records"][0].update(bytes_moved=HUGE), "bytes_moved"),
    "sm_count": (lambda doc: doc["device"].update(sm_count=HUGE), "sm_count"),
    "copy_gbps": (lambda doc: doc["device"].update(copy_gbps=HUGE), "copy_gbps"),
    "timeline sm_count": (lambda doc: doc.update(timelines=[{
        "sm_count": HUGE, "seq_len": 1024, "heads": 16, "batch": 2, "head_dim": 128, "block_m": 128, "causal": False,
        "sm_id": [0], "t_start_ns": [0], "t_end_ns": [10], "q_block": [0], "bh": [0]}]), "sm_count"),
    "phase plain_ms": (lambda doc: (_phases(doc), doc["phases"][0].update(plain_ms=HUGE)), "plain_ms"),
    "phase span": (lambda doc: (_phases(doc), doc["phases"][0]["programs"][0]["lanes"][0]["spans"].append(
        ["pv", 20, HUGE])), "span"),
}


@pytest.mark.parametrize("case", list(HUGE_FIELDS))
def test_a_401_digit_number_is_refused_naming_its_field(case):
    change, field = HUGE_FIELDS[case]
    with pytest.raises(results.ResultsError) as why:
        results.parse_results(_doc(change), "upload")
    assert field in str(why.value)


def test_a_401_digit_optional_number_is_dropped_with_a_note():
    loaded = results.parse_results(_doc(lambda doc: doc["records"][0].update(dram_read_bytes=HUGE)), "upload")
    assert loaded.records[0]["dram_read_bytes"] is None and any("dram_read_bytes" in n for n in loaded.notes)


def test_a_401_digit_upload_says_which_field_and_the_page_falls_back_to_the_shipped_recording():
    from tests.support_app import assert_no_exception, badges, open_app, shown, upload
    app = upload(open_app(scene="headline"), _doc(HUGE_FIELDS["time_ms"][0]))
    assert_no_exception(app)
    errors = shown(" ".join(error.value for error in app.sidebar.get("error")))
    assert "That file was not used" in errors and "time_ms" in errors, errors
    assert "OverflowError" not in shown(" ".join(str(e.value) for e in app.get("error") + app.get("info")))
    assert "RECORDED on NVIDIA H200" in badges(app), "the page falls back to the shipped recording"


@pytest.mark.parametrize("version", [True, 2.0, 3.0, "3", None])
def test_a_schema_version_that_is_not_a_whole_number_is_refused(version):
    with pytest.raises(results.ResultsError, match="schema version"):
        results.parse_results(_doc(lambda doc: doc.update(schema_version=version)), "upload")


# -- 4, 5: a recording's phases: an interval sweep, worked out once per file; a lane without spans is refused ----

class Cycle(int):
    """A clock cycle that counts every comparison made with it (a step of the overlap's work, timing-free)."""
    count = 0
    budget = float("inf")

    def _counted(self, op, other):
        Cycle.count += 1
        if Cycle.count > Cycle.budget:
            raise AssertionError(f"more than {Cycle.budget:,} comparisons")
        return op(int(self), int(other))

    def __lt__(self, other):
        return self._counted(int.__lt__, other)

    def __le__(self, other):
        return self._counted(int.__le__, other)

    def __gt__(self, other):
        return self._counted(int.__gt__, other)

    def __ge__(self, other):
        return self._counted(int.__ge__, other)


def _program(spans_per_lane: int, lanes: int = 3, cycle=int) -> dict:
    """A producer and consumers that take turns: each consumer's qk, softmax, pv, wait, spans_per_lane spans."""
    out = [{"warp": 0, "role": "producer", "spans": [["load", cycle(0), cycle(10)]]}]
    for w in range(1, lanes):
        spans, t = [], w * 3
        for i in range(spans_per_lane):
            spans.append([("qk", "softmax", "pv", "wait")[i % 4], cycle(t), cycle(t + 7)])
            t += 5
        out.append({"warp": w * 4, "role": f"consumer {w - 1}", "spans": spans})
    return {"cta": 0, "sm": 0, "lanes": out}


def test_the_softmax_overlap_is_an_interval_sweep_not_every_pair():
    """20,000 spans a lane (the schema's limit): the old pairwise count made 2 comparisons per pair of spans,
    2 × 5,000 × 10,000 = 10⁸ here; the sweep, a sort and a bisection per span, stays under 40 per span."""
    import story
    n = 20_000
    Cycle.count, Cycle.budget = 0, 40 * 2 * n
    try:
        overlap = story.softmax_overlap(_program(n, cycle=Cycle))
    finally:
        Cycle.budget = float("inf")
    assert overlap == story.softmax_overlap(_program(n))  # the same number with plain ints
    assert 0.0 < overlap <= 1.0


@pytest.mark.parametrize("spans", [1, 2, 3, 7, 40])
def test_the_sweep_gives_what_every_pair_gives_where_the_gemms_do_not_overlap(spans):
    """The old pairwise sum, on a program whose other warpgroups' GEMMs never overlap each other (there the two
    agree; where they do overlap, the pairwise sum counted that time twice)."""
    import story
    program = _program(spans)
    lanes = [lane for lane in program["lanes"] if lane["role"] != "producer"]
    soft = [(a, b) for n, a, b in lanes[0]["spans"] if n == "softmax"]
    busy = [(a, b) for lane in lanes[1:] for n, a, b in lane["spans"] if n in story.GEMM_PHASES]
    total = sum(b - a for a, b in soft)
    pairwise = sum(max(0, min(b, d) - max(a, c)) for a, b in soft for c, d in busy)
    assert story.softmax_overlap(program) == (min(1.0, pairwise / total) if total else None)


def _with_phases(program: dict) -> bytes:
    def change(doc):
        _phases(doc)
        doc["phases"][0].update(kernel="fa3", programs=[program])
    return _doc(change)


def test_a_recording_is_worked_out_once_per_upload_not_on_every_rerun(monkeypatch):
    import story
    from page import stage
    from tests.support_app import assert_no_exception, badges, open_app, upload
    calls = []
    real = story.recorded_programs
    monkeypatch.setattr(story, "recorded_programs", lambda phases: calls.append(len(phases)) or real(phases))
    stage.UPLOADS.clear()
    app = open_app(scene="inside")  # the shipped recording, read once per process
    calls.clear()
    app = upload(app, _with_phases(_program(3000, lanes=16)))
    assert_no_exception(app)
    assert app.get("plotly_chart") and "RECORDED on Test GPU" in badges(app), "the upload's phases are drawn"
    for _ in range(3):
        app.run()
        assert_no_exception(app)
    assert calls == [1], "once, when the upload was read"


def test_a_lane_without_spans_is_refused_where_the_file_is_read():
    program = _program(4)
    program["lanes"][1]["spans"] = []
    with pytest.raises(results.ResultsError, match="lane 1: spans must be a list of 1 .* it is empty"):
        results.parse_results(_with_phases(program), "upload")


def test_an_upload_with_an_empty_lane_says_so_and_the_inside_scene_runs():
    from tests.support_app import assert_no_exception, badges, open_app, shown, upload
    program = _program(4)
    for lane in program["lanes"]:
        lane["spans"] = []
    app = upload(open_app(scene="inside"), _with_phases(program))
    assert_no_exception(app)
    assert "it is empty" in shown(" ".join(error.value for error in app.sidebar.get("error")))
    assert "RECORDED on NVIDIA H200" in badges(app)


# -- 9: a softmax scale fp32 cannot carry ----------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1e-50, 1e-39, 3.4e38, 1e39, 10**400, -(10**400), float("nan")],
                         ids=["1e-50", "1e-39", "3.4e38", "1e39", "10**400", "-10**400", "nan"])
@pytest.mark.parametrize("name", ["fa2", "fa1", "naive", "auto"])
def test_a_scale_positive_in_python_but_not_in_fp32_is_refused_naming_sm_scale(name, scale):
    import torch
    from kernels import flash_attention, naive_attention
    from kernels.fa1 import flash_attention_v1
    call = {"fa2": lambda *a, **k: flash_attention(*a, kernel="fa2", **k), "fa1": flash_attention_v1,
            "naive": naive_attention, "auto": flash_attention}[name]
    q = torch.randn(1, 1, 37, 16)
    with pytest.raises(ValueError, match="sm_scale must be a positive"):
        call(q, q, q, causal=True, sm_scale=scale)


@pytest.mark.parametrize("scale", [1.2e-38, 1e-30, 1e-3, 1e3, 1e30])
@pytest.mark.parametrize("name", ["fa2", "fa1", "naive"])
def test_a_scale_fp32_carries_gives_the_float64_answer(name, scale):
    import torch
    from kernels import naive_attention
    from kernels.fa1 import flash_attention_v1
    from kernels.fa2 import flash_attention
    from kernels.reference import reference_attention, relative_error
    call = {"fa2": flash_attention, "fa1": flash_attention_v1, "naive": naive_attention}[name]
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 1, 37, 16, generator=gen) * (1e-33 if scale >= 1e30 else 1) for _ in range(3))
    v = torch.randn(1, 1, 37, 16, generator=gen)
    out = call(q, k, v, causal=True, sm_scale=scale)
    assert relative_error(out, reference_attention(q, k, v, True, scale)[0]) < 1e-4


# -- 10: a fork while another thread is inside a kernel launch -------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_while_another_thread_holds_the_launch_lock_is_not_blocked():
    import threading
    import time
    from kernels import runtime
    if not runtime.INTERPRET:
        pytest.skip("the lock serializes the interpreter only; on the GPU it is not taken")
    holding, release = threading.Event(), threading.Event()

    def launch():
        with runtime.kernel_launch_lock():
            holding.set()
            release.wait(60)
    other = threading.Thread(target=launch)
    other.start()
    assert holding.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # the child: one launch of its own, then out (never back into pytest)
            code = 1
            try:
                with runtime.kernel_launch_lock():
                    code = 0 if runtime.interpreter_queue() == 1 else 2
            finally:
                os._exit(code)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child waited 20 s for a launch lock no thread of it holds")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        other.join(10)


# -- 11: choose_kernel names only a kernel flash_attention then accepts --------------------------------------------

def _choose_cases():
    import numpy as np
    import torch
    return {
        "None": (None, "auto", TypeError), "ndarray": (np.zeros((1, 1, 8, 16), np.float32), "auto", TypeError),
        "torch.Size": (torch.Size([1, 1, 8, 16]), "fa2", TypeError),
        "nested": (torch.nested.nested_tensor([torch.randn(8, 16)]), "auto", TypeError),
        "sparse": (torch.randn(1, 1, 8, 16).to_sparse(), "auto", TypeError),
        "head_dim 7": (torch.randn(1, 1, 8, 7), "auto", ValueError),
        "requires grad": (torch.randn(1, 1, 8, 16, requires_grad=True), "fa1", ValueError),  # fa1: no backward
        "seq_len 0": (torch.randn(1, 1, 0, 16), "fa2", ValueError),
        "float64": (torch.randn(1, 1, 8, 16, dtype=torch.float64), "auto", TypeError),
        "kernel as a list": (torch.randn(1, 1, 8, 16), ["fa2"], ValueError),
    }


@pytest.mark.parametrize("case", ["None", "ndarray", "torch.Size", "nested", "sparse", "head_dim 7", "requires grad",
                                  "seq_len 0", "float64", "kernel as a list"])
def test_choose_kernel_refuses_what_flash_attention_refuses_with_the_same_error(case):
    import warnings
    from kernels import choose_kernel, flash_attention
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's nested tensors are a prototype
        q, kernel, error = _choose_cases()[case]
    with pytest.raises(error) as chosen:
        choose_kernel(q, kernel)
    with pytest.raises(error) as ran:
        flash_attention(q, q, q, kernel=kernel)
    assert str(chosen.value) == str(ran.value)


def test_choose_kernel_refuses_a_kernel_asked_for_by_name_that_cannot_run_here():
    import torch
    from kernels import choose_kernel, flash_attention
    from kernels.fa3 import v3_unavailable_reason
    q = torch.randn(1, 1, 8, 64)  # float32: the FA-3 style kernel takes 16-bit inputs only
    with pytest.raises(RuntimeError, match="kernel='fa3' cannot run") as why:
        choose_kernel(q, "fa3")
    assert v3_unavailable_reason(q.device, q.dtype, 64) in str(why.value)
    with pytest.raises((TypeError, RuntimeError)):
        flash_attention(q, q, q, kernel="fa3")


@pytest.mark.parametrize("kernel", ["auto", "fa2", "fa1"])
def test_the_kernel_choose_kernel_names_runs_the_inputs(kernel):
    import torch
    from kernels import choose_kernel, flash_attention
    q = torch.randn(1, 2, 20, 32)
    chosen, why = choose_kernel(q, kernel)
    assert why and torch.isfinite(flash_attention(q, q, q, kernel=chosen)).all()


# -- 11: the tiling legend's swatches scale with its text (4K, 8K) -----------------------------------------------

@pytest.mark.parametrize("factor", [2 / 3, 1, 2, 4], ids=["720p", "1080p", "4K", "8K"])
def test_the_tile_legend_swatches_scale_with_the_text_around_them(factor):
    """What chromium draws: a span's font-size in px stays as written, in em it follows the annotation's font (checked
    in chromium: 34.08 px at 1080p, 68.16 at 4K, 136.3 at 8K beside 24, 48, 96 px text)."""
    import re
    import viz
    from kernels.trace import trace_flash
    from viz.theme import scaled_figure
    fig = scaled_figure(viz.tiling_figure(trace_flash(64, 16, 16, 32, True, dtype="float32").to_dict()), factor)
    legend = next(a for a in fig.layout.annotations if "■" in a.text)
    sizes = re.findall(r"font-size:([\d.]+)(px|em)", legend.text)
    assert sizes, legend.text
    swatch_px = [float(size) * (legend.font.size if unit == "em" else 1) for size, unit in sizes]
    assert swatch_px == [pytest.approx(34 / 24 * legend.font.size, rel=0.01)] * len(sizes), (swatch_px,
                                                                                           legend.font.size)


# -- 11: how often one viewer may ask the interpreter for new inputs ------------------------------------------------

def test_the_allowance_gives_a_burst_then_one_trace_per_interval_per_viewer():
    from page.pictures import TraceAllowance
    now = [0.0]
    allowance = TraceAllowance(at_once=3, every_s=10.0, clock=lambda: now[0])
    assert [allowance.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert allowance.take("a") == pytest.approx(10.0)
    assert allowance.take("b") == 0.0, "another viewer has their own"
    now[0] = 4.0
    assert allowance.take("a") == pytest.approx(6.0)
    now[0] = 10.0
    assert allowance.take("a") == 0.0 and allowance.take("a") > 0
    now[0] = 1000.0
    assert [allowance.take("a") for _ in range(4)][-1] > 0, "idle time refills the burst, not more"


def test_a_viewer_asking_for_seed_after_seed_is_refused_with_a_note_and_others_are_not(monkeypatch):
    from kernels import runtime
    from page import pictures
    from tests.support_app import SMALL_ANIMATION, assert_no_exception, open_app
    if not runtime.INTERPRET:
        pytest.skip("the GPU path runs traces in milliseconds: no allowance")
    monkeypatch.setattr(pictures, "TRACE_ALLOWANCE", pictures.TraceAllowance(at_once=2, every_s=3600.0))
    pictures.TRACES.clear()
    pictures.FIGURES.clear()
    app = open_app(scene="tiling", seed="101", **SMALL_ANIMATION)
    assert_no_exception(app)
    assert app.get("plotly_chart") and not app.error
    app.query_params["seed"] = "102"
    app.run()
    assert app.get("plotly_chart") and not app.error, "two new traces: within the allowance"
    app.query_params["seed"] = "103"
    app.run()
    assert_no_exception(app)
    refusal = " ".join(error.value for error in app.error)
    assert "new animations in a short time" in refusal and "can start in" in refusal, refusal
    app.query_params["seed"] = "101"
    app.run()
    assert app.get("plotly_chart") and not app.error, "a trace already made shows at once"
    other = open_app(scene="tiling", seed="103", **SMALL_ANIMATION)
    assert other.get("plotly_chart") and not other.error, "another viewer is not held back"
