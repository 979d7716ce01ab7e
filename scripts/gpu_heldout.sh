#!/usr/bin/env bash
# gpu_heldout.sh: the held-out runs of issue 24 (models whose shapes no calibration input has), in
# one device call:
#   OUT=dir BIN_DIR=dir RUNSET=heldout1|heldout2|heldout4|h200x1 NPROC=1|2|4 [REPEAT=3] bash scripts/gpu_heldout.sh
# Every run is launched REPEAT times (separate launches, round after round) for the run-to-run
# spread (scripts/gpu_runs.sh). Writes $OUT/heldout.tgz after the runs: runs/ (unpack into
# traces/<machine>/heldout) and machine.txt.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
W=/tmp/heldout-${RUNSET:-h200x2}
mkdir -p "$W/runs" "$OUT"
. scripts/gpu_epref.sh
epref_binary "$W"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; } \
    > "$W/machine.txt" 2>&1
t0=$(date +%s)
ITERS=${ITERS:-3} WARMUP=${WARMUP:-1} RUN_TIMEOUT=${RUN_TIMEOUT:-60} REPEAT=${REPEAT:-3} \
    timeout "${BUDGET_S:-540}" bash scripts/gpu_runs.sh "$EPREF" "$W/runs" > "$W/runs.log" 2>&1
echo "runs rc=$? at +$(($(date +%s) - t0)) s"
cut -d, -f1-3 "$W/runs/index.csv" 2>/dev/null
cat "$W/runs/repeats.csv" 2>/dev/null
grep -B2 -A5 "failed\|error" "$W/runs.log" | head -40
(cd "$W" && tar czf "$OUT/heldout.tgz" .)
