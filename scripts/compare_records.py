#!/usr/bin/env python3
"""The same op shapes timed in two compute.json files (epref bench calib): time in B / time in A.

Records are matched by kind, phase, shape (m, n, k, batch), bytes, sequence and element type.
Prints, per kind (and, with --split-us, apart below and above that many us in A), the count and
the median, 10th and 90th percentile of the ratio. Used for launch-to-launch spreads, one machine
against another, and records timed one way against another (docs/validation.md, "Held out").
Usage: python3 scripts/compare_records.py A B [--min-us 20] [--split-us 0] [--source grid|model]
  A, B: compute.json or compute.json.xz
"""
import argparse
import collections
import statistics

from jsonfile import load_records


def key(r):
    return (r["kind"], r["phase"], r["m"], r["n"], r["k"], r["batch"], r["bytes"],
            r.get("seq", 0), r.get("dtype", "bf16"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--min-us", type=float, default=20.0, help="records of A below this left out")
    ap.add_argument("--split-us", type=float, default=0.0,
                    help="with > 0: each kind apart below and above this time in A")
    ap.add_argument("--source", choices=("grid", "model"), help="only records of this source")
    args = ap.parse_args()
    a = {}
    for r in load_records(args.a)[1]:
        if not args.source or r.get("source", "").startswith(args.source):
            a.setdefault(key(r), r["time_us"])
    groups = collections.defaultdict(list)
    for r in load_records(args.b)[1]:
        t = a.get(key(r))
        if t is None or t < args.min_us or t <= 0:
            continue
        part = "" if args.split_us <= 0 else (" < %g us" % args.split_us if t < args.split_us
                                                else " >= %g us" % args.split_us)
        groups[r["kind"] + part].append(r["time_us"] / t)
    print("| kind | records | B / A median | p10 | p90 |")
    print("|---|---|---|---|---|")
    for g in sorted(groups):
        v = sorted(groups[g])
        print("| %s | %d | %.3f | %.3f | %.3f |" % (g, len(v), statistics.median(v),
                                                      v[len(v) // 10], v[9 * len(v) // 10]))


if __name__ == "__main__":
    main()
