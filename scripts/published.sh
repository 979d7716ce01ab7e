#!/usr/bin/env bash
# Simulates the published Megatron figures of ../shared/FIELD_NOTES.md section 4 that epsim can
# reproduce and prints predicted against published, as the markdown table of docs/validation.md
# ("Published figures"). Today: Qwen3-30B-A3B, 16 x H100 (dgx16), EP 16, alltoall: step time
# without EP overlap, with it, and with delayed wgrad as well (published 41.25 / 31.31 / 31.20 s).
# usage: scripts/published.sh [BUILD_DIR] [CALIB]   (CALIB: a calibration file, or "default" for
#        the topology's default calibration, or "none" for the built-in defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
calib=${2:-default}
epsim="$build/sim/epsim"
[ -x "$epsim" ] || { echo "published.sh: $epsim not built" >&2; exit 2; }
calib_flag=()
[ "$calib" = default ] || calib_flag=(--calib "$calib")

# iteration time in seconds of one epsim run (the summary's first figure)
step_time() {
  "$epsim" --topo dgx16 "${calib_flag[@]}" @configs/published/qwen3-30b-a3b-h100x16-ep16.args "$@" |
    awk '/iteration time/ {print $3; exit}'
}
base=$(step_time)
ov=$(step_time --overlap-moe-expert-parallel-comm)
dw=$(step_time --overlap-moe-expert-parallel-comm --delay-wgrad-compute)

echo "Qwen3-30B-A3B, dgx16 (16 x H100), EP 16, alltoall; calibration: $calib"
echo
echo "| case | published step s | predicted step s | published speedup | predicted speedup |"
echo "|---|---|---|---|---|"
awk -v b="$base" -v o="$ov" -v d="$dw" 'BEGIN {
  printf "| no EP overlap | 41.25 | %.2f | 1.000x | 1.000x |\n", b
  printf "| EP overlap | 31.31 | %.2f | 1.317x | %.3fx |\n", o, b / o
  printf "| EP overlap + delayed wgrad | 31.20 | %.2f | 1.322x | %.3fx |\n", d, b / d
}'
