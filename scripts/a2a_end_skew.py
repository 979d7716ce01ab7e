#!/usr/bin/env python3
"""How far apart the ranks of one EP group end the same token all-to-all, in a measured trace.

For every dispatch / combine op name, the group's members (--ep consecutive ranks, Megatron's EP
groups with TP 1; default every rank of the trace) end it at different times when their traffic
differs (skewed routing); epsim ends every flow of a collective together (docs/epsim.md,
"Collectives"). Prints the median and 90th percentile, over the ops, of (last end - first end).
usage: scripts/a2a_end_skew.py TRACE[.xz] [TRACE ...] [--ep N]
"""
import argparse
import collections
import os
import statistics

from jsonfile import load_json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--ep", type=int, default=0, help="EP group size (default: every rank)")
    a = ap.parse_args()
    for path in a.traces:
        ends = collections.defaultdict(list)
        for e in load_json(path)["traceEvents"]:
            if e.get("ph") != "X" or e["args"].get("kind") not in ("a2a_dispatch", "a2a_combine"):
                continue
            group = e["pid"] // a.ep if a.ep > 0 else 0
            ends[(group, e["name"])].append(e["ts"] + e["dur"])
        skew = sorted(max(v) - min(v) for v in ends.values() if len(v) > 1)
        if not skew:
            print(f"{os.path.basename(path)}: no all-to-all with two or more members")
            continue
        print(f"{os.path.basename(path)}: {len(skew)} all-to-alls, end skew median "
              f"{statistics.median(skew):.0f} us, p90 {skew[9 * len(skew) // 10]:.0f} us")


if __name__ == "__main__":
    main()
