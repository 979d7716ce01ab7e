#!/usr/bin/env python3
"""The slowdown epsim's power model puts on a measured run's compute ops: for each run, `epsim
compare` with the calibration as it is and with its power model removed (power_duty_slowdown
dropped), and per op kind the median ratio of the two predicted times (ops of 20 us and more),
beside the median of measured over the no-power prediction. Read against the run's SM clock
(scripts/gpu_power_runs.sh: full clock / median clock) it says whether the model heats the GPU as
much as the run did (docs/validation.md, "One H200").
usage: power_applied.py BUILD CALIB RUN [RUN ...]   (RUN: traces/<machine>/<set>/<name>)
"""
import csv, json, os, statistics, subprocess, sys, tempfile


def predicted(build, calib, run, tmp, tag):
    out = os.path.join(tmp, tag + ".csv")
    subprocess.run([os.path.join(build, "sim", "epsim"), "compare", run, "--calib", calib, "--csv",
                    out], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {(r["rank"], r["name"]): (r["kind"], float(r["predicted_s"]), float(r["measured_s"]))
            for r in csv.DictReader(open(out))}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    build, calib, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory() as tmp:
        c = json.load(open(calib))
        c.pop("power_duty_slowdown", None)
        nopower = os.path.join(tmp, "nopower.json")
        json.dump(c, open(nopower, "w"))
        print("| run | kind | slowdown applied | measured / no-power prediction |")
        print("|---|---|---|---|")
        for run in runs:
            a = predicted(build, nopower, run, tmp, "a")
            b = predicted(build, calib, run, tmp, "b")
            for kind in ("gemm", "grouped_gemm", "attention"):
                keys = [k for k in a if a[k][0] == kind and a[k][1] > 2e-5 and k in b]
                if not keys:
                    continue
                applied = statistics.median(b[k][1] / a[k][1] for k in keys)
                measured = statistics.median(a[k][2] / a[k][1] for k in keys)
                print(f"| {os.path.basename(run)} | {kind} | {applied:.3f} | {measured:.3f} |")


if __name__ == "__main__":
    main()
