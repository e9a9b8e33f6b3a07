#!/usr/bin/env bash
# Every GPU-marked test on a GPU machine, in two parts so one call's time limit still returns a count: the test files
# named as arguments first (what a change touched), then every other GPU-marked test. Logs go to $OUT.
#
#     bash perf/h200/gpu_tests.sh tests/test_fa3_bwd.py tests/test_backward.py
#
# A machine without streamlit and plotly (the scenes' live tests need them) takes their wheels from .whl/ when that
# folder exists (ignored by git: `python3 -m pip download --no-deps --only-binary=:all: -d .whl streamlit==1.67.0
# plotly==6.5.2 ...` with the machine's Python version and platform, and what they need that it lacks). The set
# carried on 2026-12-06, which worked there: altair, blinker, cachetools, gitpython, gitdb, smmap, jsonschema,
# jsonschema-specifications, referencing, rpds-py, narwhals, tenacity, toml, tornado, watchdog, and streamlit 1.67's
# server: starlette, uvicorn, h11, websockets, python-multipart, itsdangerous (pydeck: only for maps, not needed).
#
# The whole suite takes ~510 s of pytest on an H100 (2026-12-06: 339 s for test_app_live, test_fp8 and test_fa3, 173 s
# for the rest), so one call's limit may cut the second part short. GPU_TESTS_PART=first or =rest runs one part
# (the same FILES name both: rest deselects them), each in a call of its own.
set -uo pipefail
OUT=${OUT:-perf/h200/logs}
LIMIT=${GPU_TESTS_SECONDS:-560}
PART=${GPU_TESTS_PART:-both}
case "$PART" in first|rest|both) ;; *) echo "GPU_TESTS_PART is first, rest or both; got '$PART'"; exit 2 ;; esac
[ "$PART" = first ] && [ $# -eq 0 ] && { echo "GPU_TESTS_PART=first runs the FILES named: name some"; exit 2; }
export PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || exit 1
fi
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
start=$(date +%s)
if [ $# -gt 0 ] && [ "$PART" != rest ]; then
    timeout "$LIMIT" python3 -m pytest -q -m gpu -p no:cacheprovider --durations=8 "$@" 2>&1 | tee "$OUT/gpu-tests-first.log" | tail -12
    echo "first part: $(( $(date +%s) - start )) s"
fi
[ "$PART" = first ] && exit 0
deselect=(); for f in "$@"; do deselect+=(--deselect "$f"); done
timeout $(( LIMIT - ($(date +%s) - start) )) python3 -m pytest -q -m gpu -p no:cacheprovider --durations=8 "${deselect[@]}" 2>&1 \
    | tee "$OUT/gpu-tests-rest.log" | tail -12
echo "total: $(( $(date +%s) - start )) s"
