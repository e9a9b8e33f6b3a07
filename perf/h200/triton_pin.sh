#!/usr/bin/env bash
# Our pinned Triton (requirements.txt) for a GPU machine that cannot reach a package index and runs another one
# (the lent H100/H200 machines run triton 3.6.0; we pin 3.7.1), in parts small enough to carry one per call.
# Run it in the project's root on a machine with PyPI; it fills .pin/ (ignored by git):
#   .pin/p0, .pin/p1, .pin/p2   the cp312 manylinux wheel unpacked, without what a kernel launch does not use
#                               (CUPTI's libraries, Blackwell's ptxas, the instrumentation test library), as one
#                               xz-compressed tar split in three (~32 MB each; the wheel is 198 MB, this ~100 MB)
# On the GPU machine, carry .pin/p0, then .pin/p1, then .pin/p2 in three calls back to back (a warm machine keeps
# /tmp between calls), copying each call's part to /tmp/stash; in the third:
#   cat /tmp/stash/triton.part* | xz -dc | tar x -C /tmp/pin && export PYTHONPATH=/tmp/pin
#   python3 -c "import triton; print(triton.__version__)"     # 3.7.1; torch stays the machine's own
# Why: the machine's Triton builds some kernels differently from the pin. The teaching backward's d64 dK/dV loop,
# for one: under 3.6.0 each of its 12 wgmmas an iteration is waited for on its own (12 WARPGROUP.DEPBAR in the
# profiled loop, BENCHMARKS.md §1d); under 3.7.1 they go in four groups with two waits (sm_90 SASS compiled here).
# Timings from the machine's Triton are what that Triton builds; a user with requirements.txt gets the pin's.
set -euo pipefail
V=$(sed -n 's/^triton==\([0-9.]*\).*/\1/p' requirements.txt)
[ -n "$V" ] || { echo "requirements.txt pins no triton"; exit 1; }
grep -qx '/.pin/' .gitignore || { echo ".gitignore must list /.pin/"; exit 1; }
rm -rf .pin && mkdir -p .pin/tmp/x .pin/p0 .pin/p1 .pin/p2
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    -d .pin/tmp "triton==$V"
(cd .pin/tmp/x && python3 -m zipfile -e ../triton-"$V"-*.whl . \
    && rm -rf triton/backends/nvidia/lib/cupti triton/backends/nvidia/bin/ptxas-blackwell triton/instrumentation \
    && tar cf - . | xz -T0 -6 > ../triton.tar.xz)
split -n 3 -d .pin/tmp/triton.tar.xz .pin/tmp/triton.part
mv .pin/tmp/triton.part00 .pin/p0/ && mv .pin/tmp/triton.part01 .pin/p1/ && mv .pin/tmp/triton.part02 .pin/p2/
rm -rf .pin/tmp
du -sh .pin/*
