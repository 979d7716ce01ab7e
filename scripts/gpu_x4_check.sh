#!/usr/bin/env bash
# gpu_x4_check.sh: one device call on a 4-GPU machine (nvidia-h100-x4 / nvidia-h200-x4): builds
# epref and the GPU tests there, runs every GPU test (ctest label gpu: test_gpu_run includes
# deepep at EP 2 on 4 ranks, two NVLink groups, and the refusal of a cross-node EP group), then
# times the PyTorch stack's host costs (scripts/torch_host.py, docs/calibration.md).
#   OUT=dir bash scripts/gpu_x4_check.sh
# Writes $OUT/machine.txt, build.log, gpu_tests.log, host_torch.json, torch_host.log.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
. scripts/gpu_prelude.sh
gpu_prelude "$OUT"
(cd build-gpu && timeout 420 ctest -L gpu -V --timeout 300) > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at +$(($(date +%s) - t0)) s"
grep -E "Test +#|tests passed|FAIL|deepep_ep2_of4|events checked|test_gpu_run:" "$OUT/gpu_tests.log" | tail -30
timeout 180 python3 scripts/torch_host.py --out "$OUT/host_torch.json" > "$OUT/torch_host.log" 2>&1
echo "torch_host rc=$? at +$(($(date +%s) - t0)) s"
cat "$OUT/torch_host.log"
