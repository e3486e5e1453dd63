#include "strategies/plan/plan_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/strings.hpp"
#include "models/plan_dtypes.hpp"
#include "strategies/plan/plan_effects.hpp"
#include "topologies/cluster.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::strategies {
namespace {

using models::ModelSpec;
using models::TrainingPlan;

[[noreturn]] void fail_bad_value(const PlanSources& s, std::string_view key, std::string_view value,
                                 std::string_view allowed) {
  fail_field(s, key,
             fmt::format("{}: invalid value '{}'; allowed: {}", s.where(key), value, allowed));
}

void check_divides(const PlanSources& s, std::string_view key, std::int64_t divisor,
                   std::int64_t value, std::string_view what) {
  if (value % divisor == 0) return;
  fail_field(s, key,
             fmt::format("{}: {} does not divide {} {}; pick a {} that divides {}", s.where(key),
                         divisor, what, value, s.name(key), value));
}

// Rules on single fields and between fields, without the model.
void check_fields(const TrainingPlan& p, const PlanSources& s) {
  check_size("tp", p.tp, s);
  check_size("pp", p.pp, s);
  check_size("dp", p.dp, s);
  check_size("cp", p.cp, s);
  check_size("ep", p.ep, s);
  check_size("vpp", p.vpp, s);
  check_size("mbs", p.mbs, s);
  check_size("seq", p.seq, s);
  if (p.zero < 0 || p.zero > 3) fail_bad_value(s, "zero", std::to_string(p.zero), "0, 1, 2 or 3");
  // NaN fails these comparisons too: a NaN fraction used to print "nan B" totals.
  if (!(p.fragmentation_fraction >= 0 && p.fragmentation_fraction < 1)) {
    fail_bad_value(s, "fragmentation_percent", fmt::format("{}", p.fragmentation_fraction * 100),
                   "a percentage in [0, 100)");
  }
  if (!(p.cuda_context_bytes >= 0 && p.cuda_context_bytes < 1e15)) {
    fail_bad_value(s, "cuda_context", fmt::format("{} bytes", p.cuda_context_bytes),
                   "a size from 0B to 1PB, e.g. 512MiB");
  }
  if (p.precision == models::Precision::FP32 && p.grad_dtype == models::GradDtype::BF16) {
    fail_field(s, "grad_dtype",
               fmt::format("{}: bf16 gradients need a 16-bit {} (bf16, fp16 or fp8); with {} fp32 "
                           "drop {} or give fp32",
                           s.where("grad_dtype"), s.name("precision"), s.name("precision"),
                           s.name("grad_dtype")));
  }
}

// Tensor parallelism splits heads, the FFN and (for an MLP) the width.
void check_tensor_split(const ModelSpec& m, const TrainingPlan& p, const PlanSources& s) {
  if (m.kind == models::ModelKind::MLP) {
    check_divides(s, "tp", p.tp, m.hidden, "model.width");
    if (p.cp > 1 || p.ep > 1 || p.sp) {
      const char* key = p.cp > 1 ? "cp" : p.ep > 1 ? "ep" : "sp";
      fail_field(s, key,
                 fmt::format("{}, {} and {} need a transformer model; an MLP has no sequence or "
                             "experts",
                             s.name("cp"), s.name("ep"), s.name("sp")));
    }
    return;
  }
  if (m.has_attention()) {
    check_divides(s, "tp", p.tp, m.heads, "model.heads");
    if (m.attention == models::AttentionKind::MHA)
      check_divides(s, "tp", p.tp, m.kv_heads, "model.kv_heads");
  }
  if (m.has_mamba()) {
    // Megatron-core MambaMixer splits heads and B/C groups over TP (asserts both divide).
    check_divides(s, "tp", p.tp, m.mamba.heads, "model.mamba.heads");
    check_divides(s, "tp", p.tp, m.mamba.groups, "model.mamba.groups");
    if (p.cp > 1) {
      fail_field(s, "cp",
                 fmt::format("{}: context parallelism over Mamba-2 layers (Megatron-core "
                             "MambaContextParallel) is not modelled; use {} 1",
                             s.where("cp"), s.name("cp")));
    }
  }
  if (m.has_dense_layers()) check_divides(s, "tp", p.tp, m.ffn, "model.ffn");
  if (m.is_moe()) check_divides(s, "etp", p.expert_tp(), m.moe.expert_ffn, "model.moe.expert_ffn");
  // loom splits routed experts over the whole TP group or not at all (the recipes' etp 1):
  // an expert-TP group inside the TP group would need its own collective group.
  if (p.expert_tp() != 1 && p.expert_tp() != p.tp) {
    fail_field(s, "etp",
               fmt::format("{}: {} must be 1 or {} {} (loom models expert tensor parallelism "
                           "over the whole TP group or none)",
                           s.where("etp"), p.expert_tp(), s.name("tp"), p.tp));
  }
  // With etp < tp each TP rank routes its own sequence-parallel shard; Megatron-core requires
  // sequence parallelism for MoE with TP (arguments.py).
  if (m.is_moe() && p.expert_tp() < p.tp && !p.sp) {
    fail_field(s, "etp",
               fmt::format("{}: {} {} < {} {} needs {} (each TP rank routes its own "
                           "sequence shard)",
                           s.where("etp"), s.name("etp"), p.expert_tp(), s.name("tp"), p.tp,
                           s.name("sp")));
  }
}

}  // namespace

std::string cuda_graph_scope_text(const TrainingPlan& p, const PlanSources& s) {
  return fmt::format("{} {}", s.where("cuda_graph_scope"),
                     models::graph_scope_text(p.cuda_graph_scope));
}

void check_context_parallel_window(const ModelSpec& m, const TrainingPlan& p,
                                   const PlanSources& s) {
  // Ring attention's chunked causal steps (load-balanced chunks of s / 2cp) are modelled for
  // full causal attention only; a sliding window skips chunks the ring still exchanges.
  if (p.cp > 1 && m.has_window_below(p.seq)) {
    fail_field(s, "cp",
               fmt::format("{}: context parallelism over sliding-window attention ({} has a {}-"
                           "token window) is not modelled; use {} 1",
                           s.where("cp"), m.name, m.sliding_window, s.name("cp")));
  }
}

namespace {

// Pipeline stages, experts and the sequence split.
void check_model_split(const ModelSpec& m, const TrainingPlan& p, const PlanSources& s) {
  const int stages = p.pp * p.vpp;
  if (!p.pipeline_split.empty()) {
    check_pipeline_split(p, m.layers, s);
  } else if (m.layers % stages != 0) {
    fail_field(s, "pp",
               fmt::format("{}: {} x {} {} = {} stages do not divide model.layers {}; pick a "
                           "divisor or give {} with one count per stage",
                           s.where("pp"), p.pp, s.name("vpp"), p.vpp, stages, m.layers,
                           s.name("pipeline_split")));
  }
  if (p.ep > 1) {
    if (!m.is_moe()) {
      fail_field(s, "ep",
                 fmt::format("{}: {} needs a mixture-of-experts model; {} is dense, use {} 1",
                             s.where("ep"), p.ep, m.name, s.name("ep")));
    }
    check_divides(s, "ep", p.ep, m.moe.experts, "model.moe.experts");
    if (p.expert_tp() == p.tp) {
      check_divides(s, "ep", p.ep, std::int64_t{p.dp} * p.cp,
                    fmt::format("{} x {} =", s.name("dp"), s.name("cp")));
    } else {
      // Megatron-core parallel_state.py: the expert RankGenerator lays out etp x ep x edp x pp
      // over the world, so etp x ep must divide tp x dp x cp.
      check_divides(s, "ep", std::int64_t{p.ep} * p.expert_tp(), std::int64_t{p.tp} * p.dp * p.cp,
                    fmt::format("{} x {} x {} =", s.name("tp"), s.name("dp"), s.name("cp")));
    }
  }
  check_context_parallel_window(m, p, s);
  if (p.cp > 1 && p.seq % (2 * p.cp) != 0) {
    fail_field(s, "cp",
               fmt::format("{}: 2 x {} (load-balanced causal chunks) does not divide {} {}; pick a "
                           "sequence length divisible by {}",
                           s.where("cp"), p.cp, s.name("seq"), p.seq, 2 * p.cp));
  }
  if (p.sp && (p.seq / p.cp) % p.tp != 0) {
    fail_field(
        s, "sp",
        fmt::format("{}: {} {} does not divide the per-GPU sequence {} ({} / {}); pick "
                    "sizes that divide it",
                    s.where("sp"), s.name("tp"), p.tp, p.seq / p.cp, s.name("seq"), s.name("cp")));
  }
}

// Megatron's partial CUDA graphs need the modules they capture, and refuse to capture what
// a recompute or the EP overlap re-runs or splits (megatron/training/arguments.py and
// transformer_config.py: "moe cuda graph is only supported for MoE", "mlp cuda graph is only
// supported for dense layers", "moe_router cuda graph is not supported with moe recompute";
// the layernorm recompute checkpoints the norms the attn, mlp and moe_router graphs hold;
// the EP overlap's replay asserts the graph does not hold a whole MLP).
bool partial_scope(const TrainingPlan& p) {
  return p.cuda_graphs && !p.graphs(models::GraphModule::FULL);
}

void check_cuda_graph_scope(const ModelSpec& m, const TrainingPlan& p, const PlanSources& s) {
  check_cuda_graph_scope_model(m, p, s);
  if (!partial_scope(p)) return;
  const std::string scope = cuda_graph_scope_text(p, s);
  const bool selective = p.recompute == models::Recompute::SELECTIVE &&
                         p.selective_recompute == models::SelectiveRecompute::ATTENTION;
  const auto recomputes = [&](models::RecomputeModule r) {
    return selective && (p.recompute_modules & models::module_bit(r));
  };
  if (p.graphs(models::GraphModule::MOE_ROUTER) && recomputes(models::RecomputeModule::MOE)) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: Megatron does not capture moe_router with the moe recompute "
                           "module; drop moe_router or the moe module from {}",
                           scope, s.name("recompute_modules")));
  }
  if ((p.graphs(models::GraphModule::ATTN) || p.graphs(models::GraphModule::MLP) ||
       p.graphs(models::GraphModule::MOE_ROUTER)) &&
      recomputes(models::RecomputeModule::LAYERNORM)) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: the layernorm recompute module checkpoints the norms these "
                           "graphs hold; drop layernorm from {}",
                           scope, s.name("recompute_modules")));
  }
  if (p.graphs(models::GraphModule::MLP) && p.overlap_moe_expert_parallel_comm) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: Megatron's EP overlap cannot replay a graph holding a whole "
                           "MLP; drop mlp or {}",
                           scope, s.name("overlap_moe_expert_parallel_comm")));
  }
}

}  // namespace

// What the chosen framework itself refuses. DeepSpeed's pipeline engine asserts
// `zero_optimization_stage() < 2` ("ZeRO-2 and ZeRO-3 are incompatible with pipeline
// parallelism", deepspeed/runtime/pipe/engine.py PipelineEngine.__init__). Megatron-LM runs
// ZeRO-3 as --use-torch-fsdp2, which asserts pipeline_model_parallel_size == 1 and
// expert_model_parallel_size == 1 (megatron/training/arguments.py validate_args). NeMo,
// torchtitan (FSDP2 composes with its pipeline schedules) and loom's own defaults allow both.
// Megatron-LM's validate_args also asserts sequence parallelism under --tp-comm-overlap
// ("Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is
// enabled") and --overlap-grad-reduce under --overlap-param-gather ("--overlap-grad-reduce
// should be turned on when using --overlap-param-gather"); its flags are off unless given.
// ZeRO-2 stays: Megatron-core's own FSDP runs it (--use-megatron-fsdp
// --data-parallel-sharding-strategy optim_grads).
std::optional<FrameworkRule> broken_framework_rule(const TrainingPlan& p) {
  if (p.framework == models::Framework::DEEPSPEED && p.zero >= 2 && p.pp > 1)
    return FrameworkRule::DEEPSPEED_PIPELINE_ZERO;
  if (p.framework != models::Framework::MEGATRON) return std::nullopt;
  if (p.zero >= 3 && (p.pp > 1 || p.ep > 1)) return FrameworkRule::MEGATRON_FSDP_PARALLEL;
  if (p.tp_comm_overlap && !p.sp) return FrameworkRule::MEGATRON_TP_OVERLAP_SP;
  if (p.overlap_param_gather && !p.overlap_grad_reduce)
    return FrameworkRule::MEGATRON_GATHER_OVERLAP_REDUCE;
  return std::nullopt;
}

const char* field_of(FrameworkRule rule) {
  switch (rule) {
    case FrameworkRule::DEEPSPEED_PIPELINE_ZERO:
    case FrameworkRule::MEGATRON_FSDP_PARALLEL:
      return "zero";
    case FrameworkRule::MEGATRON_TP_OVERLAP_SP:
      return "tp_comm_overlap";
    case FrameworkRule::MEGATRON_GATHER_OVERLAP_REDUCE:
      return "overlap_param_gather";
  }
  return "framework";
}

SwitchRefusal refusal_of(FrameworkRule rule, const TrainingPlan& p, const PlanSources& s) {
  switch (rule) {
    case FrameworkRule::DEEPSPEED_PIPELINE_ZERO:
      return {field_of(rule),
              fmt::format("{} {} with {} {}: DeepSpeed's pipeline engine supports ZeRO stage 0 "
                          "or 1 only (deepspeed/runtime/pipe/engine.py); use {} 1, {} 1 or "
                          "another {}",
                          s.where("zero"), p.zero, s.name("pp"), p.pp, s.name("zero"), s.name("pp"),
                          s.name("framework"))};
    case FrameworkRule::MEGATRON_FSDP_PARALLEL: {
      const char* other = p.pp > 1 ? "pp" : "ep";
      return {field_of(rule),
              fmt::format("{} 3 with {} {}: Megatron-LM runs ZeRO-3 as --use-torch-fsdp2, which "
                          "requires pipeline and expert parallel size 1 "
                          "(megatron/training/arguments.py); use {} 1, {} 1 or another {}",
                          s.where("zero"), s.name(other), p.pp > 1 ? p.pp : p.ep, s.name("zero"),
                          s.name(other), s.name("framework"))};
    }
    case FrameworkRule::MEGATRON_TP_OVERLAP_SP:
      return {field_of(rule),
              fmt::format("{} without {}: Megatron-LM overlaps tensor-parallel communication "
                          "only with sequence parallelism (megatron/training/arguments.py "
                          "validate_args); add {} or drop {}",
                          s.where("tp_comm_overlap"), s.name("sp"), s.name("sp"),
                          s.name("tp_comm_overlap"))};
    case FrameworkRule::MEGATRON_GATHER_OVERLAP_REDUCE:
      return {field_of(rule),
              fmt::format("{} without {}: Megatron-LM asserts the gradient-reduce overlap with "
                          "the parameter-gather overlap (megatron/training/arguments.py "
                          "validate_args); add {} or drop {}",
                          s.where("overlap_param_gather"), s.name("overlap_grad_reduce"),
                          s.name("overlap_grad_reduce"), s.name("overlap_param_gather"))};
  }
  return {"framework", ""};
}

std::optional<SwitchRefusal> framework_switch_refusal(const TrainingPlan& p, const PlanSources& s) {
  const auto rule = broken_framework_rule(p);
  if (!rule) return std::nullopt;
  return refusal_of(*rule, p, s);
}

namespace {

// What the chosen framework itself refuses (framework_switch_refusal).
void check_framework(const TrainingPlan& p, const PlanSources& s) {
  if (const auto refusal = framework_switch_refusal(p, s))
    fail_field(s, refusal->field, refusal->message);
}

// Megatron-LM's interleaved schedule needs a pipeline (arguments.py: virtual pipeline
// stages need pipeline-model-parallel size > 1) and runs the micro-batches in groups of pp.
void check_interleaved_batches(const TrainingPlan& p, const PlanSources& s) {
  if (p.schedule != models::Schedule::INTERLEAVED) return;
  if (p.pp < 2) {
    fail_field(s, "pp",
               fmt::format("{}: the interleaved schedule needs {} 2 or more (its virtual stages "
                           "pass activations between pipeline ranks); use another {} with {} 1",
                           s.where("pp"), s.name("pp"), s.name("schedule"), s.name("pp")));
  }
  if (p.micro_batches() % p.pp == 0) return;
  fail_field(s, "gbs",
             fmt::format("the interleaved schedule needs the number of micro-batches ({}) to be "
                         "a multiple of {} {} (Megatron-LM's rule); change {}",
                         p.micro_batches(), s.name("pp"), p.pp, s.name("gbs")));
}

// DataParallel and parameter servers replicate the whole model on every GPU: pure data
// parallelism (as torch.nn.DataParallel and parameter-server frameworks run it).
void check_dp_mode(const TrainingPlan& p, const PlanSources& s) {
  if (p.dp_mode == models::DpMode::DDP) return;
  const std::pair<const char*, int> sizes[] = {
      {"tp", p.tp}, {"pp", p.pp}, {"cp", p.cp}, {"ep", p.ep}};
  for (const auto& [key, value] : sizes) {
    if (value == 1) continue;
    fail_field(s, key,
               fmt::format("{}: {} {} replicates the whole model on every GPU, so it needs {} 1 "
                           "(got {}); use {} ddp for model parallelism",
                           s.where(key), s.name("dp_mode"), models::to_string(p.dp_mode),
                           s.name(key), value, s.name("dp_mode")));
  }
  // A forward call runs its backward before the next forward (the loss is computed in
  // between on GPU 0): one micro-batch after another.
  if (p.dp_mode == models::DpMode::DATAPARALLEL && p.schedule != models::Schedule::ONE_F_ONE_B &&
      p.schedule != models::Schedule::NAIVE) {
    fail_field(s, "schedule",
               fmt::format("{} dataparallel runs each micro-batch's backward before the next "
                           "forward; use {} 1f1b",
                           s.name("dp_mode"), s.name("schedule")));
  }
  if (p.zero != 0) {
    fail_field(s, "zero",
               fmt::format("{} {}: ZeRO shards over DDP's collectives; use {} 0 or {} ddp",
                           s.name("dp_mode"), models::to_string(p.dp_mode), s.name("zero"),
                           s.name("dp_mode")));
  }
}

}  // namespace

void check_dp_mode_cluster(const TrainingPlan& p, int gpus_per_node, int hosts,
                           const PlanSources& s) {
  if (p.dp_mode == models::DpMode::DATAPARALLEL && p.gpus() > gpus_per_node) {
    fail_field(s, "dp_mode",
               fmt::format("{}: dataparallel drives the GPUs of one node ({}) from one process, "
                           "but the plan spans {} GPUs; use {} ddp or one node",
                           s.where("dp_mode"), gpus_per_node, p.gpus(), s.name("dp_mode")));
  }
  if (p.dp_mode != models::DpMode::PS) return;
  if (p.ps_placement == models::PsPlacement::HOST && p.ps_servers > hosts) {
    fail_field(s, "ps_servers",
               fmt::format("{}: {} servers on hosts need {} hosts, but the cluster has {}; add "
                           "hosts (--hosts N, or \"hosts\" in the cluster file) or use {} gpu",
                           s.where("ps_servers"), p.ps_servers, p.ps_servers, hosts,
                           s.name("ps_placement")));
  }
  if (p.ps_placement == models::PsPlacement::GPU && p.ps_servers > p.gpus()) {
    fail_field(s, "ps_servers",
               fmt::format("{}: {} servers on GPUs, but the plan has {} GPUs; use at most {}",
                           s.where("ps_servers"), p.ps_servers, p.gpus(), p.gpus()));
  }
}

void check_size(std::string_view key, std::int64_t value, const PlanSources& s) {
  const PlanField& field = plan_field(key);
  if (field.min == 0 && value < 0) {  // a count that may be zero (e.g. layers offloaded)
    fail_field(s, key,
               fmt::format("{}: must be zero or a positive number, got '{}'", s.where(key), value));
  }
  if (value < 1 && field.min != 0) {
    fail_field(s, key, fmt::format("{}: must be a positive number, got '{}'", s.where(key), value));
  }
  if (field.max > 0 && value > field.max) fail_bad_value(s, key, std::to_string(value), "< 2^30");
  if (value < field.min) {
    fail_bad_value(s, key, std::to_string(value),
                   fmt::format("at least {} (loom's smallest bucket, docs/limits.md)", field.min));
  }
}

void check_global_batch(const TrainingPlan& p, const PlanSources& s) {
  if (p.global_batch() % (p.mbs * p.dp) == 0) return;
  fail_field(s, "gbs",
             fmt::format("{} {} is not a multiple of {} {} x {} {} = {}; make the global batch a "
                         "multiple of it",
                         s.name("gbs"), p.global_batch(), s.name("mbs"), p.mbs, s.name("dp"), p.dp,
                         p.mbs * p.dp));
}

void check_gpu_count(const TrainingPlan& p, std::int64_t cluster_gpus, const PlanSources& s) {
  if (p.gpus() == cluster_gpus) return;
  fail_field(s, "dp",
             fmt::format("{} {} x {} {} x {} {} x {} {} = {} GPUs, but the cluster has {}; change "
                         "the sizes or the cluster so they match",
                         s.name("tp"), p.tp, s.name("pp"), p.pp, s.name("dp"), p.dp, s.name("cp"),
                         p.cp, p.gpus(), cluster_gpus));
}

void check_pipeline_split(const TrainingPlan& p, std::optional<int> model_layers,
                          const PlanSources& s) {
  const std::int64_t stages = std::int64_t{p.pp} * p.vpp;
  if (static_cast<std::int64_t>(p.pipeline_split.size()) != stages) {
    fail_field(s, "pipeline_split",
               fmt::format("{} has {} entries but {} {} x {} {} = {} stages; give one layer count "
                           "per stage",
                           s.name("pipeline_split"), p.pipeline_split.size(), s.name("pp"), p.pp,
                           s.name("vpp"), p.vpp, stages));
  }
  std::int64_t sum = 0;
  for (int n : p.pipeline_split) {
    if (n < 0) {
      fail_field(
          s, "pipeline_split",
          fmt::format("{}: layer counts are 0 or more, got '{}'", s.where("pipeline_split"), n));
    }
    sum += n;
  }
  if (model_layers && sum != *model_layers) {
    fail_field(s, "pipeline_split",
               fmt::format("{} sums to {} layers but the model has {}; make the counts add up",
                           s.name("pipeline_split"), sum, *model_layers));
  }
}

void check_precision_on_gpu(const TrainingPlan& p, const topo::GpuSpec& gpu, const PlanSources& s) {
  if (p.precision == models::Precision::FP8 && p.fp8_recipe &&
      !topo::fp8_recipe_supported(*p.fp8_recipe, gpu.arch)) {
    const bool mx = *p.fp8_recipe == Fp8Recipe::MXFP8;
    fail_field(
        s, "fp8_recipe",
        fmt::format("{} {}: {} ({}) has no tensor cores that apply {} (Blackwell{} does); "
                    "use {}",
                    s.where("fp8_recipe"), loom::to_string(*p.fp8_recipe), gpu.name,
                    topo::to_string(gpu.arch),
                    mx ? "MXFP8 block scales" : "128-element block scales", mx ? "" : " or Hopper",
                    topo::fp8_recipe_supported(Fp8Recipe::BLOCKWISE, gpu.arch)
                        ? "tensorwise, delayed or blockwise"
                        : "tensorwise or delayed"));
  }
  // FP8 linears need FP8 tensor cores (Ada, Hopper, Blackwell); an A100's have none, and
  // Transformer Engine refuses FP8 there (te.fp8 check_fp8_support: "Device compute
  // capability 8.9 or higher required for FP8 execution").
  if (p.precision == models::Precision::FP8 && gpu.fp8_flops <= 0) {
    fail_field(s, "precision",
               fmt::format("{}: fp8 needs FP8 tensor cores, which {} does not have (H100, H200, "
                           "B200 and later do); use bf16, or give the GPU an \"fp8\" rate",
                           s.where("precision"), gpu.name));
  }
  if (p.precision != models::Precision::NVFP4 || gpu.fp4_flops > 0) return;
  fail_field(s, "precision",
             fmt::format("{}: nvfp4 needs FP4 tensor cores, which {} does not have (B200, "
                         "GB200, B300 and GB300 do); use fp8 or bf16, or give the GPU an \"fp4\" "
                         "rate",
                         s.where("precision"), gpu.name));
}

void check_precision_on_cluster(const TrainingPlan& p, const topo::Cluster& cluster,
                                const PlanSources& s) {
  // Every GPU type of a mixed cluster runs the plan's linears.
  bool block_scaled = false;
  for (int k = 0; k < cluster.num_gpu_types(); ++k) {
    const topo::GpuSpec& gpu = cluster.gpu_type(k);
    check_precision_on_gpu(p, gpu, s);
    block_scaled |=
        topo::block_scaled_gemm(models::compute_dtype(p.precision),
                                p.fp8_recipe.value_or(topo::default_fp8_recipe(gpu.arch)));
  }
  // --scale-swizzle with --fp8-recipe auto: only where auto means mxfp8 on some GPU type
  // (plan_effects rejects it for the other precisions and recipes).
  if (p.scale_swizzle && !block_scaled) {
    std::vector<std::string> types;
    for (int k = 0; k < cluster.num_gpu_types(); ++k) {
      const topo::GpuSpec& gpu = cluster.gpu_type(k);
      types.push_back(fmt::format("{} ({}: {})", gpu.name, topo::to_string(gpu.arch),
                                  loom::to_string(topo::default_fp8_recipe(gpu.arch))));
    }
    fail_field(s, "scale_swizzle",
               fmt::format("{} on has no effect: the FP8 recipe of {} has no block scales; "
                           "drop it or set {} mxfp8 on a Blackwell GPU",
                           s.where("scale_swizzle"), join(types, ", "), s.name("fp8_recipe")));
  }
}

void check_cuda_graph_scope_model(const ModelSpec& m, const TrainingPlan& p, const PlanSources& s) {
  if (!partial_scope(p)) return;
  const std::string scope = cuda_graph_scope_text(p, s);
  // Partial graphs are Megatron-core's (Transformer Engine make_graphed_callables per layer).
  if (p.framework == models::Framework::TORCHTITAN || p.framework == models::Framework::DEEPSPEED) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: partial CUDA graphs are Megatron-core's, not {}'s; use full or "
                           "drop {}",
                           scope, models::to_string(p.framework), s.name("framework")));
  }
  if (p.dp_mode != models::DpMode::DDP) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: partial CUDA graphs are Megatron-core's, which runs {} ddp; use "
                           "full or {} ddp",
                           scope, s.name("dp_mode"), s.name("dp_mode")));
  }
  if (m.kind != models::ModelKind::TRANSFORMER) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: {} has no transformer layers to capture in parts; use full", scope,
                           m.name));
  }
  const bool moe_layers = m.is_moe(), dense_layers = m.has_dense_layers();
  if ((p.graphs(models::GraphModule::MOE_ROUTER) ||
       p.graphs(models::GraphModule::MOE_PREPROCESS)) &&
      !moe_layers) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: {} has no MoE layers (Megatron: the moe cuda graphs are only "
                           "for MoE); drop moe_router and moe_preprocess",
                           scope, m.name));
  }
  if (p.graphs(models::GraphModule::MAMBA) && !m.has_mamba()) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: {} has no Mamba layers; drop mamba", scope, m.name));
  }
  if (p.graphs(models::GraphModule::ATTN) && !m.has_attention()) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: {} has no attention layers; drop attn", scope, m.name));
  }
  if (p.graphs(models::GraphModule::MLP) && !dense_layers) {
    fail_field(s, "cuda_graph_scope",
               fmt::format("{}: {} has no dense layers (Megatron: the mlp cuda graph is only "
                           "for dense layers); drop mlp",
                           scope, m.name));
  }
}

void validate_plan(const ModelSpec& model, const TrainingPlan& plan,
                   std::optional<std::int64_t> cluster_gpus, const PlanSources& sources) {
  // The GPU count first: resolve_plan reports it before the other rules too.
  if (cluster_gpus) check_gpu_count(plan, *cluster_gpus, sources);
  models::validate_model(model);
  check_fields(plan, sources);
  // Before the layout rules: a scope that cannot fit the model fails every layout (the
  // search's tally names the first rule a plan breaks).
  check_cuda_graph_scope(model, plan, sources);
  check_tensor_split(model, plan, sources);
  check_model_split(model, plan, sources);
  check_global_batch(plan, sources);
  check_interleaved_batches(plan, sources);
  check_framework(plan, sources);
  check_effective_for_model(model, plan, sources);
  check_dp_mode(plan, sources);
  check_offload(plan, sources);
}

void validate_plan_on_cluster(const ModelSpec& model, const TrainingPlan& plan,
                              const topo::Cluster& cluster, const PlanSources& sources) {
  validate_plan(model, plan, cluster.num_gpus(), sources);
  check_precision_on_cluster(plan, cluster, sources);
  check_dp_mode_cluster(plan, cluster.gpus_per_node(), cluster.num_hosts(), sources);
  check_offload_cluster(plan, cluster, sources);
  // CPU offloading copies to a host CPU: the cluster must have one.
  if (plan.cpu_offloading_num_layers > 0) {
    require_cpu_vertex(cluster, sources, "cpu_offloading_num_layers",
                       std::to_string(plan.cpu_offloading_num_layers));
  }
}

}  // namespace loom::strategies
