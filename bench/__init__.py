"""Measurement: what our kernels and their peers do on a GPU, as records, results files and counted bytes; and the
tools that check the kernels without one.

- `bench.measure`: one setting (an algorithm's spec key and a costmodel.Shape) → one record (time, TFLOPS, peak
  memory, out-of-memory as a result); what it times, with which tiles and why it cannot run, its spec says.
- `bench.record`, `bench.results`, `bench.schema`: the record, the versioned results file (checked once where it is
  read) and its schema, one line per field.
- `bench.device`: the GPU's facts and measured roofs (copy and L2 bandwidth through `bench.l2_read`, bf16 matmul).
- `bench.counters`: HBM bytes from the GPU's hardware counters (Nsight Compute).
- `bench.phases`: what each warpgroup of one launch does over time, with Proton.
- `bench.compile_check`: every shipped configuration compiled for sm_90 and sm_80 without a GPU (CI runs it);
  `bench.triton_private` holds the Triton internals it leans on.
- `python -m bench`: the CLI that writes results/h200.json.

`bench.record` and `bench.results` import without torch (the app reads a recording before, or without, loading
the kernels); the rest loads torch and Triton through kernels/.
"""
