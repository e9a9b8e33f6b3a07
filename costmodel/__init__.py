"""The cost model: every constant and formula the story's numbers come from, in one place.

A leaf: plain Python and NumPy, no torch, no Triton, no Streamlit, nothing else of the project. `kernels/` (each
kernel's spec names its formulas; the kernels' own thresholds), `bench/` (the bytes a record says it moved), `viz/`
(the animation's counters) and `story/` all call it, and tests pin each formula by hand.

Units: sizes in bytes, lengths in tokens (rows of Q, K, V), tiles in tokens per side, FLOPs as floating-point
operations (a multiply-add is 2). Every formula of an attention problem takes one `Shape` (batch, heads, K/V heads,
query and key lengths, head_dim, dtype, causal, pass).

- `shape`: the Shape value, the constants, the FLOPs;
- `schedule`: the flash kernels' tile schedules and the rules for tiles, the decode kernel's split count;
- `memory`: what each algorithm holds beyond its inputs (the decode kernel's split partials too), the standard
  kernels' memory wall, on-chip buffers;
- `traffic`: HBM bytes by kernel or phase (standard, flash with no cache and L2-aware, fused, FA-1 order, decode),
  and step by step for the animation;
- `machine`: what the L2-aware model needs of a GPU, and the roofline;
- `ring`: ring attention over several GPUs: the chunks each holds, the blocks each computes step by step, the
  layouts' balance, a GPU's memory and the bytes passed round the ring.
"""
from costmodel.machine import (DATASHEETS, REGISTER_BYTES_PER_SM, Datasheet, datasheet, RESIDENCY_ASSUMED, RESIDENCY_LIVE, RESIDENCY_RECORDED, SMEM_BYTES_PER_CLOCK_PER_SM,
                               Machine, arithmetic_intensity, attainable_tflops, machine_from_facts, ridge_point,
                               sram_bandwidth_gbps)
from costmodel.memory import (FA1_STATE_BYTES, MAX_WALL_SEQ_LEN, PARTIAL_BYTES, REGISTERS, SHARED_MEMORY, MemoryWall,
                              decode_extra_bytes, decode_partial_bytes, fa1_extra_bytes, fa1_state_bytes_per_row,
                              flash_extra_bytes, flash_training_bytes, fused_extra_bytes,
                              gradients_bytes, inputs_bytes, memory_wall, kv_bytes, naive_extra_bytes,
                              on_chip_buffers, output_bytes, scores_bytes, smem_bytes, sram_buffers,
                              standard_device_bytes, standard_memory_wall,
                              standard_training_bytes, standard_training_wall)
from costmodel.ring import (RING_LAYOUTS, RingMemory, ring_balance, ring_blocks, ring_chunks, ring_kv_bytes_per_step,
                            ring_longest, ring_memory, ring_owned, ring_rank_work, ring_source, ring_step_work)
from costmodel.schedule import (DECODE_FILLED, DECODE_GOOD_WAVES, DECODE_MAX_SPLITS, FA1_MAX_SPLITS, FA1_PROGRAMS_PER_SM,
                                LPT_L2_BYTES, lpt_heads_per_group,
                                Step, check_model_tiling, check_tiles, check_tiling, decode_max_splits,
                                decode_num_splits, decode_wave_efficiency, fa1_schedule, fa1_split_ranges, fa1_splits,
                                k_tiles_per_q_block, keys_per_q_block, n_blocks, schedule_arrays, tile_schedule,
                                visible_scores)
from costmodel.shape import (DECODE_HEAD_DIM, DECODE_HEADS, DECODE_KV_HEADS, DECODE_KV_LENS, DECODE_MEMORY_SHARE, DTYPE_BYTES, ELEMENT_BYTES, FP8_DTYPE, decode_shape, HEAD_DIMS, LN2, LOG2_E, LSE_BYTES, MIN_TILE, PASSES, SCORE_BYTES, SEQ_LENS,
                             TILE_SIZES, TRACE_SEQ_LENS, Shape, attention_flops, dtype_bytes, visible_pairs,
                             BACKWARD_FLOPS_FACTOR, backward_least_bytes, pass_flops)
from costmodel.traffic import (ASSUMED_FLASH_TILES, IO_TENSORS, SOFTMAX_FLOPS_PER_SCORE, SOFTMAX_SINGLE_PASS_MAX,
                               SOFTMAX_SINGLE_PASS_MAX_INTERPRETER, USABLE_L2_SHARE, Traffic, decode_traffic,
                               fa1_kv_keys, fa1_step_traffic, fa1_traffic, flash_kv_reads_l2, flash_traffic_l2,
                               flash_traffic_no_cache, fused_traffic, naive_traffic, softmax_passes, step_traffic,
                               torch_naive_traffic, total_bytes)

__all__ = [name for name in dir() if not name.startswith("_")]
