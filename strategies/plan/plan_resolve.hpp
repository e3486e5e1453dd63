#pragma once
// Plan resolution: merged raw values (PlanInput) become a models::TrainingPlan. Defaults
// come from TrainingPlan; derived values are computed here: dp from the cluster's GPUs,
// gbs from grad_accum, vpp from Megatron's layers per virtual stage, the interleaved
// schedule from vpp > 1. The batch and schedule rules are checked on the way; the
// model-vs-plan rules are plan_rules.hpp's validate_plan.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"

namespace loom::topo {
class Cluster;
}
namespace loom::models {
struct ModelSpec;
}

namespace loom::strategies {

/// Resolves `input` into a plan. When `gpus` is known, an unset dp becomes
/// gpus / (tp x pp x cp) and a set one must make tp x pp x dp x cp equal gpus.
/// `model_layers`, when known, converts layers_per_virtual_stage into vpp and checks the
/// pipeline split sums to it. `model_seq`, when known, is the sequence length an input that
/// names none gets (the model's own, models::ModelSpec::default_seq; without it
/// TrainingPlan's 2048). Derived keys in the input (micro_batches, gpus) must agree with the
/// result. `transformer` false (an MLP model): no framework turns sequence parallelism on by
/// default (torchtitan's TP is sequence-parallel for its transformers). Throws PlanError
/// naming the field through input.sources().
models::TrainingPlan resolve_plan(const PlanInput& input, std::optional<std::int64_t> gpus,
                                  std::optional<int> model_layers = std::nullopt,
                                  std::optional<std::int64_t> model_seq = std::nullopt,
                                  bool transformer = true);
/// resolve_plan for `model`: its layers, its sequence length and whether it is a transformer.
models::TrainingPlan resolve_plan(const PlanInput& input, std::optional<std::int64_t> gpus,
                                  const models::ModelSpec& model);

/// The layers Megatron's pipeline-split accounting adds to the model's (one each for
/// account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split): 0 to 2.
int accounting_layers(const PlanInput& input);

/// A plan of `input`'s `texts` and `toggles` fields alone, every other field at its default:
/// the fields a search holds fixed, checked once before it enumerates. Throws PlanError.
models::TrainingPlan resolve_fields(const PlanInput& input,
                                    std::initializer_list<const char*> texts,
                                    std::initializer_list<const char*> toggles);

/// check_precision_on_cluster (plan_rules.hpp) for the precision fields of `input` alone
/// (precision, fp8_recipe, scale_swizzle: the same for every plan of a search), before a
/// search enumerates its plans. Throws PlanError.
void check_precision_input_on_cluster(const PlanInput& input, const topo::Cluster& cluster);

/// check_cuda_graph_scope_model (plan_rules.hpp) for the CUDA-graph, framework and
/// data-parallel fields of `input` alone (the same for every plan of a search), before a
/// search enumerates its plans. Throws PlanError.
void check_graph_scope_input(const PlanInput& input, const models::ModelSpec& model);
/// check_context_parallel_window on the input's fixed cp and seq (a search checks it once,
/// before enumerating, rather than ruling out every candidate).
void check_context_window_input(const PlanInput& input, const models::ModelSpec& model);

/// "20,20,20" as layer counts; throws PlanError on "pipeline_split" for anything else.
std::vector<int> parse_layer_list(const std::string& text, const PlanSources& sources = {});

}  // namespace loom::strategies
