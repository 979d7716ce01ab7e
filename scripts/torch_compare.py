#!/usr/bin/env python3
"""torch_compare.py: what the torch kernel records (scripts/torch_kernels.py) show against epref's
own compute records of the same GPU, shape by shape (docs/calibration.md, "Megatron-class
kernels"). Prints markdown tables.

  python3 scripts/torch_compare.py TORCH_DIR EPREF_COMPUTE_JSON [--peak 989e12]
      TORCH_DIR holds kernels.json (or kernels.json.xz) and, if present, kernels_repeat.json
      (second launch)
"""
import argparse
import math
import os
import statistics

from jsonfile import load_records


def tfs(r):
    return r["flops"] / r["time_us"] / 1e6 if r["time_us"] > 0 else float("nan")


def q(x, p):
    x = sorted(x)
    return x[min(len(x) - 1, int(p * (len(x) - 1) + 0.5))] if x else float("nan")


def gkey(r):
    return (r["kind"], r["phase"], r["m"], r["n"], r["k"], r["batch"])


def attention(tr, er, peak):
    print("\n### Attention: TF/s (causal flops as core/cost.c counts them), by sequence and head dims")
    print("epref: its own attention (grid, 4 and 32 blocks = 8 and 64 causal heads); torch at 8 and"
          " 64 heads (the same flops); bwd from (fwd+bwd) - fwd\n")
    print("| seq | dqk/dv | heads | epref fwd | cuDNN fwd | cuDNN bwd | flash fwd | flash bwd |"
          " cuDNN/epref fwd |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ep = {}
    for r in er:
        if r["kind"] == "attention" and r["source"] == "grid":
            per = 2.0 * r["seq"] ** 2 * (r["dqk"] + r["dv"])
            heads = int(round(2 * r["flops"] / per))
            ep[(r["seq"], r["dqk"], r["dv"], heads, r["phase"])] = tfs(r)
    tt = {}
    for r in tr:
        if r["kind"] == "attention" and r.get("kv_heads") == r.get("heads"):
            tt[(r["source"], r["seq"], r["dqk"], r["dv"], r["heads"], r["phase"])] = tfs(r)
    ratios = []
    for seq in sorted({k[1] for k in tt}):
        for dqk, dv in ((64, 64), (128, 128), (192, 128)):
            for h in (8, 64):
                c = tt.get(("torch:cudnn", seq, dqk, dv, h, "fwd"))
                if c is None:
                    continue
                e = ep.get((seq, dqk, dv, h, "fwd"))
                cells = [f"{e:.0f}" if e else "-", f"{c:.0f}",
                         f"{tt.get(('torch:cudnn', seq, dqk, dv, h, 'bwd'), float('nan')):.0f}"]
                for ph in ("fwd", "bwd"):
                    f = tt.get(("torch:flash", seq, dqk, dv, h, ph))
                    cells.append(f"{f:.0f}" if f else "-")
                cells.append(f"{c / e:.1f}x" if e else "-")
                if e:
                    ratios.append(c / e)
                print(f"| {seq} | {dqk}/{dv} | {h} | " + " | ".join(cells) + " |")
    allc = [tfs(r) / (peak / 1e12) for r in tr if r["source"] == "torch:cudnn"]
    big = [tfs(r) for r in tr if r["source"] == "torch:cudnn" and r["flops"] > 1e12]
    print(f"\ncuDNN / epref forward at equal shapes: median {statistics.median(ratios):.1f}x "
          f"(range {min(ratios):.1f}-{max(ratios):.1f}x, {len(ratios)} shapes). cuDNN over all "
          f"{len(allc)} records: efficiency median {statistics.median(allc):.2f} of peak; ops "
          f"above 1 TFLOP: {q(big, 0.1):.0f}-{q(big, 0.9):.0f} TF/s (p10-p90)")
    gq = {}
    for r in tr:
        if r["kind"] == "attention" and r["source"] == "torch:cudnn" and r["kv_heads"] != r["heads"]:
            m = tt.get(("torch:cudnn", r["seq"], r["dqk"], r["dv"], r["heads"], r["phase"]))
            if m:
                gq.setdefault(r["phase"], []).append(tfs(r) / m)
    for ph, x in sorted(gq.items()):
        print(f"GQA (kv = heads/8) / MHA at equal shapes, {ph}: median {statistics.median(x):.3f} "
              f"(range {min(x):.2f}-{max(x):.2f}, {len(x)} shapes)")


def rows_class(r):
    rows = r["k"] if r["phase"] == "bwd_dw" else r["m"]
    per = rows / max(1, r["batch"])
    return "<=64" if per <= 64 else "128-512" if per <= 512 else "1024-4096" if per <= 4096 else ">4096"


def paired(tr, er, kind, tsrc):
    ek = {}
    for r in er:
        if r["kind"] == kind:
            ek.setdefault(gkey(r), []).append(r["time_us"])
    out = []
    for r in tr:
        if r["kind"] == kind and r["source"] == tsrc and r.get("dtype", "bf16") == "bf16":
            e = ek.get(gkey(r))
            if e:
                out.append((r, statistics.median(e)))
    return out


def grouped(tr, er):
    print("\n### Grouped expert GEMMs: epref's grouped cuBLAS time / torch._grouped_mm time, equal shapes")
    print("(> 1: torch faster), by phase and rows per expert\n")
    pairs = paired(tr, er, "grouped_gemm", "torch:grouped_mm")
    classes = ["<=64", "128-512", "1024-4096", ">4096"]
    print("| phase | " + " | ".join(f"rows/expert {c}" for c in classes) + " | all |")
    print("| --- | " + " | ".join("---" for _ in classes) + " | --- |")
    for ph in ("fwd", "bwd", "bwd_dw"):
        cells = []
        allr = []
        for c in classes:
            x = [e / r["time_us"] for r, e in pairs if r["phase"] == ph and rows_class(r) == c]
            allr += x
            cells.append(f"{statistics.median(x):.2f} ({q(x, 0.1):.2f}-{q(x, 0.9):.2f}, n {len(x)})"
                         if x else "-")
        print(f"| {ph} | " + " | ".join(cells) + f" | {statistics.median(allr):.2f} |")
    model_shapes(tr, er)
    mixtral = {("fwd", 8192, 28672, 4096), ("bwd", 8192, 4096, 28672), ("bwd_dw", 4096, 28672, 8192)}
    for r in tr:
        if (r["kind"] == "grouped_gemm" and r["batch"] == 8 and r.get("dtype", "bf16") == "bf16"
                and (r["phase"], r["m"], r["n"], r["k"]) in mixtral):
            print(f"- Mixtral-class expert fc1 (8 experts x 1024 rows, 4096 -> 2 x 14336) "
                  f"{r['phase']}: {r['time_us']:.0f} us, {tfs(r):.0f} TF/s")


def model_shapes(tr, er):
    """epref's records of model shapes (source model:*) against torch's series of the same
    (phase, weight dims, experts), its time log-interpolated in the token rows."""
    series = {}
    for r in tr:
        if r["kind"] == "grouped_gemm" and r.get("dtype", "bf16") == "bf16":
            w = r["phase"] == "bwd_dw"
            key = (r["phase"], r["m"] if w else r["n"], r["n"] if w else r["k"], r["batch"])
            series.setdefault(key, []).append((r["k"] if w else r["m"], r["time_us"]))
    out = {}
    for r in er:
        if r["kind"] != "grouped_gemm" or not r["source"].startswith("model:"):
            continue
        w = r["phase"] == "bwd_dw"
        key = (r["phase"], r["m"] if w else r["n"], r["n"] if w else r["k"], r["batch"])
        rows = r["k"] if w else r["m"]
        pts = sorted(series.get(key, []))
        lo = [p for p in pts if p[0] <= rows]
        hi = [p for p in pts if p[0] >= rows]
        if not lo or not hi:
            continue
        (x0, t0), (x1, t1) = lo[-1], hi[0]
        t = t0 if x1 == x0 else math.exp(math.log(t0) + (math.log(t1) - math.log(t0)) *
                                          (math.log(rows) - math.log(x0)) / (math.log(x1) - math.log(x0)))
        out.setdefault((r["phase"], rows_class(r)), []).append(r["time_us"] / t)
    if out:
        print("\nepref's model-shape records (Qwen3-30B-A3B / DeepSeek-V3 proxy at EP 16) / torch "
              "interpolated in rows on its series of the same weights and experts:\n")
        for key, x in sorted(out.items()):
            print(f"- {key[0]}, rows/expert {key[1]}: median {statistics.median(x):.2f} "
                  f"(p10 {q(x, 0.1):.2f}, p90 {q(x, 0.9):.2f}, n {len(x)})")


def dense(tr, er):
    print("\n### Dense GEMMs: epref cuBLAS time / torch.matmul time, equal shapes\n")
    pairs = paired(tr, er, "gemm", "torch:cublas")
    for ph in ("fwd", "bwd", "bwd_dw"):
        x = [e / r["time_us"] for r, e in pairs if r["phase"] == ph]
        big = [e / r["time_us"] for r, e in pairs if r["phase"] == ph and r["flops"] > 1e11]
        if x:
            print(f"- {ph}: median {statistics.median(x):.3f} (p10 {q(x, 0.1):.2f}, p90 "
                  f"{q(x, 0.9):.2f}, n {len(x)}); above 0.1 TFLOP {statistics.median(big):.3f} "
                  f"(n {len(big)})")


def fp8(tr, peak):
    print("\n### FP8 (e4m3, torch._scaled_mm tensorwise) speed-up over bf16 torch.matmul, equal shapes\n")
    bf = {gkey(r): r for r in tr if r["kind"] == "gemm" and r.get("dtype", "bf16") == "bf16"}
    bins = [(0, 1e9), (1e9, 1e10), (1e10, 1e11), (1e11, 1e12), (1e12, 1e14)]
    print("| GEMM flops | fwd | dgrad | wgrad | FP8 TF/s (median) |")
    print("| --- | --- | --- | --- | --- |")
    for lo, hi in bins:
        cells = []
        rates = []
        for ph in ("fwd", "bwd", "bwd_dw"):
            x = []
            for r in tr:
                if (r["kind"] == "gemm" and r.get("dtype") == "fp8" and r["phase"] == ph
                        and lo <= r["flops"] < hi and gkey(r) in bf):
                    x.append(bf[gkey(r)]["time_us"] / r["time_us"])
                    rates.append(tfs(r))
            cells.append(f"{statistics.median(x):.2f} ({q(x, 0.1):.2f}-{q(x, 0.9):.2f})" if x else "-")
        print(f"| {lo:.0e}-{hi:.0e} | " + " | ".join(cells) +
              f" | {statistics.median(rates):.0f} |" if rates else " | - |")
    gb = {gkey(r): r for r in tr if r["kind"] == "grouped_gemm" and r.get("dtype", "bf16") == "bf16"}
    for ph in ("fwd", "bwd", "bwd_dw"):
        x = [gb[gkey(r)]["time_us"] / r["time_us"] for r in tr
             if r["kind"] == "grouped_gemm" and r.get("dtype") == "fp8" and r["phase"] == ph
             and gkey(r) in gb]
        xb = [gb[gkey(r)]["time_us"] / r["time_us"] for r in tr
              if r["kind"] == "grouped_gemm" and r.get("dtype") == "fp8" and r["phase"] == ph
              and gkey(r) in gb and r["flops"] > 1e11]
        if x:
            print(f"- grouped FP8 (_scaled_grouped_mm, rowwise) / bf16 grouped_mm, {ph}: median "
                  f"{statistics.median(x):.2f} (p10 {q(x, 0.1):.2f}, p90 {q(x, 0.9):.2f}, n "
                  f"{len(x)}); above 0.1 TFLOP {statistics.median(xb) if xb else float('nan'):.2f}")
    cast = sorted((r for r in tr if r["kind"] == "fp8_cast"), key=lambda r: r["elements"])
    for r in cast:
        print(f"- fp8 cast + amax (torch eager, 4 kernels) {r['elements']:.2e} elements: "
              f"{r['time_us']:.1f} us, {r['bytes'] / r['time_us'] / 1e3:.0f} GB/s of the 3 bytes"
              " per element a fused cast moves")


def noise(tr, rep):
    if not rep:
        return
    print("\n### Run to run: second launch / first, per record (same item)\n")
    first = {(r["item"], r["phase"], r["kind"]): r for r in tr}
    by = {}
    for r in rep:
        f = first.get((r["item"], r["phase"], r["kind"]))
        if not f or f["time_us"] <= 0 or r["time_us"] <= 0:
            continue
        key = r["source"] + ("" if r["kind"] != "attention" else " " + r["phase"])
        by.setdefault(key, []).append(r["time_us"] / f["time_us"])
    print("| source | n | median ratio | median abs dev | p90 abs dev | max abs dev |")
    print("| --- | --- | --- | --- | --- | --- |")
    allx = []
    for key, x in sorted(by.items()):
        d = [abs(v - 1) for v in x]
        allx += d
        print(f"| {key} | {len(x)} | {statistics.median(x):.3f} | {100 * statistics.median(d):.1f}% |"
              f" {100 * q(d, 0.9):.1f}% | {100 * max(d):.1f}% |")
    print(f"| all | {len(allx)} | | {100 * statistics.median(allx):.1f}% | {100 * q(allx, 0.9):.1f}% |"
          f" {100 * max(allx):.1f}% |")
    spread = [(r["max_us"] - r["min_us"]) / r["time_us"] for r in tr
              if "max_us" in r and r["time_us"] > 0]
    print(f"\nWithin a launch (max - min of the 10 timings) / median: median "
          f"{100 * statistics.median(spread):.1f}%, p90 {100 * q(spread, 0.9):.1f}%")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("torch_dir")
    ap.add_argument("epref_compute")
    ap.add_argument("--peak", type=float, default=989e12)
    a = ap.parse_args()
    tm, tr = load_records(os.path.join(a.torch_dir, "kernels.json"))
    em, er = load_records(a.epref_compute)
    rp = os.path.join(a.torch_dir, "kernels_repeat.json")
    rep = load_records(rp)[1] if os.path.exists(rp) else []
    print(f"torch: {tm['gpu']}, torch {tm['torch']}, cuDNN {tm['cudnn']}, {tm['date']}, "
          f"{len(tr)} records; epref: {em['gpu']}, {em['date']}, {em['git_revision']}")
    attention(tr, er, a.peak)
    grouped(tr, er)
    dense(tr, er)
    fp8(tr, a.peak)
    noise(tr, rep)


if __name__ == "__main__":
    main()
