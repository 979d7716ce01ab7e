#!/usr/bin/env python3
"""Which ops make the per-op error tail of the held-out runs (docs/validation.md, "Held out").

Runs `epsim compare RUN --csv` on every run of the given folders and counts, per op (its name
without microbatch, chunk and layer), how many of its instances miss by more than the threshold.
With --after-arrival the EP exchanges (token all-to-alls, count / notify) are timed from the last
EP member's start (the CSV's *_after_arrival_s columns): the wait for a late peer left out.
With --calib FILE every run is compared with that calibration (as validate.sh's CALIB=FILE), e.g.
traces/calib/h200.json for the one-H200 runs.
usage: scripts/per_op_tail.py [--build build] [--calib FILE] [--over 12] [--top 20] [--after-arrival]
                              DIR [DIR ...]
"""
import argparse
import collections
import csv
import glob
import os
import re
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--build", default="build")
    ap.add_argument("--over", type=float, default=12.0, help="|error| threshold, percent")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--calib", help="calibration file (default: the run's topology's)")
    ap.add_argument("--after-arrival", action="store_true",
                    help="EP exchanges timed from the last member's start")
    a = ap.parse_args()
    epsim = os.path.join(a.build, "sim", "epsim")
    total, over = collections.Counter(), collections.Counter()
    nops = nover = 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in a.dirs:
            for args in sorted(glob.glob(os.path.join(d, "*.args"))):
                run = args[:-5]
                out = os.path.join(tmp, "ops.csv")
                calib = ["--calib", a.calib] if a.calib else []
                subprocess.run([epsim, "compare", run, "--csv", out] + calib, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for r in csv.DictReader(open(out)):
                    name = re.sub(r"L\d+\.", "", re.sub(r"^mb\d+\.c\d+\.", "", r["name"]))
                    key = (r["kind"], name)
                    total[key] += 1
                    meas, pred = float(r["measured_s"]), float(r["predicted_s"])
                    if a.after_arrival and r["measured_after_arrival_s"]:
                        meas = float(r["measured_after_arrival_s"])
                        pred = float(r["predicted_after_arrival_s"])
                    if meas <= 0:
                        continue  # no relative error: left out, as epsim compare does
                    nops += 1
                    if 100 * abs(pred - meas) / meas > a.over:
                        over[key] += 1
                        nover += 1
    print(f"{nops} ops, {nover} with |error| > {a.over:g}%")
    print("| kind | op | above | of | share |")
    print("|---|---|---|---|---|")
    for key, n in over.most_common(a.top):
        print(f"| {key[0]} | {key[1]} | {n} | {total[key]} | {100 * n / total[key]:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
