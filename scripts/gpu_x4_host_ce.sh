#!/usr/bin/env bash
# gpu_x4_host_ce.sh: one device call on a 4-GPU kind (nvidia-h100-x4) for two parts measured
# elsewhere only on H200s or on fewer ranks:
#   1. Megatron-Core's layers' host time on 4 ranks (scripts/megatron_host.py --nproc 4): the
#      one-rank layers, EP 2 and EP 4 in one launch, every call's own time kept (calls_us), so the
#      wait of a host sync for the slowest of 2 and of 4 hosts is seen against one host's spread;
#   2. the copy-engine interference (scripts/ce_interference.py, GPUs 0 and 1), LAUNCHES times as
#      separate processes.
# Usage: OUT=dir [LAUNCHES=3] bash scripts/gpu_x4_host_ce.sh
# Needs .devbin/megatron.tar.xz (a Megatron-LM checkout's megatron/ package, carried; not
# committed). Writes $OUT/host_megatron_x4.json, $OUT/megatron_host.log, $OUT/ce_*.json + logs.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mg=$(mktemp -d)
tar -xJf .devbin/megatron.tar.xz -C "$mg" || { echo "no .devbin/megatron.tar.xz"; exit 2; }
MEGATRON=$(dirname "$(find "$mg" -maxdepth 3 -type d -name megatron | head -1)")
export MEGATRON_REV=${MEGATRON_REV:-d98e8a64dd}
timeout 420 python3 scripts/megatron_host.py --megatron "$MEGATRON" --out "$OUT/host_megatron_x4.json" \
    --nproc 4 --layers dense_sdpa,moe_sdpa,dense_sdpa_tp2,moe_sdpa_ep2,moe_sdpa_ep4 \
    --passes "${PASSES:-2}" > "$OUT/megatron_host.log" 2>&1
echo "megatron_host rc=$?"
grep -v Warning "$OUT/megatron_host.log" | grep -v "^\s*$" | tail -30
for i in $(seq 1 "${LAUNCHES:-3}"); do
    timeout 150 python3 scripts/ce_interference.py --out "$OUT/ce_$i.json" > "$OUT/ce_$i.log" 2>&1
    echo "ce_interference launch $i rc=$?"
    tail -6 "$OUT/ce_$i.log"
done
