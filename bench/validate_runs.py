#!/usr/bin/env python3
"""Checks `loom simulate` against published runs (bench-time only; loom never reads these).

1. Narayanan et al. 2021 (SC21) Table 1: predicted vs published hardware TFLOP/s per GPU
   (their Eq. 3 counts the recompute forward, i.e. loom's hardware_tflops_per_gpu).
2. vTrain (Bang et al., MICRO 2024) 109 measured multi-node A100 iteration times:
   MAPE and Spearman rank correlation of predicted vs measured step time.

Assumptions (global, stated, never per row):
  Narayanan: full recompute (Eq. 3 assumes it), fp16, no flash attention (2021 Megatron),
  micro-batch 1, 1F1B schedule, DP gradient all-reduce after backward (no overlap),
  DGX A100 nodes (8 GPUs, NVSwitch, 8x HDR200 rail-optimised fat-tree).
  vTrain: its README's settings: 1F1B, full recompute, 8 GPUs per node, 800 Gb/s per node
  inter-node (8 rails x 100 Gb/s; bench/vtrain-a100.json), fp16, no flash attention, GPT-2 vocabulary 50257, seq 2048,
  no gradient bucketing (one DP bucket).

Usage: bench/validate_runs.py [--loom build/loom] [--reference ../shared/reference] [--quick]
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 8 x A100 80GB per node on NVSwitch, 8 rails x 100 Gb/s = 800 Gb/s per node (vTrain's setting).
VTRAIN_CLUSTER = os.path.join(ROOT, "bench", "vtrain-a100.json")


def run_loom(loom, args):
    out = subprocess.run([loom, "simulate", "--format", "json", "--network", "analytical"] + args,
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return json.loads(out.stdout)["results"], None


def spearman(a, b):
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0 + 1
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb)


def narayanan(loom, ref):
    rows = json.load(open(os.path.join(ref, "runs_visible.json")))
    print("Narayanan et al. 2021 Table 1 (hardware TFLOP/s per GPU, A100 80GB)")
    print(f"{'model':>8} {'GPUs':>5} {'tp':>3} {'pp':>3} {'dp':>3} {'gbs':>5} "
          f"{'published':>9} {'loom':>7} {'error':>7}")
    errors = []
    for r in rows:
        m = r["model"]
        p = r["parallelism"]
        gpus = r["hardware"]["num_gpus"]
        name = "gpt-" + m["name"].split("(")[1].rstrip(")").lower()
        args = ["--model", name, "--cluster", "dgx-a100", "--nodes", str(gpus // 8),
                "--tp", str(p["tp"]), "--pp", str(p["pp"]), "--mbs", "1",
                "--gbs", str(r["batch"]["global_batch_size"]), "--seq", str(r["seq_len"]),
                "--recompute", "full", "--precision", "fp16", "--flash-attention", "off",
                "--schedule", "1f1b"]
        res, err = run_loom(loom, args)
        pub = r["measured"]["tflops_per_gpu"]
        if res is None:
            print(f"{name:>8} {gpus:>5} error: {err}")
            continue
        pred = res["hardware_tflops_per_gpu"]
        e = (pred - pub) / pub
        errors.append(abs(e))
        print(f"{name:>8} {gpus:>5} {p['tp']:>3} {p['pp']:>3} {p['dp']:>3} "
              f"{r['batch']['global_batch_size']:>5} {pub:>9.0f} {pred:>7.1f} {100*e:>+6.1f}%")
    if errors:
        print(f"MAPE {100*sum(errors)/len(errors):.1f}%  max |error| {100*max(errors):.1f}%  "
              f"rows {len(errors)}/{len(rows)}")
    return errors


def vtrain(loom, ref, quick):
    path = os.path.join(ref, "vtrain", "ground_truth_multi.csv")
    rows = list(csv.reader(open(path, encoding="utf-8-sig")))[1:]
    if quick:
        rows = rows[::6]
    tmp = tempfile.mkdtemp(prefix="loom_vtrain_")
    pred, meas, errors = [], [], []
    by_tp = {}
    print("\nvTrain multi-node A100 (iteration time, ms)")
    print(f"{'params':>6} {'GPUs':>5} {'gbs':>5} {'mbs':>4} {'h':>6} {'L':>4} {'tp':>3} {'dp':>3} "
          f"{'pp':>3} {'measured':>9} {'loom':>9} {'error':>7}")
    for row in rows:
        (params, gpus, gbs, mbs, hidden, heads, layers, seq, tp, dp, pp, ms) = row
        gpus, tp, dp, pp, layers = int(gpus), int(tp), int(dp), int(pp), int(layers)
        model = os.path.join(tmp, f"gpt-{hidden}-{heads}-{layers}.json")
        with open(model, "w") as f:
            json.dump({"name": f"gpt-{params}b", "layers": layers, "hidden": int(hidden),
                       "heads": int(heads), "ffn": 4 * int(hidden), "mlp": "gelu",
                       "norm": "layernorm", "vocab": 50257, "tied_embeddings": True,
                       "linear_bias": True, "max_position_embeddings": int(seq),
                       "dropout": True, "seq": int(seq)}, f)
        args = ["--model", model, "--cluster", VTRAIN_CLUSTER, "--nodes", str(max(1, gpus // 8)),
                "--tp", str(tp), "--pp", str(pp),
                "--dp", str(dp), "--mbs", mbs, "--gbs", gbs, "--seq", seq, "--recompute", "full",
                "--precision", "fp16", "--flash-attention", "off", "--schedule", "1f1b",
                "--dp-bucket-size", "1TB"]
        res, err = run_loom(loom, args)
        if res is None:
            print(f"{params:>6} {gpus:>5} error: {err}")
            continue
        p_ms = res["step_time_s"] * 1e3
        e = (p_ms - float(ms)) / float(ms)
        pred.append(p_ms)
        meas.append(float(ms))
        errors.append(abs(e))
        by_tp.setdefault((params, tp), []).append(e)
        print(f"{params:>6} {gpus:>5} {gbs:>5} {mbs:>4} {hidden:>6} {layers:>4} {tp:>3} {dp:>3} "
              f"{pp:>3} {float(ms):>9.1f} {p_ms:>9.1f} {100*e:>+6.1f}%")
    if errors:
        print(f"MAPE {100*sum(errors)/len(errors):.1f}%  Spearman rho {spearman(pred, meas):.3f}  "
              f"rows {len(errors)}/{len(rows)}")
        print("signed error by model and tp (mean, min, max):")
        for (params, tp), es in sorted(by_tp.items(), key=lambda kv: (float(kv[0][0]), kv[0][1])):
            print(f"  {params:>5}B tp {tp:>2}: {len(es):>3} rows  {100*sum(es)/len(es):+6.1f}%  "
                  f"{100*min(es):+6.1f}%  {100*max(es):+6.1f}%")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(ROOT, "build", "loom")))
    ap.add_argument("--reference", default=os.path.join(ROOT, "..", "shared", "reference"))
    ap.add_argument("--quick", action="store_true", help="every sixth vTrain row only")
    ap.add_argument("--only", choices=["narayanan", "vtrain"])
    a = ap.parse_args()
    if not os.path.isdir(a.reference):
        print(f"reference data not found at {a.reference}; pass --reference", file=sys.stderr)
        return 0
    if a.only != "vtrain":
        narayanan(a.loom, a.reference)
    if a.only != "narayanan":
        vtrain(a.loom, a.reference, a.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
