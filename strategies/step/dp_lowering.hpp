#pragma once
// Lowering of data-parallel communication and the optimizer step, one data-parallel group of
// one pipeline stage at a time. Each data-parallel design is one implementation of
// DataParallelLowering: plain DDP and ZeRO-1/2 (gradient buckets, sharded parameter
// gathers; dp_bucketed.cpp), ZeRO-3/FSDP (per-unit gathers and reduce-scatters;
// dp_fsdp.cpp), parameter servers (pulls, pushes and server-side updates under sync, async,
// bounded-staleness or GEO rules; dp_parameter_server.cpp) and single-process DataParallel
// (scatter, replicate, GIL-serialised launches, gather, loss and optimizer on GPU 0;
// dp_single_process.cpp). A design is made once per stage and lowers every step in turn
// (StepGraph::step); it may keep state across steps.
//
// With expert parallelism (ep > 1) the routed experts' parameters form a second set: their
// gradients are reduced (and, sharded, their parameters gathered) over the expert
// data-parallel group (EDP: dp x cp / ep ranks holding the same experts), the dense ones over
// the DP group, as Megatron-core keeps separate expert buffers reduced over
// expert_data_parallel_group (megatron/core/distributed/distributed_data_parallel.py).
//
// In symmetric mode only the representative is simulated: its group's collective holds its
// stream alone, and the identical DP groups of its TP/CP peers run as concurrent traffic. In
// full mode every group is issued once, holding every simulated member's stream.
#include <memory>
#include <vector>

#include "strategies/step/step_graph.hpp"

namespace loom::strategies {

/// Which parameters a data-parallel group handles (see file comment).
enum class ParamSet { DENSE, EXPERT };

/// Parameters of unit `u` of virtual stage `vs` in `set` (without expert parallelism every
/// parameter is DENSE).
double unit_params(const StepGraph& graph, int vs, int u, ParamSet set);

/// One data-parallel group of one stage, and the helpers a design lowers it with.
class DpGroup {
 public:
  DpGroup(StepGraph& graph, int stage, ParamSet set, std::vector<int> ranks,
          std::vector<int> members, std::vector<std::vector<int>> concurrent);

  StepGraph& graph() const { return g_; }
  int stage() const { return stage_; }
  /// The parameters this group reduces: dense over DP, or experts over EDP.
  ParamSet set() const { return set_; }
  /// "dp" or "edp", for labels.
  const char* name() const { return set_ == ParamSet::EXPERT ? "edp" : "dp"; }
  /// Parameters of unit `u` of virtual stage `vs` in this group's set.
  double params(int vs, int u) const { return unit_params(g_, vs, u, set_); }
  /// Simulated replicas in the group (replica indices).
  const std::vector<int>& members() const { return members_; }
  /// The simulated GPU of member `k` on this stage.
  const SimGpu& gpu(size_t k) const;
  /// The tasks of unit `unit` of pass `pass_index` on member `k` (split passes only).
  const PassTasks& unit_tasks(size_t k, int pass_index, int unit) const;
  /// One collective over the group on every member's dp stream (`gather_stream`: the
  /// ZeRO-3 gather stream), waiting for `deps`; counted into the representative's DP
  /// measurements (`gather`: also as a gather its compute waits on).
  sim::TaskId collective(sim::CollectiveOp op, double bytes, std::string label, bool gather_stream,
                         const std::vector<sim::TaskId>& deps, bool gather = false);

 private:
  StepGraph& g_;
  int stage_;
  ParamSet set_;
  std::vector<int> ranks_;  // the DP group's global ranks; empty without data parallelism
  std::vector<int> members_;
  std::vector<std::vector<int>> concurrent_;
  bool has_rep_;
};

/// The data-parallel groups of one stage to lower: the dense groups (over DP), then the
/// expert groups (over EDP; none without expert parallelism or when EDP has one rank).
struct StageGroups {
  std::vector<DpGroup> dense;
  std::vector<DpGroup> expert;
};

/// One data-parallel design (see file comment).
class DataParallelLowering {
 public:
  virtual ~DataParallelLowering() = default;
  /// Issues the groups' collectives that precede the optimizer step; returns, per simulated
  /// replica, the tasks its optimizer step on this stage waits for.
  virtual std::vector<std::vector<sim::TaskId>> before_optimizer(StageGroups& groups) = 0;
  /// Issues the collectives that follow the optimizer step (`optimizer`: per replica).
  virtual void after_optimizer(StageGroups& groups, const std::vector<sim::TaskId>& optimizer);
  /// Whether the optimizer state is sharded over the groups (ZeRO >= 1).
  virtual bool sharded() const = 0;
  /// Adds the optimizer step of `stage` after `waits` (per replica); returns its task per
  /// replica, -1 where a replica runs none. Default: every replica steps its (sharded when
  /// sharded()) parameters on its compute stream (lower_optimizer).
  virtual std::vector<sim::TaskId> optimizer(StepGraph& graph, int stage,
                                             const std::vector<std::vector<sim::TaskId>>& waits);
  /// After the engine ran: the design's own figures (breakdown, staleness, device memory).
  virtual void measure(const StepGraph& graph, DesignReport& report) const;
};

/// The optimizer step of `stage`, memory-bound over each replica's local parameters (dense
/// over DP and experts over EDP when `sharded`) on its GPU type, on its compute stream after
/// its last backward and `waits` (per replica); only `replicas` when not empty. Returns the
/// task per replica (-1 where none runs).
std::vector<sim::TaskId> lower_optimizer(StepGraph& graph, int stage,
                                         const std::vector<std::vector<sim::TaskId>>& waits,
                                         bool sharded, const std::vector<int>& replicas = {});
/// Seconds during which at least one of `tasks` ran (the union of their intervals; -1
/// entries skipped), after the engine ran.
double union_seconds(const sim::Engine& engine, const std::vector<sim::TaskId>& tasks);
/// Parameters of `stage` in `set` on one GPU.
double stage_params(const StepGraph& graph, int stage, ParamSet set);
/// Parameters of `stage` one replica's optimizer steps: dense over DP and experts over EDP
/// when `sharded`, all of them otherwise.
double local_params(const StepGraph& graph, int stage, bool sharded);
/// Whether replica `ri` is among `replicas` (every replica when it is empty).
bool among(const std::vector<int>& replicas, size_t ri);

/// The design the plan selects for `stage` (no DP communication when plan.dp == 1).
std::unique_ptr<DataParallelLowering> make_dp_lowering(StepGraph& graph, int stage);
/// DDP (zero 0) and ZeRO-1/2: gradient buckets, with sharded gathers when zero >= 1.
std::unique_ptr<DataParallelLowering> make_bucketed_lowering(const StepGraph& graph, int stage);
/// ZeRO-3 / FSDP: the design plan.fsdp_impl names (PyTorch FSDP2 or DeepSpeed ZeRO-3).
std::unique_ptr<DataParallelLowering> make_fsdp_lowering(const StepGraph& graph, int stage);
/// Parameter servers (plan.dp_mode PS; one stage).
std::unique_ptr<DataParallelLowering> make_parameter_server_lowering(StepGraph& graph);
/// Single-process DataParallel (plan.dp_mode DATAPARALLEL; one stage).
std::unique_ptr<DataParallelLowering> make_single_process_lowering(StepGraph& graph);
/// Under DataParallel, moves the loss out of every replica's head (GPU 0 computes it over
/// the gathered outputs). Call before the passes are lowered.
void remove_replica_loss(StepGraph& graph);
/// Whether ZeRO-3 gathers `unit` (the embedding, a layer or the head) again for its backward:
/// under DeepSpeed unless deepspeed_keeps_for_backward (the units near the model's end); under
/// FSDP2 with reshard_after_forward, except the root units and
/// the model's last block (torchtitan's default policy).
bool fsdp_regathers_in_backward(const StepGraph& graph, const Unit& unit);
/// Bytes FSDP2's all-gather copy-in moves per local shard element (cast + flat copy).
double fsdp2_copy_in_bytes_per_elem(const models::TrainingPlan& plan);
/// DeepSpeed ZeRO-3 all-gathers for a unit of `params` elements with a prefetch bucket of
/// `bucket_elems`: ceil(params / bucket), at least one (0 for no parameters).
int deepspeed_gathers(double params, std::int64_t bucket_elems);
/// DeepSpeed stage3_param_persistence_threshold's default, elements: parameters smaller than
/// this are persisted whole on every rank, never gathered (deepspeed/runtime/zero/config.py
/// param_persistence_threshold = 1e5; partition_parameters.py ds_persist); the plan's
/// ds_persistence_threshold.
inline constexpr double DEEPSPEED_PERSISTENCE_THRESHOLD = 1e5;
/// DeepSpeed stage3_max_reuse_distance, elements (config.py max_reuse_distance = 1e9).
inline constexpr double DEEPSPEED_MAX_REUSE_DISTANCE = 1e9;
/// DeepSpeed ZeRO-3's all-gathers of one unit use, in elements each: its parameter tensors
/// (`tensors`, in use order) less the persisted ones (below `persistence_threshold`), coalesced as
/// the coordinator's prefetch takes them (partitioned_param_coordinator.py fetch_sub_module: whole
/// parameters off the trace queue until the batch holds `bucket_elems` or more, one
/// all_gather_coalesced each).
std::vector<double> deepspeed_gather_groups(
    const std::vector<double>& tensors, std::int64_t bucket_elems,
    double persistence_threshold = DEEPSPEED_PERSISTENCE_THRESHOLD);
/// Whether DeepSpeed keeps a unit gathered from its forward to its backward: the coordinator
/// releases a submodule's parameters after its forward unless they recur within
/// stage3_max_reuse_distance elements of the module trace (__params_to_release), and between
/// a unit's forward and backward come the forward and the backward of every later unit
/// (`params_after` elements: 2 x params_after traversed).
bool deepspeed_keeps_for_backward(double params_after);
/// Bytes per element of DeepSpeed ZeRO-3's gradient reduce-scatter: its
/// communication_data_type, by default the training dtype (2 under fp16 / bf16).
double deepspeed_reduce_bytes(const models::TrainingPlan& plan);
/// Under ZeRO-3 (dp > 1), adds the all-gather copy-out (read + write of the gathered unit, a
/// memory-bound kernel on the compute stream) to each unit's forward and, when it is
/// re-gathered, backward seconds. Call before the passes are lowered.
void add_fsdp_copy_out(StepGraph& graph);
/// Adds `tasks` to `waits[replica]` for each member of `group` (`tasks`: per member).
void add_member_waits(const DpGroup& group, const std::vector<std::vector<sim::TaskId>>& tasks,
                      std::vector<std::vector<sim::TaskId>>& waits);

/// Adds every stage's data-parallel communication and optimizer steps of the step being
/// lowered (StepGraph::step) to `graph`, and each replica's step-end tasks.
void lower_data_parallel(StepGraph& graph);

/// Bytes of one parameter as gathered between data-parallel ranks (its 16- or 32-bit copy).
double gathered_param_bytes(const models::TrainingPlan& plan);
/// Bytes of one gradient element as reduced (the gradient accumulation dtype).
double reduced_grad_bytes(const models::TrainingPlan& plan);

}  // namespace loom::strategies
