#!/usr/bin/env bash
# For each distinct (model, precision, topology and GPU count, global batch) of the published suite
# (configs/published/suite.tsv; its first row there is "the published layout"), runs `epsim search`
# and prints the markdown table of docs/validation.md, "What epsim search picks": the published
# layout's predicted step time against the step time of the layout the search ranks first.
# The search starts from the row's argument file with the flags of the searched axes left out
# (parallel sizes, pipeline layout, DP sharding and overlap, dispatcher and its backend's tuning,
# EP overlap, micro batch, recomputation); everything else (precision, sequence, routing, fusions)
# stays as published.
# usage: scripts/published_search.sh [BUILD_DIR]
#   ONLY=REGEX      the groups whose first row's name matches
#   BUDGET=N        simulations per search (default 4)
#   JOBS=N          --jobs of each search (default 1)
#   FIX="FLAGS"     flags given to every search (fixed axes), default the published CP and micro
#                   batch ("--context-parallel-size C --micro-batch-size M"); FIX=none fixes nothing
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
epsim="$build/sim/epsim"
suite=configs/published/suite.tsv
budget=${BUDGET:-4}
jobs=${JOBS:-1}
[ -x "$epsim" ] || { echo "published_search.sh: $epsim not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the searched axes' flags (sim/sim_search.c, make_axes), left out of the base
axes='tensor-model-parallel-size|context-parallel-size|pipeline-model-parallel-size|'
axes+='num-virtual-stages-per-pipeline-rank|virtual-pipeline-model-parallel-size|'
axes+='pipeline-model-parallel-layout|decoder-first-pipeline-num-layers|'
axes+='decoder-last-pipeline-num-layers|expert-model-parallel-size|expert-tensor-parallel-size|'
axes+='use-distributed-optimizer|use-megatron-fsdp|use-torch-fsdp2|'
axes+='num-distributed-optimizer-instances|data-parallel-sharding-strategy|overlap-grad-reduce|'
axes+='overlap-param-gather|moe-token-dispatcher-type|moe-flex-dispatcher-backend|'
axes+='overlap-moe-expert-parallel-comm|delay-wgrad-compute|micro-batch-size|recompute-[a-z-]*|'
# and the flags that tune one dispatcher backend (refused beside another: core/config.c)
axes+='moe-flex-transport|moe-deepep-num-sms|moe-hybridep-[a-z-]*'

# an argument file with its nested @files expanded (paths relative to the including file), comments
# and blank lines dropped; the model's preset (an @file of configs/ itself) stays an absolute @line
flat() {
  local dir; dir=$(cd "$(dirname "$1")" && pwd)
  while read -r first rest; do
    case "$first" in ''|'#'*) continue ;; esac
    if [[ $first == @* ]]; then
      local p=${first#@}; [[ $p == /* ]] || p="$dir/$p"
      if [[ $(cd "$(dirname "$p")" && pwd) == */configs/published ]]; then flat "$p"; else echo "@$p"; fi
    else
      echo "$first ${rest%%#*}"
    fi
  done < "$1"
}
# a flag's value in a flattened file (the last one given), else the default
value() { awk -v f="--$2" -v d="$3" '$1 == f { v = $2 } index($1, f "=") == 1 { v = substr($1, length(f) + 2) } END { print v == "" ? d : v }' "$1"; }

echo "| model (suite row) | GPUs | published layout | its step s | search picks | its step s | published / picked | search wall s |"
echo "|---|---|---|---|---|---|---|---|"
seen=" "
t_all0=$(date +%s)
while IFS=$'\t' read -r name args topo world metric pub prec groups src; do
  case "$name" in ''|'#'*) continue ;; esac
  flat "configs/published/$args" > "$tmp/row.args"
  f="$tmp/row.args"
  model=$(awk '/^@/ { n = split($1, p, "/"); sub(/\.args$/, "", p[n]); print p[n] }' "$f" | tail -1)
  gbs=$(value "$f" global-batch-size 0)
  key="$model/$prec/$topo/$world/$gbs"
  case "$seen" in *" $key "*) continue ;; esac
  seen+="$key "
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then continue; fi
  tp=$(value "$f" tensor-model-parallel-size 1); pp=$(value "$f" pipeline-model-parallel-size 1)
  vpp=$(value "$f" num-virtual-stages-per-pipeline-rank 1); ep=$(value "$f" expert-model-parallel-size 1)
  cp=$(value "$f" context-parallel-size 1); mbs=$(value "$f" micro-batch-size 1)
  [ "$vpp" = 1 ] && vpp=$(value "$f" virtual-pipeline-model-parallel-size 1)
  layout="TP $tp PP $pp/$vpp EP $ep CP $cp MBS $mbs"
  # the published layout, simulated
  pstep=$("$epsim" --topo "$topo" @"$f" --world-size "$world" 2>/dev/null |
    awk 'index($0, "iteration time") == 3 { print $(NF-1); exit }')
  # the base: the row without the searched axes
  awk -v re="^--($axes)(=|\$)" '$1 ~ re { next } { print }' "$f" > "$tmp/base.args"
  fix=${FIX:-"--context-parallel-size $cp --micro-batch-size $mbs"}
  [ "$fix" = none ] && fix=""
  t0=$(date +%s)
  # shellcheck disable=SC2086 # $fix: words
  "$epsim" search --topo "$topo" @"$tmp/base.args" --world-size "$world" --global-batch-size "$gbs" \
    $fix --budget "$budget" --jobs "$jobs" --out "$tmp/search.csv" > "$tmp/search.out" 2> "$tmp/err"
  rc=$?
  wall=$(( $(date +%s) - t0 ))
  if [ $rc -ne 0 ]; then
    pick="refused: $(head -1 "$tmp/err" | sed 's/|/\\|/g')"; sstep="-"; ratio="-"
  else
    # the first ranked row of the CSV: its axes and step time
    IFS=$'\t' read -r pick sstep < <(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      $1 == "1" { printf "TP %s PP %s EP %s ETP %s CP %s MBS %s, %s, %s, EP overlap %s, recompute %s\t%s\n",
        $c["tp"], $c["pp_vpp"], $c["ep"], $c["etp"], $c["cp"], $c["mbs"], $c["dp_sharding"],
        $c["dispatcher"], $c["ep_overlap"], $c["recompute"], $c["iteration_time_s"]; exit }' \
      "$tmp/search.csv")
    if [ -z "$sstep" ]; then
      pick="none fits: $(sed -n 3p "$tmp/search.out" | sed 's/^ *//')"; sstep="-"; ratio="-"
    else
      ratio=$(awk -v a="$pstep" -v b="$sstep" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else printf "-" }')
      # an axis the command line fixed reads "given" in the CSV: the value given
      pick=$(printf '%s' "$pick" | sed "s/CP given/CP $cp/; s/MBS given/MBS $mbs/")
    fi
  fi
  echo "| $model ($name) | $world ($topo) | $layout | ${pstep:--} | $pick | $sstep | $ratio | $wall |"
  echo "published_search.sh: $name: published ${pstep:-?} s, search ${sstep} s (${wall} s)" >&2
done < "$suite"
echo "published_search.sh: whole run $(( $(date +%s) - t_all0 )) s" >&2
