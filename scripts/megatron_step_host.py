#!/usr/bin/env python3
"""Host time of Megatron-Core's training step outside the layers: the optimizer step and what
surrounds it, on one GPU.

After the last backward of a step Megatron-LM finalizes the gradients (finalize_model_grads: the
DP reduction's wait, the embedding and layernorm gradient all-reduces), runs the optimizer
(DistributedOptimizer.step: a Python loop over the parameters copying each one's gradient shard
into its fp32 main gradient, the gradient norm with a host sync, Adam over lists of tensors, a
second loop copying the updated fp32 shards back into the bf16 parameters) and zeroes the gradient
buffers. The loops issue kernels per parameter tensor, so in a step whose GPU waits for the host (a
small model, one microbatch per rank) the step's tail grows with the parameter tensors a rank
holds. This builds Megatron-Core GPT models with its local (PyTorch-only) spec at toy sizes, so
that the GPU waits for the host, with different numbers of layers and experts (parameter tensors),
wraps them in Megatron's DistributedDataParallel with its distributed optimizer (and without it),
runs forward and backward, and times the host's issue of the step's tail, piece by piece, round by
round in rotating order. In the same rounds it times Megatron's dense layer with a fused attention
(megatron_host.py's `dense_sdpa`, the layer epsim calibrate fits its host cost per op from), so a
launch's per-tensor cost can be read as a multiple of that launch's per-op cost on another host.
Megatron-Core is imported from a checkout given with --megatron (nothing of it is committed).
Without Transformer Engine or Apex, Megatron falls back to torch's AdamW and to local
multi-tensor helpers that loop over the tensors in Python (its l2 norm reads every tensor's norm
back to the host); the DGX runs use Transformer Engine's fused multi-tensor kernels instead. So
by default (--stack fused) the Adam, the gradient norm and the scale run as torch's fused
multi-tensor kernels (AdamW(fused=True), _foreach_norm, _foreach_mul), a few launches for all
tensors as TE's are, and Megatron's own Python loops (the gradient and parameter copies per
tensor) run as they are; --stack local times Megatron's fallbacks unchanged.

Output: a JSON array (first element {"meta": ...}), records
  {"what": "megatron_step", "model": name, "distopt": 0|1, "tensors": parameter tensors,
   "params": parameters, "piece": "finalize"|"step"|"zero"|"tail" (the three), or a part of
   "step": "step.copy_grads"|"step.adam"|"step.copy_params", "time_us": median over rounds of the
   mean per call, "samples": [per round], "kernels": per call (null for parts)}
(traces/h200/torch/step_megatron.json also has "step.norm_clip" records of 0 from a first version
that wrapped clip_grad_norm, which Megatron's chained optimizer does not call; nothing reads them.)
  {"what": "megatron_layer", "layer": "dense_sdpa", "pass": "fwd_bwd", "time_us", "samples",
   "kernels"}  (the same rounds)
Each record has "launch": k; with --append, FILE gains this run as launch k + 1.
Usage: python3 scripts/megatron_step_host.py --megatron DIR --out FILE [--append] [--repeat 5]
       [--iters 8] [--models a,b] [--stack fused|local]
"""
import argparse
import os
import statistics
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_host as mh  # noqa: E402  (the layer timing and its toy sizes)

VOCAB = 1024
# name -> (decoder layers, routed experts per layer (0: dense MLP), shared expert)
MODELS = {
    "dense_l2": (2, 0, False),
    "dense_l8": (8, 0, False),
    "dense_l24": (24, 0, False),
    "moe8_l2": (2, 8, False),
    "moe8_l8": (8, 8, False),
    "moe32_l4": (4, 32, False),
    "moe32_l8_shared": (8, 32, True),
}


def use_fused_stack():
    """Megatron's optimizer and gradient clipping with torch's fused multi-tensor kernels in place
    of its Python fallbacks (what Transformer Engine's FusedAdam and multi_tensor_l2norm /
    multi_tensor_scale are: a few launches for all tensors)."""
    from megatron.core.optimizer import clip_grads, optimizer

    class FusedAdamW(torch.optim.AdamW):
        def __init__(self, *a, **kw):
            kw.pop("foreach", None)
            kw["fused"] = True
            super().__init__(*a, **kw)

    class FusedAdam(torch.optim.Adam):
        def __init__(self, *a, **kw):
            kw.pop("foreach", None)
            kw["fused"] = True
            super().__init__(*a, **kw)

    def l2norm(chunk, noop, tensor_lists, per_tensor, *args):
        norms = torch._foreach_norm(tensor_lists[0])
        return torch.linalg.vector_norm(torch.stack(norms)), None

    def scale(chunk, noop, tensor_lists, factor):
        torch._foreach_copy_(tensor_lists[1], torch._foreach_mul(tensor_lists[0], factor))

    # Megatron builds torch's Adam / AdamW by name at call time when neither TE nor Apex exists
    torch.optim.AdamW, torch.optim.Adam = FusedAdamW, FusedAdam
    clip_grads.l2_norm_impl = l2norm
    clip_grads.multi_tensor_scale_impl = scale
    optimizer.multi_tensor_scale_impl = scale


def build_model(name, distopt):
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    layers, experts, shared = MODELS[name]
    cfg_kw, spec_kw = {"num_layers": layers}, {"core_attention": mh.SdpaCoreAttention}
    if experts:
        cfg_kw.update(mh.MOE, num_moe_experts=experts)
        spec_kw["num_experts"] = experts
        if shared:
            cfg_kw["moe_shared_expert_intermediate_size"] = mh.MOE_FFN
    cfg, spec = mh.config_and_spec(cfg_kw, spec_kw)
    model = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=VOCAB,
                     max_sequence_length=mh.SEQ, position_embedding_type="rope").cuda()
    ddp_cfg = DistributedDataParallelConfig(grad_reduce_in_fp32=False, overlap_grad_reduce=False,
                                            use_distributed_optimizer=bool(distopt))
    ddp = DistributedDataParallel(config=cfg, ddp_config=ddp_cfg, module=model)
    opt_cfg = OptimizerConfig(optimizer="adam", lr=1e-4, weight_decay=0.01, bf16=True,
                              params_dtype=torch.bfloat16, clip_grad=1.0,
                              use_distributed_optimizer=bool(distopt))
    opt = get_megatron_optimizer(opt_cfg, [ddp])
    return cfg, ddp, opt


def step_pieces(ddp, opt):
    """The step's tail as Megatron-LM's train_step runs it (forward and backward before, untimed):
    {piece: callable}; 'tail' is the three in order."""
    from megatron.core.distributed import finalize_model_grads
    tokens = torch.randint(0, VOCAB, (1, mh.SEQ), device="cuda")
    pos = torch.arange(mh.SEQ, device="cuda").unsqueeze(0)

    def fwd_bwd():
        loss = ddp(tokens, pos, attention_mask=None, labels=tokens)
        loss.float().mean().backward()

    def finalize():
        finalize_model_grads([ddp])

    def step():
        opt.step()

    def zero():
        ddp.zero_grad_buffer()
        opt.zero_grad()

    return fwd_bwd, {"finalize": finalize, "step": step, "zero": zero}


# Parts of Megatron's optimizer step, each timed inside step() (host time from the call to its
# return; the copies issue one kernel per parameter tensor): piece name -> method names wrapped
# on every (chained) optimizer. "adam" is the inner torch optimizer's step.
STEP_PARTS = {"copy_grads": ("_copy_model_grads_to_main_grads",),
              "copy_params": ("_copy_main_params_to_model_params",)}


def wrap_step_parts(opt, spent):
    """Wraps the STEP_PARTS methods and the inner Adam's step of opt (and of every optimizer a
    ChainedOptimizer holds) so that each call adds its host time in us to spent[piece]."""
    subs = list(getattr(opt, "chained_optimizers", [])) or [opt]

    def timer(piece, fn):
        def call(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[piece] = spent.get(piece, 0.0) + (time.perf_counter() - t0) * 1e6
        return call

    targets = []
    for sub in subs:
        for piece, names in STEP_PARTS.items():
            for n in names:
                if hasattr(sub, n):
                    targets.append((sub, piece, n))
        inner = getattr(sub, "optimizer", None)
        if inner is not None and hasattr(inner, "step"):
            targets.append((inner, "adam", "step"))
    for obj, piece, n in targets:
        setattr(obj, n, timer(piece, getattr(obj, n)))


def timed(fn):
    """Host time of one call in us: from an idle GPU to the call's return (the GPU's own work of
    these toy tensors is a few microseconds per kernel and stays behind the host)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6


def main():
    ap = argparse.ArgumentParser()
    mh.add_common_args(ap, iters=8)
    ap.add_argument("--models", default="", help="comma-separated names of MODELS (default all)")
    ap.add_argument("--stack", choices=("fused", "local"), default="fused",
                    help="fused: torch's fused multi-tensor Adam / norm / scale in place of "
                         "Megatron's Python fallbacks (as Transformer Engine's are); local: the "
                         "fallbacks")
    args = ap.parse_args()
    sys.path.insert(0, args.megatron)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29521")
    torch.cuda.set_device(0)
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             pipeline_model_parallel_size=1)
    model_parallel_cuda_manual_seed(1234)
    if args.stack == "fused":
        use_fused_stack()
    names = args.models.split(",") if args.models else list(MODELS)
    built = {}
    for name in names:
        for distopt in (1, 0):
            try:
                _, ddp, opt = build_model(name, distopt)
                fwd_bwd, pieces = step_pieces(ddp, opt)
                spent = {}
                wrap_step_parts(opt, spent)
                for _ in range(3):
                    pieces["zero"]()
                    fwd_bwd()
                    pieces["finalize"]()
                    pieces["step"]()
                params = [p for p in ddp.module.parameters()]
                kern = {}
                for piece in ("finalize", "step", "zero"):
                    fwd_bwd()
                    if piece == "step":
                        pieces["finalize"]()
                    kern[piece] = mh.kernels_of(pieces[piece])
                    if piece == "finalize":
                        pieces["step"]()
                built[(name, distopt)] = (fwd_bwd, pieces, len(params),
                                          sum(p.numel() for p in params), kern, spent)
            except Exception:  # noqa: BLE001 - one model failing keeps the others
                print(f"  {name} distopt={distopt}: failed\n{traceback.format_exc()}", flush=True)
    layer = mh.build("dense_sdpa")
    x = torch.randn(mh.SEQ, 1, mh.H, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def layer_fwd_bwd():
        out = layer(x, attention_mask=None)
        (out[0] if isinstance(out, tuple) else out).float().sum().backward()

    for _ in range(5):
        layer_fwd_bwd()
    keys = list(built)
    parts = ["step." + p for p in list(STEP_PARTS) + ["adam"]]
    samples = {(k, p): [] for k in keys for p in ["finalize", "step", "zero", "tail"] + parts}
    layer_samples = []
    for rnd in range(args.repeat):
        for k in keys[rnd % len(keys):] + keys[:rnd % len(keys)]:
            fwd_bwd, pieces, _, _, _, spent = built[k]
            acc = {p: [] for p in ("finalize", "step", "zero")}
            spent.clear()
            for _ in range(args.iters):
                fwd_bwd()
                for p in ("finalize", "step", "zero"):
                    acc[p].append(timed(pieces[p]))
            for p, v in acc.items():
                samples[(k, p)].append(statistics.mean(v))
            samples[(k, "tail")].append(sum(statistics.mean(v) for v in acc.values()))
            for p in parts:
                samples[(k, p)].append(spent.get(p[len("step."):], 0.0) / args.iters)
        mean, _ = mh.host_us(layer_fwd_bwd, 30)
        layer_samples.append(mean)
    recs = []
    for (k, p), v in samples.items():
        name, distopt = k
        _, _, ntens, nparams, kern, _ = built[k]
        recs.append({"what": "megatron_step", "model": name, "distopt": distopt,
                     "tensors": ntens, "params": nparams, "piece": p,
                     "time_us": round(statistics.median(v), 2), "samples": [round(t, 2) for t in v],
                     "kernels": (sum(kern.values()) if p == "tail" else kern.get(p))})
        print(f"  {name:18s} distopt={distopt} {p:8s} {ntens:5d} tensors "
              f"{recs[-1]['time_us']:10.1f} us (min {min(v):.1f}, max {max(v):.1f}), "
              f"{recs[-1]['kernels']} kernels", flush=True)
    recs.append({"what": "megatron_layer", "layer": "dense_sdpa", "pass": "fwd_bwd",
                 "time_us": round(statistics.median(layer_samples), 2),
                 "samples": [round(t, 2) for t in layer_samples],
                 "kernels": mh.kernels_of(layer_fwd_bwd), "config": mh.epsim_flags("dense_sdpa")})
    print(f"  dense_sdpa fwd_bwd {recs[-1]['time_us']:.1f} us", flush=True)
    meta = {"program": "scripts/megatron_step_host.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "megatron": os.environ.get("MEGATRON_REV", ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git_revision": os.environ.get("EP_GIT_REVISION", ""),
            "repeat": args.repeat, "iters": args.iters, "stack": args.stack,
            "spec": "GPTModel, get_gpt_layer_local_spec (PyTorch-only modules, SequentialMLP "
                    "experts, fused SDPA core attention), bf16, toy sizes, "
                    "DistributedDataParallel (overlap_grad_reduce off), Adam, clip_grad 1.0, "
                    "one rank"}
    mh.write_launch(args.out, meta, recs, args.append,
                    what="host time of Megatron-Core's step tail (finalize, optimizer step and its "
                         "parts, zeroing) by parameter tensors, and of the dense_sdpa layer in "
                         "the same rounds")
    parallel_state.destroy_model_parallel()
    torch.distributed.destroy_process_group()
    return 0 if len(built) == 2 * len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
