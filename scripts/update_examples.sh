#!/usr/bin/env bash
# Rewrites each examples/<name>.out with epsim's output for the example's "# run: epsim ..." line
# (after a change that moves the numbers on purpose: a calibration, a model change). The CPU test
# suite (tests/sim/test_examples.c) holds the outputs to these files byte for byte.
# usage: scripts/update_examples.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for args in examples/*.args; do
  run=$(sed -n 's/^# run: epsim //p' "$args" | head -1)
  [ -n "$run" ] || { echo "update_examples.sh: $args has no '# run: epsim ...' line" >&2; exit 2; }
  # shellcheck disable=SC2086  # the run line is words
  "$build/sim/epsim" $run > "${args%.args}.out"
  echo "wrote ${args%.args}.out"
done
