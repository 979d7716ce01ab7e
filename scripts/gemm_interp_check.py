#!/usr/bin/env python3
"""Interpolation rules for dense GEMMs between the grid's powers of two, scored on held-out shapes.

Reads a grid compute.json (records with source "grid") and a compute.json of model shapes, and
predicts each dense GEMM of the second from the grid's M x N x K box around it, multilinear in
log(M, N, K), by several rules: efficiency (what epsim does, docs/epsim.md "Compute"), log
efficiency, linear weights, 1 / efficiency, and efficiency over tile-and-wave quantized work
(tiles TM x TN on 132 SMs, with or without a one-wave floor). Prints |error| median and p90 and the
summed-time error per phase (docs/validation.md, "Held out").
usage: scripts/gemm_interp_check.py GRID_COMPUTE_JSON[.xz] HELDOUT_COMPUTE_JSON[.xz]
"""
import math
import statistics
import sys

from jsonfile import load_records

SMS = 132
GRID = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def quantized(m, n, k, tm, tn, floor):
    """Tile-and-wave work over the exact work (1: no quantization)."""
    if not tm:
        return 1.0
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    if floor and tiles < SMS:
        return 1.0
    return math.ceil(tiles / SMS) * SMS * tm * tn * k / (m * n * k)


def bracket(q, linear):
    if q <= GRID[0] or q >= GRID[-1]:
        v = GRID[0] if q <= GRID[0] else GRID[-1]
        return v, v, 0.0
    i = next(i for i, g in enumerate(GRID) if g >= q)
    lo, hi = GRID[i - 1], GRID[i]
    if hi == q:
        return q, q, 0.0
    w = (q - lo) / (hi - lo) if linear else math.log(q / lo) / math.log(hi / lo)
    return lo, hi, w


def predict(table, m, n, k, rule):
    lin = rule["space"] == "linear"
    sy = sw = 0.0
    (ml, mh, wm), (nl, nh, wn), (kl, kh, wk) = (bracket(x, lin) for x in (m, n, k))
    for a, wa in ((ml, 1 - wm), (mh, wm)):
        for b, wb in ((nl, 1 - wn), (nh, wn)):
            for c, wc in ((kl, 1 - wk), (kh, wk)):
                w = wa * wb * wc
                if w == 0 or (a, b, c) not in table:
                    continue
                e = table[(a, b, c)] * quantized(a, b, c, *rule["tiles"])
                sy += w * rule["to"](e)
                sw += w
    if sw == 0:
        return None
    eff = rule["back"](sy / sw) / quantized(m, n, k, *rule["tiles"])
    return 2.0 * m * n * k / eff  # time in units of 1 / peak


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    grid, held = load_records(sys.argv[1])[1], load_records(sys.argv[2])[1]
    ident = (lambda e: e, lambda e: e)
    rules = {
        "efficiency (epsim)": dict(space="log", tiles=(0, 0, 0), to=ident[0], back=ident[1]),
        "log efficiency": dict(space="log", tiles=(0, 0, 0), to=math.log, back=math.exp),
        "linear weights": dict(space="linear", tiles=(0, 0, 0), to=ident[0], back=ident[1]),
        "1 / efficiency": dict(space="log", tiles=(0, 0, 0), to=lambda e: 1 / e,
                               back=lambda v: 1 / v),
    }
    for tm, tn in ((128, 128), (128, 256), (256, 128)):
        for floor in (0, 1):
            rules[f"waves {tm}x{tn}{' floor' if floor else ''}"] = dict(
                space="log", tiles=(tm, tn, floor), to=ident[0], back=ident[1])
    print("| rule | fwd median / p90 / summed | dgrad | wgrad |")
    print("|---|---|---|---|")
    for name, rule in rules.items():
        cells = []
        for phase in ("fwd", "bwd", "bwd_dw"):
            table = {(r["m"], r["n"], r["k"]): r["flops"] / (r["time_us"] * 1e-6)
                     for r in grid if r.get("kind") == "gemm" and r["phase"] == phase
                     and r.get("source") == "grid"}
            err, tm, tp = [], 0.0, 0.0
            for r in held:
                if r.get("kind") != "gemm" or r["phase"] != phase or r.get("source") == "grid":
                    continue
                p = predict(table, r["m"], r["n"], r["k"], rule)
                if p is None:
                    continue
                t = r["time_us"] * 1e-6
                err.append(abs(p / t - 1))
                tm += t
                tp += p
            err.sort()
            cells.append(f"{100 * statistics.median(err):.1f}% / "
                         f"{100 * err[int(0.9 * (len(err) - 1))]:.1f}% / {100 * (tp / tm - 1):+.1f}%")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
