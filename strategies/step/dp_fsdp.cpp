// ZeRO-3 / FSDP: every use of a unit's parameters (its forward, its backward; each
// micro-batch) all-gathers them on the gather stream just before. With prefetch the gather
// of use i waits only for use i-2 to finish (at most two units gathered at once, the memory
// model's buffers), without it for use i-1. Gradients are reduce-scattered per unit after
// each weight-gradient pass (every micro-batch: they are sharded).
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

  std::vector<std::vector<TaskId>> before_optimizer(DpGroup& group) override {
    gather_uses(group);
    return reduce_grads(group);
  }

  double optimizer_shards() const override { return g_.plan.dp; }

 private:
  const std::vector<Unit>& units_of(const Pass& pass) const {
    return g_.work.units[static_cast<size_t>(g_.schedule.virtual_stage(s_, pass.chunk))];
  }
  const Pass& pass_at(int pass_index) const {
    return g_.schedule.per_stage[s_][static_cast<size_t>(pass_index)];
  }

  void gather_uses(DpGroup& group) {
    StepGraph& g = group.graph();
    const size_t ahead = g.options.fsdp_prefetch ? 2 : 1;
    for (size_t i = 0; i < uses_.size(); ++i) {
      const auto [pi, u] = uses_[i];
      const Pass& pass = pass_at(pi);
      const Unit& unit = units_of(pass)[static_cast<size_t>(u)];
      if (unit.cost.params <= 0) continue;
      std::vector<TaskId> deps;
      if (i >= ahead)
        for (size_t k = 0; k < group.members().size(); ++k)
          deps.push_back(group.unit_tasks(k, uses_[i - ahead].first, uses_[i - ahead].second).last);
      const TaskId id = group.collective(CollectiveOp::ALL_GATHER,
                                         unit.cost.params * gathered_param_bytes(g.plan),
                                         g.label("dp-ag {} mb{} c{} {}", to_string(pass.kind),
                                                 pass.micro_batch, pass.chunk, unit.name),
                                         true, deps, true);
      for (size_t k = 0; k < group.members().size(); ++k)
        g.engine.add_dependency(id, group.unit_tasks(k, pi, u).first);
    }
  }

  std::vector<std::vector<TaskId>> reduce_grads(DpGroup& group) {
    StepGraph& g = group.graph();
    std::vector<std::vector<TaskId>> reduced(group.members().size());
    for (const auto& [pi, u] : grads_) {
      const Pass& pass = pass_at(pi);
      const Unit& unit = units_of(pass)[static_cast<size_t>(u)];
      if (unit.cost.params <= 0) continue;
      std::vector<TaskId> deps;
      for (size_t k = 0; k < group.members().size(); ++k)
        deps.push_back(group.unit_tasks(k, pi, u).last);
      const TaskId id = group.collective(
          CollectiveOp::REDUCE_SCATTER, unit.cost.params * reduced_grad_bytes(g.plan),
          g.label("dp-rs mb{} c{} {}", pass.micro_batch, pass.chunk, unit.name), false, deps);
      for (auto& r : reduced) r.push_back(id);
    }
    return reduced;
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
