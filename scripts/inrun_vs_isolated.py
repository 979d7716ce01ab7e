#!/usr/bin/env python3
"""In-run GEMM time against the same GEMM timed alone (docs/validation.md, "Held out").

For each measured run: every GEMM and grouped GEMM of its trace is matched with the record of the
same kind, phase and flops that `epref bench calib --models` timed alone for the run's model
family (records whose source is "model:FAMILY"; the family is the run name's first word without
an "x4_" prefix; grouped GEMMs only of runs at the probe's EP 2), and the median ratio in-run / alone is printed with its p10-p90, beside the share
of the run's time its GPUs spent in GEMMs and in attention (the duty that sets the power cap:
docs/calibration.md, "Sustained load"). A diagnostic: nothing here enters a calibration.

usage: scripts/inrun_vs_isolated.py BUILD_DIR ISOLATED_COMPUTE_JSON RUN [RUN ...]
  (RUN: the path prefix of a committed run, e.g. traces/h200x2/heldout/ml_alltoall_none; the
  topology is h200x4 for runs under a h200x4 folder, else h200x2)
"""
import collections
import csv
import os
import statistics
import subprocess
import sys
import tempfile

from jsonfile import load_records


PROBE_EP = "2"  # configs/calib/heldout-probe.models: the held-out models at EP 2


def run_csv(cmd):
    """Runs an epsim command that writes a CSV to the path it is given; returns its rows."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ops.csv")
        subprocess.run(cmd + ["--csv", path], check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return list(csv.DictReader(f))


def topology(run):
    return "h200x4" if "/h200x4/" in os.path.abspath(run) else "h200x2"


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    epsim = os.path.join(argv[1], "sim", "epsim")
    records = load_records(argv[2])[1]
    alone = {}
    for r in records:
        if r["kind"] in ("gemm", "grouped_gemm") and r["source"].startswith("model:"):
            key = (r["source"][6:], r["kind"], r["phase"], round(r["flops"] / 1e6))
            alone.setdefault(key, r["time_us"] * 1e-6)
    print("| run | GEMM duty | attention duty | GEMM in run / alone | grouped GEMM in run / alone |")
    print("|---|---|---|---|---|")
    for run in argv[3:]:
        name = os.path.basename(run)
        family = name[3:] if name.startswith("x4_") else name
        family = family.split("_")[0]
        with open(run + ".args") as f:
            flags = " ".join(line.split("#")[0] for line in f).split()
        ep = flags[flags.index("--expert-model-parallel-size") + 1]
        topo = topology(run)
        sim = run_csv([epsim, "--topo", topo, "--no-preset"] + flags)
        flops = {(r["rank"], r["name"]): float(r["flops"]) for r in sim}
        meas = run_csv([epsim, "compare", run])
        ratio = collections.defaultdict(list)
        busy = collections.Counter()
        ranks = {r["rank"] for r in meas}
        span = max(float(r["measured_start_s"]) + float(r["measured_s"]) for r in meas)
        for r in meas:
            busy[r["kind"]] += float(r["measured_s"])
            if r["kind"] not in ("gemm", "grouped_gemm"):
                continue
            if r["kind"] == "grouped_gemm" and ep != PROBE_EP:
                continue  # another expert split: other grouped shapes than the probe's
            phase = r["name"].rsplit(".", 1)[1]
            fl = flops.get((r["rank"], r["name"]), 0)
            t = alone.get((family, r["kind"], phase, round(fl / 1e6)))
            if t:
                ratio[r["kind"]].append(float(r["measured_s"]) / t)
        cells = []
        for kind in ("gemm", "grouped_gemm"):
            v = sorted(ratio[kind])
            cells.append(f"{statistics.median(v):.3f} ({v[len(v) // 10]:.2f}-{v[9 * len(v) // 10]:.2f}, "
                         f"{len(v)} ops)" if v else "-")
        per = span * len(ranks)
        gemm_duty = (busy["gemm"] + busy["grouped_gemm"]) / per
        print(f"| {name} | {gemm_duty:.2f} | {busy['attention'] / per:.2f} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
