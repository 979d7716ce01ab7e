#!/usr/bin/env bash
# gpu_power_runs.sh: runs of scripts/gpu_runs.sh one at a time with every GPU's power, SM clock
# and clock-limit reasons sampled every 20 ms by nvidia-smi (docs/validation.md, "Held out": how
# hard each model drives the power cap). A diagnostic of the runs' clocks: its runs are not the
# committed ones and nothing here enters a calibration.
#   OUT=DIR EPREF=PATH [RUNSET=heldout2] [NPROC=2] [NAMES="run ..."] bash scripts/gpu_power_runs.sh
# Per run under $OUT: <name>.power.csv (the samples), and the run's own files (gpu_runs.sh);
# $OUT/power.txt: per run and GPU, the median power and SM clock over the samples that draw more
# than 300 W (the GPU busy), and how many of them report the software power cap.
set -uo pipefail
: "${OUT:?set OUT}" "${EPREF:?set EPREF}"
export NCCL_NVLS_ENABLE=0
NAMES=${NAMES:-qw_alltoall_none nr_hybridep_none hy_alltoall_none wd_alltoall_none ml_alltoall_none}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/machine.txt"
for name in $NAMES; do
    nvidia-smi --query-gpu=index,timestamp,power.draw,clocks.sm,clocks_event_reasons.sw_power_cap \
        --format=csv,noheader,nounits -lms 20 > "$OUT/$name.power.csv" 2>&1 &
    sampler=$!
    ONLY="^$name\$" RUNSET=${RUNSET:-heldout2} NPROC=${NPROC:-2} \
        bash scripts/gpu_runs.sh "$EPREF" "$OUT/$name" > "$OUT/$name.log" 2>&1
    echo "$name rc=$?"
    kill "$sampler"
    wait "$sampler" 2>/dev/null
done
python3 - "$OUT" $NAMES > "$OUT/power.txt" <<'EOF'
import collections, statistics, sys
out = sys.argv[1]
print("run gpu samples_busy median_W median_MHz share_at_power_cap")
for name in sys.argv[2:]:
    rows = collections.defaultdict(list)
    for line in open(f"{out}/{name}.power.csv"):
        f = [x.strip() for x in line.split(",")]
        try:
            rows[f[0]].append((float(f[2]), float(f[3]), f[4] == "Active"))
        except (ValueError, IndexError):
            continue
    for gpu, s in sorted(rows.items()):
        busy = [x for x in s if x[0] > 300]
        if not busy:
            print(name, gpu, 0, "-", "-", "-")
            continue
        print(name, gpu, len(busy), f"{statistics.median(x[0] for x in busy):.0f}",
              f"{statistics.median(x[1] for x in busy):.0f}",
              f"{sum(x[2] for x in busy) / len(busy):.2f}")
EOF
cat "$OUT/power.txt"
