#include "strategies/step/step_graph.hpp"

#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "common/seeded_draw.hpp"
#include "models/flops.hpp"
#include "models/memory.hpp"
#include "sim/nccl_model.hpp"
#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/task_budget.hpp"

namespace loom::strategies {

sim::EngineOptions engine_options(const SimulateOptions& o) {
  sim::EngineOptions e;
  e.network = o.network;
  e.collective_timing =
      o.live_collectives ? sim::CollectiveTiming::FLOWS : sim::CollectiveTiming::FROZEN;
  // The ideal network is for analysis: no protocol latencies either.
  if (o.network == sim::NetworkMode::IDEAL) e.cost.nccl_overheads = false;
  e.cost.flow_classes = e.cost.twins_once = o.symmetric_costing;
  e.collective_override = o.collective_override.get();
  e.collective_time_scale = o.collective_time_scale;
  e.link_efficiency = o.link_efficiency;
  e.nccl_tuning = o.nccl_tuning;
  e.keep_notes = o.keep_timeline;  // the trace's slice arguments (bytes, group, ranks)
  if (o.progress) {
    const auto span = StepGraph::ENGINE_PROGRESS;
    e.progress = [progress = o.progress, span](double done) {
      progress(span.begin + (span.end - span.begin) * done);
    };
  }
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

std::vector<std::shared_ptr<const topo::KernelTimeModel>> extra_type_models(
    const topo::Cluster& cluster, const SimulateOptions& o) {
  std::vector<std::shared_ptr<const topo::KernelTimeModel>> out;
  for (int k = 1; k < cluster.num_gpu_types(); ++k)
    out.push_back(std::make_shared<topo::DatasheetKernelModel>(cluster.gpu_type(k), o.efficiency));
  return out;
}

std::vector<StageWork> extra_type_work(
    const models::ModelSpec& m, const models::TrainingPlan& p, const topo::Cluster& c,
    const SimulateOptions& o,
    const std::vector<std::shared_ptr<const topo::KernelTimeModel>>& models, int ep_nodes) {
  std::vector<StageWork> out;
  for (size_t k = 0; k < models.size(); ++k) {
    const topo::GpuSpec& gpu = c.gpu_type(static_cast<int>(k) + 1);
    const double host_s = pass_host_launch_s(p, o.host_launch_s, gpu);
    out.push_back(cost_stages(m, p, *models[k], host_s, ep_nodes));
  }
  return out;
}

// The slowest of `ranks` on `stage` in step `k`: its GPU type and straggler factor.
std::pair<int, double> slowest(const StepGraph& g, const std::vector<int>& ranks, int stage,
                               int k) {
  std::pair<int, double> best{0, 0.0};
  double worst = -1;
  for (int r : ranks) {
    const int type = g.cluster.gpu_type_of_rank(r);
    const double f = straggler_factor(g.options, k, r);
    const double t = f * g.stage_seconds(type, stage);
    if (t > worst) {
      worst = t;
      best = {type, f};
    }
  }
  return best;
}

}  // namespace

double straggler_factor(const SimulateOptions& o, int step, int rank) {
  double f = 1.0;
  if (auto it = o.stragglers.find(rank); it != o.stragglers.end()) f = it->second;
  const RandomStragglers& rs = o.random_stragglers;
  if (rs.fraction > 0 && rs.mean_factor > 1) {
    const auto k = static_cast<std::uint64_t>(step), r = static_cast<std::uint64_t>(rank);
    if (uniform_draw(rs.seed, k, r, 0) < rs.fraction)
      f *= 1.0 + exponential_draw(rs.mean_factor - 1.0, rs.seed, k, r, 1);
  }
  return f;
}

double comm_sm_share(const topo::GpuSpec& gpu) {
  if (gpu.sm_count <= 0) return 0.0;
  return std::min(0.5, static_cast<double>(sim::nccl_channels(gpu)) / gpu.sm_count);
}

double overlap_slowdown(const topo::GpuSpec& gpu) {
  return 1.0 / (1.0 - comm_sm_share(gpu));
}

// A B pass, or a W pass under zero-bubble (whose Bi computes no weight gradients), ends the
// weight gradients of its micro-batch and chunk.
bool ends_weight_gradients(const Pass& pass) {
  return pass.kind == PassKind::BACKWARD || pass.kind == PassKind::BACKWARD_WEIGHT;
}

StepGraph::StepGraph(const models::ModelSpec& m, const models::TrainingPlan& p,
                     const topo::Cluster& c, const SimulateOptions& o)
    : model(m),
      plan(p),
      options(o),
      cluster(c),
      kernels(o.kernels ? o.kernels
                        : std::make_shared<topo::DatasheetKernelModel>(c.gpu, o.efficiency)),
      extra_kernels(extra_type_models(c, o)),
      index(RankLayout(p, o.order), p),
      ep_nodes(flex_exchange_nodes(p, c, index.group(0, models::Dim::EP))),
      engine(c, engine_options(o)),
      schedule(build_schedule(p.schedule, p.pp, static_cast<int>(p.micro_batches()), p.vpp)),
      work(cost_stages(m, p, *kernels, pass_host_launch_s(p, o.host_launch_s, c.gpu), ep_nodes)),
      extra_work(extra_type_work(m, p, c, o, extra_kernels, ep_nodes)),
      unit_expert_params(expert_params(m, p, work)),
      edp(p.expert_dp()),
      roles(find_roles(schedule, p.vpp)),
      reps(static_cast<size_t>(p.pp)) {
  choose_replicas();
  check_task_budget(*this);  // a step above MAX_ENGINE_TASKS is refused before it is built
  const bool fsdp = p.dp > 1 && p.zero >= 3;
  gpus.resize(replicas.size());
  rank_to_replica.assign(static_cast<size_t>(p.gpus()), -1);
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int s = 0; s < p.pp; ++s) {
      SimGpu g;
      g.rank = index.rank(replicas[ri].t, replicas[ri].c, replicas[ri].d, s);
      g.compute = engine.add_stream(fmt::format("rank{}/compute", g.rank), g.rank);
      g.dp = engine.add_stream(fmt::format("rank{}/dp", g.rank), g.rank);
      g.ag = fsdp ? engine.add_stream(fmt::format("rank{}/dp-ag", g.rank), g.rank) : g.dp;
      // DP collectives overlapping compute take SMs from it (see overlap_slowdown). TP
      // overlap's SMs are its implementation's, in tp_overlap_exposed_s.
      const double slowdown = overlap_slowdown(c.gpu_of_rank(g.rank));
      if ((p.tp_comm_overlap && p.tp > 1) || cp_overlapped(p))
        g.tp = engine.add_stream(fmt::format("rank{}/tp-overlap", g.rank), g.rank);
      if (p.overlap_moe_expert_parallel_comm && p.ep > 1)
        g.ep = engine.add_stream(fmt::format("rank{}/ep-overlap", g.rank), g.rank);
      if (slowdown > 1.0) {
        if (p.dp > 1) engine.add_contention(g.compute, g.dp, slowdown);
        if (g.ag != g.dp) engine.add_contention(g.compute, g.ag, slowdown);
        if (g.ep != sim::NO_STREAM) engine.add_contention(g.compute, g.ep, slowdown);
      }
      g.units.resize(schedule.per_stage[s].size());
      g.gpu_type = c.gpu_type_of_rank(g.rank);
      rank_to_replica[static_cast<size_t>(g.rank)] = static_cast<int>(ri);
      gpus[ri].push_back(std::move(g));
    }
  }
  pass_tasks.assign(replicas.size(), std::vector<PassTasks>(static_cast<size_t>(2) *
                                                            micro_batches() * p.pp * p.vpp));
}

StepGraph::~StepGraph() = default;

void StepGraph::choose_replicas() {
  std::vector<Replica> all;
  for (int d = 0; d < plan.dp; ++d)
    for (int c = 0; c < plan.cp; ++c)
      for (int t = 0; t < plan.tp; ++t) all.push_back({t, c, d});
  // Every worker when the design couples them all (see file comment).
  if (options.full || plan.dp_mode != models::DpMode::DDP) {
    replicas = all;
    for (const Replica& r : replicas) {
      represents.emplace_back();
      for (int s = 0; s < plan.pp; ++s) represents.back().push_back({index.rank(r.t, r.c, r.d, s)});
    }
    return;
  }
  // Symmetric: one replica (t = c = 0) per distinct role along dp.
  std::map<std::vector<std::pair<int, double>>, int> seen;
  for (int d = 0; d < plan.dp; ++d) {
    std::vector<std::vector<int>> members(static_cast<size_t>(plan.pp));
    std::vector<std::pair<int, double>> role;
    for (int s = 0; s < plan.pp; ++s) {
      for (int c = 0; c < plan.cp; ++c)
        for (int t = 0; t < plan.tp; ++t)
          members[static_cast<size_t>(s)].push_back(index.rank(t, c, d, s));
      for (int k = 0; k < steps(); ++k) role.push_back(slowest(*this, members[s], s, k));
    }
    if (!seen.emplace(role, d).second) continue;
    replicas.push_back({0, 0, d});
    represents.push_back(std::move(members));
    replica_roles.push_back(std::move(role));
  }
}

const StageWork& StepGraph::work_of(int type) const {
  return type == 0 ? work : extra_work.at(static_cast<size_t>(type - 1));
}

const topo::KernelTimeModel& StepGraph::kernels_of(int type) const {
  return type == 0 ? *kernels : *extra_kernels.at(static_cast<size_t>(type - 1));
}

double StepGraph::stage_seconds(int type, int stage) const {
  double t = 0;
  for (int c = 0; c < chunks(); ++c) {
    const PassCost& pc =
        work_of(type).chunk_cost[static_cast<size_t>(schedule.virtual_stage(stage, c))];
    t += pc.fwd_s + pc.bwd_input_s + pc.bwd_weight_s + pc.recompute_s;
  }
  return t;
}

void StepGraph::begin_step(int k) {
  step = k;
  if (k == 1) {
    first_ = {std::move(reps), std::move(all_pass_tasks), std::move(pp_tasks), optimizer_time_s,
              pass_tasks};
  }
  if (k >= 1) {
    reps.assign(static_cast<size_t>(plan.pp), RepStage{});
    all_pass_tasks.clear();
    pp_tasks.clear();
    optimizer_time_s = 0;
    for (auto& per_replica : pass_tasks)
      std::fill(per_replica.begin(), per_replica.end(), PassTasks{});
  }
  step_first_task.push_back(engine.num_tasks());
  step_ends.emplace_back(replicas.size());
  for (size_t ri = 0; ri < replicas.size(); ++ri) {
    for (int s = 0; s < plan.pp; ++s) {
      SimGpu& h = gpus[ri][static_cast<size_t>(s)];
      std::tie(h.gpu_type, h.factor) =
          replica_roles.empty() ? slowest(*this, represents[ri][static_cast<size_t>(s)], s, k)
                                : replica_roles[ri][static_cast<size_t>(s * steps() + k)];
      if (k == 0) continue;
      for (auto& u : h.units) u.clear();
      h.last_backward = -1;
      // DDP and ZeRO: the step starts on every stream of the GPU once the previous step ended
      // there (its optimizer; ZeRO's parameter gathers after it), which FIFO order alone
      // would not give the dp and gather streams.
      const auto& prev = step_ends[static_cast<size_t>(k - 1)][ri];
      if (plan.dp_mode != models::DpMode::DDP || prev.empty()) continue;
      engine.add_compute(h.compute, 0, label("step {} start", k), prev);
      if (plan.dp <= 1) continue;
      engine.add_compute(h.dp, 0, label("step {} start", k), prev);
      if (h.ag != h.dp) engine.add_compute(h.ag, 0, label("step {} start", k), prev);
    }
  }
}

void StepGraph::end_steps() {
  if (steps() <= 1) return;
  reps = std::move(first_.reps);
  all_pass_tasks = std::move(first_.all_pass_tasks);
  pp_tasks = std::move(first_.pp_tasks);
  optimizer_time_s = first_.optimizer_time_s;
  pass_tasks = std::move(first_.pass_tasks);
}

sim::TaskId StepGraph::add_transfer(const sim::TransferSpec& spec, TraceCategory c,
                                    const std::vector<sim::TaskId>& deps) {
  const sim::TaskId id = engine.add_transfer(spec, deps);
  record(id, c);
  return id;
}

sim::TaskId StepGraph::add_gpu_compute(size_t replica, int stage, sim::StreamId stream,
                                       double seconds, std::string label, TraceCategory c,
                                       const std::vector<sim::TaskId>& deps) {
  const double f = gpus[replica][static_cast<size_t>(stage)].factor;
  return add_compute(stream, seconds * f, std::move(label), c, deps);
}

size_t StepGraph::pass_key(bool backward, int micro_batch, int virtual_stage) const {
  const size_t vstages = static_cast<size_t>(plan.pp) * plan.vpp;
  return ((backward ? 1 : 0) * static_cast<size_t>(micro_batches()) + micro_batch) * vstages +
         virtual_stage;
}

bool StepGraph::split_pass(int s, int i) const {
  const Pass& pass = schedule.per_stage[s][static_cast<size_t>(i)];
  // DataParallel launches every forward unit by unit from the host; parameter-server
  // workers pull each unit before its first forward and push it after its final backward.
  if (plan.cpu_offloading_num_layers > 0) return true;  // per-layer copies (cpu_offload.cpp)
  if (plan.dp_mode == models::DpMode::DATAPARALLEL) return pass.kind == PassKind::FORWARD;
  if (plan.dp_mode == models::DpMode::PS)
    return roles.first_forward[s][pass.chunk] == i || roles.final_pass[s][pass.chunk] == i;
  if (plan.dp <= 1) return false;
  if (plan.zero >= 3) return true;
  const int c = pass.chunk;
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
