#!/usr/bin/env bash
# gpu_calib.sh: the raw calibration files of one GPU machine (docs/calibration.md), in one device
# call. Builds epref (or uses BIN_DIR/epref when its libraries resolve), then
#   epref --nproc NPROC bench calib --out $OUT/calib --models configs/calib/MODELS.models
# Usage (on the GPU machine): OUT=dir bash scripts/gpu_calib.sh MODELS NPROC
#   MODELS          h200x2 (2 x H200), h200x1 (one H200) or h100 (one H100: compute and host parts
#                   only), or a comma-separated list of such names (their model lines in turn)
#   CALIB_FLAGS     extra flags, default "--iters 10 --warmup 3 --l2-flush 256"
#   PARTS           default host,compute,comm,interference,corun (compute: the shape grid and the
#                   models' shapes; models: their shapes alone). compute.json comes back as .xz
#   EP_GIT_REVISION the revision recorded when the tree has no .git
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
MODELS=${1:?usage: gpu_calib.sh MODELS NPROC}
NPROC=${2:?usage: gpu_calib.sh MODELS NPROC}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT/calib"
. scripts/gpu_epref.sh
epref_binary "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    nvidia-smi topo -m; } > "$OUT/calib/machine.txt" 2>&1
t0=$(date +%s)
timeout 540 "$EPREF" --nproc "$NPROC" bench calib --out "$OUT/calib" \
    --models "$(echo "$MODELS" | sed 's#[^,]*#configs/calib/&.models#g')" --parts "${PARTS:-host,compute,comm,interference,corun}" \
    ${CALIB_FLAGS:---iters 10 --warmup 3 --l2-flush 256} > "$OUT/calib/calib.log" 2>&1
rc=$?
echo "bench calib rc=$rc in $(($(date +%s) - t0)) s"
grep -v "^  grid\|^  model" "$OUT/calib/calib.log" | tail -40
# committed compressed; epsim calibrate reads DIR/compute.json.xz as DIR/compute.json
[ -f "$OUT/calib/compute.json" ] && xz -9 -f "$OUT/calib/compute.json"
exit $rc
