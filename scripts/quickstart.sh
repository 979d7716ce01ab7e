#!/usr/bin/env bash
# Quick start: install the packages, build, and run the main job - epsim on the bundled dgx16
# topology (2 DGX H100 nodes) with the default model (16-layer DeepSeek-V3 proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
./build/sim/epsim --topo dgx16 "$@"
