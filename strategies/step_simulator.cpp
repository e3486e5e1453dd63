#include "strategies/step_simulator.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/lower_passes.hpp"
#include "strategies/step/step_graph.hpp"
#include "strategies/step/step_report.hpp"

namespace loom::strategies {

std::string to_string(TraceCategory category) {
  switch (category) {
    case TraceCategory::COMPUTE:
      return "compute";
    case TraceCategory::TP:
      return "tp";
    case TraceCategory::CP:
      return "cp";
    case TraceCategory::EP:
      return "ep";
    case TraceCategory::PP:
      return "pp";
    case TraceCategory::DP:
      return "dp";
    case TraceCategory::OPTIMIZER:
      return "optimizer";
    case TraceCategory::OFFLOAD:
      return "offload";
  }
  return "?";
}

StepReport simulate_step(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const SimulateOptions& options) {
  validate_plan_on_cluster(model, plan, cluster);
  check_simulate_options(options, cluster.num_gpus());
  // Pass costing and the simulated GPUs' streams (StepGraph's constructor), then lowering,
  // one step after another.
  StepGraph graph(model, plan, cluster, options);
  add_fsdp_copy_out(graph);    // ZeRO-3's copy-out runs on the compute stream, in the passes
  remove_replica_loss(graph);  // DataParallel: GPU 0 computes the loss of every replica
  for (int k = 0; k < options.steps; ++k) {
    graph.begin_step(k);
    lower_passes(graph);
    lower_cpu_offload(graph);
    lower_pipeline(graph);
    lower_data_parallel(graph);
  }
  graph.end_steps();
  graph.engine.run();
  measure_passes(graph);
  StepReport report;
  report.memory = estimate_memory(model, plan);
  report.design.device_memory = device_memory(report.memory, plan);
  measure_step(graph, report);
  for (const auto& design : graph.designs) design->measure(graph, report.design);
  if (options.keep_timeline) record_timeline(graph, report);
  return report;
}

void check_simulate_options(const SimulateOptions& o, int gpus) {
  if (o.steps < 1 || o.steps > MAX_STEPS) {
    throw ValidationError::bad_value("steps", std::to_string(o.steps),
                                     fmt::format("a whole number from 1 to {}", MAX_STEPS));
  }
  for (const auto& [rank, factor] : o.stragglers) {
    if (rank < 0 || rank >= gpus) {
      throw ValidationError("straggler", fmt::format("straggler: rank {} is out of range; the "
                                                     "cluster has ranks 0..{}",
                                                     rank, gpus - 1));
    }
    if (!(factor >= 1) || !std::isfinite(factor)) {
      throw ValidationError("straggler", fmt::format("straggler: rank {} factor {} must be a "
                                                     "number >= 1 (2 = twice as slow)",
                                                     rank, factor));
    }
  }
  const RandomStragglers& rs = o.random_stragglers;
  if (!(rs.fraction >= 0 && rs.fraction <= 1) || !(rs.mean_factor >= 1) ||
      !std::isfinite(rs.mean_factor)) {
    throw ValidationError("straggler",
                          fmt::format("random stragglers: fraction {} must be in [0, 1] and mean "
                                      "factor {} a number >= 1",
                                      rs.fraction, rs.mean_factor));
  }
  if (!(o.host_launch_s < 1) || (o.host_launch_s < 0 && o.host_launch_s != -1)) {
    throw ValidationError::bad_value("host_launch", fmt::format("{}s", o.host_launch_s),
                                     "a time from 0 to 1s, e.g. 10us");
  }
}

}  // namespace loom::strategies
