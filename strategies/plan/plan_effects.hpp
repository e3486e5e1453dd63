#pragma once
// Values that would have no effect in the plan they resolve to are errors, not silent no-ops:
// --overlap-grad-reduce under --zero 3, --recompute-modules without selective recompute,
// --tp-comm-overlap with tp 1, ... Each rule names the value and the field that voids it. A
// value equal to what the field would be without it (the plan default, or the --framework
// profile's) passes, so a plan --print-config wrote reads back.
#include <optional>
#include <string>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"

namespace loom::strategies {

/// Throws PlanError on the first value `input` gives that has no effect in `plan` (the
/// resolution of `input`), naming both fields through input.sources().
void check_effective(const PlanInput& input, const models::TrainingPlan& plan);

/// The model-dependent part: etp on a model without experts, --mtp off on a model without
/// multi-token-prediction modules. Throws PlanError naming the field through `sources`.
void check_effective_for_model(const models::ModelSpec& model, const models::TrainingPlan& plan,
                               const PlanSources& sources);

/// What keeps --overlap-moe-expert-parallel-comm from acting on `plan` (Megatron-core's
/// TransformerConfig rules), the first of: no expert-parallel all-to-alls (ep 1), a pipeline
/// without virtual stages, one micro-batch per replica, CUDA-graphed layers, full recompute
/// or a "moe" recompute module ("Disable full recomputation when enabling
/// overlap_moe_expert_parallel_comm"), fp32 (it runs in bf16 or fp16 only); nullopt when it
/// acts (on a model with experts). `field` is the plan field that voids it, `why` the reason
/// as "with ...". check_effective and the search (its free switch) both ask here.
struct MoeOverlapBlock {
  std::string field;
  std::string why;
};
std::optional<MoeOverlapBlock> moe_a2a_overlap_block(const models::TrainingPlan& plan,
                                                     const PlanSources& sources = {});

}  // namespace loom::strategies
