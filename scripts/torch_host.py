#!/usr/bin/env python3
"""Host time of the PyTorch software stack that Megatron-LM runs on, per launched kernel.

Megatron-LM drives every kernel from Python (eager PyTorch, autograd, Transformer Engine modules):
the host time per kernel is far above a C runtime's launch (docs/calibration.md, "Host costs of a
software stack"). This times, on one GPU, the forward and backward of small MoE-layer blocks in
eager PyTorch - norms, linear layers, attention (SDPA), activations, router top-k, permutation by
index, one linear per expert, residual adds - at shapes so small that the GPU waits for the host,
so the wall time is the host's; the kernels each block launches are counted with the profiler.
It also times the replay of the attention half captured in a CUDA graph (what a CUDA-graph scope
costs per launch) and a one-rank NCCL all-reduce issued through torch.distributed. Every figure is
the host's time to issue the calls (the clock stops before the GPU is waited for).

Output: a JSON array like the other raw calibration files (first element {"meta": ...}), records
{"what": <name>, "time_us": <median>, "kernels": <per call>, "samples": [...]} with, per name:
  eager_per_kernel   fwd+bwd wall time of the eager block / kernels it launched (medians)
  eager_fwd_per_kernel, eager_bwd_per_kernel   the same for forward alone and backward alone
  linear_fwd_bwd_per_kernel   one nn.Linear, forward and backward
  graph_replay       host time of one torch.cuda.CUDAGraph.replay() of the block's forward
  nccl_all_reduce    host time of torch.distributed.all_reduce on a 4-byte tensor (one rank)
Usage: python3 scripts/torch_host.py --out FILE [--repeat 5] [--iters 50]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """One MoE layer's kernel sequence at toy sizes (the kinds Megatron launches per layer)."""

    def __init__(self, h=256, heads=4, experts=8, topk=2, ffn=256):
        super().__init__()
        self.h, self.heads, self.experts, self.topk = h, heads, experts, topk
        self.norm1 = nn.RMSNorm(h)
        self.qkv = nn.Linear(h, 3 * h, bias=False)
        self.proj = nn.Linear(h, h, bias=False)
        self.norm2 = nn.RMSNorm(h)
        self.router = nn.Linear(h, experts, bias=False)
        self.fc1 = nn.ModuleList([nn.Linear(h, 2 * ffn, bias=False) for _ in range(experts)])
        self.fc2 = nn.ModuleList([nn.Linear(ffn, h, bias=False) for _ in range(experts)])

    def forward(self, x):
        t = x.shape[0]
        y = self.norm1(x)
        q, k, v = self.qkv(y).view(t, 3, self.heads, -1).unbind(1)
        a = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                           v.transpose(0, 1), is_causal=True)
        x = x + self.proj(a.transpose(0, 1).reshape(t, self.h))
        y = self.norm2(x)
        probs = torch.softmax(self.router(y).float(), dim=-1)
        w, idx = torch.topk(probs, self.topk, dim=-1)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        rows = y.repeat_interleave(self.topk, dim=0).index_select(0, order)
        # an even split stands in for the counts (no host sync: the wall time stays the host's)
        counts = [rows.shape[0] // self.experts] * self.experts
        outs, start = [], 0
        for e, n in enumerate(counts):
            g, u = self.fc1[e](rows[start:start + n]).chunk(2, dim=-1)
            outs.append(self.fc2[e](F.silu(g) * u))
            start += n
        out = torch.cat(outs).to(y.dtype)
        back = torch.empty_like(out).index_copy_(0, order, out)
        back = (back.view(t, self.topk, -1) * w.unsqueeze(-1).to(y.dtype)).sum(1)
        return x + back


def kernels_of(fn):
    """CUDA kernels (and memcpys) one call of fn launches, by the profiler."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    n = 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n += 1
    return n


def wall_us(fn, iters):
    """Host time per call of issuing fn: the clock stops before the GPU is waited for (the GPU
    work of these toy shapes is queued, not waited for, so what is timed is the host's)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / iters * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    blk = Block().to(dev, torch.bfloat16)
    x = torch.randn(128, 256, device=dev, dtype=torch.bfloat16, requires_grad=True)
    lin = nn.Linear(256, 256, bias=False).to(dev, torch.bfloat16)

    def fwd():
        return blk(x)

    def fwd_bwd():
        blk(x).sum().backward()

    def lin_fb():
        lin(x).sum().backward()

    for _ in range(5):  # warm-up: allocator, cuDNN plans, autotuning
        fwd_bwd()
        lin_fb()
    recs = []

    def record(what, fn):
        kern = kernels_of(fn)
        samples = []
        for _ in range(args.repeat):
            samples.append(wall_us(fn, args.iters) / max(kern, 1))
        recs.append({"what": what, "time_us": round(statistics.median(samples), 3),
                     "kernels": kern, "samples": [round(s, 3) for s in samples]})
        print(f"  {what:28s} {recs[-1]['time_us']:9.2f} us  ({kern} kernels/call)", flush=True)

    record("eager_per_kernel", fwd_bwd)
    record("eager_fwd_per_kernel", fwd)

    # each backward needs its own forward: time the pair and subtract the forward
    kf = kernels_of(fwd)
    kb = kernels_of(fwd_bwd) - kf
    samples = []
    for _ in range(args.repeat):
        tf = wall_us(fwd, args.iters)
        tfb = wall_us(fwd_bwd, args.iters)
        samples.append((tfb - tf) / max(kb, 1))
    recs.append({"what": "eager_bwd_per_kernel", "time_us": round(statistics.median(samples), 3),
                 "kernels": kb, "samples": [round(s, 3) for s in samples]})
    print(f"  {'eager_bwd_per_kernel':28s} {recs[-1]['time_us']:9.2f} us  ({kb} kernels/call)")
    record("linear_fwd_bwd_per_kernel", lin_fb)

    # CUDA graph of a static forward (no host sync inside: the attention half of the block)
    class Attn(nn.Module):
        def __init__(self, b):
            super().__init__()
            self.b = b

        def forward(self, x):
            b = self.b
            t = x.shape[0]
            y = b.norm1(x)
            q, k, v = b.qkv(y).view(t, 3, b.heads, -1).unbind(1)
            a = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                               v.transpose(0, 1), is_causal=True)
            return x + b.proj(a.transpose(0, 1).reshape(t, b.h))

    attn = Attn(blk)
    xs = torch.randn(128, 256, device=dev, dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(s):
        for _ in range(3):
            attn(xs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        attn(xs)
    ka = kernels_of(lambda: attn(xs))
    samples = []
    for _ in range(args.repeat):
        samples.append(wall_us(g.replay, args.iters))
    recs.append({"what": "graph_replay", "time_us": round(statistics.median(samples), 3),
                 "kernels": ka, "samples": [round(v, 3) for v in samples]})
    print(f"  {'graph_replay':28s} {recs[-1]['time_us']:9.2f} us  (a graph of {ka} kernels)")

    try:  # NCCL through torch.distributed, one rank
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1,
                                device_id=torch.device("cuda", torch.cuda.current_device()))
        t4 = torch.zeros(1, device=dev)
        for _ in range(10):
            dist.all_reduce(t4)
        samples = []
        for _ in range(args.repeat):
            samples.append(wall_us(lambda: dist.all_reduce(t4), args.iters))
        recs.append({"what": "nccl_all_reduce", "time_us": round(statistics.median(samples), 3),
                     "kernels": 1, "samples": [round(v, 3) for v in samples]})
        print(f"  {'nccl_all_reduce':28s} {recs[-1]['time_us']:9.2f} us")
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        print(f"  nccl_all_reduce: not measured ({e})")

    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True).stdout.strip() or os.environ.get("EP_GIT_REVISION", "")
    except OSError:
        rev = os.environ.get("EP_GIT_REVISION", "")
    meta = {"meta": {"program": "scripts/torch_host.py", "gpu": torch.cuda.get_device_name(),
                     "torch": torch.__version__, "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version(), "cpu": os.cpu_count(),
                     "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "git_revision": rev, "repeat": args.repeat, "iters": args.iters}}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump([meta] + recs, f, indent=1)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
