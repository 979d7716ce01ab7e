#!/usr/bin/env bash
# gpu_behind_gemm.sh: one device call on nvidia-h200-x2 for a kernel reached on a second stream
# while a GEMM runs (docs/epsim.md, "Execution model"): scripts/kernel_behind_gemm.py twice (two
# launches, one GPU; BEHIND_LAUNCHES=0 skips it), then epref runs of two held-out EP-overlap models with and without
# --high-priority-a2a-comm-stream, ROUNDS (2) rounds of each pair, one launch each (skipped on a
# one-GPU machine).
#   OUT=DIR BIN_DIR=.devbin/behind bash scripts/gpu_behind_gemm.sh
# Files: $OUT/behind_{1,2}.json; $OUT/runs.tar holding runs/<name>{,_hp}.r<R>.{summary.json,trace.json.xz,log}.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
: "${OUT:?set OUT}" "${BIN_DIR:?set BIN_DIR}"
mkdir -p "$OUT/runs"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/machine.txt" 2>&1
for l in $(seq 1 "${BEHIND_LAUNCHES:-2}"); do
    timeout 150 python3 scripts/kernel_behind_gemm.py --out "$OUT/behind_$l.json" \
        > "$OUT/behind_$l.txt" 2>&1
    echo "kernel_behind_gemm launch $l rc=$?"; tail -16 "$OUT/behind_$l.txt"
done
ngpu=$(nvidia-smi -L | wc -l)
[ "$ngpu" -ge 2 ] || { echo "one GPU: no epref runs"; exit 0; }
for r in $(seq 1 "${ROUNDS:-2}"); do
    for name in wd_deepep_epov qw_alltoall_epov; do
        args=$(cat "traces/h200x2/heldout/$name.args")
        for hp in "" _hp; do
            flag=; [ -n "$hp" ] && flag=--high-priority-a2a-comm-stream
            f="$OUT/runs/$name$hp.r$r"
            # shellcheck disable=SC2086  # the flags are words
            timeout -k 5 120 "$BIN_DIR/epref" --nproc 2 run $args $flag --iters 3 --warmup 1 \
                --trace "$f.trace.json" --summary-json "$f.summary.json" > "$f.log" 2>&1
            echo "$name$hp round $r rc=$? $(grep -o '"iteration_time_s":[0-9.e+-]*' "$f.summary.json")"
            xz -9 "$f.trace.json" 2>/dev/null
        done
    done
done
# one file: the device tool returns a limited number of files per call
tar -C "$OUT" -cf "$OUT/runs.tar" runs && rm -rf "$OUT/runs"
