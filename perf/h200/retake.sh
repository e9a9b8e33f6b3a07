#!/usr/bin/env bash
# Re-take the prefill records the evolution and FA-4 scenes compare, side by side in one bench run, into
# results/h200.json (--merge-into: the other records stay). Refuses unless the GPU is an H200 (the file is the H200's
# recording). The authors' FA-4 is timed where `flash_attn.cute` imports (pip install flash-attn-4), else left out
# and said so. Outputs and the log go to $OUT.
#
#     bash perf/h200/retake.sh                      # d64 and d128, causal and not, 1K-32K
#     DIMS=128 CAUSAL=false bash perf/h200/retake.sh  # fewer settings
set -u
OUT=${OUT:-perf/h200/logs}
mkdir -p "$OUT"
gpu=$(python3 -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA GPU')")
case "$gpu" in *H200*) ;; *) echo "retake.sh records into results/h200.json: this GPU is '$gpu', not an H200"; exit 3 ;; esac
algos=fa3,sdpa_default,sdpa_flash
if python3 -c "import flash_attn.cute.interface" > /dev/null 2>&1; then
    algos=fa3,fa4_authors,sdpa_default,sdpa_flash
else
    echo "flash-attn-4 does not import here: the authors' FA-4 is not re-taken"
fi
PYTHONUNBUFFERED=1 timeout "${RETAKE_SECONDS:-450}" python3 -m bench --algorithms "$algos" --head-dims "${DIMS:-64,128}" \
    --causal "${CAUSAL:-both}" --seq-lens "${LENS:-1024,2048,4096,8192,16384,32768}" --batch 2 --heads 16 \
    --out results/h200.json --merge-into > "$OUT/retake.log" 2>&1
rc=$?
echo "bench exit $rc ($gpu)"; grep -v -i "warning\|exe_args" "$OUT/retake.log" | tail -40
[ $rc -eq 0 ] && cp results/h200.json "$OUT/h200.json"
exit $rc
