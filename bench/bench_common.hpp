#pragma once
// Shared by the bench_* programs: a wall clock, and the reference plan they compare against.
#include <chrono>

#include "models/training_plan.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"

namespace loom::bench {

/// Seconds on the steady clock.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Narayanan et al. 2021 (SC21), GPT-3 175B on 1,024 A100 (TP 8, PP 8, DP 16, micro-batch 1,
/// batch 1536, full recompute, fp16), as examples/plans/gpt3-175b-1024.json writes it.
inline models::TrainingPlan narayanan_gpt3_plan() {
  constexpr int GPUS = 1024, GPT3_LAYERS = 96;
  return strategies::resolve_plan(
      strategies::read_plan_json(LOOM_SOURCE_DIR "/examples/plans/gpt3-175b-1024.json"), GPUS,
      GPT3_LAYERS);
}

}  // namespace loom::bench
