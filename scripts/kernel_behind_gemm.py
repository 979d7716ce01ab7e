#!/usr/bin/env python3
"""Does a kernel launched on another stream while a GEMM runs get SMs before the GEMM ends?

The hardware hands out a kernel's thread blocks in launch order within a stream priority: a kernel
reached on a second stream while a GEMM with more blocks than the GPU holds is running gets SMs
only as the GEMM's last blocks are placed, unless its stream has a higher priority. Megatron-LM's
EP overlap puts its all-to-alls on such a second stream (`--high-priority-a2a-comm-stream` raises
its priority); epref runs the same schedule. This times it alone, on one GPU:
  stream A: a bf16 torch.matmul (M x N x K, 1 to many waves of 128 x 128 tiles);
  after `delay` us of host spin (the GEMM running), stream B (default or highest priority): a
  small kernel that needs SMs (an add over 1 MiB: a few hundred blocks, a few us alone).
CUDA events: A's start and end, B's stream reaching it and B's end. Each record: the medians over
--reps trials of the GEMM's time, B's span alone (on an idle GPU; like every span it includes the
host's launch after the first event), B's span beside the GEMM (its stream reaching it -> its end)
and B's end relative to the GEMM's end ("behind": B ended later than half its span alone before
the GEMM's end).
Output: a JSON array (first element {"meta": ...}), records
  {"what": "kernel_behind_gemm", "m", "n", "k", "tiles", "sms", "priority": "normal"|"high",
   "delay_us", "gemm_us", "alone_us", "span_us", "end_after_gemm_us", "behind"}
Usage: python3 scripts/kernel_behind_gemm.py --out FILE [--reps 20]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_kernels import write_records  # noqa: E402

SHAPES = [(1024, 1024, 4096), (2048, 2048, 4096), (4096, 4096, 4096), (8192, 8192, 4096)]


def spin(us):
    t = time.perf_counter() + us * 1e-6
    while time.perf_counter() < t:
        pass


def alone_us(x, reps):
    """B's kernel alone: median of reps, events around each."""
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x.add_(1.0)
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3)
    return statistics.median(out)


def trial(a, b, x, sa, sb, delay):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    torch.cuda.synchronize()
    with torch.cuda.stream(sa):
        ev[0].record(sa)
        torch.matmul(a, b)
        ev[1].record(sa)
    spin(delay)
    with torch.cuda.stream(sb):
        ev[2].record(sb)
        x.add_(1.0)
        ev[3].record(sb)
    torch.cuda.synchronize()
    t = [ev[0].elapsed_time(e) * 1e3 for e in ev]  # us from the GEMM's start
    return t[1], t[3] - t[2], t[3] - t[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("kernel_behind_gemm.py: no GPU")
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    low, high = torch.cuda.Stream.priority_range()  # (lowest, highest): numerically high > low
    sa = torch.cuda.Stream()
    x = torch.zeros(1 << 19, device="cuda", dtype=torch.bfloat16)  # 1 MiB
    b_alone = alone_us(x, args.reps)
    recs = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(5):  # warm-up: cuBLAS's choice, clocks
            torch.matmul(a, w)
        torch.cuda.synchronize()
        g = statistics.median(trial(a, w, x, sa, sa, 0)[0] for _ in range(5))
        for prio, name in ((0, "normal"), (high, "high")):
            sb = torch.cuda.Stream(priority=prio)
            for frac in (0.1, 0.5):
                delay = max(15.0, frac * g)
                rs = [trial(a, w, x, sa, sb, delay) for _ in range(args.reps)]
                gemm = statistics.median(r[0] for r in rs)
                span = statistics.median(r[1] for r in rs)
                after = statistics.median(r[2] for r in rs)
                recs.append({"what": "kernel_behind_gemm", "m": m, "n": n, "k": k,
                             "tiles": -(-m // 128) * -(-n // 128), "sms": sms, "priority": name,
                             "delay_us": round(delay, 1), "gemm_us": round(gemm, 2),
                             "alone_us": round(b_alone, 2), "span_us": round(span, 2),
                             "end_after_gemm_us": round(after, 2),
                             "behind": after > -0.5 * b_alone})
                print(f"{m}x{n}x{k} tiles {recs[-1]['tiles']} {name:6s} delay {delay:7.1f} us: "
                      f"GEMM {gemm:8.1f} us, B alone {b_alone:5.1f} span {span:8.1f} "
                      f"ends {after:+8.1f} us after the GEMM", flush=True)
    meta = {"gpu": props.name, "sms": sms, "torch": torch.__version__,
            "cuda": torch.version.cuda, "reps": args.reps,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "format": "scripts/kernel_behind_gemm.py"}
    write_records(args.out, meta, recs)


if __name__ == "__main__":
    main()
