"""One table per concept, keyed the same way in every layer: what names an algorithm, a loop order, a scene or a
tiling view in one room names the same thing in the others (docs/architecture.md says where each table is)."""
import app
import costmodel
import viz
from bench import algorithms, record, results
from kernels import source, trace
from page import pictures
from viz import animation


def test_every_layer_names_the_same_algorithms_in_one_order():
    assert tuple(costmodel.ALGORITHM_MODELS) == tuple(algorithms.ALGORITHMS) == tuple(viz.ALGORITHMS)
    assert results.RECORD_SCHEMA["algorithm"].choices == tuple(algorithms.ALGORITHMS)  # a file may name each
    assert set(costmodel.EXTRA_BYTES) == set(algorithms.ALGORITHMS)


def test_every_algorithm_has_a_model_a_runner_and_a_look():
    for key in algorithms.ALGORITHMS:
        row = algorithms.ALGORITHMS[key]
        assert row.key == key and callable(row.runner) and callable(row.tiles) and callable(row.unavailable)
        traffic = costmodel.traffic(key, 1024, 1, 2, 64, 2, False)
        assert costmodel.total_bytes(traffic) > 0, key
        assert costmodel.extra_bytes(key, 1024, 1, 2, 64, 2) > 0, key
        look = viz.ALGORITHMS[key]
        assert look.color.startswith("#") and look.label and look.short, key


def test_loop_orders_are_the_traced_kernels_and_their_sources():
    assert tuple(animation.LOOP_ORDERS) == trace.ORDERS == tuple(source.KERNELS) == tuple(pictures.LOOP_ORDERS)
    assert all(order in algorithms.ALGORITHMS and viz.ALGORITHMS[order].order_label for order in trace.ORDERS)


def test_one_table_of_scenes_and_one_of_views():
    keys = [scene.key for scene in app.SCENES]
    assert len(set(keys)) == len(keys) == len(app.SCENE_KEYS) and all(callable(s.show) for s in app.SCENES)
    assert all(scene.title for scene in app.SCENES)
    assert set(pictures.VIEWS) == {"tiles", "hbm", "source", "rereads"}
    assert record.RECORD_FIELDS == tuple(results.RECORD_SCHEMA)
