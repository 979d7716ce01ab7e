#!/usr/bin/env python3
"""torch_kernels.py: the compute kernels a Megatron-class step runs, timed through PyTorch on one
GPU per process, written as compute records (docs/calibration.md, "kernels.json").

What it times (bf16 unless said), each over a shape grid that spans what users run:
  attention     torch SDPA, causal, cuDNN backend (what TransformerEngine's fused attention runs)
                and the flash backend for comparison: fwd, and fwd+bwd (bwd = fwd+bwd - fwd)
  grouped_gemm  torch._grouped_mm: fwd / dgrad / wgrad of expert GEMMs (epref's transposes); with
                --grouped-impl multistream instead one cuBLAS GEMM per expert on a pool of 4
                streams (FP8: torch._scaled_mm per expert, tensorwise scales), what Transformer
                Engine's GroupedLinear runs by default on Hopper
                (multi_stream_cublas_gemm; NVTE_USE_CUTLASS_GROUPED_GEMM=1 selects a CUTLASS
                grouped kernel, like torch._grouped_mm)
  gemm          torch.matmul: fwd / dgrad / wgrad shapes on a log grid of M, N, K
  gemm fp8      torch._scaled_mm, e4m3, tensorwise (current-scaling) scales ("dtype": "fp8")
  grouped fp8   torch._scaled_grouped_mm, e4m3, rowwise scales, where the build has it
  fp8_cast      bf16 -> fp8 cast with its amax, as torch eager runs it (by bytes)
flops and bytes are counted exactly as core/cost.c counts the op epsim schedules (attention: causal
S/2, backward 2.5x the forward flops and 2x the bytes; grouped GEMMs: every expert's weight).

Timing, as epref bench calib does: 256 MiB written through HBM before every timing (--l2-flush
256), then a sleep kernel holds the stream while the host issues the op (twice the host time seen
in the warm-up), CUDA events around the op alone; median of --iters after --warmup.

  python3 scripts/torch_kernels.py run --out DIR [--gpus 4] [--deadline S] [--repeat N]
      one process per GPU on disjoint shares of the grid; DIR/kernels.json (+ kernels_repeat.json:
      N items timed again in a second launch, for the spread)
  python3 scripts/torch_kernels.py plan [--gpus 4]    grid sizes and the estimated time (no GPU)
  python3 scripts/torch_kernels.py selftest           record formulas against hand values (no GPU)
  python3 scripts/torch_kernels.py probe              one small op of each class (GPU)
"""

import argparse
import datetime
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import traceback

BF16 = 2.0
FP8 = 1.0
FLUSH_MIB = 256
COOL_HOLD = 1.5  # the GPU waits this many times an op's time before each timing

# ---- cost formulas: core/cost.c, core/sched_layer.c --------------------------------------------


def gemm_flops(m, n, k):
    return 2.0 * m * n * k


def gemm_bytes(m, n, k, elt=BF16):
    return (m * k + k * n + m * n) * elt


def attention_flops(tokens, seq, heads, dqk, dv, causal=True):
    keys = seq / 2.0 if causal else float(seq)
    return 2.0 * tokens * keys * heads * (dqk + dv)


def attention_bytes(tokens, heads, dqk, dv, kv_heads):
    q = tokens * heads * dqk
    o = tokens * heads * dv
    kv = tokens * kv_heads * (dqk + dv)
    return (q + kv + o) * BF16 + tokens * heads * 4.0


def gemm3(m, n, k, batch, grouped, elt=BF16):
    """The fwd op and its backward ops as core/sched_layer.c derives them: (phase, m, n, k, flops,
    bytes); dgrad m x k x n, wgrad k x n x m; flops and bytes are the forward's for all three."""
    flops = gemm_flops(m, n, k)
    by = gemm_bytes(m, n, k, elt)
    if grouped:
        by += (batch - 1) * k * n * elt
    return [("fwd", m, n, k, flops, by), ("bwd", m, k, n, flops, by),
            ("bwd_dw", k, n, m, flops, by)]


# ---- the grid ------------------------------------------------------------------------------------

ATTN_SEQS = [1024, 2048, 4096, 8192, 16384, 32768]
ATTN_DIMS = [(64, 64), (128, 128), (192, 128)]  # MHA 64, MHA/GQA 128, MLA (qk 128 + rope 64, v 128)
ATTN_HEADS = [1, 2, 4, 8, 16, 32, 64, 128]      # heads per rank (after TP)
ATTN_FWD_FLOPS_CAP = 2e13                       # ~35 ms forward: larger ones saturate anyway
GQA_HEADS = [8, 16, 32, 64]                     # d 128 with kv heads = heads / 8
FLASH_SEQS = [1024, 4096, 16384]
FLASH_HEADS = [4, 16, 64]

GEMM_M = [128 << i for i in range(9)]           # 128 .. 32768 token rows
GEMM_NK = [128, 512, 1024, 2048, 4096, 7168, 8192, 16384, 32768]
GEMM_FLOPS_CAP = 1.2e13
FP8_M = GEMM_M                                  # the bf16 shapes, for the speed-up by shape
FP8_NK = GEMM_NK[1:]

# (hidden, FFN per rank): up projection n = 2F (SwiGLU), k = H; down n = H, k = F
GROUPED_HF = [(1024, 256), (1024, 1024), (2048, 768), (2048, 2048), (2880, 2880),
              (4096, 1536), (4096, 14336), (6144, 16384), (7168, 256), (7168, 2048),
              (8192, 4096), (8192, 24576)]
GROUPED_E = [1, 2, 4, 8, 16, 32, 64, 128, 256]
GROUPED_R = [16 << i for i in range(11)]         # 16 .. 16384 rows per expert
GROUPED_ROWS_CAP = 65536
GROUPED_WEIGHT_CAP = 8e9                        # bytes of one weight tensor of all experts
GROUPED_FLOPS_CAP = 1.2e13
FP8_GROUPED_HF = GROUPED_HF
FP8_GROUPED_E = [1, 4, 8, 32, 128]
FP8_GROUPED_R = [64, 256, 1024, 4096]

CAST_ELEMS = [int(10 ** (5 + i / 2)) // 1024 * 1024 for i in range(9)]  # 1e5 .. 1e9 elements


def build_grid():
    """Items: dict(cls, key, est_s, ...). Deterministic order."""
    items = []

    def add(**kw):
        kw["est_s"] = estimate(kw)
        items.append(kw)

    for seq in ATTN_SEQS:
        for dqk, dv in ATTN_DIMS:
            for h in ATTN_HEADS:
                if attention_flops(seq, seq, h, dqk, dv) > ATTN_FWD_FLOPS_CAP:
                    continue
                add(cls="attention", backend="cudnn", seq=seq, dqk=dqk, dv=dv, heads=h, kv=h)
        for h in GQA_HEADS:
            if attention_flops(seq, seq, h, 128, 128) > ATTN_FWD_FLOPS_CAP:
                continue
            add(cls="attention", backend="cudnn", seq=seq, dqk=128, dv=128, heads=h, kv=h // 8)
    for seq in FLASH_SEQS:
        for dqk, dv in ATTN_DIMS[:2]:
            for h in FLASH_HEADS:
                if attention_flops(seq, seq, h, dqk, dv) > ATTN_FWD_FLOPS_CAP:
                    continue
                add(cls="attention", backend="flash", seq=seq, dqk=dqk, dv=dv, heads=h, kv=h)
    for n in GEMM_NK:
        for k in GEMM_NK:
            for m in GEMM_M:
                if gemm_flops(m, n, k) > GEMM_FLOPS_CAP:
                    continue
                for ph in ("fwd", "bwd", "bwd_dw"):
                    add(cls="gemm", dtype="bf16", m=m, n=n, k=k, phase=ph)
    for n in FP8_NK:
        for k in FP8_NK:
            for m in FP8_M:
                if gemm_flops(m, n, k) > GEMM_FLOPS_CAP:
                    continue
                for ph in ("fwd", "bwd", "bwd_dw"):
                    add(cls="gemm", dtype="fp8", m=m, n=n, k=k, phase=ph)
    for hid, ffn in GROUPED_HF:
        for proj, n, k in (("up", 2 * ffn, hid), ("down", hid, ffn)):
            for e in GROUPED_E:
                for r in GROUPED_R:
                    if (e * r > GROUPED_ROWS_CAP or e * k * n * BF16 > GROUPED_WEIGHT_CAP
                            or gemm_flops(e * r, n, k) > GROUPED_FLOPS_CAP):
                        continue
                    for ph in ("fwd", "bwd", "bwd_dw"):
                        add(cls="grouped", dtype="bf16", e=e, r=r, n=n, k=k, proj=proj, phase=ph,
                            hidden=hid, ffn=ffn)
    for hid, ffn in FP8_GROUPED_HF:
        for proj, n, k in (("up", 2 * ffn, hid), ("down", hid, ffn)):
            for e in FP8_GROUPED_E:
                for r in FP8_GROUPED_R:
                    if (e * r > GROUPED_ROWS_CAP or e * k * n * FP8 > GROUPED_WEIGHT_CAP
                            or gemm_flops(e * r, n, k) > GROUPED_FLOPS_CAP):
                        continue
                    for ph in ("fwd", "bwd", "bwd_dw"):
                        add(cls="grouped", dtype="fp8", e=e, r=r, n=n, k=k, proj=proj, phase=ph,
                            hidden=hid, ffn=ffn)
    for ne in CAST_ELEMS:
        add(cls="fp8_cast", elems=ne)
    for i, it in enumerate(items):
        it["id"] = i
    return items


def phase_shape(it):
    """(m, n, k) of the GEMM this item times (the record's shape) and the fwd shape."""
    if it["cls"] == "gemm":
        fm, fn, fk = it["m"], it["n"], it["k"]
        e = 1
    else:
        fm, fn, fk = it["e"] * it["r"], it["n"], it["k"]
        e = it["e"]
    elt = FP8 if it.get("dtype") == "fp8" else BF16
    for ph, m, n, k, flops, by in gemm3(fm, fn, fk, e, it["cls"] == "grouped", elt):
        if ph == it["phase"]:
            return (m, n, k, flops, by), (fm, fn, fk)
    raise ValueError(it["phase"])


# ---- estimates (plan): H100-class rates, only to size the grid ---------------------------------

PEAK = 989e12
HBM = 3.0e12


def estimate(it):
    """Seconds the item costs on the device: setup + (warmup + iters) timed runs + overheads."""
    iters = 13
    per_iter_over = 150e-6  # flush + sleep hold + Python
    c = it["cls"]
    if c == "attention":
        f = attention_flops(it["seq"], it["seq"], it["heads"], it["dqk"], it["dv"])
        eff = 0.45 if it["backend"] == "cudnn" else 0.28
        t_f = f / (PEAK * eff) + 20e-6
        t_fb = t_f + 2.5 * f / (PEAK * eff * 0.75) + 40e-6
        return 0.6 + iters * (t_f + t_fb + 2 * per_iter_over + 300e-6)  # 0.6 s: plan builds
    if c in ("gemm", "grouped"):
        (m, n, k, flops, by), _ = phase_shape(it)
        rate = 0.62 * PEAK * (1.5 if it["dtype"] == "fp8" else 1.0)
        small = min(1.0, (flops / 2e10) ** 0.35)  # small problems reach less of the peak
        t = max(flops / (rate * max(small, 0.05)), by / HBM) + 8e-6
        setup = by / 1.5e12 + 0.004
        return setup + iters * (t + per_iter_over)
    if c == "fp8_cast":
        return 0.01 + iters * (it["elems"] * 2 * 5 / HBM + 4 * 8e-6 + per_iter_over)
    raise ValueError(c)


def assign(items, ngpu):
    """Longest-processing-time first: each item to the least loaded GPU."""
    load = [0.0] * ngpu
    share = [[] for _ in range(ngpu)]
    for it in sorted(items, key=lambda x: (-x["est_s"], x["id"])):
        g = min(range(ngpu), key=lambda i: (load[i], i))
        share[g].append(it)
        load[g] += it["est_s"]
    return share, load


def repeat_subset(items, n):
    """n items spread over the classes (every k-th of each class), for the noise figure."""
    by = {}
    for it in items:
        key = it["cls"] if it["cls"] != "attention" else "attention:" + it["backend"]
        if it["cls"] in ("gemm", "grouped") and it["dtype"] == "fp8":
            key += ":fp8"
        by.setdefault(key, []).append(it)
    keys = sorted(by)
    out = []
    per = max(1, n // len(keys))
    for key in keys:
        lst = sorted(by[key], key=lambda x: x["est_s"])
        lst = [x for x in lst if x["est_s"] < 0.4] or lst  # small and medium ones: cheap
        step = max(1, len(lst) // per)
        out += lst[step // 2::step][:per]
    return out[:n]


# ---- records -------------------------------------------------------------------------------------


def record_gemm(it, time_us, extra):
    (m, n, k, flops, by), _ = phase_shape(it)
    grouped = it["cls"] == "grouped"
    r = {"kind": "grouped_gemm" if grouped else "gemm", "phase": it["phase"], "m": m, "n": n,
         "k": k, "batch": it["e"] if grouped else 1, "flops": flops, "bytes": by, "seq": 0,
         "dqk": 0, "dv": 0, "time_us": round(time_us, 3)}
    if it["dtype"] == "fp8":
        r["dtype"] = "fp8"
        r["source"] = GROUPED_SOURCE_FP8[grouped_impl()] if grouped else "torch:scaled_mm"
    else:
        r["source"] = (GROUPED_SOURCE[grouped_impl()] if grouped else "torch:cublas")
    if grouped:
        r["rows_per_expert"] = it["r"]
        r["proj"] = it["proj"]
    r.update(extra)
    return r


def record_attention(it, phase, time_us, extra):
    seq, h, kv, dqk, dv = it["seq"], it["heads"], it["kv"], it["dqk"], it["dv"]
    tokens = seq  # micro-batch 1: query tokens = seq
    f = attention_flops(tokens, seq, h, dqk, dv)
    by = attention_bytes(tokens, h, dqk, dv, kv)
    if phase == "bwd":
        f, by = 2.5 * f, 2.0 * by
    r = {"kind": "attention", "phase": phase, "m": tokens, "n": 0, "k": 0, "batch": 0,
         "flops": f, "bytes": by, "seq": seq, "dqk": dqk, "dv": dv, "heads": h, "kv_heads": kv,
         "causal": 1, "time_us": round(time_us, 3), "source": "torch:" + it["backend"]}
    r.update(extra)
    return r


def record_cast(it, time_us, extra):
    ne = it["elems"]
    r = {"kind": "fp8_cast", "phase": "fwd", "m": 0, "n": 0, "k": 0, "batch": 0,
         "flops": 0, "bytes": ne * (BF16 + FP8), "seq": 0, "dqk": 0, "dv": 0, "elements": ne,
         "dtype": "fp8", "time_us": round(time_us, 3), "source": "torch:eager"}
    r.update(extra)
    return r


# ---- GPU side ------------------------------------------------------------------------------------


class Timer:
    """Events around an op with 256 MiB flushed before and the host ahead (a sleep kernel of at
    least COOL_HOLD x the op's time: the power cap stays out of the records)."""

    def __init__(self, torch, iters, warmup):
        self.t = torch
        self.iters, self.warmup = iters, warmup
        self.flush = torch.empty(FLUSH_MIB << 20, dtype=torch.uint8, device="cuda")
        # cycles of torch.cuda._sleep per microsecond on this GPU
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        s.record()
        torch.cuda._sleep(20_000_000)
        e.record()
        torch.cuda.synchronize()
        self.cyc_per_us = 20_000_000 / (s.elapsed_time(e) * 1000.0)

    def time(self, fn, prep=None):
        """Median, min, max GPU microseconds of fn(); the host issue time (median, us)."""
        t = self.t
        host = []
        for _ in range(self.warmup):
            if prep:
                prep()
            h0 = time.perf_counter()
            fn()
            host.append(time.perf_counter() - h0)
        # the last warm-up timed alone: the hold below keeps the tensor cores' duty under 0.4, so
        # that no record is taken at a power-capped clock (docs/calibration.md, "Sustained load")
        s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        t.cuda.synchronize()
        op_us = s.elapsed_time(e) * 1000.0
        hold_us = max(30.0, 2e6 * statistics.median(host) + 20.0, COOL_HOLD * op_us)
        ev = [(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True))
              for _ in range(self.iters)]
        for s, e in ev:
            if prep:
                prep()
            self.flush.zero_()
            t.cuda._sleep(int(hold_us * self.cyc_per_us))
            s.record()
            fn()
            e.record()
        t.cuda.synchronize()
        us = sorted(s.elapsed_time(e) * 1000.0 for s, e in ev)
        return statistics.median(us), us[0], us[-1], 1e6 * statistics.median(host)


def write_records(path, meta, recs):
    """The calibration file format: [{"meta": ...}, record, ...], written whole or not at all."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump([{"meta": meta}] + recs, f, indent=1)
    os.replace(tmp, path)


def rnd(torch, shape, scale=1.0, dtype=None):
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    if scale != 1.0:
        x.mul_(scale)
    return x if dtype is None else x.to(dtype)


def run_attention(torch, tm, it):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    seq, h, kv, dqk, dv = it["seq"], it["heads"], it["kv"], it["dqk"], it["dv"]
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[it["backend"]]
    # TransformerEngine's bshd layout, handed to SDPA as (b, h, s, d) views
    q = rnd(torch, (1, seq, h, dqk)).transpose(1, 2).requires_grad_(True)
    k = rnd(torch, (1, seq, kv, dqk)).transpose(1, 2).requires_grad_(True)
    v = rnd(torch, (1, seq, kv, dv)).transpose(1, 2).requires_grad_(True)
    g = rnd(torch, (1, seq, h, dv)).transpose(1, 2)
    extra = {}
    gqa = kv != h

    def fwd():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    try:
        fwd()
    except Exception:
        if not gqa:
            raise
        # the backend refuses grouped K/V: give it the repeated heads (the flops are the same;
        # the record keeps the GQA byte count) and say so
        k = k.detach().repeat_interleave(h // kv, dim=1).requires_grad_(True)
        v = v.detach().repeat_interleave(h // kv, dim=1).requires_grad_(True)
        gqa = False
        extra["gqa_expanded"] = 1
        fwd()

    def clear():
        q.grad = k.grad = v.grad = None

    def fwd_bwd():
        fwd().backward(g)

    tf, tf_lo, tf_hi, hf = tm.time(fwd, clear)
    tb, tb_lo, tb_hi, hb = tm.time(fwd_bwd, clear)
    recs = [record_attention(it, "fwd", tf, dict(extra, min_us=round(tf_lo, 3),
                                                 max_us=round(tf_hi, 3), host_us=round(hf, 1)))]
    recs.append(record_attention(it, "bwd", tb - tf, dict(extra, fwd_bwd_us=round(tb, 3),
                                                          fwd_bwd_min_us=round(tb_lo, 3),
                                                          fwd_bwd_max_us=round(tb_hi, 3),
                                                          host_us=round(hb - hf, 1))))
    return recs


def run_gemm(torch, tm, it):
    (m, n, k, _, _), (fm, fn_, fk) = phase_shape(it)
    ph = it["phase"]
    if it["dtype"] == "bf16":
        # Linear: Y = X W^T with W (n x k); dX = dY W; dW = dY^T X
        if ph == "fwd":
            a, w = rnd(torch, (fm, fk)), rnd(torch, (fn_, fk), 0.05)
            f = lambda: torch.matmul(a, w.t())
        elif ph == "bwd":
            a, w = rnd(torch, (fm, fn_)), rnd(torch, (fn_, fk), 0.05)
            f = lambda: torch.matmul(a, w)
        else:
            dy, x = rnd(torch, (fm, fn_)), rnd(torch, (fm, fk))
            f = lambda: torch.matmul(dy.t(), x)
        extra = {}
    else:
        # FP8 on Hopper runs every GEMM as TN (A row-major, B column-major; the casts make the
        # transposed copies): the record's m x n x k with tensorwise scales, bf16 out;
        # TransformerEngine's fprop uses fast accumulation, dgrad/wgrad the split accumulator
        e4 = torch.float8_e4m3fn
        a = rnd(torch, (m, k), 1.0, e4)
        b = rnd(torch, (n, k), 1.0, e4).t()
        sa = torch.tensor(1.0, device="cuda")
        sb = torch.tensor(1.0, device="cuda")
        fast = ph == "fwd"
        f = lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                     use_fast_accum=fast)
        extra = {"fast_accum": int(fast), "scaling": "tensorwise"}
    med, lo, hi, host = tm.time(f)
    extra.update(min_us=round(lo, 3), max_us=round(hi, 3), host_us=round(host, 1))
    return [record_gemm(it, med, extra)]


GROUPED_SOURCE = {"grouped_mm": "torch:grouped_mm", "multistream": "torch:cublas_multistream"}
GROUPED_SOURCE_FP8 = {"grouped_mm": "torch:scaled_grouped_mm",
                      "multistream": "torch:cublas_fp8_multistream"}
STREAM_POOL = 4  # Transformer Engine's compute streams (nvte_get_num_compute_streams)


def grouped_impl():
    return os.environ.get("TK_GROUPED_IMPL", "grouped_mm")


def multistream_mm(torch, pairs, outs, mm=None):
    """One GEMM per expert, expert i on stream i % STREAM_POOL, forked from and joined back to
    the current stream (Transformer Engine's multi_stream_cublas_gemm); mm(a, b, out) is the
    GEMM (default torch.mm)."""
    mm = mm or (lambda a, b, out: torch.mm(a, b, out=out))
    cur = torch.cuda.current_stream()
    pool = [torch.cuda.Stream() for _ in range(STREAM_POOL)]
    fork = torch.cuda.Event()
    joins = [torch.cuda.Event() for _ in pool]

    def f():
        fork.record(cur)
        for s in pool:
            s.wait_event(fork)
        for i, (a, b) in enumerate(pairs):
            with torch.cuda.stream(pool[i % STREAM_POOL]):
                mm(a, b, outs[i])
        for s, ev in zip(pool, joins):
            ev.record(s)
            cur.wait_event(ev)
    return f


def multistream_fp8(torch, e, r, n, k, ph):
    """FP8 experts as Transformer Engine's GroupedLinear runs them on Hopper with tensorwise
    (current or delayed) scaling: one cuBLAS FP8 GEMM per expert (torch._scaled_mm, TN, scalar
    scales, bf16 out) on the stream pool. Each expert's operands are their own tensors, as TE's
    split quantization makes them: row-wise data for the forward's X_e and dY_e, the column-wise
    (transposed) copies for W_e in dgrad and for dY_e, X_e in wgrad. Fast accumulation in the
    forward only, as in the dense FP8 records."""
    e4 = torch.float8_e4m3fn
    if ph == "fwd":    # Y_e (r x n) = X_e W_e^T
        shapes, out = ((r, k), (n, k)), (r, n)
    elif ph == "bwd":  # dX_e (r x k) = dY_e W_e: W_e's transposed copy is (k x n)
        shapes, out = ((r, n), (k, n)), (r, k)
    else:              # dW_e (n x k) = dY_e^T X_e: both transposed copies
        shapes, out = ((n, r), (k, r)), (n, k)
    pairs = [(rnd(torch, shapes[0], 1.0, e4), rnd(torch, shapes[1], 1.0, e4).t())
             for _ in range(e)]
    outs = [torch.empty(out, device="cuda", dtype=torch.bfloat16) for _ in range(e)]
    one = torch.tensor(1.0, device="cuda")
    fast = ph == "fwd"
    f = multistream_mm(torch, pairs, outs, lambda a, b, out: torch._scaled_mm(
        a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast, out=out))
    return f, {"streams": STREAM_POOL, "fast_accum": int(fast), "scaling": "tensorwise"}


def run_grouped(torch, tm, it):
    e, r, n, k, ph = it["e"], it["r"], it["n"], it["k"], it["phase"]
    rows = e * r
    offs = torch.arange(1, e + 1, device="cuda", dtype=torch.int32) * r
    if it["dtype"] == "fp8" and grouped_impl() == "multistream":
        f, extra = multistream_fp8(torch, e, r, n, k, ph)
    elif it["dtype"] == "bf16" and grouped_impl() == "multistream":
        # the same operands, expert by expert: fwd X_e W_e^T, dgrad dY_e W_e, wgrad dY_e^T X_e
        sl = [slice(i * r, (i + 1) * r) for i in range(e)]
        if ph == "fwd":
            x, w = rnd(torch, (rows, k)), rnd(torch, (e, n, k), 0.05)
            out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
            pairs, outs = [(x[s], w[i].t()) for i, s in enumerate(sl)], [out[s] for s in sl]
        elif ph == "bwd":
            dy, w = rnd(torch, (rows, n)), rnd(torch, (e, n, k), 0.05)
            out = torch.empty(rows, k, device="cuda", dtype=torch.bfloat16)
            pairs, outs = [(dy[s], w[i]) for i, s in enumerate(sl)], [out[s] for s in sl]
        else:
            dy, x = rnd(torch, (rows, n)), rnd(torch, (rows, k))
            out = torch.empty(e, n, k, device="cuda", dtype=torch.bfloat16)
            pairs, outs = [(dy[s].t(), x[s]) for s in sl], [out[i] for i in range(e)]
        f = multistream_mm(torch, pairs, outs)
        extra = {"streams": STREAM_POOL}
    elif it["dtype"] == "bf16":
        # weights (e, n, k) as Linear weights; tokens sorted by expert, r rows each
        if ph == "fwd":
            x, w = rnd(torch, (rows, k)), rnd(torch, (e, n, k), 0.05)
            f = lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
        elif ph == "bwd":
            dy, w = rnd(torch, (rows, n)), rnd(torch, (e, n, k), 0.05)
            f = lambda: torch._grouped_mm(dy, w, offs=offs)
        else:  # dW_e (n x k) = dY_e^T X_e: groups along the reduction
            dy, x = rnd(torch, (rows, n)), rnd(torch, (rows, k))
            f = lambda: torch._grouped_mm(dy.t(), x, offs=offs)
        extra = {}
    else:
        # rowwise scales (what _scaled_grouped_mm takes on Hopper), A row-major, B column-major
        e4 = torch.float8_e4m3fn
        if ph in ("fwd", "bwd"):
            kk = k if ph == "fwd" else n
            nn = n if ph == "fwd" else k
            a = rnd(torch, (rows, kk), 1.0, e4)
            b = rnd(torch, (e, nn, kk), 1.0, e4).transpose(-2, -1)
            sa = torch.ones(rows, device="cuda", dtype=torch.float32)
            sb = torch.ones(e, nn, device="cuda", dtype=torch.float32)
        else:
            a = rnd(torch, (n, rows), 1.0, e4)
            b = rnd(torch, (k, rows), 1.0, e4).t()
            sa = torch.ones(e * n, device="cuda", dtype=torch.float32)
            sb = torch.ones(e * k, device="cuda", dtype=torch.float32)
        fast = ph == "fwd"
        f = lambda: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16,
                                             use_fast_accum=fast)
        extra = {"fast_accum": int(fast), "scaling": "rowwise"}
    med, lo, hi, host = tm.time(f)
    extra.update(min_us=round(lo, 3), max_us=round(hi, 3), host_us=round(host, 1))
    return [record_gemm(it, med, extra)]


def run_cast(torch, tm, it):
    x = rnd(torch, (it["elems"],))
    e4 = torch.float8_e4m3fn

    def f():  # current scaling: amax of the tensor, then the scaled cast
        amax = torch.amax(torch.abs(x))
        return (x * (448.0 / amax)).to(e4)

    med, lo, hi, host = tm.time(f)
    return [record_cast(it, med, {"kernels": 4, "min_us": round(lo, 3), "max_us": round(hi, 3),
                                  "host_us": round(host, 1)})]


def wanted_class(it, classes):
    """--classes: "" keeps every item; else the items whose class (or class:dtype) is listed."""
    if not classes:
        return True
    names = classes.split(",")
    return it["cls"] in names or f'{it["cls"]}:{it.get("dtype")}' in names


RUNNERS = {"attention": run_attention, "gemm": run_gemm, "grouped": run_grouped,
           "fp8_cast": run_cast}


def desc(it):
    return ",".join(f"{k}={v}" for k, v in it.items() if k not in ("est_s",))


def worker(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    items = json.load(open(args.items))
    tm = Timer(torch, args.iters, args.warmup)
    name = torch.cuda.get_device_name()
    dev = int(os.environ.get("TK_DEV", "0"))
    random.Random(1234 + dev).shuffle(items)  # a deadline loses a spread of the grid, not a corner
    recs, errs = [], []
    t0 = time.time()
    last_write = t0
    done = 0

    def write():
        tmp = args.shard + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"records": recs, "errors": errs, "done": done, "items": len(items),
                       "elapsed_s": round(time.time() - t0, 1), "gpu": name,
                       "cyc_per_us": tm.cyc_per_us}, f)
        os.replace(tmp, args.shard)

    skip_cls = {}
    for it in items:
        if time.time() - t0 > args.deadline:
            errs.append({"deadline": f"stopped after {done} of {len(items)} items"})
            break
        key = (it["cls"], it.get("dtype"), it.get("backend"), it.get("phase"))
        if skip_cls.get(key, 0) >= 3:  # an API that failed three times in a row: skip its class
            errs.append({"item": desc(it), "error": "skipped: class failed 3 times"})
            continue
        try:
            for r in RUNNERS[it["cls"]](torch, tm, it):
                r["gpu"] = name
                r["dev"] = dev
                r["item"] = it["id"]
                recs.append(r)
            skip_cls[key] = 0
        except Exception as ex:  # noqa: BLE001 - every failure is reported, the grid goes on
            msg = f"{type(ex).__name__}: {str(ex).splitlines()[0][:300] if str(ex) else ''}"
            errs.append({"item": desc(it), "error": msg})
            if len(errs) <= 3:
                traceback.print_exc()
            if "out of memory" not in msg.lower():
                skip_cls[key] = skip_cls.get(key, 0) + 1
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        done += 1
        if time.time() - last_write > 20:
            write()
            last_write = time.time()
        if done % 200 == 0:
            print(f"  dev {dev}: {done}/{len(items)} items, {time.time() - t0:.0f} s", flush=True)
    write()
    print(f"  dev {dev}: {done}/{len(items)} items, {len(recs)} records, {len(errs)} errors, "
          f"{time.time() - t0:.0f} s", flush=True)


def versions():
    import torch
    v = {"torch": torch.__version__, "cuda": torch.version.cuda,
         "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
         "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
         "num_gpus": torch.cuda.device_count(),
         "has_scaled_grouped_mm": int(hasattr(torch, "_scaled_grouped_mm")),
         "has_grouped_mm": int(hasattr(torch, "_grouped_mm"))}
    try:
        v["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                      "--format=csv,noheader"], capture_output=True, text=True,
                                     timeout=20).stdout.split()[0]
    except Exception:  # noqa: BLE001
        v["driver"] = ""
    return v


def launch(args, items, ngpu, tag, deadline):
    share, load = assign(items, ngpu)
    procs = []
    os.makedirs(args.out, exist_ok=True)
    for g in range(ngpu):
        ipath = os.path.join(args.out, f".items_{tag}_{g}.json")
        json.dump(share[g], open(ipath, "w"))
        shard = os.path.join(args.out, f".shard_{tag}_{g}.json")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(g), TK_DEV=str(g), PYTHONUNBUFFERED="1")
        cmd = [sys.executable, os.path.abspath(__file__), "worker", "--items", ipath, "--shard",
               shard, "--iters", str(args.iters), "--warmup", str(args.warmup), "--deadline",
               str(deadline)]
        procs.append((subprocess.Popen(cmd, env=env), shard, load[g]))
    print(f"{tag}: {len(items)} items on {ngpu} GPUs, estimated {max(load):.0f} s per GPU "
          f"(deadline {deadline:.0f} s)", flush=True)
    recs, errs, stats = [], [], []
    for p, shard, est in procs:
        try:
            p.wait(timeout=deadline + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            errs.append({"error": f"{shard}: worker killed after the deadline"})
        if not os.path.exists(shard):
            errs.append({"error": f"{shard}: no shard (exit {p.returncode})"})
            continue
        s = json.load(open(shard))
        recs += s["records"]
        errs += s["errors"]
        stats.append({"gpu": s["gpu"], "done": s["done"], "items": s["items"],
                      "elapsed_s": s["elapsed_s"], "estimated_s": round(est, 1)})
    return recs, errs, stats


def write_file(path, meta, recs):
    with open(path, "w") as f:
        f.write("[\n" + json.dumps({"meta": meta}, separators=(",", ":")))
        for r in recs:
            f.write(",\n" + json.dumps(r, separators=(",", ":")))
        f.write("\n]\n")


def main_run(args):
    v = versions()
    ngpu = min(args.gpus, v["num_gpus"])
    os.environ["TK_GROUPED_IMPL"] = args.grouped_impl  # the workers inherit it
    items = [it for it in build_grid() if wanted_class(it, args.classes)]
    t0 = time.time()
    # the second launch: the whole grid again (--repeat -1, half the time each) or a subset
    reserve = args.deadline / 2 if args.repeat < 0 else 45 if args.repeat > 0 else 0
    recs, errs, stats = launch(args, items, ngpu, "main", args.deadline - reserve)
    meta = {"benchmark": "torch_kernels", "file": "kernels.json", "program":
            "scripts/torch_kernels.py",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "git_revision": args.revision, "iters": args.iters, "warmup": args.warmup,
            "l2_flush_mib": FLUSH_MIB, "host_ahead": 1, "cool_hold": COOL_HOLD, "ranks": 1,
            "processes": ngpu,
            "time": "median over iterations of CUDA events around the op alone",
            "format": "docs/calibration.md",
            "compare_only": ["torch:flash", "torch:eager"], "grouped_impl": args.grouped_impl,
            "classes": args.classes or "all",
            "workers": stats, "errors_total": len(errs), "errors": errs[:60]}
    meta.update(v)
    write_file(os.path.join(args.out, "kernels.json"), meta, recs)
    print(f"wrote {args.out}/kernels.json: {len(recs)} records, {len(errs)} errors, "
          f"{time.time() - t0:.0f} s", flush=True)
    if args.repeat != 0:
        left = args.deadline - (time.time() - t0)
        sub = items if args.repeat < 0 else repeat_subset(items, args.repeat)
        if left > 20:
            rr, re_, rs = launch(args, sub, ngpu, "repeat", left - 10)
            meta2 = dict(meta, file="kernels_repeat.json", workers=rs, errors_total=len(re_),
                         errors=re_[:20], repeat_of="kernels.json",
                         date=datetime.datetime.now(datetime.timezone.utc).strftime(
                             "%Y-%m-%dT%H:%M:%SZ"))
            write_file(os.path.join(args.out, "kernels_repeat.json"), meta2, rr)
            print(f"wrote {args.out}/kernels_repeat.json: {len(rr)} records", flush=True)
    summarize(os.path.join(args.out, "kernels.json"))


def summarize(path):
    """Median TF/s per class and a few reference shapes (the run's closing table)."""
    d = json.load(open(path))
    rs = d[1:]
    by = {}
    for r in rs:
        key = (r["kind"], r.get("dtype", "bf16"), r["phase"], r["source"])
        if r["time_us"] > 0 and r["flops"] > 0:
            by.setdefault(key, []).append(r["flops"] / r["time_us"] / 1e6)
    print("class                                   n   median  p90 TF/s")
    for key in sorted(by):
        x = sorted(by[key])
        print(f"{' '.join(key):38s} {len(x):4d} {statistics.median(x):7.0f} "
              f"{x[int(0.9 * (len(x) - 1))]:6.0f}")
    for r in rs:
        if r["kind"] == "attention" and r["seq"] in (4096, 8192) and r.get("heads") == 64 \
                and r["dqk"] == 128 and r.get("kv_heads") == 64:
            print(f"  attention {r['source']} {r['phase']} S {r['seq']} h 64 d 128: "
                  f"{r['flops'] / r['time_us'] / 1e6:.0f} TF/s")


def main_plan(args):
    items = build_grid()
    by = {}
    for it in items:
        key = it["cls"] + ":" + str(it.get("dtype", it.get("backend")))
        c = by.setdefault(key, [0, 0.0])
        c[0] += 1
        c[1] += it["est_s"]
    for key, (n, s) in sorted(by.items()):
        print(f"{key:20s} {n:5d} items  {s:7.1f} s")
    share, load = assign(items, args.gpus)
    print(f"total {len(items)} items, {sum(load):.0f} s; per GPU ({args.gpus}): "
          + ", ".join(f"{x:.0f}" for x in load))
    sub = repeat_subset(items, args.repeat)
    print(f"repeat subset: {len(sub)} items, {sum(x['est_s'] for x in sub):.1f} s")
    recs = 0
    for it in items:
        recs += 2 if it["cls"] == "attention" else 1
    print(f"records: {recs}")


def main_selftest(_args):
    # DeepSeek-V3 attention per rank at TP 1: 128 heads, S 4096, MLA 192/128
    f = attention_flops(4096, 4096, 128, 192, 128)
    assert f == 2.0 * 4096 * 2048 * 128 * 320, f
    assert attention_bytes(4096, 128, 192, 128, 128) == \
        (4096 * 128 * 192 + 4096 * 128 * 320 + 4096 * 128 * 128) * 2 + 4096 * 128 * 4
    # grouped GEMM records as epref's add_gemm3: dgrad swaps n and k, wgrad is k x n x m
    it = {"cls": "grouped", "dtype": "bf16", "e": 8, "r": 256, "n": 4096, "k": 7168,
          "phase": "bwd_dw", "proj": "up"}
    r = record_gemm(it, 100.0, {})
    assert (r["m"], r["n"], r["k"], r["batch"]) == (7168, 4096, 2048, 8), r
    assert r["flops"] == 2.0 * 2048 * 4096 * 7168
    assert r["bytes"] == (2048 * 7168 + 7168 * 4096 + 2048 * 4096) * 2 + 7 * 7168 * 4096 * 2
    it["phase"] = "bwd"
    r = record_gemm(it, 100.0, {})
    assert (r["m"], r["n"], r["k"]) == (2048, 7168, 4096), r
    # the h100 epref record of this shape (traces/h100/calib/compute.json) has the same numbers
    it.update(phase="fwd", r=32)  # grouped_gemm fwd m 256 n 4096 k 7168 batch 8 there
    r = record_gemm(it, 100.0, {})
    assert abs(r["flops"] - 1.50324e10) / 1.50324e10 < 1e-5, r
    assert abs(r["bytes"] - 4.75529e8) / 4.75529e8 < 1e-5, r
    assert r["source"] == "torch:grouped_mm"
    rr = record_attention({"seq": 4096, "heads": 64, "kv": 8, "dqk": 128, "dv": 128,
                           "backend": "cudnn"}, "bwd", 10.0, {})
    assert rr["flops"] == 2.5 * attention_flops(4096, 4096, 64, 128, 128)
    assert rr["bytes"] == 2 * attention_bytes(4096, 64, 128, 128, 8)
    items = build_grid()
    assert len({it["id"] for it in items}) == len(items)
    print(f"selftest ok: {len(items)} items")


def main_probe(_args):
    import torch
    print(json.dumps(versions()))
    tm = Timer(torch, 3, 1)
    print(f"sleep cycles per us {tm.cyc_per_us:.0f}")
    probes = [
        {"cls": "attention", "backend": "cudnn", "seq": 1024, "dqk": 128, "dv": 128, "heads": 8,
         "kv": 8},
        {"cls": "attention", "backend": "cudnn", "seq": 1024, "dqk": 128, "dv": 128, "heads": 8,
         "kv": 1},
        {"cls": "attention", "backend": "cudnn", "seq": 1024, "dqk": 192, "dv": 128, "heads": 8,
         "kv": 8},
        {"cls": "attention", "backend": "flash", "seq": 1024, "dqk": 128, "dv": 128, "heads": 8,
         "kv": 8},
        {"cls": "fp8_cast", "elems": 1 << 20},
    ]
    for dt in ("bf16", "fp8"):
        for ph in ("fwd", "bwd", "bwd_dw"):
            probes.append({"cls": "gemm", "dtype": dt, "m": 1024, "n": 2048, "k": 512,
                           "phase": ph})
            probes.append({"cls": "grouped", "dtype": dt, "e": 4, "r": 256, "n": 1024, "k": 512,
                           "phase": ph, "proj": "up"})
    for it in probes:
        try:
            for r in RUNNERS[it["cls"]](torch, tm, it):
                print(f"  ok   {r['kind']:12s} {r.get('dtype', 'bf16'):4s} {r['phase']:6s} "
                      f"{r['source']:24s} {r['time_us']:9.1f} us "
                      f"{'gqa_expanded' if r.get('gqa_expanded') else ''}")
        except Exception as ex:  # noqa: BLE001
            print(f"  FAIL {desc(it)}: {type(ex).__name__}: {str(ex).splitlines()[0][:200]}")
    try:
        check_grouped(torch)
    except Exception as ex:  # noqa: BLE001
        print(f"  FAIL grouped check: {type(ex).__name__}: {str(ex).splitlines()[0][:200]}")


def check_grouped(torch):
    """The grouped layouts against a loop of matmuls in fp32."""
    e, r_, n, k = 3, 64, 256, 128
    offs = torch.arange(1, e + 1, device="cuda", dtype=torch.int32) * r_
    x, w, dy = rnd(torch, (e * r_, k)), rnd(torch, (e, n, k)), rnd(torch, (e * r_, n))
    y = torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
    ref = torch.cat([x[i * r_:(i + 1) * r_].float() @ w[i].float().t() for i in range(e)])
    dw = torch._grouped_mm(dy.t(), x, offs=offs)
    refw = torch.stack([dy[i * r_:(i + 1) * r_].float().t() @ x[i * r_:(i + 1) * r_].float()
                        for i in range(e)])
    print(f"  grouped fwd rel err {((y.float() - ref).norm() / ref.norm()).item():.2e}, "
          f"wgrad {((dw.float() - refw).norm() / refw.norm()).item():.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=["run", "plan", "selftest", "probe", "worker", "summary"])
    ap.add_argument("--out", default="out/torch")
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=240.0, help="seconds for the grid and the repeat")
    ap.add_argument("--repeat", type=int, default=40, help="items timed again in a second launch (-1: all)")
    ap.add_argument("--revision", default=os.environ.get("EP_GIT_REVISION", ""))
    ap.add_argument("--classes", default="",
                    help="comma-separated classes of the grid to run (attention, gemm, grouped, "
                         "fp8_cast; with a dtype: grouped:bf16); default all")
    ap.add_argument("--grouped-impl", choices=sorted(GROUPED_SOURCE), default="grouped_mm",
                    help="how bf16 grouped GEMMs run (see above)")
    ap.add_argument("--items")
    ap.add_argument("--shard")
    ap.add_argument("--file")
    args = ap.parse_args()
    {"run": main_run, "plan": main_plan, "selftest": main_selftest, "probe": main_probe,
     "worker": worker, "summary": lambda a: summarize(a.file)}[args.mode](args)


if __name__ == "__main__":
    main()
