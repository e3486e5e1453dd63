#pragma once
// The validation rules of a training plan, each stated once: rules on one field (sizes
// positive, the ZeRO stage, percentages), rules between fields (bf16 gradients need a
// 16-bit precision), rules against the model (TP divides the heads, PP x VPP divides the
// layers, the pipeline split sums to them, EP divides the experts, CP and SP divide the
// sequence), the interleaved schedule's batch rule (micro-batches a multiple of pp) and
// the GPU-count rule against the cluster. Each rule throws PlanError naming
// a plan field; `sources` decides how the message spells it (a flag, FILE#/pointer, or
// the plain key).
#include <cstdint>
#include <optional>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::topo {
class Cluster;
}

namespace loom::strategies {

/// Every rule a resolved plan must keep before the planner or the memory model reads it:
/// the model's own rules (models::validate_model, ModelError/ValidationError), the field
/// rules, the model-vs-plan rules and, when `cluster_gpus` is known, the GPU-count rule.
/// Throws PlanError for the first rule broken.
void validate_plan(const models::ModelSpec& model, const models::TrainingPlan& plan,
                   std::optional<std::int64_t> cluster_gpus, const PlanSources& sources = {});

/// The GPU-count rule: tp x pp x dp x cp must equal the cluster's GPUs. Throws PlanError
/// on field "dp".
void check_gpu_count(const models::TrainingPlan& plan, std::int64_t cluster_gpus,
                     const PlanSources& sources = {});

/// validate_plan against `cluster` (its GPU count), then the rules that need the cluster
/// itself: check_precision_on_cluster and check_dp_mode_cluster. Throws PlanError for the first
/// rule broken.
void validate_plan_on_cluster(const models::ModelSpec& model, const models::TrainingPlan& plan,
                              const topo::Cluster& cluster, const PlanSources& sources = {});

/// The precision rules against one GPU: nvfp4 needs FP4 tensor cores (Transformer Engine's
/// NVFP4BlockScaling runs only on Blackwell), an --fp8-recipe the GPU's tensor cores apply
/// (topo::fp8_recipe_supported). Throws PlanError on "precision" or "fp8_recipe".
void check_precision_on_gpu(const models::TrainingPlan& plan, const topo::GpuSpec& gpu,
                            const PlanSources& sources = {});

/// A rule a plan's switches break: the field to name and the message.
struct SwitchRefusal {
  std::string field;
  std::string message;
};

/// The rules a framework itself asserts on a plan's switches (ZeRO stage, overlaps):
/// DeepSpeed's pipeline engine takes ZeRO 0-1 only; Megatron-LM's ZeRO-3 (torch FSDP2) takes
/// no pp or ep, and it asserts sequence parallelism under --tp-comm-overlap and
/// --overlap-grad-reduce under --overlap-param-gather (megatron/training/arguments.py
/// validate_args).
enum class FrameworkRule {
  DEEPSPEED_PIPELINE_ZERO,
  MEGATRON_FSDP_PARALLEL,
  MEGATRON_TP_OVERLAP_SP,
  MEGATRON_GATHER_OVERLAP_REDUCE
};

/// The first FrameworkRule `plan` breaks, without formatting a message (the search asks it of
/// every switch combination); nullopt when its framework accepts the plan.
std::optional<FrameworkRule> broken_framework_rule(const models::TrainingPlan& plan);
/// The plan field `rule` is reported under.
const char* field_of(FrameworkRule rule);
/// `rule`'s refusal of `plan`: its field and the message, spelt as `sources` spell fields.
SwitchRefusal refusal_of(FrameworkRule rule, const models::TrainingPlan& plan,
                         const PlanSources& sources = {});
/// broken_framework_rule with its refusal.
std::optional<SwitchRefusal> framework_switch_refusal(const models::TrainingPlan& plan,
                                                      const PlanSources& sources = {});

/// "--cuda-graph-scope attn,moe_router" as the plan's source spells the field: for messages.
std::string cuda_graph_scope_text(const models::TrainingPlan& plan, const PlanSources& sources);

/// Context parallelism over a model with a layer windowed below the sequence (its ring
/// attention is not modelled): throws PlanError naming cp.
void check_context_parallel_window(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                   const PlanSources& sources);

/// The rules of a partial CUDA-graph scope (--cuda-graph-scope) that read only the model, the
/// framework and the data-parallel design: Megatron-core's feature, on the modules the model
/// has (moe_router / moe_preprocess need MoE layers, mlp dense ones, MLP models none). Throws
/// PlanError.
void check_cuda_graph_scope_model(const models::ModelSpec& model, const models::TrainingPlan& plan,
                                  const PlanSources& sources);

/// check_precision_on_gpu for every GPU type of `cluster`, then the rule of the cluster as a
/// whole: --scale-swizzle on needs a block-scaled GEMM on at least one GPU type (nvfp4, or
/// fp8 under mxfp8, where auto means mxfp8 on Blackwell). Throws PlanError.
void check_precision_on_cluster(const models::TrainingPlan& plan, const topo::Cluster& cluster,
                                const PlanSources& sources = {});

/// The data-parallel design against the cluster: DataParallel within one node of
/// `gpus_per_node` GPUs; parameter servers on at most `hosts` hosts (placement host) or the
/// plan's GPUs (placement gpu). Throws PlanError on "dp_mode" or "ps_servers".
void check_dp_mode_cluster(const models::TrainingPlan& plan, int gpus_per_node, int hosts,
                           const PlanSources& sources = {});

/// The batch rule: the global batch is a whole number of micro-batches per data-parallel
/// rank (gbs a multiple of mbs x dp). Throws PlanError on "gbs".
void check_global_batch(const models::TrainingPlan& plan, const PlanSources& sources = {});

/// The pipeline-split rules: one layer count per virtual stage (pp x vpp) and, when
/// `model_layers` is known, counts summing to it. Throws PlanError on "pipeline_split".
void check_pipeline_split(const models::TrainingPlan& plan, std::optional<int> model_layers,
                          const PlanSources& sources = {});

/// DeepSpeed's offload (offload_optimizer, offload_param, offload_pin_memory;
/// offload_rules.cpp): zero 1+ (parameters: zero 3 with the DeepSpeed design), Adam, one
/// process per GPU, framework deepspeed or none; pin_memory only with something offloaded.
/// Throws PlanError.
void check_offload(const models::TrainingPlan& plan, const PlanSources& sources = {});
/// The offload's host: a CPU vertex in `cluster`. Throws PlanError.
void check_offload_cluster(const models::TrainingPlan& plan, const topo::Cluster& cluster,
                           const PlanSources& sources = {});
/// Fails field `key` (set to `value`) unless `cluster` has a CPU vertex to offload to.
void require_cpu_vertex(const topo::Cluster& cluster, const PlanSources& sources, const char* key,
                        std::string_view value);

/// A SIZE rule: `value` of field `key` is at least 1 (and at most the table's bound).
/// Throws PlanError.
void check_size(std::string_view key, std::int64_t value, const PlanSources& sources = {});

}  // namespace loom::strategies
