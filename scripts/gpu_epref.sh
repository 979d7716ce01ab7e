# gpu_epref.sh: sourced by the device scripts (scripts/gpu_*.sh). epref_binary LOG_DIR sets EPREF:
# BIN_DIR/epref when BIN_DIR holds one whose libraries resolve on this machine (built here with
# nvcc and carried, which saves a device call the build), else a fresh build in build-gpu (its
# log in LOG_DIR/build.log; the last lines and exit 1 when it fails).
epref_binary() {
    EPREF=build-gpu/ref/epref
    if [ -n "${BIN_DIR:-}" ] && [ -x "$BIN_DIR/epref" ] && ! ldd "$BIN_DIR/epref" | grep -q "not found"; then
        EPREF=$BIN_DIR/epref
    else
        { cmake -S . -B build-gpu -DEP_WITH_SIM=OFF && cmake --build build-gpu -j32 --target epref; } \
            > "$1/build.log" 2>&1 || { tail -40 "$1/build.log"; exit 1; }
    fi
}

# bench_model EP: the model flags of issue 25's `epref bench dispatch|combine` (docs/performance.md):
# hidden 7168, top-8 of 256 experts of FFN 2048, over EP ranks.
bench_model() {
    echo "--hidden-size 7168 --num-experts 256 --moe-router-topk 8 --expert-model-parallel-size $1 --moe-ffn-hidden-size 2048"
}

# bench_run_flags [SMS [PERMUTE_BLOCKS]]: the run flags of issue 25's benchmarks (docs/performance.md):
# sender SMs (16), fused-permute blocks (32), owner-sum blocks 8, 30 iterations after 5 warm-up.
bench_run_flags() {
    echo "--num-sms ${1:-16} --permute-blocks ${2:-32} --reduce-blocks 8 --iters 30 --warmup 5"
}

# gpu_tests DIR LOG: the GPU tests of the binaries in DIR (test_gpu_run runs DIR/epref), their
# output appended to LOG; prints "<test> rc=N" for each, into LOG too.
gpu_tests() {
    local t arg
    for t in test_gpu_kernels test_gpu_ep test_gpu_graph test_gpu_overlap test_gpu_run \
        test_gpu_run_metrics; do
        arg=
        [ $t = test_gpu_run ] && arg=$1/epref
        timeout 200 "$1/$t" $arg >> "$2" 2>&1
        echo "$t rc=$?" | tee -a "$2"
    done
}

# require_gpu SCRIPT NAME: exit 3 at once (nothing run) unless the first GPU's name contains NAME
# (empty NAME: any GPU). The 4 x H100 scripts use it: the H100 kinds may come with H200s.
require_gpu() {
    local gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    if [ -n "$2" ] && [[ "$gpu" != *"$2"* ]]; then
        echo "$1: this machine has $gpu, not $2: nothing run"
        exit 3
    fi
}

# gpu_count [MAX]: the GPUs present, at most MAX (default 4).
gpu_count() {
    local n
    n=$(nvidia-smi -L | wc -l)
    [ "$n" -gt "${1:-4}" ] && n=${1:-4}
    echo "$n"
}

# gpu_scratch DIR: the start of a device script that packs its results: DEST (where they go:
# $OUT, else ./out), BIN (the carried epref, default .devbin/epref_probe), NCCL without NVLink
# SHARP, and an empty DIR holding machine.txt (the GPUs, their NVLink topology), first lines printed.
gpu_scratch() {
    DEST=${OUT:-$PWD/out}
    BIN=${BIN:-.devbin/epref_probe}
    export NCCL_NVLS_ENABLE=0
    rm -rf "$1"
    mkdir -p "$1" "$DEST"
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; } \
        > "$1/machine.txt" 2>&1
    head -3 "$1/machine.txt"
}

# machine_and_ep_test DIR BIN_DIR: the GPUs into DIR/machine.txt, then BIN_DIR/test_gpu_ep (its log
# DIR/test_gpu_ep.log); prints "test_gpu_ep rc=N".
machine_and_ep_test() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$1/machine.txt"
    timeout 200 "$2/test_gpu_ep" > "$1/test_gpu_ep.log" 2>&1
    echo "test_gpu_ep rc=$?"
}
