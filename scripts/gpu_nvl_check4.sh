#!/usr/bin/env bash
# One device call for a candidate of the NVLink kernels (kernels/nvl.cu) on a 4-GPU machine: the
# GPU tests, then `epref bench` alternately with a baseline binary (gpu_ab_bench.sh) at EP 2 and
# EP 4, the flex grid's corners at EP 4 and EP 2 (tests/gpu/flex_grid.sh), and compute-sanitizer
# memcheck and racecheck on test_gpu_ep.
#   OUT=dir BIN_DIR=dir (epref, test_gpu_*) BASE=baseline epref [BENCHES="dispatch combine"]
#   [EPS="2 4"] [PERMUTE_BLOCKS="32"] [ROUNDS=2] [TOKENS=128,4096,16384] bash scripts/gpu_nvl_check4.sh
# Results: $OUT/check.log, $OUT/flex_grid.log and $OUT/ab.tgz (ep<N>_p<blocks>/ab_<bench>.txt and
# the candidate's bench JSON: the device returns only a few files per call).
set -u -o pipefail
OUT=${OUT:?OUT}
export NCCL_NVLS_ENABLE=0
tests=1
for ep in ${EPS:-2 4}; do
  for pb in ${PERMUTE_BLOCKS:-32}; do
    OUT=$OUT/ep${ep}_p$pb NPROC=$ep BENCHES=${BENCHES-dispatch combine} ROUNDS=${ROUNDS:-2} \
      TOKENS=${TOKENS:-128,4096,16384} TESTS=$tests PERMUTE_BLOCKS=$pb bash scripts/gpu_ab_bench.sh
    cat "$OUT/ep${ep}_p$pb/check.log" >> "$OUT/check.log"
    tests=0
  done
done
(cd "$OUT" && tar czf ab.tgz ep*_p* && rm -rf ep*_p*)
timeout 240 bash tests/gpu/flex_grid.sh "$BIN_DIR/epref" small > "$OUT/flex_grid.log" 2>&1
echo "flex grid rc=$?" | tee -a "$OUT/check.log"
TESTS=0 BENCHES= SANITIZERS="memcheck racecheck" bash scripts/gpu_ab_bench.sh
