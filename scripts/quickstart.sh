#!/usr/bin/env bash
# Quick start: install the packages, build, and run the main job - epsim on the bundled dgx16
# topology (2 DGX H100 nodes) with the default model (16-layer DeepSeek-V3 proxy). The build's
# output goes to build/build.log; when a step fails, its log is shown.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p build
step() { # LOG COMMAND...
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "quickstart: '$*' failed; its output ($log):" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
}
echo "quickstart: configuring and building into build/ (log: build/build.log)"
step build/cmake.log cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
step build/build.log cmake --build build -j"$(nproc 2>/dev/null || echo 2)"
./build/sim/epsim --topo dgx16 "$@"
