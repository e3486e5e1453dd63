#pragma once
// The task graph of one or more steps under construction, shared by the lowering stages
// (lower_passes, lower_pipeline, the data-parallel lowerings) and read by the step report:
// the engine, the schedule, the costed work (per GPU type), which GPUs are simulated and
// their streams, the tasks later stages hang dependencies on, and what the report measures
// on the representative GPU of each stage (in the first step).
//
// Simulated replicas: every (tp, cp, dp) replica in full mode; in symmetric mode one per
// distinct role along dp (t = c = 0): replicas whose GPU types and straggler factors match
// in every stage and step behave alike, so the first of each kind stands for the others. A
// replica stands for its TP and CP peers too, taking the slowest of them (their collectives
// make them wait for it). Parameter servers and single-process DataParallel simulate every
// worker (the servers see every push; one process drives every GPU).
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "models/model_spec.hpp"
#include "models/parallel_dim.hpp"
#include "models/training_plan.hpp"
#include "sim/engine.hpp"
#include "strategies/schedule.hpp"
#include "strategies/step/pass_cost.hpp"
#include "strategies/step/rank_index.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::strategies {

/// The first and last task of a lowered pass (or of one unit of a split pass).
struct PassTasks {
  sim::TaskId first = -1;
  sim::TaskId last = -1;
};

/// One simulated GPU: its streams and the tasks the data-parallel lowering hangs on.
struct SimGpu {
  int rank = 0;
  sim::StreamId compute = sim::NO_STREAM;  ///< passes, blocking model-parallel collectives
  sim::StreamId dp = sim::NO_STREAM;       ///< gradient reduction (and ZeRO-1/2 gathers)
  sim::StreamId ag = sim::NO_STREAM;       ///< ZeRO-3 parameter gathers (FSDP's unshard stream)
  sim::StreamId tp =
      sim::NO_STREAM;  ///< TP (tp_comm_overlap) and CP ring collectives beside compute
  /// EP all-to-alls overlapping compute (overlap_moe_expert_parallel_comm)
  sim::StreamId ep = sim::NO_STREAM;
  /// Its process's CPU work under DeepSpeed's offload (the CPU step, staging copies; made on
  /// first use by zero_offload.cpp)
  sim::StreamId host = sim::NO_STREAM;
  sim::TaskId last_backward = -1;             ///< the last pass that ends weight gradients
  std::vector<std::vector<PassTasks>> units;  ///< per pass index: per unit (split passes)
  int gpu_type = 0;   ///< its GPU type (topo::Cluster::gpu_type), the slowest peer's in symmetric
  double factor = 1;  ///< compute slowdown in the step being lowered (a straggler's, >= 1)
};

/// The (tp, cp, dp) coordinates of a simulated replica of the pipeline.
struct Replica {
  int t = 0, c = 0, d = 0;
};

/// The representative's collectives after one forward, recompute or backward, in order.
struct RepCommList {
  /// A run of collectives on one group: tasks first..last (one task when frozen).
  struct Run {
    sim::TaskId first = -1, last = -1;
    models::Dim dim = models::Dim::TP;
    /// When frozen (one task): each collective's picoseconds, so that the report sums
    /// them one by one as it does the tasks of a flow-timed run.
    std::vector<sim::SimTime> frozen_ps;
    /// Overlapped with the pass's compute (tp_comm_overlap): not blocking.
    bool overlapped = false;
  };
  std::vector<Run> runs;
};

/// The representative's tasks of one pass.
struct RepPass {
  std::vector<sim::TaskId> tasks;       ///< compute tasks and collectives, in issue order
  std::vector<RepCommList> comm_lists;  ///< its model-parallel collectives
  /// One comm list overlapped with its compute (tp_comm_overlap, overlap_moe_expert_parallel_
  /// comm): the compute stream waits from the finish of `before` (its last task before the
  /// join: the compute, or a blocking collective after it) for the list's overlapped runs,
  /// then runs the TP residual `residual` (zero-length without TP). The wait is exposed
  /// communication of the run that finished last; the residual is TP's.
  struct Overlap {
    sim::TaskId before = -1;
    sim::TaskId residual = -1;
    int list = -1;        ///< index in comm_lists; -1 when no collective of it left replica 0
    double cp_share = 0;  ///< of the residual, the context-parallel ring's part (the rest TP's)
  };
  std::vector<Overlap> overlaps;
};

/// What the report measures on the representative GPU (replica 0) of one stage.
struct RepStage {
  std::vector<RepPass> passes;       ///< by pass index
  std::vector<sim::TaskId> compute;  ///< its compute-stream tasks (passes, then the optimizer)
  double compute_s = 0;              ///< pass compute seconds
  double comm_s = 0;                 ///< blocking model-parallel comm seconds
  /// Busy time of its passes (compute + comm) summed in integer picoseconds, the durations
  /// the engine ran, so that a stage that never idles shows exactly zero bubble.
  sim::SimTime busy_ps = 0;
  std::vector<sim::TaskId> dp;      ///< its DP collectives
  std::vector<sim::TaskId> gather;  ///< of which parameter gathers compute waits on
  double dp_bytes = 0;              ///< ZeRO paper Sec. 7 volume per GPU, bytes
  /// Its DP tasks run side by side (parameter-server flows, DataParallel copies): their time
  /// is the union of their intervals, not the sum.
  bool dp_concurrent = false;
  /// CPU offloading: (the compute task before, the task that waits on a copy) pairs; the gap
  /// between them is a wait for the copy (busy, exposed offload time), not pipeline bubble.
  std::vector<std::pair<sim::TaskId, sim::TaskId>> offload_waits;
  double offload_wait_s = 0;  ///< their summed gaps, after the engine ran
  /// DeepSpeed offload (zero_offload.cpp): its copies to and from the host (and their
  /// staging memcpys), and the bytes they move.
  std::vector<sim::TaskId> offload_copies;
  double offload_bytes = 0;
};

/// One forward, recompute or backward of a chunk or unit on one simulated GPU and the
/// collectives after or beside it, for the trace (keep_timeline with trace_collectives only,
/// SimulateOptions): the trace draws each collective of the runs as a slice of its own among
/// the pass's kernels (timeline_links.cpp).
struct TracedPart {
  enum class Work { FORWARD, RECOMPUTE, BACKWARD, BACKWARD_INPUT };
  Work work = Work::FORWARD;
  std::size_t replica = 0;
  int stage = 0;
  int virtual_stage = 0;
  int unit = -1;  ///< the unit of the virtual stage; -1: the whole chunk
  int micro_batch = 0;
  int chunk = 0;
  sim::TaskId compute = -1;   ///< its compute task
  sim::TaskId residual = -1;  ///< overlapped collectives: the exposed residual after them
  const std::vector<CommItem>* items = nullptr;  ///< its collectives (PassCost's list)
  /// A run of items[begin, end) on one group: tasks first..last (one task when frozen, whose
  /// collectives took item_ps each).
  struct Run {
    std::size_t begin = 0, end = 0;
    sim::TaskId first = -1, last = -1;
    bool overlapped = false;
    std::vector<sim::SimTime> item_ps;
  };
  std::vector<Run> runs;  ///< in item order; runs on a group of one GPU are absent
};

/// Which passes of a stage play a role for data-parallel overlap.
struct PassRoles {
  std::vector<std::vector<int>> final_pass;     ///< [stage][chunk]: ends its weight gradients
  std::vector<std::vector<int>> first_forward;  ///< [stage][chunk]: its first forward
};

class DataParallelLowering;

/// The step's task graph under construction (see file comment).
struct StepGraph {
  StepGraph(const models::ModelSpec& model, const models::TrainingPlan& plan,
            const topo::Cluster& cluster, const SimulateOptions& options);
  ~StepGraph();

  const models::ModelSpec& model;
  const models::TrainingPlan& plan;
  const SimulateOptions& options;
  const topo::Cluster& cluster;
  /// Times every kernel on GPU type 0: SimulateOptions::kernels, or the datasheet model of
  /// the cluster's GPU.
  std::shared_ptr<const topo::KernelTimeModel> kernels;
  /// The datasheet models of GPU types 1.. (heterogeneous clusters), by type - 1.
  std::vector<std::shared_ptr<const topo::KernelTimeModel>> extra_kernels;
  RankIndex index;
  int ep_nodes;  ///< flex_exchange_nodes of rank 0's EP group (cost_ops)
  sim::Engine engine;
  PipelineSchedule schedule;
  StageWork work;                     ///< costed on GPU type 0
  std::vector<StageWork> extra_work;  ///< costed on GPU types 1.., by type - 1
  /// [virtual stage][unit]: routed-expert parameters on this GPU, reduced over the expert
  /// data-parallel group; empty without expert parallelism (ep == 1: all params are dense).
  std::vector<std::vector<double>> unit_expert_params;
  int edp = 1;  ///< expert data-parallel size, dp x cp / ep (Megatron-core)
  PassRoles roles;
  std::vector<Replica> replicas;          ///< simulated replicas; [0] is the representative
  std::vector<std::vector<SimGpu>> gpus;  ///< [replica][stage]
  std::vector<int> rank_to_replica;       ///< global rank -> replica index, -1 if not simulated
  /// [replica][pass_key]: forward and backward (or Bi) pass tasks, for cross-stage deps.
  std::vector<std::vector<PassTasks>> pass_tasks;
  std::vector<sim::TaskId> all_pass_tasks;  ///< the last task of every pass
  std::vector<sim::TaskId> pp_tasks;        ///< the representative's pipeline transfers
  /// Every simulated pipeline transfer with its ranks, for the trace (keep_timeline only).
  struct Transfer {
    sim::TaskId task;
    int src_rank;
    int dst_rank;
  };
  std::vector<Transfer> pp_transfers;
  std::vector<RepStage> reps;  ///< by stage
  /// Model-parallel comm seconds by dimension, summed over the representative's stages.
  std::array<double, models::DIM_COUNT> comm_total{};
  /// Of which hidden behind compute (tp_comm_overlap), by dimension.
  std::array<double, models::DIM_COUNT> comm_hidden{};
  double optimizer_time_s = 0;  ///< mean over stages
  /// Trace category of every task (filled only when the timeline is kept).
  std::vector<TraceCategory> category;
  /// Every pass's collectives on every simulated GPU (filled only when the timeline is kept).
  std::vector<TracedPart> traced_parts;
  /// [replica][stage]: the global ranks a simulated GPU stands for (itself in full mode).
  std::vector<std::vector<std::vector<int>>> represents;
  /// Symmetric mode, [replica][stage x steps + step]: the GPU type and straggler factor of the
  /// slowest rank it stands for (the role it was chosen by); empty in full mode.
  std::vector<std::vector<std::pair<int, double>>> replica_roles;

  // Several steps (SimulateOptions::steps): lowered one after another into one engine.
  int step = 0;  ///< the step being lowered
  /// [step]: the first task id of its lowering.
  std::vector<sim::TaskId> step_first_task;
  /// [step][replica]: the tasks whose end ends that replica's step (its optimizer steps, a
  /// parameter server's applies of its pushes).
  std::vector<std::vector<std::vector<sim::TaskId>>> step_ends;
  /// The data-parallel design of each stage, made for the first step and kept for the rest.
  std::vector<std::unique_ptr<DataParallelLowering>> designs;

  /// The share of a whole simulation each stage of simulate_step takes, for
  /// SimulateOptions::progress: a stage reports [begin, end] of it. Measured on Llama-3-405B,
  /// 16,384 GPUs, full mode (passes 7%, pipeline transfers 33%, data parallel 48%, engine
  /// 12%): a progress bar's scale, not a promise.
  struct ProgressSpan {
    double begin = 0;
    double end = 0;
  };
  static constexpr ProgressSpan PASSES_PROGRESS{0.0, 0.07};
  static constexpr ProgressSpan PIPELINE_PROGRESS{0.07, 0.40};
  static constexpr ProgressSpan DATA_PARALLEL_PROGRESS{0.40, 0.88};
  static constexpr ProgressSpan ENGINE_PROGRESS{0.88, 1.0};
  /// Reports `done` of `total` units of the stage spanning `span` to SimulateOptions::progress.
  void report_progress(ProgressSpan span, double done, double total) const {
    if (options.progress && total > 0)
      options.progress(span.begin + (span.end - span.begin) * done / total);
  }

  int stages() const { return plan.pp; }
  /// Number of steps simulated.
  int steps() const { return options.steps; }
  /// The costed work on GPU type `type`.
  const StageWork& work_of(int type) const;
  /// The kernel model of GPU type `type`.
  const topo::KernelTimeModel& kernels_of(int type) const;
  /// Compute seconds of one micro-batch through every chunk of `stage` on GPU type `type`
  /// (forward, backward, recompute).
  double stage_seconds(int type, int stage) const;
  /// Starts lowering step `k` (0, 1, ... in order): sets every simulated GPU's straggler
  /// factor and, from the second step on, sets aside the first step's measurements and
  /// clears the per-step task maps.
  void begin_step(int k);
  /// After the last step: puts the first step's measurements back for the report.
  void end_steps();
  int chunks() const { return plan.vpp; }
  int micro_batches() const { return schedule.micro_batches; }
  /// Index into pass_tasks: `backward` false for F, true for B or Bi.
  size_t pass_key(bool backward, int micro_batch, int virtual_stage) const;
  /// Whether pass `pass_index` of `stage` is lowered unit by unit (so DP work can hang on
  /// single units): every pass under ZeRO-3; a chunk's final weight-gradient pass with
  /// --overlap-grad-reduce; its first forward with --overlap-param-gather (ZeRO-1/2); every
  /// forward under DataParallel; the first forward and final backward of parameter-server
  /// workers.
  bool split_pass(int stage, int pass_index) const;
  /// The simulated GPU holding `rank`, or nullptr.
  const SimGpu* gpu_of(int rank, int stage) const;

  /// A compute task of `seconds` on `stream`, recorded under `category` for the trace.
  sim::TaskId add_compute(sim::StreamId stream, double seconds, std::string label,
                          TraceCategory category, const std::vector<sim::TaskId>& deps = {});
  /// A collective of `op` over `group`, on the given stream of every simulated member (the
  /// others hold none), recorded under `category`. Returns its task.
  sim::TaskId add_collective(sim::CollectiveOp op, double bytes, const std::vector<int>& group,
                             std::vector<sim::StreamId> streams,
                             std::vector<std::vector<int>> concurrent, std::string label,
                             TraceCategory category, const std::vector<sim::TaskId>& deps = {});
  /// Collectives run back to back over `group` (Engine::add_collective_sequence), each
  /// recorded under `category`. Returns the first and last task; fills `frozen_ps` (when not
  /// null) with each collective's time if the engine froze the run into one task.
  std::pair<sim::TaskId, sim::TaskId> add_collective_sequence(
      const std::vector<std::pair<sim::CollectiveOp, double>>& ops, const std::vector<int>& group,
      const std::vector<sim::StreamId>& streams, const std::string& label, TraceCategory category,
      std::vector<sim::SimTime>* frozen_ps = nullptr, const std::vector<sim::TaskId>& deps = {});
  /// A point-to-point transfer (sim::TransferSpec: ranks or device vertices), recorded under
  /// `category`. Returns its task.
  sim::TaskId add_transfer(const sim::TransferSpec& spec, TraceCategory category,
                           const std::vector<sim::TaskId>& deps = {});
  /// A compute task of `seconds` on `stream` stretched by the straggler factor of simulated
  /// GPU (`replica`, `stage`), recorded under `category`.
  sim::TaskId add_gpu_compute(size_t replica, int stage, sim::StreamId stream, double seconds,
                              std::string label, TraceCategory category,
                              const std::vector<sim::TaskId>& deps = {});
  /// Labels only feed the timeline (--trace): formatted only when it is kept.
  template <typename... Args>
  std::string label(fmt::format_string<Args...> format, Args&&... args) const {
    if (!options.keep_timeline) return {};
    return fmt::format(format, std::forward<Args>(args)...);
  }

 private:
  void record(sim::TaskId id, TraceCategory category);
  void choose_replicas();
  // The first step's measurements while later steps are lowered (begin_step, end_steps).
  struct FirstStep {
    std::vector<RepStage> reps;
    std::vector<sim::TaskId> all_pass_tasks, pp_tasks;
    double optimizer_time_s = 0;
    std::vector<std::vector<PassTasks>> pass_tasks;
  };
  FirstStep first_;
};

/// The engine settings a simulated step runs with (network mode, frozen or live collectives,
/// measured collective times, the fitted collective factor).
sim::EngineOptions engine_options(const SimulateOptions& options);

/// Whether `pass` ends the weight gradients of its micro-batch and chunk: a B pass, or a W
/// pass under zero-bubble (whose Bi computes no weight gradients).
bool ends_weight_gradients(const Pass& pass);

/// Fraction of `gpu`'s SMs NCCL's kernels occupy while a collective runs: one CTA per
/// channel (NCCL launches its kernels with one block per channel, src/enqueue.cc; a block of
/// up to NCCL_MAX_NTHREADS = 640 threads holds an SM a GEMM tile would use), with loom's
/// channel count (sim::nccl_channels: two per NVLink, at most MAXCHANNELS = 32); at most 0.5.
double comm_sm_share(const topo::GpuSpec& gpu);
/// Factor by which compute overlapping a data-parallel collective is stretched: a
/// compute-bound kernel keeps 1 - share of the SMs, so 1 / (1 - comm_sm_share) (an upper
/// bound: memory-bound kernels lose less). H100 SXM: 32 / 132 SMs -> 1.32x.
double overlap_slowdown(const topo::GpuSpec& gpu);

/// Compute slowdown (>= 1) of global rank `rank` in step `step`: its fixed straggler factor
/// times, when it draws as a random straggler, 1 + an exponential of mean mean_factor - 1.
double straggler_factor(const SimulateOptions& options, int step, int rank);

/// Seconds to picoseconds of simulated time.
inline sim::SimTime to_ps(double seconds) {
  return sim::to_sim_time(seconds);
}

}  // namespace loom::strategies
