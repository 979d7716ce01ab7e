#!/usr/bin/env bash
# How far a sampled step (epsim --sample-microbatches N) is from the whole step, on the cases of
# the published-results suite (configs/published/suite.tsv) and on any argument files given as
# "TOPO WORLD FILE" triples: each case simulated whole, then from the steps of N = 2 x PP and
# 2N microbatches per pipeline where it has more than 2N; prints a markdown table (the iteration
# time both ways, its difference, the idle and exposed-communication differences as shares of the
# step, wall seconds and peak RSS of each) and the largest differences (docs/epsim.md, "Sampled
# steps").
# usage: scripts/sample_accuracy.sh [BUILD_DIR] [TOPO WORLD FILE ...]
#        ONLY=REGEX runs the suite's cases whose name matches (NONE: none of them).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-build}
shift || true
epsim="$build/sim/epsim"
[ -x "$epsim" ] || { echo "sample_accuracy.sh: $epsim not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cases="$tmp/cases"
: > "$cases"
while IFS=$'\t' read -r name args topo world _; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then continue; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$topo" "$world" "configs/published/$args" >> "$cases"
done < configs/published/suite.tsv
while [ $# -ge 3 ]; do
  printf '%s\t%s\t%s\t%s\n' "$(basename "$3" .args)" "$1" "$2" "$3" >> "$cases"
  shift 3
done

# run OUT ARGS...: epsim with --summary-json OUT and --stats; prints "wall_s rss_mib" (its stats)
run() {
  local out=$1
  shift
  "$epsim" "$@" --stats --summary-json "$out" > "$tmp/stdout" 2> "$tmp/stderr" || return 1
  awk '/^epsim stats: wall/ {w = $4} /^epsim stats: cpu/ {for (i = 1; i < NF; i++) if ($i == "RSS") r = $(i + 1)}
       END {printf "%.1f %s\n", w, r}' "$tmp/stderr"
}
# num FILE KEY: a number of the summary JSON (KEY "a" or "a.b")
num() {
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[k]
print(d)' "$1" "$2"
}

echo "| case | GPUs | microbatches | N | whole s | sampled s | difference | idle, exposed: largest difference (share of the step) | wall s whole / sampled | peak RSS MiB whole / sampled |"
echo "|---|---|---|---|---|---|---|---|---|---|"
worst=0 worst_part=0 n=0
while IFS=$'\t' read -r name topo world file; do
  if ! w=$(run "$tmp/whole.json" --topo "$topo" @"$file" --world-size "$world" --sample-microbatches 0); then
    echo "sample_accuracy.sh: $name: $(head -1 "$tmp/stderr")" >&2
    continue
  fi
  pp=$(num "$tmp/whole.json" config.pipeline_model_parallel_size)
  mb=$(num "$tmp/whole.json" microbatches)
  N=$((2 * pp))
  if [ "$mb" -le $((2 * N)) ]; then
    echo "sample_accuracy.sh: $name: $mb microbatches, not more than 2N = $((2 * N)): nothing to sample" >&2
    continue
  fi
  if ! s=$(run "$tmp/sampled.json" --topo "$topo" @"$file" --world-size "$world" --sample-microbatches "$N"); then
    echo "sample_accuracy.sh: $name sampled: $(head -1 "$tmp/stderr")" >&2
    continue
  fi
  line=$(python3 -c 'import json,sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
T = a["iteration_time_s"]
d = 100 * (b["iteration_time_s"] / T - 1)
parts = [("idle", a["idle_s"], b["idle_s"])] + [(k, a["exposed_comm_s"][k], b["exposed_comm_s"][k]) for k in ("dispatch", "combine", "dp", "pp", "total")]
k, x, y = max(parts, key=lambda p: abs(p[2] - p[1]))
print("%.6f\t%.6f\t%+.4f%%\t%s %+.4f%%\t%.4f\t%.4f" % (T, b["iteration_time_s"], d, k, 100 * (y - x) / T, abs(d), abs(100 * (y - x) / T)))' "$tmp/whole.json" "$tmp/sampled.json")
  IFS=$'\t' read -r tw ts d part ad ap <<< "$line"
  # shellcheck disable=SC2086  # "wall rss": two words
  set -- $w
  ww=$1 rw=$2
  # shellcheck disable=SC2086
  set -- $s
  echo "| $name | $world | $mb | $N | $tw | $ts | $d | $part | $ww / $1 | $rw / $2 |"
  worst=$(awk -v a="$worst" -v b="$ad" 'BEGIN {print (b > a) ? b : a}')
  worst_part=$(awk -v a="$worst_part" -v b="$ap" 'BEGIN {print (b > a) ? b : a}')
  n=$((n + 1))
done < "$cases"
echo
echo "$n cases sampled: iteration time within ${worst}% of the whole step; idle and exposed communication within ${worst_part}% of the step."
