#include "strategies/step/dp_lowering.hpp"

#include <algorithm>

#include "models/memory.hpp"

namespace loom::strategies {

using sim::TaskId;

double gathered_param_bytes(const models::TrainingPlan& plan) {
  return plan.precision == models::Precision::FP32 ? 4.0 : 2.0;
}

double reduced_grad_bytes(const models::TrainingPlan& plan) {
  return plan.grad_dtype == models::GradDtype::FP32 ? 4.0 : 2.0;
}

DpGroup::DpGroup(StepGraph& graph, int stage, std::vector<int> ranks, std::vector<int> members,
                 std::vector<std::vector<int>> concurrent)
    : g_(graph),
      stage_(stage),
      ranks_(std::move(ranks)),
      members_(std::move(members)),
      concurrent_(std::move(concurrent)),
      has_rep_(std::find(members_.begin(), members_.end(), 0) != members_.end()) {}

const SimGpu& DpGroup::gpu(size_t k) const {
  return g_.gpus[static_cast<size_t>(members_[k])][static_cast<size_t>(stage_)];
}

const PassTasks& DpGroup::unit_tasks(size_t k, int pass_index, int unit) const {
  return gpu(k).units[static_cast<size_t>(pass_index)][static_cast<size_t>(unit)];
}

TaskId DpGroup::collective(sim::CollectiveOp op, double bytes, std::string label,
                           bool gather_stream, const std::vector<TaskId>& deps, bool gather) {
  std::vector<sim::StreamId> streams(ranks_.size(), sim::NO_STREAM);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const SimGpu* h = g_.gpu_of(ranks_[i], stage_);
    if (h) streams[i] = gather_stream ? h->ag : h->dp;
  }
  const TaskId id = g_.add_collective(op, bytes, ranks_, std::move(streams), concurrent_,
                                      std::move(label), TraceCategory::DP, deps);
  if (has_rep_) {
    RepStage& rep = g_.reps[static_cast<size_t>(stage_)];
    rep.dp.push_back(id);
    if (gather) rep.gather.push_back(id);
    rep.dp_bytes += (op == sim::CollectiveOp::ALL_REDUCE ? 2.0 : 1.0) * bytes;
  }
  return id;
}

void DataParallelLowering::after_optimizer(DpGroup&, const std::vector<TaskId>&) {}

namespace {

// Without data parallelism: no collectives, an unsharded optimizer step.
class NoDataParallel final : public DataParallelLowering {
 public:
  std::vector<std::vector<TaskId>> before_optimizer(DpGroup& group) override {
    return std::vector<std::vector<TaskId>>(group.members().size());
  }
  double optimizer_shards() const override { return 1.0; }
};

// The groups of stage `s` to lower: in symmetric mode the representative's; in full mode
// every group once (its first member issues it for all).
std::vector<DpGroup> stage_groups(StepGraph& g, int s) {
  std::vector<DpGroup> out;
  for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
    const int rank = g.gpus[ri][static_cast<size_t>(s)].rank;
    if (g.plan.dp <= 1) {
      out.emplace_back(g, s, std::vector<int>{}, std::vector<int>{static_cast<int>(ri)},
                       std::vector<std::vector<int>>{});
      continue;
    }
    const std::vector<int>& group = g.index.group(rank, Dim::DP);
    std::vector<int> members{static_cast<int>(ri)};
    if (g.options.full) {
      if (group.front() != rank) continue;
      members.clear();
      for (int r : group) members.push_back(g.rank_to_replica[static_cast<size_t>(r)]);
    }
    // The identical DP groups of its TP/CP peers run at the same time on the same nodes.
    std::vector<std::vector<int>> concurrent;
    for (int peer : g.index.group(rank, Dim::TP))
      if (peer != rank) concurrent.push_back(g.index.group(peer, Dim::DP));
    for (int peer : g.index.group(rank, Dim::CP))
      if (peer != rank) concurrent.push_back(g.index.group(peer, Dim::DP));
    out.emplace_back(g, s, group, std::move(members), std::move(concurrent));
  }
  return out;
}

// The optimizer step, memory-bound over the local shard, on each member's compute stream
// after its last backward and the collectives it waits for. Returns the tasks per member.
std::vector<TaskId> lower_optimizer(DpGroup& group, const std::vector<std::vector<TaskId>>& waits,
                                    double shards) {
  StepGraph& g = group.graph();
  const int s = group.stage();
  double stage_params = 0;
  for (int c = 0; c < g.chunks(); ++c)
    stage_params += g.work.chunk_cost[g.schedule.virtual_stage(s, c)].params;
  topo::KernelOp step;
  step.kind = topo::KernelKind::OPTIMIZER;
  step.bytes = stage_params / shards * models::optimizer_step_bytes_per_param(g.plan);
  const double opt_s =
      g.kernels->seconds(step, topo::KernelPass::FORWARD, compute_dtype(g.plan.precision));
  std::vector<TaskId> opts;
  for (size_t k = 0; k < group.members().size(); ++k) {
    const SimGpu& h = group.gpu(k);
    std::vector<TaskId> deps = waits[k];
    deps.push_back(h.last_backward);
    const TaskId opt = g.add_compute(h.compute, opt_s, "optimizer", TraceCategory::OPTIMIZER, deps);
    opts.push_back(opt);
    if (group.members()[k] == 0) {
      g.optimizer_time_s += opt_s / g.stages();
      g.reps[static_cast<size_t>(s)].compute.push_back(opt);
    }
  }
  return opts;
}

}  // namespace

std::unique_ptr<DataParallelLowering> make_dp_lowering(const StepGraph& g, int stage) {
  if (g.plan.dp <= 1) return std::make_unique<NoDataParallel>();
  if (g.plan.zero >= 3) return make_fsdp_lowering(g, stage);
  return make_bucketed_lowering(g, stage);
}

void lower_data_parallel(StepGraph& g) {
  for (int s = 0; s < g.stages(); ++s) {
    const auto design = make_dp_lowering(g, s);
    for (DpGroup& group : stage_groups(g, s)) {
      const auto waits = design->before_optimizer(group);
      const auto opts = lower_optimizer(group, waits, design->optimizer_shards());
      design->after_optimizer(group, opts);
    }
  }
}

}  // namespace loom::strategies
