#!/usr/bin/env bash
# gpu_x4_ceilings.sh: one device call on a 4-GPU machine for issue 25's EP 4 transfer target:
# builds epref, then runs the dispatch and combine benchmarks of the model at EP 4 (and at
# EP 2 on two of the GPUs), LAUNCHES separate launches each, with each sender-SM count of SMS: the
# routed NVLink kernels and NCCL beside the ceilings that write every peer at once
# (store_all_peers on the senders' SMs, tma_all_peers by the same SMs' TMA bulk copies,
# copy_all_peers on the copy engines; docs/metrics.md).
#   OUT=dir [LAUNCHES=2] [TOKENS=1024,4096,16384] [SMS="16 32 64"] bash scripts/gpu_x4_ceilings.sh
# SANITIZE=1 instead runs compute-sanitizer memcheck and racecheck over a small 2-rank dispatch
# and combine benchmark (the baselines' kernels included) and writes $OUT/sanitize.log.
# Writes $OUT/machine.txt, build.log and $OUT/bench.tar.gz of ep{4,2}_{dispatch,combine}_sms{S}_{k}
# .{json,txt} (one archive: the device returns a limited number of files).
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
TOKENS=${TOKENS:-1024,4096,16384}
mkdir -p "$OUT"
. scripts/gpu_prelude.sh
gpu_prelude "$OUT" epref
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck; do
    for b in dispatch combine; do
      timeout 240 compute-sanitizer --tool $tool --report-api-errors no --target-processes all \
        --error-exitcode 9 build-gpu/ref/epref --nproc 2 bench $b --hidden-size 7168 \
        --num-experts 256 --moe-router-topk 8 --expert-model-parallel-size 2 \
        --moe-ffn-hidden-size 2048 --num-sms 16 --tokens 256 --iters 2 --warmup 1 \
        > "$OUT/san_${tool}_$b.txt" 2>&1
      rc=$?
      echo "$tool $b rc=$rc" | tee -a "$OUT/sanitize.log"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|store_all|tma_all|copy_all" "$OUT/san_${tool}_$b.txt" | tail -8 \
        >> "$OUT/sanitize.log"
      rm -f "$OUT/san_${tool}_$b.txt"
    done
  done
  exit 0
fi
for k in $(seq 1 "${LAUNCHES:-2}"); do
  for ep in 4 2; do
    for sms in ${SMS:-16 32 64}; do
      for b in dispatch combine; do
        f="$OUT/ep${ep}_${b}_sms${sms}_$k"
        timeout 150 build-gpu/ref/epref --nproc $ep bench $b --hidden-size 7168 \
          --num-experts 256 --moe-router-topk 8 --expert-model-parallel-size $ep \
          --moe-ffn-hidden-size 2048 --num-sms $sms --permute-blocks 32 --reduce-blocks 8 \
          --iters 30 --warmup 5 --tokens "$TOKENS" --json "$f.json" > "$f.txt" 2>&1
        echo "ep $ep $b sms $sms launch $k rc=$? at +$(($(date +%s) - t0)) s"
      done
    done
  done
done
grep -hE "store_all|tma_all|copy_all|^ *(nvl|nccl) " "$OUT"/ep4_*_sms16_1.txt | head -30
(cd "$OUT" && tar -czf bench.tar.gz ep[24]_* && rm -f ep[24]_*)
