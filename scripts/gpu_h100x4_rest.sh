#!/usr/bin/env bash
# gpu_h100x4_rest.sh: what the 4 x H100 calibration and validation still lacked, in one device call
# on nvidia-h100-x4 (~7 min):
#   OUT=dir [BIN=.devbin/epref_probe] [REQUIRE_GPU=H100] [LAUNCHES=3] bash scripts/gpu_h100x4_rest.sh
#   1. (4 GPUs only) the four hybridep runs of the 4-GPU matrix (scripts/gpu_runs.sh RUNSET=h200x4), which failed
#      on 2026-11-27 before the NVLink staging fix, LAUNCHES separate launches (runs_<i>/);
#   2. the NVLink transport at EP 4 and EP 2 (epref bench dispatch|combine, gpu_x4.sh's flags):
#      H100's curve for the deepep/hybridep kernels, where the H100 calibrations use a scalar;
#   3. a GEMM beside copy-engine peer copies (scripts/ce_interference.py, LAUNCHES launches): the
#      DGX calibrations' TP-overlap factor, measured so far on H200 pairs only.
# REQUIRE_GPU: exit 3 at once on another GPU. Packs $OUT/h100x4_rest.tgz after each part.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
BIN=${BIN:-.devbin/epref_probe}
W=/tmp/h4rest
rm -rf "$W"
mkdir -p "$W/bench" "$W/ce" "$OUT"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
pack() { (cd "$W" && tar czf "$OUT/h100x4_rest.tgz" .); }
. scripts/gpu_epref.sh
require_gpu gpu_h100x4_rest.sh "${REQUIRE_GPU-H100}"
NPROC=$(gpu_count 4)
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m; } > "$W/machine.txt" 2>&1
head -3 "$W/machine.txt"

for i in $(seq 1 "${LAUNCHES:-3}"); do
    [ "$NPROC" -ge 4 ] || { echo "runs: $NPROC GPUs, the 4-GPU matrix needs 4: skipped"; break; }
    RUNSET=h200x4 NPROC=$NPROC ONLY='^x4_(dsv3|ovdemo)_hybridep' RUN_TIMEOUT=90 \
        bash scripts/gpu_runs.sh "$BIN" "$W/runs_$i" > "$W/runs_$i.log" 2>&1
    echo "runs launch $i rc=$? at +$(el) s"
    cut -d, -f1-3 "$W/runs_$i/index.csv" 2>/dev/null | tail -n +2
    pack
done

for ep in $( [ "$NPROC" -gt 2 ] && echo "$NPROC") 2; do
    for b in dispatch combine; do
        timeout 60 "$BIN" --nproc "$ep" bench $b $(bench_model "$ep") \
            $(bench_run_flags) \
            --json "$W/bench/${b}_ep$ep.json" > "$W/bench/bench_${b}_ep$ep.txt" 2>&1
        echo "bench $b EP $ep rc=$? at +$(el) s"
        grep -E " (128|4096|16384) " "$W/bench/bench_${b}_ep$ep.txt" | head -8
    done
done
pack

for i in $(seq 1 "${LAUNCHES:-3}"); do
    timeout 150 python3 scripts/ce_interference.py --out "$W/ce/ce_$i.json" > "$W/ce/ce_$i.log" 2>&1
    echo "ce_interference launch $i rc=$? at +$(el) s"
    tail -4 "$W/ce/ce_$i.log"
    pack
done
ls -la "$OUT"
