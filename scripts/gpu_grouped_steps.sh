#!/usr/bin/env bash
# gpu_grouped_steps.sh: one GPU, `OUT=$OUT BIN=.devbin/epref bash scripts/gpu_grouped_steps.sh`
# (BIN: epref built here and carried; unset: build-gpu). Times the shape grid's grouped GEMMs at
# rows per expert between powers of two (PART=grouped-steps, the default; `epref bench calib
# --parts PART`, the grid's settings: 10 iterations, 3 warm-up, 256 MiB flushed from L2) ->
# $OUT/PART/compute.json, which `epsim calibrate` reads beside the power-of-two grid; or at rows
# per expert off the grid (PART=grouped-off-grid: the grid's rows rule scored against them with
# `epsim calibrate --holdout`; docs/calibration.md, "Between the grid's points").
set -euo pipefail
: "${OUT:?set OUT}"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/machine.txt"
cat "$OUT/machine.txt"
bin=${BIN:-}
if [ -z "$bin" ]; then
  source scripts/gpu_prelude.sh
  gpu_prelude "$OUT" epref
  bin=build-gpu/ref/epref
fi
part=${PART:-grouped-steps}
t=$(date +%s)
"$bin" --nproc 1 bench calib --out "$OUT/$part" --parts "$part" --iters 10 --warmup 3 \
  --l2-flush 256 > "$OUT/calib.log" 2>&1 || { tail -20 "$OUT/calib.log"; exit 1; }
echo "$part: $(($(date +%s) - t)) s, $(grep -c time_us "$OUT/$part/compute.json") records"
