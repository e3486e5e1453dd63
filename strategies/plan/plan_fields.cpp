#include "strategies/plan/plan_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"

namespace loom::strategies {
namespace {

using models::TrainingPlan;
using FT = FieldType;

// Sizes that end up in an int: 2^30 keeps products of four of them inside int64.
constexpr std::int64_t INT_SIZE_MAX = std::int64_t{1} << 30;

PlanField row(std::string_view key, FieldType type, std::string_view flags, std::string_view doc,
              std::string_view fallback, int help_position, PlanValue (*get)(const TrainingPlan&)) {
  PlanField f{};
  f.key = key;
  f.type = type;
  f.flags = flags;
  f.doc = doc;
  f.fallback = fallback;
  f.help_position = help_position;
  f.get = get;
  return f;
}

PlanField size_row(std::string_view key, std::string_view flags, std::string_view doc,
                   std::string_view fallback, int help_position, std::int64_t max,
                   std::string_view megatron, PlanValue (*get)(const TrainingPlan&)) {
  PlanField f = row(key, FT::SIZE, flags, doc, fallback, help_position, get);
  f.max = max;
  f.megatron = megatron;
  return f;
}

PlanField choice_row(std::string_view key, std::string_view flags, std::string_view doc,
                     std::string_view fallback, int help_position,
                     const std::vector<std::string>& names, PlanValue (*get)(const TrainingPlan&)) {
  PlanField f = row(key, FT::CHOICE, flags, doc, fallback, help_position, get);
  f.names = &names;
  return f;
}

// Parallel sizes and batch arithmetic.
void add_size_rows(std::vector<PlanField>& t) {
  t.push_back(size_row("tp", "--tp,--tensor-model-parallel-size", "tensor-parallel size", "1", 0,
                       INT_SIZE_MAX, "--tensor-model-parallel-size",
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.tp}; }));
  t.push_back(size_row("pp", "--pp,--pipeline-model-parallel-size", "pipeline-parallel size", "1",
                       1, INT_SIZE_MAX, "--pipeline-model-parallel-size",
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.pp}; }));
  t.push_back(size_row("dp", "--dp,--data-parallel-size", "data-parallel size (default: derived)",
                       "GPUs / (tp x pp x cp)", 2, INT_SIZE_MAX, "",
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.dp}; }));
  t.push_back(size_row("cp", "--cp,--context-parallel-size", "context-parallel size", "1", 3,
                       INT_SIZE_MAX, "--context-parallel-size",
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.cp}; }));
  t.push_back(size_row("ep", "--ep,--expert-model-parallel-size", "expert-parallel size", "1", 4,
                       INT_SIZE_MAX, "--expert-model-parallel-size",
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.ep}; }));
  t.push_back(size_row("vpp", "--vpp,--virtual-pipeline-stages",
                       "virtual pipeline stages per rank (interleaved schedule)", "1", 5,
                       INT_SIZE_MAX, "--virtual-pipeline-model-parallel-size",
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.vpp}; }));
  // Batch arithmetic.
  t.push_back(size_row("mbs", "--mbs,--micro-batch-size", "micro-batch size, sequences", "1", 6,
                       INT_SIZE_MAX, "--micro-batch-size",
                       [](const TrainingPlan& p) -> PlanValue { return p.mbs; }));
  t.back().deepspeed = "/train_micro_batch_size_per_gpu";
  t.push_back(size_row("gbs", "--gbs,--global-batch-size", "global batch size, sequences",
                       "mbs x dp", 7, 0, "--global-batch-size",
                       [](const TrainingPlan& p) -> PlanValue { return p.global_batch(); }));
  t.back().deepspeed = "/train_batch_size";
  t.back().supersedes = "grad_accum";
  t.push_back(row("micro_batches", FT::DERIVED, "", "micro-batches per step (gbs / (mbs x dp))",
                  "derived", -1,
                  [](const TrainingPlan& p) -> PlanValue { return p.micro_batches(); }));
  t.push_back(size_row("seq", "--seq,--seq-length",
                       "sequence length, tokens; 8k = 8192 (default: the model's own)",
                       "the model's (model.seq: its training length)", 8, INT_SIZE_MAX,
                       "--seq-length", [](const TrainingPlan& p) -> PlanValue { return p.seq; }));
  t.back().binary_suffix = true;
}

// Memory and compute choices, then the input-only fields.
void add_choice_rows(std::vector<PlanField>& t) {
  PlanField zero = row("zero", FT::STAGE, "--zero", "ZeRO stage 0..3 (3 = FSDP)", "0", 9,
                       [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.zero}; });
  zero.min = 0;
  zero.max = 3;
  zero.deepspeed = "/zero_optimization/stage";
  t.push_back(zero);
  t.push_back(choice_row(
      "recompute", "--recompute", "activation recompute", "none", 10, models::recompute_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.recompute); }));
  // Recompute policy and loss as the frameworks name them (issue 9 memory; one block).
  t.push_back(choice_row(
      "selective_recompute", "--selective-recompute",
      "what selective recompute drops: attention (Megatron core) or op "
      "(torchtitan: every other matmul output kept)",
      "attention", 25, models::selective_recompute_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.selective_recompute); }));
  t.push_back(size_row(
      "recompute_every", "--recompute-every",
      "recompute only every k-th layer (torchtitan selective_ac_option k)", "1", 26, INT_SIZE_MAX,
      "", [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.recompute_every}; }));
  t.push_back(choice_row(
      "recompute_method", "--recompute-method",
      "full recompute: uniform (checkpoint every group of --recompute-num-layers layers) or "
      "block (only the first --recompute-num-layers layers of each model chunk re-run)",
      "uniform", 32, models::recompute_method_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.recompute_method); }));
  t.back().megatron = "--recompute-method";
  t.push_back(size_row(
      "recompute_num_layers", "--recompute-num-layers",
      "layers per checkpoint (uniform) or recomputed layers per model chunk (block)", "1", 33,
      INT_SIZE_MAX, "--recompute-num-layers",
      [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.recompute_num_layers}; }));
  t.push_back(size_row(
      "cpu_offloading_num_layers", "--cpu-offloading-num-layers",
      "copy the activations of the first N layers to host memory after their forward and back "
      "for their backward (Megatron --cpu-offloading; pp 1, no recompute)",
      "0", 34, INT_SIZE_MAX, "", [](const TrainingPlan& p) -> PlanValue {
        return std::int64_t{p.cpu_offloading_num_layers};
      }));
  t.back().min = 0;
  t.push_back(choice_row(
      "cross_entropy", "--cross-entropy",
      "loss kernel: unfused (Megatron's default vocab-parallel), fused (Megatron "
      "--cross-entropy-loss-fusion) or eager (torch on fp32 logits)",
      "unfused", 27, models::cross_entropy_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.cross_entropy); }));
  // Kernel fusion and launch (issue 9 non-GEMM kernels; one block).
  t.push_back(
      choice_row("fusion", "--fusion",
                 "fused memory-bound kernels: megatron (Transformer Engine / Megatron fusions), "
                 "compile (torch.compile) or none (PyTorch eager)",
                 "megatron", 28, models::fusion_names(),
                 [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.fusion); }));
  t.push_back(choice_row(
      "attention_kernel", "--attention-kernel",
      "fused attention kernel: vendor (cuDNN via Transformer Engine) or fa2 "
      "(FlashAttention-2, PyTorch SDPA)",
      "vendor", 30, models::attention_kernel_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.attention_kernel); }));
  t.push_back(row("cuda_graphs", FT::TOGGLE, "--cuda-graphs",
                  "replay each layer's kernels from CUDA graphs (Megatron --enable-cuda-graph): "
                  "on|off",
                  "off", 29, [](const TrainingPlan& p) -> PlanValue { return p.cuda_graphs; }));
  t.push_back(row("cuda_graph_scope", FT::NAME_LIST, "--cuda-graph-scope",
                  "what --cuda-graphs captures: full (whole layers) or Megatron's partial "
                  "scopes, comma list of attn, mlp, moe_router, moe_preprocess, mamba "
                  "(--cuda-graph-scope; the routed experts stay eager)",
                  "full", 85, [](const TrainingPlan& p) -> PlanValue {
                    return models::graph_scope_text(p.cuda_graph_scope);
                  }));
  t.back().names = &models::graph_module_names();
  t.push_back(row("fp8_weight_cache", FT::TOGGLE, "--fp8-weight-cache",
                  "cast FP8/NVFP4 weights once per step, reused by its other micro-batches "
                  "(Transformer Engine is_first_microbatch, set by Megatron): on|off",
                  "on (torchtitan, deepspeed: off)", 31,
                  [](const TrainingPlan& p) -> PlanValue { return p.fp8_weight_cache; }));
  t.push_back(choice_row(
      "fp8_recipe", "--fp8-recipe",
      "FP8 scaling of the linears: delayed (amax history), tensorwise (current per-tensor "
      "amax), blockwise (1x128 / 128x128 blocks), mxfp8 (1x32 blocks, Blackwell) or auto "
      "(the GPU's: delayed before Blackwell, mxfp8 on it)",
      "auto", 35, models::fp8_recipe_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::fp8_recipe_text(p.fp8_recipe); }));
  t.back().megatron = "--fp8-recipe";
  t.push_back(row("scale_swizzle", FT::TOGGLE, "--scale-swizzle",
                  "swizzle each block-scaled (mxfp8, nvfp4) GEMM operand's scales in a kernel of "
                  "its own before the GEMM (Transformer Engine before its GEMM-ready "
                  "quantisation, PR #2486, Dec 2025): on|off",
                  "off", 36, [](const TrainingPlan& p) -> PlanValue { return p.scale_swizzle; }));
  t.push_back(row("sp", FT::SWITCH, "--sp,--sequence-parallel", "sequence parallelism (with TP)",
                  "off (torchtitan: on with tp > 1)", 11,
                  [](const TrainingPlan& p) -> PlanValue { return p.sp; }));
  t.back().megatron = "--sequence-parallel";
  t.push_back(
      choice_row("schedule", "--schedule", "pipeline schedule", "1f1b (interleaved when vpp > 1)",
                 12, models::schedule_names(),
                 [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.schedule); }));
  t.push_back(choice_row(
      "precision", "--precision", "", "bf16", 13, models::precision_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.precision); }));
  t.push_back(choice_row(
      "optimizer", "--optimizer", "", "adam", 14, models::optimizer_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.optimizer); }));
  t.push_back(choice_row("grad_dtype", "--grad-dtype", "gradient accumulation dtype", "fp32", 15,
                         models::grad_dtype_names(), [](const TrainingPlan& p) -> PlanValue {
                           return models::to_string(p.grad_dtype);
                         }));
  t.push_back(row("overlap_grad_reduce", FT::SWITCH, "--overlap-grad-reduce",
                  "overlap the data-parallel gradient reduction with backward", "off", 16,
                  [](const TrainingPlan& p) -> PlanValue { return p.overlap_grad_reduce; }));
  t.back().megatron = "--overlap-grad-reduce";
  t.push_back(row("overlap_param_gather", FT::SWITCH, "--overlap-param-gather",
                  "overlap the ZeRO parameter all-gather with forward", "off", 17,
                  [](const TrainingPlan& p) -> PlanValue { return p.overlap_param_gather; }));
  t.back().megatron = "--overlap-param-gather";
  t.push_back(row("flash_attention", FT::TOGGLE, "--flash-attention",
                  "fused attention kernels: on|off", "on", 24,
                  [](const TrainingPlan& p) -> PlanValue { return p.flash_attention; }));
  t.push_back(
      row("dp_bucket_size", FT::BYTES, "--dp-bucket-size", "DDP bucket size, e.g. 160MB",
          "160MB (Megatron's 40M fp32 elements)", 18,
          [](const TrainingPlan& p) -> PlanValue { return bytes_text(p.dp_bucket_bytes); }));
  t.push_back(row("pipeline_split", FT::LAYER_LIST, "--pipeline-split",
                  "layers per pipeline stage, comma-separated, e.g. 20,20,20,20", "even split", 21,
                  [](const TrainingPlan& p) -> PlanValue { return p.pipeline_split; }));
  t.push_back(row(
      "cuda_context", FT::BYTES, "--cuda-context", "CUDA context per GPU, e.g. 0.5GiB", "0.5GiB",
      19, [](const TrainingPlan& p) -> PlanValue { return bytes_text(p.cuda_context_bytes); }));
  t.push_back(
      row("fragmentation_percent", FT::PERCENT, "--fragmentation",
          "extra reserve beyond the allocator model, percent of the rest", "0", 20,
          [](const TrainingPlan& p) -> PlanValue { return p.fragmentation_fraction * 100.0; }));
  t.push_back(row("gpus", FT::DERIVED, "", "GPUs the plan occupies (tp x pp x dp x cp)", "derived",
                  -1, [](const TrainingPlan& p) -> PlanValue { return p.gpus(); }));
  // Input-only fields: other ways to give gbs and vpp.
  t.push_back(size_row("grad_accum", "--grad-accum,--gradient-accumulation-steps",
                       "gradient accumulation steps (sets --gbs = mbs x dp x steps)", "-", 22, 0,
                       "", nullptr));
  t.back().deepspeed = "/gradient_accumulation_steps";
  t.back().supersedes = "gbs";
  t.push_back(size_row("layers_per_virtual_stage", "--num-layers-per-virtual-pipeline-stage",
                       "layers per model chunk (Megatron's way to give --vpp)", "-", 23,
                       INT_SIZE_MAX, "--num-layers-per-virtual-pipeline-stage", nullptr));
}

// Layers and modules kept in bf16 under fp8 / nvfp4 (NVFP4 recipes keep some; issue 9).
void add_bf16_layer_rows(std::vector<PlanField>& t) {
  t.push_back(row("first_last_layers_bf16", FT::SWITCH, "--first-last-layers-bf16",
                  "under fp8 / nvfp4, run the linears of the first and last layers in bf16 "
                  "(--num-layers-at-start-in-bf16, --num-layers-at-end-in-bf16; Megatron's flag)",
                  "off", 88,
                  [](const TrainingPlan& p) -> PlanValue { return p.first_last_layers_bf16; }));
  t.back().megatron = "--first-last-layers-bf16";
  t.push_back(size_row("num_layers_at_start_in_bf16", "--num-layers-at-start-in-bf16",
                       "layers at the start kept in bf16 by --first-last-layers-bf16", "1", 89,
                       INT_SIZE_MAX, "--num-layers-at-start-in-bf16",
                       [](const TrainingPlan& p) -> PlanValue {
                         return std::int64_t{p.num_layers_at_start_in_bf16};
                       }));
  t.back().min = 0;
  t.push_back(size_row("num_layers_at_end_in_bf16", "--num-layers-at-end-in-bf16",
                       "layers at the end kept in bf16 by --first-last-layers-bf16", "1", 90,
                       INT_SIZE_MAX, "--num-layers-at-end-in-bf16",
                       [](const TrainingPlan& p) -> PlanValue {
                         return std::int64_t{p.num_layers_at_end_in_bf16};
                       }));
  t.back().min = 0;
  t.push_back(row("keep_mtp_in_bf16", FT::SWITCH, "--keep-mtp-in-bf16",
                  "under fp8 / nvfp4, run the multi-token-prediction modules' linears in bf16 "
                  "(Megatron-Bridge keep_mtp_spec_in_bf16)",
                  "off", 91,
                  [](const TrainingPlan& p) -> PlanValue { return p.keep_mtp_in_bf16; }));
}

// Megatron's other way to give the split: the embedding and the loss counted as layers
// (input-only: they resolve to pipeline_split).
void add_pipeline_rows(std::vector<PlanField>& t) {
  struct Accounting {
    std::string_view key, flag, doc;
  };
  static constexpr Accounting rows[] = {
      {"account_for_embedding_in_pipeline_split", "--account-for-embedding-in-pipeline-split",
       "count the embedding as a layer of the first model chunk when splitting the layers "
       "evenly (sets --pipeline-split)"},
      {"account_for_loss_in_pipeline_split", "--account-for-loss-in-pipeline-split",
       "count the loss as a layer of the last model chunk when splitting the layers evenly "
       "(sets --pipeline-split)"}};
  int position = 86;
  for (const Accounting& a : rows) {
    t.push_back(row(a.key, FT::SWITCH, a.flag, a.doc, "off", position++, nullptr));
    t.back().megatron = a.flag;
    t.back().supersedes = "pipeline_split";
  }
}

// Communication-overlap choices (issue 9).
void add_overlap_rows(std::vector<PlanField>& t) {
  t.push_back(row("tp_comm_overlap", FT::SWITCH, "--tp-comm-overlap",
                  "overlap tensor-parallel collectives with their GEMMs (userbuffers, async TP)",
                  "off", 40, [](const TrainingPlan& p) -> PlanValue { return p.tp_comm_overlap; }));
  t.back().megatron = "--tp-comm-overlap";
  t.push_back(choice_row(
      "framework", "--framework",
      "framework whose defaults fill unset choices (zero, overlaps; docs/defaults.md)", "none", 41,
      models::framework_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.framework); }));
}

// The ZeRO-3 design and its granularity (issue 9; one block).
void add_fsdp_rows(std::vector<PlanField>& t) {
  t.push_back(choice_row(
      "fsdp_impl", "--fsdp-impl",
      "ZeRO-3 design: fsdp2 (per-block gathers) or deepspeed (prefetch-bucket gathers)",
      "fsdp2 (deepspeed under --framework deepspeed)", 60, models::fsdp_impl_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.fsdp_impl); }));
  t.push_back(row("reshard_after_forward", FT::TOGGLE, "--reshard-after-forward",
                  "FSDP2: free gathered blocks after forward, re-gather in backward: on|off",
                  "on (torchtitan: not the last block)", 61,
                  [](const TrainingPlan& p) -> PlanValue { return p.reshard_after_forward; }));
  t.push_back(size_row("stage3_prefetch_bucket_size", "--stage3-prefetch-bucket-size",
                       "DeepSpeed ZeRO-3 parameter prefetch bucket, elements", "50000000", 62,
                       INT_SIZE_MAX, "",
                       [](const TrainingPlan& p) -> PlanValue { return p.ds_prefetch_bucket; }));
  t.back().min = MIN_DP_BUCKET_BYTES / 2;  // 16-bit elements
  t.back().deepspeed = "/zero_optimization/stage3_prefetch_bucket_size";
  t.push_back(size_row("stage3_reduce_bucket_size", "--stage3-reduce-bucket-size",
                       "DeepSpeed ZeRO-3 gradient reduce-scatter bucket, elements", "500000000", 63,
                       INT_SIZE_MAX, "",
                       [](const TrainingPlan& p) -> PlanValue { return p.ds_reduce_bucket; }));
  t.back().min = MIN_DP_BUCKET_BYTES / 2;
  t.push_back(size_row("stage3_param_persistence_threshold", "--stage3-param-persistence-threshold",
                       "DeepSpeed ZeRO-3: parameter tensors below this many elements stay whole "
                       "on every rank, never gathered",
                       "100000", 64, INT_SIZE_MAX, "", [](const TrainingPlan& p) -> PlanValue {
                         return p.ds_persistence_threshold;
                       }));
  t.back().min = 0;
  t.back().deepspeed = "/zero_optimization/stage3_param_persistence_threshold";
  // Written only where DeepSpeed's ZeRO-3 reads it (plans from before it keep their JSON).
  t.back().applies = [](const TrainingPlan& p) {
    return p.zero >= 3 && p.fsdp_impl == models::FsdpImpl::DEEPSPEED;
  };
}

// DeepSpeed's optimizer and parameter offload (ZeRO-Offload, ZeRO-Infinity on the CPU),
// written only for plans that offload (the others' JSON and CSV columns stay as they were).
void add_offload_rows(std::vector<PlanField>& t) {
  t.push_back(choice_row(
      "offload_optimizer", "--offload-optimizer",
      "DeepSpeed ZeRO-Offload (zero 1+): fp32 master weights, optimizer states and gradient "
      "partition in host memory, the optimizer step on the CPU, gradients and parameters over "
      "PCIe",
      "none", 65, models::offload_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.offload_optimizer); }));
  t.back().applies = [](const TrainingPlan& p) {
    return p.offload_optimizer != models::Offload::NONE;
  };
  t.push_back(choice_row(
      "offload_param", "--offload-param",
      "DeepSpeed ZeRO-Infinity parameter offload (zero 3): the 16-bit parameter partition in "
      "host memory, copied to the GPU before each all-gather",
      "none", 66, models::offload_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.offload_param); }));
  t.back().applies = [](const TrainingPlan& p) { return p.offload_param != models::Offload::NONE; };
  t.push_back(row("offload_pin_memory", FT::TOGGLE, "--offload-pin-memory",
                  "offloaded host buffers page-locked (DeepSpeed pin_memory); off: pageable, "
                  "each copy staged by a host memcpy: on|off",
                  "off", 67,
                  [](const TrainingPlan& p) -> PlanValue { return p.offload_pin_memory; }));
  t.back().applies = [](const TrainingPlan& p) {
    return p.offload_optimizer != models::Offload::NONE || p.offload_param != models::Offload::NONE;
  };
}

// Mixture-of-experts layout, model options and module recompute (issue 9 MoE mapping; one
// block).
void add_moe_rows(std::vector<PlanField>& t) {
  t.push_back(
      size_row("etp", "--etp,--expert-tensor-parallel-size",
               "expert tensor-parallel size: 1 or tp (etp x ep carved out of tp x dp x cp)", "tp",
               70, INT_SIZE_MAX, "--expert-tensor-parallel-size",
               [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.expert_tp()}; }));
  t.push_back(row("mtp", FT::TOGGLE, "--mtp",
                  "multi-token-prediction modules of models that have them (DeepSeek-V3): on|off",
                  "on", 71, [](const TrainingPlan& p) -> PlanValue { return p.mtp; }));
  t.push_back(row("recompute_modules", FT::NAME_LIST, "--recompute-modules",
                  "what selective recompute (attention) re-runs, comma list of core_attn, "
                  "mla_up_proj, mlp, moe_act, moe, layernorm (Megatron --recompute-modules)",
                  "core_attn", 72, [](const TrainingPlan& p) -> PlanValue {
                    return models::recompute_modules_text(p.recompute_modules);
                  }));
  t.back().names = &models::recompute_module_names();
  t.push_back(
      row("overlap_moe_expert_parallel_comm", FT::SWITCH, "--overlap-moe-expert-parallel-comm",
          "hide each micro-batch's EP all-to-alls behind another's compute (Megatron "
          "combined 1F1B; needs ep 2+ and pp 1 or an interleaved schedule)",
          "off", 73,
          [](const TrainingPlan& p) -> PlanValue { return p.overlap_moe_expert_parallel_comm; }));
  t.back().megatron = "--overlap-moe-expert-parallel-comm";
  t.push_back(choice_row(
      "moe_token_dispatcher", "--moe-token-dispatcher",
      "how routed tokens reach the experts (Megatron --moe-token-dispatcher-type): alltoall "
      "(NCCL, every routed copy) or flex (DeepEP / HybridEP: a token once per destination "
      "GPU, once per destination node across nodes)",
      "alltoall", 74, models::moe_dispatcher_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.moe_dispatcher); }));
  t.back().megatron = "--moe-token-dispatcher-type";
  t.push_back(choice_row(
      "cp_comm_type", "--cp-comm-type",
      "how context parallelism exchanges keys and values (Transformer Engine / Megatron "
      "--cp-comm-type): p2p (ring of K/V chunks beside the attention blocks), a2a (all-to-all "
      "of heads, DeepSpeed Ulysses; heads divisible by tp x cp), allgather (K/V gathered "
      "once: Llama 3, PyTorch context_parallel) or a2a+p2p (all-to-all inside a node's "
      "share of the CP group, ring across); default the framework's",
      "p2p", 75, models::cp_comm_type_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.cp_comm_type); }));
  t.back().megatron = "--cp-comm-type";
}

// Data-parallel designs beyond DDP (issue 13; one block).
void add_dp_mode_rows(std::vector<PlanField>& t) {
  t.push_back(choice_row(
      "dp_mode", "--dp-mode",
      "data-parallel design: ddp (collectives; ZeRO builds on it), dataparallel "
      "(torch.nn.DataParallel: one process drives one node's GPUs), ps (parameter server)",
      "ddp", 80, models::dp_mode_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.dp_mode); }));
  t.push_back(size_row(
      "ps_servers", "--ps-servers", "parameter servers (--dp-mode ps)", "1", 81, INT_SIZE_MAX, "",
      [](const TrainingPlan& p) -> PlanValue { return std::int64_t{p.ps_servers}; }));
  t.push_back(row("ps_update", FT::TEXT, "--ps-update",
                  "how servers apply pushes: sync, async, ssp:S (a worker at most S steps "
                  "ahead of the slowest) or geo:K (local steps, parameter deltas pushed every "
                  "K steps)",
                  "sync", 82, [](const TrainingPlan& p) -> PlanValue {
                    return models::ps_update_text(p.ps_update, p.ps_update_bound);
                  }));
  t.push_back(choice_row(
      "ps_shard", "--ps-shard",
      "parameters over servers: bytes (each tensor cut into equal ranges, one per server) or "
      "tensor (whole tensors round-robin)",
      "bytes", 83, models::ps_shard_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.ps_shard); }));
  t.push_back(choice_row(
      "ps_placement", "--ps-placement",
      "where servers run: host (CPU servers, --hosts) or gpu (on worker GPUs, one per node in "
      "turn)",
      "host", 84, models::ps_placement_names(),
      [](const TrainingPlan& p) -> PlanValue { return models::to_string(p.ps_placement); }));
  for (PlanField& f : t)
    if (is_ps_field(f.key))
      f.applies = [](const TrainingPlan& p) { return p.dp_mode == models::DpMode::PS; };
}

std::vector<PlanField> build_table() {
  std::vector<PlanField> t;
  add_size_rows(t);
  add_choice_rows(t);
  add_pipeline_rows(t);
  add_bf16_layer_rows(t);
  add_overlap_rows(t);
  add_fsdp_rows(t);
  add_offload_rows(t);
  add_moe_rows(t);
  add_dp_mode_rows(t);
  return t;
}

}  // namespace

bool is_ps_field(std::string_view key) {
  return key.substr(0, 3) == "ps_";
}

const std::vector<PlanField>& plan_fields() {
  static const std::vector<PlanField> table = build_table();
  return table;
}

const PlanField& plan_field(std::string_view key) {
  for (const PlanField& f : plan_fields())
    if (f.key == key) return f;
  throw InternalError(fmt::format("internal invariant broken: no plan field '{}'", key));
}

std::vector<const PlanField*> plan_flag_fields() {
  std::vector<const PlanField*> out;
  for (const PlanField& f : plan_fields())
    if (f.help_position >= 0) out.push_back(&f);
  std::sort(out.begin(), out.end(), [](const PlanField* a, const PlanField* b) {
    return a->help_position < b->help_position;
  });
  return out;
}

std::string_view canonical_flag(const PlanField& field) {
  return field.flags.substr(0, field.flags.find(','));
}

std::string help_text(const PlanField& field) {
  if (field.type != FieldType::CHOICE) return std::string(field.doc);
  const std::string names = join(*field.names, "|");
  return field.doc.empty() ? names : fmt::format("{}: {}", field.doc, names);
}

std::string bytes_text(double bytes) {
  // Compared as a double first: converting one beyond int64 ("160EB") is undefined.
  if (std::abs(bytes) < 0x1p53 && std::floor(bytes) == bytes)
    return std::to_string(static_cast<std::int64_t>(bytes)) + "B";
  return fmt::format("{}B", bytes);
}

}  // namespace loom::strategies
