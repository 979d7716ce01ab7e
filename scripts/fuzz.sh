#!/usr/bin/env bash
# Bounded libFuzzer run of the configuration front end (tests/fuzz/fuzz_config.c).
# Usage: scripts/fuzz.sh [SECONDS]   (default 30)
# Builds with clang directly (no CMake) into build-fuzz/, seeds the corpus with configs/*.args and
# a dictionary of every flag name, and exits 0 when no crash was found. Without clang/libFuzzer it
# says so and exits 0; any other failure (build error, crash, sanitizer report) exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
out=build-fuzz

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
mkdir -p "$out/corpus" "$out/seeds"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
  >"$out/probe.c"
if ! "$cc" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>"$out/probe.log"; then
  echo "fuzz: $cc cannot link -fsanitize=fuzzer (libFuzzer unavailable): fuzz run skipped"
  exit 0
fi

"$cc" -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -Wall -Wextra -Werror \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
  -Icore tests/fuzz/fuzz_config.c core/config.c core/config_flags.c core/config_ignored.c \
  core/config_validate.c core/layers.c core/groups.c -lm -o "$out/fuzz_config"

# Seeds: the presets, plus a few layouts that pass validation.
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

echo "fuzz: $cc, ${secs}s, dictionary of $(wc -l <"$out/flags.dict") entries"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$out/fuzz_config" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -dict="$out/flags.dict" -artifact_prefix="$out/" -print_final_stats=1 \
  "$out/corpus" "$out/seeds" 2>"$out/fuzz.log" || {
  tail -40 "$out/fuzz.log"
  echo "fuzz: FAILED (crash input saved under $out/)"
  exit 1
}
grep -E "^stat::number_of_executed_units|^Done" "$out/fuzz.log" || tail -3 "$out/fuzz.log"
echo "fuzz: no crash in ${secs}s"
