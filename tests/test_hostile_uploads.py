"""Issue 15's hostile uploads, through the app's own uploader (AppTest): every one gets a clear message, the page
stays usable (sidebar, uploader, scene buttons), and text from the file is shown as text, never as markup."""
import json

import pytest

from app import SCENE_KEYS as SCENES
from costmodel import Shape
from bench.measure import Setting, make_record
from fmt import markdown_text
from tests.support_app import assert_no_exception, badges, open_app, plotly_specs, shown, upload, \
    uploaded_recording

MARKUP = "[click me](https://evil.example) <b>bold</b> <a href='https://evil.example'>x</a>"


def recording(change=None) -> bytes:
    doc = json.loads(uploaded_recording())
    if change:
        change(doc)
    return json.dumps(doc).encode()


def _set(path, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _timeline(**fields):
    timeline = {"sm_count": 4, "seq_len": 1024, "heads": 16, "batch": 2, "head_dim": 128, "block_m": 128,
                "causal": False, "sm_id": [0, 1], "t_start_ns": [0, 5], "t_end_ns": [10, 12], "q_block": [0, 1],
                "bh": [0, 0]}
    return lambda doc: doc.update(timelines=[{**timeline, **fields}])


HOSTILE = {
    "nested 10 000 deep": (b'{"schema": "flash-live-results", "schema_version": 1, "x": ' + b"[" * 10_000
                           + b"]" * 10_000 + b"}", "nested too deeply"),
    "sm_count abc": (recording(_set(["device", "sm_count"], "abc")), "sm_count"),
    "hbm_bytes lots": (recording(_set(["device", "hbm_bytes"], "lots")), "hbm_bytes"),
    "timeline sm_count 0": (recording(_timeline(sm_count=0)), "sm_count = 0"),
    "timeline sm_count abc": (recording(_timeline(sm_count="abc")), "sm_count"),
    "timeline t_end 10**30": (recording(_timeline(t_end_ns=[10, 10**30])), "t_end_ns"),
    "negative time": (recording(_set(["records", 0, "time_ms"], -7.23)), "time_ms = -7.23"),
    "negative tflops": (recording(_set(["records", 0, "tflops"], -1.0)), "tflops"),
    "1e300 ms": (recording(_set(["records", 0, "time_ms"], 1e300)), "time_ms"),
    "flash 1e-300 ms": (recording(_set(["records", 0, "time_ms"], 1e-300)), "time_ms"),
    "flash 0 ms ok": (recording(_set(["records", 0, "time_ms"], 0)), "time_ms = 0"),
    "size 10**30": (recording(_set(["records", 0, "peak_extra_bytes"], 10**30)), "peak_extra_bytes"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_upload_is_refused_and_every_scene_still_works(case):
    data, words = HOSTILE[case]
    app = upload(open_app(scene="headline"), data)
    assert_no_exception(app)
    errors = shown(" ".join(error.value for error in app.sidebar.get("error")))
    assert "That file was not used" in errors and words in errors
    assert app.sidebar.get("file_uploader"), "the uploader, the way out, is still there"
    assert "RECORDED on NVIDIA H200" in badges(app), "the page falls back to the shipped recording"
    for _ in SCENES[1:]:  # Next through every scene, the timeline (scene 8) included
        next(button for button in app.button if button.label == "Next ▶").click().run()
        assert_no_exception(app)
        assert app.sidebar.get("file_uploader")
    assert app.query_params["scene"] == SCENES[-1]


def test_file_text_is_shown_as_text_not_markup():
    def hostile_text(doc):
        doc["device"]["name"] = MARKUP
        doc["meta"]["created"] = "[x](https://evil.example)"
        doc["records"].append({**doc["records"][0], "algorithm": "naive", "seq_len": 8192, "status": "error",
                               "time_ms": None, "time_ms_p20": None, "time_ms_p80": None, "tflops": None,
                               "gbps": None, "message": MARKUP})
        doc["records"].append(make_record(Setting("fa2", Shape(seq_len=8192, batch=2, heads=16, head_dim=128)), "ok", "Test GPU", "cuda", [64.0] * 3,
                                          peak=8192 * 1000).to_dict())  # times consistent with N = 8192
    data = recording(hostile_text)
    seen_markdown, seen_figures = [], []
    for scene in SCENES:
        app = upload(open_app(scene=scene, seq_len="8192", trace_len="64", block_m="16", block_n="32"), data)
        assert_no_exception(app)
        texts = [str(element.value) for kind in ("markdown", "caption", "info", "warning", "error")
                 for element in app.get(kind)] + [metric.label for metric in app.metric]
        texts += [str(metric.proto.help) for metric in app.metric]
        seen_markdown += [text for text in texts if "click me" in text]
        seen_figures += [json.dumps(spec) for spec in plotly_specs(app) if "click me" in json.dumps(spec)]
    assert seen_markdown and seen_figures, "the GPU name and the message do show up, as text"
    for text in seen_markdown:  # every bracket, parenthesis and angle of the file's text escaped, none doubled
        assert markdown_text(MARKUP) in text and MARKUP not in text, text
    assert any(MARKUP in shown(text) for text in seen_markdown), "shown exactly as written"
    for spec in seen_figures:  # plotly draws <b> and <a href>: only entities may reach it
        assert "<b>bold" not in spec and "<a href=" not in spec and "&lt;b" in spec


def test_bad_counters_are_ignored_with_a_note_and_the_file_loads():
    app = upload(open_app(scene="compare"), recording(_set(["records", 0, "dram_read_bytes"], -5)))
    assert_no_exception(app)
    assert not app.sidebar.get("error")
    assert "RECORDED on Test GPU" in badges(app)
    info = shown(" ".join(element.value for element in app.info))
    assert "values in the results file were ignored" in info and "dram_read_bytes = -5" in info
    assert "cost model" in info


def test_asking_for_live_without_a_gpu_says_so():
    import kernels
    if kernels.backend() == "cuda":
        pytest.skip("a GPU is here: live is what the link gets")
    app = open_app(scene="headline", source="live")
    assert_no_exception(app)
    assert "live" in app.warning[0].value and "needs a CUDA GPU" in app.warning[0].value
    assert app.query_params["source"] == "recorded", "the link says what is shown"
    app.run()
    assert not app.warning, "said once, for the link that asked"


def test_a_viewer_waiting_for_the_interpreter_is_told(monkeypatch):
    """Another viewer's kernels hold the interpreter: this viewer's page says it is queued, then animates."""
    import threading
    from kernels import runtime
    if not runtime.INTERPRET:
        pytest.skip("the GPU path does not queue on the interpreter")
    from streamlit.delta_generator import DeltaGenerator
    shown_infos = []
    real_info = DeltaGenerator.info

    def recorded_info(self, body, *args, **kwargs):  # every st.info, placeholders' included
        shown_infos.append(body)
        return real_info(self, body, *args, **kwargs)
    monkeypatch.setattr(DeltaGenerator, "info", recorded_info)
    holding, release = threading.Event(), threading.Event()

    def other_viewer():
        with runtime.kernel_launch_lock():
            holding.set()
            release.wait(60)
    other = threading.Thread(target=other_viewer)
    other.start()
    holding.wait(10)
    threading.Timer(3.0, release.set).start()  # the other viewer's run ends while this one waits
    try:
        app = open_app(scene="tiling", trace_len="64", block_m="16", block_n="16", seed="4242")
    finally:
        release.set()
        other.join(10)
    assert_no_exception(app)
    assert any("Queued behind 1 other viewer's kernel run:" in text for text in shown_infos), shown_infos
    assert app.get("plotly_chart"), "the animation comes once the queue is through"
    assert not any("Queued" in element.value for element in app.info), "the note goes when the wait is over"
