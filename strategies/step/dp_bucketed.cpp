// DDP (zero 0) and ZeRO-1/2 as Megatron-LM lowers them: gradients reduced in buckets
// (all-reduce, or reduce-scatter when sharded) as the backward completes them, with
// --overlap-grad-reduce as soon as a bucket's last layer is done; ZeRO-1/2's updated
// parameter shards all-gathered per bucket, after the optimizer step or, with
// --overlap-param-gather, at the start of the next step's forward.
#include <algorithm>
#include <numeric>

#include "strategies/step/dp_lowering.hpp"

namespace loom::strategies {
namespace {

using sim::CollectiveOp;
using sim::TaskId;

// A gradient bucket of one model chunk: a run of parameters in reverse layer order, over the
// units lo..hi (forward indices; a large unit may be split over several buckets).
struct Bucket {
  double params = 0;
  int lo = 0;  // first unit in forward order: its backward completes the bucket
  int hi = 0;
};

// Megatron-style buckets: parameters taken in reverse order (backward order), a bucket closed
// when it holds `capacity` parameters; the split is continuous (a unit's parameters can spill
// into the next bucket), so a chunk of P parameters gets ceil(P / capacity) buckets.
std::vector<Bucket> make_buckets(const std::vector<Unit>& units, double capacity) {
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (int u = static_cast<int>(units.size()) - 1; u >= 0; --u) {
    double rem = units[static_cast<size_t>(u)].cost.params;
    while (rem > 0) {
      if (!open) {
        cur = Bucket{0, u, u};
        open = true;
      }
      const double take = std::min(rem, capacity - cur.params);
      cur.params += take;
      cur.lo = u;
      rem -= take;
      if (cur.params >= capacity * (1 - 1e-12)) {
        out.push_back(cur);
        open = false;
      }
    }
  }
  if (open && cur.params > 0) out.push_back(cur);
  return out;
}

// Chunks of stage `s` ordered by `pass_of[s][chunk]` (the pass that ends their gradients, or
// their first forward).
std::vector<int> chunks_by(const std::vector<std::vector<int>>& pass_of, int s, int chunks) {
  std::vector<int> out(static_cast<size_t>(chunks));
  std::iota(out.begin(), out.end(), 0);
  std::sort(out.begin(), out.end(), [&](int a, int b) { return pass_of[s][a] < pass_of[s][b]; });
  return out;
}

class BucketedLowering final : public DataParallelLowering {
 public:
  BucketedLowering(const StepGraph& g, int s)
      : plan_(g.plan),
        s_(s),
        sharded_(g.plan.zero >= 1),
        by_final_(chunks_by(g.roles.final_pass, s, g.chunks())),
        by_first_(chunks_by(g.roles.first_forward, s, g.chunks())) {
    const double capacity = std::max(1.0, plan_.dp_bucket_bytes / reduced_grad_bytes(plan_));
    for (int c = 0; c < g.chunks(); ++c)
      buckets_.push_back(make_buckets(g.work.units[g.schedule.virtual_stage(s, c)], capacity));
  }

  std::vector<std::vector<TaskId>> before_optimizer(DpGroup& group) override {
    if (sharded_ && plan_.overlap_param_gather) gather_params(group, {}, true);
    return reduce_gradients(group);
  }

  void after_optimizer(DpGroup& group, const std::vector<TaskId>& optimizer) override {
    if (sharded_ && !plan_.overlap_param_gather) gather_params(group, optimizer, false);
  }

  double optimizer_shards() const override { return sharded_ ? plan_.dp : 1.0; }

 private:
  // The parameter all-gather per bucket, in the order buckets are first used. Overlapped
  // (Megatron's --overlap-param-gather): issued at the step's start, a bucket's first layer
  // waits for it; otherwise after the optimizer step.
  void gather_params(DpGroup& group, const std::vector<TaskId>& deps, bool overlapped) {
    StepGraph& g = group.graph();
    for (int c : by_first_) {
      const auto& bs = buckets_[static_cast<size_t>(c)];
      for (auto b = bs.rbegin(); b != bs.rend(); ++b) {
        const TaskId id =
            group.collective(CollectiveOp::ALL_GATHER, b->params * gathered_param_bytes(plan_),
                             g.label("dp-ag c{} L{}-{}", c, b->lo, b->hi), false, deps, overlapped);
        if (!overlapped) continue;
        for (size_t k = 0; k < group.members().size(); ++k)
          g.engine.add_dependency(id,
                                  group.unit_tasks(k, g.roles.first_forward[s_][c], b->lo).first);
      }
    }
  }

  // Gradient buckets in the order they complete: with --overlap-grad-reduce each as soon as
  // the backward of its first layer (in forward order) ends in the chunk's final
  // weight-gradient pass; otherwise all after the stage's last backward.
  std::vector<std::vector<TaskId>> reduce_gradients(DpGroup& group) {
    StepGraph& g = group.graph();
    std::vector<std::vector<TaskId>> reduced(group.members().size());
    const auto op = sharded_ ? CollectiveOp::REDUCE_SCATTER : CollectiveOp::ALL_REDUCE;
    for (int c : by_final_) {
      for (const Bucket& b : buckets_[static_cast<size_t>(c)]) {
        std::vector<TaskId> deps;
        for (size_t k = 0; k < group.members().size(); ++k)
          deps.push_back(plan_.overlap_grad_reduce
                             ? group.unit_tasks(k, g.roles.final_pass[s_][c], b.lo).last
                             : group.gpu(k).last_backward);
        const TaskId id = group.collective(
            op, b.params * reduced_grad_bytes(plan_),
            g.label("dp-{} c{} L{}-{}", sharded_ ? "rs" : "ar", c, b.lo, b.hi), false, deps);
        for (auto& r : reduced) r.push_back(id);
      }
    }
    return reduced;
  }

  const models::TrainingPlan& plan_;
  int s_;
  bool sharded_;
  std::vector<int> by_final_, by_first_;
  std::vector<std::vector<Bucket>> buckets_;  // by chunk
};

}  // namespace

std::unique_ptr<DataParallelLowering> make_bucketed_lowering(const StepGraph& g, int s) {
  return std::make_unique<BucketedLowering>(g, s);
}

}  // namespace loom::strategies
