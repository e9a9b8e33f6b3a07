"""The tiling scene's views and loop orders in the app (AppTest, CPU path): every view of either order
draws its figure from the kernel of that order, and a kernel that cannot run the asked tiles gets a note
and the nearest tiles that run."""
from dataclasses import replace

import pytest

from costmodel import fa1_schedule, tile_schedule
from page import pictures
from tests.support_app import SMALL_ANIMATION, assert_no_exception, open_app, page_text, plotly_specs


@pytest.mark.parametrize("order", ["fa2", "fa1"])
def test_every_view_of_either_order(order):
    app = open_app(scene="tiling", causal="true", **SMALL_ANIMATION)
    app.segmented_control(key="control_order").set_value(order).run()
    schedule = (fa1_schedule if order == "fa1" else tile_schedule)(64, 16, 32, True)
    for view in pictures.VIEWS:
        app.segmented_control(key="control_view").set_value(view).run()
        assert_no_exception(app)
        assert not app.error, [e.value for e in app.error]
        assert (app.query_params["view"], app.query_params["order"]) == (view, order)  # the link holds both
        (figure,) = plotly_specs(app)
        if view == "rereads":  # after the run: no frames
            assert "K/V tile loads" in figure["layout"]["title"]["text"]
            continue
        assert len(figure["frames"]) == len(schedule)
        first = " ".join(str(trace.get("text")) for trace in figure["frames"][0]["data"])
        order_name = pictures.order_label(order)
        assert view == "tiles" or order_name in first
        assert order_name in page_text(app)


def test_tiles_the_kernel_cannot_run_get_a_note_and_smaller_tiles(monkeypatch):
    real = pictures.kernel_trace

    def cannot_run_big_tiles(request):
        if max(request.block_m, request.block_n) > 16:
            raise RuntimeError("out of resource: shared memory")  # what Triton says on a GPU
        return real(request)

    monkeypatch.setattr(pictures, "kernel_trace", cannot_run_big_tiles)
    asked = pictures.TraceRequest(64, 128, 32, 32, False, "bfloat16", 0, "fa1")
    fitted, notes = pictures.traced_tiles(asked)
    assert fitted == replace(asked, block_m=16, block_n=16)
    assert notes and "could not run 32×32" in notes[0] and "showing 16×16" in notes[0]
    assert pictures.traced_tiles(fitted) == (fitted, [])

    def cannot_run_at_all(request):
        raise RuntimeError("no driver")

    monkeypatch.setattr(pictures, "kernel_trace", cannot_run_at_all)
    with pytest.raises(ValueError, match="any tile size"):
        pictures.traced_tiles(asked)
