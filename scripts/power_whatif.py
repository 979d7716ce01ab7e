#!/usr/bin/env python3
"""What the power cap would do to the published suite, as a rough what-if, not a model.

For each case of configs/published/suite.tsv (but the 1024-GPU one, too large for a per-op CSV
here), runs epsim with --csv and, per GPU, takes the time its compute-bound ops (GEMM, grouped
GEMM, attention) run over the step: the compute duty. The duty -> slowdown table is the one
`scripts/sustained_clock.py --mix` measured on one H100 (docs/calibration.md, "Sustained load"),
interpolated linearly. A GPU's compute-bound time grows by its slowdown; the step grows by the
largest such growth among the GPUs (as if that compute sat on the critical path, which is an upper
estimate where it overlaps communication). Prints a markdown table: published, predicted, error,
duty (the busiest GPU), what-if step, what-if error.
usage: scripts/power_whatif.py [BUILD_DIR] [REGEX]
"""
import csv, os, re, subprocess, sys, tempfile

DUTY = [(0.0, 1.0), (0.25, 1.010), (0.49, 1.025), (0.75, 1.115), (1.0, 1.17)]
BOUND = {"gemm", "grouped_gemm", "attention"}


def slowdown(d):
    for (x0, y0), (x1, y1) in zip(DUTY, DUTY[1:]):
        if d <= x1:
            return y0 + (y1 - y0) * (d - x0) / (x1 - x0)
    return DUTY[-1][1]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    only = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    epsim = os.path.join(root, build, "sim", "epsim")
    print("| case | published | predicted | error | compute duty | what-if | what-if error |")
    print("|---|---|---|---|---|---|---|")
    errs, werrs = [], []
    for line in open(os.path.join(root, "configs/published/suite.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        name, args, topo, world, metric, pub = line.split("\t")[:6]
        if int(world) > 512 or (only and not only.search(name)):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run([epsim, "--topo", topo, "@" + os.path.join(root, "configs/published", args),
                                  "--world-size", world, "--csv", os.path.join(tmp, "ops.csv")],
                                 capture_output=True, text=True, check=True).stdout
            step = float(re.search(r"iteration time\s+([0-9.]+) s", out).group(1))
            busy = {}
            with open(os.path.join(tmp, "ops.csv")) as f:
                for r in csv.DictReader(f):
                    if r["stream"] == "comp" and r["kind"] in BOUND:
                        busy[r["rank"]] = busy.get(r["rank"], 0.0) + float(r["duration_s"])
        grow = max(t * (slowdown(t / step) - 1) for t in busy.values())
        duty = max(busy.values()) / step
        whatif = step + grow
        pubv = float(pub)
        if metric != "step_s":  # a throughput: the error is published / predicted - 1
            tok = float(re.search(r"tokens/s/GPU\s+([0-9.]+)", out).group(1))
            e0, e1 = pubv / tok - 1, pubv / (tok * step / whatif) - 1
        else:
            e0, e1 = step / pubv - 1, whatif / pubv - 1
        errs.append(abs(e0))
        werrs.append(abs(e1))
        print(f"| {name} | {pub} | {step:.4g} s | {e0:+.1%} | {duty:.2f} | {whatif:.4g} s | {e1:+.1%} |",
              flush=True)
    print(f"\n{len(errs)} cases: mean |error| {sum(errs) / len(errs):.1%} as predicted, "
          f"{sum(werrs) / len(werrs):.1%} with the what-if")


if __name__ == "__main__":
    main()
