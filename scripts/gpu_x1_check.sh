#!/usr/bin/env bash
# gpu_x1_check.sh: what one GPU can check (nvidia-h200 or nvidia-h100-x1), in one device call:
# epref and the one-GPU tests build from CUDA + NCCL + libc alone, test_gpu_kernels and
# test_gpu_graph pass, and `epref run` of a small one-rank model runs with a Megatron-LM launch
# line pasted in (flags without effect named in a note, config.ignored_flags in the summary).
#   OUT=dir [ONLY=regex] bash scripts/gpu_x1_check.sh
# With ONLY set, also the one-GPU runs of scripts/gpu_runs.sh (RUNSET=h200x1) whose names match,
# into $OUT/runs (args, trace, summary, index.csv), to be compared with `epsim compare`.
# Writes $OUT/x1_check.log; the last lines printed are a summary.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
LOG="$OUT/x1_check.log"
status=()
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > "$LOG" 2>&1
cmake -S . -B build-gpu -DEP_WITH_SIM=OFF >> "$LOG" 2>&1 &&
    cmake --build build-gpu -j16 --target epref test_gpu_kernels test_gpu_graph >> "$LOG" 2>&1
rc=$?; status+=("build rc=$rc"); [ $rc = 0 ] || { tail -40 "$LOG"; exit 1; }
timeout 150 build-gpu/tests/gpu/test_gpu_kernels >> "$LOG" 2>&1; status+=("test_gpu_kernels rc=$?")
timeout 120 build-gpu/tests/gpu/test_gpu_graph >> "$LOG" 2>&1; status+=("test_gpu_graph rc=$?")
# A one-rank run of the overlap demonstration model with flags of a Megatron-LM launch line.
timeout 120 build-gpu/ref/epref --nproc 1 run @traces/h200/runs/x1_ovdemo_alltoall.args \
    --bf16 --lr 3e-4 --use-flash-attn --moe-grouped-gemm --data-path 0.7 a 0.3 b --log-interval 1 \
    --iters 2 --warmup 1 --summary-json "$OUT/x1_run.summary.json" > "$OUT/x1_run.log" 2>&1
status+=("epref run rc=$?")
cat "$OUT/x1_run.log" >> "$LOG"
grep -h "note:" "$OUT/x1_run.log"
grep -o '"ignored_flags":"[^"]*"\|"model_state_bytes_per_gpu":[0-9.e+]*' "$OUT/x1_run.summary.json"
if [ -n "${ONLY:-}" ]; then
    RUNSET=h200x1 NPROC=1 ITERS=${ITERS:-3} WARMUP=${WARMUP:-1} ONLY="$ONLY" \
        bash scripts/gpu_runs.sh build-gpu/ref/epref "$OUT/runs" >> "$LOG" 2>&1
    status+=("runs rc=$?")
    cat "$OUT/runs/index.csv"
fi
grep -h "passed\|FAIL" "$LOG" | tail -8
printf '%s\n' "${status[@]}" | tee -a "$LOG"
