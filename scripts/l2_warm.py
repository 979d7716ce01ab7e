#!/usr/bin/env python3
"""Memory-bound ops with their input warm in L2 against flushed, by size, on one GPU.

In a training step a norm or an elementwise op mostly reads the tensor the op before it just wrote;
the calibration times every op after flushing 256 MiB through HBM (docs/calibration.md). This
times three memory-bound ops of a [tokens x hidden] bf16 input both ways: "flushed" (256 MiB
written first) and "warm" (the input written by the kernel just before, as in a run), each alone
between CUDA events, median of REPS. Prints one JSON object:
  {"gpu", "l2_bytes", "records": [{"op", "bytes_in", "flushed_us", "warm_us", "ratio"}]}
usage: l2_warm.py [--reps N] > out.json
"""
import argparse, json, statistics, sys

import torch
import torch.nn.functional as F


def timed(fn, prep):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    prep()
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=25)
    args = p.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    hidden = 4096
    res = {"gpu": props.name, "l2_bytes": props.L2_cache_size, "torch": torch.__version__,
           "hidden": hidden, "reps": args.reps, "records": []}
    for mb in (2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256):
        tokens = mb * (1 << 20) // (2 * hidden)
        x = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16)
        y = torch.randn_like(x)
        w = torch.ones(hidden, device=dev, dtype=torch.bfloat16)
        out = torch.empty_like(x)
        ops = {"rms_norm": lambda: F.rms_norm(x, (hidden,), w),
               "add": lambda: torch.add(x, y, out=out),
               "copy": lambda: out.copy_(x)}
        for name, fn in ops.items():
            fn()
            cold = [timed(fn, lambda: flush.zero_()) for _ in range(args.reps)]
            # warm: the input written just before, as the previous op of a run leaves it
            warm_in = (lambda: (flush.zero_(), y.mul_(1.0), x.mul_(1.0))) if name == "add" else \
                (lambda: (flush.zero_(), x.mul_(1.0)))
            warm = [timed(fn, warm_in) for _ in range(args.reps)]
            rec = {"op": name, "bytes_in": x.numel() * 2 * (2 if name == "add" else 1),
                   "flushed_us": statistics.median(cold), "warm_us": statistics.median(warm)}
            rec["ratio"] = rec["warm_us"] / rec["flushed_us"]
            res["records"].append(rec)
            print(f"{name} {mb} MiB: flushed {rec['flushed_us']:.1f} us, warm {rec['warm_us']:.1f} us,"
                  f" x{rec['ratio']:.3f}", file=sys.stderr, flush=True)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
