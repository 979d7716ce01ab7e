#!/usr/bin/env python3
"""GPU time of Megatron-Core's unfused MoE token permutation, forward and backward, on one GPU.

With `--moe-permute-fusion` off (and without Transformer Engine) Megatron's alltoall dispatcher
permutes tokens with PyTorch ops (megatron/core/transformer/moe/moe_utils.py): `permute` (the
routing map transposed, an argsort of its flattened mask, an index_select of the rows),
`unpermute` (zeros, a scatter_add of the rows) and, after the all-to-all, `sort_chunks_by_idxs`
(a split into (rank, local expert) chunks and a cat in expert order). This times those functions
themselves, imported from a Megatron-LM checkout (nothing of it is committed), over a grid of
shapes, each forward and forward + backward (autograd) timed with scripts/torch_kernels.py's
Timer (256 MiB flushed from L2 and a sleep of 1.5x the op before each timed call, so the power cap
stays out; median of --iters); the backward is forward + backward minus forward.

Output: a JSON array (first element {"meta": ...}), records
  {"what": "megatron_unfused", "op": "permute"|"unpermute"|"sort_chunks", "pass": "fwd"|"bwd",
   "tokens": T, "hidden": H, "experts": E, "topk": k, "chunks": C, "rows": T x k,
   "bytes": rows x H x 2 x 2 (the rows read and written once, what a fused kernel moves),
   "time_us": median, "min_us"/"max_us" (fwd), "fwd_bwd_us" and its min/max (bwd),
   "host_us": the host's issue time of the call (median; bwd: fwd_bwd's less fwd's)}
Usage: python3 scripts/megatron_permute.py --megatron DIR --out FILE [--iters 20] [--warmup 3]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_kernels import Timer, write_records  # noqa: E402


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
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, args.megatron)
    from megatron.core.transformer.moe.moe_utils import permute, sort_chunks_by_idxs, unpermute

    tm = Timer(torch, args.iters, args.warmup)
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
                    def clear(leaf=leaf):
                        leaf.grad = None

                    def fwd_bwd(fwd=fwd, grad=grad):
                        torch.autograd.backward(fwd(), grad)

                    t_f, f_lo, f_hi, h_f = tm.time(fwd, clear)
                    t_fb, fb_lo, fb_hi, h_fb = tm.time(fwd_bwd, clear)
                    t_b = t_fb - t_f
                    clear()
                    recs.append(dict(what="megatron_unfused", op=op, **{"pass": "fwd"}, **shape,
                                     time_us=round(t_f, 2), min_us=round(f_lo, 2),
                                     max_us=round(f_hi, 2), host_us=round(h_f, 1)))
                    recs.append(dict(what="megatron_unfused", op=op, **{"pass": "bwd"}, **shape,
                                     time_us=round(t_b, 2), fwd_bwd_us=round(t_fb, 2),
                                     fwd_bwd_min_us=round(fb_lo, 2), fwd_bwd_max_us=round(fb_hi, 2),
                                     host_us=round(h_fb - h_f, 1)))
                    print(f"  {op:12s} T {T:5d} H {H:5d} E {E:3d}: fwd {t_f:8.1f} us, "
                          f"bwd {t_b:8.1f} us ({rows * H * 4 / t_f / 1e3:.0f} GB/s fused-equivalent)",
                          flush=True)
                del x, p, y, gp, gu
    meta = {"program": "scripts/megatron_permute.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "megatron": os.environ.get("MEGATRON_REV", ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "iters": args.iters,
            "timing": "torch_kernels.Timer; bwd = fwd_bwd - fwd"}
    write_records(args.out, meta, recs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
