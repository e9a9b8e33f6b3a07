"""The tiling scene's views and loop orders in the app (AppTest, CPU path): every view of either order
draws its figure from the kernel of that order, and a kernel that cannot run the asked tiles gets a note
and the nearest tiles that run."""
import pytest

import app as app_module
from app_settings import settings_from_query
from costmodel import fa1_schedule, tile_schedule
from tests.test_app import SMALL_ANIMATION, assert_no_exception, open_app, page_text, plotly_specs


@pytest.mark.parametrize("order", ["fa2", "fa1"])
def test_every_view_of_either_order(order):
    app = open_app(scene="tiling", causal="true", **SMALL_ANIMATION)
    app.segmented_control(key="picture_order").set_value(order).run()
    schedule = (fa1_schedule if order == "fa1" else tile_schedule)(64, 16, 32, True)
    for view in app_module.PICTURE_VIEWS:
        app.segmented_control(key="picture_view").set_value(view).run()
        assert_no_exception(app)
        assert not app.error, [e.value for e in app.error]
        (figure,) = plotly_specs(app)
        if view == "rereads":  # after the run: no frames
            assert "K/V tile loads" in figure["layout"]["title"]["text"]
            continue
        assert len(figure["frames"]) == len(schedule)
        first = " ".join(str(trace.get("text")) for trace in figure["frames"][0]["data"])
        order_name = "FA1 order" if order == "fa1" else "FA2 order"
        assert view == "tiles" or order_name in first
        assert app_module.LOOP_ORDERS[order] in page_text(app)


def test_tiles_the_kernel_cannot_run_get_a_note_and_smaller_tiles(monkeypatch):
    real = app_module.animation_trace

    def cannot_run_big_tiles(s, order="fa2"):
        if max(s.block_m, s.block_n) > 16:
            raise RuntimeError("out of resource: shared memory")  # what Triton says on a GPU
        return real(s, order)

    monkeypatch.setattr(app_module, "animation_trace", cannot_run_big_tiles)
    settings, _ = settings_from_query({"trace_len": ["64"], "block_m": ["32"], "block_n": ["32"]})
    fitted, notes = app_module.traced_tiles(settings, "fa1")
    assert (fitted.block_m, fitted.block_n) == (16, 16)
    assert notes and "could not run 32×32" in notes[0] and "showing 16×16" in notes[0]
    assert app_module.traced_tiles(fitted, "fa1") == (fitted, [])

    def cannot_run_at_all(s, order="fa2"):
        raise RuntimeError("no driver")

    monkeypatch.setattr(app_module, "animation_trace", cannot_run_at_all)
    with pytest.raises(ValueError, match="any tile size"):
        app_module.traced_tiles(settings, "fa1")
