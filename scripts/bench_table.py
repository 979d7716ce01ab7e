#!/usr/bin/env python3
"""bench_table.py: a markdown table of `epref bench dispatch|combine` JSON files (docs/metrics.md).

  python3 scripts/bench_table.py [--rows B,B,...] FILE [FILE ...]

Each FILE is one launch (epref's --json output). A row per token count, a column per backend:
"time us / link GB/s", the median over the launches; with several launches the time's range
follows in parentheses. --rows picks and orders the backends (default: every backend of the first
file in its order). The SMs of each backend (num_sms of its first record; "-" when the bench does
not count them) are printed under the table. Bad input: one line on stderr, exit 2.
"""
import json
import statistics
import sys


def die(msg):
    print(f"bench_table.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        die(f"{path}: {e}")
    if not isinstance(data, list) or not data or "meta" not in data[0]:
        die(f"{path}: not an epref bench JSON (a list starting with its meta record)")
    rows = {}
    for r in data[1:]:
        try:
            rows[(r["backend"], int(r["tokens"]))] = r
        except (KeyError, TypeError, ValueError):
            die(f"{path}: a record without backend or tokens")
    return data[0]["meta"], rows


def main(argv):
    want = None
    files = []
    i = 0
    while i < len(argv):
        if argv[i] == "--rows":
            if i + 1 == len(argv):
                die("--rows needs a comma-separated list of backends")
            want = [b for b in argv[i + 1].split(",") if b]
            i += 2
            continue
        if argv[i].startswith("-"):
            die(f"unknown option {argv[i]}")
        files.append(argv[i])
        i += 1
    if not files:
        die("usage: bench_table.py [--rows B,B,...] FILE [FILE ...]")
    launches = [load(p) for p in files]
    bench = {m.get("benchmark") for m, _ in launches}
    if len(bench) != 1:
        die(f"the files mix benchmarks: {sorted(map(str, bench))}")
    first = launches[0][1]
    order = []
    for b, _ in first:
        if b not in order:
            order.append(b)
    backends = want or order
    for b in backends:
        if b not in order:
            die(f"{files[0]}: no backend {b} (it has {', '.join(order)})")
    tokens = sorted({t for _, t in first})
    print("| tokens | " + " | ".join(backends) + " |")
    print("|---" * (len(backends) + 1) + "|")
    for t in tokens:
        cells = []
        for b in backends:
            recs = [rows[(b, t)] for _, rows in launches if (b, t) in rows]
            if not recs:
                cells.append("-")
                continue
            times = [float(r["time_us"]) for r in recs]
            med = statistics.median(times)
            gbps = statistics.median(float(r.get("link_GBps", 0)) for r in recs)
            cell = f"{med:.1f}"
            if len(times) > 1:
                cell += f" ({min(times):.1f}-{max(times):.1f})"
            cell += f" / {gbps:.0f}" if gbps > 0 else ""
            cells.append(cell)
        print(f"| {t} | " + " | ".join(cells) + " |")
    sms = []
    for b in backends:
        n = next((r.get("num_sms") for (bb, _), r in first.items() if bb == b), None)
        sms.append(f"{b} {n if isinstance(n, int) and n >= 0 else '-'}")
    print()
    print("SMs: " + ", ".join(sms) + ".")


if __name__ == "__main__":
    main(sys.argv[1:])
