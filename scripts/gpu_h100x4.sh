#!/usr/bin/env bash
# gpu_h100x4.sh: issue 21 items 4 and 5 on nvidia-h100-x4 (4 x H100), in one device call (~8 min):
#   OUT=dir [BIN_DIR=dir] [BUDGET_S=500] [EP_GIT_REVISION=rev] [REQUIRE_GPU=H100] [REPEAT=-1] \
#       [NO_TORCH=1] bash scripts/gpu_h100x4.sh
#   REQUIRE_GPU: exit 3 at once on another GPU; NO_TORCH: parts 2 and 3 only
#   1. python3 scripts/torch_kernels.py probe: one small op of each torch kernel class (API check)
#   2. epref --nproc N bench calib --parts host,comm,interference,corun: NCCL curves (alltoall,
#      all_gather, reduce_scatter, all_reduce, send), the NVLink transport nvl_a2a, host costs,
#      interference, compute beside compute (N = the GPUs present, at most 4)
#   3. epref --nproc N bench dispatch|combine at EP N (gpu_x4.sh's flags)
#   4. python3 scripts/torch_kernels.py run: the Megatron-class compute grid (cuDNN attention,
#      grouped_mm, cuBLAS, FP8 scaled_mm), one process per GPU, then the grid again in a second
#      launch (REPEAT=-1; N > 0: a subset of N items) for the run-to-run spread
# Writes $OUT/h100x4.tgz (calib/, bench/, torch/, logs) after each part, so an overrun still
# returns what was done. Unpack calib/ into traces/h100x4/calib, bench/ into traces/h100x4/bench,
# torch/ into traces/h100x4/torch; then scripts/calibrate.sh.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/out}
HERE=$(cd "$(dirname "$0")" && pwd)
BUDGET_S=${BUDGET_S:-500}
W=/tmp/h4
rm -rf "$W"
mkdir -p "$W/calib" "$W/bench" "$W/torch" "$OUT"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
pack() { (cd "$W" && tar czf "$OUT/h100x4.tgz" .); }
. scripts/gpu_epref.sh
epref_binary "$W"
require_gpu gpu_h100x4.sh "${REQUIRE_GPU:-}"
NPROC=$(gpu_count 4)
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m; python3 -c 'import torch; print("torch", torch.__version__, "cuda",
  torch.version.cuda, "cudnn", torch.backends.cudnn.version())'; } > "$W/calib/machine.txt" 2>&1
cp "$W/calib/machine.txt" "$W/torch/machine.txt"
head -6 "$W/calib/machine.txt"
echo "epref $EPREF, $NPROC GPUs, revision ${EP_GIT_REVISION:-?}"

if [ -z "${NO_TORCH:-}" ]; then
    timeout 100 python3 "$HERE/torch_kernels.py" probe > "$W/torch/probe.log" 2>&1
    echo "probe rc=$? at +$(el) s"; grep -v "^  File\|^    " "$W/torch/probe.log" | tail -25
fi

timeout 150 "$EPREF" --nproc "$NPROC" bench calib --out "$W/calib" \
    --parts host,comm,interference,corun --iters 10 --warmup 3 > "$W/calib/calib.log" 2>&1
echo "calib rc=$? at +$(el) s"
grep -E "host:|alltoall .*(1048576|67108864|1073741824) B|all_reduce .*(67108864|1073741824) B|nvl_a2a .*268435456|alone|corun" "$W/calib/calib.log"
pack

MODEL=$(bench_model "$NPROC")
for b in dispatch combine; do
    [ "$NPROC" -ge 2 ] || break
    timeout 60 "$EPREF" --nproc "$NPROC" bench $b $MODEL $(bench_run_flags) --json "$W/bench/$b.json" > "$W/bench/bench_$b.txt" 2>&1
    echo "bench $b rc=$? at +$(el) s"
    grep -E " (4096|16384) " "$W/bench/bench_$b.txt"
done
pack

[ -n "${NO_TORCH:-}" ] && { ls -la "$OUT"; exit 0; }
left=$((BUDGET_S - $(el) - 20))
echo "torch grid: $left s left for the main grid and the repeat"
timeout $((left + 30)) python3 "$HERE/torch_kernels.py" run --out "$W/torch" --gpus "$NPROC" \
    --deadline $((left - 10)) --repeat "${REPEAT:--1}" --revision "${EP_GIT_REVISION:-}" > "$W/torch/torch.log" 2>&1
echo "torch rc=$? at +$(el) s"
rm -f "$W"/torch/.items_* "$W"/torch/.shard_*
grep -v "^  File\|^    " "$W/torch/torch.log" | tail -40
pack
ls -la "$OUT"
