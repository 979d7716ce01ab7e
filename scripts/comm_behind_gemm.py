#!/usr/bin/env python3
"""Does a communication kernel run beside a GEMM, or wait for it to end? Read from measured traces.

For every token all-to-all (kinds a2a_dispatch / a2a_combine) on a side stream whose stream reached
it while a compute op of the given kinds ran on the main stream (with at least 30% of the op's
usual time still to go), compare two models with the measured duration:
  - concurrent: the transfer runs beside the GEMM, slowed by a factor (--slowdown, 1.35: the
    NCCL all-to-all beside a GEMM loop in the committed interference records);
  - behind: it gets its blocks when the GEMM ends, then takes its usual time.
"Usual time" is the median duration of the same op (name without its microbatch) on the same rank
where it started with no such compute op running. Prints the median relative error of each model
and the cases.
Usage: python3 scripts/comm_behind_gemm.py KINDS TRACE [TRACE ...]
  KINDS: comma-separated compute kinds (gemm, grouped_gemm, attention); TRACE: .trace.json[.xz]
"""
import argparse
import re
import statistics

from jsonfile import load_json


def cases(path, kinds):
    evs = [e for e in load_json(path)["traceEvents"] if e.get("ph") == "X"]
    for pid in sorted({e["pid"] for e in evs}):
        ev = [e for e in evs if e["pid"] == pid]
        comp = [e for e in ev if e["tid"] == 0 and e["args"].get("kind") in kinds]
        side = [e for e in ev if e["tid"] != 0 and
                e["args"].get("kind") in ("a2a_dispatch", "a2a_combine")]
        key = lambda n: re.sub(r"^mb\d+\.", "", n)
        under, usual = [], {}
        for c in side:
            run = [g for g in comp if g["ts"] < c["ts"] < g["ts"] + g["dur"]]
            if run:
                under.append((c, run[0]))
            else:
                usual.setdefault(key(c["name"]), []).append(c["dur"])
        for c, g in under:
            alone = usual.get(key(c["name"]))
            if not alone:
                continue
            alone = statistics.median(alone)
            left = g["ts"] + g["dur"] - c["ts"]
            if left >= 0.3 * alone:
                yield c["name"], g["name"], alone, left, c["dur"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kinds")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--slowdown", type=float, default=1.35)
    a = ap.parse_args()
    rows = [r for t in a.traces for r in cases(t, set(a.kinds.split(",")))]
    if not rows:
        print("no case")
        return
    conc = [abs(alone * a.slowdown - d) / d for _, _, alone, _, d in rows]
    behind = [abs(left + alone - d) / d for _, _, alone, left, d in rows]
    print(f"{len(rows)} cases; median |model - measured| / measured: concurrent "
          f"{statistics.median(conc):.1%}, behind the GEMM {statistics.median(behind):.1%}")
    for name, gemm, alone, left, d in rows:
        print(f"  {name:32s} under {gemm:32s} usual {alone:7.0f} us, GEMM left {left:7.0f} us, "
              f"measured {d:7.0f} us")


if __name__ == "__main__":
    main()
