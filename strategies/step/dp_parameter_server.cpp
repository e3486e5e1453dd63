// Parameter servers (plan.dp_mode PS). Every worker is a GPU holding the whole model
// (tp = pp = cp = 1). Parameters are dealt to S servers by unit (the embedding, each layer,
// the head): every tensor cut into S equal byte ranges (MXNet's big-array split, balanced),
// or whole tensors round-robin (TensorFlow's replica_device_setter, which can leave one
// server with the embedding). A step of worker w:
//
//   pull   each unit's shards from their servers, before the unit's first forward
//   F, B   as always (gradient accumulation over micro-batches)
//   push   each unit's gradient shards after its final backward
//   apply  on the server: aggregate and run the optimizer on the shard (memory-bound at the
//          server's rate: a host's DRAM bandwidth, or the GPU's HBM through the kernel model)
//
// Pulls and pushes are plain flows between the worker's GPU and the server's device (a host
// CPU behind its NIC, or a GPU), so a server's NIC is shared max-min by every worker's
// traffic: with W workers it carries W shards each way per step. Update rules decide what a
// pull waits for: SYNC, the servers' aggregated apply of the previous step (every worker's
// push); ASYNC, the apply of this worker's own previous push; SSP with bound s, that too and
// every worker having finished step k - s - 1; GEO with interval K, workers step a local
// optimizer every step and push their parameter delta (and pull) only every K steps.
// Servers run applies in arrival order (sim::StreamOrder::ARRIVAL).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "models/memory.hpp"
#include "strategies/step/dp_lowering.hpp"

namespace loom::strategies {
namespace {

using models::PsUpdate;
using sim::TaskId;

class ParameterServerLowering final : public DataParallelLowering {
 public:
  explicit ParameterServerLowering(StepGraph& g) : g_(g), update_(g.plan.ps_update) {
    add_servers();
    deal_shards();
  }

  std::vector<std::vector<TaskId>> before_optimizer(StageGroups&) override {
    const int k = g_.step;
    pulls_.emplace_back(g_.replicas.size());
    pushes_.emplace_back(g_.replicas.size());
    applies_.emplace_back(g_.replicas.size());
    if (pulls_at(k))
      for (size_t ri = 0; ri < g_.replicas.size(); ++ri) pull(k, ri);
    if (update_ != PsUpdate::GEO) push_and_apply(k, {});
    return std::vector<std::vector<TaskId>>(g_.replicas.size());
  }

  // Workers step no optimizer (the servers do), except under GEO: a local step every step.
  std::vector<TaskId> optimizer(StepGraph& g, int stage,
                                const std::vector<std::vector<TaskId>>& waits) override {
    if (update_ == PsUpdate::GEO) return lower_optimizer(g, stage, waits, false);
    return std::vector<TaskId>(g.replicas.size(), -1);
  }

  void after_optimizer(StageGroups&, const std::vector<TaskId>& optimizer) override {
    if (update_ == PsUpdate::GEO) push_and_apply(g_.step, optimizer);
  }

  bool sharded() const override { return false; }

  void measure(const StepGraph& g, DesignReport& r) const override;

 private:
  struct Server {
    topo::VertexId vertex = -1;
    sim::StreamId stream = sim::NO_STREAM;
    int gpu_type = -1;  // -1: a host
    std::string name;
  };
  struct Shard {
    int unit = 0;
    int server = 0;
    double elems = 0;
  };

  // Servers on hosts (host s) or on GPUs: server s on node s mod nodes, one GPU further in
  // each round, so servers spread over nodes (and their NICs) first.
  void add_servers() {
    const topo::Cluster& c = g_.cluster;
    for (int s = 0; s < g_.plan.ps_servers; ++s) {
      Server server;
      if (g_.plan.ps_placement == models::PsPlacement::HOST) {
        server.vertex = c.host_vertex(s);
        server.name = c.vertex(server.vertex).name;
        server.stream = g_.engine.add_stream(fmt::format("{}/ps-server", server.name),
                                             c.num_gpus() + s, sim::StreamOrder::ARRIVAL);
      } else {
        const int per_node = c.gpus_per_node(), nodes = c.num_nodes();
        const int rank = (s % nodes) * per_node + (s / nodes) % per_node;
        server.vertex = c.gpu_vertex(rank);
        server.gpu_type = c.gpu_type_of_rank(rank);
        server.name = fmt::format("rank{}", rank);
        server.stream = g_.engine.add_stream(fmt::format("rank{}/ps-server", rank), rank,
                                             sim::StreamOrder::ARRIVAL);
      }
      servers_.push_back(std::move(server));
    }
  }

  void deal_shards() {
    const auto& units = g_.work.units[0];
    const int S = g_.plan.ps_servers;
    int tensor = 0;  // global tensor index for round-robin
    for (size_t u = 0; u < units.size(); ++u) {
      std::vector<double> elems(static_cast<size_t>(S), 0.0);
      if (g_.plan.ps_shard == models::PsShard::BYTES) {
        for (double& e : elems) e = units[u].cost.params / S;
      } else {
        for (double t : units[u].cost.tensors) elems[static_cast<size_t>(tensor++ % S)] += t;
      }
      for (int s = 0; s < S; ++s) {
        if (elems[static_cast<size_t>(s)] <= 0) continue;
        shards_.push_back({static_cast<int>(u), s, elems[static_cast<size_t>(s)]});
      }
    }
  }

  bool pulls_at(int k) const {
    return k == 0 || update_ != PsUpdate::GEO || k % g_.plan.ps_update_bound == 0;
  }
  bool pushes_at(int k) const {
    return update_ != PsUpdate::GEO || (k + 1) % g_.plan.ps_update_bound == 0;
  }

  // The tasks a pull of shard `i` by worker `ri` in step `k` waits for (see file comment).
  std::vector<TaskId> pull_deps(int k, size_t ri, size_t i) {
    if (k == 0) return {};
    const auto prev = static_cast<size_t>(k - 1);
    if (update_ == PsUpdate::SYNC) return {sync_applies_[prev][i]};
    std::vector<TaskId> deps{applies_[prev][ri][i]};
    if (update_ == PsUpdate::SSP) {
      const int done = k - 1 - g_.plan.ps_update_bound;  // every worker must have ended it
      if (done >= 0) deps.push_back(joins_[static_cast<size_t>(done)]);
    }
    return deps;
  }

  void pull(int k, size_t ri) {
    SimGpu& h = g_.gpus[ri][0];
    const int pi = g_.roles.first_forward[0][0];
    const double bytes_per_elem = gathered_param_bytes(g_.plan);
    auto& mine = pulls_[static_cast<size_t>(k)][ri];
    mine.assign(shards_.size(), -1);
    for (size_t i = 0; i < shards_.size(); ++i) {
      const Shard& sh = shards_[i];
      sim::TransferSpec t;
      t.bytes = sh.elems * bytes_per_elem;
      t.src_vertex = servers_[static_cast<size_t>(sh.server)].vertex;
      t.dst_vertex = g_.cluster.gpu_vertex(h.rank);
      t.label = g_.label("ps-pull s{} u{} w{} step{}", sh.server, sh.unit, ri, k);
      const TaskId id = g_.add_transfer(t, TraceCategory::DP, pull_deps(k, ri, i));
      g_.engine.add_dependency(
          id, h.units[static_cast<size_t>(pi)][static_cast<size_t>(sh.unit)].first);
      mine[i] = id;
      count(ri, id, t.bytes, true);
    }
  }

  // Pushes of every worker after its final backward (GEO: after its local optimizer,
  // `optimizer`), then the servers' applies.
  void push_and_apply(int k, const std::vector<TaskId>& optimizer) {
    const auto kk = static_cast<size_t>(k);
    if (!pushes_at(k)) return;
    const int pi = g_.roles.final_pass[0][0];
    const double bytes_per_elem = reduced_grad_bytes(g_.plan);
    for (size_t ri = 0; ri < g_.replicas.size(); ++ri) {
      SimGpu& h = g_.gpus[ri][0];
      auto& mine = pushes_[kk][ri];
      mine.assign(shards_.size(), -1);
      for (size_t i = 0; i < shards_.size(); ++i) {
        const Shard& sh = shards_[i];
        sim::TransferSpec t;
        t.bytes = sh.elems * bytes_per_elem;
        t.src_vertex = g_.cluster.gpu_vertex(h.rank);
        t.dst_vertex = servers_[static_cast<size_t>(sh.server)].vertex;
        t.label = g_.label("ps-push s{} u{} w{} step{}", sh.server, sh.unit, ri, k);
        const TaskId after =
            optimizer.empty() ? h.units[static_cast<size_t>(pi)][static_cast<size_t>(sh.unit)].last
                              : optimizer[ri];
        mine[i] = g_.add_transfer(t, TraceCategory::DP, {after});
        count(ri, mine[i], t.bytes);
      }
    }
    auto& ends = g_.step_ends[kk];
    if (update_ == PsUpdate::SYNC) {
      sync_applies_.emplace_back(shards_.size(), -1);
      for (size_t i = 0; i < shards_.size(); ++i) {
        std::vector<TaskId> deps;
        for (const auto& p : pushes_[kk]) deps.push_back(p[i]);
        const TaskId id = apply(k, i, static_cast<double>(g_.replicas.size()), deps, "all");
        sync_applies_[kk][i] = id;
        for (auto& e : ends) e.push_back(id);
      }
      return;
    }
    std::vector<TaskId> all;
    for (size_t ri = 0; ri < g_.replicas.size(); ++ri) {
      auto& mine = applies_[kk][ri];
      mine.assign(shards_.size(), -1);
      for (size_t i = 0; i < shards_.size(); ++i) {
        mine[i] = apply(k, i, 1.0, {pushes_[kk][ri][i]}, fmt::format("w{}", ri));
        ends[ri].push_back(mine[i]);
        all.push_back(mine[i]);
      }
    }
    if (update_ == PsUpdate::SSP) {  // "every worker has ended step k", for later pulls
      sim::TransferSpec join;
      join.src_vertex = join.dst_vertex = servers_.front().vertex;
      join.label = g_.label("ps step {} ended everywhere", k);
      joins_.resize(kk + 1, -1);
      joins_[kk] = g_.add_transfer(join, TraceCategory::DP, all);
    }
  }

  // The server-side apply of shard `i` over `gradients` pushed gradients (see apply_bytes).
  TaskId apply(int k, size_t i, double gradients, const std::vector<TaskId>& deps,
               const std::string& who) {
    const Shard& sh = shards_[i];
    const Server& server = servers_[static_cast<size_t>(sh.server)];
    const double bytes = sh.elems * apply_bytes_per_elem(gradients);
    return g_.add_compute(server.stream, apply_seconds(server, bytes),
                          g_.label("ps-apply u{} {} step{}", sh.unit, who, k),
                          TraceCategory::OPTIMIZER, deps);
  }

  // Bytes a server moves per parameter to apply `gradients` pushes: sum them (read each,
  // write the sum) and run the optimizer (models::optimizer_step_bytes_per_param: it reads the
  // summed gradient). GEO adds a parameter delta instead: read it, read and write the fp32
  // parameter, write the 16-bit copy workers pull.
  double apply_bytes_per_elem(double gradients) const {
    const double g = reduced_grad_bytes(g_.plan);
    if (update_ == PsUpdate::GEO) return g + 8.0 + (gathered_param_bytes(g_.plan) < 4 ? 2.0 : 0.0);
    const double sum = gradients > 1 ? (gradients + 1) * g : 0.0;
    return sum + models::optimizer_step_bytes_per_param(g_.plan);
  }

  // Memory-bound on the server: a host at memory_bandwidth_fraction of its DRAM bandwidth
  // (the fraction a streaming GPU kernel reaches; STREAM-like), a GPU through its kernel model.
  double apply_seconds(const Server& server, double bytes) const {
    if (server.gpu_type < 0) {
      return bytes / (g_.cluster.host.memory_bandwidth_Bps *
                      g_.options.efficiency.memory_bandwidth_fraction);
    }
    topo::KernelOp op;
    op.kind = topo::KernelKind::OPTIMIZER;
    op.bytes = bytes;
    return g_.kernels_of(server.gpu_type)
        .seconds(op, topo::KernelPass::FORWARD, compute_dtype(g_.plan.precision));
  }

  // Bytes moved by every worker (for the volume) and the representative's first-step tasks;
  // its forward waits on a pull (exposed communication, not pipeline bubble).
  void count(size_t ri, TaskId id, double bytes, bool pull = false) {
    bytes_total_ += bytes;
    if (ri != 0) return;
    RepStage& rep = g_.reps[0];
    rep.dp_concurrent = true;
    rep.dp.push_back(id);
    if (pull) rep.gather.push_back(id);
    rep.dp_bytes += bytes;
  }

  StepGraph& g_;
  PsUpdate update_;
  std::vector<Server> servers_;
  std::vector<Shard> shards_;
  // [step][worker][shard]: -1 where none.
  std::vector<std::vector<std::vector<TaskId>>> pulls_, pushes_, applies_;
  std::vector<std::vector<TaskId>> sync_applies_;  // [step][shard]
  std::vector<TaskId> joins_;                      // SSP: [step]
  double bytes_total_ = 0;
};

void ParameterServerLowering::measure(const StepGraph& g, DesignReport& r) const {
  const sim::Engine& e = g.engine;
  const auto W = static_cast<double>(g.replicas.size());
  r.ps_bytes_per_worker_step = bytes_total_ / (W * g.steps());
  r.breakdown.emplace_back("pull (worker 0, step 0)", union_seconds(e, pulls_[0][0]));
  r.breakdown.emplace_back("push (worker 0, step 0)", union_seconds(e, pushes_[0][0]));
  // The busiest server's applies in the first step.
  std::vector<double> busy(servers_.size(), 0.0);
  for (size_t i = 0; i < shards_.size(); ++i) {
    const auto s = static_cast<size_t>(shards_[i].server);
    std::vector<TaskId> ids;
    if (update_ == PsUpdate::SYNC && !sync_applies_.empty()) ids.push_back(sync_applies_[0][i]);
    if (update_ != PsUpdate::SYNC && !applies_.empty())
      for (const auto& per_worker : applies_[0])
        if (!per_worker.empty()) ids.push_back(per_worker[i]);
    for (TaskId t : ids) busy[s] += sim::to_seconds(e.finish(t) - e.start(t));
  }
  r.breakdown.emplace_back("server apply (busiest server, step 0)",
                           busy.empty() ? 0.0 : *std::max_element(busy.begin(), busy.end()));
  // Server memory: its shards' fp32 parameters and optimizer states.
  const models::BytesPerParameter b = models::bytes_per_parameter(g.plan);
  std::vector<double> held(servers_.size(), 0.0);
  for (const Shard& sh : shards_) held[static_cast<size_t>(sh.server)] += sh.elems;
  for (size_t s = 0; s < servers_.size(); ++s)
    r.device_memory.emplace_back(fmt::format("server {}", servers_[s].name),
                                 held[s] * (4.0 + b.states));
  // Staleness: sync gradients are computed on the parameters every update before them made.
  const int n = g.steps();
  if (update_ == PsUpdate::SYNC) {
    r.staleness_histogram = {static_cast<std::int64_t>(W) * n};
    return;
  }
  // Per shard: every apply's finish, sorted, to count the updates before a time.
  std::vector<std::vector<sim::SimTime>> done(shards_.size());
  for (const auto& per_step : applies_)
    for (const auto& per_worker : per_step)
      for (size_t i = 0; i < per_worker.size(); ++i)
        if (per_worker[i] >= 0) done[i].push_back(e.finish(per_worker[i]));
  for (auto& d : done) std::sort(d.begin(), d.end());
  auto updates_by = [&](size_t i, sim::SimTime t) {
    return static_cast<double>(std::upper_bound(done[i].begin(), done[i].end(), t) -
                               done[i].begin());
  };
  double sum = 0, count = 0;
  for (int k = 0; k < n; ++k) {
    if (!pushes_at(k)) continue;
    // The pull this gradient (GEO: this delta) was computed from.
    const int base = update_ == PsUpdate::GEO ? k + 1 - g.plan.ps_update_bound : k;
    for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
      double stale = 0;
      for (size_t i = 0; i < shards_.size(); ++i) {
        const TaskId a = applies_[static_cast<size_t>(k)][ri][i];
        const TaskId p = pulls_[static_cast<size_t>(base)][ri][i];
        // Updates applied before this one started, less those the pulled parameters held.
        stale += std::max(0.0, updates_by(i, e.start(a)) - updates_by(i, e.start(p)));
      }
      const auto s = static_cast<size_t>(std::llround(stale / static_cast<double>(shards_.size())));
      if (r.staleness_histogram.size() <= s) r.staleness_histogram.resize(s + 1, 0);
      ++r.staleness_histogram[s];
      sum += static_cast<double>(s);
      ++count;
    }
  }
  r.staleness_mean = count > 0 ? sum / count : 0;
}

}  // namespace

std::unique_ptr<DataParallelLowering> make_parameter_server_lowering(StepGraph& g) {
  return std::make_unique<ParameterServerLowering>(g);
}

}  // namespace loom::strategies
