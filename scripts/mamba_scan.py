#!/usr/bin/env python3
"""GPU time of the Mamba-2 mixer between its two projections, as Megatron-Core trains it.

Megatron's MambaMixer (megatron/core/ssm/mamba_mixer.py, _ssm_training: use_mamba_mem_eff_path,
its default) runs, between in_proj and out_proj, mamba_ssm's `mamba_split_conv1d_scan_combined`
(the depthwise causal conv1d and its SiLU, the chunked SSD scan - Triton kernels - with D and the
SiLU(z) gate) and then the grouped RMSNorm of mamba_ssm's layernorm_gated. This times exactly
those calls, forward and forward + backward (autograd), imported from a mamba_ssm checkout given
with --mamba (nothing of it is committed) over a grid of shapes: sequence, heads (64-wide), state,
B/C groups, chunk 128.

One substitution, said in every record: the causal conv1d is the causal-conv1d package's CUDA
kernel in Megatron's container; that package is not on the GPU image, so its forward and backward
are PyTorch's depthwise conv1d (and autograd) here. The conv1d's own time is timed alone too
("conv_fwd_us", "conv_bwd_us") so that its share is visible.

Timing: scripts/torch_kernels.py's Timer (256 MiB flushed from L2, a sleep of 1.5x the op before
each timed call so the power cap stays out, median of --iters); the backward is forward +
backward minus forward.

Output: a JSON array (first element {"meta": ...}), records
  {"what": "mamba_scan", "pass": "fwd"|"bwd", "seq": L, "heads": h, "head_dim": 64,
   "state": N, "groups": g, "chunk": 128, "elements": L x h x 64 x N, "time_us": median, ...}
Usage: python3 scripts/mamba_scan.py --mamba DIR --out FILE [--iters 20] [--warmup 3]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_kernels import Timer, write_records  # noqa: E402

HEAD_DIM, CHUNK, CONV_WIDTH = 64, 128, 4
# (seq, heads, state, groups): the sequence x heads grid at Nemotron-H's state and groups, and
# the other state and group counts at one shape
GRID = [(s, h, 128, 8) for s in (2048, 4096, 8192, 16384) for h in (32, 64, 128)] + \
       [(8192, 64, 64, 8), (8192, 64, 128, 1), (8192, 64, 256, 8)]


def conv_fwd(x, w, b, seq_idx, init, final, silu):
    """causal_conv1d_fwd_function's contract: x [b, d, s] -> the causal depthwise conv [b, d, s]."""
    y = F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., :x.shape[-1]]
    return F.silu(y) if silu else y


def conv_bwd(x, w, b, dout, seq_idx, init, dfinal, dx, return_dinit, silu):
    """causal_conv1d_bwd_function's contract: (dx, dweight, dbias, dinitial_states)."""
    with torch.enable_grad():
        xg, wg = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
        bg = b.detach().requires_grad_(True) if b is not None else None
        y = conv_fwd(xg, wg, bg, None, None, None, silu)
        grads = torch.autograd.grad(y, [t for t in (xg, wg, bg) if t is not None], dout)
    gx, gw = grads[0], grads[1]
    gb = grads[2] if bg is not None else None
    if dx is not None:
        dx.copy_(gx)
        gx = dx
    return gx, gw, gb, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mamba", required=True, help="a directory holding the mamba_ssm package")
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, args.mamba)
    import mamba_ssm.ops.triton.ssd_combined as ssd
    from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn
    ssd.causal_conv1d_fwd_function, ssd.causal_conv1d_bwd_function = conv_fwd, conv_bwd

    tm = Timer(torch, args.iters, args.warmup)
    dev = torch.device("cuda")
    recs = []
    for seq, heads, state, groups in GRID:
        inner = heads * HEAD_DIM
        conv_dim = inner + 2 * groups * state
        # in_proj's output as Megatron lays it out: z, xBC, dt ([b, l, d] after its transpose)
        zxbcdt = (torch.randn(1, seq, inner + conv_dim + heads, device=dev, dtype=torch.bfloat16)
                  .requires_grad_(True))
        conv_w = (0.5 * torch.randn(conv_dim, CONV_WIDTH, device=dev, dtype=torch.bfloat16)
                  ).requires_grad_(True)
        conv_b = torch.zeros(conv_dim, device=dev, dtype=torch.bfloat16, requires_grad=True)
        dt_bias = torch.rand(heads, device=dev).requires_grad_(True)
        a_log = torch.log(torch.rand(heads, device=dev) * 15 + 1).requires_grad_(True)
        d = torch.ones(heads, device=dev, requires_grad=True)
        norm_w = torch.ones(inner, device=dev, dtype=torch.bfloat16, requires_grad=True)
        grad = torch.randn(1, seq, inner, device=dev, dtype=torch.bfloat16)
        leaves = (zxbcdt, conv_w, conv_b, dt_bias, a_log, d, norm_w)

        def fwd():
            y = ssd.mamba_split_conv1d_scan_combined(
                zxbcdt, conv_w, conv_b, dt_bias, -torch.exp(a_log), D=d, chunk_size=CHUNK,
                activation="silu", headdim=HEAD_DIM, ngroups=groups, norm_before_gate=False)
            return rmsnorm_fn(y, norm_w, None, z=None, eps=1e-5, group_size=inner // groups,
                              norm_before_gate=False)

        def fwd_bwd():
            fwd().backward(grad)

        def clear():
            for t in leaves:
                t.grad = None

        # the conv1d stand-in alone, on the xBC slice
        xbc = zxbcdt.detach()[..., inner:inner + conv_dim].transpose(1, 2)
        gconv = torch.randn_like(xbc)
        conv_f = tm.time(lambda: conv_fwd(xbc, conv_w.detach(), conv_b.detach(), None, None, None,
                                          True))[0]
        conv_b_us = tm.time(lambda: conv_bwd(xbc, conv_w, conv_b, gconv, None, None, None, None,
                                             False, True))[0]
        tf, tf_lo, tf_hi, hf = tm.time(fwd, clear)
        tb, tb_lo, tb_hi, hb = tm.time(fwd_bwd, clear)
        shape = dict(seq=seq, heads=heads, head_dim=HEAD_DIM, state=state, groups=groups,
                     chunk=CHUNK, elements=seq * inner * state,
                     conv="torch depthwise conv1d (causal-conv1d's CUDA kernel in Megatron)")
        recs.append(dict(what="mamba_scan", **{"pass": "fwd"}, **shape, time_us=round(tf, 2),
                         min_us=round(tf_lo, 2), max_us=round(tf_hi, 2), host_us=round(hf, 1),
                         conv_fwd_us=round(conv_f, 2)))
        recs.append(dict(what="mamba_scan", **{"pass": "bwd"}, **shape, time_us=round(tb - tf, 2),
                         fwd_bwd_us=round(tb, 2), fwd_bwd_min_us=round(tb_lo, 2),
                         fwd_bwd_max_us=round(tb_hi, 2), host_us=round(hb - hf, 1),
                         conv_bwd_us=round(conv_b_us, 2)))
        el = seq * inner * state
        print(f"  seq {seq:5d} heads {heads:3d} state {state:3d} groups {groups}: fwd {tf:8.1f} us "
              f"({el / tf / 1e3:.0f} Gelem/s), bwd {tb - tf:8.1f} us; conv1d stand-in "
              f"{conv_f:6.1f} / {conv_b_us:6.1f} us", flush=True)
        del leaves, zxbcdt, conv_w, conv_b, dt_bias, a_log, d, norm_w, grad, xbc, gconv
    meta = {"program": "scripts/mamba_scan.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "mamba_ssm": os.environ.get("MAMBA_REV", ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "iters": args.iters}
    write_records(args.out, meta, recs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
