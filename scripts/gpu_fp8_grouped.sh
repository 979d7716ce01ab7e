#!/usr/bin/env bash
# FP8 expert GEMMs two ways on one GPU, in one call: Transformer Engine's default on Hopper (one
# cuBLAS FP8 GEMM per expert on four streams, tensorwise scales) and torch._scaled_grouped_mm
# (one CUTLASS grouped kernel, rowwise scales: the calibration's FP8 grouped records), over the
# same grid (scripts/torch_kernels.py, class grouped:fp8). Run through the device tool:
#   OUT=$OUT bash scripts/gpu_fp8_grouped.sh
# Writes $OUT/multistream/kernels.json, $OUT/grouped_mm/kernels.json, $OUT/probe.log.
set -euo pipefail
: "${OUT:?OUT must name the output folder}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/machine.txt"
python3 scripts/torch_kernels.py probe > "$OUT/probe.log" 2>&1
for impl in multistream grouped_mm; do
  python3 scripts/torch_kernels.py run --out "$OUT/$impl" --gpus 1 --classes grouped:fp8 \
    --grouped-impl "$impl" --repeat 0
done
