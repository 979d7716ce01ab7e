#!/usr/bin/env bash
# gpu_x4.sh: the part of issue 7 that fits the nvidia-h200-x4 kind (4 x H200), in one device call.
#   OUT=dir [BIN_DIR=dir] bash scripts/gpu_x4.sh
# Writes $OUT/x4.tgz (one file: the device tool returns at most 8) holding
#   calib/   machine.txt (nvidia-smi topo -m), comm.json, host.json, interference.json
#            (epref bench calib --parts host,comm,interference; compute is the H200's of h200x2)
#   bench/   dispatch.json, combine.json and their tables (EP 4, the issue-4 benchmark flags)
#   runs/    RUNSET=h200x4 of scripts/gpu_runs.sh (index.csv, per run .args/.trace.json/...)
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
W=/tmp/x4
mkdir -p "$W/calib" "$W/bench" "$W/runs"
. scripts/gpu_epref.sh
epref_binary "$W"
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; } \
    > "$W/calib/machine.txt" 2>&1
cat "$W/calib/machine.txt"
timeout 200 "$EPREF" --nproc 4 bench calib --out "$W/calib" --parts host,comm,interference \
    --iters 10 --warmup 3 > "$W/calib/calib.log" 2>&1
echo "calib rc=$? at +$(($(date +%s) - t0)) s"; tail -4 "$W/calib/calib.log"
MODEL=$(bench_model 4)
for b in dispatch combine; do
    timeout 120 "$EPREF" --nproc 4 bench $b $MODEL $(bench_run_flags) --json "$W/bench/$b.json" > "$W/bench/bench_$b.txt" 2>&1
    echo "bench $b rc=$? at +$(($(date +%s) - t0)) s"
    grep -E " (4096|16384) " "$W/bench/bench_$b.txt"
done
RUNSET=h200x4 NPROC=4 ITERS=${ITERS:-3} WARMUP=${WARMUP:-1} RUN_TIMEOUT=90 \
    bash scripts/gpu_runs.sh "$EPREF" "$W/runs" > "$W/runs.log" 2>&1
echo "runs rc=$? at +$(($(date +%s) - t0)) s"
cut -d, -f1-3 "$W/runs/index.csv"
(cd "$W" && tar czf "$OUT/x4.tgz" .)
