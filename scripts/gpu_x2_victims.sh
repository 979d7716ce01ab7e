#!/usr/bin/env bash
# gpu_x2_victims.sh: interference by victim shape on a 2-GPU kind (docs/calibration.md,
# "interference.json"): LAUNCHES separate launches of
#   epref --nproc 2 bench calib --parts interference-shapes --out $OUT/launch<i>
# Usage (on the GPU machine): OUT=dir [LAUNCHES=3] [BIN_DIR=.devbin/vic] bash scripts/gpu_x2_victims.sh
# Writes $OUT/machine.txt and $OUT/launch<i>/ (interference.json, calib.log).
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
. scripts/gpu_epref.sh
epref_binary "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    nvidia-smi topo -m; } > "$OUT/machine.txt" 2>&1
head -2 "$OUT/machine.txt"
for i in $(seq 1 "${LAUNCHES:-3}"); do
    mkdir -p "$OUT/launch$i"
    t0=$(date +%s)
    timeout "${LAUNCH_S:-180}" "$EPREF" --nproc 2 bench calib --parts interference-shapes \
        --out "$OUT/launch$i" > "$OUT/launch$i/calib.log" 2>&1
    echo "launch $i rc=$? in $(($(date +%s) - t0)) s"
    if [ "$i" = 1 ]; then cat "$OUT/launch$i/calib.log"; fi
done
