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
