"""The story's numbers: what the scenes quote, computed from records, device facts and the cost model.

Plain Python, no Streamlit, torch or Triton: the app's scenes call these and only lay the results out, so every
number a scene shows comes from one function that tests can call directly. One module per scene, and `records` for
what several of them say of a record (an out-of-memory wall, a failure, the bytes the GPU counted); a number takes
the talk's shape as one value (costmodel.Shape).
"""
from story.ablation import (PUBLISHED_STEPS, Bar, PublishedStep, bars, chart_data, has_numbers, ladder_sentence,
                            no_records_sentence, step_lanes_sentence, step_lanes_title, step_names,
                            what_changed)
from story import backward
from story.decode import (cache_bytes, CacheRow, DecodeRow, decode_batches, decode_lengths, decode_records, decode_rows,
                          decode_sentence, kv_cache_rows, kv_cache_table, missing_sentence as decode_missing_sentence,
                          copy_roof as decode_copy_roof)
from story.compare import (model_off, tiles_bytes_sentence, HbmBytes, TrafficPanels, compare_caption, compare_titles, flash_tiles, hbm_bytes,
                           model_vs_counted, tiles_text, traffic_panels)
from story.evolution import (Fa1Gap, authors_sentence, drawn_records, evolution_points, fa1_gap, failed_here_sentence,
                             launch_caveat, prefill_algorithms, ratio_sentences, same_gpu_sentence)
from story.headline import (LAUNCH_BOUND_MS, SPEEDUP_COLUMNS, SPEEDUP_NAMES, Headline, at_length_sentence, headline,
                            launch_bound, speedup_table, speedup_table_text, speedup_words)
from story import fp8
from story import ring
from story.hierarchy import hierarchy_sentence
from story.inside import (BUSY_AGREES, GEMM_PHASES, LANE_NAMES, PhaseKernel, RecordedProgram, busy_sentence, gemm_busy,
                          phase_fractions, phase_kernels, phases_sentence, recorded_program, recorded_programs,
                          softmax_overlap, step_programs)
from story.problem import ScoresMemory, scores_memory, standard_wall
from story.records import (OUT_OF_MEMORY, prefill_records, REFUSED, REFUSED_BEFORE_LAUNCH, oom_word, refused, counted_bytes, counted_bytes_at, failure_text,
                           first_out_of_memory, first_wall, memory_wall, oom_need, oom_text, record_at, runs_sentence,
                           wall_text, with_failures, recorded_days, recorded_label, earlier_code,
                           earlier_code_sentence, recorded_subtitle)
from story.roofline import (NAIVE_KERNEL_LABELS, RoofPoint, ridge, roof_names, roofline_points, roofline_text,
                            roofline_verdicts, roofs_sentence, datasheet_of)
from story.takeaways import BackwardEvidence, DecodeEvidence, Evidence, Slide, takeaway_slides, takeaways
from story.timeline import residency, timeline_caption, timeline_stats

__all__ = [name for name in dir() if not name.startswith("_")]
