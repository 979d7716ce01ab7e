#!/usr/bin/env bash
# gpu_etp_check.sh: expert TP measured (one device call on a 2-GPU kind, ~2 min): the DeepSeek-V3
# proxy cut to 3 layers with TP 2, as EP 2 x ETP 1 and as EP 1 x ETP 2 (each expert's FFN split
# over both GPUs: the etp_ag / etp_rs collectives around the experts), alltoall and deepep,
# LAUNCHES separate launches each (docs/validation.md, "Expert TP").
#   OUT=dir [BIN=.devbin/epref_probe] [LAUNCHES=3] bash scripts/gpu_etp_check.sh
# Writes OUT/etp.tgz: <name>_<i>/ (run.args, trace.json, summary.json, log) and machine.txt.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
DEST=${OUT:-$PWD/out}
BIN=${BIN:-.devbin/epref_probe}
OUT=/tmp/etp
rm -rf "$OUT"
mkdir -p "$OUT" "$DEST"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt" 2>&1
head -1 "$OUT/machine.txt"
BASE='@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
 --seq-length 2048 --micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 2
 --sequence-parallel'
RUNS=(
  "tp2_ep2_etp1_alltoall|$BASE --expert-model-parallel-size 2 --expert-tensor-parallel-size 1"
  "tp2_ep1_etp2_alltoall|$BASE --expert-model-parallel-size 1 --expert-tensor-parallel-size 2"
  "tp2_ep2_etp1_deepep|$BASE --expert-model-parallel-size 2 --expert-tensor-parallel-size 1
   --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
  "tp2_ep1_etp2_allgather|$BASE --expert-model-parallel-size 1 --expert-tensor-parallel-size 2
   --moe-token-dispatcher-type allgather"
)
for i in $(seq 1 "${LAUNCHES:-3}"); do
  for entry in "${RUNS[@]}"; do
    name=${entry%%|*}
    args=$(echo ${entry#*|})
    d="$OUT/${name}_$i"
    mkdir -p "$d"
    echo "$args" > "$d/run.args"
    # shellcheck disable=SC2086
    timeout -k 5 120 "$BIN" --nproc 2 run $args --iters 3 --warmup 1 \
        --trace "$d/trace.json" --summary-json "$d/summary.json" > "$d/log" 2>&1
    echo "$name launch $i rc=$? $(grep -m1 'iteration time' "$d/log")"
  done
  (cd "$OUT" && tar czf "$DEST/etp.tgz" .)
done
