#!/usr/bin/env python3
"""Host time of Megatron-Core's own transformer layers, forward and backward, on one GPU.

Megatron-LM issues every kernel of a layer from Python modules (attention, the MoE router, the
token dispatcher's preprocessing and its host sync, the experts, the bias-dropout-add fusions):
its host time per layer is what a step pays when the GPU waits for the host (small layers, no
CUDA graphs). This builds one TransformerLayer with Megatron-Core's local (PyTorch-only) spec - a
dense one and a MoE one with the alltoall dispatcher, at toy sizes so that the GPU waits for the
host - and times the host's issue of its forward and backward (the clock stops before the GPU is
waited for; the alltoall dispatcher's own host sync is inside, as in a run), counting the kernels
it launches with the profiler. Megatron-Core is not part of this project: the script imports it
from a checkout given with --megatron (nothing of it is committed).

Output: a JSON array (first element {"meta": ...}), records
  {"what": "megatron_layer", "layer": "dense"|"moe", "pass": "fwd"|"fwd_bwd", "time_us": median,
   "kernels": per call, "samples": [...], "config": {epsim flags of the same layer}}
Usage: python3 scripts/megatron_host.py --megatron DIR --out FILE [--repeat 5] [--iters 30]
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

H, HEADS, FFN, EXPERTS, TOPK, MOE_FFN, SEQ = 256, 4, 512, 8, 2, 256, 128


def host_us(fn, iters):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / iters * 1e6


def kernels_of(fn):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def build(moe):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig
    kw = dict(num_layers=1, hidden_size=H, num_attention_heads=HEADS, ffn_hidden_size=FFN,
              bf16=True, params_dtype=torch.bfloat16, add_bias_linear=False,
              gated_linear_unit=True, activation_func=F.silu, normalization="RMSNorm",
              hidden_dropout=0.0, attention_dropout=0.0, bias_dropout_fusion=False,
              use_cpu_initialization=False, pipeline_dtype=torch.bfloat16)
    if moe:
        kw.update(num_moe_experts=EXPERTS, moe_router_topk=TOPK, moe_ffn_hidden_size=MOE_FFN,
                  moe_token_dispatcher_type="alltoall", moe_aux_loss_coeff=0.0,
                  moe_grouped_gemm=False, moe_router_load_balancing_type="none")
    cfg = TransformerConfig(**kw)
    try:
        spec = get_gpt_layer_local_spec(num_experts=EXPERTS if moe else None,
                                        moe_grouped_gemm=False, normalization="RMSNorm")
    except TypeError:
        spec = get_gpt_layer_local_spec(num_experts=EXPERTS if moe else None,
                                        moe_grouped_gemm=False)
    layer = build_module(spec, config=cfg, layer_number=1)
    return layer.cuda().to(torch.bfloat16)


def epsim_flags(moe):
    f = (f"--num-layers 1 --hidden-size {H} --num-attention-heads {HEADS} --ffn-hidden-size {FFN} "
         f"--seq-length {SEQ} --micro-batch-size 1 --global-batch-size 1 --world-size 1 --swiglu "
         f"--mtp-num-layers 0")
    if moe:
        f += (f" --num-experts {EXPERTS} --moe-router-topk {TOPK} --moe-ffn-hidden-size {MOE_FFN}"
              f" --moe-layer-freq 1 --moe-token-dispatcher-type alltoall")
    else:
        f += " --num-experts 0"
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True, help="a Megatron-LM checkout (holds megatron/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    sys.path.insert(0, args.megatron)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29519")
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             pipeline_model_parallel_size=1,
                                             expert_model_parallel_size=1)
    model_parallel_cuda_manual_seed(1234)
    recs = []
    for moe in (False, True):
        name = "moe" if moe else "dense"
        try:
            layer = build(moe)
            x = torch.randn(SEQ, 1, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)

            def fwd():
                out = layer(x, attention_mask=None)
                return out[0] if isinstance(out, tuple) else out

            def fwd_bwd():
                fwd().float().sum().backward()

            for _ in range(5):
                fwd_bwd()
            for what, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
                kern = kernels_of(fn)
                samples = [host_us(fn, args.iters) for _ in range(args.repeat)]
                recs.append({"what": "megatron_layer", "layer": name, "pass": what,
                             "time_us": round(statistics.median(samples), 2), "kernels": kern,
                             "samples": [round(v, 2) for v in samples],
                             "config": epsim_flags(moe)})
                print(f"  {name:5s} {what:7s} {recs[-1]['time_us']:9.1f} us host, {kern} kernels",
                      flush=True)
        except Exception:  # noqa: BLE001 - one layer kind failing keeps the other
            print(f"  {name}: failed\n{traceback.format_exc()}", flush=True)
    meta = {"meta": {"program": "scripts/megatron_host.py", "gpu": torch.cuda.get_device_name(),
                     "torch": torch.__version__, "megatron": os.environ.get("MEGATRON_REV", ""),
                     "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "git_revision": os.environ.get("EP_GIT_REVISION", ""),
                     "repeat": args.repeat, "iters": args.iters,
                     "spec": "get_gpt_layer_local_spec (PyTorch-only modules, SequentialMLP "
                             "experts), bf16, toy sizes"}}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump([meta] + recs, f, indent=1)
    os.replace(tmp, args.out)
    torch.distributed.destroy_process_group()
    return 0 if len(recs) == 4 else 1


if __name__ == "__main__":
    sys.exit(main())
