#pragma once
// One training step, simulated, as a pipeline of stages (strategies/step/): plan validation
// (strategies/plan) -> pass costing (pass_cost: the op list of models/flops.hpp timed by the
// GPU kernel-time model of topologies/) -> lowering into an engine task graph (lower_passes:
// compute passes and their TP/CP/EP collectives; lower_pipeline: pipeline transfers;
// dp_lowering: one lowering per data-parallel design, and the optimizer) -> engine run
// (sim/engine.hpp; every collective is an engine collective) -> step report (step_report:
// bubble, exposed comm, MFU, timeline). Two modes: symmetric (one representative GPU per
// pipeline stage; the identical data-parallel groups of its tensor-parallel peers load the
// links they share with it) and full (every GPU of the cluster is simulated).
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/parallel_dim.hpp"
#include "models/training_plan.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "strategies/schedule.hpp"
#include "topologies/cluster.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::strategies {

/// What a timeline slice is, for the trace's categories.
enum class TraceCategory { COMPUTE, TP, CP, EP, PP, DP, OPTIMIZER };
/// "compute", "tp", "cp", "ep", "pp", "dp", "optimizer".
std::string to_string(TraceCategory category);

/// How to simulate.
struct SimulateOptions {
  sim::NetworkMode network = sim::NetworkMode::FLOW;
  bool full = false;           ///< simulate every GPU instead of one per pipeline stage
  bool keep_timeline = false;  ///< fill StepReport::timeline (for --trace)
  /// Coefficients of the datasheet kernel model (used when `kernels` is null).
  topo::GpuEfficiency efficiency = {};
  /// The kernel-time model to time every op with; null: DatasheetKernelModel of the cluster's
  /// GPU with `efficiency`. A calibrated profile plugs in here.
  std::shared_ptr<const topo::KernelTimeModel> kernels;
  /// ZeRO-3/FSDP: gather the next unit's parameters while the current one computes (at most
  /// two units gathered at once); false gathers each unit only when it is about to run.
  bool fsdp_prefetch = true;
  /// Run every collective as live flows on the network (sim::CollectiveTiming::FLOWS)
  /// instead of its frozen flow-level cost (FROZEN, the default: fast at 16k GPUs).
  bool live_collectives = false;
  /// Measured collective times (a calibration profile) the engine uses where they cover a
  /// collective (sim::EngineOptions::collective_override); null: the model alone.
  std::shared_ptr<const sim::CollectiveTimeOverride> collective_override;
  /// Multiplies every modelled collective's time (a fitted factor; see
  /// sim::EngineOptions::collective_time_scale).
  double collective_time_scale = 1.0;
};

/// One executed slice, for the Chrome trace.
struct TimelineSlice {
  int rank = 0;        ///< global rank
  std::string stream;  ///< "compute", "dp", "pp"
  std::string name;    ///< e.g. "F mb3 c0 layers 0-11"
  TraceCategory category = TraceCategory::COMPUTE;
  double start_s = 0;
  double end_s = 0;
};

/// A memory counter sample, for the Chrome trace.
struct MemorySample {
  int rank = 0;
  double time_s = 0;
  double bytes = 0;
};

/// What one simulated step reports (DESIGN.md "simulate results").
struct StepReport {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;     ///< model FLOPs (no recompute) per GPU per second / 1e12
  double hardware_tflops_per_gpu = 0;  ///< with recompute
  double mfu = 0;                      ///< model FLOP/s over the GPU's dense peak
  double hfu = 0;                      ///< hardware FLOP/s over the GPU's dense peak
  double peak_flops = 0;               ///< dense peak of the plan's dtype, FLOP/s
  double bubble_fraction = 0;          ///< pipeline idle share of the pipeline phase
  double bubble_time_s = 0;            ///< pipeline idle time of the busiest stage
  double pipeline_time_s = 0;          ///< end of the last forward/backward pass
  double compute_time_s = 0;           ///< compute-stream busy time without comm, mean over stages
  double exposed_comm_time_s = 0;      ///< comm not hidden behind compute, mean over stages
  /// Comm time by parallel dimension (models::index(dim)), mean per GPU; the report lists
  /// models::REPORTED_COMM_DIMS.
  std::array<double, models::DIM_COUNT> comm_time_s{};
  /// Exposed comm by kind, mean per GPU: tp/cp/ep block the compute stream (all exposed); dp
  /// counts the time a DP collective runs while the compute stream is idle; pp waits are
  /// part of the bubble (0 here).
  std::array<double, models::DIM_COUNT> exposed_comm_s{};
  /// Data-parallel volume per GPU per step, bytes, counted as the ZeRO paper (Sec. 7) does:
  /// an all-reduce of S bytes moves 2·S, a reduce-scatter or all-gather S.
  double dp_bytes_per_gpu = 0;
  std::int64_t dp_collectives = 0;  ///< DP collectives of the representative replica, all stages
  double optimizer_time_s = 0;
  int simulated_gpus = 0;
  /// Global rank of the representative GPU of each pipeline stage (DP replica 0, TP rank 0),
  /// by stage: the GPU whose timeline and memory the report shows.
  std::vector<int> stage_ranks;
  std::int64_t tasks = 0;
  std::int64_t events = 0;
  models::MemoryReport memory;
  std::vector<TimelineSlice> timeline;
  std::vector<MemorySample> memory_samples;
};

/// Simulates one step. Throws ValidationError / ModelError on an invalid plan for the model
/// or cluster (e.g. plan.gpus() != cluster GPUs).
StepReport simulate_step(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const SimulateOptions& options = {});

}  // namespace loom::strategies
