#!/usr/bin/env bash
# flex_grid.sh EPREF [GRID]: `epref run` with the flex dispatcher (hybridep over the NVLink
# transport) at EP 4 and EP 2 of 4 ranks over a grid of experts (16, 64, 256), top-k (2, 6, 8),
# sequence length (2048, 4096, 8192) and routing skew (uniform, Zipf 1.2); EP 2 at one sequence
# length. Every point is its own launch (1 warm-up + 1 measured iteration) and must exit 0.
# GRID=small takes the corners (experts 16/256, top-k 2/8, sequence 2048/8192). Needs 4 GPUs:
# exit 77 (skipped) with fewer. Prints one line per point: name, exit status, seconds, first error.
set -u -o pipefail
set -f # the model flags hold glob characters
epref=${1:?usage: flex_grid.sh EPREF [small|full]}
grid=${2:-full}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -ge 4 ] || { echo "flex_grid: needs 4 GPUs, found $ngpu: skipped"; exit 77; }
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
model="@configs/deepseek-v3-proxy16.args --num-layers 3 --moe-layer-freq ([0]*1+[1]*2)
  --micro-batch-size 1 --global-batch-size 8 --world-size 4 --iters 1 --warmup 1
  --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep"
exps="16 64 256"; topks="2 6 8"; seqs="2048 4096 8192"
[ "$grid" = small ] && { exps="16 256"; topks="2 8"; seqs="2048 8192"; }
fails=0 points=0
for ep in 4 2; do
  for E in $exps; do for k in $topks; do for s in $seqs; do for skew in uniform zipf; do
    [ $ep = 2 ] && [ "$s" != "${seqs%% *}" ] && continue
    routing="--routing uniform"
    [ $skew = zipf ] && routing="--routing zipf --routing-zipf-s 1.2"
    name="ep${ep}_E${E}_k${k}_s${s}_${skew}"
    t0=$(date +%s)
    timeout 180 "$epref" --nproc 4 run $model --expert-model-parallel-size $ep \
      --num-experts "$E" --moe-router-topk "$k" --seq-length "$s" $routing > "$log" 2>&1
    rc=$?
    err=$(grep -m1 -iE "error|fail|timeout|illegal|refus" "$log" | cut -c1-240)
    printf "%s\t%d\t%d\t%s\n" "$name" "$rc" "$(($(date +%s) - t0))" "$err"
    [ $rc = 0 ] || { fails=$((fails + 1)); tail -5 "$log"; }
    points=$((points + 1))
  done; done; done; done
done
echo "flex_grid: $((points - fails)) of $points points ran"
[ $fails = 0 ]
