#!/usr/bin/env bash
# gpu_host_reference.sh: one device call comparing this machine's host with an H100 DGX's. Runs
# scripts/megatron_host.py LAUNCHES times (separate processes, one machine): Megatron-Core's
# dense_sdpa and moe_sdpa layers beside the reference call whose host time Transformer Engine
# issue 2053 published for an H100 DGX (one torch.nn.Linear forward, 2048 wide, 8192 tokens).
#   OUT=dir MCORE_TAR=megatron-core.tar.xz bash scripts/gpu_host_reference.sh
# MCORE_TAR: megatron/ of a Megatron-LM checkout as a tar.xz (carried; nothing of it is
# committed). Writes $OUT/host_reference.json (one launch per process), host_reference.log,
# lscpu.txt, machine.txt.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
MCORE_TAR=${MCORE_TAR:?set MCORE_TAR to a tar.xz of megatron/}
mkdir -p "$OUT"
src=$(mktemp -d)
tar -xJf "$MCORE_TAR" -C "$src" || exit 1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
  python3 -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/machine.txt" 2>&1
lscpu > "$OUT/lscpu.txt" 2>&1
cat "$OUT/machine.txt"; grep -m1 "Model name" "$OUT/lscpu.txt"
for i in $(seq 1 "${LAUNCHES:-3}"); do
  append=(); [ "$i" -gt 1 ] && append=(--append)
  timeout 200 python3 scripts/megatron_host.py --megatron "$src" --out "$OUT/host_reference.json" \
    "${append[@]}" --layers "${LAYERS:-dense_sdpa,moe_sdpa}" --repeat "${REPEAT:-7}" --iters 30 \
    >> "$OUT/host_reference.log" 2>&1
  echo "launch $i rc=$?"
done
grep -v Warning "$OUT/host_reference.log" | grep -E "us host" | tail -24
