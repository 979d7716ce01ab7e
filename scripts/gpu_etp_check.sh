#!/usr/bin/env bash
# gpu_etp_check.sh: expert TP measured (one device call on a 2- or 4-GPU kind, ~2 min): the
# DeepSeek-V3 proxy cut to 3 layers with TP 2, as EP x ETP 1 and EP x ETP 2 (each expert's FFN
# split over two GPUs: the etp_ag / etp_rs collectives around the experts), alltoall, deepep and
# allgather, LAUNCHES separate launches each (docs/validation.md, "Expert TP").
#   OUT=dir [BIN=.devbin/epref_probe] [LAUNCHES=3] [NPROC=2|4] bash scripts/gpu_etp_check.sh
# NPROC=4: EP 4 x ETP 1 against EP 2 x ETP 2 (two ETP groups whose EP groups draw their own routing).
# Writes OUT/etp.tgz: <name>_<i>/ (run.args, trace.json, summary.json, log) and machine.txt.
set -u -o pipefail
. scripts/gpu_epref.sh
gpu_scratch /tmp/etp
OUT=/tmp/etp
BASE='@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
 --seq-length 2048 --micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 2
 --sequence-parallel'
NPROC=${NPROC:-2}
# EP:ETP:dispatcher of each run; 4 GPUs: prefix x4_ and 16 sequences (DP 2)
LAYOUTS="2:1:alltoall 1:2:alltoall 2:1:deepep 1:2:allgather"
PREFIX=
if [ "$NPROC" = 4 ]; then
  LAYOUTS="4:1:alltoall 2:2:alltoall 2:2:deepep 2:2:allgather"
  PREFIX=x4_
  BASE="$BASE --global-batch-size 16"
fi
RUNS=()
for l in $LAYOUTS; do
  IFS=: read -r ep etp disp <<<"$l"
  flags="--expert-model-parallel-size $ep --expert-tensor-parallel-size $etp"
  case $disp in
    deepep) flags="$flags --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep" ;;
    allgather) flags="$flags --moe-token-dispatcher-type allgather" ;;
  esac
  RUNS+=("${PREFIX}tp2_ep${ep}_etp${etp}_$disp|$BASE $flags")
done
for i in $(seq 1 "${LAUNCHES:-3}"); do
  for entry in "${RUNS[@]}"; do
    name=${entry%%|*}
    args=$(echo ${entry#*|})
    d="$OUT/${name}_$i"
    mkdir -p "$d"
    echo "$args" > "$d/run.args"
    # shellcheck disable=SC2086
    timeout -k 5 120 "$BIN" --nproc "$NPROC" run $args --iters 3 --warmup 1 \
        --trace "$d/trace.json" --summary-json "$d/summary.json" > "$d/log" 2>&1
    echo "$name launch $i rc=$? $(grep -m1 'iteration time' "$d/log")"
  done
  (cd "$OUT" && tar czf "$DEST/etp.tgz" .)
done
