// ZeRO-3 / FSDP: every use of a unit's parameters (its forward, its backward; each
// micro-batch) all-gathers them on the gather stream just before. With prefetch the gather
// of use i waits only for use i-2 to finish (at most two units gathered at once, the memory
// model's buffers), without it for use i-1. Gradients are reduce-scattered per unit after
// each weight-gradient pass (every micro-batch: they are sharded). With expert parallelism a
// unit's expert parameters are gathered and reduced over the expert data-parallel group,
// each right after its dense part, so every stream sees the collectives in use order.
#include "strategies/step/dp_lowering.hpp"

namespace loom::strategies {
namespace {

using sim::CollectiveOp;
using sim::TaskId;

class FsdpLowering final : public DataParallelLowering {
 public:
  FsdpLowering(const StepGraph& g, int s) : g_(g), s_(s) {
    const auto& order = g.schedule.per_stage[s];
    for (int pi = 0; pi < static_cast<int>(order.size()); ++pi) {
      const Pass& pass = order[static_cast<size_t>(pi)];
      const int n = static_cast<int>(units_of(pass).size());
      for (int k = 0; k < n; ++k) {
        const int u = pass.kind == PassKind::FORWARD ? k : n - 1 - k;
        if (pass.kind != PassKind::BACKWARD_WEIGHT) uses_.push_back({pi, u});
        if (pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT)
          grads_.push_back({pi, u});
      }
    }
  }

  std::vector<std::vector<TaskId>> before_optimizer(StageGroups& groups) override {
    for (size_t i = 0; i < uses_.size(); ++i) {
      for (DpGroup& group : groups.dense) gather_use(group, i);
      for (DpGroup& group : groups.expert) gather_use(group, i);
    }
    std::vector<std::vector<TaskId>> waits(g_.replicas.size());
    for (const auto& [pi, u] : grads_) {
      for (DpGroup& group : groups.dense) reduce_grad(group, pi, u, waits);
      for (DpGroup& group : groups.expert) reduce_grad(group, pi, u, waits);
    }
    return waits;
  }

  bool sharded() const override { return true; }

 private:
  const std::vector<Unit>& units_of(const Pass& pass) const {
    return g_.work.units[static_cast<size_t>(g_.schedule.virtual_stage(s_, pass.chunk))];
  }
  const Pass& pass_at(int pass_index) const {
    return g_.schedule.per_stage[s_][static_cast<size_t>(pass_index)];
  }

  // The gather of use `i` over `group`, waiting (per member) for use i - ahead to finish.
  void gather_use(DpGroup& group, size_t i) {
    StepGraph& g = group.graph();
    const size_t ahead = g.options.fsdp_prefetch ? 2 : 1;
    const auto [pi, u] = uses_[i];
    const Pass& pass = pass_at(pi);
    const double params = group.params(g.schedule.virtual_stage(s_, pass.chunk), u);
    if (params <= 0) return;
    std::vector<TaskId> deps;
    if (i >= ahead)
      for (size_t k = 0; k < group.members().size(); ++k)
        deps.push_back(group.unit_tasks(k, uses_[i - ahead].first, uses_[i - ahead].second).last);
    const TaskId id = group.collective(
        CollectiveOp::ALL_GATHER, params * gathered_param_bytes(g.plan),
        g.label("{}-ag {} mb{} c{} {}", group.name(), to_string(pass.kind), pass.micro_batch,
                pass.chunk, units_of(pass)[static_cast<size_t>(u)].name),
        true, deps, true);
    for (size_t k = 0; k < group.members().size(); ++k)
      g.engine.add_dependency(id, group.unit_tasks(k, pi, u).first);
  }

  // The reduce-scatter of unit `u`'s gradients after pass `pi`, added to its members' waits.
  void reduce_grad(DpGroup& group, int pi, int u, std::vector<std::vector<TaskId>>& waits) {
    StepGraph& g = group.graph();
    const Pass& pass = pass_at(pi);
    const double params = group.params(g.schedule.virtual_stage(s_, pass.chunk), u);
    if (params <= 0) return;
    std::vector<TaskId> deps;
    for (size_t k = 0; k < group.members().size(); ++k)
      deps.push_back(group.unit_tasks(k, pi, u).last);
    const TaskId id =
        group.collective(CollectiveOp::REDUCE_SCATTER, params * reduced_grad_bytes(g.plan),
                         g.label("{}-rs mb{} c{} {}", group.name(), pass.micro_batch, pass.chunk,
                                 units_of(pass)[static_cast<size_t>(u)].name),
                         false, deps);
    for (int ri : group.members()) waits[static_cast<size_t>(ri)].push_back(id);
  }

  const StepGraph& g_;
  int s_;
  std::vector<std::pair<int, int>> uses_, grads_;  // (pass index, unit)
};

}  // namespace

std::unique_ptr<DataParallelLowering> make_fsdp_lowering(const StepGraph& g, int s) {
  return std::make_unique<FsdpLowering>(g, s);
}

}  // namespace loom::strategies
