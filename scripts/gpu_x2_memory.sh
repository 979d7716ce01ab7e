#!/usr/bin/env bash
# gpu_x2_memory.sh: one device call on 2 GPUs: builds epref and runs two validation
# configurations of traces/h200x2/runs, printing epref's summary with its measured device memory
# (docs/epref-run.md, "Memory").   OUT=dir bash scripts/gpu_x2_memory.sh
set -u -o pipefail
set -f
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
{ cmake -S . -B build-gpu -DEP_WITH_SIM=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  cmake --build build-gpu -j32 --target epref; } > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
for r in dsv3_alltoall_none dsv3_hybridep_fused_epov_dw; do
  timeout 150 build-gpu/ref/epref --nproc 2 run $(grep -v '^#' "traces/h200x2/runs/$r.args") \
    --iters 2 --warmup 1 --summary-json "$OUT/$r.summary.json" 2>&1 | tee "$OUT/$r.log" | tail -4
done
