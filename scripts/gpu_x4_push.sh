#!/usr/bin/env bash
# gpu_x4_push.sh: one device call on nvidia-h200-x4 for the NVLink transport as one kernel
# (ep_nvl_push, 2026-11-28) at EP 4: test_gpu_ep, the transport curve `epref --nproc 4 bench calib
# --parts nvl` (the nvl_a2a records the 4 x H200 calibrations read first), and dispatch / combine
# at EP 4 with issue 25's flags (two launches each).
#   OUT=DIR BIN_DIR=.devbin/x4 bash scripts/gpu_x4_push.sh
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT}" "${BIN_DIR:?set BIN_DIR}"
. scripts/gpu_epref.sh
B=$BIN_DIR
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/machine.txt"
timeout 200 "$B/test_gpu_ep" > "$OUT/test_gpu_ep.log" 2>&1
echo "test_gpu_ep rc=$?"
timeout 200 "$B/epref" --nproc 4 bench calib --out "$OUT/nvl" --parts nvl --iters 10 --warmup 3 \
    > "$OUT/nvl.log" 2>&1
echo "calib nvl rc=$?"
for r in 1 2; do
    for bench in dispatch combine; do
        timeout 150 "$B/epref" --nproc 4 bench $bench $(bench_model 4) $(bench_run_flags 16) \
            --tokens 128,512,4096,16384 --json "$OUT/${bench}_$r.json" > "$OUT/${bench}_$r.txt" 2>&1
        echo "bench $bench $r rc=$?"
    done
done
