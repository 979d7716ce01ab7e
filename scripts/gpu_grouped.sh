#!/usr/bin/env bash
# gpu_grouped.sh: one GPU, `OUT=$OUT BIN=.devbin/epref [PART=...] [LAUNCHES=N] bash
# scripts/gpu_grouped.sh` (BIN: epref built here and carried; unset: build-gpu). Times grouped
# expert GEMMs with the grid's settings (10 iterations, 3 warm-up, 256 MiB flushed from L2), each
# launch into $OUT/PART[N]/compute.json (docs/calibration.md, "Between the grid's points"):
#   PART=grouped-steps (default)  the grid's grouped GEMMs at rows per expert between powers of
#                                 two, which `epsim calibrate --kind-from +grouped_gemm:` joins
#   PART=grouped-off-grid         rows per expert off every grid point, scored with --holdout
#   PART=models                   the ops of MODELS (default configs/calib/grouped-probe.models)
# LAUNCHES separate launches (default 1; the probe was run with 2).
set -euo pipefail
: "${OUT:?set OUT}"
part=${PART:-grouped-steps}
launches=${LAUNCHES:-1}
models=()
[ "$part" = models ] && models=(--models "${MODELS:-configs/calib/grouped-probe.models}")
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/machine.txt"
cat "$OUT/machine.txt"
bin=${BIN:-}
if [ -z "$bin" ]; then
  source scripts/gpu_prelude.sh
  gpu_prelude "$OUT" epref
  bin=build-gpu/ref/epref
fi
for i in $(seq 1 "$launches"); do
  dir=$OUT/$part$([ "$launches" -gt 1 ] && echo "$i")
  t=$(date +%s)
  "$bin" --nproc 1 bench calib --out "$dir" --parts "$part" "${models[@]}" --iters 10 --warmup 3 \
    --l2-flush 256 > "$dir.log" 2>&1 || { tail -20 "$dir.log"; exit 1; }
  echo "$part launch $i: $(($(date +%s) - t)) s, $(grep -c time_us "$dir/compute.json") records"
done
