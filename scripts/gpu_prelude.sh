# gpu_prelude.sh: sourced by the 4-GPU device scripts (gpu_x4_check.sh, gpu_x4_ceilings.sh,
# gpu_flex_ep4.sh) for the start they share.
# gpu_prelude OUT [TARGET ...]: writes OUT/machine.txt (the GPUs, their NVLink topology, the CPU),
# prints its first lines, then builds epref's CMake project without SimGrid into build-gpu
# (RelWithDebInfo; only TARGETs when given) with its log in OUT/build.log, exiting 1 with the
# log's tail when the build fails. Sets t0 (the start, for the scripts' "at +N s" lines).
gpu_prelude() {
  local out=$1
  shift
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; \
    lscpu | grep -E "Model name|^CPU\(s\)"; } > "$out/machine.txt" 2>&1
  head -3 "$out/machine.txt"
  t0=$(date +%s)
  { cmake -S . -B build-gpu -DEP_WITH_SIM=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build build-gpu -j32 ${1:+--target "$@"}; } > "$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; exit 1; }
  echo "build done at +$(($(date +%s) - t0)) s"
}
