// ZeRO-3 / FSDP as two distinct designs (TrainingPlan::fsdp_impl), whose collective
// granularity sets their latency and overlap. Both gather parameters on the gather stream
// before each use (a unit's forward, its backward; every micro-batch) and reduce-scatter
// gradients after each weight-gradient pass (every micro-batch: they are sharded). With
// expert parallelism a unit's expert parameters are gathered and reduced over the expert
// data-parallel group, each right after its dense part, so every stream sees the collectives
// in use order.
//
// PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/, torchtitan apply_fsdp): one flat
// all-gather per unit (block) and use; implicit prefetch lets the gather of use i wait only
// for use i-2 to finish (at most two units gathered, the memory model's buffers), without
// prefetch for use i-1. reshard_after_forward frees a block after its forward and re-gathers
// it for backward; torchtitan's default policy keeps the last block, and FSDP2 the root
// (embedding, head), unsharded for backward. One reduce-scatter per unit.
//
// DeepSpeed ZeRO-3 (deepspeed/runtime/zero/partitioned_param_coordinator.py, stage3.py):
// parameters are fetched per submodule and prefetched in coalesced all-gathers of up to
// stage3_prefetch_bucket_size elements, so a unit's parameters move in
// ceil(params / bucket) collectives, each paying NCCL's latency; the prefetch runs one unit
// ahead (it walks the module trace from the submodule in use). Gradients go into an
// independent-partition bucket reduce-scattered whenever reduce_bucket_size elements are
// in it, and once more at the end of each backward.
//
// Copies (both designs gather into and reduce from one flat buffer): the all-gather's
// copy-in of the local shards into the flat input (FSDP2 foreach_all_gather:
// torch._foreach_copy_ after casting the fp32 shard to the gather dtype; DeepSpeed
// all_gather_coalesced: torch.cat of the 16-bit partitions) runs on the gather stream before
// the collective; the copy-out splitting the gathered buffer into per-parameter tensors
// (FSDP2 foreach_all_gather_copy_out: split_with_sizes_copy; DeepSpeed
// AllGatherCoalescedHandle.wait: torch.cat per parameter) runs on the compute stream before
// the unit (add_fsdp_copy_out adds it to the unit's compute); the reduce-scatter's copy-in
// of the unsharded gradients into the reduce buffer, cast to the reduce dtype (FSDP2
// foreach_reduce_scatter_copy_in; DeepSpeed's contiguous ipg bucket), on the reduction
// stream. All are memory-bound kernels timed by the kernel model (bytes / HBM bandwidth x
// its streaming fraction). The post-reduce copy of the 1/dp shard is left out.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/zero_offload.hpp"

namespace loom::strategies {
namespace {

using sim::CollectiveOp;
using sim::TaskId;

// Seconds of one memory-bound copy kernel moving `bytes` (reads + writes) on GPU type `type`.
double copy_seconds(const StepGraph& g, double bytes, int type = 0) {
  if (bytes <= 0) return 0.0;
  topo::KernelOp op;
  op.kind = topo::KernelKind::MEMORY_BOUND;
  op.bytes = bytes;
  return g.kernels_of(type).seconds(op, topo::KernelPass::FORWARD, compute_dtype(g.plan.precision));
}

// The passes and units of one stage in use order, and the shared collective helpers.
class ShardedLowering : public DataParallelLowering {
 public:
  ShardedLowering(const StepGraph& g, int s) : g_(g), s_(s) {
    const auto& order = g.schedule.per_stage[s];
    for (int pi = 0; pi < static_cast<int>(order.size()); ++pi) {
      const Pass& pass = order[static_cast<size_t>(pi)];
      const int n = static_cast<int>(units_of(pass).size());
      for (int k = 0; k < n; ++k) {
        const int u = pass.kind == PassKind::FORWARD ? k : n - 1 - k;
        if (pass.kind != PassKind::BACKWARD_WEIGHT &&
            (pass.kind == PassKind::FORWARD || fsdp_regathers_in_backward(g, unit(pass, u))))
          uses_.push_back({pi, u});
        if (pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT)
          grads_.push_back({pi, u});
      }
    }
  }

  bool sharded() const override { return true; }

  // ZeRO-Offload: the reduce-scatters' partitions went to the host as they were reduced.
  std::vector<TaskId> optimizer(StepGraph& g, int stage,
                                const std::vector<std::vector<TaskId>>& waits) override {
    if (g.plan.offload_optimizer != models::Offload::CPU)
      return DataParallelLowering::optimizer(g, stage, waits);
    return lower_offloaded_optimizer(g, stage, waits, true, true);
  }

 protected:
  // Every use's parameter gathers, dense then expert groups, in use order.
  void gather_every_use(StageGroups& groups) {
    for (size_t i = 0; i < uses_.size(); ++i) {
      for (DpGroup& group : groups.dense) gather_use(group, i);
      for (DpGroup& group : groups.expert) gather_use(group, i);
    }
  }
  // The gathers of use i on `group` (each design its own granularity).
  virtual void gather_use(DpGroup& group, size_t i) = 0;

  const std::vector<Unit>& units_of(const Pass& pass) const {
    return g_.work.units[static_cast<size_t>(g_.schedule.virtual_stage(s_, pass.chunk))];
  }
  const Unit& unit(const Pass& pass, int u) const { return units_of(pass)[static_cast<size_t>(u)]; }
  const Pass& pass_at(int pass_index) const {
    return g_.schedule.per_stage[s_][static_cast<size_t>(pass_index)];
  }
  double params_of(const DpGroup& group, int pi, int u) const {
    return group.params(g_.schedule.virtual_stage(s_, pass_at(pi).chunk), u);
  }

  // A copy kernel of `bytes` on every member's `stream` (gather or reduction), after `deps`
  // (per member); returns the copies, one per member.
  std::vector<TaskId> copies(DpGroup& group, bool gather_stream, double bytes,
                             const std::vector<std::vector<TaskId>>& deps, const char* what) {
    StepGraph& g = group.graph();
    std::vector<TaskId> out;
    for (size_t k = 0; k < group.members().size(); ++k) {
      const SimGpu& h = group.gpu(k);
      const double seconds = copy_seconds(g, bytes, h.gpu_type) * h.factor;
      out.push_back(g.add_compute(gather_stream ? h.ag : h.dp, seconds,
                                  g.label("{}-{} copy-in", group.name(), what), TraceCategory::DP,
                                  deps.empty() ? std::vector<TaskId>{} : deps[k]));
    }
    return out;
  }

  // An all-gather of `params` elements over `group` after its copy-in, each member waiting
  // for `deps` (per member, may be empty); the unit of use `use` waits for it.
  void gather(DpGroup& group, double params, const std::vector<std::vector<TaskId>>& deps,
              std::pair<int, int> use, double copy_in_bytes_per_elem) {
    StepGraph& g = group.graph();
    const auto [pi, u] = use;
    const Pass& pass = pass_at(pi);
    const double shard = params / static_cast<double>(g.plan.dp);
    std::vector<std::vector<TaskId>> ready = deps;
    if (g.plan.offload_param == models::Offload::CPU) {
      // ZeRO-Infinity: the 16-bit partition comes from the host first.
      ready.assign(group.members().size(), {});
      for (size_t k = 0; k < group.members().size(); ++k) {
        ready[k] = {offload_copy(g, static_cast<size_t>(group.members()[k]), s_,
                                 shard * gathered_param_bytes(g.plan), false,
                                 deps.empty() ? std::vector<TaskId>{} : deps[k],
                                 g.label("{}-params mb{} {} ->gpu", group.name(), pass.micro_batch,
                                         unit(pass, u).name))};
      }
    }
    const std::vector<TaskId> in = copies(group, true, shard * copy_in_bytes_per_elem, ready, "ag");
    const TaskId id =
        group.collective(CollectiveOp::ALL_GATHER, params * gathered_param_bytes(g.plan),
                         g.label("{}-ag {} mb{} c{} {}", group.name(), to_string(pass.kind),
                                 pass.micro_batch, pass.chunk, unit(pass, u).name),
                         true, in, true);
    for (size_t k = 0; k < group.members().size(); ++k)
      g.engine.add_dependency(id, group.unit_tasks(k, pi, u).first);
  }

  // A reduce-scatter of `params` gradient elements after the weight-gradient pass `pi`'s
  // unit `u` on every member and their copy into the reduce buffer; added to `waits`.
  void reduce(DpGroup& group, double params, int pi, int u,
              std::vector<std::vector<TaskId>>& waits) {
    StepGraph& g = group.graph();
    const Pass& pass = pass_at(pi);
    std::vector<std::vector<TaskId>> deps;
    for (size_t k = 0; k < group.members().size(); ++k)
      deps.push_back({group.unit_tasks(k, pi, u).last});
    const double rbytes = reduce_bytes_per_elem();
    const double copy_bytes = params * (gathered_param_bytes(g.plan) + rbytes);
    const std::vector<TaskId> in = copies(group, false, copy_bytes, deps, "rs");
    const TaskId id = group.collective(CollectiveOp::REDUCE_SCATTER, params * rbytes,
                                       g.label("{}-rs mb{} c{} {}", group.name(), pass.micro_batch,
                                               pass.chunk, unit(pass, u).name),
                                       false, in);
    if (g.plan.offload_optimizer != models::Offload::CPU) {
      for (int ri : group.members()) waits[static_cast<size_t>(ri)].push_back(id);
      return;
    }
    // ZeRO-Offload under ZeRO-3 (stage3.py partition_grads): the partition into the host's
    // accumulation buffer (fetched back and added on the GPU from the second micro-batch),
    // the last micro-batch's also as fp32 into the CPU step's gradient.
    const double shard = params / static_cast<double>(g.plan.dp);
    const bool last = pass.micro_batch + 1 == g.micro_batches();
    for (size_t k = 0; k < group.members().size(); ++k) {
      const auto ri = static_cast<size_t>(group.members()[k]);
      TaskId t = id;
      if (pass.micro_batch > 0)
        t = offload_copy(
            g, ri, s_, shard * rbytes, false, {t},
            g.label("{}-grads mb{} {} ->gpu", group.name(), pass.micro_batch, unit(pass, u).name));
      t = offload_copy(
          g, ri, s_, shard * rbytes, true, {t},
          g.label("{}-grads mb{} {} ->host", group.name(), pass.micro_batch, unit(pass, u).name));
      if (last)
        t = offload_copy(g, ri, s_, shard * offload_grad_bytes_per_elem(), true, {t},
                         g.label("{}-fp32 grads {} ->host", group.name(), unit(pass, u).name));
      waits[ri].push_back(t);
    }
  }

  // Bytes per gradient element the reduce-scatter moves.
  virtual double reduce_bytes_per_elem() const { return reduced_grad_bytes(g_.plan); }

  // Per member: the first (`first`) or last task of use `i - back`, or nothing before use 0.
  std::vector<std::vector<TaskId>> use_deps(const DpGroup& group, size_t i, size_t back,
                                            bool first) const {
    std::vector<std::vector<TaskId>> deps(group.members().size());
    if (i < back) return deps;
    const auto [pi, u] = uses_[i - back];
    for (size_t k = 0; k < deps.size(); ++k) {
      const PassTasks& t = group.unit_tasks(k, pi, u);
      deps[k].push_back(first ? t.first : t.last);
    }
    return deps;
  }

  const StepGraph& g_;
  int s_;
  std::vector<std::pair<int, int>> uses_, grads_;  // (pass index, unit)
};

// PyTorch FSDP2 (see file comment).
class Fsdp2Lowering final : public ShardedLowering {
 public:
  using ShardedLowering::ShardedLowering;

  std::vector<std::vector<TaskId>> before_optimizer(StageGroups& groups) override {
    gather_every_use(groups);
    std::vector<std::vector<TaskId>> waits(g_.replicas.size());
    for (const auto& [pi, u] : grads_) {
      for (auto* set : {&groups.dense, &groups.expert})
        for (DpGroup& group : *set) {
          const double params = params_of(group, pi, u);
          if (params > 0) reduce(group, params, pi, u, waits);
        }
    }
    return waits;
  }

 private:
  void gather_use(DpGroup& group, size_t i) override {
    const double params = params_of(group, uses_[i].first, uses_[i].second);
    if (params <= 0) return;
    const size_t ahead = g_.options.fsdp_prefetch ? 2 : 1;
    gather(group, params, use_deps(group, i, ahead, false), uses_[i],
           fsdp2_copy_in_bytes_per_elem(g_.plan));
  }
};

// DeepSpeed ZeRO-3 (see file comment).
class DeepSpeedLowering final : public ShardedLowering {
 public:
  using ShardedLowering::ShardedLowering;

  std::vector<std::vector<TaskId>> before_optimizer(StageGroups& groups) override {
    gather_every_use(groups);
    std::vector<std::vector<TaskId>> waits(g_.replicas.size());
    for (auto* set : {&groups.dense, &groups.expert})
      for (DpGroup& group : *set) reduce_buckets(group, waits);
    return waits;
  }

 private:
  // Use i's gathers, bucket by bucket, issued once use i-1 has started (the prefetch walks
  // the trace from the submodule in use).
  void gather_use(DpGroup& group, size_t i) override {
    const auto [pi, u] = uses_[i];
    const double params = params_of(group, pi, u);
    if (params <= 0) return;
    // The coordinator's groups over the unit's parameter tensors when this group holds them
    // all (the dense group of a dense unit); else equal buckets.
    const std::vector<double>& tensors = unit(pass_at(pi), u).cost.tensors;
    double listed = 0;
    for (double t : tensors) listed += t;
    std::vector<double> groups;
    if (std::abs(listed - params) <= 1e-9 * params) {
      groups = deepspeed_gather_groups(tensors, g_.plan.ds_prefetch_bucket,
                                       static_cast<double>(g_.plan.ds_persistence_threshold));
    } else {
      const int n = deepspeed_gathers(params, g_.plan.ds_prefetch_bucket);
      groups.assign(static_cast<size_t>(n), params / n);
    }
    const auto deps = use_deps(group, i, 1, true);
    // DeepSpeed keeps a 16-bit partition of the parameters: the copy-in reads and writes it.
    for (double elems : groups)
      gather(group, elems, deps, uses_[i], 2.0 * gathered_param_bytes(g_.plan));
  }

  // DeepSpeed reduces in the engine's communication_data_type, the training dtype unless the
  // config sets it (deepspeed/runtime/engine.py communication_data_type: fp16 or bf16 when
  // enabled; stage3.py __avg_scatter_grads casts p.grad to it), whatever the plan's gradient
  // accumulation dtype.
  double reduce_bytes_per_elem() const override { return deepspeed_reduce_bytes(g_.plan); }

  // The ipg bucket: reduce-scatter whenever it holds reduce_bucket_size elements (after the
  // unit that filled it) and at the end of each weight-gradient pass.
  void reduce_buckets(DpGroup& group, std::vector<std::vector<TaskId>>& waits) {
    const double bucket = static_cast<double>(g_.plan.ds_reduce_bucket);
    double held = 0;
    for (size_t j = 0; j < grads_.size(); ++j) {
      const auto [pi, u] = grads_[j];
      held += params_of(group, pi, u);
      const bool pass_end = j + 1 == grads_.size() || grads_[j + 1].first != pi;
      while (held >= bucket) {
        reduce(group, bucket, pi, u, waits);
        held -= bucket;
      }
      if (pass_end && held > 0) {
        reduce(group, held, pi, u, waits);
        held = 0;
      }
    }
  }
};

}  // namespace

bool fsdp_regathers_in_backward(const StepGraph& g, const Unit& unit) {
  if (g.plan.fsdp_impl == models::FsdpImpl::DEEPSPEED) {
    auto find = [&](const StageWork& work) -> const std::vector<Unit>* {
      for (const auto& units : work.units)
        for (const Unit& x : units)
          if (&x == &unit) return &units;
      return nullptr;
    };
    const std::vector<Unit>* units = find(g.work);
    for (size_t t = 0; !units && t < g.extra_work.size(); ++t) units = find(g.extra_work[t]);
    if (!units) return true;
    double after = 0;
    for (size_t j = static_cast<size_t>(&unit - units->data()) + 1; j < units->size(); ++j)
      after += (*units)[j].cost.params;
    return !deepspeed_keeps_for_backward(after);
  }
  if (!g.plan.reshard_after_forward) return false;
  // FSDP2's root (embedding, head) stays unsharded after forward; torchtitan's default
  // policy keeps the last block (backward needs it at once).
  return unit.layer >= 0 && unit.layer != g.model.layers - 1;
}

double fsdp2_copy_in_bytes_per_elem(const models::TrainingPlan& plan) {
  const double gathered = gathered_param_bytes(plan);
  // FSDP2 shards the fp32 parameters; with a 16-bit param_dtype each shard is first cast
  // (read 4 B, write the gathered dtype), then copied into the flat input (read + write).
  const double cast = gathered < 4.0 ? 4.0 + gathered : 0.0;
  return cast + 2.0 * gathered;
}

int deepspeed_gathers(double params, std::int64_t bucket_elems) {
  if (params <= 0) return 0;
  return std::max(1, static_cast<int>(std::ceil(params / static_cast<double>(bucket_elems))));
}

std::vector<double> deepspeed_gather_groups(const std::vector<double>& tensors,
                                            std::int64_t bucket_elems,
                                            double persistence_threshold) {
  std::vector<double> groups;
  double open = 0;
  for (double t : tensors) {
    if (t < persistence_threshold) continue;  // ds_persist: never partitioned
    open += t;
    if (open >= static_cast<double>(bucket_elems)) {
      groups.push_back(open);
      open = 0;
    }
  }
  if (open > 0) groups.push_back(open);
  return groups;
}

double deepspeed_reduce_bytes(const models::TrainingPlan& plan) {
  return gathered_param_bytes(plan);
}

bool deepspeed_keeps_for_backward(double params_after) {
  return 2.0 * params_after < DEEPSPEED_MAX_REUSE_DISTANCE;
}

void add_fsdp_copy_out(StepGraph& g) {
  if (g.plan.dp <= 1 || g.plan.zero < 3) return;
  const double per_param = 2.0 * gathered_param_bytes(g.plan);  // read + write
  for (int type = 0; type <= static_cast<int>(g.extra_work.size()); ++type) {
    StageWork& work = type == 0 ? g.work : g.extra_work[static_cast<size_t>(type - 1)];
    for (size_t vs = 0; vs < work.units.size(); ++vs) {
      for (Unit& unit : work.units[vs]) {
        if (unit.cost.params <= 0) continue;
        const double t = copy_seconds(g, unit.cost.params * per_param, type);
        PassCost extra;
        extra.fwd_s = t;
        if (fsdp_regathers_in_backward(g, unit)) extra.bwd_input_s = t;
        unit.cost.fwd_s += extra.fwd_s;
        unit.cost.bwd_input_s += extra.bwd_input_s;
        work.chunk_cost[vs].fwd_s += extra.fwd_s;
        work.chunk_cost[vs].bwd_input_s += extra.bwd_input_s;
      }
    }
  }
}

std::unique_ptr<DataParallelLowering> make_fsdp_lowering(const StepGraph& g, int s) {
  if (g.plan.fsdp_impl == models::FsdpImpl::DEEPSPEED)
    return std::make_unique<DeepSpeedLowering>(g, s);
  return std::make_unique<Fsdp2Lowering>(g, s);
}

}  // namespace loom::strategies
