"""Shared helpers of the AppTest modules: open the app on the CPU path, read what it shows, upload a file."""
import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bench import results
from costmodel import Shape
from bench.measure import Setting, make_record

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SMALL_ANIMATION = {"trace_len": "64", "block_m": "16", "block_n": "32"}


def open_app(**params: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"source": "recorded", **params})
    return app.run()


def assert_no_exception(app: AppTest) -> None:
    assert not app.exception, [exception.value for exception in app.exception]


def metric_values(app: AppTest) -> list[str]:
    return [metric.value for metric in app.metric]


def element_places(app: AppTest) -> list[tuple]:
    """Every element's place on the page and its kind: what Streamlit matches a rerun's elements by."""
    def places(node, path=()) -> list[tuple]:
        found = [(path, type(node).__name__, getattr(node, "type", ""))]
        children = getattr(node, "children", None)
        for index, child in (children.items() if isinstance(children, dict) else ()):
            found += places(child, (*path, index))
        return found
    return places(app._tree.children[0])


def plotly_specs(app: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def shown(markdown: str) -> str:
    """What markdown shows of escaped text: a backslash before ASCII punctuation is dropped, and the invisible
    word joiners that keep addresses from becoming links (fmt) are not seen."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")


def badges(app: AppTest) -> str:
    """Text of the data-source badges (st.badge renders as a markdown badge directive)."""
    return shown(" ".join(element.value for element in app.markdown if "-badge[" in element.value))


def page_text(app: AppTest) -> str:
    return shown(" ".join(str(element.value) for kind in ("markdown", "caption", "info", "warning", "error")
                          for element in app.get(kind)))


def uploaded_recording() -> bytes:
    """A small results file as a GPU would write it (times made up for the test: naive 3× slower, and out
    of memory at 4K), so the recorded path is tested whatever results/ holds."""
    records = []
    for seq_len in (1024, 2048, 4096):
        flash_ms = seq_len / 1024
        records.append(make_record(Setting("fa2", Shape(seq_len=seq_len, batch=2, heads=16, head_dim=128)), "ok", "Test GPU", "cuda", [flash_ms] * 3,
                               peak=seq_len * 1000).to_dict())
        naive = Setting("naive", Shape(seq_len=seq_len, batch=2, heads=16, head_dim=128))
        records.append((make_record(naive, "oom", "Test GPU", "cuda", needed=1 << 40, message="out of memory")
                        if seq_len == 4096 else
                        make_record(naive, "ok", "Test GPU", "cuda", [3 * flash_ms] * 3, peak=seq_len**2)).to_dict())
    facts = {"name": "Test GPU", "sm_count": 4, "smem_per_sm_bytes": 64 << 10, "smem_per_block_bytes": 48 << 10,
             "l2_bytes": 1 << 20, "hbm_bytes": 1 << 34, "copy_gbps": 4000.0, "compute_capability": "9.0",
             "driver": "test", "torch": "test", "triton": "test"}
    return json.dumps({"schema": results.SCHEMA, "schema_version": results.SCHEMA_VERSION,
                       "meta": {"created": "2026-01-02T03:04:05Z", "command": "test"}, "device": facts,
                       "records": [{**r, "recorded_at": "2026-01-02T03:04Z"} for r in records],
                       "timelines": []}).encode()


def upload(app: AppTest, data: bytes) -> AppTest:
    app.sidebar.get("file_uploader")[0].upload("results.json", data, "application/json")
    return app.run()
