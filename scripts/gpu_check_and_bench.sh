#!/usr/bin/env bash
# One device call for epref I (issue 4): build, GPU tests, compute-sanitizer on the NVLink
# kernels, then the dispatch/combine/gemm benchmarks. Everything lands under $OUT; the last lines
# printed are a short summary. Usage (on the 2 x H200 machine): bash scripts/gpu_check_and_bench.sh
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
MODEL="--hidden-size 7168 --num-experts 256 --moe-router-topk 8 --expert-model-parallel-size 2 --moe-ffn-hidden-size 2048"
BENCH_FLAGS=${BENCH_FLAGS:-"--num-sms 16 --permute-blocks 32 --reduce-blocks 8 --iters 30 --warmup 5"}
status=()

{ nvidia-smi; nvidia-smi topo -m; } > "$OUT/machine.txt" 2>&1
cmake -S . -B build-gpu -DEP_WITH_SIM=OFF > "$OUT/build.log" 2>&1 &&
    cmake --build build-gpu -j16 --target epref test_gpu_kernels test_gpu_ep >> "$OUT/build.log" 2>&1
rc=$?; status+=("build rc=$rc"); [ $rc = 0 ] || { tail -40 "$OUT/build.log"; exit 1; }

(cd build-gpu && timeout 150 ctest -L gpu --output-on-failure) > "$OUT/ctest.log" 2>&1
status+=("ctest rc=$?")

# Sanitizers: the 2-rank test (NVLink kernels included); children of the launcher are followed.
for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --report-api-errors no --target-processes all --error-exitcode 9 \
        build-gpu/tests/gpu/test_gpu_ep > "$OUT/sanitizer_$tool.log" 2>&1
    status+=("$tool rc=$?")
    tail -c 12000 "$OUT/sanitizer_$tool.log" > "$OUT/sanitizer_$tool.tail"; rm -f "$OUT/sanitizer_$tool.log"
done

for b in dispatch combine gemm; do
    timeout 90 build-gpu/ref/epref --nproc 2 bench $b $MODEL $BENCH_FLAGS --json "$OUT/$b.json" \
        > "$OUT/bench_$b.txt" 2>&1
    status+=("bench $b rc=$?")
done

grep -h "passed\|FAIL\|Skipped\|tests passed" "$OUT/ctest.log" | tail -8
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$OUT"/sanitizer_*.tail | sort | uniq -c
for b in dispatch combine gemm; do grep -v "^#" "$OUT/bench_$b.txt" | grep -E " (4096|16384) " ; done
printf '%s\n' "${status[@]}"
