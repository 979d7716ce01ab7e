#!/usr/bin/env python3
"""Sustained load against isolated timing, per op class (the physics behind 'later microbatches
run slower than the first': power and clock management under a steady stream of kernels).

For each op of a small table (bf16 GEMMs of two sizes, an FP8 GEMM, a grouped weight-gradient
GEMM with a short reduction and large outputs, causal attention forward and forward+backward
(SDPA's flash backend), an HBM copy), on one GPU:
  isolated:  the op alone after a 200 ms idle gap and a 1 ms spin kernel (the GPU busy while the
             host queues it), timed with CUDA events (median of ROUNDS), as epref's calibration
             times an op;
  sustained: the op back to back for SECONDS, the per-iteration time of the second half (median),
             while a thread samples the SM clock and power (nvidia-smi) every 50 ms.
With --mix, also streams of each compute op and a 256 MiB copy interleaved at duty cycles of about
1/4 to 7/8 (the compute op's isolated time over the pattern's), each op timed by its own events in
the second half: how the cap's slowdown falls with the share of time compute-bound kernels run.
With --recovery, the large GEMM back to back for 1.5 s, then an idle gap of 5-200 ms, then three
GEMMs timed one by one: how fast the clock comes back (pipeline bubbles, waits).
With --rise, HBM copies back to back for 1 s (the clock awake, below the cap), then the large GEMM
back to back for 0.4 s with every GEMM timed: how fast the clock falls when the load turns heavy
(three times, 2 s idle between).
With --gemms MxNxK,..., bf16 GEMMs of those shapes join the table (gemm_MxNxK): how far a GEMM's
size and efficiency set the power it draws back to back. With --bmms ExRxHxF,..., batched expert
GEMMs (E experts of R rows each, [R x H] x [H x F], one torch.bmm) join it (bmm_ExRxHxF): the
grouped GEMMs of few rows per expert, whose tensor cores wait on their weights. With --loops
ExRxHxF,..., the same as one torch.mm per expert issued in turn (loop_ExRxHxF): how epref's
grouped GEMM runs (one cuBLAS call per expert).
Prints one JSON object; usage:
  sustained_clock.py [--seconds S] [--rounds R] [--mix] [--recovery] [--rise] [--only REGEX]
                     [--gemms MxNxK,...] [--bmms ExRxHxF,...] [--loops ExRxHxF,...] > out.json
"""
import argparse, json, re, statistics, subprocess, sys, threading, time

import torch


def gemm_op(dev, m, n, k, g):
    """A bf16 GEMM [m x k] x [k x n], as ops() lists it."""
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16, generator=g)
    return (f"gemm_{m}x{n}x{k}", lambda: torch.mm(a, b), 2 * m * n * k, (m * k + k * n + m * n) * 2,
            "gemm")


def expert_op(dev, e, r, h, f, g, loop):
    """E expert GEMMs [r x h] x [h x f] in bf16, as ops() lists them: one torch.bmm (bmm_ExRxHxF)
    or, with loop, one torch.mm per expert issued in turn (loop_ExRxHxF)."""
    x = torch.randn(e, r, h, device=dev, dtype=torch.bfloat16, generator=g)
    w = torch.randn(e, h, f, device=dev, dtype=torch.bfloat16, generator=g)
    y = torch.empty(e, r, f, device=dev, dtype=torch.bfloat16) if loop else None

    def run():
        if not loop:
            return torch.bmm(x, w)
        for i in range(e):
            torch.mm(x[i], w[i], out=y[i])
    return (f"{'loop' if loop else 'bmm'}_{e}x{r}x{h}x{f}", run, 2 * e * r * h * f,
            e * (r * h + h * f + r * f) * 2, "grouped_gemm")


def ops(dev, gemms=(), bmms=(), loops=()):
    """(name, fn, flops, bytes, class): class is the epsim op kind whose power the op stands for.
    gemms: extra bf16 GEMM shapes (m, n, k), named gemm_MxNxK; bmms, loops: expert GEMMs
    (e, r, h, f), named bmm_ExRxHxF and loop_ExRxHxF (expert_op)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.Generator(device=dev).manual_seed(1)
    rnd = lambda *shape: torch.randn(*shape, device=dev, dtype=torch.bfloat16, generator=g)
    a, b = rnd(8192, 8192), rnd(8192, 8192)
    a4, b4 = rnd(4096, 4096), rnd(4096, 4096)
    # FP8 as Hopper runs it: e4m3 TN with tensorwise scales, bf16 out
    e4 = torch.float8_e4m3fn
    a8, b8 = a.to(e4), b.to(e4).t()
    one = torch.tensor(1.0, device=dev)
    # 32 local experts' weight gradients: dW_e[7168 x 4096] = X_e^T [7168 x 512] dH_e [512 x 4096]
    x = rnd(32, 512, 7168)
    h = rnd(32, 512, 4096)
    # causal attention, 32 heads of 128, sequence 4096 (TransformerEngine's bshd as SDPA views)
    q, k, v, go = (rnd(1, 4096, 32, 128).transpose(1, 2) for _ in range(4))
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    attn_flops = 4 * 4096 * 4096 * 128 * 32 // 2

    def attn_fwd():
        with torch.no_grad(), sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def attn_fwd_bwd():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.autograd.backward(o, go, inputs=[q, k, v])
        q.grad = k.grad = v.grad = None

    src = torch.empty(1 << 30, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return [gemm_op(dev, m, n, k, g) for m, n, k in gemms] + \
        [expert_op(dev, *shape, g, loop=False) for shape in bmms] + \
        [expert_op(dev, *shape, g, loop=True) for shape in loops] + [
        ("gemm_8192", lambda: torch.mm(a, b), 2 * 8192 ** 3, 3 * 8192 * 8192 * 2, "gemm"),
        ("gemm_4096", lambda: torch.mm(a4, b4), 2 * 4096 ** 3, 3 * 4096 * 4096 * 2, "gemm"),
        ("fp8_gemm_8192", lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                    out_dtype=torch.bfloat16, use_fast_accum=True),
         2 * 8192 ** 3, 8192 * 8192 * 4, "gemm_fp8"),
        ("grouped_wgrad_32x7168x4096x512", lambda: torch.bmm(x.transpose(1, 2), h),
         2 * 32 * 7168 * 4096 * 512, 32 * (7168 * 4096 + 512 * (7168 + 4096)) * 2, "grouped_gemm"),
        ("attention_fwd_4096", attn_fwd, attn_flops, 4 * 4096 * 32 * 128 * 2, "attention"),
        ("attention_fwd_bwd_4096", attn_fwd_bwd, 3.5 * attn_flops, 10 * 4096 * 32 * 128 * 2,
         "attention"),
        ("copy_1GiB", lambda: dst.copy_(src), 0, 2 * (1 << 30), "memory"),
        ("copy_256MiB", lambda: dst[:1 << 28].copy_(src[:1 << 28]), 0, 2 * (1 << 28), "memory"),
    ]


def timed(fn, n, spin=False):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if spin:  # the GPU busy (~1 ms spin) while the host queues the op, as epref's calibration
        torch.cuda._sleep(2_000_000)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / n * 1e3  # us per op


def sampler(stop, out):
    while not stop.is_set():
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                                "--format=csv,noheader,nounits", "-i", "0"],
                               capture_output=True, text=True, timeout=5).stdout.split(",")
            out.append([time.time()] + [float(v) for v in q])
        except Exception:
            pass
        time.sleep(0.05)


def mix_run(seq, seconds):
    """Runs the pattern seq (a list of (is_timed_op, fn)) for `seconds`; per-op times of the second
    half: (timed op's us, the others' us)."""
    ev = []
    t0 = time.time()
    while time.time() - t0 < seconds:
        for is_x, fn in seq:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            ev.append((is_x, s, e))
        if len(ev) > 200000:
            break
    torch.cuda.synchronize()
    half = ev[len(ev) // 2:]
    xs = [s.elapsed_time(e) * 1e3 for is_x, s, e in half if is_x]
    cs = [s.elapsed_time(e) * 1e3 for is_x, s, e in half if not is_x]
    return statistics.median(xs), statistics.median(cs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--mix", action="store_true")
    p.add_argument("--recovery", action="store_true")
    p.add_argument("--rise", action="store_true")
    p.add_argument("--only", default=None, help="regex of op names to time")
    p.add_argument("--gemms", default="",
                   help="extra bf16 GEMM shapes MxNxK,... (how a GEMM's size sets its power draw)")
    p.add_argument("--bmms", default="",
                   help="batched expert GEMMs ExRxHxF,... (E experts of R rows, H -> F)")
    p.add_argument("--loops", default="",
                   help="the same as one torch.mm per expert, ExRxHxF,... (epref's grouped GEMM)")
    args = p.parse_args()
    def shapes(arg):  # "AxBxC,..." -> [(A, B, C), ...]
        return [tuple(int(v) for v in x.split("x")) for x in arg.split(",") if x]
    gemms, bmms, loops = shapes(args.gemms), shapes(args.bmms), shapes(args.loops)
    dev = torch.device("cuda")
    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "seconds": args.seconds, "rounds": args.rounds, "ops": []}
    table = {}
    for name, fn, flops, bytes_, cls in ops(dev, gemms, bmms, loops):
        if args.only and not re.search(args.only, name) and not name.startswith("copy"):
            continue
        try:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        except Exception as ex:  # e.g. no FP8 on this GPU: say so, go on
            print(f"{name}: skipped: {ex}", file=sys.stderr)
            continue
        iso = []
        for _ in range(args.rounds):
            time.sleep(0.2)
            iso.append(timed(fn, 1, spin=True))
        one = timed(fn, 1)
        n = max(4, int(args.seconds * 1e6 / max(one, 1.0)))
        samples, stop = [], threading.Event()
        th = threading.Thread(target=sampler, args=(stop, samples))
        t0 = time.time()
        th.start()
        # back to back: events every 1/20 of the run
        per, k = [], max(1, n // 20)
        for _ in range(20):
            per.append(timed(fn, k))
        stop.set()
        th.join()
        second = per[len(per) // 2:]
        clocks = [s[1] for s in samples if s[0] > t0 + args.seconds / 2]
        power = [s[2] for s in samples if s[0] > t0 + args.seconds / 2]
        rec = {"op": name, "class": cls, "flops": flops, "bytes": bytes_,
               "isolated_us": statistics.median(iso), "isolated_all_us": iso,
               "sustained_us": statistics.median(second), "sustained_slots_us": per,
               "slowdown": statistics.median(second) / statistics.median(iso),
               "sm_clock_mhz_second_half": statistics.median(clocks) if clocks else None,
               "power_w_second_half": statistics.median(power) if power else None,
               "samples": samples}
        res["ops"].append(rec)
        table[name] = (fn, rec)
        print(f"{name}: isolated {rec['isolated_us']:.1f} us, sustained {rec['sustained_us']:.1f} us, "
              f"x{rec['slowdown']:.3f}, SM clock {rec['sm_clock_mhz_second_half']}, power "
              f"{rec['power_w_second_half']}", flush=True, file=sys.stderr)
    if args.mix:
        copy, c_rec = table["copy_256MiB"]
        res["mix"] = []
        for name, (fn, rec) in table.items():
            if rec["class"] == "memory":
                continue
            tx, tc = rec["isolated_us"], c_rec["isolated_us"]
            for target in (0.25, 0.5, 0.625, 0.75, 0.875):
                # the fewest ops (at most 16 of each) whose duty is nearest the target
                best = None
                for nx in range(1, 17):
                    for nc in range(0, 17):
                        d = nx * tx / (nx * tx + nc * tc)
                        if nc and (best is None or abs(d - target) < abs(best[2] - target) - 1e-3):
                            best = (nx, nc, d)
                nx, nc, duty = best
                # the copies spread between the compute ops, as a step's memory-bound ops are
                seq = []
                for i in range(nx):
                    seq.append((True, fn))
                    seq += [(False, copy)] * (nc * (i + 1) // nx - nc * i // nx)
                xus, cus = mix_run(seq, args.seconds)
                m = {"op": name, "class": rec["class"], "pattern": [nx, nc],
                     "duty_isolated": duty, "op_us": xus, "copy_us": cus,
                     "op_slowdown": xus / tx, "copy_slowdown": cus / tc}
                res["mix"].append(m)
                print(f"mix {name} {nx} + {nc} copies (duty {duty:.2f}): x{m['op_slowdown']:.3f},"
                      f" copy x{m['copy_slowdown']:.3f}", flush=True, file=sys.stderr)
    if args.recovery and "gemm_8192" in table:
        fn, rec = table["gemm_8192"]
        res["recovery"] = []
        for gap_ms in (5, 20, 50, 200):
            t0 = time.time()
            while time.time() - t0 < 1.5:
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
            time.sleep(gap_ms / 1e3)
            after = [timed(fn, 1) for _ in range(3)]
            r = {"gap_ms": gap_ms, "after_us": after,
                 "slowdown_after": [t / rec["isolated_us"] for t in after]}
            res["recovery"].append(r)
            print(f"recovery after {gap_ms} ms idle: x" + ", x".join(f"{v:.3f}" for v in
                  r["slowdown_after"]), flush=True, file=sys.stderr)
    if args.rise and "gemm_8192" in table:
        fn, rec = table["gemm_8192"]
        copy, _ = table["copy_256MiB"]
        res["rise"] = []
        for rep in range(3):
            time.sleep(2.0)
            t0 = time.time()
            while time.time() - t0 < 1.0:
                for _ in range(20):
                    copy()
                torch.cuda.synchronize()
            ev = []
            t0 = time.time()
            while time.time() - t0 < 0.4:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                ev.append((s, e))
            torch.cuda.synchronize()
            start = [ev[0][0].elapsed_time(s) for s, e in ev]
            slow = [s.elapsed_time(e) * 1e3 / rec["isolated_us"] for s, e in ev]
            res["rise"].append({"t_ms": start, "slowdown": slow})
            print(f"rise {rep}: " + ", ".join(f"{t:.0f} ms x{v:.3f}" for t, v in
                  list(zip(start, slow))[::20]), flush=True, file=sys.stderr)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
