#!/usr/bin/env python3
"""Host time of one linear layer's forward, by how PyTorch issues it: the reference call of
Transformer Engine issue 2053 (torch.nn.Linear(2048, 2048) on 8192 bf16 tokens; published for an
H100 DGX with a Xeon Platinum 8480C: 13.48 us per call) and its parts - without the bias (one
cuBLAS GEMM), F.linear, torch.matmul, an addmm - so that a difference between this host and the
published one can be told apart from how this PyTorch release issues the bias.

Every figure is the host's time per call over --iters back-to-back calls (the GPU's 100 us per
call keeps the host ahead, so it never waits), the median of --repeat samples; printed and written
as JSON records {"what": <variant>, "time_us": median, "samples": [...]}.
Usage: python3 scripts/host_linear_probe.py --out FILE [--repeat 9] [--iters 50]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from torch_host import wall_us as host_us  # the host's time per call, GPU not waited for

TOKENS, WIDTH = 8192, 2048


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    dev, bf = "cuda", torch.bfloat16
    lin = torch.nn.Linear(WIDTH, WIDTH).to(dev, bf)
    lin_nb = torch.nn.Linear(WIDTH, WIDTH, bias=False).to(dev, bf)
    x = torch.randn(TOKENS, WIDTH, device=dev, dtype=bf)
    xg = x.clone().requires_grad_(True)
    w, b = lin.weight.detach(), lin.bias.detach()
    wt = w.t()
    variants = {
        "linear_bias_grad": lambda: lin(xg),
        "linear_bias_no_grad": lambda: lin(x),
        "linear_nobias_grad": lambda: lin_nb(xg),
        "F_linear_bias": lambda: F.linear(x, w, b),
        "F_linear_nobias": lambda: F.linear(x, w),
        "matmul": lambda: torch.matmul(x, wt),
        "addmm": lambda: torch.addmm(b, x, wt),
        "add_small": lambda: b.add(b),  # one elementwise kernel: the floor of an op
    }
    for fn in variants.values():
        for _ in range(5):
            fn()
    recs = []
    for name, fn in variants.items():
        with torch.set_grad_enabled(name.endswith("_grad") and not name.endswith("no_grad")):
            s = [host_us(fn, args.iters) for _ in range(args.repeat)]
        recs.append({"what": name, "time_us": round(statistics.median(s), 2),
                     "samples": [round(v, 2) for v in s]})
        print(f"  {name:22s} {recs[-1]['time_us']:8.2f} us  (min {min(s):.2f}, max {max(s):.2f})",
              flush=True)
    meta = {"program": "scripts/host_linear_probe.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "repeat": args.repeat, "iters": args.iters, "tokens": TOKENS, "width": WIDTH}
    with open(args.out, "w") as f:
        json.dump([{"meta": meta}] + recs, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
