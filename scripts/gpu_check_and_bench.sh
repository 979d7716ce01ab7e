#!/usr/bin/env bash
# One device call for epref I (issue 4): build (or use prebuilt binaries), GPU tests,
# the dispatch/combine(/gemm) benchmarks, then compute-sanitizer on the 2-rank test. Everything
# lands under $OUT (at most 7 files: check.log, build.log, bench_*.txt, *.json); the last lines
# printed are a short summary. Usage (on the 2 x H200 machine): bash scripts/gpu_check_and_bench.sh
#   BIN_DIR=dir     epref and the test_gpu_* binaries built elsewhere (same toolchain); used
#                   when every library they need resolves, else the script builds
#   BENCHES=list    default "dispatch combine gemm"
#   SANITIZERS=list default "memcheck racecheck" (slow: last)
#   EP_GIT_REVISION the revision recorded when the tree has no .git
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
LOG="$OUT/check.log"
. scripts/gpu_epref.sh
MODEL=$(bench_model 2)
BENCH_FLAGS=${BENCH_FLAGS:-$(bench_run_flags)}
BENCHES=${BENCHES:-"dispatch combine gemm"}
SANITIZERS=${SANITIZERS:-"memcheck racecheck"}
status=()
t0=$(date +%s)
stamp() { echo "== $1 at +$(($(date +%s) - t0)) s" >> "$LOG"; }

{ nvidia-smi; nvidia-smi topo -m; } > "$LOG" 2>&1
EPREF=build-gpu/ref/epref TK=build-gpu/tests/gpu/test_gpu_kernels TE=build-gpu/tests/gpu/test_gpu_ep
TG=build-gpu/tests/gpu/test_gpu_graph TO=build-gpu/tests/gpu/test_gpu_overlap
if [ -n "${BIN_DIR:-}" ] && [ -x "$BIN_DIR/epref" ] &&
    ! ldd "$BIN_DIR/epref" "$BIN_DIR/test_gpu_ep" "$BIN_DIR/test_gpu_kernels" | grep -q "not found"; then
    EPREF=$BIN_DIR/epref TK=$BIN_DIR/test_gpu_kernels TE=$BIN_DIR/test_gpu_ep
    TG=$BIN_DIR/test_gpu_graph TO=$BIN_DIR/test_gpu_overlap
    status+=("build: prebuilt binaries from $BIN_DIR")
else
    cmake -S . -B build-gpu -DEP_WITH_SIM=OFF > "$OUT/build.log" 2>&1 &&
        cmake --build build-gpu -j16 --target epref test_gpu_kernels test_gpu_ep \
            test_gpu_graph test_gpu_overlap >> "$OUT/build.log" 2>&1
    rc=$?; status+=("build rc=$rc"); [ $rc = 0 ] || { tail -40 "$OUT/build.log"; exit 1; }
fi
stamp "tests"
timeout 120 "$TK" >> "$LOG" 2>&1; status+=("test_gpu_kernels rc=$?")
timeout 150 "$TE" >> "$LOG" 2>&1; status+=("test_gpu_ep rc=$?")
timeout 120 "$TG" >> "$LOG" 2>&1; status+=("test_gpu_graph rc=$?")
timeout 150 "$TO" >> "$LOG" 2>&1; status+=("test_gpu_overlap rc=$?")

for b in $BENCHES; do
    stamp "bench $b"
    timeout 120 "$EPREF" --nproc 2 bench $b $MODEL $BENCH_FLAGS --json "$OUT/$b.json" \
        > "$OUT/bench_$b.txt" 2>&1
    status+=("bench $b rc=$?")
done

# Sanitizers: the 2-rank test (NVLink kernels included); children of the launcher are followed.
for tool in $SANITIZERS; do
    stamp "$tool"
    timeout 150 compute-sanitizer --tool $tool --report-api-errors no --target-processes all --error-exitcode 9 \
        "$TE" > "$OUT/san.log" 2>&1
    status+=("$tool rc=$?")
    { echo "== $tool (tail)"; tail -c 6000 "$OUT/san.log"; } >> "$LOG"; rm -f "$OUT/san.log"
done
stamp "end"

grep -h "passed\|FAIL" "$LOG" | tail -12
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$LOG" | sort | uniq -c
for b in $BENCHES; do grep -v "^#" "$OUT/bench_$b.txt" | grep -E " (4096|16384) "; done
printf '%s\n' "${status[@]}" | tee -a "$LOG"
