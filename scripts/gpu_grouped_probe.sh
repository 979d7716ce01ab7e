#!/usr/bin/env bash
# gpu_grouped_probe.sh: one GPU, `OUT=$OUT bash scripts/gpu_grouped_probe.sh` (BIN=.devbin/epref
# built here and carried, or BIN unset: build-gpu). Times configs/calib/grouped-probe.models'
# ops (`epref bench calib --parts models`, the grid's settings: 10 iterations, 3 warm-up, 256 MiB
# flushed from L2) in LAUNCHES separate launches (default 2) -> $OUT/probe{1,2}/compute.json.
set -euo pipefail
: "${OUT:?set OUT}"
launches=${LAUNCHES:-2}
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
  t=$(date +%s)
  "$bin" --nproc 1 bench calib --out "$OUT/probe$i" --parts models \
    --models configs/calib/grouped-probe.models --iters 10 --warmup 3 --l2-flush 256 \
    > "$OUT/probe$i.log" 2>&1 || { tail -20 "$OUT/probe$i.log"; exit 1; }
  echo "launch $i: $(($(date +%s) - t)) s, $(grep -c time_us "$OUT/probe$i/compute.json") records"
done
