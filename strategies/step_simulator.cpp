#include "strategies/step_simulator.hpp"

#include <fmt/format.h>

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
  }
  return "?";
}

StepReport simulate_step(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const SimulateOptions& options) {
  validate_plan(model, plan, cluster.num_gpus());
  check_precision_on_gpu(plan, cluster.gpu);
  // Pass costing and the simulated GPUs' streams (StepGraph's constructor), then lowering.
  StepGraph graph(model, plan, cluster, options);
  add_fsdp_copy_out(graph);  // ZeRO-3's copy-out runs on the compute stream, in the passes
  lower_passes(graph);
  lower_pipeline(graph);
  lower_data_parallel(graph);
  graph.engine.run();
  measure_passes(graph);
  StepReport report;
  report.memory = estimate_memory(model, plan);
  measure_step(graph, report);
  if (options.keep_timeline) record_timeline(graph, report);
  return report;
}

}  // namespace loom::strategies
