#include "strategies/step_simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "strategies/rank_layout.hpp"

namespace loom::strategies {

std::string to_string(CommClass kind) {
  static const char* names[] = {"tp", "cp", "ep", "pp", "dp"};
  return names[static_cast<int>(kind)];
}

namespace {

using models::CommKind;
using models::OpKind;
using sim::SimTime;
using sim::TaskId;

topo::DType compute_dtype(models::Precision p) {
  switch (p) {
    case models::Precision::FP32:
      return topo::DType::TF32;  // Megatron/PyTorch fp32 matmuls use TF32 tensor cores on A100+
    case models::Precision::FP16:
      return topo::DType::FP16;
    case models::Precision::FP8:
      return topo::DType::FP8;
    case models::Precision::BF16:
      return topo::DType::BF16;
  }
  return topo::DType::BF16;
}

// One collective a pass performs on a model-parallel group (tp, cp or ep).
struct CommItem {
  CommClass cls = CommClass::TP;
  sim::CollectiveOp op = sim::CollectiveOp::ALL_REDUCE;
  double bytes = 0;  // nccl-tests "size" of the collective
};

// Seconds of each pass of a run of layers (a model chunk), on one GPU, one micro-batch.
struct PassCost {
  double fwd_s = 0;
  double bwd_input_s = 0;
  double bwd_weight_s = 0;
  double recompute_s = 0;
  std::vector<CommItem> fwd_comm;  // forward collectives (recompute under full recompute repeats)
  std::vector<CommItem> bwd_comm;  // backward mirrors
  double params = 0;               // parameters on this GPU
  void add(const PassCost& o) {
    fwd_s += o.fwd_s;
    bwd_input_s += o.bwd_input_s;
    bwd_weight_s += o.bwd_weight_s;
    recompute_s += o.recompute_s;
    fwd_comm.insert(fwd_comm.end(), o.fwd_comm.begin(), o.fwd_comm.end());
    bwd_comm.insert(bwd_comm.end(), o.bwd_comm.begin(), o.bwd_comm.end());
    params += o.params;
  }
};

// Seconds of the ops of one layer (or the embedding, or the head) under the kernel model.
PassCost cost_ops(const std::vector<models::OpCost>& ops, const models::TrainingPlan& plan,
                  const topo::GpuCostModel& gpu) {
  const topo::DType dt = compute_dtype(plan.precision);
  const double peak = gpu.peak_flops(dt);
  const double overhead = gpu.efficiency().kernel_overhead_s;
  PassCost c;
  for (const auto& op : ops) {
    double f = 0, bi = 0, bw = 0;
    const auto& s = op.shape;
    if (op.kind == OpKind::MATMUL) {
      // Forward C = A·B ([m x k]·[k x n]); dA = dC·Bᵀ is [m x n]·[n x k]; dB = Aᵀ·dC is
      // [k x m]·[m x n]: each timed at the efficiency of its own shape.
      auto t = [&](double flops, std::int64_t m, std::int64_t n, std::int64_t k) {
        if (flops <= 0) return 0.0;
        return flops / (peak * gpu.matmul_efficiency(m, n, k, s.batch)) + overhead;
      };
      f = t(op.fwd_flops, s.m, s.n, s.k);
      bi = t(op.bwd_input_flops, s.m, s.k, s.n);
      bw = t(op.bwd_weight_flops, s.k, s.n, s.m);
    } else if (op.kind == OpKind::ATTENTION) {
      if (plan.flash_attention) {
        // Fused attention skips the masked half of a causal square.
        const double scale = op.causal ? 0.5 : 1.0;
        f = gpu.attention_time_s(op.fwd_flops * scale, dt);
        bi = gpu.attention_time_s((op.bwd_input_flops + op.bwd_weight_flops) * scale, dt) /
             gpu.efficiency().attention_backward_ratio;
      } else {
        auto t = [&](double flops, std::int64_t m, std::int64_t n, std::int64_t k) {
          if (flops <= 0) return 0.0;
          return flops / (peak * gpu.matmul_efficiency(m, n, k, s.batch)) + overhead;
        };
        f = t(op.fwd_flops, s.m, s.n, s.k);
        bi = t(op.bwd_input_flops + op.bwd_weight_flops, s.m, s.k, s.n);
      }
    } else {
      // Memory-bound: forward moves inputs, outputs and weights; backward about twice that.
      const double bytes = op.input_bytes + op.output_bytes + op.weight_bytes;
      f = gpu.memory_time_s(bytes);
      bi = gpu.memory_time_s(2 * bytes);
    }
    c.fwd_s += f;
    c.bwd_input_s += bi;
    c.bwd_weight_s += bw;
    if (plan.recompute == models::Recompute::FULL ||
        (plan.recompute == models::Recompute::SELECTIVE && op.attention_core))
      c.recompute_s += f;
    c.params += op.params;
    if (op.comm != CommKind::NONE && op.comm_bytes > 0) {
      CommItem fwd, bwd;
      switch (op.comm) {
        case CommKind::TP_ALL_REDUCE:
          fwd = {CommClass::TP, sim::CollectiveOp::ALL_REDUCE, op.comm_bytes};
          bwd = fwd;
          break;
        case CommKind::TP_ALL_GATHER:
          // comm_bytes is the gathered (full) tensor: nccl-tests' size for all_gather.
          fwd = {CommClass::TP, sim::CollectiveOp::ALL_GATHER, op.comm_bytes};
          bwd = {CommClass::TP, sim::CollectiveOp::REDUCE_SCATTER, op.comm_bytes};
          break;
        case CommKind::TP_REDUCE_SCATTER:
          fwd = {CommClass::TP, sim::CollectiveOp::REDUCE_SCATTER, op.comm_bytes};
          bwd = {CommClass::TP, sim::CollectiveOp::ALL_GATHER, op.comm_bytes};
          break;
        case CommKind::EP_ALL_TO_ALL:
          fwd = {CommClass::EP, sim::CollectiveOp::ALL_TO_ALL, op.comm_bytes};
          bwd = fwd;
          break;
        case CommKind::CP_KV_EXCHANGE:
          fwd = {CommClass::CP, sim::CollectiveOp::ALL_GATHER, op.comm_bytes * plan.cp};
          bwd = {CommClass::CP, sim::CollectiveOp::REDUCE_SCATTER, op.comm_bytes * plan.cp};
          break;
        case CommKind::NONE:
          break;
      }
      c.fwd_comm.push_back(fwd);
      c.bwd_comm.push_back(bwd);
    }
  }
  return c;
}

// Process groups and coordinates of every rank, computed once from the layout (each
// RankLayout query walks the whole world, so per-rank queries would be quadratic).
class RankIndex {
 public:
  RankIndex(const RankLayout& layout, const models::TrainingPlan& plan)
      : tp_(plan.tp), cp_(plan.cp), dp_(plan.dp), pp_(plan.pp) {
    const size_t world = static_cast<size_t>(layout.world_size());
    const Dim dims[] = {Dim::TP, Dim::CP, Dim::DP, Dim::PP, Dim::EP};
    for (int d = 0; d < 5; ++d) {
      groups_[d] = layout.groups(dims[d]);
      group_of_[d].assign(world, 0);
      coord_[d].assign(world, 0);
      for (size_t g = 0; g < groups_[d].size(); ++g)
        for (size_t i = 0; i < groups_[d][g].size(); ++i) {
          group_of_[d][static_cast<size_t>(groups_[d][g][i])] = static_cast<int>(g);
          coord_[d][static_cast<size_t>(groups_[d][g][i])] = static_cast<int>(i);
        }
    }
    ranks_.assign(world, -1);
    for (size_t r = 0; r < world; ++r)
      ranks_[index(coord_[0][r], coord_[1][r], coord_[2][r], coord_[3][r])] = static_cast<int>(r);
  }
  int rank(int t, int c, int d, int p) const { return ranks_[index(t, c, d, p)]; }
  /// The group of `dim` holding `rank`.
  const std::vector<int>& group(int rank, Dim dim) const {
    const int d = slot(dim);
    return groups_[d][static_cast<size_t>(group_of_[d][static_cast<size_t>(rank)])];
  }

 private:
  static int slot(Dim dim) {
    switch (dim) {
      case Dim::TP:
        return 0;
      case Dim::CP:
        return 1;
      case Dim::DP:
        return 2;
      case Dim::PP:
        return 3;
      default:
        return 4;
    }
  }
  size_t index(int t, int c, int d, int p) const {
    return ((static_cast<size_t>(p) * dp_ + d) * cp_ + c) * tp_ + t;
  }
  int tp_, cp_, dp_, pp_;
  std::vector<int> ranks_;
  std::vector<std::vector<int>> groups_[5];
  std::vector<int> group_of_[5];
  std::vector<int> coord_[5];
};

// Optimizer step bytes moved per local parameter (read + write), by optimizer: Adam reads
// grad, fp32 master, m, v (16 B) and writes master, m, v (12 B) plus the 16-bit copy (2 B).
double optimizer_bytes_per_param(const models::TrainingPlan& plan) {
  const double copy = plan.precision == models::Precision::FP32 ? 0 : 2;
  switch (plan.optimizer) {
    case models::Optimizer::ADAM:
      return 28 + copy;
    case models::Optimizer::SGD_MOMENTUM:
      return 20 + copy;
    case models::Optimizer::SGD:
      return 12 + copy;
  }
  return 28 + copy;
}

struct Lowering {
  const models::ModelSpec& model;
  const models::TrainingPlan& plan;
  const topo::Cluster& cluster;
  const SimulateOptions& options;
  topo::GpuCostModel gpu;
  RankLayout layout;
  RankIndex index;
  sim::Engine engine;
  PipelineSchedule schedule;
  std::vector<PassCost> chunk_cost;  // by virtual stage
  std::map<std::tuple<int, int, std::int64_t, int>, double> comm_cache;
  sim::Fabric fabric;

  Lowering(const models::ModelSpec& m, const models::TrainingPlan& p, const topo::Cluster& c,
           const SimulateOptions& o)
      : model(m),
        plan(p),
        cluster(c),
        options(o),
        gpu(c.gpu, o.efficiency),
        layout(p),
        index(layout, p),
        engine(c, engine_options(o)),
        fabric(c) {}

  static sim::EngineOptions engine_options(const SimulateOptions& o) {
    sim::EngineOptions e;
    e.network = o.network;
    // The ideal network is for analysis: no protocol latencies either.
    if (o.network == sim::NetworkMode::IDEAL) e.cost.nccl_overheads = false;
    return e;
  }

  // Seconds of one model-parallel collective on `group`, on an otherwise idle network with
  // the identical groups `concurrent` running at the same time (memoised by shape).
  double comm_seconds(const CommItem& item, const std::vector<int>& group,
                      const std::vector<std::vector<int>>& concurrent) {
    if (group.size() < 2 || item.bytes <= 0 || options.network == sim::NetworkMode::IDEAL) return 0;
    auto key = std::make_tuple(static_cast<int>(item.cls), static_cast<int>(item.op),
                               static_cast<std::int64_t>(item.bytes), group.front());
    auto it = comm_cache.find(key);
    if (it != comm_cache.end()) return it->second;
    sim::CollectiveRequest req;
    req.op = item.op;
    req.ranks = group;
    req.bytes = item.bytes;
    req.concurrent_groups = concurrent;
    const auto s = sim::plan_collective(fabric, req, sim::CostOptions{});
    const double t = sim::to_seconds(sim::estimate_schedule(fabric, s));
    comm_cache.emplace(key, t);
    return t;
  }
};

}  // namespace

StepReport simulate_step(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const SimulateOptions& options) {
  models::validate_plan(model, plan);
  if (plan.gpus() != cluster.num_gpus()) {
    throw ValidationError(
        "--dp", fmt::format("the plan uses --tp {} x --pp {} x --dp {} x --cp {} = {} GPUs but "
                            "the cluster has {}; make them match",
                            plan.tp, plan.pp, plan.dp, plan.cp, plan.gpus(), cluster.num_gpus()));
  }
  Lowering L(model, plan, cluster, options);
  const int p = plan.pp, v = plan.vpp;
  const int m = static_cast<int>(plan.micro_batches());
  L.schedule = build_schedule(plan.schedule, p, m, v);
  const bool split_backward = plan.schedule == models::Schedule::ZERO_BUBBLE;

  // Per virtual stage: the cost of its layers (+ embedding on the first, head on the last).
  const auto vs_layers = models::virtual_stage_layers(model, plan);
  std::map<bool, PassCost> layer_cache;  // identical layers: dense vs MoE
  {
    int next = 0;
    for (size_t vs = 0; vs < vs_layers.size(); ++vs) {
      PassCost c;
      if (vs == 0) c.add(cost_ops(models::embedding_ops(model, plan), plan, L.gpu));
      for (int i = 0; i < vs_layers[vs]; ++i, ++next) {
        const bool moe = model.is_moe_layer(next);
        auto it = layer_cache.find(moe);
        if (it == layer_cache.end())
          it = layer_cache.emplace(moe, cost_ops(models::layer_ops(model, plan, next), plan, L.gpu))
                   .first;
        c.add(it->second);
      }
      if (vs + 1 == vs_layers.size()) c.add(cost_ops(models::head_ops(model, plan), plan, L.gpu));
      L.chunk_cost.push_back(std::move(c));
    }
  }

  StepReport R;
  R.memory = models::estimate_memory(model, plan);

  // Which (tp, cp, dp) replicas are simulated.
  struct Replica {
    int t, c, d;
  };
  std::vector<Replica> replicas;
  if (options.full) {
    for (int d = 0; d < plan.dp; ++d)
      for (int c = 0; c < plan.cp; ++c)
        for (int t = 0; t < plan.tp; ++t) replicas.push_back({t, c, d});
  } else {
    replicas.push_back({0, 0, 0});
  }
  R.simulated_gpus = static_cast<int>(replicas.size()) * p;

  sim::Engine& E = L.engine;
  const SimTime ps = 1;
  (void)ps;
  auto T = [](double s) { return sim::to_sim_time(s); };

  // Streams: per simulated GPU a compute stream and a data-parallel stream.
  struct Gpu {
    int rank;
    sim::StreamId compute, dp;
    std::vector<TaskId> pass_end;  // per pass in per_stage order: the task that ends it
    TaskId last_backward = -1;
    std::vector<TaskId> chunk_last_backward;
  };
  std::vector<std::vector<Gpu>> gpus(replicas.size());  // [replica][stage]
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int s = 0; s < p; ++s) {
      Gpu g;
      g.rank = L.index.rank(replicas[ri].t, replicas[ri].c, replicas[ri].d, s);
      g.compute = E.add_stream(fmt::format("rank{}/compute", g.rank), g.rank);
      g.dp = E.add_stream(fmt::format("rank{}/dp", g.rank), g.rank);
      g.chunk_last_backward.assign(v, -1);
      gpus[ri].push_back(std::move(g));
    }
  }

  // Model-parallel comm seconds per pass kind, per virtual stage (on the representative).
  std::array<double, COMM_CLASSES> comm_total{};  // summed over representative stages
  std::map<std::pair<int, int>, std::vector<int>> group_cache;
  auto mp_group = [&](int rank, CommClass cls) -> const std::vector<int>& {
    auto key = std::make_pair(rank, static_cast<int>(cls));
    auto it = group_cache.find(key);
    if (it != group_cache.end()) return it->second;
    const Dim dim = cls == CommClass::TP ? Dim::TP : cls == CommClass::CP ? Dim::CP : Dim::EP;
    return group_cache.emplace(key, L.index.group(rank, dim)).first->second;
  };
  auto comm_list_seconds = [&](const std::vector<CommItem>& items, int rank,
                               std::array<double, COMM_CLASSES>* by_class) {
    double total = 0;
    for (const auto& it : items) {
      const double t = L.comm_seconds(it, mp_group(rank, it.cls), {});
      total += t;
      if (by_class) (*by_class)[static_cast<int>(it.cls)] += t;
    }
    return total;
  };

  // Tasks: each pass is a compute task, followed on the same stream by its model-parallel
  // collectives (Megatron runs them blocking on the compute stream).
  struct PassTasks {
    TaskId first = -1, last = -1;
  };
  // key: (kind F/B, mb, vs) -> per replica task of the pass (for cross-stage deps)
  const int vstages = p * v;
  auto key = [&](int kind, int mb, int vs) {
    return (static_cast<size_t>(kind) * m + mb) * vstages + vs;
  };
  std::vector<std::vector<PassTasks>> pass_tasks(
      replicas.size(), std::vector<PassTasks>(static_cast<size_t>(3) * m * vstages));
  std::vector<double> busy_compute(p, 0), busy_comm(p, 0);
  std::vector<TaskId> all_pass_tasks;

  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    const bool rep = ri == 0;
    for (int s = 0; s < p; ++s) {
      Gpu& g = gpus[ri][s];
      for (const Pass& pass : L.schedule.per_stage[s]) {
        const int vs = L.schedule.virtual_stage(s, pass.chunk);
        const PassCost& c = L.chunk_cost[vs];
        std::array<double, COMM_CLASSES> by_class{};
        auto* acc = rep ? &by_class : nullptr;
        double compute_s = 0, comm_s = 0;
        std::string what;
        int kind = 0;
        TaskId first = -1;
        auto add = [&](double seconds, const std::string& label) {
          TaskId id = E.add_compute(g.compute, T(seconds), label);
          if (first < 0) first = id;
          return id;
        };
        TaskId last = -1;
        const std::string where = fmt::format("mb{} c{}", pass.micro_batch, pass.chunk);
        switch (pass.kind) {
          case PassKind::FORWARD:
            compute_s = c.fwd_s;
            last = add(c.fwd_s, "F " + where);
            comm_s = comm_list_seconds(c.fwd_comm, g.rank, acc);
            if (comm_s > 0) last = add(comm_s, "F-comm " + where);
            kind = 0;
            break;
          case PassKind::BACKWARD:
          case PassKind::BACKWARD_INPUT: {
            if (c.recompute_s > 0) {
              last = add(c.recompute_s, "R " + where);
              compute_s += c.recompute_s;
              if (plan.recompute == models::Recompute::FULL) {
                const double rc = comm_list_seconds(c.fwd_comm, g.rank, acc);
                if (rc > 0) last = add(rc, "R-comm " + where);
                comm_s += rc;
              }
            }
            const double b =
                pass.kind == PassKind::BACKWARD ? c.bwd_input_s + c.bwd_weight_s : c.bwd_input_s;
            last = add(b, (pass.kind == PassKind::BACKWARD ? "B " : "Bi ") + where);
            compute_s += b;
            const double bc = comm_list_seconds(c.bwd_comm, g.rank, acc);
            if (bc > 0) last = add(bc, "B-comm " + where);
            comm_s += bc;
            kind = 1;
            break;
          }
          case PassKind::BACKWARD_WEIGHT:
            last = add(c.bwd_weight_s, "W " + where);
            compute_s = c.bwd_weight_s;
            kind = 2;
            break;
        }
        pass_tasks[ri][key(kind, pass.micro_batch, vs)] = {first, last};
        all_pass_tasks.push_back(last);
        if (pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT ||
            (pass.kind == PassKind::BACKWARD_INPUT && !split_backward)) {
          g.last_backward = last;
          g.chunk_last_backward[pass.chunk] = last;
        }
        if (rep) {
          busy_compute[s] += compute_s;
          busy_comm[s] += comm_s;
          for (int k = 0; k < COMM_CLASSES; ++k) comm_total[k] += by_class[k];
        }
        (void)what;
      }
    }
  }

  // Cross-stage dependencies: activations forward, gradients backward, as point-to-point
  // transfers (non-blocking isend/irecv, as Megatron's batched p2p).
  const double act_bytes = models::tokens_per_gpu(model, plan) * double(model.hidden) *
                           models::activation_element_bytes(plan) / double(plan.tp);
  double pp_seconds = 0;
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int mb = 0; mb < m; ++mb) {
      for (int vs = 0; vs + 1 < vstages; ++vs) {
        const int s0 = vs % p, s1 = (vs + 1) % p;
        const int r0 = gpus[ri][s0].rank, r1 = gpus[ri][s1].rank;
        // forward: F(mb, vs) -> F(mb, vs+1)
        for (int dir = 0; dir < 2; ++dir) {
          const int kind = dir == 0 ? 0 : 1;
          const PassTasks& from = pass_tasks[ri][key(kind, mb, dir == 0 ? vs : vs + 1)];
          const PassTasks& to = pass_tasks[ri][key(kind, mb, dir == 0 ? vs + 1 : vs)];
          sim::TransferSpec t;
          t.src_rank = dir == 0 ? r0 : r1;
          t.dst_rank = dir == 0 ? r1 : r0;
          t.bytes = act_bytes;
          t.label = fmt::format("{} mb{} vs{}->{}", dir == 0 ? "send-act" : "send-grad", mb,
                                dir == 0 ? vs : vs + 1, dir == 0 ? vs + 1 : vs);
          const TaskId tr = E.add_transfer(t, {from.last});
          E.add_dependency(tr, to.first);
        }
      }
    }
    // Same stage: B needs its own F; W needs its Bi (stream order already ensures it).
  }

  // Data-parallel gradient reduction and optimizer step, per simulated GPU.
  const double grad_bytes_per_param = plan.grad_dtype == models::GradDtype::FP32 ? 4.0 : 2.0;
  const double param_bytes = plan.precision == models::Precision::FP32 ? 4.0 : 2.0;
  std::vector<TaskId> step_end;
  std::vector<TaskId> dp_tasks;
  std::map<int, std::vector<TaskId>> group_reduced;  // full mode: by the group's first rank
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int s = 0; s < p; ++s) {
      Gpu& g = gpus[ri][s];
      double stage_params = 0;
      for (int c = 0; c < v; ++c)
        stage_params += L.chunk_cost[L.schedule.virtual_stage(s, c)].params;
      std::vector<TaskId> reduced;
      if (plan.dp > 1) {
        const std::vector<int> group = L.index.group(g.rank, Dim::DP);
        std::vector<std::vector<int>> concurrent;
        if (!options.full) {
          for (int peer : L.index.group(g.rank, Dim::TP))
            if (peer != g.rank) concurrent.push_back(L.index.group(peer, Dim::DP));
          for (int peer : L.index.group(g.rank, Dim::CP))
            if (peer != g.rank) concurrent.push_back(L.index.group(peer, Dim::DP));
        }
        // In full mode one collective per group: issued by the group's first member.
        const bool issue = !options.full || group.front() == g.rank;
        if (issue) {
          std::vector<sim::StreamId> streams(group.size(), sim::NO_STREAM);
          std::vector<TaskId> deps_all;
          if (options.full) {
            for (size_t i = 0; i < group.size(); ++i) {
              for (size_t rj = 0; rj < replicas.size(); ++rj)
                if (gpus[rj][s].rank == group[i]) {
                  streams[i] = gpus[rj][s].dp;
                  deps_all.push_back(gpus[rj][s].last_backward);
                }
            }
          } else {
            streams[std::find(group.begin(), group.end(), g.rank) - group.begin()] = g.dp;
            deps_all.push_back(g.last_backward);
          }
          // One collective per model chunk: a chunk's backward is one task, so all of its
          // buckets become ready together; with --overlap-grad-reduce a chunk's reduction
          // starts as soon as its last backward ends, otherwise after the stage's last one.
          const bool zero_rs = plan.zero >= 1;
          std::vector<TaskId> chunk_ends;
          for (int c = 0; c < v; ++c) {
            const double chunk_params = L.chunk_cost[L.schedule.virtual_stage(s, c)].params;
            std::vector<TaskId> deps = deps_all;
            if (plan.overlap_grad_reduce && !options.full) deps = {g.chunk_last_backward[c]};
            sim::CollectiveSpec spec;
            spec.request.op =
                zero_rs ? sim::CollectiveOp::REDUCE_SCATTER : sim::CollectiveOp::ALL_REDUCE;
            spec.request.ranks = group;
            spec.request.bytes = chunk_params * grad_bytes_per_param;
            spec.request.concurrent_groups = concurrent;
            spec.streams = streams;
            spec.label = fmt::format("dp-{} c{}", zero_rs ? "rs" : "ar", c);
            const TaskId id = E.add_collective(spec, deps);
            reduced.push_back(id);
            dp_tasks.push_back(id);
          }
          if (options.full) group_reduced[group.front()] = reduced;
        } else {
          reduced = group_reduced.at(group.front());
        }
      }
      // Optimizer step (memory-bound over the local shard) on the compute stream.
      const double shard = plan.zero >= 1 ? plan.dp : 1.0;
      const double opt_s =
          L.gpu.memory_time_s(stage_params / shard * optimizer_bytes_per_param(plan));
      std::vector<TaskId> deps = reduced;
      deps.push_back(g.last_backward);
      const TaskId opt = E.add_compute(g.compute, T(opt_s), "optimizer", deps);
      if (ri == 0) R.optimizer_time_s += opt_s / p;
      TaskId end = opt;
      if (plan.zero >= 1 && plan.dp > 1 &&
          (!options.full || L.index.group(g.rank, Dim::DP).front() == g.rank)) {
        sim::CollectiveSpec spec;
        spec.request.op = sim::CollectiveOp::ALL_GATHER;
        spec.request.ranks = L.index.group(g.rank, Dim::DP);
        spec.request.bytes = stage_params * param_bytes;
        std::vector<sim::StreamId> streams(spec.request.ranks.size(), sim::NO_STREAM);
        streams[std::find(spec.request.ranks.begin(), spec.request.ranks.end(), g.rank) -
                spec.request.ranks.begin()] = g.dp;
        spec.streams = streams;
        spec.label = "zero-param-all-gather";
        end = E.add_collective(spec, {opt});
        dp_tasks.push_back(end);
      }
      step_end.push_back(end);
    }
  }

  E.run();

  // Measurements on the representative replica.
  const double step = sim::to_seconds(E.makespan());
  double pipeline_end = 0;
  for (TaskId t : all_pass_tasks)
    pipeline_end = std::max(pipeline_end, sim::to_seconds(E.finish(t)));
  // Bubble: the idle time of the busiest stage during the pipeline phase (with identical
  // stages every stage idles the same; a heavier last stage with the LM head sets the pace).
  double bubble = pipeline_end, compute = 0, mp_comm = 0;
  for (int s = 0; s < p; ++s) {
    bubble = std::min(bubble, pipeline_end - (busy_compute[s] + busy_comm[s]));
    compute += busy_compute[s];
    mp_comm += busy_comm[s];
  }
  compute /= p;
  mp_comm /= p;
  R.step_time_s = step;
  R.pipeline_time_s = pipeline_end;
  R.bubble_time_s = std::max(0.0, bubble);
  R.bubble_fraction = pipeline_end > 0 ? R.bubble_time_s / pipeline_end : 0;
  R.compute_time_s = compute + R.optimizer_time_s;
  for (int k = 0; k < COMM_CLASSES; ++k) R.comm_time_s[k] = comm_total[k] / p;
  // Pipeline transfers and data-parallel collectives: busy time of their tasks.
  double pp_total = 0;
  for (TaskId t = 0; t < E.num_tasks(); ++t) {
    const auto& label = E.label(t);
    if (label.rfind("send-", 0) == 0) pp_total += sim::to_seconds(E.finish(t) - E.start(t));
  }
  pp_seconds = pp_total / double(replicas.size() * p);
  R.comm_time_s[static_cast<int>(CommClass::PP)] = pp_seconds;
  double dp_total = 0;
  for (TaskId t : dp_tasks) dp_total += sim::to_seconds(E.finish(t) - E.start(t));
  R.comm_time_s[static_cast<int>(CommClass::DP)] =
      options.full ? dp_total / double(p * plan.tp * plan.cp) : dp_total / p;
  // Exposed: model-parallel comm on the compute stream plus the wait between the end of the
  // pipeline and the end of the step that is not optimizer compute.
  R.exposed_comm_time_s = mp_comm + std::max(0.0, step - pipeline_end - R.optimizer_time_s);

  const double gpus_total = double(plan.gpus());
  const double model_flops = models::model_flops_per_step(model, plan);
  const double hw_flops = models::hardware_flops_per_step(model, plan);
  R.peak_flops = L.gpu.peak_flops(compute_dtype(plan.precision));
  R.tokens_per_s = double(plan.global_batch()) *
                   double(model.kind == models::ModelKind::MLP ? 1 : plan.seq) / step;
  R.model_tflops_per_gpu = model_flops / step / gpus_total / 1e12;
  R.hardware_tflops_per_gpu = hw_flops / step / gpus_total / 1e12;
  R.mfu = R.model_tflops_per_gpu * 1e12 / R.peak_flops;
  R.hfu = R.hardware_tflops_per_gpu * 1e12 / R.peak_flops;
  R.tasks = E.num_tasks();
  R.events = E.events_processed();

  if (options.keep_timeline) {
    for (const auto& sl : E.slices()) {
      TimelineSlice ts;
      ts.rank = E.stream_rank(sl.stream);
      const auto& sname = E.stream_name(sl.stream);
      ts.stream = sname.substr(sname.find('/') + 1);
      ts.name = E.label(sl.task);
      ts.category = ts.name.find("comm") != std::string::npos                      ? "tp"
                    : ts.name.rfind("dp", 0) == 0 || ts.name.rfind("zero", 0) == 0 ? "dp"
                                                                                   : "compute";
      ts.start_s = sim::to_seconds(sl.start);
      ts.end_s = sim::to_seconds(sl.end);
      R.timeline.push_back(std::move(ts));
    }
    // Memory counters on the representative: static bytes plus live micro-batch activations.
    for (int s = 0; s < p; ++s) {
      const auto& st = R.memory.stages[static_cast<size_t>(s)];
      const double base = st.total_bytes - st.activations_bytes;
      const double per_mb = st.layer_activation_bytes / double(v);
      std::vector<std::pair<double, double>> events;
      for (const Pass& pass : L.schedule.per_stage[s]) {
        const int vs = L.schedule.virtual_stage(s, pass.chunk);
        if (pass.kind == PassKind::FORWARD) {
          const auto& pt = pass_tasks[0][key(0, pass.micro_batch, vs)];
          events.push_back({sim::to_seconds(E.start(pt.first)), per_mb});
        } else if (pass.kind != PassKind::BACKWARD_WEIGHT) {
          const auto& pt = pass_tasks[0][key(1, pass.micro_batch, vs)];
          events.push_back({sim::to_seconds(E.finish(pt.last)), -per_mb});
        }
      }
      std::stable_sort(events.begin(), events.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      double live = base;
      R.memory_samples.push_back({gpus[0][s].rank, 0.0, live});
      for (const auto& [t, d] : events) {
        live += d;
        R.memory_samples.push_back({gpus[0][s].rank, t, live});
      }
    }
  }
  return R;
}

}  // namespace loom::strategies
