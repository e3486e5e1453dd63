// DDP (zero 0) and ZeRO-1/2 as Megatron-LM lowers them: gradients reduced in buckets
// (all-reduce, or reduce-scatter when sharded) as the backward completes them, with
// --overlap-grad-reduce as soon as a bucket's last layer is done; ZeRO-1/2's updated
// parameter shards all-gathered per bucket, after the optimizer step or, with
// --overlap-param-gather, at the start of the next step's forward. Expert parameters (ep > 1)
// get their own buckets over the expert data-parallel group, as Megatron-core's separate
// expert buffers.
#include <algorithm>
#include <numeric>

#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/zero_offload.hpp"

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
std::vector<Bucket> make_buckets(const std::vector<double>& unit_params, double capacity) {
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (int u = static_cast<int>(unit_params.size()) - 1; u >= 0; --u) {
    double rem = unit_params[static_cast<size_t>(u)];
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
    for (ParamSet set : {ParamSet::DENSE, ParamSet::EXPERT}) {
      auto& by_chunk = buckets_[set == ParamSet::EXPERT ? 1 : 0];
      for (int c = 0; c < g.chunks(); ++c) {
        const int vs = g.schedule.virtual_stage(s, c);
        std::vector<double> params(g.work.units[static_cast<size_t>(vs)].size());
        for (size_t u = 0; u < params.size(); ++u)
          params[u] = unit_params(g, vs, static_cast<int>(u), set);
        by_chunk.push_back(make_buckets(params, capacity));
      }
    }
    replicas_ = g.replicas.size();
  }

  std::vector<std::vector<TaskId>> before_optimizer(StageGroups& groups) override {
    if (sharded_ && plan_.overlap_param_gather) {
      for (DpGroup& group : groups.dense) gather_params(group, {}, true);
      for (DpGroup& group : groups.expert) gather_params(group, {}, true);
    }
    std::vector<std::vector<TaskId>> waits(replicas_);
    for (DpGroup& group : groups.dense) add_member_waits(group, reduce_gradients(group), waits);
    for (DpGroup& group : groups.expert) add_member_waits(group, reduce_gradients(group), waits);
    return waits;
  }

  void after_optimizer(StageGroups& groups, const std::vector<TaskId>& optimizer) override {
    if (!sharded_ || plan_.overlap_param_gather) return;
    for (auto* list : {&groups.dense, &groups.expert})
      for (DpGroup& group : *list) {
        std::vector<TaskId> deps;
        for (int ri : group.members()) deps.push_back(optimizer[static_cast<size_t>(ri)]);
        gather_params(group, deps, false);
      }
  }

  bool sharded() const override { return sharded_; }

  // ZeRO-Offload: the buckets' partitions went to the host as they were reduced.
  std::vector<TaskId> optimizer(StepGraph& g, int stage,
                                const std::vector<std::vector<TaskId>>& waits) override {
    if (plan_.offload_optimizer != models::Offload::CPU)
      return DataParallelLowering::optimizer(g, stage, waits);
    return lower_offloaded_optimizer(g, stage, waits, sharded_, true);
  }

 private:
  const std::vector<std::vector<Bucket>>& buckets(const DpGroup& group) const {
    return buckets_[group.set() == ParamSet::EXPERT ? 1 : 0];
  }

  // The parameter all-gather per bucket, in the order buckets are first used. Overlapped
  // (Megatron's --overlap-param-gather): issued at the step's start, a bucket's first layer
  // waits for it; otherwise after the optimizer step.
  void gather_params(DpGroup& group, const std::vector<TaskId>& deps, bool overlapped) {
    StepGraph& g = group.graph();
    for (int c : by_first_) {
      const auto& bs = buckets(group)[static_cast<size_t>(c)];
      for (auto b = bs.rbegin(); b != bs.rend(); ++b) {
        const TaskId id = group.collective(
            CollectiveOp::ALL_GATHER, b->params * gathered_param_bytes(plan_),
            g.label("{}-ag c{} L{}-{}", group.name(), c, b->lo, b->hi), false, deps, overlapped);
        if (!overlapped) {  // the next step's forward needs these parameters
          for (int ri : group.members())
            g.step_ends[static_cast<size_t>(g.step)][static_cast<size_t>(ri)].push_back(id);
          continue;
        }
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
      for (const Bucket& b : buckets(group)[static_cast<size_t>(c)]) {
        std::vector<TaskId> deps;
        for (size_t k = 0; k < group.members().size(); ++k)
          deps.push_back(plan_.overlap_grad_reduce
                             ? group.unit_tasks(k, g.roles.final_pass[s_][c], b.lo).last
                             : group.gpu(k).last_backward);
        const TaskId id = group.collective(
            op, b.params * reduced_grad_bytes(plan_),
            g.label("{}-{} c{} L{}-{}", group.name(), sharded_ ? "rs" : "ar", c, b.lo, b.hi), false,
            deps);
        if (plan_.offload_optimizer != models::Offload::CPU) {
          for (auto& r : reduced) r.push_back(id);
          continue;
        }
        // ZeRO-Offload: each member's partition of the bucket, cast to fp32, to the host.
        const double shard = b.params / (group.set() == ParamSet::EXPERT ? g.edp : plan_.dp);
        for (size_t k = 0; k < group.members().size(); ++k) {
          reduced[k].push_back(offload_copy(
              g, static_cast<size_t>(group.members()[k]), s_, shard * offload_grad_bytes_per_elem(),
              true, {id}, g.label("{}-grads c{} L{}-{} ->host", group.name(), c, b.lo, b.hi)));
        }
      }
    }
    return reduced;
  }

  const models::TrainingPlan& plan_;
  int s_;
  bool sharded_;
  std::vector<int> by_final_, by_first_;
  std::vector<std::vector<Bucket>> buckets_[2];  // by set (dense, expert): by chunk
  size_t replicas_ = 0;
};

}  // namespace

std::unique_ptr<DataParallelLowering> make_bucketed_lowering(const StepGraph& g, int s) {
  return std::make_unique<BucketedLowering>(g, s);
}

}  // namespace loom::strategies
