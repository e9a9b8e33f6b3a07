"""The private internals of Streamlit, plotly.py, plotly.js, Triton and torch the house leans on, each behind one
small module that names them: these tests fail loudly, naming what moved, when an upgrade moves one (plotly.js's,
read by page/script.js, fail the browser tests through a console error instead)."""
from bench import triton_private
from kernels import gluon_compat, runtime
from page import guard
from viz import plotly_private


def test_streamlits_internals_are_where_page_guard_expects():
    assert guard.check() == []


def test_plotlys_frames_are_where_viz_expects():
    assert plotly_private.check() == []


def test_tritons_launch_machinery_is_where_the_compile_check_expects():
    assert triton_private.check() == []


def test_tritons_launch_is_where_the_cached_launch_expects():
    assert runtime.check() == []


def test_gluons_hopper_api_is_where_the_fa3_kernel_expects():
    assert gluon_compat.check() == []


def test_page_script_names_plotlys_internals_in_one_place():
    from pathlib import Path
    script = (Path(guard.__file__).with_name("script.js")).read_text()
    uses = [line for line in script.splitlines() if "._fullLayout" in line or "._ev" in line]
    assert uses and all("chart._" in line for line in uses)
    assert len(uses) == 2  # plotlyPrivate.layout and plotlyPrivate.listening, nowhere else
