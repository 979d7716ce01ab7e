#!/usr/bin/env bash
# gpu_comm_pairs.sh: NCCL curves of a two-rank group on a machine of more GPUs (one device call,
# ~1 min): `epref --nproc 2 bench calib --parts comm` on GPUs 0 and 1 of a 4-GPU kind, LAUNCHES
# separate launches. A TP 2 or EP 2 group inside a bigger NVSwitch machine runs these curves,
# not those timed over all of its GPUs (docs/calibration.md, "NCCL curves by group size").
#   OUT=dir [BIN=.devbin/epref_probe] [LAUNCHES=2] bash scripts/gpu_comm_pairs.sh
# Writes OUT/pairs.tgz: machine.txt, pair_<i>/comm.json and calib.log.
set -u -o pipefail
. scripts/gpu_epref.sh
W=/tmp/pairs
gpu_scratch "$W"
for i in $(seq 1 "${LAUNCHES:-2}"); do
    mkdir -p "$W/pair_$i"
    timeout 200 "$BIN" --nproc 2 bench calib --parts comm --iters 10 --warmup 3 \
        --out "$W/pair_$i" > "$W/pair_$i/calib.log" 2>&1
    echo "launch $i rc=$?"
    grep -E "(all_gather|reduce_scatter|alltoall|all_reduce) .*(1048576|67108864|268435456) B" \
        "$W/pair_$i/calib.log" | head -12
    (cd "$W" && tar czf "$DEST/pairs.tgz" .)
done
