#!/usr/bin/env bash
# gpu_nvl_push.sh: what a change of `epref run`'s NVLink transport (ep_nvl_push, the deepep /
# hybridep all-to-alls) must measure again, on a 2-GPU machine (NPROC=4: the 4 x H200 sets), one
# PHASE per device call:
#   OUT=dir BIN_DIR=dir BASE=dir [NPROC=2|4] PHASE=check|runs|heldout bash scripts/gpu_nvl_push.sh
#   check    the GPU tests of BIN_DIR's binaries; then the transport's calibration records
#            (`bench calib --parts nvl`, nvl_a2a) of BIN_DIR's epref and, as the same call's
#            baseline, BASE's (`--parts comm`: its NCCL curves too) -> $OUT/calib_{new,base}/
#   runs     the deepep / hybridep runs (ONLY: another regex of run names) of scripts/gpu_runs.sh's
#            2 x H200 set -> $OUT/runs.tgz
#   heldout  those of the held-out set (RUNSET=heldout2|4), REPEAT launches each (default 3)
#            -> $OUT/heldout.tgz
#   ab       the runs of ONLY (default the fused overlap runs) with BASE's epref and BIN_DIR's, with
#            and without a row budget (--moe-permute-budget: no host read of the row count), two
#            rounds -> $OUT/ab.tgz (ab/<binary>_<budget|sync>_<round>/ of gpu_runs.sh)
#   both     runs, then heldout, in one call
# The run tarballs unpack over traces/h200x2/runs and traces/h200x2/heldout (index.csv and
# repeats.csv hold only these runs: merge them into the committed ones).
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
B=${BIN_DIR:?BIN_DIR}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; } \
    > "$OUT/machine.txt" 2>&1
t0=$(date +%s)
. scripts/gpu_epref.sh
case "${PHASE:?PHASE}" in
check)
    gpu_tests "$B" "$OUT/tests.log"
    for who in new base; do
        bin=$B/epref parts=nvl
        [ $who = base ] && bin=${BASE:?BASE}/epref parts=comm
        mkdir -p "$OUT/calib_$who"
        cp "$OUT/machine.txt" "$OUT/calib_$who/"
        timeout 240 "$bin" --nproc 2 bench calib --out "$OUT/calib_$who" --parts $parts \
            --iters 10 --warmup 3 > "$OUT/calib_$who/calib.log" 2>&1
        echo "calib $who rc=$? at +$(($(date +%s) - t0)) s"
        grep nvl_a2a "$OUT/calib_$who/calib.log"
    done
    (cd "$OUT" && tar czf check.tgz calib_new calib_base tests.log machine.txt && rm -rf calib_* tests.log)
    ;;
runs | heldout)
    W=/tmp/nvl_push/$PHASE
    mkdir -p "$W"
    n=${NPROC:-2}
    set=h200x$n rep=1
    [ "$PHASE" = heldout ] && set=heldout$n rep=${REPEAT:-3}
    RUNSET=$set NPROC=$n ITERS=3 WARMUP=1 RUN_TIMEOUT=90 REPEAT=$rep ONLY="${ONLY:-deepep|hybridep}" \
        timeout "${BUDGET_S:-540}" bash scripts/gpu_runs.sh "$B/epref" "$W" > "$W/runs.log" 2>&1
    echo "$PHASE rc=$? at +$(($(date +%s) - t0)) s"
    cut -d, -f1-3 "$W/index.csv" 2>/dev/null
    cat "$W/repeats.csv" 2>/dev/null
    cp "$OUT/machine.txt" "$W/"
    (cd "$W" && tar czf "$OUT/$PHASE.tgz" .)
    ;;
both)
    PHASE=runs bash "$0" && PHASE=heldout bash "$0"
    ;;
ab)
    W=/tmp/nvl_push/ab
    for r in 1 2; do
        for who in base new; do
            bin=$B/epref
            [ $who = base ] && bin=${BASE:?BASE}/epref
            for mode in sync budget; do
                extra=
                # gpu_runs.sh's hybridep runs have a row budget; sync: without it
                [ $mode = sync ] && extra="--moe-permute-budget 0"
                d=$W/${who}_${mode}_$r
                mkdir -p "$d"
                EXTRA_ARGS="$extra" RUNSET=h200x2 NPROC=2 ITERS=3 WARMUP=1 RUN_TIMEOUT=90 \
                    ONLY="${ONLY:-fused_epov_dw}" bash scripts/gpu_runs.sh "$bin" "$d" > "$d/runs.log" 2>&1
                echo "== $who $mode $r"
                cut -d, -f1,3 "$d/index.csv" | tail -n +2
            done
        done
    done
    cp "$OUT/machine.txt" "$W/"
    (cd "$W" && tar czf "$OUT/ab.tgz" .)
    ;;
*)
    echo "gpu_nvl_push.sh: PHASE is check, runs, heldout, both or ab" >&2
    exit 2
    ;;
esac
