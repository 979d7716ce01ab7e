#!/usr/bin/env bash
# Regenerates the validation table of docs/validation.md from the committed measured runs:
# `epsim compare` on every traces/<machine>/runs/<name>.args, on a CPU machine.
# usage: scripts/validate.sh [BUILD_DIR] [RUNS_DIR] [SCATTER_PNG]
#   (defaults: build, traces/h200x2/runs; with SCATTER_PNG also draws predicted vs measured with epplot)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-traces/h200x2/runs}
epsim="$build/sim/epsim"
png=${3:-}
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
echo "name,measured_s,predicted_s" >"$csv"
[ -x "$epsim" ] || { echo "validate.sh: $epsim not built" >&2; exit 2; }
echo "| run | measured s | predicted s | error | op median | op p90 |"
echo "|---|---|---|---|---|---|"
sum=0; n=0; worst=0
for args in "$runs"/*.args; do
  run=${args%.args}
  out=$("$epsim" compare "$run")
  line=$(printf '%s\n' "$out" | grep -m1 '  iteration time')
  meas=$(printf '%s\n' "$line" | awk '{print $4}')
  pred=$(printf '%s\n' "$line" | awk '{for (i=1;i<=NF;i++) if ($i=="predicted") print $(i+1)}')
  err=$(printf '%s\n' "$line" | awk '{print $NF}')
  ops=$(printf '%s\n' "$out" | grep -m1 'per op:')
  med=$(printf '%s\n' "$ops" | awk '{for (i=1;i<=NF;i++) if ($i=="median") print $(i+1)}')
  p90=$(printf '%s\n' "$ops" | awk '{for (i=1;i<=NF;i++) if ($i=="p90") print $(i+1)}')
  echo "| $(basename "$run") | $meas | $pred | $err | $med | $p90 |"
  echo "$(basename "$run"),$meas,$pred" >>"$csv"
  a=$(printf '%s\n' "$err" | tr -d '%+-')
  sum=$(awk -v s="$sum" -v a="$a" 'BEGIN{print s+a}')
  worst=$(awk -v w="$worst" -v a="$a" 'BEGIN{print (a>w)?a:w}')
  n=$((n + 1))
done
awk -v s="$sum" -v n="$n" -v w="$worst" \
  'BEGIN{printf "\n%d runs: mean absolute iteration-time error %.1f%%, worst %.1f%%\n", n, s/n, w}'
if [ -n "$png" ]; then
  "$build/plots/epplot" scatter --runs "$csv" --title "epsim (default calibration) vs epref, 2 x H200" -o "$png"
fi
