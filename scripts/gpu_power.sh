#!/usr/bin/env bash
# gpu_power.sh: one device call measuring the power cap's slowdown on one GPU
# (scripts/sustained_clock.py --mix --recovery), LAUNCHES separate launches.
#   OUT=dir [LAUNCHES=3] [SECONDS_PER=1.5] bash scripts/gpu_power.sh
# Writes $OUT/sustained_<i>.json and $OUT/sustained_<i>.log; the calibration file
# (traces/<gpu>/torch/sustained_power.json) is these launches in one array.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | head -1
for i in $(seq 1 "${LAUNCHES:-3}"); do
  timeout 280 python3 scripts/sustained_clock.py --mix --recovery --seconds "${SECONDS_PER:-1.5}" \
    --rounds 7 > "$OUT/sustained_$i.json" 2> "$OUT/sustained_$i.log"
  echo "launch $i rc=$?"
  grep -v Warning "$OUT/sustained_$i.log" | tail -60
done
