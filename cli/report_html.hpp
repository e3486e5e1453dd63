#pragma once
// The HTML report of `loom simulate --report FILE`: one self-contained file (inline SVG,
// CSS and a few lines of script; no network, no external fonts) with the step timeline per
// pipeline stage, memory per stage against the GPU's capacity, the communication breakdown,
// the plan, the resolved configuration and the assumptions behind the numbers. Same inputs
// give the same bytes. docs/report.md describes every part.
#include <optional>
#include <string>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster.hpp"
#include "topologies/scaled_kernel_model.hpp"

namespace loom::cli {

/// What a calibration profile changed in the kernel model (options.kernels), as simulate
/// applied it: the report's assumptions say which model timed the kernels.
struct KernelCalibration {
  bool measured = false;  ///< the profile's GEMM times / memory bandwidth (MeasuredKernelModel)
  std::optional<topo::KernelScales> scales;  ///< its fitted factors (ScaledKernelModel), if any
};

/// Everything the report shows: what was simulated, how, and what came out.
struct ReportInputs {
  const models::ModelSpec& model;
  const models::TrainingPlan& plan;
  const strategies::PlanSources& sources;  ///< where each plan field came from
  const topo::Cluster& cluster;
  const strategies::SimulateOptions& options;  ///< network, mode, kernel model used
  const strategies::StepReport& report;        ///< needs keep_timeline for the timeline
  std::string network;                         ///< the --network name
  std::string calibration;                     ///< the calibration profile path; empty: none
  KernelCalibration kernel_calibration = {};   ///< what the profile changed; default: nothing
};

/// The whole report as one HTML document. Every string from the inputs is escaped.
std::string render_html_report(const ReportInputs& in);

}  // namespace loom::cli
