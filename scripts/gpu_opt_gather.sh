#!/usr/bin/env bash
# gpu_opt_gather.sh: one device call on nvidia-h200-x4 for --overlap-param-gather-with-optimizer-step
# (docs/schedule.md, "Data parallel"): a MoE model with PP 2 x VPP 2 and DP 2 (EP 2), the
# distributed optimizer and overlapped gradient reduce and parameter gather, run by epref without
# and with the flag, REPEAT (2) rounds of the pair, each a separate launch. Writes
# $OUT/og_{base,opt}.{args,trace.json,summary.json,log} (round 1) and .rK.summary.json (round K),
# the layout `epsim compare` reads (docs/epsim.md, "Compare").
#   OUT=DIR BIN_DIR=.devbin/og bash scripts/gpu_opt_gather.sh
set -u -o pipefail
export NCCL_NVLS_ENABLE=0
: "${OUT:?set OUT}" "${BIN_DIR:?set BIN_DIR}"
nvidia-smi > "$OUT/machine.txt" 2>&1
ARGS="--num-layers 8 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \
--num-experts 16 --moe-router-topk 2 --moe-ffn-hidden-size 2048 --moe-layer-freq 1 --seq-length 2048 \
--micro-batch-size 1 --global-batch-size 16 --padded-vocab-size 151936 --swiglu --disable-bias-linear \
--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 --expert-model-parallel-size 2 \
--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --moe-grouped-gemm"
# shellcheck disable=SC2086  # ARGS and extra are lists of words
for r in $(seq 1 "${REPEAT:-2}"); do
    for v in base opt; do
        extra=
        [ "$v" = opt ] && extra=--overlap-param-gather-with-optimizer-step
        name="$OUT/og_$v"
        [ "$r" = 1 ] && echo $ARGS $extra > "$name.args"
        out=(--summary-json "$name.summary.json" --trace "$name.trace.json")
        [ "$r" = 1 ] || out=(--summary-json "$name.r$r.summary.json")
        timeout 150 "$BIN_DIR/epref" --nproc 4 run $ARGS $extra --iters 3 --warmup 1 "${out[@]}" \
            > "$name.r$r.log" 2>&1
        echo "og_$v round $r rc=$? $(grep -m1 'iteration time' "$name.r$r.log")"
    done
done
