"""The app on the live path (a CUDA GPU), driven by AppTest: every scene, the naive kernel's
out-of-memory wall as a result on the page, and two sessions measuring at once. Skipped without a GPU."""
import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app import SCENE_KEYS as SCENES  # noqa: E402

pytestmark = pytest.mark.gpu
APP = str(Path(__file__).resolve().parents[1] / "app.py")


def open_live(**params: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=600)
    app.query_params.update({"source": "live", **params})
    return app.run()


def page_text(app: AppTest) -> str:
    kinds = ("markdown", "caption", "info", "warning", "error", "metric")
    return " ".join(str(getattr(e, "value", "")) + " " + str(getattr(e, "label", "")) for kind in kinds
                    for e in app.get(kind))


@pytest.mark.parametrize("scene", SCENES)
def test_every_scene_runs_live(scene):
    app = open_live(scene=scene, seq_len="4096", heads="8", trace_len="256")
    assert not app.exception, [e.value for e in app.exception]
    assert "LIVE" in page_text(app).upper()


def test_naive_out_of_memory_is_shown_and_flash_still_runs():
    # batch 2 × 16 heads: S + P of the naive kernel need 192 GiB at 32K, more than the H200 has
    app = open_live(scene="seqlen", seq_len="32768", batch="2", heads="16", head_dim="128")
    assert not app.exception, [e.value for e in app.exception]
    charts = " ".join(chart.proto.spec for chart in app.get("plotly_chart")).lower()
    # the wall on the memory chart, from the live record: our library refuses S and P larger than the GPU before any
    # launch, and the page says refused (story.wall_text), not out of memory
    assert "refused before any launch at n = 32k" in charts
    assert "ms" in page_text(app) or app.get("table"), "flash at 32K still has a time"


def test_two_sessions_measure_at_once():
    apps = {}

    def session(heads):
        apps[heads] = open_live(scene="headline", seq_len="8192", heads=heads)
    threads = [threading.Thread(target=session, args=(h,)) for h in ("8", "32")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for app in apps.values():
        assert not app.exception, [e.value for e in app.exception]
    assert [m.value for m in apps["8"].metric] != [m.value for m in apps["32"].metric]


def test_decode_live_quotes_the_shipped_recording_with_its_batches():
    """Decode is not timed on each visit: a live page quotes the shipped recording's decode records, and offers the
    batches that recording has (a live page once offered none: its batches came from no records)."""
    from bench.results import load_results
    import story
    batches = story.decode_batches(load_results("h200.json").records)
    assert 8 in batches
    app = open_live(scene="decode", kv_len="131072", decode_batch="8")
    assert not app.exception, [e.value for e in app.exception]
    control = app.segmented_control(key="control_decode_batch")
    assert control.label == "Sequences at once" and {str(b) for b in batches} <= set(control.options)
    titles = [(json.loads(chart.proto.spec)["layout"].get("title") or {}).get("text", "")
              for chart in app.get("plotly_chart")]  # parsed: the spec may escape "×"
    assert any(t.startswith("batch 8 × 128K tokens") for t in titles), titles
    assert any("the whole job is to read the cache's K and V once" in c.value for c in app.caption)


def test_backward_speed_view_times_its_bars_live():
    """The backward's TFLOPS view on a live page times every bar now at the slider's N (story.backward.live_fits):
    our backwards, cuDNN's and SDPA FA-2's, and our forwards beside them, labelled live; past the limit it quotes the
    shipped recording and says why."""
    import story
    app = open_live(scene="backward", part="speed", seq_len="4096", batch="1", heads="8", head_dim="64")
    assert not app.exception, [e.value for e in app.exception]
    (chart,) = app.get("plotly_chart")
    bars = json.loads(chart.proto.spec)["data"][0]
    assert len(bars["x"]) >= 4 and all(x > 0 for x in bars["x"])  # fa2's, cuDNN's and FA-2's, and fa2's forward
    assert "flash (ours), backward" in bars["y"] and "flash (ours), forward" in bars["y"]
    text = page_text(app)
    assert "measured live on" in text and "× cuDNN's" in text
    app = open_live(scene="backward", part="speed", seq_len="131072")
    assert not app.exception, [e.value for e in app.exception]
    assert "recorded on NVIDIA H200" in page_text(app) and "timed live up to" in page_text(app)
    assert not story.backward.live_fits(story.backward.LIVE_LIMIT.at(seq_len=131072, kv_len=131072))
