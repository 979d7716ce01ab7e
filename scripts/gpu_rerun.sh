#!/usr/bin/env bash
# gpu_rerun.sh: measures again, in one device call on a 4-GPU machine, the validation runs whose
# schedule changed (scripts/gpu_runs.sh run sets), so that traces/<machine>/runs match the
# schedule epsim builds today.
#   OUT=dir [ONLY=regex] bash scripts/gpu_rerun.sh
# On 4 x H200 (nvidia-h200-x4): the h200x4 set on all four GPUs, the h200x2 set on GPUs 0-1 and the
# h200x1 set on GPU 0 (the same H200 part and NVLink 4 as the machines that measured them first).
# On 4 x H100: the h200x4 run list on the H100s with their own NCCL, host and interference files
# (epref bench calib), into h100x4/.
# ONLY (default: the runs that use the alltoall dispatcher or EP 1 pipelines) selects run names.
# Writes $OUT/rerun.tgz holding <set>/runs/ (args, trace, summary, index.csv, runs.log), the
# machine description and the build log.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
ONLY=${ONLY:-alltoall|pp2|hsdp}
W=/tmp/rerun
mkdir -p "$W"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; } \
    > "$W/machine.txt" 2>&1
cat "$W/machine.txt" | head -6
t0=$(date +%s)
{ cmake -S . -B build-gpu -DEP_WITH_SIM=OFF && cmake --build build-gpu -j64 --target epref; } \
    > "$W/build.log" 2>&1 || { tail -40 "$W/build.log"; exit 1; }
echo "build done at +$(($(date +%s) - t0)) s"
EPREF=build-gpu/ref/epref
runset() { # runset SET NPROC DEVICES DIR
    mkdir -p "$4"
    CUDA_VISIBLE_DEVICES=$3 RUNSET=$1 NPROC=$2 ITERS=3 WARMUP=1 RUN_TIMEOUT=90 ONLY="$ONLY" \
        bash scripts/gpu_runs.sh "$EPREF" "$4" > "$4/runs.log" 2>&1
    echo "$1 rc=$? at +$(($(date +%s) - t0)) s"
    cut -d, -f1-3 "$4/index.csv"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200; then
    runset h200x4 4 0,1,2,3 "$W/h200x4/runs"
    runset h200x2 2 0,1 "$W/h200x2/runs"
    runset h200x1 1 0 "$W/h200/runs"
else
    mkdir -p "$W/h100x4/calib"
    cp "$W/machine.txt" "$W/h100x4/calib/"
    timeout 200 "$EPREF" --nproc 4 bench calib --out "$W/h100x4/calib" \
        --parts host,comm,interference --iters 10 --warmup 3 > "$W/h100x4/calib/calib.log" 2>&1
    echo "calib rc=$? at +$(($(date +%s) - t0)) s"
    ONLY=. runset h200x4 4 0,1,2,3 "$W/h100x4/runs"
fi
(cd "$W" && tar czf "$OUT/rerun.tgz" .)
