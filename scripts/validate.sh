#!/usr/bin/env bash
# Regenerates the validation tables of docs/validation.md from the committed measured runs:
# `epsim compare` on every traces/<machine>/runs/<name>.args, on a CPU machine, with the
# calibration the run's topology names (traces/calib/<machine>.json; CALIB=FILE or none to
# override).
# usage: scripts/validate.sh [BUILD_DIR] [RUNS_DIR] [SCATTER_PNG]
#   (defaults: build, traces/h200x2/runs; with SCATTER_PNG also draws predicted vs measured with epplot)
# CALIB_GRID=FILE adds a column: the iteration error with that calibration too (the grid-only one,
# docs/validation.md "Held out"). Where RUNS_DIR has repeats.csv (runs launched several times,
# scripts/gpu_runs.sh REPEAT=N), a column gives each run's spread over its launches, (max - min) /
# median of the iteration times, and the error against the median of the launches.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-traces/h200x2/runs}
epsim="$build/sim/epsim"
png=${3:-}
calib=()
[ -n "${CALIB:-}" ] && calib=(--calib "$CALIB")
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
echo "name,measured_s,predicted_s" >"$csv"
[ -x "$epsim" ] || { echo "validate.sh: $epsim not built" >&2; exit 2; }
kinds="gemm grouped_gemm attention a2a_dispatch a2a_combine"
# the token all-to-alls again, timed from the last EP member's start to each rank's end ("after
# arrival": the wait for a late peer left out) and to the last member's end ("group span": the
# group's transfer, whichever rank finishes its part first) (epsim compare)
arrived="a2a_dispatch a2a_combine"
reps="$runs/repeats.csv"
[ -f "$reps" ] || reps=
extra=""
[ -n "$reps" ] && extra="$extra launches | spread | error vs median |"
[ -n "${CALIB_GRID:-}" ] && extra="$extra error, grid only |"
printf '| run | measured s | predicted s | error | op median | op p90 |'
for k in $kinds; do printf ' %s |' "$k"; done
for row in after-arrival group-span; do
  for k in $arrived; do printf ' %s %s |' "$k" "$(printf '%s' "$row" | tr '-' ' ')"; done
done
printf '%s\n|---|---|---|---|---|---|' "$extra"
for k in $kinds $arrived $arrived; do printf -- '---|'; done
printf '%s\n' "$(printf '%s' "$extra" | sed 's/[^|]*|/---|/g')"
sum=0; n=0; worst=0; p90s=""; p90as=""; gsum=0; gworst=0; msum=0; mworst=0; spreads=""
for args in "$runs"/*.args; do
  run=${args%.args}
  out=$("$epsim" compare "$run" "${calib[@]}")
  line=$(printf '%s\n' "$out" | grep -m1 '  iteration time')
  meas=$(printf '%s\n' "$line" | awk '{print $4}')
  pred=$(printf '%s\n' "$line" | awk '{for (i=1;i<=NF;i++) if ($i=="predicted") print $(i+1)}')
  err=$(printf '%s\n' "$line" | awk '{print $NF}')
  ops=$(printf '%s\n' "$out" | grep -m1 'per op:')
  med=$(printf '%s\n' "$ops" | awk '{for (i=1;i<=NF;i++) if ($i=="median") print $(i+1)}')
  p90=$(printf '%s\n' "$ops" | awk '{for (i=1;i<=NF;i++) if ($i=="p90") print $(i+1)}')
  # the same with the EP exchanges timed from the last member's start (runs without: as above)
  p90a=$(printf '%s\n' "$out" | awk '/per op, EP exchanges/ {for (i=1;i<=NF;i++) if ($i=="p90") print $(i+1)}')
  p90as="$p90as $(printf '%s' "${p90a:-$p90}" | tr -d '%')"
  printf '| %s | %s | %s | %s | %s | %s |' "$(basename "$run")" "$meas" "$pred" "$err" "$med" "$p90"
  for k in $kinds; do
    ke=$(printf '%s\n' "$out" | awk -v k="$k" '$1==k && NF==5 {print $5}')
    printf ' %s |' "${ke:--}"
  done
  for row in after-arrival group-span; do
    for k in $arrived; do
      ke=$(printf '%s\n' "$out" | awk -v r="$row" -v k="$k" '$1==r && $2==k {print $6}')
      printf ' %s |' "${ke:--}"
    done
  done
  if [ -n "$reps" ]; then # launches, spread, the error against their median
    set -- $(awk -F, -v r="$(basename "$run")" -v p="$pred" '$1==r && $3!="" {v[++n]=$3}
      END { if (!n) { print "0 - -"; exit }
            for (i=1;i<=n;i++) for (j=i+1;j<=n;j++) if (v[j]<v[i]) { t=v[i]; v[i]=v[j]; v[j]=t }
            m = (n%2) ? v[(n+1)/2] : (v[n/2]+v[n/2+1])/2
            printf "%d %.1f%% %+.1f%%\n", n, 100*(v[n]-v[1])/m, 100*(p/m-1) }' "$reps")
    printf ' %s | %s | %s |' "$1" "$2" "$3"
    spreads="$spreads $(printf '%s' "$2" | tr -d '%')"
    a=$(printf '%s\n' "$3" | tr -d '%+-')
    msum=$(awk -v s="$msum" -v a="$a" 'BEGIN{print s+a}')
    mworst=$(awk -v w="$mworst" -v a="$a" 'BEGIN{print (a>w)?a:w}')
  fi
  if [ -n "${CALIB_GRID:-}" ]; then
    gerr=$("$epsim" compare "$run" --calib "$CALIB_GRID" | grep -m1 '  iteration time' | awk '{print $NF}')
    printf ' %s |' "$gerr"
    a=$(printf '%s\n' "$gerr" | tr -d '%+-')
    gsum=$(awk -v s="$gsum" -v a="$a" 'BEGIN{print s+a}')
    gworst=$(awk -v w="$gworst" -v a="$a" 'BEGIN{print (a>w)?a:w}')
  fi
  printf '\n'
  echo "$(basename "$run"),$meas,$pred" >>"$csv"
  a=$(printf '%s\n' "$err" | tr -d '%+-')
  sum=$(awk -v s="$sum" -v a="$a" 'BEGIN{print s+a}')
  worst=$(awk -v w="$worst" -v a="$a" 'BEGIN{print (a>w)?a:w}')
  p90s="$p90s $(printf '%s' "$p90" | tr -d '%')"
  n=$((n + 1))
done
p90med=$(printf '%s\n' $p90s | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
p90amed=$(printf '%s\n' $p90as | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
awk -v s="$sum" -v n="$n" -v w="$worst" -v p="$p90med" -v a="$p90amed" \
  'BEGIN{printf "\n%d runs: mean absolute iteration-time error %.1f%%, worst %.1f%%; per-op p90 error, median over runs %.1f%% (%.1f%% with the EP exchanges timed from the last member'"'"'s start)\n", n, s/n, w, p, a}'
if [ -n "$reps" ]; then
  smax=$(printf '%s\n' $spreads | sort -g | tail -1)
  awk -v s="$msum" -v n="$n" -v w="$mworst" -v x="$smax" \
    'BEGIN{printf "against the median of each run'"'"'s launches: mean %.1f%%, worst %.1f%%; spread over launches at most %.1f%%\n", s/n, w, x}'
fi
if [ -n "${CALIB_GRID:-}" ]; then
  awk -v s="$gsum" -v n="$n" -v w="$gworst" -v c="$CALIB_GRID" \
    'BEGIN{printf "grid only (%s): mean absolute iteration-time error %.1f%%, worst %.1f%%\n", c, s/n, w}'
fi
if [ -n "$png" ]; then
  "$build/plots/epplot" scatter --runs "$csv" --title "epsim (calibrated) vs epref, $(basename "$(dirname "$runs")")" -o "$png"
fi
# With SCATTER_PNG, also the timeline of one run, prediction above measurement on one time axis:
# TIMELINE_RUN (default ovdemo_alltoall_epov) from TIMELINE_FROM to TIMELINE_TO microseconds.
trun=${TIMELINE_RUN:-ovdemo_alltoall_epov}
if [ -n "$png" ] && [ -f "$runs/$trun.args" ]; then
  ptrace=$(mktemp --suffix=.json)
  trap 'rm -f "$csv" "$ptrace"' EXIT
  machine=$(basename "$(dirname "$runs")")
  mtrace=$runs/$trun.trace.json
  if [ ! -f "$mtrace" ]; then # committed as .xz: epplot reads plain JSON
    mtrace=$(mktemp --suffix=.json)
    trap 'rm -f "$csv" "$ptrace" "$mtrace"' EXIT
    xz -dc "$runs/$trun.trace.json.xz" >"$mtrace"
  fi
  world=$(grep -o -m1 '"num_gpus":[0-9]*' "$mtrace" | head -1 | cut -d: -f2)
  mapfile -t words < <(sed 's/#.*//' "$runs/$trun.args" | tr -s ' \t' '\n' | grep -v '^$')
  "$epsim" --topo "$machine" "${calib[@]}" --no-preset --world-size "${world:-2}" "${words[@]}" \
    --trace "$ptrace" >/dev/null
  "$build/plots/epplot" timeline --predicted "$ptrace" --measured "$mtrace" \
    --from-us "${TIMELINE_FROM:-20000}" --to-us "${TIMELINE_TO:-24000}" \
    --title "$trun: epsim (top) and epref (bottom)" -o "${png%scatter.png}timeline.png"
fi
