#!/usr/bin/env bash
# Benchmarks epsim (docs/performance.md): wall and CPU time split into schedule build and
# simulation (epsim --stats), peak RSS (/usr/bin/time -v when present, else epsim's getrusage),
# simulated ops per second, and the scaling of the simulation with GPU count at fixed work per GPU
# (the 16-layer DeepSeek-V3 proxy, EP 8, 8 microbatches per DP rank, on dgx16 / dgx64 / dgx256 /
# dgx1024).
# Usage: scripts/bench_epsim.sh [BUILD_DIR] [--full] [--overlap] [--repeat N]
#   --full      adds full DeepSeek-V3 (configs/deepseek-v3.args, PP 1) on dgx256 (default layout:
#               EP 8) and on dgx1024 (EP 8, then EP 64), one run each (about 10 minutes)
#   --overlap   adds the EP-overlap cases of issue 23, all-to-alls across nodes (N runs each):
#               Qwen3-235B-A22B on dgx256 with TP 2, PP 8 (12 | 12x6 | 10 layers, VPP 2), EP 32
#               over 4 nodes, DP 16, deepep, 128 microbatches per DP rank, without and with
#               --overlap-moe-expert-parallel-comm; DeepSeek-V3 on dgx1024 with EP 64 and overlap
#   --repeat N  runs of each proxy and overlap case (default 3); the table shows medians
# Results go to stdout as markdown tables, ready for docs/performance.md. On a shared machine,
# compare the CPU columns: wall times include waiting for the CPU (the load is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
full=0
overlap=0
repeat=3
while [ $# -gt 0 ]; do
    case $1 in
    --full) full=1 ;;
    --overlap) overlap=1 ;;
    --repeat)
        repeat=$2
        shift
        ;;
    *) build=$1 ;;
    esac
    shift
done
epsim="$build/sim/epsim"
[ -x "$epsim" ] || { echo "no $epsim: build first (cmake --build $build)" >&2; exit 2; }
timer=
[ -x /usr/bin/time ] && timer="/usr/bin/time -v"

echo "# epsim benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -m), $(nproc) cores," \
    "git $(git rev-parse --short HEAD 2>/dev/null || echo none), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| case | GPUs | runs | wall s | schedule s | simulation s | sim CPU s | CPU s | peak RSS MiB | ops | simulated ops/s | SimGrid waits |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# GPUs -> medians of the fixed-work series: simulation CPU s, whole-run wall s, simulation system CPU s
declare -A SIMCPU WALL SIMSYS
run() {           # name runs args...
    local name=$1 runs=$2
    shift 2
    local err rows="" gpus
    err=$(mktemp)
    gpus=$(echo "$@" | sed -n 's/.*--topo dgx\([0-9]*\).*/\1/p')
    for _ in $(seq "$runs"); do
        # shellcheck disable=SC2086
        # the whole step: this times the engine, not the sampling of a large step
        if ! $timer "$epsim" "$@" --sample-microbatches 0 --stats >/dev/null 2>"$err"; then
            echo "| $name | $gpus | failed: $(grep -m1 epsim "$err" || head -1 "$err") |"
            rm -f "$err"
            return
        fi
        # wall total schedule simulation ops opsps waits cpu_sim rss
        local w c k rss
        w=$(sed -nE 's/^epsim stats: wall ([0-9.]+) s \(schedule ([0-9.]+), simulation ([0-9.]+).*\), ([0-9]+) ops, ([0-9]+) ops\/s.* ([0-9]+) SimGrid waits.*/\1 \2 \3 \4 \5 \6/p' "$err")
        c=$(sed -nE 's/^epsim stats: cpu ([0-9.]+) s .*simulation ([0-9.]+),.*peak RSS ([0-9]+) MiB.*/\2 \3 \1/p' "$err")
        k=$(sed -nE 's/^epsim stats: system cpu .*simulation ([0-9.]+),.*/\1/p' "$err")
        rss=$(awk -F: '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$err")
        [ -n "$rss" ] || rss=$(echo "$c" | cut -d' ' -f2)
        local cpu_all=${c##* }
        c=${c% *}
        rows+="$w ${c%% *} $rss $k $cpu_all"$'\n'
    done
    rm -f "$err"
    col() { echo -n "$rows" | awk -v k="$1" 'NF {print $k}' | median; }
    local ops
    ops=$(col 4)
    echo "| $name | $gpus | $runs | $(col 1) | $(col 2) | $(col 3) | $(col 7) | $(col 10) | $(col 8) | $ops |" \
        "$(awk -v o="$ops" -v s="$(col 3)" 'BEGIN {printf "%.0f", o / s}') | $(col 6) |"
    [ "$name" = "proxy16 EP8 fixed work/GPU" ] && SIMCPU[$gpus]=$(col 7) && WALL[$gpus]=$(col 1) &&
        SIMSYS[$gpus]=$(col 9)
    return 0
}
for t in dgx16 dgx64 dgx256 dgx1024; do
    run "proxy16 EP8 fixed work/GPU" "$repeat" --topo $t --expert-model-parallel-size 8
done
if [ $full = 1 ]; then
    run "DeepSeek-V3 EP 8 (default layout)" 1 --topo dgx256 @configs/deepseek-v3.args
    run "DeepSeek-V3 EP 8 (default layout)" 1 --topo dgx1024 @configs/deepseek-v3.args
    run "DeepSeek-V3 EP 64" 1 --topo dgx1024 @configs/deepseek-v3.args --expert-model-parallel-size 64
fi
if [ $overlap = 1 ]; then
    qwen="--topo dgx256 @configs/qwen3-235b-a22b.args --tensor-model-parallel-size 2 --sequence-parallel
          --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 2
          --decoder-first-pipeline-num-layers 12 --decoder-last-pipeline-num-layers 10
          --expert-model-parallel-size 32 --expert-tensor-parallel-size 1 --global-batch-size 2048
          --micro-batch-size 1 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"
    # shellcheck disable=SC2086
    run "Qwen3-235B TP2 PP8 VPP2 EP32 deepep" "$repeat" $qwen
    # shellcheck disable=SC2086
    run "Qwen3-235B TP2 PP8 VPP2 EP32 deepep, EP overlap" "$repeat" $qwen \
        --overlap-moe-expert-parallel-comm
    run "DeepSeek-V3 EP 64, EP overlap" "$repeat" --topo dgx1024 @configs/deepseek-v3.args \
        --expert-model-parallel-size 64 --overlap-moe-expert-parallel-comm
fi
echo
echo "Scaling at fixed work per GPU (whole-run wall s and simulation CPU s, of which the kernel's"
echo "system time, mostly first-touch page faults; linear = x4 per step):"
echo
echo "| GPUs | wall s | x previous | simulation CPU s | x previous | of which system s | simulation per GPU ms |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
ratio() { [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}' || echo -; }
prev= prevw=
for g in 16 64 256 1024; do
    s=${SIMCPU[$g]:-}
    w=${WALL[$g]:-}
    [ -n "$s" ] || continue
    echo "| $g | $w | $(ratio "$w" "$prevw") | $s | $(ratio "$s" "$prev") | ${SIMSYS[$g]:-} |" \
        "$(awk -v a="$s" -v g="$g" 'BEGIN {printf "%.2f", 1000 * a / g}') |"
    prev=$s prevw=$w
done
