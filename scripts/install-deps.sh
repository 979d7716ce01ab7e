#!/usr/bin/env bash
# Installs the Debian packages the CPU build needs (docs/dependencies.md says why each is there).
# CUDA and NCCL are not Debian packages here: epref builds when nvcc and NCCL are found.
set -euo pipefail
pkgs="cmake make gcc g++ clang pkg-config git libsimgrid-dev libcunit1-dev libjansson-dev gnuplot-nox valgrind xz-utils"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends $missing
