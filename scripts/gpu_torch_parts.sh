#!/usr/bin/env bash
# gpu_torch_parts.sh: one device call timing the parts of Megatron's training step that run
# PyTorch / Triton code epref does not have, on one GPU:
#   - Megatron's unfused MoE permutation (scripts/megatron_permute.py -> $OUT/permute.json)
#   - the Mamba-2 mixer between its projections (scripts/mamba_scan.py -> $OUT/mamba.json)
#   - the MoE activations and TEGroupedMLP's fc2 bias loop (scripts/megatron_expert_extras.py ->
#     $OUT/expert_extras_<k>.json, LAUNCHES=k of them)
#   OUT=dir MEGATRON=dir MAMBA=dir bash scripts/gpu_torch_parts.sh
# MEGATRON: a Megatron-LM checkout (its megatron/ package); MAMBA: a directory holding the
# mamba_ssm package (its Triton ops). Both are carried to the GPU machine; nothing of either is
# committed. ONLY=permute|mamba|extras runs one of the three. (The copy-engine interference needs two GPUs:
# python3 scripts/ce_interference.py --out FILE, on a 2-GPU kind.)
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1
want() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }
if want permute; then
  timeout 240 python3 scripts/megatron_permute.py --megatron "${MEGATRON:?set MEGATRON}" \
      --out "$OUT/permute.json" > "$OUT/permute.log" 2>&1
  echo "megatron_permute rc=$?"
  grep -v Warning "$OUT/permute.log" | tail -20
fi
if want mamba; then
  timeout 300 python3 scripts/mamba_scan.py --mamba "${MAMBA:?set MAMBA}" \
      --out "$OUT/mamba.json" > "$OUT/mamba.log" 2>&1
  echo "mamba_scan rc=$?"
  grep -v Warning "$OUT/mamba.log" | tail -24
fi
if want extras; then # LAUNCHES separate processes: expert_extras_1.json, _2, ...
  for k in $(seq 1 "${LAUNCHES:-1}"); do
    timeout 300 python3 scripts/megatron_expert_extras.py --megatron "${MEGATRON:?set MEGATRON}" \
        --out "$OUT/expert_extras_$k.json" > "$OUT/expert_extras_$k.log" 2>&1
    echo "megatron_expert_extras launch $k rc=$?"
    grep -v Warning "$OUT/expert_extras_$k.log" | tail -64
  done
fi
