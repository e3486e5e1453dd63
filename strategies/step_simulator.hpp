#pragma once
// One training step, simulated: lowers (model × plan × cluster) into an engine task graph
// (sim/engine.hpp) and measures it. Compute passes are timed by the GPU kernel-time model
// (topologies/gpu_cost_model.hpp) from the per-op list of models/flops.hpp; tensor-, context-
// and expert-parallel collectives are costed on their real process group over the routed
// topology; pipeline transfers and data-parallel / ZeRO collectives run as engine tasks on
// the network. Two modes: symmetric (one representative GPU per pipeline stage; the identical
// data-parallel groups of its tensor-parallel peers load the links they share with it) and
// full (every GPU of the cluster is simulated).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "sim/network.hpp"
#include "strategies/schedule.hpp"
#include "topologies/cluster.hpp"
#include "topologies/gpu_cost_model.hpp"

namespace loom::strategies {

/// Communication kinds the report breaks time down by.
enum class CommClass { TP = 0, CP, EP, PP, DP };
inline constexpr int COMM_CLASSES = 5;
/// "tp", "cp", "ep", "pp", "dp".
std::string to_string(CommClass kind);

/// How to simulate.
struct SimulateOptions {
  sim::NetworkMode network = sim::NetworkMode::FLOW;
  bool full = false;           ///< simulate every GPU instead of one per pipeline stage
  bool keep_timeline = false;  ///< fill StepReport::timeline (for --trace)
  topo::GpuEfficiency efficiency = {};
  /// ZeRO-3/FSDP: gather the next unit's parameters while the current one computes (at most
  /// two units gathered at once); false gathers each unit only when it is about to run.
  bool fsdp_prefetch = true;
};

/// One executed slice, for the Chrome trace.
struct TimelineSlice {
  int rank = 0;          ///< global rank
  std::string stream;    ///< "compute", "dp", "pp"
  std::string name;      ///< e.g. "F mb3 c0 layers 0-11"
  std::string category;  ///< "compute", "tp", "pp", "dp", ...
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
  std::array<double, COMM_CLASSES> comm_time_s{};  ///< comm time by kind, mean per GPU
  /// Exposed comm by kind, mean per GPU: tp/cp/ep block the compute stream (all exposed); dp
  /// counts the time a DP collective runs while the compute stream is idle; pp waits are
  /// part of the bubble (0 here).
  std::array<double, COMM_CLASSES> exposed_comm_s{};
  /// Data-parallel volume per GPU per step, bytes, counted as the ZeRO paper (Sec. 7) does:
  /// an all-reduce of S bytes moves 2·S, a reduce-scatter or all-gather S.
  double dp_bytes_per_gpu = 0;
  std::int64_t dp_collectives = 0;  ///< DP collectives of the representative replica, all stages
  double optimizer_time_s = 0;
  int simulated_gpus = 0;
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
