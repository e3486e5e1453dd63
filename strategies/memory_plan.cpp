#include "strategies/memory_plan.hpp"

#include "strategies/plan/plan_rules.hpp"
#include "strategies/schedule.hpp"

namespace loom::strategies {

std::vector<double> in_flight_micro_batches(const models::TrainingPlan& plan) {
  const PipelineSchedule schedule =
      build_schedule(plan.schedule, plan.pp, static_cast<int>(plan.micro_batches()), plan.vpp);
  std::vector<double> in_flight(static_cast<size_t>(plan.pp));
  for (int s = 0; s < plan.pp; ++s) in_flight[static_cast<size_t>(s)] = peak_in_flight(schedule, s);
  return in_flight;
}

models::MemoryReport estimate_memory(const models::ModelSpec& model,
                                     const models::TrainingPlan& plan) {
  validate_plan(model, plan, std::nullopt);  // plan errors before schedule-shape errors
  return models::estimate_memory(model, plan, in_flight_micro_batches(plan));
}

}  // namespace loom::strategies
