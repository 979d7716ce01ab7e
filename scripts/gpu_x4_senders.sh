#!/usr/bin/env bash
# gpu_x4_senders.sh: one device call on nvidia-h200-x4: test_gpu_ep at 4 GPUs, then issue 25's
# dispatch and combine benchmarks at EP 4 with more sender SMs (the fused dispatch's permute
# blocks take the rest of the 132 SMs), ROUNDS rounds of every split in turn, one launch each.
#   OUT=DIR BIN_DIR=.devbin/x4n [SENDERS="32 48 64"] [ROUNDS=2] bash scripts/gpu_x4_senders.sh
# Writes $OUT/test_gpu_ep.log, $OUT/{dispatch,combine}_s<S>_r<R>.json and .txt.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT}" "${BIN_DIR:?set BIN_DIR}"
. scripts/gpu_epref.sh
B=$BIN_DIR
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/machine.txt"
timeout 200 "$B/test_gpu_ep" > "$OUT/test_gpu_ep.log" 2>&1
echo "test_gpu_ep rc=$?"
for r in $(seq 1 "${ROUNDS:-2}"); do
    for s in ${SENDERS:-32 48 64}; do
        for bench in dispatch combine; do
            f="$OUT/${bench}_s${s}_r$r"
            timeout 120 "$B/epref" --nproc 4 bench $bench $(bench_model 4) \
                $(bench_run_flags "$s" $((132 - s))) --tokens 4096,16384 --json "$f.json" \
                > "$f.txt" 2>&1
            echo "bench $bench senders $s round $r rc=$?"
        done
    done
done
