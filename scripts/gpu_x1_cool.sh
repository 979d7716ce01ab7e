#!/usr/bin/env bash
# gpu_x1_cool.sh: the compute calibration of one H200 (`nvidia-h200`) timed cold, as the 2 x H200
# machine's (traces/h200x2/grid-cool-20261128, models-cool-20261128): before each timing the GPU
# waits 1.5x the op's time, so no record is taken at a power-capped clock.
#   OUT=dir BIN_DIR=dir PART=grid|models bash scripts/gpu_x1_cool.sh
# PART=grid: the shape grid (`--parts compute`, about 470 s); PART=models: the one-GPU validation
# models' own shapes (configs/calib/h200x1.models). Writes $OUT/<part>.tgz: compute.json.xz,
# calib.log, machine.txt.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
PART=${PART:-grid}
W=/tmp/x1-cool-$PART
mkdir -p "$W" "$OUT"
. scripts/gpu_epref.sh
epref_binary "$W"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$W/machine.txt" 2>&1
case $PART in
grid) parts=(--parts compute) ;;
models) parts=(--parts models --models configs/calib/h200x1.models) ;;
*) echo "gpu_x1_cool.sh: PART is grid or models" >&2; exit 2 ;;
esac
t0=$(date +%s)
timeout "${BUDGET_S:-540}" "$EPREF" --nproc 1 bench calib --out "$W" "${parts[@]}" --iters 5 \
    --warmup 2 --l2-flush 256 > "$W/calib.log" 2>&1
echo "bench calib rc=$? in $(($(date +%s) - t0)) s"
tail -3 "$W/calib.log"
[ -f "$W/compute.json" ] && xz -9 "$W/compute.json"
(cd "$W" && tar czf "$OUT/$PART.tgz" .)
