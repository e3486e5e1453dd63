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

namespace {

// Adds `bytes` (negative: removes) to a stage's total with the allocator's proportional
// reserve on top (models::estimate_memory: fragmentation_fraction of everything else).
void add_bytes(models::StageMemory& s, double bytes, double fragmentation_fraction) {
  s.other.fragmentation_bytes += fragmentation_fraction * bytes;
  s.other_bytes = s.other.total();
  s.total_bytes += bytes * (1 + fragmentation_fraction);
}

void set_peak(models::MemoryReport& r) {
  r.peak_bytes = 0;
  for (const auto& s : r.stages) {
    if (s.total_bytes <= r.peak_bytes) continue;
    r.peak_bytes = s.total_bytes;
    r.peak_stage = s.stage;
  }
}

bool workers_keep_optimizer(const models::TrainingPlan& p) {
  return p.dp_mode != models::DpMode::PS || p.ps_update == models::PsUpdate::GEO;
}

}  // namespace

models::MemoryReport estimate_memory(const models::ModelSpec& model,
                                     const models::TrainingPlan& plan) {
  validate_plan(model, plan, std::nullopt);  // plan errors before schedule-shape errors
  models::MemoryReport r = models::estimate_memory(model, plan, in_flight_micro_batches(plan));
  apply_dp_mode_memory(r, plan);
  return r;
}

void apply_dp_mode_memory(models::MemoryReport& r, const models::TrainingPlan& plan) {
  const double frac = plan.fragmentation_fraction;
  if (!workers_keep_optimizer(plan)) {
    for (auto& s : r.stages) {
      add_bytes(s, -s.optimizer_bytes, frac);
      s.optimizer_bytes = 0;
    }
  }
  if (plan.dp_mode == models::DpMode::DATAPARALLEL) {
    // GPU 0 gathers every replica's output (logits) and runs their loss (logits_bytes: one
    // micro-batch's loss peak).
    for (auto& s : r.stages) {
      const double extra = (plan.dp - 1) * s.logits_bytes;
      s.logits_bytes += extra;
      s.activations_bytes += extra;
      add_bytes(s, extra, frac);
    }
  }
  set_peak(r);
}

std::vector<std::pair<std::string, double>> device_memory(const models::MemoryReport& memory,
                                                          const models::TrainingPlan& plan) {
  if (plan.dp_mode == models::DpMode::DDP) return {};
  const models::StageMemory& s = memory.stages.front();  // one stage (pp = 1)
  if (plan.dp_mode == models::DpMode::PS) return {{"worker GPU", s.total_bytes}};
  // A replica holds no optimizer state and only its own micro-batch's output.
  const double frac = plan.fragmentation_fraction;
  const double extra = s.logits_bytes * (plan.dp - 1) / plan.dp;
  return {{"GPU 0", s.total_bytes},
          {"GPU 1..", s.total_bytes - (s.optimizer_bytes + extra) * (1 + frac)}};
}

}  // namespace loom::strategies
