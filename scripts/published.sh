#!/usr/bin/env bash
# Runs every case of the published-results suite (configs/published/suite.tsv: Megatron-Bridge,
# NeMo and Megatron-LM figures at 8-1024 GPUs, each args file citing its source) and prints the
# markdown section "Published results at scale" of docs/validation.md: published against
# predicted, the signed step-time error of each case, mean |error| and worst, and every pair's or
# ranking's published and predicted gain (or order). A case epsim refuses is printed as
# "refused: <epsim's message>" and left out of the statistics; the script goes on.
# usage: scripts/published.sh [BUILD_DIR] [CALIB]
#        CALIB: a calibration file, "default" (the topology's default calibration, h100-megatron.json for
#        the dgx topologies) or "none" (the built-in defaults).
#        ONLY=REGEX runs the cases whose name matches (pairs and rankings then use what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
calib=${2:-default}
epsim="$build/sim/epsim"
suite=configs/published/suite.tsv
[ -x "$epsim" ] || { echo "published.sh: $epsim not built" >&2; exit 2; }
# every case releases.tsv names is a suite case
unknown=$(awk -F'\t' 'FNR == NR { if ($1 !~ /^#/ && $1 != "") have[$1] = 1; next }
  $1 !~ /^#/ && NF >= 3 && !($1 in have) { print $1; exit }' "$suite" configs/published/releases.tsv)
[ -z "$unknown" ] || { echo "published.sh: configs/published/releases.tsv: $unknown is no case of $suite" >&2; exit 2; }
calib_flag=()
[ "$calib" = default ] || calib_flag=(--calib "$calib")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one line per case: name topo world metric published precision groups source status value wall
#   status: ok (value = predicted metric) or refused (value = epsim's message)
results="$tmp/results.tsv"
: > "$results"
t_all0=$(date +%s.%N)
while IFS=$'\t' read -r name args topo world metric pub prec groups src; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then continue; fi
  t0=$(date +%s.%N) lwait=
  "$epsim" --topo "$topo" "${calib_flag[@]}" @"configs/published/$args" --world-size "$world" \
    > "$tmp/out" 2> "$tmp/err"
  rc=$?
  t1=$(date +%s.%N)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  if [ $rc -ne 0 ]; then
    msg=$(grep -m1 -v '^epsim: note:' "$tmp/err" | sed 's/^epsim: //; s/|/\\|/g; s/\t/ /g')
    status=refused value="${msg:-exit status $rc}"
  else
    case "$metric" in
      step_s) key='iteration time' ;;
      tokens_per_s_per_gpu) key='tokens/s/GPU' ;;
      tflops_per_gpu) key='TFLOPS/GPU' ;;
      *) echo "published.sh: $name: unknown metric $metric" >&2; exit 2 ;;
    esac
    value=$(awk -v k="$key" 'index($0, k) == 3 {print $NF == "s" ? $(NF-1) : $NF; exit}' "$tmp/out")
    status=ok
    [ -n "$value" ] || { status=refused; value="no '$key' in epsim's output"; }
    # the share of the step the GPUs wait for the host's launches (docs/epsim.md, "Metrics")
    lwait=$(awk '$1 == "waiting" && $3 == "launches" {gsub(/[(%:]/, "", $6); print $6; exit}' "$tmp/out")
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$topo" "$world" "$metric" "$pub" \
    "$prec" "$groups" "$src" "$status" "$value" "$wall" "${lwait:--}" >> "$results"
  echo "published.sh: $name $status $value (${wall} s)" >&2
done < "$suite"
t_all1=$(date +%s.%N)

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain -- core sim configs scripts 2>/dev/null | head -1)
[ -n "$dirty" ] && rev="$rev (with uncommitted changes)"
ncpu=$(nproc 2>/dev/null || echo '?')

awk -F'\t' -v releases=configs/published/releases.tsv -v calib="$calib" -v rev="$rev" -v date="$(date +%Y-%m-%d)" -v ncpu="$ncpu" \
    -v total="$(awk -v a="$t_all0" -v b="$t_all1" 'BEGIN {printf "%.0f", b - a}')" '
function speed(metric, v) { return metric == "step_s" ? 1 / v : v }
# signed step-time error: predicted step / published step - 1 (positive: predicted too slow)
function steperr(metric, pub, pred) { return metric == "step_s" ? pred / pub - 1 : pub / pred - 1 }
function fmt(v) { return v >= 100 ? sprintf("%.0f", v) : sprintf("%.4g", v) }
function unit(metric) {
  return metric == "step_s" ? "s/step" : metric == "tokens_per_s_per_gpu" ? "tokens/s/GPU" : "TFLOP/s/GPU"
}
# releases.tsv: the same layout, other releases (comments and blank lines skipped)
FILENAME == releases { if ($0 !~ /^#/ && NF >= 3) { nrel[$1]++; rel[$1, nrel[$1]] = $3 } next }
# sorts v[1..k] ascending (numbers) and returns its median
function sort_median(v, k,    i, j, t) {
  for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
  return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
}
# (max - min) / median of the published figures of case c; -1 with one figure
function spread(c,    k, i, v, med) {
  k = 1; v[1] = pub[c]
  for (i = 1; i <= nrel[name[c]]; i++) v[++k] = rel[name[c], i]
  if (k < 2) return -1
  med = sort_median(v, k)
  return (v[k] - v[1]) / med
}
{
  n++; name[n] = $1; topo[n] = $2; world[n] = $3; metric[n] = $4; pub[n] = $5; prec[n] = $6
  groups[n] = $7; src[n] = $8; status[n] = $9; val[n] = $10; wall[n] = $11; lwait[n] = $12
  if ($7 != "-") {
    k = split($7, g, ",")
    for (i = 1; i <= k; i++) { if (!(g[i] in gn)) { ng++; gname[ng] = g[i] } gm[g[i], ++gn[g[i]]] = n }
  }
}
END {
  printf "Command: `scripts/published.sh build %s` (%d cases of `configs/published/suite.tsv`).\n", calib, n
  printf "Run %s on this project'"'"'s CPU container (%s cores shared with other work), epsim at %s;\n", date, ncpu, rev
  printf "calibration: %s (the dgx topologies default to `traces/calib/h100-megatron.json`). Whole run %s s wall.\n\n", calib, total
  print "Error is the signed step-time error, predicted step / published step - 1 (for a throughput"
  print "metric, published / predicted - 1): positive means epsim predicts a slower step. Launch wait:"
  print "the share of the predicted step in which the GPUs wait for the host to issue their next kernel"
  print "(a launch-bound step moves with the host cost per op, measured on one machine: docs/epsim.md)."
  print "Published spread: (max - min) / median of the case'"'"'s figure and the same layout'"'"'s figures in"
  print "other releases (`configs/published/releases.tsv`); \"-\": published once."
  print ""
  print "| case | GPUs | topology | precision | metric | published | predicted | error | published spread | launch wait | epsim wall s | source |"
  print "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for (i = 1; i <= n; i++) {
    if (status[i] == "ok") {
      e = steperr(metric[i], pub[i], val[i]); err[i] = e
      ae = e < 0 ? -e : e; sum += ae; m++
      if (ae > worst) { worst = ae; worstname = name[i]; worsterr = e }
      pred = fmt(val[i]); es = sprintf("%+.1f%%", 100 * e)
    } else { pred = "refused: " val[i]; es = "-"; refused++ }
    lw = lwait[i] == "-" || lwait[i] == "" ? "-" : lwait[i] "%"
    sp = spread(i); ss = sp < 0 ? "-" : sprintf("%.1f%%", 100 * sp)
    if (sp >= 0) { nsp++; sps[nsp] = sp; if (status[i] == "ok" && (err[i] < 0 ? -err[i] : err[i]) <= sp) inside++ }
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name[i], world[i], topo[i], prec[i], \
      unit(metric[i]), pub[i], pred, es, ss, lw, wall[i], src[i]
  }
  print ""
  if (m > 0)
    printf "**%d cases predicted, %d refused: mean |error| %.1f%%, worst %+.1f%% (%s).**\n\n", m, refused, \
      100 * sum / m, 100 * worsterr, worstname
  if (nsp > 0) {
    med = sort_median(sps, nsp)
    printf "Published more than once: %d cases, spread %.1f%% to %.1f%% (median %.1f%%); %d of them predicted within their spread.\n\n", \
      nsp, 100 * sps[1], 100 * sps[nsp], 100 * med, inside
  }
  print "Pairs (gain = speed of the second row / speed of the first; the difference in percentage"
  print "points of gain) and rankings (fastest first):"
  print ""
  print "| group | cases | published | predicted | difference |"
  print "|---|---|---|---|---|"
  for (j = 1; j <= ng; j++) {
    G = gname[j]; k = gn[G]; ok = 1
    for (i = 1; i <= k; i++) if (status[gm[G, i]] != "ok") ok = 0
    if (k == 1) {
      printf "| %s | %s | incomplete: one case ran | - | - |\n", G, name[gm[G, 1]]
    } else if (k == 2) {
      a = gm[G, 1]; b = gm[G, 2]
      pg = speed(metric[b], pub[b]) / speed(metric[a], pub[a])
      cases = name[a] " -> " name[b]
      if (ok) {
        qg = speed(metric[b], val[b]) / speed(metric[a], val[a])
        printf "| %s | %s | %.3fx | %.3fx | %+.1f pp |\n", G, cases, pg, qg, 100 * (qg - pg)
      } else printf "| %s | %s | %.3fx | refused | - |\n", G, cases, pg
    } else {
      # rankings: order the members by published and by predicted speed (selection sort)
      for (i = 1; i <= k; i++) { pp[i] = gm[G, i]; qq[i] = gm[G, i] }
      for (i = 1; i <= k; i++) for (l = i + 1; l <= k; l++) {
        if (speed(metric[pp[l]], pub[pp[l]]) > speed(metric[pp[i]], pub[pp[i]])) { t = pp[i]; pp[i] = pp[l]; pp[l] = t }
        if (ok && speed(metric[qq[l]], val[qq[l]]) > speed(metric[qq[i]], val[qq[i]])) { t = qq[i]; qq[i] = qq[l]; qq[l] = t }
      }
      # members named by what follows their common prefix
      pre = name[gm[G, 1]]
      for (i = 2; i <= k; i++) while (index(name[gm[G, i]], pre) != 1) pre = substr(pre, 1, length(pre) - 1)
      po = ""; qo = ""; same = 0
      for (i = 1; i <= k; i++) {
        po = po (i > 1 ? " > " : "") substr(name[pp[i]], length(pre) + 1) " " pub[pp[i]]
        if (ok) qo = qo (i > 1 ? " > " : "") substr(name[qq[i]], length(pre) + 1) " " fmt(val[qq[i]])
        if (ok && pp[i] == qq[i]) same++
      }
      printf "| %s (ranking of %d) | %s* | %s | %s | %s |\n", G, k, pre, po, ok ? qo : "refused", \
        ok ? (same == k ? "same order" : sprintf("%d of %d places agree", same, k)) : "-"
    }
  }
}' configs/published/releases.tsv "$results"
