#!/usr/bin/env bash
# One benchmark run alternately with several epref binaries (separate launches, ROUNDS rounds):
# each figure has the others' from the same machine and minutes. gpu_ab_bench.sh does two
# binaries and the GPU tests; this one any number, no tests.
#   BINS      the directories holding each epref (e.g. ".devbin/base .devbin/a .devbin/b")
#   BENCH     dispatch (default) or combine; NPROC (default 2); ROUNDS (default 3)
#   TOKENS    --tokens list (default 128,512,4096,16384); NUM_SMS (default 16)
# Results under $OUT: ab.txt (every launch's table, tagged binary and round) and the bench JSON
# of each launch, <binary dir name>_<round>.json.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
. scripts/gpu_epref.sh
NPROC=${NPROC:-2}
MODEL=$(bench_model "$NPROC")
for r in $(seq 1 "${ROUNDS:-3}"); do
    for dir in ${BINS:?BINS}; do
        name=$(basename "$dir")
        echo "== $name $r" >> "$OUT/ab.txt"
        timeout 150 "$dir/epref" --nproc "$NPROC" bench "${BENCH:-dispatch}" $MODEL \
            $(bench_run_flags "${NUM_SMS:-16}") \
            --tokens "${TOKENS:-128,512,4096,16384}" --json "$OUT/${name}_$r.json" \
            >> "$OUT/ab.txt" 2>&1
        echo "bench $name $r rc=$?"
    done
done
