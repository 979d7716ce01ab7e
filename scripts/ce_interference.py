#!/usr/bin/env python3
"""A GEMM's slowdown beside copy-engine transfers, on two GPUs of one process.

Transformer Engine's TP communication overlap (userbuffers, `--tp-comm-overlap`) moves its
all-gathers as a ring exchange of peer copies on the copy engines (no SMs), where NCCL runs a
kernel on SMs. This times a bf16 GEMM (torch.matmul) on GPU 0 alone and while a side stream keeps
copies in flight the whole time:
  - "peer_out":  GPU 0 -> GPU 1 (reads GPU 0's HBM, NVLink out),
  - "peer_both": the same plus GPU 1 -> GPU 0 on GPU 1's stream (a ring step: send and receive),
  - "local":     GPU 0 -> GPU 0 (device-to-device, reads and writes GPU 0's HBM).
The copies' rate alone is measured first; a peer rate far below NVLink's (staging through the
host) is reported and the run fails. Each record: the GEMM's median CUDA-event time of --iters
back-to-back products alone and beside the copies, and the copies' rate alone and beside.
Output: a JSON array (first element {"meta": ...}), records
  {"what": "gemm_beside_copy", "aggressor": name, "m", "n", "k", "alone_us", "beside_us",
   "slowdown", "copy_gbps_alone", "copy_gbps_beside"}
Usage: python3 scripts/ce_interference.py --out FILE [--iters 40]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_kernels import write_records  # noqa: E402

SHAPES = [(8192, 8192, 8192), (4096, 8192, 8192), (8192, 3072, 8192)]
CHUNK = 64 << 20  # bytes per copy
MIN_PEER_GBPS = 100  # below this the copies did not go over NVLink


def gemm_loop(a, b, iters):
    """Median us of iters back-to-back products, events around each, one sync at the end."""
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(iters)]
    for s, e in ev:
        s.record()
        torch.matmul(a, b)
        e.record()
    torch.cuda.synchronize(a.device)
    return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in ev)


def copies(pairs, n):
    """n copies of each (source-device stream, destination-device stream, dst, src); the bytes of
    the first's copies and events around them. PyTorch runs a cross-device copy on the source
    device's current stream and fences it with the destination device's current stream: both are
    set to side streams here, so the GEMM's default stream never waits for a copy."""
    s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(pairs[0][0]):
        s0.record()
    for src_stream, dst_stream, dst, src in pairs:
        with torch.cuda.stream(src_stream), torch.cuda.stream(dst_stream):
            for _ in range(n):
                dst.copy_(src, non_blocking=True)
    with torch.cuda.stream(pairs[0][0]):
        e0.record()
    return n * CHUNK, s0, e0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=40)
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        print("ce_interference: needs two GPUs", file=sys.stderr)
        return 2
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    n_el = CHUNK // 2
    src0 = torch.randn(n_el, device=d0, dtype=torch.bfloat16)
    dst0 = torch.empty_like(src0)
    src1 = torch.randn(n_el, device=d1, dtype=torch.bfloat16)
    dst1 = torch.empty_like(src1)
    a0, a1, b0, b1 = (torch.cuda.Stream(d) for d in (d0, d1, d0, d1))
    modes = {"peer_out": [(a0, a1, dst1, src0)],
             "peer_both": [(a0, a1, dst1, src0), (b1, b0, dst0, src1)],
             "local": [(a0, a0, dst0, src0)]}
    # each mode's copy rate alone (bytes of the first stream's copies over its time)
    rate = {}
    for name, pairs in modes.items():
        copies(pairs, 4)
        torch.cuda.synchronize(d0), torch.cuda.synchronize(d1)
        moved, s, e = copies(pairs, 32)
        torch.cuda.synchronize(d0), torch.cuda.synchronize(d1)
        rate[name] = moved / (s.elapsed_time(e) * 1e-3) / 1e9
        print(f"  {name:9s} alone: {rate[name]:6.0f} GB/s", flush=True)
    if rate["peer_out"] < MIN_PEER_GBPS:
        print(f"ce_interference: peer copies at {rate['peer_out']:.0f} GB/s: not NVLink "
              "peer-to-peer", file=sys.stderr)
        return 1
    recs = []
    torch.cuda.set_device(d0)
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device=d0, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=d0, dtype=torch.bfloat16)
        gemm_loop(a, b, 5)
        alone = gemm_loop(a, b, args.iters)
        for name, pairs in modes.items():
            torch.cuda.synchronize(d0), torch.cuda.synchronize(d1)
            # enough copies to outlast the GEMMs (1.5x their time at the rate alone)
            ncopy = int(1.5 * args.iters * alone * 1e-6 * rate[name] * 1e9 / CHUNK) + 4
            moved, s, e = copies(pairs, ncopy)
            beside = gemm_loop(a, b, args.iters)
            torch.cuda.synchronize(d0), torch.cuda.synchronize(d1)
            side_gbps = moved / (s.elapsed_time(e) * 1e-3) / 1e9
            recs.append(dict(what="gemm_beside_copy", aggressor=name, m=m, n=n, k=k,
                             alone_us=round(alone, 2), beside_us=round(beside, 2),
                             slowdown=round(beside / alone, 4),
                             copy_gbps_alone=round(rate[name], 1),
                             copy_gbps_beside=round(side_gbps, 1), copies=ncopy))
            print(f"  {m}x{n}x{k} beside {name:9s}: {alone:8.1f} -> {beside:8.1f} us "
                  f"({beside / alone:.3f}x); copies {side_gbps:.0f} GB/s", flush=True)
    meta = {"program": "scripts/ce_interference.py", "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "iters": args.iters, "chunk_bytes": CHUNK,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_records(args.out, meta, recs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
