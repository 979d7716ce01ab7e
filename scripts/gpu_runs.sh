#!/usr/bin/env bash
# gpu_runs.sh: the measured run matrix of `epref run` on 2 GPUs (docs/performance.md ("epref: schedule runs")).
#   scripts/gpu_runs.sh EPREF OUTDIR [--list]
# ONLY=<extended regex> runs only the runs whose name matches (index.csv then lists those);
# EXTRA_ARGS=<flags> appends flags to every run (written into its .args).
# NPROC (default 2) ranks per run; RUNSET=h200x4 selects the 4-GPU list (below).
# For each run: OUTDIR/<name>.args (the exact flags), <name>.trace.json, <name>.summary.json,
# <name>.log, and OUTDIR/index.csv (name, iteration time, exposed communication, args).
# --list prints "name<TAB>flags" and runs nothing (used to check every schedule on a CPU).
# Model: DeepSeek-V3 widths (configs/deepseek-v3-proxy16.args: MLA, 256 experts top-8 group
# limited, shared expert, MTP 1) cut to 3 decoder layers (1 dense + 2 MoE) and sequence 2048 with
# 4 microbatches per rank, EP 2 over the 2 GPUs, so a run fits one H200 each and lasts seconds.
set -euo pipefail
EPREF=${1:?usage: gpu_runs.sh EPREF OUTDIR [--list]}
OUT=${2:?usage: gpu_runs.sh EPREF OUTDIR [--list]}
LIST=${3:-}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
# RUN_TIMEOUT (seconds, default 120) stops a run that hangs; timeout signals the whole group
export NCCL_NVLS_ENABLE=0

DSV3='@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
 --seq-length 2048 --micro-batch-size 1 --global-batch-size 8 --expert-model-parallel-size 2'
A2A='--moe-token-dispatcher-type alltoall'
DEEPEP='--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep'
# hybridep with a row budget: the runs size Hybrid-EP's buffers statically and never read the
# permuted row count on the host; that read (Megatron's default) costs 3-15% of an overlapped
# comm-bound step and varies from launch to launch (traces/h200x2/nvl-push-20261128/ab)
HEP='--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-permute-budget 16777216'
HEPF="$HEP --moe-hybridep-fuse-permute"
OV='--overlap-moe-expert-parallel-comm'
DW='--overlap-moe-expert-parallel-comm --delay-wgrad-compute'
# communication-heavy variant: small experts (moe-ffn 256), so dispatch/combine bytes per flop
# are high
CH='--moe-ffn-hidden-size 256 --moe-shared-expert-intermediate-size 256'
# communication-bound model (not DeepSeek-like): 4 MoE layers of hidden 4096 with a small
# attention (4 heads of 64) and tiny experts (64 experts top-8, moe-ffn 128): dispatch/combine
# bytes are large against the compute, where EP overlap has something to hide
CB='--num-layers 4 --hidden-size 4096 --num-attention-heads 4 --kv-channels 64
 --ffn-hidden-size 1024 --swiglu --num-experts 64 --moe-router-topk 8 --moe-ffn-hidden-size 128
 --seq-length 4096 --micro-batch-size 1 --global-batch-size 16 --padded-vocab-size 32000
 --expert-model-parallel-size 2'
HYB='@configs/hybrid-mamba-moe.args --num-layers 4 --hybrid-override-pattern M[ME]M[*E]
 --seq-length 4096 --micro-batch-size 1 --global-batch-size 8 --expert-model-parallel-size 2'
# overlap demonstration (issue 5): DeepSeek-V3 width (hidden 7168) with everything but the token
# all-to-alls made small - 16 experts top-2 of FFN 64, one attention head of 64, vocabulary 1024,
# no shared expert, no MTP - so dispatch/combine are a large share of the step and the combined
# 1F1B schedule has communication to hide (epsim predicted 1.27x on h200x2 before the run)
OVD='--num-layers 4 --moe-layer-freq 1 --hidden-size 7168 --num-attention-heads 1 --kv-channels 64
 --ffn-hidden-size 1024 --swiglu --num-experts 16 --moe-router-topk 2 --moe-ffn-hidden-size 64
 --moe-shared-expert-intermediate-size 0 --mtp-num-layers 0 --seq-length 4096 --micro-batch-size 1
 --global-batch-size 16 --padded-vocab-size 1024 --expert-model-parallel-size 2'
PP='@configs/deepseek-v3-proxy16.args --num-layers 4 --moe-layer-freq ([0]*1+[1]*3)
 --mtp-num-layers 0 --seq-length 2048 --micro-batch-size 1 --global-batch-size 4
 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2
 --expert-model-parallel-size 1'

RUNS=(
  "dsv3_alltoall_none|$DSV3 $A2A"
  "dsv3_alltoall_epov|$DSV3 $A2A $OV"
  "dsv3_alltoall_epov_dw|$DSV3 $A2A $DW"
  "dsv3_hybridep_none|$DSV3 $HEP"
  "dsv3_hybridep_epov|$DSV3 $HEP $OV"
  "dsv3_hybridep_epov_dw|$DSV3 $HEP $DW"
  "dsv3_hybridep_fused_none|$DSV3 $HEPF"
  "dsv3_hybridep_fused_epov|$DSV3 $HEPF $OV"
  "dsv3_hybridep_fused_epov_dw|$DSV3 $HEPF $DW"
  "dsv3_deepep_epov|$DSV3 $DEEPEP $OV"
  "dsv3_alltoall_sharedov|$DSV3 $A2A --moe-shared-expert-overlap"
  "dsv3_pp2_uneven|${PP/--num-virtual-stages-per-pipeline-rank 2/} $A2A
   --decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 1"
  "dsv3_commheavy_alltoall_none|$DSV3 $CH $A2A"
  "dsv3_commheavy_alltoall_epov|$DSV3 $CH $A2A $OV"
  "dsv3_hybridep_thd|$DSV3 $HEP --sequence-packing --seqlen-dist uniform"
  "dsv3_hybridep_pad_host|$DSV3 $HEP --moe-pad-mode host --moe-pad-multiple 16"
  "dsv3_hybridep_pad_device|$DSV3 $HEP --moe-pad-mode device --moe-pad-multiple 16"
  "dsv3_pp2_vpp2|$PP"
  "hybrid_mamba_moe_alltoall_epov|$HYB $A2A $OV"
  "commbound_alltoall_none|$CB $A2A"
  "commbound_alltoall_epov|$CB $A2A $OV"
  "commbound_hybridep_fused_none|$CB $HEPF"
  "commbound_hybridep_fused_epov_dw|$CB $HEPF $DW"
  "ovdemo_alltoall_none|$OVD $A2A"
  "ovdemo_alltoall_epov|$OVD $A2A $OV"
  "ovdemo_alltoall_epov_dw|$OVD $A2A $DW"
  "ovdemo_k4_alltoall_none|$OVD $A2A --moe-router-topk 4"
  "ovdemo_k4_alltoall_epov_dw|$OVD $A2A --moe-router-topk 4 $DW"
  "ovdemo_hybridep_fused_none|$OVD $HEPF"
  "ovdemo_hybridep_fused_epov_dw|$OVD $HEPF $DW"
)

# RUNSET=h200x4 (NPROC=4): the 4-GPU matrix of issue 7 on nvidia-h200-x4 (traces/h200x4/runs/):
# EP 4 with each dispatcher and overlap mode, HSDP (EP 2, Megatron FSDP sharding optim+grads+params,
# 2 optimizer instances), PP 2 x VPP 2 with EP 2, THD with hybridep padding, the overlap demo at EP 4.
if [ "${RUNSET:-h200x2}" = h200x4 ]; then
  D4='@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
   --seq-length 2048 --micro-batch-size 1 --global-batch-size 16'
  E4="$D4 --expert-model-parallel-size 4"
  RUNS=(
    "x4_dsv3_alltoall_none|$E4 $A2A"
    "x4_dsv3_alltoall_epov|$E4 $A2A $OV"
    "x4_dsv3_alltoall_epov_dw|$E4 $A2A $DW"
    "x4_dsv3_hybridep_fused_none|$E4 $HEPF"
    "x4_dsv3_hybridep_fused_epov_dw|$E4 $HEPF $DW"
    "x4_dsv3_hybridep_thd|$E4 $HEP --sequence-packing --seqlen-dist uniform"
    "x4_dsv3_hsdp_ep2|$D4 --expert-model-parallel-size 2 $A2A --use-megatron-fsdp
     --data-parallel-sharding-strategy optim_grads_params --num-distributed-optimizer-instances 2"
    "x4_dsv3_pp2_vpp2_ep2|@configs/deepseek-v3-proxy16.args --num-layers 4 --moe-layer-freq ([0]*1+[1]*3)
     --mtp-num-layers 0 --seq-length 2048 --micro-batch-size 1 --global-batch-size 8
     --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2
     --expert-model-parallel-size 2 $A2A"
    "x4_ovdemo_alltoall_none|$OVD $A2A --expert-model-parallel-size 4 --global-batch-size 32"
    "x4_ovdemo_alltoall_epov|$OVD $A2A --expert-model-parallel-size 4 --global-batch-size 32 $OV"
    "x4_ovdemo_hybridep_fused_epov_dw|$OVD $HEPF --expert-model-parallel-size 4 --global-batch-size 32 $DW"
  )
fi

# RUNSET=h200x1 (NPROC=1): one-GPU runs (EP 1) on the machine that timed the compute calibration
# (nvidia-h200, traces/h200/runs/): the simulator on the very machine its compute was measured on.
if [ "${RUNSET:-h200x2}" = h200x1 ]; then
  X1='--expert-model-parallel-size 1 --world-size 1'
  RUNS=(
    "x1_ovdemo_alltoall|$OVD $A2A $X1 --global-batch-size 8"
    "x1_commbound_alltoall|$CB $A2A $X1 --global-batch-size 8"
    "x1_dsv3_alltoall|$DSV3 $A2A $X1 --global-batch-size 4"
    "x1_dsv3_alltoall_sharedov|$DSV3 $A2A $X1 --global-batch-size 4 --moe-shared-expert-overlap"
    "x1_dsv3_alltoall_rcfull|$DSV3 $A2A $X1 --global-batch-size 4 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
    "x1_dsv3_alltoall_rcsel|$DSV3 $A2A $X1 --global-batch-size 4 --recompute-granularity selective --recompute-modules core_attn moe_act layernorm"
    "x1_hybrid_mamba_moe_alltoall|$HYB $A2A $X1 --global-batch-size 4"
  )
fi

# RUNSET=heldout2 (NPROC=2) and heldout4 (NPROC=4): models whose shapes appear in no calibration
# input (issue 24; traces/h200x{2,4}/heldout/): every width, expert count, top-k, sequence and
# pattern differs from the validation models of configs/calib/*.models, and none is a power of two
# (the shape grid of `epref bench calib` is powers of two only). REPEAT=3 launches each 3 times.
# QW: GQA attention (24 x 128, 4 groups), 48 experts top-4 of FFN 1408, sequence 3072
QW='--num-layers 4 --hidden-size 3072 --num-attention-heads 24 --group-query-attention
 --num-query-groups 4 --kv-channels 128 --ffn-hidden-size 8960 --swiglu --num-experts 48
 --moe-router-topk 4 --moe-ffn-hidden-size 1408 --seq-length 3072 --micro-batch-size 1
 --padded-vocab-size 40000'
# WD: wide (5120, 40 heads, 8 groups), 1 dense layer of FFN 13824 then MoE, 24 experts top-6 of
# FFN 2816 and a shared expert of 2816, sequence 2560
WD='--num-layers 3 --moe-layer-freq ([0]*1+[1]*2) --hidden-size 5120 --num-attention-heads 40
 --group-query-attention --num-query-groups 8 --kv-channels 128 --ffn-hidden-size 13824 --swiglu
 --num-experts 24 --moe-router-topk 6 --moe-ffn-hidden-size 2816
 --moe-shared-expert-intermediate-size 2816 --seq-length 2560 --micro-batch-size 1
 --padded-vocab-size 50000'
# NR: narrow with many small experts (2560, 20 heads of 128 MHA, 160 experts top-8 of FFN 640),
# sequence 6144
NR='--num-layers 3 --hidden-size 2560 --num-attention-heads 20 --kv-channels 128
 --ffn-hidden-size 6912 --swiglu --num-experts 160 --moe-router-topk 8 --moe-ffn-hidden-size 640
 --seq-length 6144 --micro-batch-size 1 --padded-vocab-size 36000'
# ML: the DeepSeek-V3 proxy's MLA with 96 experts top-6 of FFN 1536, sequence 3072
ML='@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
 --num-experts 96 --moe-router-topk 6 --moe-ffn-hidden-size 1536
 --moe-shared-expert-intermediate-size 1536 --seq-length 3072 --micro-batch-size 1'
# HY: the hybrid model's widths in another pattern (M*EME: attention alone, Mamba and MoE apart),
# sequence 3072
HY2='@configs/hybrid-mamba-moe.args --num-layers 5 --hybrid-override-pattern M*EME
 --seq-length 3072 --micro-batch-size 1'
if [ "${RUNSET:-h200x2}" = heldout2 ]; then
  E2='--expert-model-parallel-size 2'
  RUNS=(
    "qw_alltoall_none|$QW $E2 --global-batch-size 8 $A2A"
    "qw_alltoall_epov|$QW $E2 --global-batch-size 8 $A2A $OV"
    "qw_hybridep_fused_epov_dw|$QW $E2 --global-batch-size 8 $HEPF $DW"
    "wd_alltoall_none|$WD $E2 --global-batch-size 8 $A2A"
    "wd_deepep_epov|$WD $E2 --global-batch-size 8 $DEEPEP $OV"
    "nr_hybridep_none|$NR $E2 --global-batch-size 4 $HEP"
    "nr_alltoall_epov|$NR $E2 --global-batch-size 4 $A2A $OV"
    "ml_alltoall_none|$ML $E2 --global-batch-size 8 $A2A"
    "ml_hybridep_pad64|$ML $E2 --global-batch-size 8 $HEP --moe-pad-mode device --moe-pad-multiple 64"
    "hy_alltoall_none|$HY2 $E2 --global-batch-size 4 $A2A"
    "qw_pp2_mb8|${QW/--num-layers 4/--num-layers 6} --pipeline-model-parallel-size 2
     --expert-model-parallel-size 1 --global-batch-size 8 $A2A"
  )
fi
if [ "${RUNSET:-h200x2}" = heldout4 ]; then
  E4='--expert-model-parallel-size 4'
  RUNS=(
    "x4_qw_alltoall_none|$QW $E4 --global-batch-size 16 $A2A"
    "x4_qw_alltoall_epov|$QW $E4 --global-batch-size 16 $A2A $OV"
    "x4_qw_hybridep_fused_epov_dw|$QW $E4 --global-batch-size 16 $HEPF $DW"
    "x4_wd_alltoall_none|$WD $E4 --global-batch-size 16 $A2A"
    "x4_wd_deepep_none|$WD $E4 --global-batch-size 16 $DEEPEP"
    "x4_nr_hybridep_epov|$NR $E4 --global-batch-size 8 $HEP $OV"
    "x4_nr_alltoall_none|$NR $E4 --global-batch-size 8 $A2A"
    "x4_ml_alltoall_epov|$ML $E4 --global-batch-size 16 $A2A $OV"
    "x4_wd_hybridep_fused_epov_dw|$WD $E4 --global-batch-size 16 $HEPF $DW"
    "x4_hy_alltoall_none|$HY2 $E4 --global-batch-size 8 $A2A"
    "x4_qw_pp2_ep2|${QW/--num-layers 4/--num-layers 6} --pipeline-model-parallel-size 2
     --expert-model-parallel-size 2 --global-batch-size 16 $A2A"
  )
fi

# RUNSET=heldout1 (NPROC=1): the held-out families on one GPU (EP 1, nothing to exchange), for
# the one-H200 calibration (traces/calib/h200.json: the shape grid and the one-GPU validation
# models' shapes, none of these). epref holds no model state, so every family fits one GPU.
if [ "${RUNSET:-h200x2}" = heldout1 ]; then
  X1='--expert-model-parallel-size 1 --world-size 1'
  RUNS=(
    "x1_qw_alltoall|$QW $X1 --global-batch-size 4 $A2A"
    "x1_qw_alltoall_rcsel|$QW $X1 --global-batch-size 4 $A2A --recompute-granularity selective --recompute-modules core_attn moe_act layernorm"
    "x1_wd_alltoall|$WD $X1 --global-batch-size 4 $A2A"
    "x1_wd_alltoall_sharedov|$WD $X1 --global-batch-size 4 $A2A --moe-shared-expert-overlap"
    "x1_nr_alltoall|$NR $X1 --global-batch-size 2 $A2A"
    "x1_ml_alltoall|$ML $X1 --global-batch-size 4 $A2A"
    "x1_hy_alltoall|$HY2 $X1 --global-batch-size 4 $A2A"
  )
fi

if [ "$LIST" = "--list" ]; then
  for r in "${RUNS[@]}"; do printf '%s\t%s\n' "${r%%|*}" "$(echo ${r#*|})"; done
  exit 0
fi

mkdir -p "$OUT"
INDEX="$OUT/index.csv.tmp.$$"
echo "name,status,iteration_time_s,tokens_per_s_per_gpu,tflops_per_gpu,mfu,exposed_dispatch_s,exposed_combine_s,exposed_dp_s,exposed_pp_s,host_syncs,args" >"$INDEX"
field() { # field FILE KEY: the first numeric value of "KEY": in a summary
  grep -o "\"$2\":[-0-9.eE+]*" "$1" | head -1 | cut -d: -f2
}
for r in "${RUNS[@]}"; do
  name=${r%%|*}
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then continue; fi
  args=$(echo ${r#*|} ${EXTRA_ARGS:-}) # one line, single spaces; EXTRA_ARGS appended to every run
  echo "$args" >"$OUT/$name.args"
  echo "== $name: $args"
  # shellcheck disable=SC2086  # the flags are words; the pattern has no spaces
  if timeout -k 5 "${RUN_TIMEOUT:-120}" "$EPREF" --nproc "${NPROC:-2}" run $args --iters "$ITERS" --warmup "$WARMUP" \
      --trace "$OUT/$name.trace.json" --summary-json "$OUT/$name.summary.json" \
      >"$OUT/$name.log" 2>&1; then
    s="$OUT/$name.summary.json"
    ex() { grep -o "\"exposed_comm_s\":{[^}]*}" "$s" | grep -o "\"$1\":[-0-9.eE+]*" | cut -d: -f2; }
    echo "$name,ok,$(field "$s" iteration_time_s),$(field "$s" tokens_per_s_per_gpu),$(field "$s" tflops_per_gpu),$(field "$s" mfu),$(ex dispatch),$(ex combine),$(ex dp),$(ex pp),$(field "$s" host_syncs),\"$args\"" >>"$INDEX"
    grep -E "iteration time|exposed|dispatch |combine " "$OUT/$name.log" | head -4
  else
    echo "$name,failed,,,,,,,,,,\"$args\"" >>"$INDEX"
    tail -5 "$OUT/$name.log"
  fi
done
mv "$INDEX" "$OUT/index.csv"
echo "wrote $OUT/index.csv"
# REPEAT=N (default 1): N-1 more rounds of every run that went through, each a separate launch,
# for the run-to-run spread; round K writes only <name>.rK.summary.json and a line of repeats.csv
REP=${REPEAT:-1}
if [ "$REP" -gt 1 ]; then
  echo "name,round,iteration_time_s" >"$OUT/repeats.csv"
  for r in "${RUNS[@]}"; do
    name=${r%%|*}
    [ -f "$OUT/$name.summary.json" ] && echo "$name,1,$(field "$OUT/$name.summary.json" iteration_time_s)" >>"$OUT/repeats.csv"
  done
  for k in $(seq 2 "$REP"); do
    for r in "${RUNS[@]}"; do
      name=${r%%|*}
      [ -f "$OUT/$name.summary.json" ] || continue
      # shellcheck disable=SC2086
      if timeout -k 5 "${RUN_TIMEOUT:-120}" "$EPREF" --nproc "${NPROC:-2}" run $(cat "$OUT/$name.args") \
          --iters "$ITERS" --warmup "$WARMUP" --summary-json "$OUT/$name.r$k.summary.json" \
          >"$OUT/$name.r$k.log" 2>&1; then
        echo "$name,$k,$(field "$OUT/$name.r$k.summary.json" iteration_time_s)" >>"$OUT/repeats.csv"
      else
        echo "$name,$k," >>"$OUT/repeats.csv"
      fi
    done
  done
  echo "wrote $OUT/repeats.csv"
fi
