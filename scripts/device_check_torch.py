#!/usr/bin/env python3
"""The PyTorch half of scripts/device-check: what a GPU tells loom through PyTorch.

Run by scripts/device-check on a machine with one GPU, PyTorch and Hugging Face transformers
(nothing is downloaded: the model is built from a config with random weights). Writes, into
the folder given as the first argument:

  torch_step.json     measured training-step times of a Llama-shaped ~1.2B model (Llama 3.2
                      1B's config.json shape), eager and torch.compile, with peak memory
  torch_step_eager.pt.trace.json.gz   the Kineto trace of two eager steps (torch.profiler)
  torch_step_compile.pt.trace.json.gz the Kineto trace of two compiled steps
  torch_attention.json  scaled_dot_product_attention forward and forward+backward times over
                      Llama head layouts and sequence lengths (causal, bf16)
  torch_fp8_gemm.json torch._scaled_mm FP8 GEMMs over the shapes file (cuBLASLt through
                      PyTorch, as Transformer Engine-free FP8 training calls it)
  torch_ops.json      host time per eager PyTorch op (the launch overhead loom's host model
                      prices) and a few cuBLAS GEMMs through torch.matmul (a cross-check of
                      loom-harness gemm)

Each part runs on its own: one that fails writes {"error": ...} into its file and the rest
still run. `--dry-run` only checks the arguments and prints what would run.
"""

import argparse
import gzip
import json
import os
import platform
import statistics
import sys
import time
import traceback

# Llama 3.2 1B (meta-llama/Llama-3.2-1B config.json): 16 layers, hidden 2048, 32 heads, 8 KV
# heads, SwiGLU 8192, vocab 128256, tied embeddings, rope theta 500000.
MODEL = {
    "name": "llama3.2-1b-shape",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 128256,
    "tie_word_embeddings": True,
    "rope_theta": 500000.0,
    "max_position_embeddings": 8192,
}

# (sequence length, micro-batch, modes): 8192 tokens per step each.
STEPS = [  # torch.compile last: it takes the longest, and the eager runs are kept if it fails
    (4096, 2, ["eager"]),
    (2048, 4, ["eager"]),
    (4096, 2, ["compile"]),
]
WARMUP_STEPS = 3
TIMED_STEPS = 10


def write(folder, name, data):
    with open(os.path.join(folder, name), "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")


def guarded(folder, name, fn):
    """Runs fn() and writes what it returns, or the error, to folder/name."""
    started = time.time()
    try:
        data = fn()
    except Exception as e:  # one failing part must not stop the others
        data = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print(f"device_check_torch: {name}: {data['error']}", file=sys.stderr)
    data["wall_s"] = round(time.time() - started, 2)
    write(folder, name, data)
    print(f"device_check_torch: wrote {name} ({data['wall_s']} s)", flush=True)


def versions():
    import torch

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0),
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "memory_bytes": torch.cuda.get_device_properties(0).total_memory,
    }
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except Exception:
        out["transformers"] = None
    try:
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        out["nccl"] = None
    return out


def cuda_time(fn, warmup, iters, flush=None):
    """Seconds of fn() over iters runs, each between CUDA events (after warmup runs); with
    `flush` (a CUDA tensor), each run behind a write of it that evicts the L2 (and queues
    ahead of the launch, keeping launch latency out)."""
    import torch

    times = []
    for i in range(warmup + iters):
        if flush is not None:
            flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop) * 1e-3)
    return times


def summary(times):
    s = sorted(times)
    return {
        "median_s": statistics.median(s),
        "min_s": s[0],
        "max_s": s[-1],
        "samples": len(s),
    }


def build_model(torch):
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = {k: v for k, v in MODEL.items() if k != "name"}
    try:
        config = LlamaConfig(attn_implementation="sdpa", **fields)
    except TypeError:
        config = LlamaConfig(**fields)
        config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    return model


def train_step_times(folder):
    """Measured training steps: fp32 master weights, bf16 autocast, fused AdamW (as the
    Hugging Face Trainer runs with bf16=True and its default optimizer adamw_torch_fused)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.backends.cuda.matmul.allow_tf32 = True
    results = {"model": MODEL, "versions": versions(), "runs": []}
    model = build_model(torch)
    params = sum(p.numel() for p in model.parameters())
    results["parameters"] = params
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def make_step(module, batch, seq):
        g = torch.Generator(device="cuda").manual_seed(1)
        ids = torch.randint(0, MODEL["vocab_size"], (batch, seq), device="cuda", generator=g)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = module(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    for seq, batch, modes in STEPS:
        for mode in modes:
            run = {"seq": seq, "micro_batch": batch, "mode": mode}
            try:
                module = model
                compile_started = time.time()
                if mode == "compile":
                    module = torch.compile(model)
                step = make_step(module, batch, seq)
                step()  # first step: compiles under torch.compile
                torch.cuda.synchronize()
                run["first_step_s"] = round(time.time() - compile_started, 3)
                torch.cuda.reset_peak_memory_stats()
                walls = []
                for i in range(WARMUP_STEPS + TIMED_STEPS):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    step()
                    torch.cuda.synchronize()
                    if i >= WARMUP_STEPS:
                        walls.append(time.perf_counter() - t0)
                run["step"] = summary(walls)
                run["tokens_per_s"] = batch * seq / run["step"]["median_s"]
                run["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                run["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                if (seq, batch) == STEPS[0][:2]:
                    trace = os.path.join(folder, f"torch_step_{mode}.pt.trace.json")
                    # one cycle (repeat=1), exported when it ends: a later cycle would
                    # start empty and the profiler clears the events between cycles
                    with profile(
                        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                        on_trace_ready=lambda p: p.export_chrome_trace(trace),
                        record_shapes=True,
                    ) as prof:
                        for _ in range(3):
                            step()
                            torch.cuda.synchronize()  # each step's kernels inside its span
                            prof.step()
                    with open(trace, "rb") as f, gzip.open(trace + ".gz", "wb") as g:
                        g.write(f.read())
                    os.remove(trace)
                    run["trace"] = os.path.basename(trace) + ".gz"
            except Exception as e:
                run["error"] = f"{type(e).__name__}: {e}"
                print(f"device_check_torch: step {seq}x{batch} {mode}: {run['error']}",
                      file=sys.stderr)
            results["runs"].append(run)
            write(folder, "torch_step.json", results)  # kept should a later run be cut off
            print(f"device_check_torch: step {json.dumps(run)}", flush=True)
    return results


def attention_kernels(fn):
    """The names of the attention kernels one call of fn launches (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = set()
    for e in prof.events():
        n = e.name.lower()
        if any(w in n for w in ("sdpa", "flash", "fmha", "attention", "attn")):
            names.add(e.name[:160])
    return sorted(names)


def backend_of(kernels):
    """Which SDPA backend ran: cudnn (the vendor's), flash (FlashAttention-2) or efficient."""
    text = " ".join(kernels).lower()
    if "cudnn" in text:
        return "cudnn"
    if "flash" in text:
        return "flash"
    return "efficient" if text else "unknown"


def attention_sweep():
    """causal SDPA (bf16) forward and forward+backward over Llama head layouts at TP 1..8."""
    import torch
    import torch.nn.functional as F

    rows = []
    layouts = [  # (query heads, KV heads, head dim) per GPU
        (32, 8, 128), (16, 4, 128), (8, 2, 128), (4, 1, 128),  # Llama 3 8B at TP 1, 2, 4, 8
        (64, 8, 128), (8, 1, 128),  # Llama 3 70B at TP 1 and 8
        (32, 8, 64),  # Llama 3.2 1B
    ]
    for hq, hkv, d in layouts:
        for seq in (1024, 2048, 4096, 8192):
            batch = max(1, 8192 // seq)
            q = torch.randn(batch, hq, seq, d, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True)
            k = torch.randn(batch, hkv, seq, d, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True)
            v = torch.randn(batch, hkv, seq, d, device="cuda", dtype=torch.bfloat16,
                            requires_grad=True)
            grad = torch.randn(batch, hq, seq, d, device="cuda", dtype=torch.bfloat16)

            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

            def fwd_bwd():
                fwd().backward(grad)

            f = summary(cuda_time(fwd, 3, 10))
            fb = summary(cuda_time(fwd_bwd, 3, 10))
            kernels = attention_kernels(fwd_bwd)
            # causal: half the square of QK^T and PV, 4*b*h*s^2*d/2 forward
            flops = 2 * batch * hq * seq * seq * d
            rows.append({
                "batch": batch, "heads": hq, "kv_heads": hkv, "head_dim": d, "seq": seq,
                "causal": True,
                "backend": backend_of(kernels), "kernels": kernels,
                "forward": f, "forward_backward": fb,
                "forward_tflops": flops / f["median_s"] / 1e12,
                "forward_backward_tflops": 3.5 * flops / fb["median_s"] / 1e12,
            })
    return {"versions": versions(), "gqa": "enable_gqa=True (K and V keep their KV heads)",
            "flops_note": "causal: 2*b*h*s^2*d forward (half the "
            "square); forward+backward counted as 3.5x forward (FlashAttention-2's backward "
            "recomputes QK^T: 2.5x)", "rows": rows}


def op_costs():
    """Host seconds per eager PyTorch op, and torch.matmul GEMMs behind an L2 flush."""
    import torch

    out = {"versions": versions()}
    a = torch.ones(1024, device="cuda")
    b = torch.ones(1024, device="cuda")
    c = torch.empty(1024, device="cuda")
    host = {}
    for name, fn in [
        ("add_out", lambda: torch.add(a, b, out=c)),
        ("mul", lambda: a * b),
        ("linear_tiny", None),
    ]:
        if fn is None:
            x = torch.ones(8, 64, device="cuda", dtype=torch.bfloat16)
            w = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
            fn = lambda: torch.nn.functional.linear(x, w)  # noqa: E731
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(10):
            t0 = time.perf_counter()
            for _ in range(1000):
                fn()
            samples.append((time.perf_counter() - t0) / 1000)
            torch.cuda.synchronize()
        host[name] = summary(samples)
    out["eager_host_per_op"] = host

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    gemms = []
    for m, n, k in [(8192, 4096, 4096), (8192, 14336, 4096), (8192, 4096, 14336),
                    (8192, 8192, 8192), (4096, 2048, 2048), (4096, 8192, 2048),
                    (4096, 2048, 8192), (4096, 128256, 2048)]:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        s = summary(cuda_time(lambda: torch.nn.functional.linear(x, w), 3, 10, flush))
        gemms.append({"m": m, "n": n, "k": k, "dtype": "bf16", "time": s,
                      "tflops": 2 * m * n * k / s["median_s"] / 1e12})
    out["torch_linear_bf16"] = gemms
    del flush, x, w
    torch.cuda.empty_cache()
    # What a process can really hold: free memory after the CUDA context, and the bytes the
    # caching allocator obtains in 256 MiB blocks before running out (loom's capacity).
    free, total = torch.cuda.mem_get_info()
    blocks = []
    try:
        while True:
            blocks.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    out["memory"] = {"total_bytes": total, "free_bytes_after_context": free,
                     "allocatable_bytes_256mib_blocks": len(blocks) * (256 << 20)}
    del blocks
    torch.cuda.empty_cache()
    return out


def fp8_gemms(shapes_file):
    """torch._scaled_mm (cuBLASLt FP8: E4M3 inputs, per-tensor scales, BF16 out) over the
    shapes file, behind an L2 flush, with and without fast accumulation (Transformer Engine
    uses fast accumulation in the forward GEMM, not in the two backward GEMMs)."""
    import torch

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    one = torch.ones((), device="cuda", dtype=torch.float32)
    rows = []
    with open(shapes_file) as f:
        shapes = [tuple(int(x) for x in line.split()[:3]) for line in f
                  if line.strip() and not line.startswith("#")]
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
        for fast in (False, True):
            s = summary(cuda_time(
                lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16,
                                         use_fast_accum=fast), 2, 6, flush))
            rows.append({"m": m, "n": n, "k": k, "dtype": "fp8", "fast_accum": fast, "time": s,
                         "tflops": 2 * m * n * k / s["median_s"] / 1e12})
        del a, b
    return {"versions": versions(), "rows": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where the result files go")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--only", default="ops,attention,fp8,step",
                        help="comma-separated parts: ops, attention, fp8, step")
    parser.add_argument("--shapes", default=os.path.join(os.path.dirname(__file__),
                                                         "device_check_shapes.txt"),
                        help="the GEMM shapes file of the fp8 part")
    args = parser.parse_args()
    parts = args.only.split(",")
    for p in parts:
        if p not in ("ops", "attention", "fp8", "step"):
            parser.error(f"--only: unknown part {p!r} (ops, attention, fp8, step)")
    if args.dry_run:
        print(json.dumps({"parts": parts, "model": MODEL, "steps": STEPS,
                          "warmup_steps": WARMUP_STEPS, "timed_steps": TIMED_STEPS}))
        return 0
    os.makedirs(args.folder, exist_ok=True)
    if "ops" in parts:
        guarded(args.folder, "torch_ops.json", op_costs)
    if "attention" in parts:
        guarded(args.folder, "torch_attention.json", attention_sweep)
    if "fp8" in parts:
        guarded(args.folder, "torch_fp8_gemm.json", lambda: fp8_gemms(args.shapes))
    if "step" in parts:
        guarded(args.folder, "torch_step.json", lambda: train_step_times(args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
