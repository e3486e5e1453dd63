#include "strategies/step/step_report.hpp"

#include <algorithm>

#include "models/flops.hpp"

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
  r.tokens_per_s = double(g.plan.global_batch()) *
                   double(g.model.kind == models::ModelKind::MLP ? 1 : g.plan.seq) / step;
  r.model_tflops_per_gpu = flops.model() / step / gpus_total / 1e12;
  r.hardware_tflops_per_gpu = flops.hardware() / step / gpus_total / 1e12;
  r.mfu = r.model_tflops_per_gpu * 1e12 / r.peak_flops;
  r.hfu = r.hardware_tflops_per_gpu * 1e12 / r.peak_flops;
}

}  // namespace

void measure_step(StepGraph& g, StepReport& r) {
  const sim::Engine& e = g.engine;
  const int p = g.stages();
  const double step = sim::to_seconds(e.makespan());
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
    for (TaskId t : rs.dp) dp_total += sim::to_seconds(e.finish(t) - e.start(t));
    dp_exposed += idle_union_s(e, rs.dp, busy, e.makespan());
    const double gather_wait = idle_union_s(e, rs.gather, busy, pipeline_end_ps);
    bubble = std::min(bubble, sim::to_seconds(pipeline_end_ps - rs.busy_ps) - gather_wait);
    compute += rs.compute_s;
    mp_comm += rs.comm_s;
    dp_bytes += rs.dp_bytes;
    dp_count += static_cast<std::int64_t>(rs.dp.size());
  }
  compute /= p;
  mp_comm /= p;
  r.step_time_s = step;
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
    r.timeline.push_back(std::move(ts));
  }
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
