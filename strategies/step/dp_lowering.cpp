#include "strategies/step/dp_lowering.hpp"

#include <algorithm>

#include "models/memory.hpp"
#include "strategies/step/zero_offload.hpp"

namespace loom::strategies {

using sim::TaskId;

double gathered_param_bytes(const models::TrainingPlan& plan) {
  return plan.precision == models::Precision::FP32 ? 4.0 : 2.0;
}

double reduced_grad_bytes(const models::TrainingPlan& plan) {
  return plan.grad_dtype == models::GradDtype::FP32 ? 4.0 : 2.0;
}

double unit_params(const StepGraph& g, int vs, int u, ParamSet set) {
  const double all = g.work.units[static_cast<size_t>(vs)][static_cast<size_t>(u)].cost.params;
  if (g.unit_expert_params.empty()) return set == ParamSet::DENSE ? all : 0.0;
  const double expert = g.unit_expert_params[static_cast<size_t>(vs)][static_cast<size_t>(u)];
  return set == ParamSet::DENSE ? all - expert : expert;
}

DpGroup::DpGroup(StepGraph& graph, int stage, ParamSet set, std::vector<int> ranks,
                 std::vector<int> members, std::vector<std::vector<int>> concurrent)
    : g_(graph),
      stage_(stage),
      set_(set),
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

void DataParallelLowering::after_optimizer(StageGroups&, const std::vector<TaskId>&) {}

std::vector<TaskId> DataParallelLowering::optimizer(StepGraph& g, int stage,
                                                    const std::vector<std::vector<TaskId>>& waits) {
  return lower_optimizer(g, stage, waits, sharded());
}

void DataParallelLowering::measure(const StepGraph&, DesignReport&) const {}

void add_member_waits(const DpGroup& group, const std::vector<std::vector<TaskId>>& tasks,
                      std::vector<std::vector<TaskId>>& waits) {
  for (size_t k = 0; k < group.members().size(); ++k) {
    auto& w = waits[static_cast<size_t>(group.members()[k])];
    w.insert(w.end(), tasks[k].begin(), tasks[k].end());
  }
}

namespace {

// Without data parallelism: no collectives, an unsharded optimizer step.
class NoDataParallel final : public DataParallelLowering {
 public:
  explicit NoDataParallel(size_t replicas) : replicas_(replicas) {}
  std::vector<std::vector<TaskId>> before_optimizer(StageGroups&) override {
    return std::vector<std::vector<TaskId>>(replicas_);
  }
  bool sharded() const override { return false; }

 private:
  size_t replicas_;
};

// The groups of `dim` (DP for dense parameters, EDP for experts) of stage `s` to lower:
// every group with a simulated member once, issued by its first simulated member for all its
// simulated members (in symmetric mode the representatives of distinct roles).
std::vector<DpGroup> stage_groups(StepGraph& g, int s, ParamSet set) {
  const Dim dim = set == ParamSet::DENSE ? Dim::DP : Dim::EDP;
  // The identical groups of its peers run at the same time on the same nodes: a dense
  // group's TP and CP peers, an expert group's TP and EP peers.
  const Dim peers[2] = {Dim::TP, set == ParamSet::DENSE ? Dim::CP : Dim::EP};
  std::vector<DpGroup> out;
  for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
    const int rank = g.gpus[ri][static_cast<size_t>(s)].rank;
    const std::vector<int>& group = g.index.group(rank, dim);
    // Issued by its first simulated member (ri is one): skip it unless none comes before ri,
    // checked before building the member list (full mode visits dp groups of dp members).
    const auto issued_earlier = [&](int r) {
      const int rj = g.rank_to_replica[static_cast<size_t>(r)];
      return rj >= 0 && rj < static_cast<int>(ri);
    };
    if (std::any_of(group.begin(), group.end(), issued_earlier)) continue;
    std::vector<int> members;
    for (int r : group) {
      const int rj = g.rank_to_replica[static_cast<size_t>(r)];
      if (rj >= 0) members.push_back(rj);
    }
    std::vector<std::vector<int>> concurrent;
    for (Dim d : peers)
      for (int peer : g.index.group(rank, d))
        if (peer != rank) concurrent.push_back(g.index.group(peer, dim));
    out.emplace_back(g, s, set, group, std::move(members), std::move(concurrent));
  }
  return out;
}

}  // namespace

double stage_params(const StepGraph& g, int s, ParamSet set) {
  double sum = 0;
  for (int c = 0; c < g.chunks(); ++c) {
    const int vs = g.schedule.virtual_stage(s, c);
    for (size_t u = 0; u < g.work.units[static_cast<size_t>(vs)].size(); ++u)
      sum += unit_params(g, vs, static_cast<int>(u), set);
  }
  return sum;
}

std::vector<TaskId> lower_optimizer(StepGraph& g, int s,
                                    const std::vector<std::vector<TaskId>>& waits, bool sharded,
                                    const std::vector<int>& only) {
  // ZeRO-Offload without a bucketed design (one GPU): the whole partition goes to the host.
  if (g.plan.offload_optimizer == models::Offload::CPU)
    return lower_offloaded_optimizer(g, s, waits, sharded, false, only);
  topo::KernelOp step;
  step.kind = topo::KernelKind::OPTIMIZER;
  step.bytes = local_params(g, s, sharded) * models::optimizer_step_bytes_per_param(g.plan);
  std::vector<TaskId> opts(g.replicas.size(), -1);
  for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
    if (!among(only, ri)) continue;
    const SimGpu& h = g.gpus[ri][static_cast<size_t>(s)];
    const double opt_s =
        g.kernels_of(h.gpu_type)
            .seconds(step, topo::KernelPass::FORWARD, compute_dtype(g.plan.precision));
    std::vector<TaskId> deps = waits[ri];
    deps.push_back(h.last_backward);
    const TaskId opt =
        g.add_gpu_compute(ri, s, h.compute, opt_s, "optimizer", TraceCategory::OPTIMIZER, deps);
    opts[ri] = opt;
    if (ri == 0) {
      g.optimizer_time_s += opt_s * h.factor / g.stages();
      g.reps[static_cast<size_t>(s)].compute.push_back(opt);
    }
  }
  return opts;
}

double local_params(const StepGraph& g, int s, bool sharded) {
  const double dense = stage_params(g, s, ParamSet::DENSE);
  const double expert = g.unit_expert_params.empty() ? 0.0 : stage_params(g, s, ParamSet::EXPERT);
  return sharded ? dense / g.plan.dp + expert / g.edp : dense + expert;
}

bool among(const std::vector<int>& replicas, size_t ri) {
  return replicas.empty() ||
         std::find(replicas.begin(), replicas.end(), static_cast<int>(ri)) != replicas.end();
}

double union_seconds(const sim::Engine& e, const std::vector<TaskId>& tasks) {
  std::vector<std::pair<sim::SimTime, sim::SimTime>> iv;
  for (TaskId t : tasks)
    if (t >= 0) iv.push_back({e.start(t), e.finish(t)});
  std::sort(iv.begin(), iv.end());
  sim::SimTime sum = 0, end = 0;
  for (const auto& [a, b] : iv) {
    if (b <= end) continue;
    sum += b - std::max(a, end);
    end = b;
  }
  return sim::to_seconds(sum);
}

std::unique_ptr<DataParallelLowering> make_dp_lowering(StepGraph& g, int stage) {
  if (g.plan.dp_mode == models::DpMode::PS) return make_parameter_server_lowering(g);
  if (g.plan.dp_mode == models::DpMode::DATAPARALLEL) return make_single_process_lowering(g);
  if (g.plan.dp <= 1) return std::make_unique<NoDataParallel>(g.replicas.size());
  if (g.plan.zero >= 3) return make_fsdp_lowering(g, stage);
  return make_bucketed_lowering(g, stage);
}

void lower_data_parallel(StepGraph& g) {
  if (g.designs.empty())
    for (int s = 0; s < g.stages(); ++s) g.designs.push_back(make_dp_lowering(g, s));
  auto& ends = g.step_ends[static_cast<size_t>(g.step)];
  for (int s = 0; s < g.stages(); ++s) {
    DataParallelLowering& design = *g.designs[static_cast<size_t>(s)];
    StageGroups groups;
    if (g.plan.dp > 1 && g.plan.dp_mode == models::DpMode::DDP) {
      groups.dense = stage_groups(g, s, ParamSet::DENSE);
      if (!g.unit_expert_params.empty() && g.edp > 1)
        groups.expert = stage_groups(g, s, ParamSet::EXPERT);
    }
    const auto waits = design.before_optimizer(groups);
    const auto opts = design.optimizer(g, s, waits);
    for (size_t ri = 0; ri < opts.size(); ++ri)
      if (opts[ri] >= 0) ends[ri].push_back(opts[ri]);
    design.after_optimizer(groups, opts);
    g.report_progress(StepGraph::DATA_PARALLEL_PROGRESS, s + 1, g.stages());
  }
}

}  // namespace loom::strategies
