"""Pure figure builders for "FlashAttention, live": plain data in, plotly.graph_objects.Figure out.

No Streamlit, torch or triton here; the numbers come from kernels/ via app.py (shapes in
docs/data-contracts.md), and every formula from the cost model (costmodel.py).
"""

from viz.compare import compare_figure
from viz.evolution import PUBLISHED, evolution_figure
from viz.hbm import hbm_sram_figure
from viz.hierarchy import hierarchy_figure
from viz.memory import memory_figure
from viz.problem import scores_memory_figure
from viz.rereads import rereads_figure
from viz.roofline import roofline_figure
from viz.sm_timeline import sm_timeline_figure
from viz.source_view import kernel_source_figure
from viz.theme import PALETTE, style, template
from viz.tiling import tiling_figure, tiling_html
from viz.timing import speedup_table, tflops_figure, timing_figure

__all__ = [
    "PALETTE",
    "PUBLISHED",
    "compare_figure",
    "evolution_figure",
    "hbm_sram_figure",
    "hierarchy_figure",
    "kernel_source_figure",
    "memory_figure",
    "rereads_figure",
    "roofline_figure",
    "scores_memory_figure",
    "sm_timeline_figure",
    "speedup_table",
    "style",
    "template",
    "tflops_figure",
    "tiling_figure",
    "tiling_html",
    "timing_figure",
]
