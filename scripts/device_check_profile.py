#!/usr/bin/env python3
"""One loom calibration profile from what scripts/device-check measured.

    scripts/device_check_profile.py FOLDER [-o FOLDER/calibration.json]

Merges the harness's profiles (harness_gemm.json, harness_gemm_fp8.json, harness_memory.json,
harness_launch.json: each already a loom-calibration profile) and the SDPA sweep
(torch_attention.json, as the profile's `attention` rows) into one profile, which
`loom simulate --calibration` and `loom calibrate show` take as it is (docs/calibration.md,
"Measured on a real GPU"). The harness `device` and `harness` objects are the GEMM profile's.
Files that are missing are skipped with a note; none found is an error (exit 2). Standard
library only.
"""

import argparse
import json
import os
import sys

HARNESS = ["harness_gemm.json", "harness_gemm_fp8.json", "harness_memory.json",
           "harness_launch.json"]


def attention_rows(sweep):
    """torch_attention.json rows as profile `attention` rows: the kernel is the backend the
    sweep saw run (cuDNN's SDPA is the vendor's kernel, loom's "vendor"; PyTorch's flash and
    memory-efficient backends are FlashAttention-2's family, "fa2"; a sweep without the
    backend recorded is taken as "fa2"); the backward is the forward+backward time less the
    forward."""
    rows = []
    for r in sweep.get("rows", []):
        forward = r["forward"]["median_s"]
        both = r["forward_backward"]["median_s"]
        row = {"batch": r["batch"], "heads": r["heads"], "head_dim": r["head_dim"],
               "seq": r["seq"], "causal": bool(r.get("causal", True)),
               "kernel": "vendor" if r.get("backend") == "cudnn" else "fa2",
               "forward_us": forward * 1e6}
        if both > forward:
            row["backward_us"] = (both - forward) * 1e6
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("-o", "--output", help="the profile to write "
                        "(default: FOLDER/calibration.json)")
    args = parser.parse_args()
    out = {"format": "loom-calibration", "version": 1, "collectives": []}
    found = []
    for name in HARNESS:
        path = os.path.join(args.folder, name)
        if not os.path.exists(path):
            print(f"device_check_profile: {name} not found; skipped", file=sys.stderr)
            continue
        with open(path) as f:
            profile = json.load(f)
        if profile.get("format") != "loom-calibration":
            print(f"device_check_profile: {path}: not a loom-calibration profile", file=sys.stderr)
            return 2
        for key in ("harness", "device"):
            if key in profile and key not in out:
                out[key] = profile[key]
        for key in ("gemm", "memory", "launch", "collectives"):
            if profile.get(key):
                out.setdefault(key, []).extend(profile[key])
        found.append(name)
    attention = os.path.join(args.folder, "torch_attention.json")
    if os.path.exists(attention):
        with open(attention) as f:
            rows = attention_rows(json.load(f))
        if rows:
            out["attention"] = rows
            found.append("torch_attention.json")
    if not found:
        print(f"device_check_profile: {args.folder}: no harness profile or SDPA sweep in it",
              file=sys.stderr)
        return 2
    output = args.output or os.path.join(args.folder, "calibration.json")
    with open(output + ".tmp", "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    os.replace(output + ".tmp", output)
    print(f"device_check_profile: wrote {output} from {', '.join(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
