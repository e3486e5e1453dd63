#include "strategies/step/step_graph.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/memory.hpp"
#include "sim/nccl_model.hpp"

namespace loom::strategies {

sim::EngineOptions engine_options(const SimulateOptions& o) {
  sim::EngineOptions e;
  e.network = o.network;
  e.collective_timing =
      o.live_collectives ? sim::CollectiveTiming::FLOWS : sim::CollectiveTiming::FROZEN;
  // The ideal network is for analysis: no protocol latencies either.
  if (o.network == sim::NetworkMode::IDEAL) e.cost.nccl_overheads = false;
  e.collective_override = o.collective_override.get();
  e.collective_time_scale = o.collective_time_scale;
  return e;
}

namespace {

PassRoles find_roles(const PipelineSchedule& schedule, int chunks) {
  PassRoles r;
  const int p = schedule.stages;
  r.final_pass.assign(p, std::vector<int>(chunks, -1));
  r.first_forward.assign(p, std::vector<int>(chunks, -1));
  for (int s = 0; s < p; ++s) {
    const auto& order = schedule.per_stage[s];
    for (int i = 0; i < static_cast<int>(order.size()); ++i) {
      const Pass& pass = order[static_cast<size_t>(i)];
      if (pass.kind == PassKind::FORWARD && r.first_forward[s][pass.chunk] < 0)
        r.first_forward[s][pass.chunk] = i;
      if (ends_weight_gradients(pass)) r.final_pass[s][pass.chunk] = i;
    }
  }
  return r;
}

std::vector<Replica> simulated_replicas(const models::TrainingPlan& plan, bool full) {
  std::vector<Replica> out;
  if (!full) return {Replica{}};
  for (int d = 0; d < plan.dp; ++d)
    for (int c = 0; c < plan.cp; ++c)
      for (int t = 0; t < plan.tp; ++t) out.push_back({t, c, d});
  return out;
}

// Routed-expert parameters of each unit, laid out as cost_stages lays out the units (the
// embedding first on virtual stage 0, then the layers, the head last); empty when ep == 1.
std::vector<std::vector<double>> expert_params(const models::ModelSpec& m,
                                               const models::TrainingPlan& p,
                                               const StageWork& work) {
  if (p.ep <= 1 || !m.is_moe()) return {};
  double moe_layer = -1;  // identical MoE layers: computed once
  const auto vs_layers = models::virtual_stage_layers(m, p);
  std::vector<std::vector<double>> out(vs_layers.size());
  int next = 0;
  for (size_t vs = 0; vs < vs_layers.size(); ++vs) {
    if (vs == 0 && !models::embedding_ops(m, p).empty()) out[vs].push_back(0.0);
    for (int i = 0; i < vs_layers[vs]; ++i, ++next) {
      if (!m.is_moe_layer(next)) {
        out[vs].push_back(0.0);
        continue;
      }
      if (moe_layer < 0) {
        moe_layer = 0;
        for (const auto& op : models::layer_ops(m, p, next))
          if (op.expert) moe_layer += op.params;
      }
      out[vs].push_back(moe_layer);
    }
    if (vs + 1 == vs_layers.size()) out[vs].push_back(0.0);
    check_invariant(out[vs].size() == work.units[vs].size(),
                    "expert parameters laid out unlike the costed units");
  }
  return out;
}

}  // namespace

double comm_sm_share(const topo::GpuSpec& gpu) {
  if (gpu.sm_count <= 0) return 0.0;
  return std::min(0.5, static_cast<double>(sim::nccl_channels(gpu)) / gpu.sm_count);
}

double overlap_slowdown(const topo::GpuSpec& gpu) {
  return 1.0 / (1.0 - comm_sm_share(gpu));
}

double tp_overlap_residual(int tp) {
  return tp > 1 ? 1.0 / tp : 1.0;
}

// A B pass, or a W pass under zero-bubble (whose Bi computes no weight gradients), ends the
// weight gradients of its micro-batch and chunk.
bool ends_weight_gradients(const Pass& pass) {
  return pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT;
}

StepGraph::StepGraph(const models::ModelSpec& m, const models::TrainingPlan& p,
                     const topo::Cluster& cluster, const SimulateOptions& o)
    : model(m),
      plan(p),
      options(o),
      kernels(o.kernels ? o.kernels
                        : std::make_shared<topo::DatasheetKernelModel>(cluster.gpu, o.efficiency)),
      index(RankLayout(p), p),
      engine(cluster, engine_options(o)),
      schedule(build_schedule(p.schedule, p.pp, static_cast<int>(p.micro_batches()), p.vpp)),
      work(cost_stages(m, p, *kernels)),
      unit_expert_params(expert_params(m, p, work)),
      edp(p.expert_dp()),
      roles(find_roles(schedule, p.vpp)),
      replicas(simulated_replicas(p, o.full)),
      reps(static_cast<size_t>(p.pp)) {
  const bool fsdp = p.dp > 1 && p.zero >= 3;
  const double slowdown = overlap_slowdown(cluster.gpu);
  gpus.resize(replicas.size());
  rank_to_replica.assign(static_cast<size_t>(p.gpus()), -1);
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int s = 0; s < p.pp; ++s) {
      SimGpu g;
      g.rank = index.rank(replicas[ri].t, replicas[ri].c, replicas[ri].d, s);
      g.compute = engine.add_stream(fmt::format("rank{}/compute", g.rank), g.rank);
      g.dp = engine.add_stream(fmt::format("rank{}/dp", g.rank), g.rank);
      g.ag = fsdp ? engine.add_stream(fmt::format("rank{}/dp-ag", g.rank), g.rank) : g.dp;
      // DP collectives overlapping compute take SMs from it (see overlap_slowdown).
      if (p.tp_comm_overlap && p.tp > 1)
        g.tp = engine.add_stream(fmt::format("rank{}/tp-overlap", g.rank), g.rank);
      if (slowdown > 1.0) {
        if (p.dp > 1) engine.add_contention(g.compute, g.dp, slowdown);
        if (g.ag != g.dp) engine.add_contention(g.compute, g.ag, slowdown);
        if (g.tp != sim::NO_STREAM) engine.add_contention(g.compute, g.tp, slowdown);
      }
      g.units.resize(schedule.per_stage[s].size());
      rank_to_replica[static_cast<size_t>(g.rank)] = static_cast<int>(ri);
      gpus[ri].push_back(std::move(g));
    }
  }
  pass_tasks.assign(replicas.size(), std::vector<PassTasks>(static_cast<size_t>(2) *
                                                            micro_batches() * p.pp * p.vpp));
}

size_t StepGraph::pass_key(bool backward, int micro_batch, int virtual_stage) const {
  const size_t vstages = static_cast<size_t>(plan.pp) * plan.vpp;
  return ((backward ? 1 : 0) * static_cast<size_t>(micro_batches()) + micro_batch) * vstages +
         virtual_stage;
}

bool StepGraph::split_pass(int s, int i) const {
  if (plan.dp <= 1) return false;
  if (plan.zero >= 3) return true;
  const int c = schedule.per_stage[s][static_cast<size_t>(i)].chunk;
  if (plan.overlap_grad_reduce && roles.final_pass[s][c] == i) return true;
  if (plan.zero >= 1 && plan.overlap_param_gather && roles.first_forward[s][c] == i) return true;
  return false;
}

const SimGpu* StepGraph::gpu_of(int rank, int stage) const {
  const int ri = rank_to_replica[static_cast<size_t>(rank)];
  return ri < 0 ? nullptr : &gpus[static_cast<size_t>(ri)][static_cast<size_t>(stage)];
}

void StepGraph::record(sim::TaskId id, TraceCategory c) {
  if (!options.keep_timeline) return;
  if (category.size() <= static_cast<size_t>(id)) category.resize(static_cast<size_t>(id) + 1);
  category[static_cast<size_t>(id)] = c;
}

sim::TaskId StepGraph::add_compute(sim::StreamId stream, double seconds, std::string label,
                                   TraceCategory c, const std::vector<sim::TaskId>& deps) {
  const sim::TaskId id = engine.add_compute(stream, to_ps(seconds), std::move(label), deps);
  record(id, c);
  return id;
}

sim::TaskId StepGraph::add_collective(sim::CollectiveOp op, double bytes,
                                      const std::vector<int>& group,
                                      std::vector<sim::StreamId> streams,
                                      std::vector<std::vector<int>> concurrent, std::string label,
                                      TraceCategory c, const std::vector<sim::TaskId>& deps) {
  sim::CollectiveSpec spec;
  spec.request.op = op;
  spec.request.ranks = group;
  spec.request.bytes = bytes;
  spec.request.concurrent_groups = std::move(concurrent);
  spec.streams = std::move(streams);
  spec.label = std::move(label);
  const sim::TaskId id = engine.add_collective(spec, deps);
  record(id, c);
  return id;
}

std::pair<sim::TaskId, sim::TaskId> StepGraph::add_collective_sequence(
    const std::vector<std::pair<sim::CollectiveOp, double>>& ops, const std::vector<int>& group,
    const std::vector<sim::StreamId>& streams, const std::string& label, TraceCategory c,
    std::vector<sim::SimTime>* frozen_ps, const std::vector<sim::TaskId>& deps) {
  std::vector<sim::CollectiveSpec> specs(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    specs[i].request.op = ops[i].first;
    specs[i].request.bytes = ops[i].second;
    specs[i].request.ranks = group;
    specs[i].streams = streams;
    specs[i].label = label;
  }
  const auto range = engine.add_collective_sequence(specs, deps);
  for (sim::TaskId id = range.first; id <= range.second; ++id) record(id, c);
  if (frozen_ps && range.first == range.second && specs.size() > 1) {
    for (const sim::CollectiveSpec& spec : specs)
      frozen_ps->push_back(engine.frozen_time(spec.request));  // memoised: a lookup
  }
  return range;
}

}  // namespace loom::strategies
