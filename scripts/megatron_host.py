#!/usr/bin/env python3
"""Host time of Megatron-Core's own transformer layers, forward and backward, on one GPU.

Megatron-LM issues every kernel of a layer from Python modules (attention, the MoE router, the
token dispatcher's preprocessing and its host sync, the experts, the bias-dropout-add fusions):
its host time per layer is what a step pays when the GPU waits for the host (small layers, no
CUDA graphs). This builds the TransformerLayers of VARIANTS with Megatron-Core's local (PyTorch-only)
spec - dense and MoE layers (alltoall dispatcher), at toy sizes so that the GPU waits for the
host - and times the host's issue of their forward and backward round by round (the clock stops
before the GPU is waited for; the alltoall dispatcher's own host sync is inside, as in a run),
counting the kernels they launch with the profiler. Megatron-Core is not part of this project: the script imports it
from a checkout given with --megatron (nothing of it is committed).

Output: a JSON array (first element {"meta": ...}), records
  {"what": "megatron_layer", "layer": a name of VARIANTS, "pass": "fwd"|"fwd_bwd", "time_us": median,
   "kernels": per call, "samples": [...], "calls_us": [every call's own time], "config": {epsim
   flags of the same layer}, "ranks": N, "launch": k}
and the host's speed in the same rounds, {"what": "host_reference", "layer": "ref_linear_fwd",
"pass": "grad"|"no_grad", ...}: one torch.nn.Linear forward whose host time is published for an
H100 DGX (reference_calls below; epsim calibrate does not read it).
With --append, FILE gains this run as launch k + 1 (its meta under meta.launches): the file
epsim calibrate reads, which takes each layer's median over launches.
Usage: python3 scripts/megatron_host.py --megatron DIR --out FILE [--append] [--repeat 5]
       [--iters 30] [--nproc N] [--layers a,b] [--passes P]
With --nproc 2 the layers with communication (dense_sdpa_tp2, moe_sdpa_ep2) join, with --nproc 4
also moe_sdpa_ep4; every rank runs the same layers and rank 0's host time is recorded.
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
    """(mean us per call over iters calls, [us of each call]): the host's issue time, the clock
    read between calls (each call's own time is the spread the ranks of a step wait on)."""
    torch.cuda.synchronize()
    t = [time.perf_counter()]
    for _ in range(iters):
        fn()
        t.append(time.perf_counter())
    torch.cuda.synchronize()
    return (t[-1] - t[0]) / iters * 1e6, [(b - a) * 1e6 for a, b in zip(t, t[1:])]


def kernels_of(fn):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


# The layers timed: name -> (TransformerConfig changes, spec changes, epsim flags of the same
# layer). "dense" and "moe" are what `epsim calibrate` solves op_overhead_s and expert_call_s
# from; the others check that epsim's schedule gives their host time back with those two values
# (docs/calibration.md, "Host costs of a software stack"): QK layernorm, MLA, 32 experts (what an
# expert call costs against what the router and dispatcher cost), the two aux-loss routers of the
# published recipes (Qwen3: softmax + aux_loss; DeepSeek-V3 / Moonlight: sigmoid, expert bias,
# seq_aux_loss, a shared expert).
MOE = dict(num_moe_experts=EXPERTS, moe_router_topk=TOPK, moe_ffn_hidden_size=MOE_FFN,
           moe_token_dispatcher_type="alltoall", moe_aux_loss_coeff=0.0,
           moe_grouped_gemm=False, moe_router_load_balancing_type="none")
MOE_FLAGS = (f" --num-experts {EXPERTS} --moe-router-topk {TOPK} --moe-ffn-hidden-size {MOE_FFN}"
             f" --moe-layer-freq 1 --moe-token-dispatcher-type alltoall")
MLA = dict(multi_latent_attention=True, q_lora_rank=32, kv_lora_rank=64, qk_head_dim=32,
           qk_pos_emb_head_dim=16, v_head_dim=32, rope_type="rope", qk_layernorm=True,
           apply_rope_fusion=False, transformer_impl="local")  # MLA resolves its norms by it
class SdpaCoreAttention(torch.nn.Module):
    """Core attention as one fused SDPA call (what TE's fused attention is to the host: one
    launch beside its layout copies). Megatron's local DotProductAttention takes no k_channels,
    so the MLA layers and their dense counterpart (dense_sdpa) use this instead."""

    def __init__(self, config, layer_number, attn_mask_type, softmax_scale=None, **kw):
        super().__init__()
        self.softmax_scale = softmax_scale

    def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                attention_bias=None, packed_seq_params=None, **kw):
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, np, s, hn]
        if k.shape[1] != q.shape[1]:  # grouped-query attention: repeat the key/value heads
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
        return o.permute(2, 0, 1, 3).reshape(o.shape[2], o.shape[0], -1)


class SequenceParallelRMSNorm:
    """Megatron's torch norm (WrappedTorchNorm: a torch.nn.RMSNorm) without its refusal of sequence
    parallelism, which only concerns the reduction of the norm's weight gradient across the TP
    ranks (not part of a layer's step): the TP 2 layer runs the same norm as the others."""

    def __new__(cls, config, hidden_size, eps=1e-5, **kw):
        return torch.nn.RMSNorm(hidden_size, eps=eps)


VARIANTS = {
    "dense": ({}, {}, " --num-experts 0"),
    "moe": (MOE, {"num_experts": EXPERTS}, MOE_FLAGS),
    "dense_qknorm": ({"qk_layernorm": True}, {"qk_layernorm": True},
                     " --num-experts 0 --qk-layernorm"),
    "dense_sdpa": ({}, {"core_attention": SdpaCoreAttention}, " --num-experts 0"),
    "dense_mla": (MLA, {"multi_latent_attention": True, "qk_layernorm": True,
                        "core_attention": SdpaCoreAttention},
                  " --num-experts 0 --multi-latent-attention --q-lora-rank 32 --kv-lora-rank 64"
                  " --qk-head-dim 32 --qk-pos-emb-head-dim 16 --v-head-dim 32 --kv-channels 32"
                  " --qk-layernorm"),
    "moe_sdpa": (MOE, {"num_experts": EXPERTS, "core_attention": SdpaCoreAttention}, MOE_FLAGS),
    "moe32": (dict(MOE, num_moe_experts=32), {"num_experts": 32},
              MOE_FLAGS.replace(f"--num-experts {EXPERTS}", "--num-experts 32")),
    "moe_aux": (dict(MOE, moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3),
                {"num_experts": EXPERTS},
                MOE_FLAGS + " --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3"),
    "moe_seqaux_bias_shared": (
        dict(MOE, moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=1e-4,
             moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
             moe_shared_expert_intermediate_size=MOE_FFN),
        {"num_experts": EXPERTS},
        MOE_FLAGS + " --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4"
        " --moe-router-score-function sigmoid --moe-router-enable-expert-bias"
        f" --moe-shared-expert-intermediate-size {MOE_FFN}"),
    # DeepSeek-V3 / Moonlight's layer: MLA (fused core attention) with their router and a shared
    # expert, the check of epsim's op list for MLA beside dense_mla
    "moe_mla_seqaux_bias_shared": (
        dict(MOE, **MLA, moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=1e-4,
             moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
             moe_shared_expert_intermediate_size=MOE_FFN),
        {"num_experts": EXPERTS, "multi_latent_attention": True, "qk_layernorm": True,
         "core_attention": SdpaCoreAttention},
        MOE_FLAGS + " --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4"
        " --moe-router-score-function sigmoid --moe-router-enable-expert-bias"
        f" --moe-shared-expert-intermediate-size {MOE_FFN}"
        " --multi-latent-attention --q-lora-rank 32 --kv-lora-rank 64 --qk-head-dim 32"
        " --qk-pos-emb-head-dim 16 --v-head-dim 32 --kv-channels 32 --qk-layernorm"),
    # With --nproc 2: the fitted pair's layers with their communication (TP 2 with sequence
    # parallelism: the all-gathers and reduce-scatters of the linear layers; EP 2: the alltoall
    # dispatcher's count exchange, its host sync and the token all-to-alls), timed in the same
    # launch as dense_sdpa and moe_sdpa: what a communication op costs Megatron's host beyond
    # NCCL's own launch
    "dense_sdpa_tp2": ({"tensor_model_parallel_size": 2, "sequence_parallel": True},
                       {"core_attention": SdpaCoreAttention},
                       " --num-experts 0 --tensor-model-parallel-size 2 --sequence-parallel"),
    "moe_sdpa_ep2": (dict(MOE, expert_model_parallel_size=2),
                     {"num_experts": EXPERTS, "core_attention": SdpaCoreAttention},
                     MOE_FLAGS + " --expert-model-parallel-size 2"),
    # With --nproc 4: the same layer at EP 4 (2 local experts), whose count exchange and host
    # sync wait for the slowest of four hosts instead of two
    "moe_sdpa_ep4": (dict(MOE, expert_model_parallel_size=4),
                     {"num_experts": EXPERTS, "core_attention": SdpaCoreAttention},
                     MOE_FLAGS + " --expert-model-parallel-size 4"),
}


def parallel_of(name):
    """(TP, EP) of a layer of VARIANTS."""
    cfg_kw = VARIANTS[name][0]
    return cfg_kw.get("tensor_model_parallel_size", 1), cfg_kw.get("expert_model_parallel_size", 1)


def config_and_spec(cfg_kw, spec_kw):
    """The toy TransformerConfig with cfg_kw's changes, and Megatron's local (PyTorch-only) layer
    spec with spec_kw's: its core attention replaced by spec_kw's "core_attention" where given,
    its norms by SequenceParallelRMSNorm with sequence parallelism. Returns (config, spec)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import (MLATransformerConfig,
                                                              TransformerConfig)
    spec_kw = dict(spec_kw)
    core_attention = spec_kw.pop("core_attention", None)
    kw = dict(num_layers=1, hidden_size=H, num_attention_heads=HEADS, ffn_hidden_size=FFN,
              bf16=True, params_dtype=torch.bfloat16, add_bias_linear=False,
              gated_linear_unit=True, activation_func=F.silu, normalization="RMSNorm",
              hidden_dropout=0.0, attention_dropout=0.0, bias_dropout_fusion=False,
              use_cpu_initialization=False, pipeline_dtype=torch.bfloat16)
    kw.update(cfg_kw)
    cfg = (MLATransformerConfig if kw.get("multi_latent_attention") else TransformerConfig)(**kw)
    try:
        spec = get_gpt_layer_local_spec(moe_grouped_gemm=False, normalization="RMSNorm",
                                        **spec_kw)
    except TypeError:
        spec = get_gpt_layer_local_spec(moe_grouped_gemm=False, **spec_kw)
    if core_attention is not None:
        spec.submodules.self_attention.submodules.core_attention = core_attention
    if kw.get("sequence_parallel"):
        spec.submodules.input_layernorm = SequenceParallelRMSNorm
        spec.submodules.pre_mlp_layernorm = SequenceParallelRMSNorm
    return cfg, spec


def build(name):
    from megatron.core.transformer.spec_utils import build_module
    cfg, spec = config_and_spec(*VARIANTS[name][:2])
    layer = build_module(spec, config=cfg, layer_number=1)
    return layer.cuda().to(torch.bfloat16)


def epsim_flags(name):
    tp, ep = parallel_of(name)
    dp = ep  # EP takes data-parallel ranks; TP ranks share one sequence
    return (f"--num-layers 1 --hidden-size {H} --num-attention-heads {HEADS} "
            f"--ffn-hidden-size {FFN} --seq-length {SEQ} --micro-batch-size 1 "
            f"--global-batch-size {dp} --world-size {tp * dp} --swiglu --mtp-num-layers 0"
            + VARIANTS[name][2])


LAYERS_WHAT = ("host time of Megatron-Core layers, forward and forward+backward; one record per "
               "layer, pass and launch; epsim calibrate takes the median over launches")


def add_common_args(ap, iters):
    """The arguments every Megatron host timing script takes."""
    ap.add_argument("--megatron", required=True, help="a Megatron-LM checkout (holds megatron/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--append", action="store_true", help="add this run to --out as a launch")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--iters", type=int, default=iters)


def write_launch(path, meta, recs, append, what=LAYERS_WHAT):
    """Writes meta and recs to path as one launch, or with append adds them to the launches the
    file holds; atomically (a temporary file renamed). Each record gets "launch": k."""
    launches, old = [], []
    if append and os.path.exists(path):
        with open(path) as f:
            prev = json.load(f)
        launches, old = prev[0]["meta"].get("launches", []), prev[1:]
    k = 1 + max([r.get("launch", 0) for r in old] + [0])
    launch_meta = dict(meta, launch=k)
    out = [{"meta": {"program": meta["program"], "what": what,
                     "gpu": meta["gpu"], "megatron": meta["megatron"],
                     "launches": launches + [launch_meta]}}]
    out += old + [dict(r, launch=k) for r in recs]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, path)


def time_layers(names, args, world):
    """Builds and warms the layers `names` (one parallel layout, already initialized), then times
    them round by round in rotating order, so that a drift of the host's speed during the run
    reaches every layer alike. A sample is one round's time per call over --iters calls; with
    several ranks they start each sample together. Returns ({(name, pass): [us]}, the same with
    every call's own time, {name: {pass: kernels}}); a layer that fails to build is printed and
    left out."""
    tp, _ = parallel_of(names[0])
    layers, kernels = {}, {}
    for name in names:
        try:
            layer = build(name)
            x = torch.randn(SEQ // tp, 1, H, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True)  # sequence parallel: this rank's share

            def fwd(layer=layer, x=x):
                out = layer(x, attention_mask=None)
                return out[0] if isinstance(out, tuple) else out

            def fwd_bwd(fwd=fwd):
                fwd().float().sum().backward()

            for _ in range(5):
                fwd_bwd()
            layers[name] = {"fwd": fwd, "fwd_bwd": fwd_bwd}
            kernels[name] = {what: kernels_of(fn) for what, fn in layers[name].items()}
        except Exception:  # noqa: BLE001 - one layer failing keeps the others
            print(f"  {name}: failed\n{traceback.format_exc()}", flush=True)
    ref = reference_calls()
    layers.update(ref)
    kernels.update({n: {w: 1 for w in fns} for n, fns in ref.items()})
    built = list(layers)
    samples = {(n, w): [] for n in built for w in layers[n]}
    calls = {k: [] for k in samples}
    for rnd in range(args.repeat):
        for n in built[rnd % len(built):] + built[:rnd % len(built)] if built else []:
            for w, fn in layers[n].items():
                if world > 1:
                    torch.distributed.barrier()
                mean, each = host_us(fn, args.iters)
                samples[(n, w)].append(mean)
                calls[(n, w)].extend(each)
    return samples, calls, kernels


# The host's speed, timed in every round beside the layers: one torch.nn.Linear(2048, 2048) forward
# on 8192 bf16 tokens, the call whose host time Transformer Engine issue 2053 published for an H100
# DGX (Xeon Platinum 8480C: 13.48 us per call, torch; GPU 100 us, so the host never waits for it),
# with and without autograd recording. A launch's layer times over this figure compare hosts.
REF_TOKENS, REF_WIDTH = 8192, 2048


def reference_calls():
    lin = torch.nn.Linear(REF_WIDTH, REF_WIDTH).cuda().to(torch.bfloat16)
    x = torch.randn(REF_TOKENS, REF_WIDTH, device="cuda", dtype=torch.bfloat16)
    xg = x.clone().requires_grad_(True)

    def nograd():
        with torch.no_grad():
            lin(x)

    for _ in range(5):
        lin(xg)
        nograd()
    return {"ref_linear_fwd": {"grad": lambda: lin(xg), "no_grad": nograd}}


def spawn(nproc):
    """--nproc N: this script again as N processes, ranks 0..N-1 (rank 0 writes the file)."""
    import subprocess
    procs = [subprocess.Popen([sys.executable] + sys.argv,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(nproc),
                                       LOCAL_RANK=str(r)))
             for r in range(nproc)]
    return max(p.wait() for p in procs)


def main():
    ap = argparse.ArgumentParser()
    add_common_args(ap, iters=30)
    ap.add_argument("--nproc", type=int, default=1,
                    help="ranks (GPUs); layers of VARIANTS that need more are left out")
    ap.add_argument("--layers", default="", help="comma-separated names of VARIANTS (default all)")
    ap.add_argument("--passes", type=int, default=1,
                    help="times each parallel layout's layers are built and timed, layouts in "
                         "turn (the rounds of one layout cannot interleave with another's)")
    args = ap.parse_args()
    if args.nproc > 1 and "RANK" not in os.environ:
        return spawn(args.nproc)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    sys.path.insert(0, args.megatron)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29519")
    torch.cuda.set_device(rank)
    torch.distributed.init_process_group("nccl", rank=rank, world_size=world)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    wanted = args.layers.split(",") if args.layers else list(VARIANTS)
    unknown = [n for n in wanted if n not in VARIANTS]
    if unknown:
        print(f"megatron_host.py: unknown layers {unknown}", file=sys.stderr)
        return 2
    names = [n for n in wanted if parallel_of(n)[0] * parallel_of(n)[1] <= world]
    layouts = list(dict.fromkeys(parallel_of(n) for n in names))
    samples, calls, kernels = {}, {}, {}
    for _ in range(args.passes):
        for tp, ep in layouts:
            parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp,
                                                     pipeline_model_parallel_size=1,
                                                     expert_model_parallel_size=ep)
            model_parallel_cuda_manual_seed(1234)
            smp, each, ker = time_layers([n for n in names if parallel_of(n) == (tp, ep)], args,
                                         world)
            for k, v in smp.items():
                samples.setdefault(k, []).extend(v)
                calls.setdefault(k, []).extend(each[k])
            kernels.update(ker)
            parallel_state.destroy_model_parallel()
    recs = []
    for (n, w), v in samples.items():
        ref = n.startswith("ref_")
        recs.append({"what": "host_reference" if ref else "megatron_layer", "layer": n,
                     "pass": w, "time_us": round(statistics.median(v), 2),
                     "kernels": kernels[n][w], "samples": [round(t, 2) for t in v],
                     "calls_us": [round(t, 1) for t in calls[(n, w)]],
                     "config": "" if ref else epsim_flags(n), "ranks": world})
        if rank == 0:
            print(f"  {n:22s} {w:7s} {recs[-1]['time_us']:9.1f} us host (min {min(v):.1f}, "
                  f"max {max(v):.1f}), {kernels[n][w]} kernels", flush=True)
    meta = {"program": "scripts/megatron_host.py", "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "megatron": os.environ.get("MEGATRON_REV", ""),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git_revision": os.environ.get("EP_GIT_REVISION", ""),
            "repeat": args.repeat, "iters": args.iters, "passes": args.passes, "ranks": world,
            "spec": "get_gpt_layer_local_spec (PyTorch-only modules, SequentialMLP experts), "
                    "bf16, toy sizes"}
    if rank == 0:
        write_launch(args.out, meta, recs, args.append)
    torch.distributed.destroy_process_group()
    return 0 if len(recs) == 2 * len(names) + 2 else 1  # + the reference's two passes


if __name__ == "__main__":
    sys.exit(main())
