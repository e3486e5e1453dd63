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
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/parallel_dim.hpp"
#include "models/training_plan.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "strategies/schedule.hpp"
#include "strategies/step/host_launch.hpp"
#include "topologies/cluster.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::strategies {

/// What a timeline slice is, for the trace's categories.
enum class TraceCategory { COMPUTE, TP, CP, EP, PP, DP, OPTIMIZER, OFFLOAD };
/// "compute", "tp", "cp", "ep", "pp", "dp", "optimizer", "offload".
std::string to_string(TraceCategory category);

/// Seeded random stragglers: in every step each GPU is slow with probability `fraction`, by a
/// factor 1 + X with X exponentially distributed of mean `mean_factor` - 1 (docs/heterogeneous.md).
struct RandomStragglers {
  double fraction = 0;     ///< probability that a GPU is slow in a step, in [0, 1]
  double mean_factor = 1;  ///< mean slowdown of a slow GPU (>= 1)
  std::uint64_t seed = 1;  ///< the draws are a pure function of (seed, step, rank)
};

/// How to simulate.
struct SimulateOptions {
  sim::NetworkMode network = sim::NetworkMode::FLOW;
  bool full = false;           ///< simulate every GPU instead of one per pipeline stage
  bool keep_timeline = false;  ///< fill StepReport::timeline (for --trace and --report)
  /// With keep_timeline, lay out each pass's collectives among its kernels
  /// (StepReport::pass_layouts), which only the Chrome trace draws (--trace): lowering then
  /// records every pass's collectives on every simulated GPU (StepGraph::traced_parts).
  bool trace_collectives = false;
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
  /// Cost a symmetric all-to-all by flow class and leave out concurrent groups that are images
  /// of the simulated one (sim::CostOptions::flow_classes, twins_once): exact, much faster at
  /// scale; false lowers every group pair by pair (for tests that compare the two).
  bool symmetric_costing = true;
  /// Measured collective times (a calibration profile) the engine uses where they cover a
  /// collective (sim::EngineOptions::collective_override); null: the model alone.
  std::shared_ptr<const sim::CollectiveTimeOverride> collective_override;
  /// Multiplies every modelled collective's time (a fitted factor; see
  /// sim::EngineOptions::collective_time_scale).
  double collective_time_scale = 1.0;
  /// Link payload efficiencies and NCCL constant scales of the network (a fitted network
  /// profile, calibration/network_fit.hpp; sim::EngineOptions::link_efficiency, nccl_tuning).
  sim::LinkEfficiency link_efficiency = {};
  sim::NcclTuning nccl_tuning = {};
  /// Rank order of the process groups, fastest first (RankLayout; Megatron's default).
  std::string order = "tp-cp-ep-dp-pp";
  /// Called with the fraction of the engine's tasks finished (sim::EngineOptions::progress).
  std::function<void(double)> progress;
  /// Consecutive steps simulated in one run (>= 1); step-time statistics cover all of them.
  int steps = 1;
  /// Compute slowdown (>= 1) of a global rank in every step (a straggler); ranks not listed: 1.
  std::map<int, double> stragglers;
  /// Random stragglers, drawn per step and rank on top of `stragglers`.
  RandomStragglers random_stragglers;
  /// Host seconds per eager kernel launch (--host-launch): a layer's pass takes at least its
  /// launches (pass_cost host_bound_passes); single-process DataParallel runs them under
  /// Python's GIL. -1: each GPU type's host (host_launch_for).
  double host_launch_s = -1;
};

/// Per-step times of a run of SimulateOptions::steps steps.
struct StepSeries {
  std::vector<double> times_s;  ///< step k: end of step k - end of step k - 1 (all workers)
  std::vector<double> ends_s;   ///< when every worker had finished step k, seconds
  double mean_s = 0, p50_s = 0, p99_s = 0;
};

/// One simulated data-parallel replica (a worker): where it runs and how fast it went.
struct ReplicaTime {
  int replica = 0;            ///< data-parallel index
  int rank = 0;               ///< its first stage's global rank
  std::string gpu;            ///< GPU name of its first stage
  double compute_factor = 1;  ///< mean straggler factor over its stages and steps
  double compute_s = 0;       ///< pass compute seconds of its first step, its busiest stage's
  double mean_step_s = 0;     ///< mean of its own step times (its end of step k - end of k - 1)
  double finish_s = 0;        ///< end of its last step
};

/// One pipeline stage of the representative: its GPU and time.
struct StageTime {
  int stage = 0;
  std::string gpu;
  double compute_s = 0;  ///< pass compute seconds in the first step
  double busy_s = 0;     ///< pass busy seconds (compute + blocking comm) in the first step
};

/// What the data-parallel design reports beyond the common fields (strategies/step/dp_*).
struct DesignReport {
  /// Where the time goes, in order: (what, seconds) of the first step, e.g. "replicate".
  std::vector<std::pair<std::string, double>> breakdown;
  /// Parameter servers: bytes a worker pushes plus pulls per step (mean over steps).
  double ps_bytes_per_worker_step = 0;
  /// Parameter servers: staleness of each applied gradient (updates applied to its
  /// parameters between the pull it was computed on and its own apply), as a histogram:
  /// staleness_histogram[s] gradients had staleness s. Empty for sync.
  std::vector<std::int64_t> staleness_histogram;
  double staleness_mean = 0;
  /// Per-device memory when the design makes devices differ: (device, bytes).
  std::vector<std::pair<std::string, double>> device_memory;
};

/// One executed slice, for the Chrome trace.
struct TimelineSlice {
  int rank = 0;        ///< global rank
  std::string stream;  ///< "compute", "dp", "pp"
  std::string name;    ///< e.g. "F mb3 c0 layers 0-11"
  TraceCategory category = TraceCategory::COMPUTE;
  double start_s = 0;
  double end_s = 0;
  /// What the slice did, as (key, value) pairs for the trace's "args": the pass, micro-batch,
  /// chunk and layers of a compute slice; the op, bytes, group size and ranks of a collective;
  /// bytes and peer of a pipeline transfer. Values are text or numbers written as text.
  std::vector<std::pair<std::string, std::string>> args;
};

/// An arrow of the trace between two slices of StepReport::timeline (indices): a pipeline
/// send to its receive, a collective to a task that waited for it.
struct TimelineFlow {
  std::size_t from = 0;
  std::size_t to = 0;
};

/// A pass's collectives laid out among its kernels, for the Chrome trace. The step simulates
/// a pass's model-parallel collectives as runs after its compute (or beside it, overlapped);
/// the trace draws the pass as one slice from its compute's start to the end of its blocking
/// collectives (and overlap residual), and each collective as a slice of its own on its
/// rank's "tp", "cp" or "ep" track, where it runs among the pass's GEMMs: in op order, the
/// compute seconds split over the ops as their kernels' times, each collective for its own
/// seconds; an overlapped one beside the GEMM it overlaps.
struct PassLayout {
  std::size_t pass = 0;  ///< the pass's compute slice in StepReport::timeline
  double end_s = 0;      ///< the pass's end: its last blocking collective's or its residual's
  /// Extra "args" of the pass slice (its compute and communication seconds).
  std::vector<std::pair<std::string, std::string>> args;
  std::vector<TimelineSlice> collectives;  ///< one per collective, in time order per track
  /// Slices of StepReport::timeline the layout replaces (the runs, the residual), each with
  /// the collective (index into `collectives`) that ends its run; -1 for the residual.
  std::vector<std::pair<std::size_t, std::ptrdiff_t>> folded;
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
  DType peak_dtype = DType::BF16;      ///< whose dense peak peak_flops is (fp32 plans: TF32)
  double bubble_fraction = 0;          ///< pipeline idle share of the pipeline phase
  double bubble_time_s = 0;            ///< pipeline idle time of the busiest stage
  double pipeline_time_s = 0;          ///< end of the last forward/backward pass
  double compute_time_s = 0;           ///< compute-stream busy time without comm, mean over stages
  double exposed_comm_time_s = 0;      ///< comm not hidden behind compute, mean over stages
  /// CPU offloading (plan.cpu_offloading_num_layers > 0): the compute stream's waits for its
  /// activation copies, mean over stages; busy time, not bubble.
  double offload_wait_s = 0;
  bool cpu_offloading = false;  ///< whether the plan offloads activations (the field applies)
  /// DeepSpeed offload (plan.offload_optimizer / offload_param): the time the representative
  /// GPU's copies to and from its host ran (their union, mean over stages) and the bytes they
  /// moved per GPU; the CPU step is in optimizer_time_s.
  double offload_copy_s = 0;
  double offload_bytes_per_gpu = 0;
  bool zero_offload = false;  ///< whether the plan offloads optimizer or parameters
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
  StepSeries steps;                   ///< one entry per simulated step
  std::vector<ReplicaTime> replicas;  ///< the simulated data-parallel replicas
  std::vector<StageTime> stages;      ///< the representative's pipeline stages
  DesignReport design;
  std::vector<TimelineSlice> timeline;
  /// Arrows between timeline slices (keep_timeline): each pipeline send to its receive, each
  /// collective to the tasks that waited for it.
  std::vector<TimelineFlow> timeline_flows;
  /// The passes whose collectives the trace draws one by one (keep_timeline).
  std::vector<PassLayout> pass_layouts;
  std::vector<MemorySample> memory_samples;
};

/// Simulates options.steps steps (one by default). The breakdown (bubble, compute, comm,
/// MFU) is the first step's; step_time_s and tokens_per_s are over all steps (with
/// asynchronous parameter servers tokens_per_s sums every worker's own rate). Throws
/// ValidationError / ModelError on an invalid plan for the model or cluster (e.g.
/// plan.gpus() != cluster GPUs, DataParallel beyond one node).
StepReport simulate_step(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const SimulateOptions& options = {});

/// Most steps one run simulates.
inline constexpr int MAX_STEPS = 10000;
/// Checks the options against a cluster of `gpus` GPUs: steps in 1..MAX_STEPS, straggler
/// ranks in range with factors >= 1, the random model's fraction in [0, 1] and mean >= 1, the
/// host launch time in [0, 1 s) or -1 (the GPU's host). Throws ValidationError naming "steps",
/// "straggler" or "host_launch".
void check_simulate_options(const SimulateOptions& options, int gpus);

}  // namespace loom::strategies
