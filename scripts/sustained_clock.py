#!/usr/bin/env python3
"""Sustained load against isolated timing, per op class (the physics behind 'later microbatches
run slower than the first': power and clock management under a steady stream of kernels).

For each op of a small table (a large bf16 GEMM, a grouped weight-gradient GEMM with a short
reduction and large outputs, an HBM copy), on one GPU:
  isolated:  the op alone after a 200 ms idle gap and a 1 ms spin kernel (the GPU busy while the
             host queues it), timed with CUDA events (median of ROUNDS), as epref's calibration
             times an op;
  sustained: the op back to back for SECONDS, the per-iteration time of the second half (median),
             while a thread samples the SM clock and power (nvidia-smi) every 50 ms.
With --mix, also streams of the GEMM and the copy interleaved at GEMM duty cycles of about 1/4,
1/2 and 3/4 (patterns of 1 GEMM + 6 copies, 1 + 2, 3 + 2), each op timed by its own events in the
second half: how the cap's slowdown falls with the share of time compute-bound kernels run.
Prints one JSON object; usage: sustained_clock.py [--seconds S] [--rounds R] [--mix] > out.json
"""
import argparse, json, statistics, subprocess, sys, threading, time

import torch


def ops(dev):
    g = torch.Generator(device=dev).manual_seed(1)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16, generator=g)
    # 32 local experts' weight gradients: dW_e[7168 x 4096] = X_e^T [7168 x 512] dH_e [512 x 4096]
    x = torch.randn(32, 512, 7168, device=dev, dtype=torch.bfloat16, generator=g)
    h = torch.randn(32, 512, 4096, device=dev, dtype=torch.bfloat16, generator=g)
    src = torch.empty(1 << 30, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return [
        ("gemm_8192", lambda: torch.mm(a, b), 2 * 8192 ** 3, 3 * 8192 * 8192 * 2),
        ("grouped_wgrad_32x7168x4096x512", lambda: torch.bmm(x.transpose(1, 2), h),
         2 * 32 * 7168 * 4096 * 512, 32 * (7168 * 4096 + 512 * (7168 + 4096)) * 2),
        ("copy_1GiB", lambda: dst.copy_(src), 0, 2 * (1 << 30)),
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--mix", action="store_true")
    args = p.parse_args()
    dev = torch.device("cuda")
    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "seconds": args.seconds, "rounds": args.rounds, "ops": []}
    for name, fn, flops, bytes_ in ops(dev):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
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
        # back to back: events every 1/20 of the run, one op between them per slot's first op
        per, k = [], max(1, n // 20)
        for _ in range(20):
            per.append(timed(fn, k))
        stop.set()
        th.join()
        second = per[len(per) // 2:]
        clocks = [s[1] for s in samples if s[0] > t0 + args.seconds / 2]
        power = [s[2] for s in samples if s[0] > t0 + args.seconds / 2]
        rec = {"op": name, "flops": flops, "bytes": bytes_,
               "isolated_us": statistics.median(iso), "isolated_all_us": iso,
               "sustained_us": statistics.median(second), "sustained_slots_us": per,
               "slowdown": statistics.median(second) / statistics.median(iso),
               "sm_clock_mhz_second_half": statistics.median(clocks) if clocks else None,
               "power_w_second_half": statistics.median(power) if power else None,
               "samples": samples}
        res["ops"].append(rec)
        print(f"{name}: isolated {rec['isolated_us']:.1f} us, sustained {rec['sustained_us']:.1f} us, "
              f"x{rec['slowdown']:.3f}, SM clock {rec['sm_clock_mhz_second_half']}, power "
              f"{rec['power_w_second_half']}", flush=True, file=sys.stderr)
    if args.mix:
        table = {n: (fn, r) for (n, fn, _, _), r in zip(ops(dev), res["ops"])}
        gemm, g_rec = table["gemm_8192"]
        copy, c_rec = table["copy_1GiB"]
        res["mix"] = []
        for ng, nc in ((1, 6), (1, 2), (3, 2)):
            seq = [gemm] * ng + [copy] * nc
            ev = []
            t0 = time.time()
            while time.time() - t0 < args.seconds:
                for fn in seq:
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    fn()
                    e.record()
                    ev.append((fn is gemm, s, e))
            torch.cuda.synchronize()
            half = ev[len(ev) // 2:]
            g = [s.elapsed_time(e) * 1e3 for is_g, s, e in half if is_g]
            c = [s.elapsed_time(e) * 1e3 for is_g, s, e in half if not is_g]
            duty = ng * g_rec["isolated_us"] / (ng * g_rec["isolated_us"] + nc * c_rec["isolated_us"])
            m = {"pattern": [ng, nc], "gemm_duty_isolated": duty,
                 "gemm_us": statistics.median(g), "copy_us": statistics.median(c),
                 "gemm_slowdown": statistics.median(g) / g_rec["isolated_us"],
                 "copy_slowdown": statistics.median(c) / c_rec["isolated_us"]}
            res["mix"].append(m)
            print(f"mix {ng} GEMM + {nc} copies (GEMM duty {duty:.2f}): GEMM x{m['gemm_slowdown']:.3f},"
                  f" copy x{m['copy_slowdown']:.3f}", flush=True, file=sys.stderr)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
