#!/usr/bin/env bash
# Bounded libFuzzer runs of the two input front ends:
#   fuzz_config    argument-file text (flags, @files) -> parse -> validate -> layer plan and groups
#                  (tests/fuzz/fuzz_config.c)
#   fuzz_platform  any bytes as a platform file -> the check SimGrid's input passes first
#                  (tests/fuzz/fuzz_platform.c, sim/sim_platform_check.c)
# Usage:
#   scripts/fuzz.sh [SECONDS]   both targets one after the other, SECONDS in all (default 30: what
#                               scripts/test.sh and CI run)
#   scripts/fuzz.sh --long [CPU_MINUTES_EACH]
#                               both targets at once, each until it has used CPU_MINUTES_EACH of
#                               CPU time (default 10.5; measured with /usr/bin/time, in rounds of
#                               120 s on the same corpus, so shared cores only make it take longer),
#                               then every platform of the corpus replayed through build/sim/epsim:
#                               exit 0 or 2, never a signal (docs/epsim.md, "Failure behaviour" has
#                               a run)
# Environment: FUZZ_OUT (the folder, default build-fuzz), FUZZ_ROUND (seconds of a --long round).
# Builds with clang directly (no CMake) into build-fuzz/, seeds the corpora with configs/*.args and
# a dictionary of every flag name, and with sim/topos/*.xml and tests/fuzz/platforms/*.xml (the
# malformed platforms) and an XML dictionary. Exits 0 when no crash was found. Without
# clang/libFuzzer it says so and exits 0; any other failure (build error, crash, sanitizer report,
# a refusal of more than one line) exits non-zero, the input saved under build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
long=0
if [ "${1:-}" = "--long" ]; then
  long=1
  shift
  cpu_min=${1:-10.5}
else
  secs=${1:-30}
fi
out=${FUZZ_OUT:-build-fuzz}

cc=${CC:-}
if [ -z "$cc" ] || ! "$cc" --version 2>/dev/null | grep -q clang; then
  cc=""
  for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
    if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
  done
fi
if [ -z "$cc" ]; then
  echo "fuzz: clang not found, so libFuzzer is unavailable: fuzz run skipped"
  exit 0
fi
mkdir -p "$out/corpus" "$out/seeds" "$out/pcorpus" "$out/pseeds"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
  >"$out/probe.c"
if ! "$cc" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>"$out/probe.log"; then
  echo "fuzz: $cc cannot link -fsanitize=fuzzer (libFuzzer unavailable): fuzz run skipped"
  exit 0
fi

flags=(-std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -Wall -Wextra -Werror
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Icore)
"$cc" "${flags[@]}" tests/fuzz/fuzz_config.c core/config.c core/config_flags.c core/config_derived.c core/config_ignored.c \
  core/config_validate.c core/layers.c core/groups.c -lm -o "$out/fuzz_config"
"$cc" "${flags[@]}" -Isim tests/fuzz/fuzz_platform.c sim/sim_platform_check.c -lm \
  -o "$out/fuzz_platform"

# Seeds of the flag parser: the presets, plus a few layouts that pass validation.
cp configs/*.args "$out/seeds/"
printf -- '--world-size 16 --expert-model-parallel-size 4 --num-distributed-optimizer-instances 2 --use-megatron-fsdp --global-batch-size 16\n' \
  >"$out/seeds/hsdp.args"
printf -- '--num-layers 8 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 --world-size 4 --expert-model-parallel-size 2 --overlap-moe-expert-parallel-comm --delay-wgrad-compute\n' \
  >"$out/seeds/overlap.args"
printf -- '--num-layers 4 --hybrid-override-pattern M[*E]|M[ME]/*E --pipeline-model-parallel-size 2 --mtp-num-layers 1 --world-size 2\n' \
  >"$out/seeds/pattern.args"
# Dictionary: every flag name of the table and of the accepted-without-effect list, and the
# pattern symbols.
{
  sed -n 's/^ *[A-Z][A-Z](\("[a-z0-9-]*"\).*/\1/p' core/config_flags.c | sed 's/^"/"--/'
  sed -n 's/^ *{\("[a-z0-9_-]*"\), [BVM]},.*/\1/p' core/config_ignored.c | sed 's/^"/"--/'
  for s in '[' ']' '|' '/' 'M' '*' 'E' '-' '@' '#' '=' '--no-' '([0]*3+[1]*5)'; do printf '"%s"\n' "$s"; done
} >"$out/flags.dict"

# Seeds of the platform check: the small bundled platforms and the malformed ones.
for t in h200x2 h200x4 dgx8 dgx16 nvl72; do cp "sim/topos/$t.xml" "$out/pseeds/"; done
cp tests/fuzz/platforms/*.xml "$out/pseeds/"
{
  for s in '<platform version="4.1">' '</platform>' '<zone id="z" routing="Full">' '</zone>' \
    'routing="Floyd"' 'routing="Dijkstra"' 'routing="DijkstraCache"' 'routing="None"' \
    '<host id="gpu0" speed="1e15f">' '<host id="gpu1" speed="1f"/>' '</host>' '<host id="gpu0.nic" speed="1f"/>' \
    '<router id="r"/>' '<link id="l" bandwidth="1e9Bps" latency="1us"/>' 'sharing_policy="SPLITDUPLEX"' \
    'sharing_policy="FATPIPE"' '<route src="gpu0" dst="gpu1">' '</route>' \
    '<zoneRoute src="a" dst="b" gw_src="gpu0" gw_dst="gpu1">' '</zoneRoute>' \
    '<link_ctn id="l"/>' 'direction="UP"' 'direction="DOWN"' 'symmetrical="NO"' \
    '<prop id="node" value="0"/>' '<prop id="local_index" value="1"/>' '<prop id="peak_flops" value="1e15"/>' \
    '<prop id="hbm_bw" value="3e12"/>' '<prop id="sm_count" value="132"/>' '<prop id="hbm_bytes" value="8e10"/>' \
    '<prop id="gpus_per_node" value="8"/>' '<prop id="calibration" value="h100"/>' \
    '<!--' '-->' '<?xml version="1.0"?>' '<!DOCTYPE platform SYSTEM "x">' '&amp;' '&#65;' '/>' \
    'Gf' 'GBps' 'Gbps' 'ms' 'ns' 'e+99' '1e-300'; do
    printf '"%s"\n' "$(printf '%s' "$s" | sed 's/\\/\\\\/g; s/"/\\"/g')"
  done
} >"$out/xml.dict"

# run TARGET SECONDS CORPUS SEEDS DICT LOG MAXLEN; with /usr/bin/time the CPU seconds go to
# $out/TARGET.cpu
timer=()
if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -f "%U %S" -o "$out/cpu.tmp"); fi
run() {
  [ ${#timer[@]} = 0 ] || timer[4]="$out/$1.cpu"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "${timer[@]}" "$out/$1" -max_total_time="$2" -timeout=10 -rss_limit_mb=2048 -max_len=$7 \
    -dict="$out/$5" -artifact_prefix="$out/$1-" -print_final_stats=1 \
    "$out/$3" "$out/$4" 2>"$out/$6"
}
report() { # TARGET LOG
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$out/$2" || tail -3 "$out/$2"
}
fail() { # TARGET LOG
  tail -40 "$out/$2"
  echo "fuzz: $1 FAILED (crash input saved under $out/)"
  exit 1
}

if [ "$long" = 0 ]; then
  half=$(( secs / 2 > 0 ? secs / 2 : 1 ))
  echo "fuzz: $cc, ${half}s each: fuzz_config ($(wc -l <"$out/flags.dict") flag names), fuzz_platform"
  run fuzz_config "$half" corpus seeds flags.dict fuzz_config.log 4096 || fail fuzz_config fuzz_config.log
  report fuzz_config fuzz_config.log
  run fuzz_platform "$(( secs - half > 0 ? secs - half : 1 ))" pcorpus pseeds xml.dict fuzz_platform.log 65536 \
    || fail fuzz_platform fuzz_platform.log
  report fuzz_platform fuzz_platform.log
  echo "fuzz: no crash in ${secs}s"
  exit 0
fi

if [ ${#timer[@]} = 0 ]; then
  echo "fuzz: --long needs /usr/bin/time to measure CPU time"
  exit 1
fi
echo "fuzz (long): $cc, both targets at once, each until ${cpu_min} CPU-minutes"
start=$(date +%s)
# long TARGET CORPUS SEEDS DICT MAXLEN: rounds of 120 s until the CPU time is reached
long() {
  local t=$1 cpu=0 rounds=0 units=0
  while awk -v c="$cpu" -v m="$cpu_min" 'BEGIN { exit !(c < m * 60) }'; do
    rounds=$((rounds + 1))
    run "$t" "${FUZZ_ROUND:-120}" "$2" "$3" "$4" "$t.log" "$5" || return 1
    cpu=$(awk -v c="$cpu" '{ print c + $1 + $2 }' "$out/$t.cpu")
    units=$((units + $(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log")))
  done
  echo "$rounds $cpu $units" >"$out/$t.total"
}
long fuzz_config corpus seeds flags.dict 4096 & pc=$!
long fuzz_platform pcorpus pseeds xml.dict 65536 & pp=$!
rc_c=0; rc_p=0
wait $pc || rc_c=$?
wait $pp || rc_p=$?
[ "$rc_c" = 0 ] || fail fuzz_config fuzz_config.log
[ "$rc_p" = 0 ] || fail fuzz_platform fuzz_platform.log
for t in fuzz_config fuzz_platform; do
  awk -v t="$t" '{ printf "%s: %d rounds, %.1f CPU-minutes, %d inputs run, no crash\n", t, $1, $2 / 60, $3 }' \
    "$out/$t.total"
done
echo "fuzz: wall $(( $(date +%s) - start ))s"
# The corpus of platforms through the real program: SimGrid sees only what the check accepts, and
# nothing may crash it (exit 0 or 2, never a signal). Needs the CMake build (build/sim/epsim).
if [ -x build/sim/epsim ]; then
  n=0; bad=0; accepted=0
  for f in "$out"/pcorpus/* "$out"/pseeds/*; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    set +e
    timeout 60 build/sim/epsim --topo "$f" --num-layers 1 --moe-layer-freq 1 --mtp-num-layers 0 \
      --global-batch-size 0 --max-memory 4 >/dev/null 2>"$out/replay.err"
    rc=$?
    set -e
    [ "$rc" = 0 ] && accepted=$((accepted + 1))
    if [ "$rc" != 0 ] && { [ "$rc" != 2 ] || [ "$(wc -l <"$out/replay.err")" != 1 ]; }; then
      bad=$((bad + 1)); cp "$f" "$out/replay-bad-$bad.xml"
      echo "replay: $f: exit $rc: $(head -c 300 "$out/replay.err")"
    fi
  done
  echo "fuzz: replayed $n platforms through epsim: $accepted simulated, $((n - accepted - bad)) refused with one line, $bad other"
  [ "$bad" = 0 ] || exit 1
fi
echo "fuzz: no crash"
