#pragma once
// What the plan targets do with a PlanInput, as `loom memory` does: resolve it for a
// 64-GPU cluster and a 32-layer model (llama3-8b), validate it, print its config and size
// its memory per stage (the schedule's in-flight micro-batches included).
#include "models/model_loader.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"

namespace loom::fuzz {

/// Resolves, validates and sizes `input` (see the file comment); throws what they throw.
inline void use_plan(const strategies::PlanInput& input) {
  static const models::ModelSpec model = models::model_preset("llama3-8b");
  constexpr std::int64_t gpus = 64;
  const models::TrainingPlan plan = strategies::resolve_plan(input, gpus, model.layers);
  (void)strategies::render_plan_config(plan);
  strategies::validate_plan(model, plan, gpus, input.sources());
  (void)strategies::estimate_memory(model, plan);
}

}  // namespace loom::fuzz
