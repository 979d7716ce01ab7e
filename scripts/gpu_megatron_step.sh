#!/usr/bin/env bash
# gpu_megatron_step.sh: one device call timing the host time of Megatron-Core's step tail
# (finalize, optimizer step, zeroing; scripts/megatron_step_host.py) on one GPU, twice as separate
# processes (launch-to-launch spread).
#   OUT=dir MEGATRON=dir-or-tar.xz bash scripts/gpu_megatron_step.sh
# MEGATRON: a Megatron-LM checkout (holding megatron/) or a .tar.xz of one, carried to the GPU
# machine; nothing of it is committed. Writes $OUT/step_megatron.json (the launches one after
# another, each appended as its next launch) and a log per launch.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/out}
MEGATRON=${MEGATRON:?set MEGATRON to a Megatron-LM checkout or tarball}
LAUNCHES=${LAUNCHES:-2}
mkdir -p "$OUT"
if [ -f "$MEGATRON" ]; then
    dir=$(mktemp -d) && tar -xJf "$MEGATRON" -C "$dir" && MEGATRON=$dir
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
lscpu | grep -E "Model name|^CPU\(s\)" | tee "$OUT/cpu.txt"
for i in $(seq 1 "$LAUNCHES"); do
    timeout 280 python3 scripts/megatron_step_host.py --megatron "$MEGATRON" \
        --out "$OUT/step_megatron.json" --append ${MODELS:+--models "$MODELS"} \
        ${STACK:+--stack "$STACK"} > "$OUT/step_megatron_$i.log" 2>&1
    echo "launch $i rc=$?"
    grep -E "distopt=1 (tail|step)|dense_sdpa|failed|Error" "$OUT/step_megatron_$i.log" | tail -40
done
