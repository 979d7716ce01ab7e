#!/usr/bin/env bash
# gpu_draw.sh: what compute ops draw toward the power cap (docs/calibration.md, "What an op
# draws"), in one device call: LAUNCHES separate launches of
#   epref --nproc 1 bench calib --parts draw --out $OUT/draw-launchN
# each with nvidia-smi's power and SM clock sampled every 100 ms beside it (power.csv).
# Usage (on the GPU machine): OUT=dir [BIN_DIR=dir] [LAUNCHES=1] [PARTS=draw] bash scripts/gpu_draw.sh
#   PARTS        draw (the whole lattice, about 8 minutes a launch) or draw-wide (its grouped GEMMs
#                of the widest FFN alone)
#   LAUNCH_TIMEOUT seconds a launch may take, default 560 (a whole `draw` launch: about 440 s, the
#                lattice without FFN 8192 338 s and `draw-wide` 103 s on one H200; one per call)
#   CALIB_FLAGS  default "--iters 5 --warmup 2 --l2-flush 256" (the cold grid's settings)
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
. scripts/gpu_epref.sh
epref_binary "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/machine.txt" 2>&1
rc=0
for l in $(seq 1 "${LAUNCHES:-1}"); do
    d="$OUT/draw-launch$l"
    mkdir -p "$d"
    nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm --format=csv -lms 100 > "$d/power.csv" 2>&1 &
    smi=$!
    t0=$(date +%s)
    timeout "${LAUNCH_TIMEOUT:-560}" "$EPREF" --nproc 1 bench calib --out "$d" --parts "${PARTS:-draw}" \
        ${CALIB_FLAGS:---iters 5 --warmup 2 --l2-flush 256} > "$d/calib.log" 2>&1
    r=$?
    kill $smi 2>/dev/null
    echo "launch $l: bench calib rc=$r in $(($(date +%s) - t0)) s"
    grep -c "^  draw" "$d/calib.log"
    tail -3 "$d/calib.log"
    [ -f "$d/power.csv" ] && xz -9 -f "$d/power.csv"
    [ $r -ne 0 ] && rc=$r
done
exit $rc
