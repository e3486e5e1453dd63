#!/usr/bin/env python3
"""Scores `loom simulate` / `loom memory` against every published-run family in the
reference folder (bench-time only; loom never reads these files). Python 3 stdlib only.

Error convention: error = (loom - published) / published, on the quantity the source
printed (the "metric" column). For throughput metrics (TFLOP/s, tokens/s) a positive
bias means loom is optimistic; for step time and memory a positive bias means loom
predicts more. MAPE = mean |error|; Spearman rho between loom and published values.
floor = the least MAPE any model could reach: rows whose loom inputs are identical (the same configuration
measured in different containers) can get only one prediction, so each such group scores at
best the prediction that minimises its summed |error|. The Megatron-Bridge families are also
scored by part, dense and MoE rows apart; bench/validation_targets.json may hold a guard
for a part ("mbridge_h100/dense").

Families, metric mapping and the ONE global assumption per unstated setting:

sc21 -- Narayanan et al. 2021 (SC21) Table 1, A100-80GB, dgx-a100 (8x HDR200 rails).
  Metric: hardware TFLOP/s per GPU as the paper counts it (Eq. 3,
  96*B*s*l*h^2*(1 + s/6h + V/16lh), which includes the recompute forward), computed here
  from loom's step time. Assumed: full recompute (Eq. 3 assumes it), fp16, no flash
  attention (2021 Megatron), micro-batch 1, 1F1B, no DP overlap, no sequence parallel.
vtrain -- vTrain (Bang et al., MICRO 2024) 109 multi-node A100 runs. Metric: iteration
  time (ms). Its README's settings: 1F1B, full recompute, 8 GPUs/node, 800 Gb/s per
  node (bench/vtrain-a100.json), fp16, no flash attention, GPT-2 vocab 50257, GELU 4h
  GPT block, no gradient bucketing (one DP bucket).
megatron_h100 -- Megatron-LM README weak-scaling table (Megatron-Core r0.8.0), dgx-h100.
  Metric: model TFLOP/s per GPU under Megatron-Core r0.8's num_floating_point_operations
  (12*B*s*l*h^2*((1 + g/a + s/h) + f/h + V/(2lh)), no recompute term), computed from
  loom's step time. Model: GPT block (GELU, FFN 4h, LayerNorm, MHA, untied, vocab 131072,
  RoPE, no biases assumed) from the row's layers/hidden/heads. Stated: --overlap-grad-reduce
  --overlap-param-gather --tp-comm-overlap (the last needs sequence parallel, so --sp with
  tp>1; overlap-param-gather needs the distributed optimizer, so --zero 1). Assumed: BF16
  (the row's MFU matches the BF16 peak), micro-batch 1, no recompute (Megatron-Core
  default), 1F1B without interleaving (vp not stated), flash attention on, Megatron's
  unfused vocab-parallel cross-entropy (loom's default: --cross-entropy-loss-fusion is a
  store_true flag the row does not state).
nemo2407 -- NeMo 24.07 performance summary, dgx-h100; all 12 visible rows are FP8 (no
  BF16 rows in the data). Metric: tokens/s per GPU = gbs*seq / (loom step * GPUs).
  Assumed: --precision fp8 --fp8-recipe delayed (Transformer Engine 1.x's DelayedScaling,
  the recipe NeMo 24.07's fp8 configs ran: fp8_amax_history_len / fp8_amax_compute_algo),
  no recompute, distributed optimizer (--zero 1) with --overlap-grad-reduce
  --overlap-param-gather (NeMo's MegatronStrategy defaults), --cross-entropy fused (NeMo
  GPTConfig cross_entropy_loss_fusion = True; Megatron-Bridge rows too), --sp when tp>1, interleaved
  schedule with --vpp when the row's vp > 1 else 1F1B, flash attention on. Models not in
  loom's presets are bench/models/*.json (each cites its config).
mbridge_<gpu> -- Megatron-Bridge performance summaries 25.09-26.08, one family per GPU.
  Metric: tokens/s per GPU. H100 on dgx-h100, B200 on bench/clusters/dgx-b200.json,
  B300 on dgx-b300, GB200 / GB300 on a generated cluster whose NVLink domain is min(N, 64)
  GPUs (power-of-two jobs on NVL72 racks use 16 of 18 trays) with one NDR400 (GB200) or
  XDR800 (GB300, ConnectX-8) NIC per GPU. B300 / GB300 are scored, not targeted. Assumed, as NeMo
  2407: no recompute, --zero 1 + both DP overlaps, --sp with tp>1, interleaved with vp>1;
  FSDP column > 1 (or = 1 in 25.09, where it meant on) -> --zero 3; every FP8 recipe ->
  --precision fp8 with its --fp8-recipe: FP8-MX / MXFP8 -> mxfp8; FP8-CS, the 26.x "FP8"
  column and the 25.09 primary FP8 value -> tensorwise (the Bridge recipes' FP8_CS, current
  per-tensor scaling); the 25.09 parenthesised alternative -> mxfp8 on B200 / GB200 ("32x32
  MX") and blockwise on H100 ("128x128 weights / 1x128 activations"); NVFP4 -> --precision nvfp4;
  --scale-swizzle on for block-scaled rows (mxfp8, nvfp4) of the 25.x containers, released
  before Transformer Engine wrote GEMM-ready scales (pre_gemm_ready_scales)
  (Megatron-Bridge bf16_with_nvfp4_mixed: every linear in NVFP4, no BF16 layers; Nemotron 3
  Super's own recipe keeps layer 0, the last 14 and its MTP modules in bf16:
  nemotron_super_bf16_args); --grad-dtype bf16 (every perf config's set_*_common_configs
  sets grad_reduce_in_fp32 = False: bf16 main grads and reduce-scatters); EP carved out of DP
  (dp derived by loom); --etp 1 for DeepSeek-V3 and Qwen3 MoE (the recipes'
  expert_tensor_parallel_size=1: EP x ETP carved out of TP x DP x CP); when layers do not divide pp*vp, an even --pipeline-split with
  the remainder on the first stages; MoE dropless (capacity 1.0); DeepSeek-V3's MTP
  module on (the preset's mtp_layers 1: HF config num_nextn_predict_layers 1) except
  the 25.11 "w/o MTP" rows (--mtp off); DeepSeek-V3 with Megatron's selective recompute
  modules of the Bridge workload base configs (deepseek_recompute_modules), GPT-OSS-120B
  (the gpt-oss-120b preset) and Nemotron 3 Nano and Super (the nemotron-3-nano and
  nemotron-3-super presets: Mamba-2, attention and MoE layers; Super's LatentMoE and two MTP
  depths through one repeated module) with theirs (gpt_oss_recompute_modules, nemotron_nano_recompute_modules,
  nemotron_super_recompute_modules); SFT rows scored as
  pre-training steps of the same shape. Skipped: models
  whose architecture the reference does not give and loom lacks (Nemotron 3
  Ultra, Kimi K2, DeepSeek-V4), LoRA rows; layouts
  with EP x ETP not dividing TP x DP x CP or more pp x vp chunks than layers.
mcore_moe -- Megatron Core's MoE report (NVIDIA, arXiv 2603.07685, 2026): Table 11's tuned
  DeepSeek-V3 and Qwen3-235B-A22B runs on H100, GB200 and GB300 with Appendix B's
  configurations, kept in bench/megatron_core_moe_runs.json with every assumption it makes
  (pipeline layouts, the H100 DeepSeek-V3 run's PP 8); not in the reference folder, so
  scored for the report with a guard. Metric: tokens/s per GPU. The Megatron-Bridge flags
  above, --moe-token-dispatcher flex (DeepEP, HybridEP), the row's CUDA graph scopes
  (attn, moe_router, moe_preprocess), 1F1B all-to-all overlap and recompute modules.
torchtitan_mem -- torchtitan Llama-3-8B measured peak memory (H100 96GB 500 W,
  bench/clusters/h100-96gb-500w.json). Metric: loom's peak per-GPU memory (GiB) from
  `loom memory` less the CUDA context and NCCL's communicators (torchtitan logs the caching
  allocator's peak reserved bytes, which hold neither). FSDP -> --zero 3; torchtitan "selective" -> --recompute selective
  --selective-recompute op (its llama3 configs' selective_ac_option = "op"); "full" -> full;
  --cross-entropy eager (torchtitan's uncompiled F.cross_entropy on fp32 logits); Float8 linears -> --precision fp8; torch.compile not
  modelled; gbs not stated -> one micro-batch per rank.
torchtitan_tps -- torchtitan's published throughput of the same benchmark file (Tables 1-4:
  Llama 3.1 8B FSDP on 8 and 128 GPUs, 8B FSDP + CP, 70B FSDP + TP), kept in
  bench/torchtitan_throughput.json with its citation; not in the reference folder, so
  scored for the report with a guard. Metric: tokens/s per GPU. --framework torchtitan
  (its profile: FSDP2, FlashAttention-2, op-level selective recompute, eager loss, sequence
  parallel with TP), one micro-batch of the local batch, torch.compile -> --fusion compile,
  Float8 -> --precision fp8 --fp8-recipe tensorwise (torchao's dynamic per-tensor scaling),
  AsyncTP -> --tp-comm-overlap, on bench/clusters/h100-96gb-500w.json.

Track record (bench/track_record.py): --write-track-record FILE writes every scored row's
step-time or memory residual with the regime loom printed for it (strategies/bands/
track_record.json, compiled into loom's error bands); --band-coverage prints the bands'
leave-one-family-out coverage; --check also fails when the committed record is stale (a
residual more than 0.5 points off loom's).

Usage: bench/validate_runs.py [--loom build/loom] [--reference tests/validation/reference]
         [--only FAMILY ...] [--quick] [--verbose] [--json FILE|-]
         [--check --thresholds bench/validation_targets.json] [--jobs N]
         [--write-track-record FILE] [--band-coverage] [--track-record FILE]
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

import track_record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
VTRAIN_CLUSTER = os.path.join(BENCH, "vtrain-a100.json")
DGX_B200 = os.path.join(BENCH, "clusters", "dgx-b200.json")
H100_96GB = os.path.join(BENCH, "clusters", "h100-96gb-500w.json")
TORCHTITAN_TPS = os.path.join(BENCH, "torchtitan_throughput.json")
MCORE_MOE = os.path.join(BENCH, "megatron_core_moe_runs.json")
TRACK_RECORD = os.path.join(ROOT, "strategies", "bands", "track_record.json")
GIB = 2.0 ** 30

# Reference model name -> loom preset or bench/models file.
MODELS = {
    "Llama 3(.1) 8B": "llama3-8b", "Llama 3(.1) 70B": "llama3-70b",
    "Llama 3.1 405B": "llama3-405b", "Llama 2 7B": "llama2-7b", "Llama 2 13B": "llama2-13b",
    "Llama 2 70B": "llama2-70b", "GPT-3 175B": "gpt3-175b", "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "DeepSeek-V3 671B (37B active)": "deepseek-v3",
    "Qwen3-235B-A22B": "bench/models/qwen3-235b-a22b.json",
    "GPT-3 5B (NeMo)": "bench/models/gpt3-5b-nemo.json",
    "GPT-3 20B (NeMo)": "bench/models/gpt3-20b-nemo.json",
    "Nemotron-3 8B (assumed = NeMo \"Nemotron-8B\")": "bench/models/nemotron3-8b.json",
    "Nemotron-3 22B (assumed = NeMo \"Nemotron-22B\")": "bench/models/nemotron3-22b.json",
    "Nemotron-4 340B": "bench/models/nemotron4-340b.json",
    "GPT OSS 120B": "gpt-oss-120b",
    "Nemotron_3_Nano": "nemotron-3-nano",
    "Nemotron_3_Super": "nemotron-3-super",
}
MODEL_LAYERS = {"deepseek-v3": 61, "llama3-405b": 126, "llama3-70b": 80, "llama3-8b": 32,
                "qwen3-30b-a3b": 48, "gpt-oss-120b": 36, "nemotron-3-nano": 52,
                "nemotron-3-super": 88, MODELS["Qwen3-235B-A22B"]: 94}
UNEXPRESSIBLE_MODELS = {
    "Nemotron_3_Ultra": "Nemotron 3 Ultra: its layer pattern and shared-expert size are not in "
                        "the reference nor a published config found",
    "Nemotron_3_5_Lightning": "Nemotron 3.5: architecture not in the reference",
    "Kimi_K2": "Kimi K2: architecture not in the reference and no loom preset",
    "DeepSeekV4 Flash": "DeepSeek-V4: architecture not in the reference",
}


class Family:
    """One family's scored and skipped rows."""

    def __init__(self, key, title, metric):
        self.key, self.title, self.metric = key, title, metric
        self.rows = []      # (row id, published, loom)
        self.skipped = []   # (row id, reason)
        self.parts = {}     # row id -> part of the family it belongs to ("dense", "MoE")
        self.inputs = {}    # row id -> loom's arguments for it (rows with equal ones: floor_pct)
        self.regimes = {}   # row id -> the regime loom printed for it (results.bands.regime)

    def errors(self):
        return [(p - m) / m for (_, m, p) in self.rows]

    def floor_pct(self):
        """The least MAPE any model could reach: rows whose loom inputs are identical get one
        prediction, so each group of them scores at best the prediction that minimises its
        summed |p - m| / m (a weighted median of its measurements, found among them)."""
        groups = {}
        for rid, m, _ in self.rows:
            groups.setdefault(self.inputs.get(rid, rid), []).append(m)
        total = sum(min(sum(abs(p - m) / m for m in ms) for p in ms) for ms in groups.values())
        return 100 * total / len(self.rows)

    def part(self, name):
        """The family's rows of one part (Family.parts), scored and skipped, as a family of
        its own."""
        sub = Family(f"{self.key}/{name}", f"  {name}", self.metric)
        sub.rows = [r for r in self.rows if self.parts.get(r[0]) == name]
        sub.skipped = [s for s in self.skipped if self.parts.get(s[0]) == name]
        sub.inputs = self.inputs
        return sub

    def summary(self):
        e = self.errors()
        out = {"family": self.key, "title": self.title, "metric": self.metric,
               "scored": len(e), "skipped": len(self.skipped)}
        if e:
            out.update(mape_pct=100 * sum(abs(x) for x in e) / len(e),
                       max_abs_error_pct=100 * max(abs(x) for x in e),
                       bias_pct=100 * sum(e) / len(e),
                       spearman=spearman([r[2] for r in self.rows], [r[1] for r in self.rows]),
                       floor_pct=self.floor_pct())
        return out

    def summaries(self):
        """This family's summary, then one per part (dense, MoE) when its rows, scored or
        skipped, fall in two or more (a part whose every row failed still reports, so its guard
        fails)."""
        names = sorted(set(self.parts.values()), key=str.lower)
        if len(names) < 2:
            return [self.summary()]
        return [self.summary()] + [dict(self.part(n).summary(), part_of=self.key) for n in names]


def spearman(a, b):
    if len(a) < 2:
        return None

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
    return cov / (va * vb) if va and vb else None


def run_loom(loom, command, args):
    cmd = [loom, command, "--format", "json"] + args
    if command == "simulate":
        cmd += ["--network", "analytical"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
    return json.loads(out.stdout)["results"], None


def accounts_for_embedding_and_loss(model, layers, stages):
    """Whether the row's recipe counts the embedding and the loss as pipeline layers and that
    split exists: Megatron-Bridge sets account_for_embedding_in_pipeline_split and
    account_for_loss_in_pipeline_split for Llama 3.1 405B (recipes/llama/llama3.py
    llama31_405b_pretrain_config, "Pipeline split settings - required for 405B") and
    Qwen3-235B-A22B (recipes/qwen/qwen3_moe.py, "Pipeline split accounting"); Megatron-core
    then needs layers + 2 to divide over the pp x vpp chunks."""
    return (model in ACCOUNTING_MODELS and layers and stages > 1
            and (layers + 2) % stages == 0)


def pipeline_args(layers, pp, vp, model=None):
    """--pp/--vpp/--schedule, with the recipe's split: Megatron's embedding-and-loss
    accounting where the recipe sets it, else an even --pipeline-split when layers do not
    divide."""
    args = ["--pp", str(pp)]
    stages = pp * (vp if vp and vp > 1 else 1)
    if vp and vp > 1:
        args += ["--vpp", str(vp), "--schedule", "interleaved"]
    else:
        args += ["--schedule", "1f1b"]
    if accounts_for_embedding_and_loss(model, layers, stages):
        return args + ["--account-for-embedding-in-pipeline-split",
                       "--account-for-loss-in-pipeline-split"]
    if layers and stages > 1 and layers % stages:
        base, extra = divmod(layers, stages)
        split = [base + (1 if i < extra else 0) for i in range(stages)]
        args += ["--pipeline-split", ",".join(map(str, split))]
    return args


# MoE models whose Megatron-Bridge performance recipes set expert_tensor_parallel_size=1
# (scripts/performance configs: BASE_DEEPSEEK_V3_CONFIG, BASE_QWEN3_235B_A22B_CONFIG,
# BASE_QWEN3_30B_A3B_CONFIG = WorkloadBaseConfig(expert_tensor_parallel_size=1, ...)).
QWEN3_235B = MODELS["Qwen3-235B-A22B"]
# Mixture-of-experts models: the Megatron-Bridge families report their dense and MoE rows apart.
MOE_MODELS = {"deepseek-v3", "qwen3-30b-a3b", QWEN3_235B,
              "gpt-oss-120b", "nemotron-3-nano", "nemotron-3-super"}
# Models whose recipes set expert_tensor_parallel_size = 1: every MoE recipe scored.
ETP1_MODELS = MOE_MODELS
# Recipes that count the embedding and the loss as pipeline layers
# (accounts_for_embedding_and_loss).
ACCOUNTING_MODELS = {"llama3-405b", QWEN3_235B}


def recipe_gpu(gpu):
    """The GPU as the recipe files name it: the first word of the row's GPU ("B200",
    "H100-SXM5-80GB", "GB300")."""
    return gpu.split()[0]


def mx_label(precision, gpu):
    """Whether a summary's precision label is MXFP8 on `gpu`: MXFP8, FP8-MX, or the 25.09
    alternative granularity on B200 / GB200 ("32x32 MX"; on H100 that label is blockwise)."""
    if precision.startswith("FP8 alternative granularity"):
        return not gpu.startswith("H100")
    return precision in ("MXFP8", "FP8-MX")


def deepseek_recompute_modules(gpu, precision, p):
    """Megatron-Bridge DeepSeek-V3 recompute_modules (--recompute-granularity selective) per
    GPU and recipe: scripts/performance/configs/deepseek/deepseek_workload_base_configs.py
    (NVIDIA-NeMo/Megatron-Bridge@042641823051ce167c52b0ae289941a227c11535). An empty list
    means no recompute. Precision: BF16, MX (FP8-MX / MXFP8 / MX granularity), else FP8-CS."""
    prec = "bf16" if precision.startswith("BF16") else "mx" if mx_label(precision, gpu) else "cs"
    g = recipe_gpu(gpu)
    if g == "GB300":
        return {"bf16": ["moe_act"], "mx": [], "cs": ["mla_up_proj"]}[prec]
    if g == "GB200":
        return {"bf16": ["mla_up_proj"], "mx": ["mla_up_proj"], "cs": ["mlp"]}[prec]
    if g.startswith("B200") and prec == "mx" and p.get("pp") == 8:
        return ["mla_up_proj", "mlp"]  # DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 (pp 8, ep 32)
    if g.startswith("H100"):
        return ["mla_up_proj", "mlp"]
    return ["mla_up_proj"]  # B200, B300


def gpt_oss_recompute_modules(gpu):
    """Megatron-Bridge GPT-OSS-120B recompute_modules: layernorm and moe_act on H100, B200 and
    GB200, none on B300 and GB300 (which capture CUDA graphs instead; the validator passes no
    graph scope): scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py
    (a Megatron-Bridge fork at 67b8806b, the only revision of the file found)."""
    g = recipe_gpu(gpu)
    return [] if g in ("B300", "GB300") else ["layernorm", "moe_act"]


def nemotron_nano_recompute_modules(gpu, precision):
    """Megatron-Bridge Nemotron 3 Nano recompute_modules: on H100 moe and layernorm (BF16),
    plus core_attn and moe_act (FP8-CS); none on Blackwell (which capture CUDA graphs; the
    validator passes no graph scope): scripts/performance/configs/nemotronh/
    nemotron_3_workload_base_configs.py (NVIDIA-NeMo/Megatron-Bridge@06e8da4ede242ba8e8e60325b69baa1dec59aa30)."""
    if not recipe_gpu(gpu).startswith("H100"):
        return []
    if precision.startswith("BF16"):
        return ["moe", "layernorm"]
    return ["moe", "layernorm", "core_attn", "moe_act"]


def nemotron_super_bf16_args(precision):
    """What Nemotron 3 Super's recipes keep in bf16: the MTP modules
    (nemotron_3_super_pretrain_config: model.keep_mtp_spec_in_bf16 = True) and, in NVFP4, the
    first layer and the last 14 of the 88 (mixed_precision.py
    nemotron_3_super_bf16_with_nvfp4_mixed: first_last_layers_bf16 = True,
    num_layers_at_end_in_bf16 = 14, Megatron's default 1 at the start), as the perf recipes
    take them (perf_recipes/nemotronh/common.py _nemotron_3_super_nvfp4_precision;
    NVIDIA-NeMo/Megatron-Bridge). The recipe's per-module te_quant.cfg overrides were not
    found published and are not applied."""
    if precision.startswith("BF16"):
        return []  # nothing is quantised, nothing to keep
    mtp = ["--keep-mtp-in-bf16"]
    if "NVFP4" not in precision:
        return mtp
    return mtp + ["--first-last-layers-bf16", "--num-layers-at-end-in-bf16", "14"]


def nemotron_super_recompute_modules(gpu, precision):
    """Megatron-Bridge Nemotron 3 Super recompute_modules (the file of
    nemotron_nano_recompute_modules): GB200 moe_act, layernorm, core_attn and moe, B200
    moe_act, layernorm and core_attn, both except NVFP4 (the base config); none on GB300 and
    B300."""
    g = recipe_gpu(gpu)
    if "NVFP4" in precision:
        return []
    if g == "GB200":
        return ["moe_act", "layernorm", "core_attn", "moe"]
    if g.startswith("B200"):
        return ["moe_act", "layernorm", "core_attn"]
    return []


def moe_a2a_overlap(model, gpu, precision, p):
    """Whether the Megatron-Bridge performance recipe sets moe_a2a_overlap=True (Megatron
    --overlap-moe-expert-parallel-comm): scripts/performance/configs/deepseek/
    deepseek_workload_base_configs.py (NVIDIA-NeMo/Megatron-Bridge@042641823051ce167c52b0ae289941a227c11535):
    DeepSeek-V3 FP8_MX on GB300, GB200 and B300 (V1), and the B200 V2 MX / NVFP4 configs
    with pp 8 and ep 32; qwen3_workload_base_configs.py (@01b2977e518f0a58ec870daba2fb2c04d76a91b2):
    Qwen3-235B-A22B on H100 (BF16 and FP8_CS). Every other recipe leaves it off. Megatron
    pairs micro-batches only with pp 1 or virtual stages, so other layouts keep it off."""
    pp, vp = p.get("pp") or 1, p.get("vp") or 1
    if pp > 1 and vp <= 1:
        return False
    g = recipe_gpu(gpu)
    mx = mx_label(precision, gpu)
    if model == "deepseek-v3":
        if g in ("GB300", "GB200", "B300"):
            return mx
        return g.startswith("B200") and pp == 8 and (mx or "NVFP4" in precision)
    if model == QWEN3_235B:
        return g.startswith("H100")
    return False


def flex_dispatcher(model, gpu, precision, p):
    """Whether the Megatron-Bridge performance recipe sets moe_flex_dispatcher_backend
    (DeepEP or HybridEP, which loom costs alike; the performance layer's
    apply_flex_dispatcher_backend then sets moe_token_dispatcher_type="flex"): deepseek_workload_base_configs.py
    (@042641823051ce167c52b0ae289941a227c11535) on every GPU (hybridep; deepep for the B200
    V2 MX / NVFP4 configs); qwen3_workload_base_configs.py (@01b2977e518f0a58ec870daba2fb2c04d76a91b2)
    for Qwen3-30B-A3B on every GPU and Qwen3-235B-A22B on GB200 and GB300 (hybridep; alltoall
    on B200, B300 and H100); nemotron_3_workload_base_configs.py (@06e8da4ede242ba8e8e60325b69baa1dec59aa30)
    for Nemotron 3 Nano on every GPU (hybridep) and Super on GB300, GB200 and B200 (hybridep)
    and B300 (deepep), except the GB200 / B200 NVFP4 configs (the base one, without a
    backend); gpt_oss_workload_base_configs.py (@1e7adfa90b18d15594c049ed3ca3554096495594)
    sets none. As for moe_a2a_overlap, one recipe revision is applied to every container's
    rows. Only with ep > 1: Megatron refuses flex without an expert group."""
    if (p.get("ep") or 1) <= 1:
        return False
    g = recipe_gpu(gpu)
    if model in ("deepseek-v3", "qwen3-30b-a3b", "nemotron-3-nano"):
        return True
    if model == "nemotron-3-super":  # the base config (GB200 / B200 NVFP4) sets no backend
        return not ("NVFP4" in precision and (g == "GB200" or g.startswith("B200")))
    if model == QWEN3_235B:
        return g in ("GB200", "GB300")
    return False


def cpu_offload_layers(model, gpu, precision, p, fsdp_on):
    """Megatron-Bridge Llama-3-70B FSDP recipes' cpu_offloading_num_layers
    (scripts/performance/configs/llama/llama3_workload_base_configs.py,
    NVIDIA-NeMo/Megatron-Bridge@00919dcf1fe13c0acf65e131f244378f0a6cd2b5): GB200 FP8_CS 40 and
    BF16 20, GB300 FP8_CS 20 and BF16 30, B200 FP8_CS 5; Megatron-core offloads only at pp 1."""
    if model != "llama3-70b" or not fsdp_on or (p.get("pp") or 1) > 1:
        return 0
    g = recipe_gpu(gpu)
    bf16 = precision.startswith("BF16")
    if g == "GB200":
        return 20 if bf16 else 40
    if g == "GB300":
        return 30 if bf16 else 20
    if g.startswith("B200") and not bf16:
        return 5
    return 0


def with_recompute_modules(args, modules):
    """Replaces megatron_style_args' `--recompute none` with Megatron's selective modules."""
    if not modules:
        return args
    i = args.index("--recompute")
    return args[:i] + ["--recompute", "selective", "--selective-recompute", "attention",
                       "--recompute-modules", ",".join(modules)] + args[i + 2:]


def megatron_style_args(p, layers, model=None, fsdp=False):
    """Megatron-Core/NeMo defaults shared by the H100/Blackwell families (docstring). Under
    FSDP (--zero 3) the DP overlap switches are left out: FSDP's per-layer collectives always
    overlap, and loom rejects a switch that has no effect."""
    tp = p.get("tp") or 1
    args = ["--tp", str(tp), "--cp", str(p.get("cp") or 1), "--ep", str(p.get("ep") or 1),
            "--recompute", "none", "--flash-attention", "on"]
    if not fsdp:
        args += ["--overlap-grad-reduce", "--overlap-param-gather"]
    if model in ETP1_MODELS:
        args += ["--etp", "1"]
    if tp > 1:
        args.append("--sp")
    return args + pipeline_args(layers, p.get("pp") or 1, p.get("vp"), model)


# ---- families -------------------------------------------------------------------------

def sc21_jobs(ref, fam):
    rows = json.load(open(os.path.join(ref, "runs_visible.json")))
    jobs = []
    for r in rows:
        m, p, gpus = r["model"], r["parallelism"], r["hardware"]["num_gpus"]
        name = "gpt-" + m["name"].split("(")[1].rstrip(")").lower()
        B, s = r["batch"]["global_batch_size"], r["seq_len"]
        l, h, V = m["num_layers"], m["hidden_size"], m["vocab_size"]
        flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
        args = ["--model", name, "--cluster", "dgx-a100", "--nodes", str(gpus // 8),
                "--tp", str(p["tp"]), "--pp", str(p["pp"]), "--mbs", "1", "--gbs", str(B),
                "--seq", str(s), "--recompute", "full", "--precision", "fp16",
                "--flash-attention", "off", "--schedule", "1f1b"]
        jobs.append((fam, r["id"], "simulate", args, r["measured"]["tflops_per_gpu"],
                     lambda res, f=flops, g=gpus: f / res["step_time_s"] / g / 1e12))
    return jobs


def vtrain_jobs(ref, fam, quick, tmp):
    path = os.path.join(ref, "vtrain", "ground_truth_multi.csv")
    rows = list(csv.reader(open(path, encoding="utf-8-sig")))[1:]
    if quick:
        rows = rows[::6]
    jobs = []
    for i, row in enumerate(rows):
        (params, gpus, gbs, mbs, hidden, heads, layers, seq, tp, dp, pp, ms) = row
        model = os.path.join(tmp, f"gpt-{hidden}-{heads}-{layers}.json")
        with open(model, "w") as f:
            json.dump({"name": f"gpt-{params}b", "layers": int(layers), "hidden": int(hidden),
                       "heads": int(heads), "ffn": 4 * int(hidden), "mlp": "gelu",
                       "norm": "layernorm", "vocab": 50257, "tied_embeddings": True,
                       "linear_bias": True, "max_position_embeddings": int(seq),
                       "dropout": True, "seq": int(seq)}, f)
        args = ["--model", model, "--cluster", VTRAIN_CLUSTER,
                "--nodes", str(max(1, int(gpus) // 8)), "--tp", tp, "--pp", pp, "--dp", dp,
                "--mbs", mbs, "--gbs", gbs, "--seq", seq, "--recompute", "full",
                "--precision", "fp16", "--flash-attention", "off", "--schedule", "1f1b",
                "--dp-bucket-size", "1TB"]
        rid = f"vtrain_{i}_{params}B_{gpus}gpu_tp{tp}_dp{dp}_pp{pp}_mbs{mbs}"
        jobs.append((fam, rid, "simulate", args, float(ms),
                     lambda res: res["step_time_s"] * 1e3))
    return jobs


def megatron_flops(m, B, s):
    """Megatron-Core r0.8 num_floating_point_operations (GPT: FFN 4h, no GLU)."""
    l, h, a = m["num_layers"], m["hidden_size"], m["num_heads"]
    g = m.get("num_kv_heads") or a
    f = m.get("ffn_hidden_size") or 4 * h
    V = m["vocab_size"]
    return 12 * B * s * l * h * h * ((1 + g / a + s / h) + f / h + V / (2 * l * h))


def megatron_h100_jobs(runs, fam, tmp):
    jobs = []
    for r in runs:
        if not r["id"].startswith("megatron_readme_h100"):
            continue
        m, p, gpus = r["model"], r["parallelism"], r["hardware"]["num_gpus"]
        h = m["hidden_size"]
        model = os.path.join(tmp, f"megatron-{m['num_layers']}-{h}.json")
        with open(model, "w") as f:
            json.dump({"name": m["name"].replace(" ", "-").lower(), "layers": m["num_layers"],
                       "hidden": h, "heads": m["num_heads"], "ffn": 4 * h, "mlp": "gelu",
                       "norm": "layernorm", "vocab": m["vocab_size"], "seq": r["seq_len"]}, f)
        B, s = r["batch"]["global_batch_size"], r["seq_len"]
        args = ["--model", model, "--cluster", "dgx-h100", "--gpus", str(gpus),
                "--mbs", "1", "--gbs", str(B), "--seq", str(s), "--precision", "bf16",
                "--zero", "1"] + megatron_style_args(p, m["num_layers"])
        if (p.get("tp") or 1) > 1:
            args.append("--tp-comm-overlap")  # stated by the README
        flops = megatron_flops(m, B, s)
        jobs.append((fam, r["id"], "simulate", args, r["measured"]["tflops_per_gpu"],
                     lambda res, fl=flops, g=gpus: fl / res["step_time_s"] / g / 1e12))
    return jobs


def tokens_metric(B, s, gpus):
    return lambda res: B * s / res["step_time_s"] / gpus


def nemo2407_jobs(runs, fam):
    jobs = []
    for r in runs:
        if not r["id"].startswith("nemo2407_"):
            continue
        model = MODELS.get(r["model"]["name"])
        if model is None:
            fam.skipped.append((r["id"], f"model {r['model']['name']!r} not mapped"))
            continue
        p, gpus = r["parallelism"], r["hardware"]["num_gpus"]
        B, s = r["batch"]["global_batch_size"], r["seq_len"]
        args = ["--model", model, "--cluster", "dgx-h100", "--gpus", str(gpus),
                "--mbs", str(r["batch"]["micro_batch_size"]), "--gbs", str(B), "--seq", str(s),
                "--precision", "fp8", "--fp8-recipe", "delayed", "--zero", "1",
                "--cross-entropy", "fused"] + \
            megatron_style_args(p, r["model"]["num_layers"])
        jobs.append((fam, r["id"], "simulate", args, r["measured"]["tokens_per_sec_per_gpu"],
                     tokens_metric(B, s, gpus)))
    return jobs


def nvl72_cluster(tmp, gpus, gpu="gb200"):
    """GB200 / GB300 NVLink domain of min(gpus, 64) GPUs, one NIC per GPU: GB200 ConnectX-7
    NDR400 on PCIe Gen5, GB300 ConnectX-8 XDR800 on PCIe Gen6 (as the gb200-nvl72 /
    gb300-nvl72 presets)."""
    d = min(gpus, 64)
    nic_pcie, fabric, bw = ("pcie6", "ib-xdr", "800Gbps") if gpu == "gb300" else \
        ("pcie5", "ib-ndr", "400Gbps")
    path = os.path.join(tmp, f"{gpu}-domain{d}.json")
    if os.path.exists(path):
        return path
    v = [{"name": f"gpu{i}", "kind": "gpu"} for i in range(d)]
    v += [{"name": "nvswitch", "kind": "nvswitch", "in_switch_reduce": True}]
    v += [{"name": f"nic{i}", "kind": "nic"} for i in range(d)]
    v += [{"name": f"cpu{i}", "kind": "cpu"} for i in range((d + 1) // 2)]
    links = [{"a": f"gpu{i}", "b": "nvswitch", "type": "nvlink5", "lanes": 18} for i in range(d)]
    links += [{"a": f"gpu{i}", "b": f"cpu{i // 2}", "type": "nvlink-c2c"} for i in range(d)]
    links += [{"a": f"cpu{i // 2}", "b": f"nic{i}", "type": nic_pcie} for i in range(d)]
    with open(path, "w") as f:
        json.dump({"name": f"{gpu}-domain{d}", "gpu": gpu, "nodes": 1,
                   "node": {"vertices": v, "links": links},
                   "fabric": {"link": fabric, "bandwidth": bw}}, f)
    return path


def mbridge_fp8_recipe(r):
    """The --fp8-recipe of an FP8 Megatron-Bridge row (None for BF16 and NVFP4): the module
    docstring's mapping of the summaries' precision labels."""
    prec, gpu = r["precision"], r["hardware"]["gpu"]
    if prec.startswith("BF16") or "NVFP4" in prec:
        return None
    if mx_label(prec, gpu):
        return "mxfp8"
    # This label names both alternatives ("GB200/B200: 32x32 MX; H100: ... blockwise").
    if prec.startswith("FP8 alternative granularity"):
        return "blockwise"
    return "tensorwise"


def pre_gemm_ready_scales(r):
    """Whether the row's container predates Transformer Engine's GEMM-ready block scales
    (NVIDIA/TransformerEngine PR #2486, `with_gemm_swizzled_scales` / `optimize_for_gemm`,
    merged December 2025; fused quantise-and-swizzle kernels followed in 2026: PRs #2630,
    #3190, #3338): the 25.09 and 25.11 containers were released before it, so every
    block-scaled GEMM swizzled its operands' scales in kernels of their own. The 26.x
    containers are taken to have it (some paths fused only later in 2026)."""
    return r["framework"].split("(")[-1].startswith("25.")


def mbridge_skip_reason(r):
    gpu, prec = r["hardware"]["gpu"], r["precision"]
    name = r["model"]["name"]
    if name in UNEXPRESSIBLE_MODELS:
        return UNEXPRESSIBLE_MODELS[name]
    if name not in MODELS:
        return f"model {name!r} not in loom"
    if "LoRA" in (r.get("notes") or ""):
        return "LoRA fine-tuning (frozen base + adapters) not modelled"
    return None


def layout_skip_reason(p, gpus, layers, etp=None, model=None):
    """Layouts loom cannot express yet (checked here so the reason is stated)."""
    tp, pp, cp, ep = (p.get(k) or 1 for k in ("tp", "pp", "cp", "ep"))
    etp = etp or tp
    tp_dp_cp = gpus // pp
    if ep > 1 and tp_dp_cp % (ep * etp):
        return (f"EP {ep} x ETP {etp} does not divide TP x DP x CP {tp_dp_cp}")
    stages = pp * max(1, p.get("vp") or 1)
    if layers and stages > layers and not accounts_for_embedding_and_loss(model, layers, stages):
        return (f"pp x vp = {stages} chunks > {layers} layers, and the recipe does not count "
                "the embedding and the loss as pipeline layers")
    return None


def mbridge_family_key(gpu):
    return "mbridge_" + gpu.split()[0].split("-")[0].lower()


def mbridge_jobs(runs, families, tmp):
    jobs = []
    for r in runs:
        if not r["id"].startswith("mbridge_"):
            continue
        gpu = r["hardware"]["gpu"]
        key = mbridge_family_key(gpu)
        if key not in families:
            families[key] = Family(key, f"Megatron-Bridge {gpu.split()[0].split('-')[0]}", "tokens/s/GPU")
        fam = families[key]
        reason = mbridge_skip_reason(r)
        if reason:
            fam.skipped.append((r["id"], reason))
            continue
        p, gpus = r["parallelism"], r["hardware"]["num_gpus"]
        model = MODELS[r["model"]["name"]]
        fam.parts[r["id"]] = "MoE" if model in MOE_MODELS else "dense"
        layers = r["model"]["num_layers"] or MODEL_LAYERS.get(model)
        reason = layout_skip_reason(p, gpus, layers, 1 if model in ETP1_MODELS else None, model)
        if reason:
            fam.skipped.append((r["id"], reason))
            continue
        if gpu.startswith("H100"):
            cluster = "dgx-h100"
        elif gpu.startswith("B200"):
            cluster = DGX_B200
        elif gpu.startswith("B300"):
            cluster = "dgx-b300"
        elif gpu.startswith("GB300"):
            cluster = nvl72_cluster(tmp, gpus, "gb300")
        else:
            cluster = nvl72_cluster(tmp, gpus)
        fsdp = p.get("fsdp") or 0
        fsdp_on = fsdp > 1 or (fsdp == 1 and "25.09" in r["framework"])
        B, s = r["batch"]["global_batch_size"], r["seq_len"]
        prec = ("bf16" if r["precision"].startswith("BF16") else
                "nvfp4" if "NVFP4" in r["precision"] else "fp8")
        args = ["--model", model, "--cluster", cluster, "--gpus", str(gpus),
                "--mbs", str(r["batch"]["micro_batch_size"]), "--gbs", str(B), "--seq", str(s),
                "--precision", prec, "--zero", "3" if fsdp_on else "1",
                "--cross-entropy", "fused"] + \
            megatron_style_args(p, layers, model, fsdp_on)
        # Every Megatron-Bridge perf config reduces gradients in bf16 (its set_*_common_configs:
        # mixed_precision.grad_reduce_in_fp32 = False, ddp.grad_reduce_in_fp32 = False; the
        # library default, bf16_mixed(), is True): bf16 main grads and reduce-scatters.
        args += ["--grad-dtype", "bf16"]
        recipe = mbridge_fp8_recipe(r)
        if recipe:
            args += ["--fp8-recipe", recipe]
        if pre_gemm_ready_scales(r) and (prec == "nvfp4" or recipe == "mxfp8"):
            args += ["--scale-swizzle", "on"]
        if model == "deepseek-v3":
            args = with_recompute_modules(
                args, deepseek_recompute_modules(gpu, r["precision"], p))
        if model == "gpt-oss-120b":
            args = with_recompute_modules(args, gpt_oss_recompute_modules(gpu))
        if model == "nemotron-3-nano":
            args = with_recompute_modules(args, nemotron_nano_recompute_modules(gpu, r["precision"]))
        if model == "nemotron-3-super":
            args = with_recompute_modules(args, nemotron_super_recompute_modules(gpu, r["precision"]))
            args += nemotron_super_bf16_args(r["precision"])
        offload = cpu_offload_layers(model, gpu, r["precision"], p, fsdp_on)
        if offload:
            args += ["--cpu-offloading-num-layers", str(offload)]
        if moe_a2a_overlap(model, gpu, r["precision"], p):
            args.append("--overlap-moe-expert-parallel-comm")
        if flex_dispatcher(model, gpu, r["precision"], p):
            args += ["--moe-token-dispatcher", "flex"]
        if "w/o MTP" in (r["model"].get("benchmark_name") or ""):
            args += ["--mtp", "off"]  # 25.11 "DeepSeekV3 (w/o MTP)": mtp_num_layers None
        jobs.append((fam, r["id"], "simulate", args, r["measured"]["tokens_per_sec_per_gpu"],
                     tokens_metric(B, s, gpus)))
    return jobs


def allocator_reserved_bytes(res):
    """What PyTorch's caching allocator reserves at loom's peak: the peak stage's total less
    the CUDA context and NCCL's communicators, which live outside the allocator. torchtitan
    logs torch.cuda.memory_stats()'s reserved_bytes.all.peak (its DeviceMemoryMonitor), which
    holds neither; what must fit on the GPU (loom's peak_bytes) holds both. The pipeline's
    send/receive buffers are allocator memory, but these rows have pp 1."""
    return max(s["total_bytes"] - s["other"]["cuda_context_bytes"] -
               s["other"]["comm_buffer_bytes"] for s in res["per_stage"])


def torchtitan_jobs(mem_rows, fam):
    jobs = []
    for r in mem_rows:
        if r["model"] != "Llama 3(.1) 8B":
            fam.skipped.append((r["run_id"], f"model {r['model']!r}"))
            continue
        p = r["parallelism"]
        dp, cp = p.get("dp") or 1, p.get("cp") or 1
        mbs = r["batch"]["micro_batch_size"]
        gbs = r["batch"]["global_batch_size"] or mbs * dp
        args = ["--model", "llama3-8b", "--cluster", H100_96GB, "--gpus", str(r["num_gpus"]),
                "--dp", str(dp), "--cp", str(cp), "--zero", "3" if p.get("fsdp") else "0",
                "--mbs", str(mbs), "--gbs", str(gbs), "--seq", str(r["seq_len"]),
                "--recompute", r["recompute"], "--flash-attention", "on",
                # torchtitan's loss_fn is F.cross_entropy(pred.float(), labels), not compiled
                # (train.py, Dec 2024).
                "--cross-entropy", "eager",
                "--precision", "fp8" if "Float8" in r["precision"] else "bf16"]
        if r["recompute"] == "selective":
            args += ["--selective-recompute", "op"]  # its llama3 configs' selective_ac_option
        jobs.append((fam, r["run_id"], "memory", args, r["memory_gib_per_gpu"],
                     lambda res: allocator_reserved_bytes(res) / GIB))
    return jobs


def torchtitan_tps_jobs(fam):
    """torchtitan's published Llama 3.1 throughput (bench/torchtitan_throughput.json cites
    the tables): --framework torchtitan (FSDP2 over every DP rank, SDPA FlashAttention-2,
    op-level selective recompute, eager loss on fp32 logits, sequence parallel with TP),
    torch.compile -> --fusion compile, Float8 (torchao Float8Linear, dynamic per-tensor
    scaling) -> --precision fp8 --fp8-recipe tensorwise, AsyncTP -> --tp-comm-overlap."""
    jobs = []
    for r in json.load(open(TORCHTITAN_TPS))["rows"]:
        gbs = r["local_batch"] * r["dp"]
        args = ["--model", r["model"], "--cluster", H100_96GB, "--gpus", str(r["gpus"]),
                "--framework", "torchtitan", "--dp", str(r["dp"]), "--tp", str(r["tp"]),
                "--cp", str(r["cp"]), "--zero", "3", "--mbs", str(r["local_batch"]),
                "--gbs", str(gbs), "--seq", str(r["seq"]), "--recompute", r["recompute"]]
        if r["compile"]:
            args += ["--fusion", "compile"]
        if r["float8"]:
            args += ["--precision", "fp8", "--fp8-recipe", "tensorwise"]
        if r["async_tp"]:
            args.append("--tp-comm-overlap")
        jobs.append((fam, "torchtitan_" + r["id"], "simulate", args, r["tps"],
                     tokens_metric(gbs, r["seq"], r["gpus"])))
    return jobs


def mcore_moe_jobs(fam, tmp):
    """Megatron Core's MoE benchmarks (bench/megatron_core_moe_runs.json cites Table 11 and
    Appendix B of arXiv 2603.07685, and every assumption): the Megatron-Bridge families'
    common flags (megatron_style_args), the flex dispatcher (DeepEP, HybridEP), the row's CUDA
    graph scopes (attn, moe_router, moe_preprocess), its 1F1B all-to-all overlap, its
    recompute modules and its pipeline layout where stated (else the recipe's split). H100 on
    dgx-h100, GB200 / GB300 on nvl72_cluster."""
    jobs = []
    for r in json.load(open(MCORE_MOE))["rows"]:
        cluster = "dgx-h100" if r["system"] == "h100" else nvl72_cluster(tmp, r["gpus"], r["system"])
        model = QWEN3_235B if r["model"] == "qwen3-235b-a22b" else r["model"]
        p = {"tp": r["tp"], "pp": r["pp"], "cp": r["cp"], "ep": r["ep"], "vp": r["vpp"]}
        # A stated layout replaces the recipe's split: without the layer count
        # megatron_style_args adds none.
        layers = None if r["split"] else MODEL_LAYERS[model]
        args = ["--model", model, "--cluster", cluster, "--gpus", str(r["gpus"]),
                "--mbs", str(r["mbs"]), "--gbs", str(r["gbs"]), "--seq", str(r["seq"]),
                "--zero", "1", "--cross-entropy", "fused", "--grad-dtype", "bf16",
                "--moe-token-dispatcher", "flex"] + megatron_style_args(p, layers, model)
        if r["split"]:
            args += ["--pipeline-split", r["split"]]
        if r["precision"] == "bf16":
            args += ["--precision", "bf16"]
        else:
            args += ["--precision", "fp8", "--fp8-recipe", r["precision"]]
        args = with_recompute_modules(args, r["recompute"])
        if r["a2a_overlap"]:
            args.append("--overlap-moe-expert-parallel-comm")
        if r["graphs"]:
            args += ["--cuda-graphs", "on", "--cuda-graph-scope", "attn,moe_router,moe_preprocess"]
        jobs.append((fam, "mcore_moe_" + r["id"], "simulate", args, r["tps"],
                     tokens_metric(r["gbs"], r["seq"], r["gpus"])))
    return jobs


# ---- driver ---------------------------------------------------------------------------

FAMILY_ORDER = ["sc21", "vtrain", "megatron_h100", "nemo2407", "mbridge_h100", "mbridge_b200",
                "mbridge_gb200", "mbridge_b300", "mbridge_gb300", "mcore_moe", "torchtitan_mem",
                "torchtitan_tps"]


def collect_jobs(a, tmp):
    fams = {
        "sc21": Family("sc21", "SC21 Table 1 (A100)", "hw TFLOP/s/GPU"),
        "vtrain": Family("vtrain", "vTrain multi-node (A100)", "step ms"),
        "megatron_h100": Family("megatron_h100", "Megatron-LM README (H100)", "TFLOP/s/GPU"),
        "nemo2407": Family("nemo2407", "NeMo 24.07 (H100 FP8)", "tokens/s/GPU"),
        "mcore_moe": Family("mcore_moe", "MCore MoE (arXiv 2603.07685)", "tokens/s/GPU"),
        "torchtitan_mem": Family("torchtitan_mem", "torchtitan 8B memory (H100)", "peak GiB"),
        "torchtitan_tps": Family("torchtitan_tps", "torchtitan throughput (H100)",
                                 "tokens/s/GPU"),
    }
    hb = json.load(open(os.path.join(a.reference, "runs_hopper_blackwell.json")))
    jobs = sc21_jobs(a.reference, fams["sc21"])
    jobs += vtrain_jobs(a.reference, fams["vtrain"], a.quick, tmp)
    jobs += megatron_h100_jobs(hb["runs"], fams["megatron_h100"], tmp)
    jobs += nemo2407_jobs(hb["runs"], fams["nemo2407"])
    jobs += mbridge_jobs(hb["runs"], fams, tmp)
    jobs += mcore_moe_jobs(fams["mcore_moe"], tmp)
    jobs += torchtitan_jobs(hb["measured_memory"], fams["torchtitan_mem"])
    jobs += torchtitan_tps_jobs(fams["torchtitan_tps"])
    if a.only:
        jobs = [j for j in jobs if j[0].key in a.only]
        fams = {k: v for k, v in fams.items() if k in a.only}
    return fams, jobs


def run_jobs(loom, jobs, workers, verbose):
    def one(job):
        fam, rid, command, args, published, metric = job
        res, err = run_loom(loom, command, args)
        regime = (res or {}).get("bands", {}).get("regime")
        return job, (metric(res) if res is not None else None), err, regime

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        for job, pred, err, regime in ex.map(one, jobs):
            fam, rid, command, args, published, _ = job
            if pred is None:
                fam.skipped.append((rid, f"loom error: {err}"))
                continue
            fam.rows.append((rid, published, pred))
            fam.inputs[rid] = (command,) + tuple(args)
            if regime is not None:
                fam.regimes[rid] = regime
            if verbose:
                short = rid.replace("NeMo_Container_", "").replace("Pre_Training_Performance_", "")
                print(f"{fam.key:>14} {short[:70]:<70} {published:>10.1f} {pred:>10.1f} "
                      f"{100 * (pred - published) / published:+7.1f}%")


def fmt(v, spec, empty="-"):
    return empty if v is None else format(v, spec)


def print_table(summaries):
    print(f"{'family':<30} {'metric':<15} {'scored':>6} {'skipped':>7} {'MAPE':>7} "
          f"{'max|err|':>8} {'bias':>7} {'rho':>6} {'floor':>6}")
    for s in summaries:
        print(f"{s['title']:<30} {s['metric']:<15} {s['scored']:>6} {s['skipped']:>7} "
              f"{fmt(s.get('mape_pct'), '6.1f'):>6}% {fmt(s.get('max_abs_error_pct'), '7.1f'):>7}% "
              f"{fmt(s.get('bias_pct'), '+6.1f'):>6}% {fmt(s.get('spearman'), '6.3f'):>6} "
              f"{fmt(s.get('floor_pct'), '5.1f'):>5}%")


def check(summaries, thresholds):
    """Families over their limit. The limit is the family's target or, while the model does not
    reach it yet, its guard (the level reached so far: no later change may lose fit silently)."""
    targets, guards = thresholds.get("targets", {}), thresholds.get("guards", {})
    failed = []
    for s in summaries:
        target = targets.get(s["family"])
        limit = guards.get(s["family"], target)
        if limit is None:
            continue
        kind = "guard" if s["family"] in guards else "target"
        mape = s.get("mape_pct")
        if mape is None or mape > limit:
            failed.append(f"{s['family']}: MAPE {fmt(mape, '.1f')}% > {kind} {limit}%")
        elif kind == "guard" and target is not None and mape <= target:
            print(f"note {s['family']}: MAPE {mape:.1f}% meets target {target}%; drop its guard",
                  file=sys.stderr)
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(ROOT, "build", "loom")))
    # The repository's copy of the published runs (tests/validation/reference/README.md).
    ap.add_argument("--reference", default=os.path.join(ROOT, "tests", "validation", "reference"))
    ap.add_argument("--quick", action="store_true", help="every sixth vTrain row only")
    ap.add_argument("--only", nargs="+", metavar="FAMILY", help="families: " + ", ".join(FAMILY_ORDER))
    ap.add_argument("--verbose", action="store_true", help="print every scored row")
    ap.add_argument("--skipped", action="store_true", help="list every skipped row with its reason")
    ap.add_argument("--json", metavar="FILE", help="write the table as JSON (- = stdout)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a family misses its target")
    ap.add_argument("--thresholds", default=os.path.join(BENCH, "validation_targets.json"),
                    help="JSON: {\"targets\": {family: max MAPE %%}, \"guards\": {family: max MAPE %%}}")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--write-track-record", metavar="FILE",
                    help="write every scored row's residual and regime (loom's error bands)")
    ap.add_argument("--band-coverage", action="store_true",
                    help="print the bands' leave-one-family-out coverage")
    ap.add_argument("--track-record", default=TRACK_RECORD,
                    help="the committed track record --check compares with loom's residuals")
    a = ap.parse_args()
    if not os.path.isdir(a.reference):
        print(f"reference data not found at {a.reference}; pass --reference", file=sys.stderr)
        return 0 if not a.check else 2
    a.loom = os.path.abspath(a.loom)
    with tempfile.TemporaryDirectory(prefix="loom_validate_") as tmp:
        fams, jobs = collect_jobs(a, tmp)
        run_jobs(a.loom, jobs, a.jobs, a.verbose)
    order = [k for k in FAMILY_ORDER if k in fams] + sorted(k for k in fams if k not in FAMILY_ORDER)
    summaries = [s for k in order for s in fams[k].summaries()]
    if a.skipped:
        for k in order:
            for rid, why in fams[k].skipped:
                print(f"skipped {k}: {rid}: {why}")
    if a.json != "-":
        print_table(summaries)
    if a.json:
        doc = {"families": summaries,
               "skipped": {k: [{"id": i, "reason": w} for i, w in fams[k].skipped] for k in order}}
        if a.json == "-":
            json.dump(doc, sys.stdout, indent=1)
            print()
        else:
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)
    runs, unlabelled = track_record.records(fams, order)
    if unlabelled:
        print(f"note: {unlabelled} scored rows without loom's bands.regime (an older loom?) are "
              "left out of the track record", file=sys.stderr)
    if a.write_track_record:
        track_record.write(a.write_track_record, runs)
        print(f"wrote {len(runs)} runs to {a.write_track_record}", file=sys.stderr)
    if a.band_coverage:
        track_record.print_coverage(track_record.coverage_table(runs))
    if a.check:
        thresholds = json.load(open(a.thresholds))
        failed = check(summaries, thresholds)
        stale = track_record.check_fresh(a.track_record, runs, not a.only and not a.quick)
        if stale:
            failed.append(stale)
        for line in failed:
            print("FAIL " + line, file=sys.stderr)
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
