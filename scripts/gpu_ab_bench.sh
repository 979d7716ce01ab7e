#!/usr/bin/env bash
# One device call: the GPU tests of a candidate epref, then one benchmark run alternately with a
# baseline binary and the candidate (separate launches, ROUNDS rounds), so each figure has its
# baseline from the same machine and minutes. Results under $OUT: check.log, ab_<bench>.txt (every
# launch's table, tagged base/new and round), <bench>_new_<round>.json.
#   BIN_DIR   the candidate's epref and test_gpu_* (built elsewhere, same toolchain)
#   BASE      the baseline epref
#   BENCHES   dispatch and/or combine (default combine; empty: none); NPROC (default 2); ROUNDS (default 3)
#   SANITIZERS  default none; e.g. "memcheck racecheck" 
#   TOKENS    --tokens list (default 128,512,4096,16384); TESTS=0 skips the GPU tests
#   PERMUTE_BLOCKS  --permute-blocks (default 32; 116 with 16 senders: every SM of an H100/H200)
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=${BIN_DIR:?BIN_DIR}
BASE=${BASE:?BASE}
BENCHES=${BENCHES-combine}
NPROC=${NPROC:-2}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-128,512,4096,16384}
. scripts/gpu_epref.sh
MODEL=$(bench_model "$NPROC")
FLAGS="$(bench_run_flags 16 "${PERMUTE_BLOCKS:-32}") --tokens $TOKENS"
LOG=$OUT/check.log
{ nvidia-smi -L; } >> "$LOG" 2>&1
[ "${TESTS:-1}" = 1 ] && gpu_tests "$B" "$LOG"
for BENCH in $BENCHES; do
    for r in $(seq 1 "$ROUNDS"); do
        for who in base new; do
            bin=$BASE; [ $who = new ] && bin=$B/epref
            json=/dev/null; [ $who = new ] && json=$OUT/${BENCH}_new_$r.json
            echo "== $who round $r" >> "$OUT/ab_$BENCH.txt"
            timeout 150 "$bin" --nproc "$NPROC" bench "$BENCH" $MODEL $FLAGS --json "$json" \
                >> "$OUT/ab_$BENCH.txt" 2>&1
            echo "bench $BENCH $who $r rc=$?" | tee -a "$LOG"
        done
    done
done
for tool in ${SANITIZERS:-}; do
    timeout 200 compute-sanitizer --tool "$tool" --report-api-errors no --target-processes all \
        --error-exitcode 9 "$B/test_gpu_ep" > "$OUT/san.log" 2>&1
    echo "$tool rc=$?" | tee -a "$LOG"
    { echo "== $tool (tail)"; tail -c 3000 "$OUT/san.log"; } >> "$LOG"
    rm -f "$OUT/san.log"
done
