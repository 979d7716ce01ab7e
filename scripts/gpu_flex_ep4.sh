#!/usr/bin/env bash
# gpu_flex_ep4.sh: one device call on a 4-GPU machine (nvidia-h100-x4 / nvidia-h200-x4) for the
# flex dispatcher's NVLink transport at EP 4: builds epref and the GPU tests, runs every GPU test
# (ctest label gpu, which holds tests/gpu/flex_grid.sh on the grid's corners), then the failing
# runs of issue 25 (the issue's model at EP 4, and the 4-GPU validation runs that failed on H100)
# with their summaries, and the whole flex grid while BUDGET_S seconds last. With BENCH_TOKENS set,
# the dispatch and combine benchmarks of issue 25 at EP 4 run first (right after the build).
#   OUT=dir [BUDGET_S=540] [BENCH_TOKENS=128,4096,16384] bash scripts/gpu_flex_ep4.sh
# Writes $OUT/machine.txt, build.log, bench_{dispatch,combine}.{txt,json}, gpu_tests.log, runs.tsv,
# *.summary.json, grid.tsv.
set -u -o pipefail
set -f # the model flags hold glob characters
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
. scripts/gpu_prelude.sh
. scripts/gpu_epref.sh
gpu_prelude "$OUT"
EPREF=build-gpu/ref/epref
if [ -n "${BENCH_TOKENS:-}" ]; then # the issue's model and flags (docs/performance.md, EP 4)
  for b in dispatch combine; do
    timeout 150 "$EPREF" --nproc 4 bench $b $(bench_model 4) $(bench_run_flags) --tokens "$BENCH_TOKENS" \
      --json "$OUT/bench_$b.json" > "$OUT/bench_$b.txt" 2>&1
    echo "bench $b rc=$? at +$(($(date +%s) - t0)) s"
  done
fi
(cd build-gpu && timeout 400 ctest -L gpu -V --timeout 300) > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at +$(($(date +%s) - t0)) s"
grep -E "Test +#|tests passed|tests failed|flex_grid:|^ep[24]_" "$OUT/gpu_tests.log" | tail -40

DSV3="@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)"
HEP="--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep"
runs=(
  "issue_ep4_hybridep|$DSV3 --num-experts 64 --moe-router-topk 6 --seq-length 4096 --micro-batch-size 1 --global-batch-size 16 --expert-model-parallel-size 4 $HEP"
  "issue_ep4_deepep|$DSV3 --num-experts 64 --moe-router-topk 6 --seq-length 4096 --micro-batch-size 1 --global-batch-size 16 --expert-model-parallel-size 4 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
  "x4_dsv3_hybridep_fused_none|$DSV3 --seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --expert-model-parallel-size 4 $HEP --moe-hybridep-fuse-permute"
  "x4_dsv3_hybridep_fused_epov_dw|$DSV3 --seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --expert-model-parallel-size 4 $HEP --moe-hybridep-fuse-permute --overlap-moe-expert-parallel-comm --delay-wgrad-compute"
  "x4_dsv3_hybridep_thd|$DSV3 --seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --expert-model-parallel-size 4 $HEP --sequence-packing --seqlen-dist uniform"
)
for r in "${runs[@]}"; do
  name=${r%%|*}; flags=${r#*|}
  s=$(date +%s)
  timeout 180 "$EPREF" --nproc 4 run $flags --summary-json "$OUT/$name.summary.json" \
    > "$OUT/run.log" 2>&1
  rc=$?
  it=$(grep -m1 "iteration time" "$OUT/run.log" | awk '{print $3}')
  printf "%s\t%d\t%ds\t%s\t%s\n" "$name" "$rc" "$(($(date +%s) - s))" "${it:-}" \
    "$(grep -m1 -iE 'error|fail|timeout' "$OUT/run.log" | cut -c1-200)" | tee -a "$OUT/runs.tsv"
done
left=$((BUDGET_S - ($(date +%s) - t0)))
if [ $left -gt 120 ]; then
  timeout $left bash tests/gpu/flex_grid.sh "$EPREF" full > "$OUT/grid.tsv" 2>&1
  echo "full grid rc=$? at +$(($(date +%s) - t0)) s: $(tail -1 "$OUT/grid.tsv")"
fi
