#!/usr/bin/env bash
# gpu_x2_interference.sh: one device call on a 2-GPU kind for the two interference records the DGX
# calibrations take from 2 x H200 because no H100 pair had measured them (docs/calibration.md):
#   1. compute beside copy-engine peer copies (scripts/ce_interference.py: Transformer Engine's
#      userbuffers all-gather), LAUNCHES separate processes;
#   2. compute beside an NCCL all-to-all that waits for a late peer (epref bench calib --parts
#      waiting), LAUNCHES separate launches.
# Usage: OUT=dir [LAUNCHES=3] [BIN=.devbin/epref_probe] bash scripts/gpu_x2_interference.sh
# Writes $OUT/machine.txt, $OUT/ce_<i>.json + .log, $OUT/waiting_<i>/ (interference.json, log).
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
BIN=${BIN:-.devbin/epref_probe}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvidia-smi topo -m; } \
    > "$OUT/machine.txt" 2>&1
head -2 "$OUT/machine.txt"
for i in $(seq 1 "${LAUNCHES:-3}"); do
    timeout 150 python3 scripts/ce_interference.py --out "$OUT/ce_$i.json" > "$OUT/ce_$i.log" 2>&1
    echo "ce_interference launch $i rc=$?"
    tail -4 "$OUT/ce_$i.log"
    mkdir -p "$OUT/waiting_$i"
    timeout 150 "$BIN" --nproc 2 bench calib --parts waiting --out "$OUT/waiting_$i" \
        > "$OUT/waiting_$i/calib.log" 2>&1
    echo "waiting launch $i rc=$?"
    tail -4 "$OUT/waiting_$i/calib.log"
done
