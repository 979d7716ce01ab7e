#!/usr/bin/env bash
# gpu_megatron_host.sh: one device call timing Megatron-Core's own layers' host costs
# (scripts/megatron_host.py) beside eager PyTorch's (scripts/torch_host.py), on one GPU.
#   OUT=dir MEGATRON=dir bash scripts/gpu_megatron_host.sh
# MEGATRON: a Megatron-LM checkout (the megatron/ package), carried to the GPU machine; nothing of
# it is committed. Writes $OUT/host_megatron.json, megatron_host.log, host_torch.json.
# APPEND_TO=file: $OUT/host_megatron.json is that file with this run added as its next launch
# (traces/h100/torch/host_megatron.json holds seven so; epsim calibrate takes the medians).
# NPROC=2 LAYERS=a,b PASSES=n: the layers with communication on two GPUs (megatron_host.py --nproc)
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
MEGATRON=${MEGATRON:?set MEGATRON to a Megatron-LM checkout}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
append=()
if [ -n "${APPEND_TO:-}" ]; then cp "$APPEND_TO" "$OUT/host_megatron.json" && append=(--append); fi
timeout 300 python3 scripts/megatron_host.py --megatron "$MEGATRON" --out "$OUT/host_megatron.json" \
    "${append[@]}" --nproc "${NPROC:-1}" --layers "${LAYERS:-}" --passes "${PASSES:-1}" \
    > "$OUT/megatron_host.log" 2>&1
echo "megatron_host rc=$?"
grep -v Warning "$OUT/megatron_host.log" | tail -40
timeout 120 python3 scripts/torch_host.py --out "$OUT/host_torch.json" > "$OUT/torch_host.log" 2>&1
echo "torch_host rc=$?"
grep -v Warning "$OUT/torch_host.log" | tail -8
