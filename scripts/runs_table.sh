#!/usr/bin/env bash
# The results table of measured epref runs (docs/performance.md, "epref: schedule runs"), from the
# committed files only: RUNS_DIR/index.csv, <name>.summary.json and <name>.trace.json[.xz].
#   scripts/runs_table.sh RUNS_DIR [NAME_REGEX]
# Columns: median iteration time; min-max of the measured iterations; model TFLOPS/GPU; EP transfer
# time (per dispatch/combine collective, from its last member's start to its last member's end,
# summed per rank, mean over ranks); exposed dispatch + combine (the summary's, epsim's
# definition); exposed as a share of the transfer time; exposed dp and pp; host syncs per
# iteration (all ranks). Then the overlap speedups of the *_none / *_epov* pairs it finds.
set -euo pipefail
runs=${1:?usage: runs_table.sh RUNS_DIR [NAME_REGEX]}
only=${2:-.}
command -v jq >/dev/null || { echo "runs_table.sh: needs jq" >&2; exit 2; }
[ -f "$runs/index.csv" ] || { echo "runs_table.sh: no $runs/index.csv" >&2; exit 2; }

# EP transfer seconds of one trace (committed plain or as .xz: xz -dcf reads both): mean over
# ranks of the summed instance spans
ep_transfer() {
  local t=$1
  [ -f "$t" ] || t=$t.xz
  xz -dcf "$t" | jq -r '[(.traceEvents // .)[] | select(.ph == "X" and (.args.kind == "a2a_dispatch" or
          .args.kind == "a2a_combine"))]
         | group_by(.name)
         | map({span: ((map(.ts + .dur) | max) - (map(.ts) | max)), n: length})
         | (map(.span * .n) | add // 0) / ([.[].n] | max // 1) / 1e6'
}

printf '| run | iteration s | range s | TFLOPS/GPU | EP transfer ms | exposed d+c ms | exposed / transfer | exposed dp ms | exposed pp ms | host syncs |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for name in $(tail -n +2 "$runs/index.csv" | cut -d, -f1 | sort); do
  [[ $name =~ $only ]] || continue
  s="$runs/$name.summary.json"
  [ -f "$s" ] || continue
  xfer=$(ep_transfer "$runs/$name.trace.json")
  jq -r --arg n "$name" --argjson x "$xfer" '
    (.exposed_comm_s.dispatch + .exposed_comm_s.combine) as $e
    | "| \($n) | \(.iteration_time_s * 1e4 | round / 1e4) | \(.iteration_times_s | min * 1e4 | round / 1e4)-\(.iteration_times_s | max * 1e4 | round / 1e4) | \(.tflops_per_gpu | round) | \($x * 1e4 | round / 10) | \($e * 1e5 | round / 100) | \(if $x > 0 then "\($e / $x * 100 | round)%" else "-" end) | \(.exposed_comm_s.dp * 1e4 | round / 10) | \(.exposed_comm_s.pp * 1e4 | round / 10) | \(.host_syncs) |"' "$s"
done

echo
echo "Overlap speedup (iteration time without overlap / with):"
for none in "$runs"/*_none.summary.json; do
  base=$(basename "$none" _none.summary.json)
  [[ $base =~ $only ]] || continue
  t0=$(jq .iteration_time_s "$none")
  for ov in "$runs/${base}"_epov*.summary.json; do
    [ -f "$ov" ] || continue
    t1=$(jq .iteration_time_s "$ov")
    awk -v a="$t0" -v b="$t1" -v n="$(basename "$ov" .summary.json)" -v m="${base}_none" \
      'BEGIN { printf "  %s / %s: %.5f / %.5f = %.3fx\n", m, n, a, b, a / b }'
  done
done
