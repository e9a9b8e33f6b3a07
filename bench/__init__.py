"""Measurement: what our kernels and PyTorch's do on a GPU, as records, results files and counted bytes.

- `bench.algorithms`: what can be timed, one row per algorithm (keyed like costmodel.ALGORITHM_MODELS).
- `bench.measure`: one setting → one record (time, TFLOPS, peak memory, out-of-memory as a result).
- `bench.record`, `bench.results`: the record and the versioned results file, checked once where it is read.
- `bench.device`: the GPU's facts and measured roofs (copy and L2 bandwidth, bf16 matmul rate).
- `bench.counters`: HBM bytes from the GPU's hardware counters (Nsight Compute).
- `python -m bench`: the CLI that writes results/h200.json.

`bench.record` and `bench.results` import without torch (the app reads a recording before, or without, loading
the kernels); the rest loads torch and Triton through kernels/.
"""
