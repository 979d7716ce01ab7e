#!/usr/bin/env bash
# The project's refactor set: epsim outputs that a change of structure must leave byte-identical
# (docs/architecture.md, "Refactors"). Runs every case of the set with one epsim binary and writes
# its per-op CSV and its summary JSON (the git revision taken out) under OUT_DIR; `diff -r` of two
# such directories, one per binary, is the check.
# Usage: scripts/refactor_check.sh BUILD_DIR OUT_DIR [--quick]
#   --quick   leaves out the 256- and 1024-GPU cases (about 1 minute instead of 3 on 2 cores)
# Example: build the base revision elsewhere (git worktree add /tmp/base REV; cmake ... ), then
#   scripts/refactor_check.sh /tmp/base/build /tmp/ref-base && scripts/refactor_check.sh build /tmp/ref-new
#   diff -r /tmp/ref-base /tmp/ref-new && echo identical
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: refactor_check.sh BUILD_DIR OUT_DIR [--quick]}
out=${2:?usage: refactor_check.sh BUILD_DIR OUT_DIR [--quick]}
quick=${3:-}
epsim="$build/sim/epsim"
[ -x "$epsim" ] || { echo "refactor_check: no $epsim" >&2; exit 2; }
mkdir -p "$out"

# name | flags (dgx* and nvl72 topologies, every dispatcher and transport, THD, padding, PP/VPP,
# FSDP/HSDP, distributed-optimizer instances, TP/ETP, EP overlap and delayed wgrad)
cases=(
  "dgx8_default|--topo dgx8 --num-layers 4"
  "dgx16_default|--topo dgx16"
  "dgx16_ep16_overlap|--topo dgx16 --num-layers 4 --expert-model-parallel-size 16 --use-distributed-optimizer --overlap-grad-reduce --overlap-moe-expert-parallel-comm"
  "dgx16_ep16_overlap_dw|--topo dgx16 --num-layers 4 --expert-model-parallel-size 16 --overlap-moe-expert-parallel-comm --delay-wgrad-compute"
  "dgx16_deepep|--topo dgx16 --num-layers 4 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
  "dgx16_deepep_ep16|--topo dgx16 --num-layers 4 --expert-model-parallel-size 16 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
  "dgx16_deepep_nccl|--topo dgx16 --num-layers 4 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep --moe-flex-transport nccl"
  "dgx16_hybridep_fused_pad|--topo dgx16 --num-layers 4 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-fuse-permute --moe-pad-mode device --moe-pad-multiple 16"
  "dgx16_hybridep_thd|--topo dgx16 --num-layers 4 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --sequence-packing --seqlen-dist uniform"
  "dgx16_deepep_gpn16|--topo dgx16 --num-layers 4 --gpus-per-node 16 --expert-model-parallel-size 16 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
  "dgx16_allgather_tp2|--topo dgx16 --num-layers 4 --tensor-model-parallel-size 2 --moe-token-dispatcher-type allgather"
  "dgx16_tp2_doi2|--topo dgx16 --num-layers 4 --tensor-model-parallel-size 2 --expert-model-parallel-size 4 --use-distributed-optimizer --num-distributed-optimizer-instances 2"
  "dgx16_pp2_vpp2|--topo dgx16 --num-layers 8 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 --overlap-moe-expert-parallel-comm"
  "dgx16_fsdp|--topo dgx16 --num-layers 4 --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"
  "dgx16_hsdp|--topo dgx16 --num-layers 4 --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --num-distributed-optimizer-instances 2"
  "dgx16_hybrid_mamba|--topo dgx16 @configs/hybrid-mamba-moe.args --overlap-moe-expert-parallel-comm"
  "dgx64_deepep_ep16|--topo dgx64 --num-layers 4 --expert-model-parallel-size 16 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
  "dgx64_alltoall_ep32|--topo dgx64 --num-layers 4 --expert-model-parallel-size 32"
  "nvl72_hybridep_ep64|--topo nvl72 --world-size 64 --num-layers 4 --expert-model-parallel-size 64 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep"
  "h200x2_commbound|--topo h200x2 --num-layers 4 --expert-model-parallel-size 2 --overlap-moe-expert-parallel-comm"
)
[ "$quick" = --quick ] || cases+=(
  "dgx256_default|--topo dgx256"
  "dgx1024_default|--topo dgx1024"
)

for c in "${cases[@]}"; do
  name=${c%%|*}
  flags=${c#*|}
  # shellcheck disable=SC2086
  if ! "$epsim" $flags --csv "$out/$name.csv" --summary-json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.err"; then
    echo "refactor_check: $name failed: $(head -1 "$out/$name.err")" >&2
  fi
  [ -f "$out/$name.json" ] && sed -i -E -e 's/"git_revision": *"[^"]*"/"git_revision":""/' -e 's#"calibration_file": *"[^"]*/#"calibration_file":"#' "$out/$name.json"
  echo "$name $(awk '/iteration time/ {print $3}' "$out/$name.txt")"
done
