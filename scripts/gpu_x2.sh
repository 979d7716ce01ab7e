#!/usr/bin/env bash
# gpu_x2.sh: what waits for the nvidia-h200-x2 kind (2 x H200), in one device call (~10 min):
#   OUT=dir [BIN_DIR=dir] [PART=all|calib|runs] bash scripts/gpu_x2.sh
#   - test_gpu_run, whose deepep / hybridep cases run the NVLink transport of epref run;
#   - the full calibration with the host ahead and the caches flushed (compute of the validation
#     models and of the one-GPU runs, host, NCCL, the nvl_a2a transport curve, interference), on
#     the machine that runs the validation runs (docs/calibration.md, "The committed calibrations");
#   - the validation matrix again (scripts/gpu_runs.sh, 30 runs), deepep/hybridep over NVLink.
# Writes $OUT/x2.tgz (one file: the device tool returns at most 8) holding calib/, runs/ and the
# logs, after each part; unpack calib/ into traces/h200x2/calib and runs/ into traces/h200x2/runs, then
# scripts/calibrate.sh (with traces/h200x2/calib first for h200x2) and scripts/validate.sh.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
W=/tmp/x2
mkdir -p "$W/calib" "$W/runs"
EPREF=build-gpu/ref/epref
TESTRUN=build-gpu/tests/gpu/test_gpu_run
if [ -n "${BIN_DIR:-}" ] && [ -x "$BIN_DIR/epref" ] && ! ldd "$BIN_DIR/epref" | grep -q "not found"; then
    EPREF=$BIN_DIR/epref
    TESTRUN=$BIN_DIR/test_gpu_run
else
    { cmake -S . -B build-gpu -DEP_WITH_SIM=OFF &&
        cmake --build build-gpu -j32 --target epref test_gpu_run; } \
        > "$W/build.log" 2>&1 || { tail -40 "$W/build.log"; exit 1; }
fi
t0=$(date +%s)
part=${PART:-all}
if [ "$part" != runs ]; then
    timeout 150 "$TESTRUN" "$EPREF" > "$W/test_gpu_run.log" 2>&1
    echo "test_gpu_run rc=$? at +$(($(date +%s) - t0)) s"; grep -E "FAIL|events checked" "$W/test_gpu_run.log"
    OUT="$W" BIN_DIR="$(dirname "$EPREF")" timeout 420 bash scripts/gpu_calib.sh h200x2,h200x1 2
    echo "calib rc=$? at +$(($(date +%s) - t0)) s"
    (cd "$W" && tar czf "$OUT/x2.tgz" .) # what is done comes back even if the runs overrun
fi
if [ "$part" != calib ]; then
    ITERS=${ITERS:-3} WARMUP=${WARMUP:-1} RUN_TIMEOUT=90 \
        bash scripts/gpu_runs.sh "$EPREF" "$W/runs" > "$W/runs.log" 2>&1
    echo "runs rc=$? at +$(($(date +%s) - t0)) s"
    cut -d, -f1-3 "$W/runs/index.csv"
fi
(cd "$W" && tar czf "$OUT/x2.tgz" .)
