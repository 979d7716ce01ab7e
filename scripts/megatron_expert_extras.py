#!/usr/bin/env python3
"""GPU time of what Megatron-Core's TEGroupedMLP runs between and after its grouped GEMMs: the
MoE activation, and for experts with biases (GPT-OSS) fc2's bias loop.

Megatron's TEGroupedMLP (megatron/core/transformer/moe/experts.py) adds fc1's bias inside the
grouped GEMM (skip_bias_add False) but takes fc2's back (skip_bias_add True) and adds it in
`_apply_bias`: an eager loop over the local experts, `t + b * p` per expert on a split of the
output, then a torch.cat and a cast. With bias_activation_fusion (Megatron-Bridge's GPT-OSS
provider) the activation is `weighted_bias_quick_geglu_impl`, which with a clamp value first
clamps both halves of fc1's output and concatenates them (two clamps and a cat on every element)
before the fused quick-GEGLU. This times those calls, forward and forward + backward (autograd),
imported from a Megatron-LM checkout given with --megatron (nothing of it is committed):
  - "swiglu":        weighted_bias_swiglu_impl(x, None, probs), x [rows, 2F]: the activation of
                     every SwiGLU MoE (Qwen3, DeepSeek-V3, Mixtral, Moonlight) with
                     bias_activation_fusion;
  - "geglu":         weighted_bias_quick_geglu_impl(x, None, probs, False, 1.0), GPT-OSS's
                     quick-GEGLU with its linear offset, no clamp;
  - "geglu_clamp":   the same with clamp 7 (GPT-OSS);
  - "apply_bias":    TEGroupedMLP._apply_bias(y, biases, tokens_per_expert, probs), y [rows, H],
                     one bias of H per local expert, tokens_per_expert a list (rows split evenly).
Megatron's jit_fuser is torch.compile: each shape is compiled in the warm-up.
Router probabilities are fp32 (Megatron's --moe-router-dtype fp32 of the performance recipes).

Timing: scripts/torch_kernels.py's Timer (256 MiB flushed from L2, a sleep of 1.5x the op before
each timed call so the power cap stays out, median of --iters); "bwd" records are forward +
backward minus forward.

Output: a JSON array (first element {"meta": ...}), records
  {"what": "expert_extra", "part": ..., "pass": "fwd"|"bwd", "rows": R, "width": F or H,
   "experts": E, "elements": R x width, "time_us": median, "min_us", "max_us", "host_us",
   "fwd_bwd_us"}
Usage: python3 scripts/megatron_expert_extras.py --megatron DIR --out FILE [--iters 20]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_kernels import Timer, write_records  # noqa: E402

# activations: (rows per rank, F) over the FFN widths of the presets (768 Qwen3-30B, 2048
# DeepSeek-V3, 2880 GPT-OSS, 4096, 14336 Mixtral)
GRID_ACT = [(r, f) for r in (4096, 16384, 32768) for f in (768, 2048, 2880, 4096)] + \
           [(4096, 14336), (16384, 14336)]
# fc2's bias: (rows per rank, H, local experts), then the expert count at GPT-OSS's shape
GRID_BIAS = [(r, h, 16) for r in (4096, 16384, 32768) for h in (2048, 2880, 4096)] + \
            [(16384, 2880, 4), (16384, 2880, 32)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True, help="a Megatron-LM checkout (holds megatron/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, args.megatron)
    from megatron.core.fusions.fused_bias_geglu import weighted_bias_quick_geglu_impl
    from megatron.core.fusions.fused_bias_swiglu import weighted_bias_swiglu_impl
    from megatron.core.transformer.moe.experts import TEGroupedMLP

    tm = Timer(torch, args.iters, args.warmup)
    dev = torch.device("cuda")
    recs = []

    def record(part, rows, width, experts, fwd, fwd_bwd, clear):
        tf, tf_lo, tf_hi, hf = tm.time(fwd, clear)
        tb, tb_lo, tb_hi, hb = tm.time(fwd_bwd, clear)
        shape = dict(part=part, rows=rows, width=width, experts=experts, elements=rows * width)
        recs.append(dict(what="expert_extra", **{"pass": "fwd"}, **shape, time_us=round(tf, 2),
                         min_us=round(tf_lo, 2), max_us=round(tf_hi, 2), host_us=round(hf, 1)))
        recs.append(dict(what="expert_extra", **{"pass": "bwd"}, **shape,
                         time_us=round(tb - tf, 2), fwd_bwd_us=round(tb, 2),
                         min_us=round(tb_lo, 2), max_us=round(tb_hi, 2), host_us=round(hb, 1)))
        print(f"  {part:11s} rows {rows:6d} width {width:5d} experts {experts:3d}: "
              f"fwd {tf:9.1f} us, bwd {tb - tf:9.1f} us (host {hf:.0f} / {hb:.0f} us)", flush=True)

    acts = (("swiglu", lambda x, p: weighted_bias_swiglu_impl(x, None, p)),
            ("geglu", lambda x, p: weighted_bias_quick_geglu_impl(x, None, p, False, 1.0)),
            ("geglu_clamp", lambda x, p: weighted_bias_quick_geglu_impl(x, None, p, False, 1.0,
                                                                         7.0)))
    for rows, width in GRID_ACT:
        probs = torch.rand(rows, 1, device=dev, dtype=torch.float32).requires_grad_(True)
        # fc1's output [rows, 2F] with F = width
        x = (4 * torch.randn(rows, 2 * width, device=dev, dtype=torch.bfloat16)).requires_grad_(True)
        gact = torch.randn(rows, width, device=dev, dtype=torch.bfloat16)

        def clear_act():
            x.grad = probs.grad = None

        for part, f in acts:
            record(part, rows, width, 0, lambda f=f: f(x, probs),
                   lambda f=f: f(x, probs).backward(gact), clear_act)
        del x, gact, probs
    for rows, width, experts in GRID_BIAS:
        probs = torch.rand(rows, 1, device=dev, dtype=torch.float32).requires_grad_(True)
        # fc2's output [rows, H] with H = width, one bias per local expert
        y = torch.randn(rows, width, device=dev, dtype=torch.bfloat16).requires_grad_(True)
        biases = [torch.randn(width, device=dev, dtype=torch.bfloat16).requires_grad_(True)
                  for _ in range(experts)]
        counts = [rows // experts] * experts
        counts[-1] += rows - sum(counts)
        gy = torch.randn(rows, width, device=dev, dtype=torch.bfloat16)

        def clear_bias():
            y.grad = probs.grad = None
            for b in biases:
                b.grad = None

        def apply_bias():
            return TEGroupedMLP._apply_bias(y, biases, counts, probs)

        record("apply_bias", rows, width, experts, apply_bias,
               lambda: apply_bias().backward(gy), clear_bias)
        del y, gy, biases, probs
    meta = {"program": "scripts/megatron_expert_extras.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "megatron": os.environ.get("MEGATRON_REV", ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "iters": args.iters, "warmup": args.warmup, "probs": "float32",
            "what": "Megatron's MoE activations with bias_activation_fusion (weighted SwiGLU, "
                    "weighted quick-GEGLU with linear offset 1, the same clamped at 7) and "
                    "TEGroupedMLP's fc2 bias loop (_apply_bias), forward and backward"}
    write_records(args.out, meta, recs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
