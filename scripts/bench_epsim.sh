#!/usr/bin/env bash
# Benchmarks epsim: wall time, peak RSS (/usr/bin/time -v), simulated ops per second, and scaling
# with GPU count at fixed work per GPU (the 16-layer DeepSeek-V3 proxy, EP 8, 8 microbatches per
# DP rank, on dgx16 / dgx64 / dgx256). Usage: scripts/bench_epsim.sh [BUILD_DIR] [--full]
# --full adds full DeepSeek-V3 on dgx256 and dgx1024 (minutes). Results go to stdout as a
# markdown table, ready for docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
full=0
[ "${2:-}" = "--full" ] && full=1
epsim="$build/sim/epsim"
[ -x "$epsim" ] || { echo "no $epsim: build first (cmake --build $build)" >&2; exit 2; }
timer=/usr/bin/time
[ -x "$timer" ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

echo "# epsim benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -m), $(nproc) cores, git $(git rev-parse --short HEAD 2>/dev/null || echo none)"
echo
echo "| case | GPUs | wall s | schedule s | simulation s | peak RSS MiB | ops | simulated ops/s |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
run() { # name args...
    local name=$1; shift
    local err; err=$(mktemp)
    "$timer" -v "$epsim" "$@" --stats >/dev/null 2>"$err" || { echo "| $name | failed: $(head -1 "$err") |"; rm -f "$err"; return; }
    local stats rss gpus
    stats=$(grep '^epsim stats' "$err")
    rss=$(awk -F: '/Maximum resident/ {printf "%.0f", $2/1024}' "$err")
    gpus=$(echo "$@" | sed -n 's/.*--topo \([a-z0-9]*\).*/\1/p')
    echo "$stats" | sed -E 's/.*wall ([0-9.]+) s \(schedule ([0-9.]+), simulation ([0-9.]+).*\), ([0-9]+) ops, ([0-9]+) ops\/s.*/\1 \2 \3 \4 \5/' |
        { read -r w s m o r; echo "| $name | $gpus | $w | $s | $m | $rss | $o | $r |"; }
    rm -f "$err"
}
run "proxy16 default" --topo dgx16
for t in dgx16 dgx64 dgx256; do
    run "proxy16 EP8 fixed work/GPU" --topo $t --expert-model-parallel-size 8
done
if [ $full = 1 ]; then
    run "DeepSeek-V3" --topo dgx256 @configs/deepseek-v3.args
    run "DeepSeek-V3" --topo dgx1024 @configs/deepseek-v3.args
fi
