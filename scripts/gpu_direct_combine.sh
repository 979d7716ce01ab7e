#!/usr/bin/env bash
# One device call for the direct fused combine (kernels/nvl.cu) on a 4-GPU machine: the GPU
# tests and the combine benchmark at EP 4 alternately with a baseline binary (gpu_ab_bench.sh),
# the flex grid's corners at EP 4 and EP 2 (tests/gpu/flex_grid.sh), then compute-sanitizer
# memcheck and racecheck on test_gpu_ep.
#   OUT=dir BIN_DIR=dir (epref, test_gpu_*) BASE=baseline epref [ROUNDS=2] bash scripts/gpu_direct_combine.sh
set -u -o pipefail
OUT=${OUT:?OUT}
export NCCL_NVLS_ENABLE=0
NPROC=4 BENCHES=combine ROUNDS=${ROUNDS:-2} TOKENS=${TOKENS:-128,4096,16384} \
  bash scripts/gpu_ab_bench.sh
timeout 240 bash tests/gpu/flex_grid.sh "$BIN_DIR/epref" small > "$OUT/flex_grid.log" 2>&1
echo "flex grid rc=$?" | tee -a "$OUT/check.log"
TESTS=0 BENCHES= SANITIZERS="memcheck racecheck" bash scripts/gpu_ab_bench.sh
