#include "strategies/step_simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "strategies/plan/plan_rules.hpp"
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
    // Seconds of `flops` run as GEMMs of shape [m x k]·[k x n] (s.batch of them).
    auto t = [&](double flops, std::int64_t m, std::int64_t n, std::int64_t k) {
      if (flops <= 0) return 0.0;
      return flops / (peak * gpu.matmul_efficiency(m, n, k, s.batch)) + overhead;
    };
    if (op.kind == OpKind::MATMUL) {
      // Forward C = A·B ([m x k]·[k x n]); dA = dC·Bᵀ is [m x n]·[n x k]; dB = Aᵀ·dC is
      // [k x m]·[m x n]: each timed at the efficiency of its own shape.
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

// One FSDP unit / bucketing granule of a virtual stage: the embedding, one layer or the head.
struct Unit {
  std::string name;  // "emb", "L12", "head"
  PassCost cost;
};

// A DDP gradient bucket of one model chunk: a run of parameters in reverse layer order, over
// the units lo..hi (forward indices; a large unit may be split over several buckets).
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

// Process groups and coordinates of every rank, computed once from the layout (each
// RankLayout query walks the whole world, so per-rank queries would be quadratic).
class RankIndex {
 public:
  RankIndex(const RankLayout& layout, const models::TrainingPlan& plan)
      : tp_(plan.tp), cp_(plan.cp), dp_(plan.dp) {
    const size_t world = static_cast<size_t>(layout.world_size());
    for (int d = 0; d < DIMS; ++d) {
      groups_[d] = layout.groups(static_cast<Dim>(d));
      group_of_[d].assign(world, 0);
      coord_[d].assign(world, 0);
      for (size_t g = 0; g < groups_[d].size(); ++g)
        for (size_t i = 0; i < groups_[d][g].size(); ++i) {
          group_of_[d][static_cast<size_t>(groups_[d][g][i])] = static_cast<int>(g);
          coord_[d][static_cast<size_t>(groups_[d][g][i])] = static_cast<int>(i);
        }
    }
    ranks_.assign(world, -1);
    auto coord = [&](Dim dim, size_t r) { return coord_[static_cast<int>(dim)][r]; };
    for (size_t r = 0; r < world; ++r)
      ranks_[index(coord(Dim::TP, r), coord(Dim::CP, r), coord(Dim::DP, r), coord(Dim::PP, r))] =
          static_cast<int>(r);
  }
  int rank(int t, int c, int d, int p) const { return ranks_[index(t, c, d, p)]; }
  /// The group of `dim` (TP, CP, EP, DP or PP) holding `rank`.
  const std::vector<int>& group(int rank, Dim dim) const {
    const int d = static_cast<int>(dim);
    check_invariant(d < DIMS, "RankIndex holds no expert data-parallel groups");
    return groups_[d][static_cast<size_t>(group_of_[d][static_cast<size_t>(rank)])];
  }

 private:
  static constexpr int DIMS = 5;  // Dim's first five: TP, CP, EP, DP, PP
  size_t index(int t, int c, int d, int p) const {
    return ((static_cast<size_t>(p) * dp_ + d) * cp_ + c) * tp_ + t;
  }
  int tp_, cp_, dp_;
  std::vector<int> ranks_;
  std::vector<std::vector<int>> groups_[DIMS];  // by Dim
  std::vector<int> group_of_[DIMS];
  std::vector<int> coord_[DIMS];
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

// Task labels only feed the timeline (--trace): formatted only when it is kept.
template <typename... Args>
std::string task_label(bool keep, fmt::string_view format, const Args&... args) {
  if (!keep) return {};
  return fmt::vformat(format, fmt::make_format_args(args...));
}

struct Lowering {
  const SimulateOptions& options;
  topo::GpuCostModel gpu;
  RankIndex index;
  sim::Engine engine;
  PipelineSchedule schedule;
  std::vector<PassCost> chunk_cost;      // by virtual stage
  std::vector<std::vector<Unit>> units;  // by virtual stage: its units in forward order
  std::map<std::tuple<int, int, std::int64_t, int, int>, double> cost_cache;
  sim::Fabric fabric;

  Lowering(const models::TrainingPlan& p, const topo::Cluster& c, const SimulateOptions& o)
      : options(o),
        gpu(c.gpu, o.efficiency),
        index(RankLayout(p), p),
        engine(c, engine_options(o)),
        fabric(c) {}

  static sim::EngineOptions engine_options(const SimulateOptions& o) {
    sim::EngineOptions e;
    e.network = o.network;
    // The ideal network is for analysis: no protocol latencies either.
    if (o.network == sim::NetworkMode::IDEAL) e.cost.nccl_overheads = false;
    return e;
  }

  // Seconds of one collective of kind `cls` on `group`, on an otherwise idle network with the
  // identical groups `concurrent` running at the same time (memoised by kind, op, size, group
  // and number of concurrent groups).
  double collective_seconds(CommClass cls, sim::CollectiveOp op, double bytes,
                            const std::vector<int>& group,
                            const std::vector<std::vector<int>>& concurrent) {
    if (group.size() < 2 || bytes <= 0 || options.network == sim::NetworkMode::IDEAL) return 0;
    auto key = std::make_tuple(static_cast<int>(cls), static_cast<int>(op),
                               static_cast<std::int64_t>(bytes), group.front(),
                               static_cast<int>(concurrent.size()));
    auto it = cost_cache.find(key);
    if (it != cost_cache.end()) return it->second;
    sim::CollectiveRequest req;
    req.op = op;
    req.ranks = group;
    req.bytes = bytes;
    req.concurrent_groups = concurrent;
    const auto sched = sim::plan_collective(fabric, req, sim::CostOptions{});
    const double t = sim::to_seconds(sim::estimate_schedule(fabric, sched));
    cost_cache.emplace(key, t);
    return t;
  }
};

}  // namespace

StepReport simulate_step(const models::ModelSpec& model, const models::TrainingPlan& plan,
                         const topo::Cluster& cluster, const SimulateOptions& options) {
  validate_plan(model, plan, cluster.num_gpus());
  Lowering L(plan, cluster, options);
  const int p = plan.pp, v = plan.vpp;
  const int m = static_cast<int>(plan.micro_batches());
  L.schedule = build_schedule(plan.schedule, p, m, v);
  const bool dp_comm = plan.dp > 1;
  const bool fsdp = dp_comm && plan.zero >= 3;
  const bool zero_sharded = plan.zero >= 1;

  // Per virtual stage: its units (embedding on the first, each layer, head on the last) and
  // their sum.
  const auto vs_layers = models::virtual_stage_layers(model, plan);
  std::map<bool, PassCost> layer_cache;  // identical layers: dense vs MoE
  {
    int next = 0;
    for (size_t vs = 0; vs < vs_layers.size(); ++vs) {
      std::vector<Unit> us;
      if (vs == 0) {
        const auto ops = models::embedding_ops(model, plan);
        if (!ops.empty()) us.push_back({"emb", cost_ops(ops, plan, L.gpu)});
      }
      for (int i = 0; i < vs_layers[vs]; ++i, ++next) {
        const bool moe = model.is_moe_layer(next);
        auto it = layer_cache.find(moe);
        if (it == layer_cache.end())
          it = layer_cache.emplace(moe, cost_ops(models::layer_ops(model, plan, next), plan, L.gpu))
                   .first;
        us.push_back({fmt::format("L{}", next), it->second});
      }
      if (vs + 1 == vs_layers.size())
        us.push_back({"head", cost_ops(models::head_ops(model, plan), plan, L.gpu)});
      PassCost c;
      for (const auto& u : us) c.add(u.cost);
      L.chunk_cost.push_back(std::move(c));
      L.units.push_back(std::move(us));
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
  const bool keep_labels = options.keep_timeline;
  auto T = [](double s) { return sim::to_sim_time(s); };

  // A B pass, or a W pass under zero-bubble (whose Bi computes no weight gradients), ends the
  // weight gradients of its micro-batch and chunk.
  auto ends_weight_grads = [](const Pass& pass) {
    return pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT;
  };
  // Per stage: which passes finish a chunk's weight gradients (the last B, or W under
  // zero-bubble) and which is a chunk's first forward.
  std::vector<std::vector<int>> final_pass(p, std::vector<int>(v, -1));
  std::vector<std::vector<int>> first_forward(p, std::vector<int>(v, -1));
  for (int s = 0; s < p; ++s) {
    const auto& order = L.schedule.per_stage[s];
    for (int i = 0; i < static_cast<int>(order.size()); ++i) {
      const Pass& pass = order[static_cast<size_t>(i)];
      if (pass.kind == PassKind::FORWARD && first_forward[s][pass.chunk] < 0)
        first_forward[s][pass.chunk] = i;
      if (ends_weight_grads(pass)) final_pass[s][pass.chunk] = i;
    }
  }
  // Passes lowered unit by unit (one task per unit and its collectives) so that DP work can
  // hang on single units: every pass under ZeRO-3; a chunk's final weight-gradient pass with
  // --overlap-grad-reduce; its first forward with --overlap-param-gather (ZeRO-1/2).
  auto split_pass = [&](int s, int i) {
    if (!dp_comm) return false;
    if (fsdp) return true;
    const int c = L.schedule.per_stage[s][static_cast<size_t>(i)].chunk;
    if (plan.overlap_grad_reduce && final_pass[s][c] == i) return true;
    if (zero_sharded && plan.overlap_param_gather && first_forward[s][c] == i) return true;
    return false;
  };

  // Streams: per simulated GPU a compute stream and a data-parallel stream (ZeRO-3: and a
  // parameter all-gather stream, as FSDP's unshard stream).
  struct PassTasks {
    TaskId first = -1, last = -1;
  };
  struct Gpu {
    int rank;
    sim::StreamId compute, dp, ag;
    TaskId last_backward = -1;
    std::vector<std::vector<PassTasks>> units;  // per pass index: per unit (split passes only)
  };
  std::vector<std::vector<Gpu>> gpus(replicas.size());  // [replica][stage]
  std::vector<int> rank_to_replica(static_cast<size_t>(plan.gpus()), -1);
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int s = 0; s < p; ++s) {
      Gpu g;
      g.rank = L.index.rank(replicas[ri].t, replicas[ri].c, replicas[ri].d, s);
      g.compute = E.add_stream(fmt::format("rank{}/compute", g.rank), g.rank);
      g.dp = E.add_stream(fmt::format("rank{}/dp", g.rank), g.rank);
      g.ag = fsdp ? E.add_stream(fmt::format("rank{}/dp-ag", g.rank), g.rank) : g.dp;
      g.units.resize(L.schedule.per_stage[s].size());
      rank_to_replica[static_cast<size_t>(g.rank)] = static_cast<int>(ri);
      gpus[ri].push_back(std::move(g));
    }
  }

  // Model-parallel collectives of one comm list on one GPU's groups: each item's seconds and
  // their sum, resolved once per GPU and list rather than once per pass.
  struct ResolvedComm {
    std::vector<double> item_s;
    double total_s = 0;
  };
  struct PassComm {
    bool resolved = false;
    ResolvedComm fwd, bwd;
  };
  auto resolve = [&](const std::vector<CommItem>& items, int rank) {
    ResolvedComm r;
    r.item_s.reserve(items.size());
    for (const auto& it : items) {
      const Dim dim = it.cls == CommClass::TP   ? Dim::TP
                      : it.cls == CommClass::CP ? Dim::CP
                                                : Dim::EP;
      const double t = L.collective_seconds(it.cls, it.op, it.bytes, L.index.group(rank, dim), {});
      r.item_s.push_back(t);
      r.total_s += t;
    }
    return r;
  };
  std::array<double, COMM_CLASSES> comm_total{};  // summed over representative stages

  // Tasks: each pass is a compute task, followed on the same stream by its model-parallel
  // collectives (Megatron runs them blocking on the compute stream).
  // key: (kind F/B or Bi, mb, vs) -> per replica task of the pass (for cross-stage deps)
  const int vstages = p * v;
  auto key = [&](int kind, int mb, int vs) {
    return (static_cast<size_t>(kind) * m + mb) * vstages + vs;
  };
  std::vector<std::vector<PassTasks>> pass_tasks(
      replicas.size(), std::vector<PassTasks>(static_cast<size_t>(2) * m * vstages));
  std::vector<TaskId> all_pass_tasks;
  // What the report measures on the representative GPU of each stage.
  struct RepStage {
    std::vector<TaskId> compute;  // its compute-stream tasks (passes, then the optimizer)
    double compute_s = 0;         // pass compute seconds
    double comm_s = 0;            // blocking model-parallel comm seconds
    // The passes' busy time (compute + comm) summed in integer picoseconds, the durations the
    // engine ran, so that a stage that never idles shows exactly zero bubble (summing seconds
    // leaves rounding residue).
    SimTime busy_ps = 0;
    std::vector<TaskId> dp;      // its DP collectives
    std::vector<TaskId> gather;  // of which parameter gathers compute waits on
    double dp_bytes = 0;         // ZeRO paper Sec. 7 volume per GPU
  };
  std::vector<RepStage> reps(static_cast<size_t>(p));

  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    const bool rep = ri == 0;
    for (int s = 0; s < p; ++s) {
      Gpu& g = gpus[ri][s];
      // This GPU's comm lists, per chunk: [0] the whole chunk, [1 + u] unit u (resolved lazily).
      std::vector<std::vector<PassComm>> comm(v);
      auto comm_of = [&](int chunk, int slot, const PassCost& c) -> const PassComm& {
        auto& per_chunk = comm[static_cast<size_t>(chunk)];
        if (per_chunk.empty())
          per_chunk.resize(1 + L.units[L.schedule.virtual_stage(s, chunk)].size());
        PassComm& pc = per_chunk[static_cast<size_t>(slot)];
        if (!pc.resolved) {
          pc.fwd = resolve(c.fwd_comm, g.rank);
          pc.bwd = resolve(c.bwd_comm, g.rank);
          pc.resolved = true;
        }
        return pc;
      };
      const auto& order = L.schedule.per_stage[s];
      for (int pi = 0; pi < static_cast<int>(order.size()); ++pi) {
        const Pass& pass = order[static_cast<size_t>(pi)];
        const int vs = L.schedule.virtual_stage(s, pass.chunk);
        std::array<double, COMM_CLASSES> by_class{};
        double compute_s = 0, comm_s = 0;
        TaskId first = -1, last = -1;
        // A task of `seconds` on the compute stream, its seconds counted into `busy_s` (the
        // pass's compute or comm time).
        auto add = [&](double seconds, double& busy_s, const char* what, const std::string* unit) {
          const TaskId id =
              E.add_compute(g.compute, T(seconds),
                            task_label(keep_labels, "{} mb{} c{}{}{}", what, pass.micro_batch,
                                       pass.chunk, unit ? " " : "", unit ? unit->c_str() : ""));
          busy_s += seconds;
          if (first < 0) first = id;
          if (rep) {
            reps[s].compute.push_back(id);
            reps[s].busy_ps += T(seconds);
          }
          last = id;
        };
        // Seconds of a resolved comm list; the representative also counts them by kind.
        auto comm_seconds = [&](const std::vector<CommItem>& items, const ResolvedComm& r) {
          if (rep)
            for (size_t i = 0; i < items.size(); ++i)
              by_class[static_cast<int>(items[i].cls)] += r.item_s[i];
          return r.total_s;
        };
        // The work of one pass over `c` (a whole chunk, or one unit when split; `unit` names
        // it in the label).
        auto emit = [&](const PassCost& c, const PassComm& pc, const std::string* unit) {
          switch (pass.kind) {
            case PassKind::FORWARD: {
              add(c.fwd_s, compute_s, "F", unit);
              const double fc = comm_seconds(c.fwd_comm, pc.fwd);
              if (fc > 0) add(fc, comm_s, "F-comm", unit);
              break;
            }
            case PassKind::BACKWARD:
            case PassKind::BACKWARD_INPUT: {
              if (c.recompute_s > 0) {
                add(c.recompute_s, compute_s, "R", unit);
                if (plan.recompute == models::Recompute::FULL) {
                  const double rc = comm_seconds(c.fwd_comm, pc.fwd);
                  if (rc > 0) add(rc, comm_s, "R-comm", unit);
                }
              }
              const bool full = pass.kind == PassKind::BACKWARD;
              add(full ? c.bwd_input_s + c.bwd_weight_s : c.bwd_input_s, compute_s,
                  full ? "B" : "Bi", unit);
              const double bc = comm_seconds(c.bwd_comm, pc.bwd);
              if (bc > 0) add(bc, comm_s, "B-comm", unit);
              break;
            }
            case PassKind::BACKWARD_WEIGHT:
              add(c.bwd_weight_s, compute_s, "W", unit);
              break;
          }
        };
        if (split_pass(s, pi)) {
          const auto& us = L.units[static_cast<size_t>(vs)];
          auto& ut = g.units[static_cast<size_t>(pi)];
          ut.assign(us.size(), PassTasks{});
          const int n = static_cast<int>(us.size());
          for (int k = 0; k < n; ++k) {
            const int u = pass.kind == PassKind::FORWARD ? k : n - 1 - k;
            const Unit& unit = us[static_cast<size_t>(u)];
            first = -1;
            emit(unit.cost, comm_of(pass.chunk, 1 + u, unit.cost), &unit.name);
            ut[static_cast<size_t>(u)] = {first, last};
          }
          // The pass begins with the first unit in execution order.
          first = ut[static_cast<size_t>(pass.kind == PassKind::FORWARD ? 0 : n - 1)].first;
        } else {
          const PassCost& c = L.chunk_cost[static_cast<size_t>(vs)];
          emit(c, comm_of(pass.chunk, 0, c), nullptr);
        }
        if (pass.kind != PassKind::BACKWARD_WEIGHT)  // W has no cross-stage dependency
          pass_tasks[ri][key(pass.kind == PassKind::FORWARD ? 0 : 1, pass.micro_batch, vs)] = {
              first, last};
        all_pass_tasks.push_back(last);
        if (ends_weight_grads(pass)) g.last_backward = last;
        if (rep) {
          reps[s].compute_s += compute_s;
          reps[s].comm_s += comm_s;
          for (int k = 0; k < COMM_CLASSES; ++k) comm_total[k] += by_class[k];
        }
      }
    }
  }

  // Cross-stage dependencies: activations forward, gradients backward, as point-to-point
  // transfers (non-blocking isend/irecv, as Megatron's batched p2p).
  const double act_bytes = models::tokens_per_gpu(model, plan) * double(model.hidden) *
                           models::activation_element_bytes(plan) / double(plan.tp);
  std::vector<TaskId> pp_tasks;
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int mb = 0; mb < m; ++mb) {
      for (int vs = 0; vs + 1 < vstages; ++vs) {
        const int s0 = vs % p, s1 = (vs + 1) % p;
        const int r0 = gpus[ri][s0].rank, r1 = gpus[ri][s1].rank;
        for (int dir = 0; dir < 2; ++dir) {
          const int kind = dir == 0 ? 0 : 1;
          const PassTasks& from = pass_tasks[ri][key(kind, mb, dir == 0 ? vs : vs + 1)];
          const PassTasks& to = pass_tasks[ri][key(kind, mb, dir == 0 ? vs + 1 : vs)];
          sim::TransferSpec t;
          t.src_rank = dir == 0 ? r0 : r1;
          t.dst_rank = dir == 0 ? r1 : r0;
          t.bytes = act_bytes;
          t.label = task_label(keep_labels, "{} mb{} vs{}->{}", dir == 0 ? "send-act" : "send-grad",
                               mb, dir == 0 ? vs : vs + 1, dir == 0 ? vs + 1 : vs);
          const TaskId tr = E.add_transfer(t, {from.last});
          E.add_dependency(tr, to.first);
          if (ri == 0) pp_tasks.push_back(tr);
        }
      }
    }
  }

  // Data-parallel communication and the optimizer step, one DP group at a time: in symmetric
  // mode the representative alone (its TP/CP peers' identical groups as concurrent traffic);
  // in full mode every group once, with every simulated member's streams and dependencies.
  const double grad_bytes_per_param = plan.grad_dtype == models::GradDtype::FP32 ? 4.0 : 2.0;
  const double param_bytes = plan.precision == models::Precision::FP32 ? 4.0 : 2.0;
  const double bucket_params = std::max(1.0, plan.dp_bucket_bytes / grad_bytes_per_param);
  for (int s = 0; s < p; ++s) {
    std::vector<std::vector<Bucket>> buckets(v);
    if (dp_comm && !fsdp)
      for (int c = 0; c < v; ++c)
        buckets[c] = make_buckets(L.units[L.schedule.virtual_stage(s, c)], bucket_params);
    // Chunks in the order their gradients complete / their parameters are first used.
    std::vector<int> by_final(v), by_first(v);
    std::iota(by_final.begin(), by_final.end(), 0);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_final.begin(), by_final.end(),
              [&](int a, int b) { return final_pass[s][a] < final_pass[s][b]; });
    std::sort(by_first.begin(), by_first.end(),
              [&](int a, int b) { return first_forward[s][a] < first_forward[s][b]; });

    for (size_t ri = 0; ri < replicas.size(); ++ri) {
      Gpu& g = gpus[ri][s];
      std::vector<int> members{static_cast<int>(ri)};
      std::vector<int> group;
      std::vector<std::vector<int>> concurrent;
      if (dp_comm) {
        group = L.index.group(g.rank, Dim::DP);
        if (options.full) {
          if (group.front() != g.rank) continue;  // the group's first member issues for all
          members.clear();
          for (int r : group) members.push_back(rank_to_replica[static_cast<size_t>(r)]);
        }
        // The identical DP groups of its TP/CP peers run at the same time on the same nodes.
        for (int peer : L.index.group(g.rank, Dim::TP))
          if (peer != g.rank) concurrent.push_back(L.index.group(peer, Dim::DP));
        for (int peer : L.index.group(g.rank, Dim::CP))
          if (peer != g.rank) concurrent.push_back(L.index.group(peer, Dim::DP));
      }
      const bool has_rep = std::find(members.begin(), members.end(), 0) != members.end();
      // One collective over the group. Its duration is the sim's cost of that collective on the
      // real group over the routed topology with the identical concurrent groups' flows (as
      // for TP); it runs as a task of that duration on every simulated member's dp (or ag)
      // stream, each waiting for every member's dependencies. Returns the task per member.
      auto collective = [&](sim::CollectiveOp op, double bytes, const std::string& label,
                            bool gather_stream, const std::vector<TaskId>& deps) {
        const double seconds = L.collective_seconds(CommClass::DP, op, bytes, group, concurrent);
        std::vector<TaskId> ids;
        for (int rj : members) {
          const Gpu& h = gpus[static_cast<size_t>(rj)][s];
          ids.push_back(E.add_compute(gather_stream ? h.ag : h.dp, T(seconds), label, deps));
          if (rj == 0) reps[s].dp.push_back(ids.back());
        }
        if (has_rep) reps[s].dp_bytes += (op == sim::CollectiveOp::ALL_REDUCE ? 2.0 : 1.0) * bytes;
        return ids;
      };
      auto unit_task = [&](int rj, int pass_index, int unit) -> const PassTasks& {
        return gpus[static_cast<size_t>(rj)][s]
            .units[static_cast<size_t>(pass_index)][static_cast<size_t>(unit)];
      };
      std::vector<std::vector<TaskId>> reduced(members.size());  // per member
      auto add_reduced = [&](const std::vector<TaskId>& ids) {
        for (size_t k = 0; k < ids.size(); ++k) reduced[k].push_back(ids[k]);
      };

      if (dp_comm && !fsdp && zero_sharded && plan.overlap_param_gather) {
        // ZeRO-1/2 parameter all-gather of the previous step's update, overlapped with this
        // step's forward (Megatron's --overlap-param-gather): issued at the start in the order
        // the buckets are first used; a bucket's first layer waits for it.
        for (int c : by_first) {
          const auto& bs = buckets[c];
          for (auto b = bs.rbegin(); b != bs.rend(); ++b) {
            const auto ids =
                collective(sim::CollectiveOp::ALL_GATHER, b->params * param_bytes,
                           task_label(keep_labels, "dp-ag c{} L{}-{}", c, b->lo, b->hi), false, {});
            for (size_t k = 0; k < members.size(); ++k)
              E.add_dependency(ids[k], unit_task(members[k], first_forward[s][c], b->lo).first);
            for (size_t k = 0; k < members.size(); ++k)
              if (members[k] == 0) reps[s].gather.push_back(ids[k]);
          }
        }
      }
      if (dp_comm && !fsdp) {
        // Gradient buckets, in the order they complete: with --overlap-grad-reduce each as
        // soon as the backward of its first layer (in forward order) ends in the chunk's final
        // weight-gradient pass; otherwise all after the stage's last backward.
        const auto op =
            zero_sharded ? sim::CollectiveOp::REDUCE_SCATTER : sim::CollectiveOp::ALL_REDUCE;
        for (int c : by_final) {
          for (const Bucket& b : buckets[c]) {
            std::vector<TaskId> deps;
            for (int rj : members)
              deps.push_back(plan.overlap_grad_reduce
                                 ? unit_task(rj, final_pass[s][c], b.lo).last
                                 : gpus[static_cast<size_t>(rj)][s].last_backward);
            add_reduced(collective(op, b.params * grad_bytes_per_param,
                                   task_label(keep_labels, "dp-{} c{} L{}-{}",
                                              zero_sharded ? "rs" : "ar", c, b.lo, b.hi),
                                   false, deps));
          }
        }
      }
      if (fsdp) {
        // ZeRO-3 / FSDP: every use of a unit's parameters (its forward, its backward; each
        // micro-batch) all-gathers them on the ag stream just before; with prefetch the gather
        // of use i waits only for use i-2 to finish (at most two units gathered at once, the
        // memory model's buffers), without it for use i-1. Gradients are reduce-scattered per
        // unit after each weight-gradient pass (every micro-batch: they are sharded).
        const auto& order = L.schedule.per_stage[s];
        std::vector<std::pair<int, int>> uses, grads;  // (pass index, unit)
        for (int pi = 0; pi < static_cast<int>(order.size()); ++pi) {
          const Pass& pass = order[static_cast<size_t>(pi)];
          const int n = static_cast<int>(L.units[L.schedule.virtual_stage(s, pass.chunk)].size());
          for (int k = 0; k < n; ++k) {
            const int u = pass.kind == PassKind::FORWARD ? k : n - 1 - k;
            if (pass.kind != PassKind::BACKWARD_WEIGHT) uses.push_back({pi, u});
            if (pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT)
              grads.push_back({pi, u});
          }
        }
        const int ahead = options.fsdp_prefetch ? 2 : 1;
        for (size_t i = 0; i < uses.size(); ++i) {
          const auto [pi, u] = uses[i];
          const Pass& pass = order[static_cast<size_t>(pi)];
          const Unit& unit =
              L.units[L.schedule.virtual_stage(s, pass.chunk)][static_cast<size_t>(u)];
          if (unit.cost.params <= 0) continue;
          std::vector<TaskId> deps;
          if (i >= static_cast<size_t>(ahead))
            for (int rj : members)
              deps.push_back(unit_task(rj, uses[i - ahead].first, uses[i - ahead].second).last);
          const auto ids =
              collective(sim::CollectiveOp::ALL_GATHER, unit.cost.params * param_bytes,
                         task_label(keep_labels, "dp-ag {} mb{} c{} {}", to_string(pass.kind),
                                    pass.micro_batch, pass.chunk, unit.name),
                         true, deps);
          for (size_t k = 0; k < members.size(); ++k)
            E.add_dependency(ids[k], unit_task(members[k], pi, u).first);
          for (size_t k = 0; k < members.size(); ++k)
            if (members[k] == 0) reps[s].gather.push_back(ids[k]);
        }
        for (const auto& [pi, u] : grads) {
          const Pass& pass = order[static_cast<size_t>(pi)];
          const Unit& unit =
              L.units[L.schedule.virtual_stage(s, pass.chunk)][static_cast<size_t>(u)];
          if (unit.cost.params <= 0) continue;
          std::vector<TaskId> deps;
          for (int rj : members) deps.push_back(unit_task(rj, pi, u).last);
          add_reduced(collective(
              sim::CollectiveOp::REDUCE_SCATTER, unit.cost.params * grad_bytes_per_param,
              task_label(keep_labels, "dp-rs mb{} c{} {}", pass.micro_batch, pass.chunk, unit.name),
              false, deps));
        }
      }

      // Optimizer step (memory-bound over the local shard) on each member's compute stream.
      double stage_params = 0;
      for (int c = 0; c < v; ++c)
        stage_params += L.chunk_cost[L.schedule.virtual_stage(s, c)].params;
      const double shard = zero_sharded ? plan.dp : 1.0;
      const double opt_s =
          L.gpu.memory_time_s(stage_params / shard * optimizer_bytes_per_param(plan));
      std::vector<TaskId> opts;
      for (size_t k = 0; k < members.size(); ++k) {
        const int rj = members[k];
        Gpu& h = gpus[static_cast<size_t>(rj)][s];
        std::vector<TaskId> deps = reduced[k];
        deps.push_back(h.last_backward);
        const TaskId opt = E.add_compute(h.compute, T(opt_s), "optimizer", deps);
        opts.push_back(opt);
        if (rj == 0) {
          R.optimizer_time_s += opt_s / p;
          reps[s].compute.push_back(opt);
        }
      }
      if (dp_comm && !fsdp && zero_sharded && !plan.overlap_param_gather) {
        // ZeRO-1/2: the updated shards are all-gathered per bucket after the optimizer step.
        for (int c : by_first) {
          const auto& bs = buckets[c];
          for (auto b = bs.rbegin(); b != bs.rend(); ++b)
            collective(sim::CollectiveOp::ALL_GATHER, b->params * param_bytes,
                       task_label(keep_labels, "dp-ag c{} L{}-{}", c, b->lo, b->hi), false, opts);
        }
      }
    }
  }

  E.run();

  // Measurements on the representative replica.
  const double step = sim::to_seconds(E.makespan());
  SimTime pipeline_end_ps = 0;
  for (TaskId t : all_pass_tasks) pipeline_end_ps = std::max(pipeline_end_ps, E.finish(t));
  const double pipeline_end = sim::to_seconds(pipeline_end_ps);
  for (int k = 0; k < COMM_CLASSES; ++k) R.comm_time_s[k] = comm_total[k] / p;
  // Pipeline transfers: busy time of the representative's transfer tasks, per GPU.
  double pp_total = 0;
  for (TaskId t : pp_tasks) pp_total += sim::to_seconds(E.finish(t) - E.start(t));
  R.comm_time_s[static_cast<int>(CommClass::PP)] = pp_total / p;
  // Data-parallel: busy time of the representative's collectives, and the part of it during
  // which its compute stream was idle (exposed: not hidden behind compute or the blocking
  // model-parallel collectives).
  double dp_total = 0, dp_exposed = 0, dp_bytes = 0;
  std::int64_t dp_count = 0;
  // Seconds of the union of `tasks` (clipped to `until`) during which `busy` (sorted,
  // disjoint: one serial stream) is idle.
  auto idle_union_s = [&](const std::vector<TaskId>& tasks,
                          const std::vector<std::pair<SimTime, SimTime>>& busy, SimTime until) {
    std::vector<std::pair<SimTime, SimTime>> iv;
    for (TaskId t : tasks)
      if (E.start(t) < until) iv.push_back({E.start(t), std::min(E.finish(t), until)});
    std::sort(iv.begin(), iv.end());
    double out = 0;
    size_t j = 0;
    for (size_t i = 0; i < iv.size();) {
      SimTime a = iv[i].first, b = iv[i].second;
      for (++i; i < iv.size() && iv[i].first <= b; ++i) b = std::max(b, iv[i].second);
      SimTime covered = 0;
      while (j < busy.size() && busy[j].second <= a) ++j;
      for (size_t k = j; k < busy.size() && busy[k].first < b; ++k)
        covered += std::max<SimTime>(0, std::min(b, busy[k].second) - std::max(a, busy[k].first));
      out += sim::to_seconds(b - a - covered);
    }
    return out;
  };
  // Bubble: the idle time of the busiest stage during the pipeline phase, less the time it
  // waited for parameter gathers (exposed DP, not pipeline idling). With identical stages
  // every stage idles the same; a heavier last stage with the LM head sets the pace.
  double bubble = pipeline_end, compute = 0, mp_comm = 0;
  for (int s = 0; s < p; ++s) {
    std::vector<std::pair<SimTime, SimTime>> busy;
    const RepStage& rs = reps[static_cast<size_t>(s)];
    for (TaskId t : rs.compute) busy.push_back({E.start(t), E.finish(t)});
    std::sort(busy.begin(), busy.end());
    for (TaskId t : rs.dp) dp_total += sim::to_seconds(E.finish(t) - E.start(t));
    dp_exposed += idle_union_s(rs.dp, busy, E.makespan());
    const double gather_wait = idle_union_s(rs.gather, busy, pipeline_end_ps);
    bubble = std::min(bubble, sim::to_seconds(pipeline_end_ps - rs.busy_ps) - gather_wait);
    compute += rs.compute_s;
    mp_comm += rs.comm_s;
    dp_bytes += rs.dp_bytes;
    dp_count += static_cast<std::int64_t>(rs.dp.size());
  }
  compute /= p;
  mp_comm /= p;
  R.step_time_s = step;
  R.pipeline_time_s = pipeline_end;
  R.bubble_time_s = std::max(0.0, bubble);
  R.bubble_fraction = pipeline_end > 0 ? R.bubble_time_s / pipeline_end : 0;
  R.compute_time_s = compute + R.optimizer_time_s;
  R.comm_time_s[static_cast<int>(CommClass::DP)] = dp_total / p;
  R.exposed_comm_s = {};
  for (int k = 0; k < COMM_CLASSES; ++k)
    if (k != static_cast<int>(CommClass::PP) && k != static_cast<int>(CommClass::DP))
      R.exposed_comm_s[k] = R.comm_time_s[k];
  R.exposed_comm_s[static_cast<int>(CommClass::DP)] = dp_exposed / p;
  R.exposed_comm_time_s = mp_comm + dp_exposed / p;
  R.dp_bytes_per_gpu = dp_bytes / p;
  R.dp_collectives = dp_count;

  const double gpus_total = double(plan.gpus());
  const models::StepFlops flops = models::step_flops(model, plan);
  const double model_flops = flops.model();
  const double hw_flops = flops.hardware();
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
      ts.category = ts.name.rfind("dp", 0) == 0                 ? "dp"
                    : ts.name.find("comm") != std::string::npos ? "tp"
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
