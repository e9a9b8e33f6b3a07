"""Pure figure builders for "FlashAttention, live": plain data in, plotly.graph_objects.Figure out.

No Streamlit, torch or triton here, and no numbers of the story's: viz draws what it is given. The records
and traces come from kernels/ via the page (shapes in docs/data-contracts.md), the numbers and words the
scenes quote from story/, formatting from fmt.py, every formula from the cost model (costmodel/).
One look per algorithm (its spec's colour and names, viz.theme.look); the animated views share viz.animation.
"""

# pandas, whole, before any figure is built: plotly's validators test a value against pandas' types when pandas is in
# sys.modules (_plotly_utils.basevalidators.to_scalar_or_list, get_module(should_load=False)), and a server session
# importing pandas (a table's first use) while another builds a figure left it there half made: "partially
# initialized module 'pandas' has no attribute 'Series'" (two viewers on a cold server, 2026-12-06). Imported here,
# every session's import of viz waits for it to finish.
import pandas  # noqa: F401,E402

from viz.ablation import ablation_figure
from viz.animation import standalone_html
from viz.backward import backward_tflops_figure, backward_walk_figure
from viz.compare import compare_figure
from viz.decode import decode_bandwidth_figure, decode_trace_figure
from viz.evolution import PUBLISHED, evolution_figure
from viz.fp8 import fp8_figure
from viz.hbm import hbm_sram_figure
from viz.hierarchy import hierarchy_figure
from viz.memory import memory_figure
from viz.problem import scores_memory_figure
from viz.rereads import rereads_figure
from viz.phases import phases_figure
from viz.roofline import roofline_figure
from viz.ring import ring_balance_figure, ring_length_figure, ring_steps_figure
from viz.sm_timeline import sm_timeline_figure
from viz.table import table_figure
from viz.source_view import kernel_source_figure
from viz.theme import (COLORS, PALETTE, algorithm_color, algorithm_label, algorithm_order, look, order_label,
                       short_labels, style, template)
from viz.tiling import tiling_figure
from viz.timing import tflops_figure, timing_figure

__all__ = [
    "COLORS",
    "PALETTE",
    "PUBLISHED",
    "ablation_figure",
    "fp8_figure",
    "algorithm_color",
    "algorithm_label",
    "algorithm_order",
    "backward_tflops_figure",
    "backward_walk_figure",
    "compare_figure",
    "decode_bandwidth_figure",
    "decode_trace_figure",
    "evolution_figure",
    "hbm_sram_figure",
    "hierarchy_figure",
    "kernel_source_figure",
    "look",
    "memory_figure",
    "order_label",
    "rereads_figure",
    "ring_balance_figure",
    "ring_length_figure",
    "ring_steps_figure",
    "phases_figure",
    "roofline_figure",
    "scores_memory_figure",
    "short_labels",
    "sm_timeline_figure",
    "standalone_html",
    "style",
    "table_figure",
    "template",
    "tflops_figure",
    "tiling_figure",
    "timing_figure",
]
