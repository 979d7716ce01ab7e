#!/usr/bin/env bash
# gpu_x4_push.sh: one device call on nvidia-h200-x4 for the NVLink transport as one kernel
# (ep_nvl_push, 2026-11-28) at EP 4: test_gpu_ep, the transport curve `epref --nproc 4 bench calib
# --parts nvl` (the nvl_a2a records the 4 x H200 calibrations read first), and dispatch / combine
# at EP 4 with issue 25's flags (two launches each).
#   OUT=DIR BIN_DIR=.devbin/x4 bash scripts/gpu_x4_push.sh
# With SENDERS="32 48 64": test_gpu_ep, then instead of the rest dispatch and combine at 4096 and
# 16384 tokens with each count of sender SMs (the fused dispatch's permute blocks take the rest of
# the 132 SMs), ROUNDS (2) rounds of every split in turn, one launch each:
# $OUT/{dispatch,combine}_s<S>_r<R>.{json,txt}.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT}" "${BIN_DIR:?set BIN_DIR}"
. scripts/gpu_epref.sh
B=$BIN_DIR
machine_and_ep_test "$OUT" "$B"
if [ -n "${SENDERS:-}" ]; then
    for r in $(seq 1 "${ROUNDS:-2}"); do
        for s in $SENDERS; do
            for bench in dispatch combine; do
                f="$OUT/${bench}_s${s}_r$r"
                timeout 120 "$B/epref" --nproc 4 bench $bench $(bench_model 4) \
                    $(bench_run_flags "$s" $((132 - s))) --tokens 4096,16384 --json "$f.json" \
                    > "$f.txt" 2>&1
                echo "bench $bench senders $s round $r rc=$?"
            done
        done
    done
    exit 0
fi
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
