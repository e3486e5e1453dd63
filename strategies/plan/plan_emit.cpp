#include "strategies/plan/plan_emit.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/strings.hpp"

namespace loom::strategies {
namespace {

using models::ModelSpec;
using models::TrainingPlan;

// Flags and what a framework cannot express, gathered as they are written.
struct Args {
  std::vector<std::string> words;
  std::vector<std::string> unexpressed;
  void flag(std::string_view f) { words.emplace_back(f); }
  template <typename T>
  void value(std::string_view f, const T& v) {
    words.emplace_back(f);
    words.push_back(fmt::format("{}", v));
  }
};

// The model's shape as Megatron-LM's flags (megatron_model reads them back).
void megatron_shape(const ModelSpec& m, std::int64_t seq, Args& a) {
  a.value("--num-layers", m.layers);
  a.value("--hidden-size", m.hidden);
  a.value("--num-attention-heads", m.heads);
  a.value("--num-query-groups", m.kv_heads);
  a.value("--kv-channels", m.head_dim);
  a.value("--ffn-hidden-size", m.ffn);
  if (m.mlp == models::MlpKind::SWIGLU) a.flag("--swiglu");
  if (m.mlp == models::MlpKind::RELU2) a.flag("--squared-relu");
  a.value("--normalization", m.norm == models::NormKind::RMSNORM ? "RMSNorm" : "LayerNorm");
  if (!m.tied_embeddings) a.flag("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) a.flag("--disable-bias-linear");
  if (m.qkv_bias && !m.linear_bias) a.flag("--add-qkv-bias");
  if (m.qk_norm) a.flag("--qk-layernorm");
  if (m.max_position_embeddings > 0) {
    a.value("--position-embedding-type", "learned_absolute");
    a.value("--max-position-embeddings", m.max_position_embeddings);
  } else {
    a.value("--position-embedding-type", m.rope ? "rope" : "none");
    a.value("--max-position-embeddings", std::max(seq, m.default_seq));
  }
  if (!m.dropout) {
    a.value("--attention-dropout", "0.0");
    a.value("--hidden-dropout", "0.0");
  }
  a.value("--vocab-size", m.vocab);
  if (m.is_moe()) {
    a.value("--num-experts", m.moe.experts);
    a.value("--moe-router-topk", m.moe.top_k);
    a.value("--moe-ffn-hidden-size", m.moe.expert_ffn);
    if (m.moe.shared_experts > 0)
      a.value("--moe-shared-expert-intermediate-size", m.moe.shared_experts * m.shared_ffn());
    a.flag("--moe-grouped-gemm");
    if (m.moe.first_k_dense > 0) a.unexpressed.push_back("moe.first_k_dense (--moe-layer-freq)");
  }
  if (m.attention == models::AttentionKind::MLA) a.unexpressed.push_back("MLA attention");
  if (!m.pattern.empty()) a.unexpressed.push_back("the hybrid layer pattern");
  if (m.sliding_window > 0) a.unexpressed.push_back("the sliding window");
  // Gemma's architecture has no Megatron-LM flags (Megatron-Bridge builds it in code:
  // gemma2_provider.py, gemma3_provider.py).
  if (m.mlp == models::MlpKind::GEGLU) a.unexpressed.push_back("the GeGLU MLP");
  if (m.sandwich_norms) a.unexpressed.push_back("the post-block norms");
  if (m.attn_logit_softcap > 0 || m.final_logit_softcap > 0)
    a.unexpressed.push_back("the logit soft-capping");
  if (m.scaled_embedding) a.unexpressed.push_back("the embedding scale");
  if (m.mtp_layers > 0) a.unexpressed.push_back("the MTP layers (--mtp-num-layers)");
}

// --pipeline-split as Megatron's uneven first/last stages, when the middle stages are even.
void megatron_split(const TrainingPlan& p, Args& a) {
  const auto& s = p.pipeline_split;
  if (s.empty()) return;
  const size_t n = s.size();
  for (size_t i = 2; i + 1 < n; ++i) {
    if (s[i] != s[1]) {
      a.unexpressed.push_back(fmt::format("the pipeline split {}", fmt::join(s, ",")));
      return;
    }
  }
  const int middle = n > 2 ? s[1] : -1;
  if (middle < 0 || s.front() != middle) a.value("--decoder-first-pipeline-num-layers", s.front());
  if (middle < 0 || s.back() != middle) a.value("--decoder-last-pipeline-num-layers", s.back());
}

void megatron_precision(const TrainingPlan& p, Args& a) {
  switch (p.precision) {
    case models::Precision::FP32:
      break;
    case models::Precision::FP16:
      a.flag("--fp16");
      break;
    case models::Precision::BF16:
      a.flag("--bf16");
      break;
    case models::Precision::FP8:
      a.flag("--bf16");
      a.value("--fp8-format", "hybrid");
      if (p.fp8_recipe) a.value("--fp8-recipe", loom::to_string(*p.fp8_recipe));
      if (p.first_last_layers_bf16) {
        a.flag("--first-last-layers-bf16");
        a.value("--num-layers-at-start-in-bf16", p.num_layers_at_start_in_bf16);
        a.value("--num-layers-at-end-in-bf16", p.num_layers_at_end_in_bf16);
      }
      break;
    case models::Precision::NVFP4:
      a.flag("--bf16");
      a.unexpressed.push_back("precision nvfp4");
      break;
  }
  if (p.grad_dtype == models::GradDtype::BF16) a.flag("--grad-reduce-in-bf16");
}

void megatron_parallel(const TrainingPlan& p, Args& a) {
  a.value("--tensor-model-parallel-size", p.tp);
  a.value("--pipeline-model-parallel-size", p.pp);
  if (p.vpp > 1) a.value("--num-virtual-stages-per-pipeline-rank", p.vpp);
  if (p.cp > 1) a.value("--context-parallel-size", p.cp);
  if (p.ep > 1) a.value("--expert-model-parallel-size", p.ep);
  if (p.etp > 0) a.value("--expert-tensor-parallel-size", p.etp);
  if (p.ep > 1) a.value("--moe-token-dispatcher-type", models::to_string(p.moe_dispatcher));
  if (p.sp) a.flag("--sequence-parallel");
  a.value("--micro-batch-size", p.mbs);
  a.value("--global-batch-size", p.global_batch());
  a.value("--seq-length", p.seq);
  megatron_split(p, a);
  if (p.schedule == models::Schedule::GPIPE || p.schedule == models::Schedule::ZERO_BUBBLE)
    a.unexpressed.push_back(fmt::format("the {} schedule", models::to_string(p.schedule)));
  switch (p.zero) {
    case 1:
      a.flag("--use-distributed-optimizer");
      break;
    case 2:
      a.flag("--use-megatron-fsdp");
      a.value("--data-parallel-sharding-strategy", "optim_grads");
      break;
    case 3:
      a.flag("--use-torch-fsdp2");
      break;
    default:
      break;
  }
}

void megatron_recompute(const TrainingPlan& p, Args& a) {
  if (p.recompute == models::Recompute::FULL) {
    a.value("--recompute-granularity", "full");
    a.value("--recompute-method", models::to_string(p.recompute_method));
    a.value("--recompute-num-layers", p.recompute_num_layers);
  } else if (p.recompute == models::Recompute::SELECTIVE) {
    a.value("--recompute-granularity", "selective");
  }
  if (p.cpu_offloading_num_layers > 0)
    a.value("--cpu-offloading-num-layers", p.cpu_offloading_num_layers);
}

void megatron_overlaps(const TrainingPlan& p, Args& a) {
  if (p.overlap_grad_reduce) a.flag("--overlap-grad-reduce");
  if (p.overlap_param_gather) a.flag("--overlap-param-gather");
  if (p.tp_comm_overlap) a.flag("--tp-comm-overlap");
  if (p.overlap_moe_expert_parallel_comm) a.flag("--overlap-moe-expert-parallel-comm");
  if (p.optimizer == models::Optimizer::SGD) a.unexpressed.push_back("sgd without momentum");
  if (p.offload_optimizer != models::Offload::NONE || p.offload_param != models::Offload::NONE)
    a.unexpressed.push_back("DeepSpeed's optimizer and parameter offload");
  a.value("--optimizer", p.optimizer == models::Optimizer::ADAM ? "adam" : "sgd");
  if (p.cross_entropy == models::CrossEntropy::FUSED) a.flag("--cross-entropy-loss-fusion");
  if (p.cuda_graphs) {
    a.value("--cuda-graph-impl", "local");
    if (!(p.cuda_graph_scope & models::graph_bit(models::GraphModule::FULL))) {
      a.flag("--cuda-graph-scope");
      const std::string scopes = models::graph_scope_text(p.cuda_graph_scope);
      for (size_t i = 0; i <= scopes.size();) {
        const size_t end = std::min(scopes.find(',', i), scopes.size());
        a.words.push_back(scopes.substr(i, end - i));
        i = end + 1;
      }
    }
  }
  // Megatron counts fp32 elements.
  a.value("--ddp-bucket-size", static_cast<std::int64_t>(p.dp_bucket_bytes / 4));
}

std::string comment_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "# " + l + "\n";
  return out;
}

}  // namespace

EmitFormat parse_emit_format(std::string_view name, std::string_view field) {
  if (name == "megatron") return EmitFormat::MEGATRON;
  if (name == "torchtitan") return EmitFormat::TORCHTITAN;
  if (name == "deepspeed") return EmitFormat::DEEPSPEED;
  throw ValidationError::bad_value(field, name, "megatron, torchtitan, deepspeed");
}

namespace {
Args megatron_args(const ModelSpec& model, const TrainingPlan& plan) {
  Args a;
  megatron_shape(model, plan.seq, a);
  megatron_parallel(plan, a);
  megatron_precision(plan, a);
  megatron_recompute(plan, a);
  megatron_overlaps(plan, a);
  return a;
}
}  // namespace

std::string megatron_flags_line(const ModelSpec& model, const TrainingPlan& plan) {
  return join(megatron_args(model, plan).words, " ");
}

std::string emit_megatron(const ModelSpec& model, const TrainingPlan& plan) {
  const Args a = megatron_args(model, plan);
  std::vector<std::string> head = {
      fmt::format("Megatron-LM: torchrun --nproc-per-node N --nnodes M pretrain_gpt.py <the "
                  "line below> (data, tokenizer, logging and checkpoint flags are yours); {} "
                  "GPUs, data-parallel size {} derived by Megatron from the world size",
                  plan.gpus(), plan.dp)};
  if (!a.unexpressed.empty())
    head.push_back("not expressed by these flags: " + join(a.unexpressed, "; "));
  return comment_lines(head) + join(a.words, " ") + "\n";
}

std::string deepspeed_config_json(const TrainingPlan& p) {
  nlohmann::ordered_json j;
  j["train_micro_batch_size_per_gpu"] = p.mbs;
  j["gradient_accumulation_steps"] = p.micro_batches();
  j["train_batch_size"] = p.global_batch();
  nlohmann::ordered_json z;
  z["stage"] = p.zero;
  if (p.zero < 3) {
    z["overlap_comm"] = p.overlap_grad_reduce;
    // DeepSpeed buckets hold 16-bit gradients.
    z["reduce_bucket_size"] = static_cast<std::int64_t>(p.dp_bucket_bytes / 2);
  } else {
    z["reduce_bucket_size"] = p.ds_reduce_bucket;
    z["stage3_prefetch_bucket_size"] = p.ds_prefetch_bucket;
    z["stage3_param_persistence_threshold"] = p.ds_persistence_threshold;
  }
  // DeepSpeed's offload sections (offload_config.py): the device and pin_memory.
  const auto offload = [&](models::Offload where) {
    return nlohmann::ordered_json{{"device", models::to_string(where)},
                                  {"pin_memory", p.offload_pin_memory}};
  };
  if (p.offload_optimizer != models::Offload::NONE)
    z["offload_optimizer"] = offload(p.offload_optimizer);
  if (p.offload_param != models::Offload::NONE) z["offload_param"] = offload(p.offload_param);
  j["zero_optimization"] = z;
  if (p.precision == models::Precision::BF16 || p.precision == models::Precision::FP8)
    j["bf16"] = {{"enabled", true}};
  if (p.precision == models::Precision::FP16) j["fp16"] = {{"enabled", true}};
  j["optimizer"] = {{"type", p.optimizer == models::Optimizer::ADAM ? "AdamW" : "SGD"}};
  if (p.recompute == models::Recompute::FULL)
    j["activation_checkpointing"] = {{"partition_activations", false}};
  return j.dump(2) + "\n";
}

std::string emit_deepspeed(const ModelSpec& model, const TrainingPlan& plan) {
  // Megatron-DeepSpeed takes the model and the model-parallel sizes as Megatron-LM flags; the
  // batch, ZeRO, precision and optimizer come from the config.
  Args a;
  megatron_shape(model, plan.seq, a);
  a.value("--tensor-model-parallel-size", plan.tp);
  a.value("--pipeline-model-parallel-size", plan.pp);
  if (plan.sp) a.flag("--sequence-parallel");
  a.value("--seq-length", plan.seq);
  if (plan.recompute == models::Recompute::SELECTIVE)
    a.value("--recompute-granularity", "selective");
  if (plan.precision == models::Precision::FP8) a.unexpressed.push_back("precision fp8");
  if (plan.cp > 1 || plan.ep > 1 || plan.vpp > 1)
    a.unexpressed.push_back("cp, ep and vpp (the DeepSpeed pipeline engine has none)");
  std::vector<std::string> head = {
      "Megatron-DeepSpeed pretrain_gpt.py arguments; add --deepspeed --deepspeed_config "
      "ds_config.json (the JSON above)"};
  if (!a.unexpressed.empty()) head.push_back("not expressed: " + join(a.unexpressed, "; "));
  return deepspeed_config_json(plan) + comment_lines(head) + join(a.words, " ") + "\n";
}

std::string emit_plan(EmitFormat format, const ModelSpec& model, const TrainingPlan& plan) {
  switch (format) {
    case EmitFormat::MEGATRON:
      return emit_megatron(model, plan);
    case EmitFormat::TORCHTITAN:
      return emit_torchtitan(model, plan);
    case EmitFormat::DEEPSPEED:
      return emit_deepspeed(model, plan);
  }
  throw InternalError("internal invariant broken: an EmitFormat without a writer");
}

}  // namespace loom::strategies
