#include "strategies/step/step_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "models/flops.hpp"
#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/timeline_links.hpp"

namespace loom::strategies {
namespace {

using sim::SimTime;
using sim::TaskId;
using Intervals = std::vector<std::pair<SimTime, SimTime>>;

// Seconds of the union of `tasks` (clipped to `until`) during which `busy` (sorted,
// disjoint: one serial stream) is idle.
double idle_union_s(const sim::Engine& e, const std::vector<TaskId>& tasks, const Intervals& busy,
                    SimTime until) {
  Intervals iv;
  for (TaskId t : tasks)
    if (e.start(t) < until) iv.push_back({e.start(t), std::min(e.finish(t), until)});
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
}

// Throughput and utilisation from the step time.
void measure_rates(const StepGraph& g, StepReport& r) {
  const double step = r.step_time_s;
  const double gpus_total = double(g.plan.gpus());
  const models::StepFlops flops = models::step_flops(g.model, g.plan);
  r.peak_flops = g.kernels->peak_flops(compute_dtype(g.plan.precision));
  r.peak_dtype = g.kernels->peak_dtype(compute_dtype(g.plan.precision));
  r.tokens_per_s = double(g.plan.global_batch()) *
                   double(g.model.kind == models::ModelKind::MLP ? 1 : g.plan.seq) / step;
  r.model_tflops_per_gpu = flops.model() / step / gpus_total / 1e12;
  r.hardware_tflops_per_gpu = flops.hardware() / step / gpus_total / 1e12;
  r.mfu = r.model_tflops_per_gpu * 1e12 / r.peak_flops;
  r.hfu = r.hardware_tflops_per_gpu * 1e12 / r.peak_flops;
}

// Pipeline transfers hold no stream; the trace shows each as a send on its source rank and a
// receive on its destination. Transfers of one rank may overlap in time, so each goes on the
// first lane ("pp-send", "pp-send 2", ...) free at its start: slices on a track never overlap.
void record_transfers(const StepGraph& g, StepReport& r, SliceIndex& index) {
  const sim::Engine& e = g.engine;
  std::vector<StepGraph::Transfer> order = g.pp_transfers;
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return e.start(a.task) < e.start(b.task); });
  std::map<std::pair<int, std::string>, std::vector<SimTime>> lanes;  // last end per lane
  auto add = [&](int rank, const std::string& kind, std::string name, SimTime a, SimTime b,
                 sim::TaskId task) {
    auto& ends = lanes[{rank, kind}];
    size_t lane = 0;
    while (lane < ends.size() && ends[lane] > a) ++lane;
    if (lane == ends.size()) ends.push_back(b);
    ends[lane] = b;
    TimelineSlice ts;
    ts.rank = rank;
    ts.stream = lane == 0 ? kind : fmt::format("{} {}", kind, lane + 1);
    ts.name = std::move(name);
    ts.category = TraceCategory::PP;
    ts.start_s = sim::to_seconds(a);
    ts.end_s = sim::to_seconds(b);
    ts.args = slice_args(e, task, e.label(task));
    index.emplace(std::make_pair(task, rank), r.timeline.size());
    r.timeline.push_back(std::move(ts));
    return r.timeline.size() - 1;
  };
  for (const auto& t : order) {
    const SimTime a = e.start(t.task), b = e.finish(t.task);
    const std::string& label = e.label(t.task);  // "send-act mb3 vs0->1"
    std::string recv = label;
    if (recv.rfind("send-", 0) == 0) recv.replace(0, 4, "recv");
    const size_t send =
        add(t.src_rank, "pp-send", fmt::format("{} to rank {}", label, t.dst_rank), a, b, t.task);
    const size_t received =
        add(t.dst_rank, "pp-recv", fmt::format("{} from rank {}", recv, t.src_rank), a, b, t.task);
    r.timeline_flows.push_back({send, received});
  }
}

// Each replica's end of step k: the latest finish of its step-end tasks (monotone in k).
std::vector<std::vector<SimTime>> replica_ends(const StepGraph& g) {
  const sim::Engine& e = g.engine;
  std::vector<std::vector<SimTime>> out(g.step_ends.size());
  for (size_t k = 0; k < g.step_ends.size(); ++k) {
    for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
      SimTime end = k > 0 ? out[k - 1][ri] : 0;
      for (TaskId t : g.step_ends[k][ri]) end = std::max(end, e.finish(t));
      out[k].push_back(end);
    }
  }
  return out;
}

// The value at quantile `q` of `sorted` (nearest rank: the smallest value with at least a
// fraction q of the values at or below it).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank > 0 ? rank - 1 : 0)];
}

// The first step's straggler factor of simulated GPU (`ri`, `s`): the slowest it stands for.
double straggler_factor_of(const StepGraph& g, size_t ri, int s) {
  double f = 1;
  for (int rank : g.represents[ri][static_cast<size_t>(s)])
    f = std::max(f, straggler_factor(g.options, 0, rank));
  return f;
}

// Step-time statistics, the simulated replicas and the representative's stages. Returns
// the end of the first step (the last step ends with the run: the makespan).
SimTime measure_series(const StepGraph& g, StepReport& r) {
  const auto ends = replica_ends(g);
  StepSeries& ss = r.steps;
  SimTime prev_ps = 0, first_ps = 0;
  double prev = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    SimTime end = std::max(prev_ps, *std::max_element(ends[k].begin(), ends[k].end()));
    if (k + 1 == ends.size()) end = std::max(end, g.engine.makespan());
    if (k == 0) first_ps = end;
    const double t = sim::to_seconds(end);
    ss.ends_s.push_back(t);
    ss.times_s.push_back(t - prev);
    prev = t;
    prev_ps = end;
  }
  std::vector<double> sorted = ss.times_s;
  std::sort(sorted.begin(), sorted.end());
  ss.mean_s = prev / static_cast<double>(ss.times_s.size());
  ss.p50_s = quantile(sorted, 0.50);
  ss.p99_s = quantile(sorted, 0.99);
  const int n = g.steps();
  for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
    ReplicaTime rt;
    const SimGpu& first = g.gpus[ri][0];
    rt.replica = g.replicas[ri].d;
    rt.rank = first.rank;
    rt.gpu = g.cluster.gpu_type(first.gpu_type).name;
    double factors = 0;
    for (int k = 0; k < n; ++k)
      for (int s = 0; s < g.stages(); ++s)
        for (int rank : g.represents[ri][static_cast<size_t>(s)])
          factors += straggler_factor(g.options, k, rank) /
                     static_cast<double>(g.represents[ri][static_cast<size_t>(s)].size());
    rt.compute_factor = factors / (n * g.stages());
    for (int s = 0; s < g.stages(); ++s) {
      const SimGpu& h = g.gpus[ri][static_cast<size_t>(s)];
      rt.compute_s =
          std::max(rt.compute_s, straggler_factor_of(g, ri, s) * g.stage_seconds(h.gpu_type, s) *
                                     static_cast<double>(g.micro_batches()));
    }
    rt.finish_s = sim::to_seconds(ends.back()[ri]);
    rt.mean_step_s = rt.finish_s / n;
    r.replicas.push_back(std::move(rt));
  }
  for (int s = 0; s < g.stages(); ++s) {
    const RepStage& rs = g.reps[static_cast<size_t>(s)];
    StageTime st;
    st.stage = s;
    st.gpu = g.cluster.gpu_of_rank(g.gpus[0][static_cast<size_t>(s)].rank).name;
    st.compute_s = rs.compute_s;
    st.busy_s = sim::to_seconds(rs.busy_ps);
    r.stages.push_back(st);
  }
  return first_ps;
}

// Whether workers run apart (asynchronous parameter-server rules): throughput is then the
// sum of every worker's own rate, not the global batch over the slowest worker's time.
bool workers_run_apart(const models::TrainingPlan& p) {
  return p.dp_mode == models::DpMode::PS && p.ps_update != models::PsUpdate::SYNC;
}

}  // namespace

void measure_step(StepGraph& g, StepReport& r) {
  const sim::Engine& e = g.engine;
  const int p = g.stages();
  // The breakdown below is the first step's.
  const SimTime first_end = measure_series(g, r);

  SimTime pipeline_end_ps = 0;
  for (TaskId t : g.all_pass_tasks) pipeline_end_ps = std::max(pipeline_end_ps, e.finish(t));
  const double pipeline_end = sim::to_seconds(pipeline_end_ps);
  r.comm_time_s = {};
  for (models::Dim d : {models::Dim::TP, models::Dim::CP, models::Dim::EP})
    r.comm_time_s[models::index(d)] = g.comm_total[models::index(d)] / p;
  double pp_total = 0;  // busy time of the representative's transfer tasks, per GPU
  for (TaskId t : g.pp_tasks) pp_total += sim::to_seconds(e.finish(t) - e.start(t));
  r.comm_time_s[models::index(Dim::PP)] = pp_total / p;
  // Data-parallel: busy time of the representative's collectives, and the part of it during
  // which its compute stream was idle (exposed: not hidden behind compute or the blocking
  // model-parallel collectives). Bubble: the idle time of the busiest stage during the
  // pipeline phase, less the time it waited for parameter gathers (exposed DP, not pipeline
  // idling). With identical stages every stage idles the same; a heavier last stage with the
  // LM head sets the pace.
  double dp_total = 0, dp_exposed = 0, dp_bytes = 0, bubble = pipeline_end, compute = 0,
         mp_comm = 0;
  std::int64_t dp_count = 0;
  for (const RepStage& rs : g.reps) {
    Intervals busy;
    for (TaskId t : rs.compute) busy.push_back({e.start(t), e.finish(t)});
    std::sort(busy.begin(), busy.end());
    if (rs.dp_concurrent) {
      dp_total += idle_union_s(e, rs.dp, {}, first_end);  // with nothing busy: the union
    } else {
      for (TaskId t : rs.dp) dp_total += sim::to_seconds(e.finish(t) - e.start(t));
    }
    dp_exposed += idle_union_s(e, rs.dp, busy, first_end);
    const double gather_wait = idle_union_s(e, rs.gather, busy, pipeline_end_ps);
    bubble = std::min(bubble, sim::to_seconds(pipeline_end_ps - rs.busy_ps) - gather_wait);
    compute += rs.compute_s;
    mp_comm += rs.comm_s;
    r.offload_wait_s += rs.offload_wait_s / p;
    r.offload_copy_s += union_seconds(e, rs.offload_copies) / p;
    r.offload_bytes_per_gpu += rs.offload_bytes / p;
    dp_bytes += rs.dp_bytes;
    dp_count += static_cast<std::int64_t>(rs.dp.size());
  }
  compute /= p;
  mp_comm /= p;
  r.step_time_s = r.steps.mean_s;
  if (workers_run_apart(g.plan)) {
    // Each worker's own rate, summed: a fast worker is not held back by a slow one.
    double per_step = 0;  // global batches per second
    for (const ReplicaTime& rt : r.replicas)
      per_step += g.steps() / rt.finish_s / static_cast<double>(g.replicas.size());
    r.step_time_s = 1.0 / per_step;
  }
  r.pipeline_time_s = pipeline_end;
  r.bubble_time_s = std::max(0.0, bubble);
  r.bubble_fraction = pipeline_end > 0 ? r.bubble_time_s / pipeline_end : 0;
  r.optimizer_time_s = g.optimizer_time_s;
  r.compute_time_s = compute + r.optimizer_time_s;
  r.comm_time_s[models::index(Dim::DP)] = dp_total / p;
  // tp/cp/ep block the compute stream (all exposed but what tp_comm_overlap hides); pp
  // waits are part of the bubble.
  r.exposed_comm_s = {};
  for (models::Dim d : {models::Dim::TP, models::Dim::CP, models::Dim::EP})
    r.exposed_comm_s[models::index(d)] =
        r.comm_time_s[models::index(d)] -
        std::min(r.comm_time_s[models::index(d)], g.comm_hidden[models::index(d)] / p);
  r.exposed_comm_s[models::index(Dim::DP)] = dp_exposed / p;
  r.exposed_comm_time_s = mp_comm + dp_exposed / p;
  r.cpu_offloading = g.plan.cpu_offloading_num_layers > 0;
  r.zero_offload = g.plan.offload_optimizer != models::Offload::NONE ||
                   g.plan.offload_param != models::Offload::NONE;
  r.dp_bytes_per_gpu = dp_bytes / p;
  r.dp_collectives = dp_count;
  r.simulated_gpus = static_cast<int>(g.replicas.size()) * p;
  r.stage_ranks.clear();
  for (int s = 0; s < p; ++s) r.stage_ranks.push_back(g.gpus[0][static_cast<size_t>(s)].rank);
  r.tasks = e.num_tasks();
  r.events = e.events_processed();
  measure_rates(g, r);
}

void record_timeline(const StepGraph& g, StepReport& r) {
  const sim::Engine& e = g.engine;
  SliceIndex index;
  for (const auto& sl : e.slices()) {
    TimelineSlice ts;
    ts.rank = e.stream_rank(sl.stream);
    const auto& sname = e.stream_name(sl.stream);
    ts.stream = sname.substr(sname.find('/') + 1);
    ts.name = e.label(sl.task);
    const auto id = static_cast<size_t>(sl.task);
    ts.category = id < g.category.size() ? g.category[id] : TraceCategory::COMPUTE;
    ts.start_s = sim::to_seconds(sl.start);
    ts.end_s = sim::to_seconds(sl.end);
    ts.args = slice_args(e, sl.task, ts.name);
    index.emplace(std::make_pair(sl.task, ts.rank), r.timeline.size());
    r.timeline.push_back(std::move(ts));
  }
  record_transfers(g, r, index);
  link_dependants(e, index, r);
  lay_out_passes(g, index, r);
  // Memory counters on the representative: static bytes plus live micro-batch activations.
  const int v = g.chunks();
  for (int s = 0; s < g.stages(); ++s) {
    const auto& st = r.memory.stages[static_cast<size_t>(s)];
    const double base = st.total_bytes - st.activations_bytes;
    const double per_mb = st.layer_activation_bytes / double(v);
    std::vector<std::pair<double, double>> events;
    for (const Pass& pass : g.schedule.per_stage[s]) {
      const int vs = g.schedule.virtual_stage(s, pass.chunk);
      if (pass.kind == PassKind::FORWARD) {
        const auto& pt = g.pass_tasks[0][g.pass_key(false, pass.micro_batch, vs)];
        events.push_back({sim::to_seconds(e.start(pt.first)), per_mb});
      } else if (pass.kind != PassKind::BACKWARD_WEIGHT) {
        const auto& pt = g.pass_tasks[0][g.pass_key(true, pass.micro_batch, vs)];
        events.push_back({sim::to_seconds(e.finish(pt.last)), -per_mb});
      }
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    double live = base;
    const int rank = g.gpus[0][static_cast<size_t>(s)].rank;
    r.memory_samples.push_back({rank, 0.0, live});
    for (const auto& [t, d] : events) {
      live += d;
      r.memory_samples.push_back({rank, t, live});
    }
  }
}

}  // namespace loom::strategies
