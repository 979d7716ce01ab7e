#!/usr/bin/env python3
"""Which ops make the per-op error tail of the held-out runs (docs/validation.md, "Held out").

Runs `epsim compare RUN --csv` on every run of the given folders and counts, per op (its name
without microbatch, chunk and layer), how many of its instances miss by more than the threshold.
usage: scripts/per_op_tail.py [--build build] [--over 12] [--top 20] DIR [DIR ...]
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
    a = ap.parse_args()
    epsim = os.path.join(a.build, "sim", "epsim")
    total, over = collections.Counter(), collections.Counter()
    nops = nover = 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in a.dirs:
            for args in sorted(glob.glob(os.path.join(d, "*.args"))):
                run = args[:-5]
                out = os.path.join(tmp, "ops.csv")
                subprocess.run([epsim, "compare", run, "--csv", out], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for r in csv.DictReader(open(out)):
                    name = re.sub(r"L\d+\.", "", re.sub(r"^mb\d+\.c\d+\.", "", r["name"]))
                    key = (r["kind"], name)
                    total[key] += 1
                    nops += 1
                    if abs(float(r["error_pct"])) > a.over:
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
