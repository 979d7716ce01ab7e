#!/usr/bin/env python3
"""GPU time of Megatron-Core's unfused MoE token permutation, forward and backward, on one GPU.

With `--moe-permute-fusion` off (and without Transformer Engine) Megatron's alltoall dispatcher
permutes tokens with PyTorch ops (megatron/core/transformer/moe/moe_utils.py): `permute` (the
routing map transposed, an argsort of its flattened mask, an index_select of the rows),
`unpermute` (zeros, a scatter_add of the rows) and, after the all-to-all, `sort_chunks_by_idxs`
(a split into (rank, local expert) chunks and a cat in expert order). This times those functions
themselves, imported from a Megatron-LM checkout (nothing of it is committed), over a grid of
shapes, each forward and backward (autograd) as CUDA-event time around the call, after a sleep
kernel of 1500 cycles per microsecond of the previous timing (about 0.75x the op at an H100's
1.98 GHz; torch_kernels.py's Timer calibrates its sleep and flushes L2, this does neither), median
of --iters.

Output: a JSON array (first element {"meta": ...}), records
  {"what": "megatron_unfused", "op": "permute"|"unpermute"|"sort_chunks", "pass": "fwd"|"bwd",
   "tokens": T, "hidden": H, "experts": E, "topk": k, "chunks": C, "rows": T x k,
   "bytes": rows x H x 2 x 2 (the rows read and written once, what a fused kernel moves),
   "time_us": median, "samples": [...]}
Usage: python3 scripts/megatron_permute.py --megatron DIR --out FILE [--iters 20]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch


def timed(fn, iters):
    """Median CUDA-event time of fn() in us, each call after a sleep of 1500 cycles per us of the
    last time (about 0.75x it at 1.98 GHz)."""
    torch.cuda.synchronize()
    out, last = [], 100.0
    for _ in range(iters):
        torch.cuda._sleep(int(1.5 * last * 1000))
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        last = s.elapsed_time(e) * 1000.0
        out.append(last)
    return statistics.median(out), out


def routing(T, E, k, dev):
    """A balanced top-k routing map [T, E] (force-balanced, as the published runs)."""
    idx = (torch.arange(T, device=dev).unsqueeze(1) * k + torch.arange(k, device=dev)) % E
    rmap = torch.zeros(T, E, dtype=torch.bool, device=dev)
    rmap.scatter_(1, idx, True)
    return rmap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    sys.path.insert(0, args.megatron)
    from megatron.core.transformer.moe.moe_utils import permute, sort_chunks_by_idxs, unpermute

    dev = torch.device("cuda")
    recs = []
    for T in (2048, 4096, 8192):
        for H in (2048, 4096, 7168):
            for E in (64, 128):
                k, C = 8, 128  # top-8; chunks: 16 ranks x 8 local experts
                rows = T * k
                rmap = routing(T, E, k, dev)
                x = torch.randn(T, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
                shape = dict(tokens=T, hidden=H, experts=E, topk=k, chunks=C, rows=rows,
                             bytes=rows * H * 4)

                def fwd_permute():
                    return permute(x, rmap, num_out_tokens=rows)

                p, _, sidx, _, _ = fwd_permute()
                gp = torch.randn_like(p)
                y = p.detach().requires_grad_(True)

                def fwd_unpermute():
                    return unpermute(y, sidx, x.shape)

                gu = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
                split = torch.full((C,), rows // C, dtype=torch.long)
                order = torch.arange(C).view(16, 8).t().reshape(-1)  # (rank, expert) -> expert

                def fwd_sort():
                    return sort_chunks_by_idxs(y, split, order)[0]

                for op, fwd, grad, leaf in (("permute", lambda: fwd_permute()[0], gp, x),
                                             ("unpermute", fwd_unpermute, gu, y),
                                             ("sort_chunks", fwd_sort, gp, y)):
                    t_f, s_f = timed(fwd, args.iters)
                    outs = [fwd() for _ in range(args.iters)]
                    it = iter(outs)
                    t_b, s_b = timed(lambda: torch.autograd.backward(next(it), grad), args.iters)
                    leaf.grad = None
                    for ps, t, s in (("fwd", t_f, s_f), ("bwd", t_b, s_b)):
                        recs.append(dict(what="megatron_unfused", op=op, **{"pass": ps}, **shape,
                                         time_us=round(t, 2), samples=[round(v, 2) for v in s]))
                    print(f"  {op:12s} T {T:5d} H {H:5d} E {E:3d}: fwd {t_f:8.1f} us, "
                          f"bwd {t_b:8.1f} us ({rows * H * 4 / t_f / 1e3:.0f} GB/s fused-equivalent)",
                          flush=True)
                del x, p, y, gp, gu, outs
    meta = {"program": "scripts/megatron_permute.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "megatron": os.environ.get("MEGATRON_REV", ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "iters": args.iters}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump([{"meta": meta}] + recs, f, indent=1)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
