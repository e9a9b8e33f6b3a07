"""A session's first view comes in steps (page.script): the picture first, built for the window, then the controls
into places held at their height. These tests drive the steps the way the page script does, through its state."""
import zlib

import plotly.graph_objects as go
import pytest

from app import HEADLINE_SENTENCE, SCENE_KEYS
from page import VIEWS, layout, script
from tests.support_app import APP, SMALL_ANIMATION, assert_no_exception, element_places, plotly_specs

from streamlit.testing.v1 import AppTest


@pytest.fixture
def from_a_browser(monkeypatch):
    """The session as a browser opens it (AppTest sends no Host header: it gets everything at once)."""
    monkeypatch.setattr(script, "_browser_connected", lambda: True)


def headline(state: dict | None = None) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"source": "recorded", "scene": "headline"})
    if state is not None:
        app.session_state[script.PAGE_SCRIPT_KEY] = state
    return app.run()


def headline_px() -> int:
    """The headline's chart height in design px (page/layout.py): the scene body less its sentence and the slider."""
    body = layout.Body()
    body.add_px(layout.text_rows_px(HEADLINE_SENTENCE))
    body.row("slider")
    return body.chart_px()


def styles(app: AppTest) -> str:
    return " ".join(str(element.proto.body) for element in app.get("html"))


def held_places(app: AppTest) -> list[str]:
    """The places held for the controls: st.html blocks (markdown with HTML would make the browser load a parser
    before the first chart)."""
    assert not [m for m in app.markdown if "canvas-held" in m.value], "held places are not markdown"
    return [str(e.proto.body) for e in app.get("html") if 'class="canvas-held"' in str(e.proto.body)]


SMALL, DESIGN = {"width": 1280, "height": 720}, {"width": 1920, "height": 1080}


@pytest.mark.parametrize("state, step, window", [
    (None, "window", None), ({"viewport": None, "drawn": None}, "window", None),
    ({"viewport": SMALL, "drawn": None}, "picture", SMALL),
    ({"viewport": SMALL, "drawn": SMALL}, "controls", SMALL),
    # in the design window the page script sends only "drawn", with the window's size: one rerun
    ({"viewport": None, "drawn": DESIGN}, "controls", DESIGN),
    # resized after the picture was drawn: the last viewport is the window
    ({"viewport": SMALL, "drawn": DESIGN}, "controls", SMALL),
    ({"viewport": SMALL, "drawn": True}, "picture", SMALL),        # only a window's size says drawn
    ({"viewport": SMALL, "drawn": {"width": 1280}}, "picture", SMALL),
    ({"viewport": "1280x720", "drawn": None}, "window", None),     # not a window's size
])
def test_the_step_follows_what_the_page_script_reported(monkeypatch, from_a_browser, state, step, window):
    monkeypatch.setattr(script.st, "session_state", {} if state is None else {script.PAGE_SCRIPT_KEY: state})
    assert script.first_view_step() == step
    assert script.controls_ready() == (step == "controls")
    assert script.window_size() == window


@pytest.mark.parametrize("link, step, window", [
    ({"window": "1280x720"}, "picture", SMALL),
    ({"window": "1280x720", "drawn": "1280x720"}, "controls", SMALL),
    ({"drawn": "1920x1080"}, "controls", DESIGN),        # the design window: "drawn" alone, one rerun
    ({"window": "0x720"}, "window", None),              # a size, but no browser window's: kept, never used
    ({"window": "1280x190"}, "picture", {"width": 1280, "height": 190}),  # a short window is one (issue 44)
])
def test_the_page_script_reports_through_the_link_and_the_app_takes_them_out(from_a_browser, link, step, window):
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"source": "recorded", "scene": "headline", **link})
    app.run()
    assert_no_exception(app)
    assert not {"window", "drawn"} & set(app.query_params), "the reports stay out of the link a presenter shares"
    sizes = {param: [int(side) for side in size.split("x")] for param, size in link.items()}
    assert app.session_state[script.PAGE_SCRIPT_KEY] == {
        script.REPORTS[param]: {"width": width, "height": height} for param, (width, height) in sizes.items()}
    css = styles(app)
    assert f'--canvas-first-view: "{step}"' in css
    assert f'--canvas-window: "{window["width"]}x{window["height"]}"' in css if window else '"design"' in css
    assert bool(app.get("select_slider")) == (step == "controls")
    assert not any("unknown parameter" in str(note.value) for note in app.warning)


def test_a_report_that_is_no_size_is_a_note_on_the_link(from_a_browser):
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"source": "recorded", "scene": "headline", "window": "wide", "drawn": "1920x1080"})
    app.run()
    assert_no_exception(app)
    assert "window" not in app.query_params and "drawn" not in app.query_params
    assert app.get("select_slider"), "the report that was a size was taken: the first view is complete"
    said = " ".join(str(element.value) for element in app.warning)
    assert "`window` is the page's own report of its window, as WIDTHxHEIGHT; `wide` is not one: ignored" in said
    assert "unknown" not in said


def test_a_report_in_the_link_is_quoted_like_any_other_value_from_a_link(from_a_browser):
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"source": "recorded", "scene": "headline", "window": "`**x**` " + "9" * 60})
    app.run()
    assert_no_exception(app)
    said = " ".join(str(element.value) for element in app.warning)
    assert "`?**x**? " + "9" * 32 + "…` is not one: ignored" in said  # 40 characters, no backtick


def test_the_page_script_is_html_with_its_data_and_nothing_dompurify_drops():
    """Streamlit cleans st.html with DOMPurify, which removes a script whose text has a "<" before a letter, "/" or
    "!" (mXSS): the script has none, and its data (JSON) escapes every "<"."""
    import json
    import re
    html = script.page_script_html({"scenes": ["a</script><b>"], "viewport": None})
    body = html[html.index(">") + 1:html.rindex("</script>")]
    assert not re.search(r"<[/\w!]", body)
    assert html.startswith(f'<script class="{script.PAGE_SCRIPT_CLASS}">(function flashLivePage(data) {{')
    data = json.loads(body[body.rindex("})(") + 3:-2])
    assert data == {"scenes": ["a</script><b>"], "viewport": None}


def test_each_run_mounts_the_page_script_allowed_to_run_in_a_hidden_row(from_a_browser):
    app = headline()
    assert not [e for e in app.sidebar.get("html") if script.PAGE_SCRIPT_CLASS in str(e.proto.body)]
    (mounted,) = [e for e in app.get("html") if script.PAGE_SCRIPT_CLASS in str(e.proto.body)]
    assert '[data-testid="stLayoutWrapper"]:has(> .st-key-page-script), .st-key-page-script { display: none; }' \
        in styles(app)
    assert mounted.proto.unsafe_allow_javascript
    assert '"first_view": "window"' in mounted.proto.body and '"scenes": ["headline"' in mounted.proto.body


def test_without_a_browser_everything_comes_at_once(monkeypatch):
    monkeypatch.setattr(script.st, "session_state", {})
    assert script.first_view_step() == "controls"
    app = headline()
    assert_no_exception(app)
    assert app.get("select_slider") and plotly_specs(app) and len(app.metric) == 3


def test_the_first_run_draws_the_picture_for_the_design_window_and_holds_the_controls(from_a_browser):
    app = headline()
    assert_no_exception(app)
    assert not app.get("select_slider") and not app.button, "no control before the picture is drawn"
    (spec,) = plotly_specs(app)
    assert spec["layout"]["height"] == pytest.approx(headline_px())  # the design height, at the design scale
    assert 700 <= headline_px() <= 730  # the picture is most of the canvas's 910 px body
    # as wide as its column (3 of 4 in the 1800 design px body, less half a 24 px gap): the width Streamlit
    # measures for it, so the browser draws it once (page.script.chart)
    assert spec["layout"]["width"] == 1338
    # shown only in a window where the design size is right; elsewhere hidden, clipped to its height in rem
    css = styles(app)
    held_rem = f"max-height: {headline_px() / script.DESIGN_PX_PER_REM:.4g}rem"
    assert "visibility: hidden" in css and f"@media {script.DESIGN_WINDOW}" in css and held_rem in css
    held = held_places(app)
    assert any("height: 4.333rem" in place for place in held), "the slider's place: 104 design px"
    # the numbers come with the controls, into the place of three bordered cards (154 design px each, 0.6rem apart)
    assert not app.metric
    assert any("height: 20.45rem" in place for place in held), held


def test_the_picture_run_builds_the_charts_for_the_window(from_a_browser):
    app = headline({"viewport": SMALL, "drawn": None})
    assert_no_exception(app)
    (spec,) = plotly_specs(app)
    assert spec["layout"]["height"] == pytest.approx(headline_px() * 2 / 3)  # its design px at 2/3
    assert spec["layout"]["width"] == 892  # its column at 2/3: 1338 design px
    assert "visibility: hidden" not in styles(app), "built for this window: nothing to hide"
    assert not app.get("select_slider") and not app.metric, "the controls and the numbers still wait for the picture"


def test_once_drawn_the_controls_come_in_their_places(from_a_browser):
    app = headline({"viewport": SMALL, "drawn": SMALL})
    assert_no_exception(app)
    assert app.get("select_slider") and app.button and len(app.metric) == 3
    assert not held_places(app)
    (spec,) = plotly_specs(app)
    assert spec["layout"]["height"] == pytest.approx(headline_px() * 2 / 3)


# every scene of the talk, and the tiling scene in each of its views (a new scene or view is checked as it comes)
SCENE_CASES = [{"scene": key} for key in SCENE_KEYS if key != "tiling"]
SCENE_CASES += [{"scene": "tiling", "view": view, **SMALL_ANIMATION} for view in VIEWS]
SCENE_CASES += [{"scene": "backward", "part": part} for part in ("memory", "speed")]  # its first view: the walk


@pytest.mark.parametrize("params", SCENE_CASES, ids=lambda params: "-".join(params.get(k, "") for k in ("scene", "view", "part")))
def test_a_run_that_computes_and_the_next_put_every_element_in_the_same_place(params):
    """The run that builds a trace or a figure and the next run (served from the caches) lay the page out alike:
    an element one place on is a new element to Streamlit, which draws the chart anew on the next run: the
    picture flickers, and an animation the presenter has started is cut off (before, the tiling scene's first
    run had one more empty element than the next: the interpreter queue's message place, made on every
    kernel_trace call, and a cache miss calls it once more)."""
    seed = str(zlib.crc32(repr(sorted(params.items())).encode()) % 100_000 + 1000)  # not cached by other tests
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({"source": "recorded", "seed": seed, **params})
    first = element_places(app.run())
    assert_no_exception(app)
    assert first == element_places(app.run())


# -- a chart as wide as its place: plotly draws it once (page.script.chart) ---------------------------------------

@pytest.mark.parametrize("params", SCENE_CASES, ids=lambda params: "-".join(params.get(k, "") for k in ("scene", "view", "part")))
def test_every_chart_asks_for_the_width_of_its_place(params):
    """Streamlit draws a new chart element at its figure's own width (hidden while that has none), then again at
    the width it measured for the element. Each chart says the width of its place, so the two agree and plotly draws
    it once (at 1920x1080: the headline's in 3 of 4 columns, every other chart across the main area)."""
    app = AppTest.from_file(APP, default_timeout=300)
    app.query_params.update({"source": "recorded", **params})
    app.run()
    assert_no_exception(app)
    widths = [spec["layout"].get("width") for spec in plotly_specs(app)]
    if params["scene"] == "decode":  # the trace and the bandwidths side by side, each in its half
        assert widths == [int(script.column_px([1, 1], i)) for i in range(2)]
        return
    if params["scene"] == "ablation":  # the ladder's bars, beside them the selected step's lanes (when recorded), and
        from app import ABLATION_COLUMNS, FP8_CHART_PX  # the FP8 view's chart in its popover
        assert widths[-1] == FP8_CHART_PX
        assert widths[:-1] and widths[:-1] == [int(script.column_px(ABLATION_COLUMNS, i)) for i in range(len(widths) - 1)]
        return
    expected = script.column_px([1, 3], 1) if params["scene"] == "headline" else script.BODY_WIDTH_PX
    assert widths == [expected] * len(widths)


def test_a_chart_width_is_its_place_scaled_in_whole_px_and_a_figure_keeps_its_own():
    assert script.chart_width_px(1338, 1) == 1338
    assert script.chart_width_px(1338, 2 / 3) == 892  # 891.99999… in floats
    assert script.chart_width_px(1800, 2) == 3600
    assert script.chart_width_px(1338, 0.7111) == 951  # rounded down: never wider than its place


def test_a_figure_with_a_width_of_its_own_keeps_it(monkeypatch):
    sent = []
    monkeypatch.setattr(script.st, "plotly_chart", lambda fig, **options: sent.append(fig))
    monkeypatch.setattr(script.st, "session_state", {})
    monkeypatch.setattr(script, "first_view_step", lambda: "controls")
    script.chart(go.Figure(layout={"width": 500, "height": 300}))
    script.chart(go.Figure(layout={"height": 300}), width=900)
    assert [fig.layout.width for fig in sent] == [500, 900]


# -- a chart's figure built once per its inputs, for every session (page.script.built_figure) ----------------------

def test_a_figure_is_built_once_per_its_inputs():
    built = []

    def figure(records, height):
        built.append((records, height))
        return go.Figure(go.Scatter(x=[r["seq_len"] for r in records], y=[r["ms"] for r in records]),
                         layout={"height": height})

    first = script.built_figure(figure, records=[{"seq_len": 1024, "ms": 0.25}], height=720)
    again = script.built_figure(figure, records=[{"seq_len": 1024, "ms": 0.25}], height=720)
    assert again is first and len(built) == 1
    other = script.built_figure(figure, records=[{"seq_len": 1024, "ms": 0.26}], height=720)  # one number differs
    assert other is not first and len(built) == 2
    assert script.built_figure(figure, records=[{"seq_len": 1024, "ms": 0.25}], height=480) is not first
    assert len(built) == 3


def test_inputs_that_json_cannot_say_exactly_are_never_mistaken_for_others():
    import numpy as np
    built = []

    def figure(values):
        built.append(values)
        return go.Figure(go.Scatter(y=list(values)))

    # a numpy number is the number it holds: cached like it
    assert script.built_figure(figure, values=[np.int64(3), 1.5]) is script.built_figure(figure, values=[3, 1.5])
    assert len(built) == 1
    # two arrays whose repr is cut short to the same text are two figures, built each time
    a, b = np.arange(5000.0), np.arange(5000.0)
    b[2500] = -1.0
    assert repr(a) == repr(b)
    first, second = script.built_figure(figure, values=a), script.built_figure(figure, values=b)
    assert list(first.data[0].y) != list(second.data[0].y)
    assert len(built) == 3


def test_a_new_session_draws_the_headline_without_building_its_figure_again(monkeypatch, from_a_browser):
    import viz
    script.CHART_FIGURES.clear()
    calls = []
    real = viz.memory_figure
    monkeypatch.setattr(viz, "memory_figure", lambda **inputs: calls.append(inputs) or real(**inputs))
    design = headline()
    assert_no_exception(design)
    assert len(calls) == 1
    small = headline({"viewport": SMALL, "drawn": SMALL})  # another session, in another window
    assert_no_exception(small)
    assert len(calls) == 1, "the second session's headline was built again"
    # the shared figure is scaled into a new one for each window, never changed itself
    assert plotly_specs(design)[0]["layout"]["height"] == pytest.approx(headline_px())
    assert plotly_specs(small)[0]["layout"]["height"] == pytest.approx(headline_px() * 2 / 3)
    (kept,) = [fig for fig, _ in script.CHART_FIGURES._entries.values()]
    assert kept.layout.height == pytest.approx(headline_px())


# -- what the server's settings cost a viewer's first run -------------------------------------------------------

def test_no_magic_and_nothing_in_app_py_that_magic_would_have_written():
    """Streamlit clears its compiled copy of app.py whenever a session starts: with magic on, every viewer's first
    run rewrote app.py's syntax tree again before anything was sent (40-150 ms here). Off, and nothing is lost:
    app.py has no bare expression for magic to write (a docstring is not written either way)."""
    import ast
    from pathlib import Path

    from streamlit import config
    config.get_config_options(force_reparse=True)  # .streamlit/config.toml, as `streamlit run` reads it
    assert config.get_option("runner.magicEnabled") is False
    tree = ast.parse(Path(APP).read_text())
    bare = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom))
            and not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))]
    assert not bare, f"app.py lines {bare}: a bare expression magic would have written to the page"


def test_no_embedding_page_may_drive_the_talk():
    """No origin is trusted to send Streamlit's host messages (rerun, stop, set the query): the page checks none
    of its own messages against Streamlit's 16 default Community Cloud patterns on the way to the first chart."""
    from streamlit import config
    config.get_config_options(force_reparse=True)
    assert list(config.get_option("client.allowedOrigins")) == []


def test_the_tab_icon_is_a_png_not_an_emoji(monkeypatch):
    """Streamlit draws an emoji page icon as an SVG image of the emoji's text, which chromium parses on the page's
    main thread with the colour emoji font (~30 ms before the first chart, 4 traced visits); a PNG is not."""
    from pathlib import Path
    from PIL import Image
    import page
    asked = []
    real = script.st.set_page_config
    monkeypatch.setattr(page.st, "set_page_config", lambda **config: asked.append(config) or real(**config))
    app = headline()
    assert_no_exception(app)
    icon = asked[0]["page_icon"]
    assert Path(icon).is_file() and Image.open(icon).format == "PNG" and Image.open(icon).size == (64, 64)
