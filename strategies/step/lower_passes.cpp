#include "strategies/step/lower_passes.hpp"
#include "strategies/step/pipe_engine.hpp"

#include <algorithm>
#include <tuple>

#include "models/flops.hpp"

namespace loom::strategies {
namespace {

using models::Dim;
using sim::TaskId;

TraceCategory category_of(models::Dim dim) {
  switch (dim) {
    case models::Dim::CP:
      return TraceCategory::CP;
    case models::Dim::EP:
      return TraceCategory::EP;
    default:
      return TraceCategory::TP;
  }
}

// Lowers the passes of one stage, in lockstep over the simulated replicas: each compute
// task once per replica, each collective once per group holding all its simulated members'
// compute streams (so every member's stream sees the same collectives in the same order).
class StageLowering {
 public:
  StageLowering(StepGraph& g, int stage) : g_(g), s_(stage) {}

  void lower_pass(int pass_index) {
    pi_ = pass_index;
    pass_ = &g_.schedule.per_stage[s_][static_cast<size_t>(pi_)];
    const int vs = g_.schedule.virtual_stage(s_, pass_->chunk);
    const size_t n_rep = g_.replicas.size();
    first_.assign(n_rep, -1);
    unit_first_.assign(n_rep, -1);
    last_.assign(n_rep, -1);
    compute_s_ = 0;
    rep_pass_ = &g_.reps[static_cast<size_t>(s_)].passes.emplace_back();
    // A chunk without layers (a --pipeline-split 0 with neither the embedding nor the head)
    // has no units to split: its pass is the whole-chunk one, tasks of zero length that keep
    // the schedule's cross-stage dependencies.
    if (g_.split_pass(s_, pi_) && !g_.work.units[static_cast<size_t>(vs)].empty()) {
      const auto& us = g_.work.units[static_cast<size_t>(vs)];
      const int n = static_cast<int>(us.size());
      for (size_t ri = 0; ri < n_rep; ++ri)
        g_.gpus[ri][s_].units[static_cast<size_t>(pi_)].assign(us.size(), PassTasks{});
      for (int k = 0; k < n; ++k) {
        const auto u = static_cast<size_t>(pass_->kind == PassKind::FORWARD ? k : n - 1 - k);
        std::fill(unit_first_.begin(), unit_first_.end(), -1);
        emit(vs, static_cast<int>(u), &us[u].name);
        for (size_t ri = 0; ri < n_rep; ++ri)
          g_.gpus[ri][s_].units[static_cast<size_t>(pi_)][u] = {unit_first_[ri], last_[ri]};
      }
    } else {
      emit(vs, -1, nullptr);
    }
    for (size_t ri = 0; ri < n_rep; ++ri) {
      if (pass_->kind != PassKind::BACKWARD_WEIGHT)  // W has no cross-stage dependency
        g_.pass_tasks[ri][g_.pass_key(pass_->kind != PassKind::FORWARD, pass_->micro_batch, vs)] = {
            first_[ri], last_[ri]};
      g_.all_pass_tasks.push_back(last_[ri]);
      if (ends_weight_gradients(*pass_)) g_.gpus[ri][s_].last_backward = last_[ri];
    }
    g_.reps[static_cast<size_t>(s_)].compute_s += compute_s_;
  }

 private:
  // Which seconds of a PassCost a compute task runs.
  enum class Part { NONE, FWD, RECOMPUTE, BWD, BWD_INPUT, BWD_WEIGHT };
  static double seconds_of(const PassCost& c, Part part) {
    switch (part) {
      case Part::NONE:
        return 0;
      case Part::FWD:
        return c.fwd_s;
      case Part::RECOMPUTE:
        return c.recompute_s;
      case Part::BWD:
        return c.bwd_input_s + c.bwd_weight_s;
      case Part::BWD_INPUT:
        return c.bwd_input_s;
      case Part::BWD_WEIGHT:
        return c.bwd_weight_s;
    }
    return 0;
  }

  // The cost of the chunk or unit being lowered on replica `ri`'s GPU type.
  const PassCost& cost(size_t ri) const {
    const StageWork& w = g_.work_of(g_.gpus[ri][s_].gpu_type);
    const auto v = static_cast<size_t>(vs_);
    return unit_ < 0 ? w.chunk_cost[v] : w.units[v][static_cast<size_t>(unit_)].cost;
  }

  // The work of the pass over virtual stage `vs`: the whole chunk (`u` < 0) or unit `u`
  // (`unit` names it). Collectives are the same on every GPU type; compute seconds are each
  // replica's own.
  void emit(int vs, int u, const std::string* unit) {
    vs_ = vs;
    unit_ = u;
    const PassCost& c = cost(0);
    switch (pass_->kind) {
      case PassKind::FORWARD:
        compute_then_comm(Part::FWD, "F", c.fwd_comm, "F", unit);
        break;
      case PassKind::BACKWARD:
      case PassKind::BACKWARD_INPUT: {
        if (c.recompute_s > 0) {
          // Recompute replays the collectives of the ops it re-runs (recompute_comm).
          compute_then_comm(Part::RECOMPUTE, "R", c.recompute_comm, "R", unit);
        }
        const bool full = pass_->kind == PassKind::BACKWARD;
        compute_then_comm(full ? Part::BWD : Part::BWD_INPUT, full ? "B" : "Bi", c.bwd_comm, "B",
                          unit);
        break;
      }
      case PassKind::BACKWARD_WEIGHT:
        compute(Part::BWD_WEIGHT, "W", unit);
        break;
    }
  }

  // Whether the collectives on `dim` run beside the compute rather than blocking it: TP under
  // tp_comm_overlap, EP under overlap_moe_expert_parallel_comm.
  bool overlaps(Dim dim) const {
    if (dim == Dim::TP) return g_.plan.tp_comm_overlap && g_.plan.tp > 1;
    if (dim == Dim::CP) return cp_overlapped(g_.plan);
    if (dim == Dim::EP) return g_.plan.overlap_moe_expert_parallel_comm && g_.plan.ep > 1;
    return false;
  }

  // A compute task and the collectives after it. With tp_comm_overlap the TP collectives run
  // on the tp stream alongside the compute (from a zero-length marker at its start, which
  // carries its cross-stage dependencies), and what their implementation's pipeline leaves
  // exposed (tp_overlap_exposed_s: chunked GEMMs, head and tail chunks, comm SMs) follows
  // both on the compute stream. With overlap_moe_expert_parallel_comm
  // the EP all-to-alls run on the ep stream the same way: Megatron's combined 1F1B schedule
  // (pipeline_parallel/combined_1f1b.py) hides one micro-batch's dispatch and combine behind
  // another's compute, so the pass ends when both its compute and its all-to-alls are done
  // (no residual beyond what the compute cannot cover).
  void compute_then_comm(Part part, const char* what, const std::vector<CommItem>& items,
                         const char* comm_what, const std::string* unit) {
    const bool overlap = std::any_of(items.begin(), items.end(),
                                     [this](const CommItem& i) { return overlaps(i.dim); });
    if (!overlap) {
      compute(part, what, unit);
      trace_part(part, items);
      comm(items, comm_what, unit);
      return;
    }
    compute(Part::NONE, "start", unit);
    std::vector<TaskId> marks = last_;
    compute(part, what, unit);
    trace_part(part, items);
    overlapped_.assign(g_.replicas.size(), {});
    tp_exposed_s_ = cp_exposed_s_ = 0;
    const size_t lists = rep_pass_->comm_lists.size();
    comm(items, comm_what, unit, &marks);
    const std::vector<TaskId> before = last_;  // the compute, or the blocking collectives after
    // The compute stream waits for the overlapped runs; TP and CP leave their pipelines'
    // exposed seconds.
    const bool tp = std::any_of(items.begin(), items.end(), [this](const CommItem& i) {
      return i.dim != Dim::EP && overlaps(i.dim);
    });
    const double residual_s = tp_exposed_s_ + cp_exposed_s_;
    const double cp_share = residual_s > 0 ? cp_exposed_s_ / residual_s : 0.0;
    for (size_t ri = 0; ri < g_.replicas.size(); ++ri) {
      const TaskId id = g_.add_compute(g_.gpus[ri][s_].compute, residual_s,
                                       g_.label("{}-comm {} exposed mb{} c{}", comm_what,
                                                tp ? "tp" : "ep", pass_->micro_batch, pass_->chunk),
                                       tp ? TraceCategory::TP : TraceCategory::EP, overlapped_[ri]);
      track(ri, id);
      if (traced_ >= 0) g_.traced_parts[static_cast<size_t>(traced_) + ri].residual = id;
      if (ri == 0) {
        g_.reps[static_cast<size_t>(s_)].compute.push_back(id);
        rep_pass_->tasks.push_back(id);
        const int list = rep_pass_->comm_lists.size() > lists ? static_cast<int>(lists) : -1;
        rep_pass_->overlaps.push_back({before[0], id, list, cp_share});
      }
    }
  }

  // keep_timeline and trace_collectives (--trace): a TracedPart per replica for the compute
  // task just lowered (each replica's last task) and the collectives `items` after it; comm()
  // adds their runs.
  void trace_part(Part part, const std::vector<CommItem>& items) {
    traced_ = -1;
    if (!g_.options.keep_timeline || !g_.options.trace_collectives || items.empty()) return;
    traced_ = static_cast<std::ptrdiff_t>(g_.traced_parts.size());
    for (size_t ri = 0; ri < g_.replicas.size(); ++ri) {
      TracedPart t;
      using W = TracedPart::Work;
      t.work = part == Part::FWD         ? W::FORWARD
               : part == Part::RECOMPUTE ? W::RECOMPUTE
               : part == Part::BWD       ? W::BACKWARD
                                         : W::BACKWARD_INPUT;
      t.replica = ri;
      t.stage = s_;
      t.virtual_stage = vs_;
      t.unit = unit_;
      t.micro_batch = pass_->micro_batch;
      t.chunk = pass_->chunk;
      t.compute = last_[ri];
      t.items = &items;
      g_.traced_parts.push_back(std::move(t));
    }
  }

  void track(size_t ri, TaskId id) {
    if (first_[ri] < 0) first_[ri] = id;
    if (unit_first_[ri] < 0) unit_first_[ri] = id;
    last_[ri] = id;
  }

  void compute(Part part, const char* what, const std::string* unit) {
    for (size_t ri = 0; ri < g_.replicas.size(); ++ri) {
      const double seconds = seconds_of(cost(ri), part);
      const TaskId id =
          g_.add_gpu_compute(ri, s_, g_.gpus[ri][s_].compute, seconds,
                             g_.label("{} mb{} c{}{}{}", what, pass_->micro_batch, pass_->chunk,
                                      unit ? " " : "", unit ? unit->c_str() : ""),
                             TraceCategory::COMPUTE);
      track(ri, id);
      if (ri == 0) {
        g_.reps[static_cast<size_t>(s_)].compute.push_back(id);
        rep_pass_->tasks.push_back(id);
        compute_s_ += seconds * g_.gpus[0][s_].factor;
      }
    }
  }

  // One comm list (the collectives after a forward, recompute or backward): each run of
  // items on one group (same dimension) a collective sequence on that group, issued by the
  // group's first simulated replica.
  // `overlap_from` (tp_comm_overlap): TP runs go on the tp streams after these tasks (per
  // replica) instead of blocking the compute stream.
  void comm(const std::vector<CommItem>& items, const char* what, const std::string* unit,
            const std::vector<TaskId>* overlap_from = nullptr) {
    if (items.empty()) return;
    RepCommList* rep_list = nullptr;
    std::vector<std::pair<sim::CollectiveOp, double>> run;
    for (size_t begin = 0, end = 0; begin < items.size(); begin = end) {
      const models::Dim dim = items[begin].dim;
      run.clear();
      for (end = begin; end < items.size() && items[end].dim == dim; ++end)
        run.emplace_back(items[end].op, items[end].bytes);
      const bool overlapped = overlap_from && overlaps(dim);
      for (size_t ri = 0; ri < g_.replicas.size(); ++ri) {
        const std::vector<int>& group = g_.index.group(g_.gpus[ri][s_].rank, dim);
        if (group.size() < 2) continue;
        std::vector<sim::StreamId> streams(group.size(), sim::NO_STREAM);
        std::vector<TaskId> deps;
        int leader = static_cast<int>(ri);
        for (size_t k = 0; k < group.size(); ++k) {
          const int rj = g_.rank_to_replica[static_cast<size_t>(group[k])];
          if (rj < 0) continue;
          leader = std::min(leader, rj);
          const SimGpu& h = g_.gpus[static_cast<size_t>(rj)][s_];
          streams[k] = !overlapped ? h.compute : dim == Dim::EP ? h.ep : h.tp;
          if (overlapped) deps.push_back((*overlap_from)[static_cast<size_t>(rj)]);
        }
        if (leader != static_cast<int>(ri)) continue;  // issued with an earlier replica
        RepCommList::Run rep_run{-1, -1, dim, {}, overlapped};
        std::vector<sim::SimTime> frozen;
        const auto [first, last] = g_.add_collective_sequence(
            run, group, streams,
            g_.label("{}-comm {} {} mb{} c{}{}{}", what, models::to_string(dim),
                     sim::to_string(run.front().first), pass_->micro_batch, pass_->chunk,
                     unit ? " " : "", unit ? unit->c_str() : ""),
            category_of(dim), ri == 0 || overlapped || traced_ >= 0 ? &frozen : nullptr, deps);
        if (ri == 0) rep_run.frozen_ps = frozen;
        if (overlapped && ri == 0 && dim != Dim::EP)
          (dim == Dim::TP ? tp_exposed_s_ : cp_exposed_s_) +=
              exposed_s(items, begin, end, group, frozen);
        for (int r : group) {
          const int rj = g_.rank_to_replica[static_cast<size_t>(r)];
          if (rj < 0) continue;
          if (traced_ >= 0)
            g_.traced_parts[static_cast<size_t>(traced_ + rj)].runs.push_back(
                {begin, end, first, last, overlapped, frozen});
          if (overlapped) {
            overlapped_[static_cast<size_t>(rj)].push_back(last);
            continue;
          }
          track(static_cast<size_t>(rj), first);
          track(static_cast<size_t>(rj), last);
        }
        if (ri == 0) {  // replica 0 leads every group it belongs to
          if (!rep_list) rep_list = &rep_pass_->comm_lists.emplace_back();
          rep_run.first = first;
          rep_run.last = last;
          rep_list->runs.push_back(std::move(rep_run));
          if (overlapped) continue;  // not on the compute stream
          for (TaskId id = first; id <= last; ++id) {
            g_.reps[static_cast<size_t>(s_)].compute.push_back(id);
            rep_pass_->tasks.push_back(id);
          }
        }
      }
    }
  }

  // Seconds the overlapped TP collectives items[begin, end) on `group` leave exposed
  // (tp_overlap_exposed_s), from their frozen times or each one's on an idle network.
  double exposed_s(const std::vector<CommItem>& items, size_t begin, size_t end,
                   const std::vector<int>& group, const std::vector<sim::SimTime>& frozen) {
    sim::CollectiveRequest req;
    req.ranks = group;
    const int sms = g_.cluster.gpu_of_rank(g_.gpus[0][s_].rank).sm_count;
    double sum = 0;
    for (size_t k = begin; k < end; ++k) {
      const CommItem& item = items[k];
      req.op = item.op;
      req.bytes = item.bytes;
      const double comm_s = sim::to_seconds(
          frozen.size() == end - begin ? frozen[k - begin] : g_.engine.frozen_time(req));
      sum += tp_overlap_exposed_s(item.tp_overlap, comm_s, sms);
    }
    return sum;
  }

  StepGraph& g_;
  int s_;
  int pi_ = 0;
  // tp_comm_overlap: per replica, the last task of each overlapped run; the seconds the
  // representative's overlapped TP collectives leave exposed (tp_overlap_exposed_s).
  std::vector<std::vector<TaskId>> overlapped_;
  double tp_exposed_s_ = 0, cp_exposed_s_ = 0;
  // trace_collectives: replica 0's TracedPart of the work being lowered (replica ri's is
  // traced_ + ri); -1 when none.
  std::ptrdiff_t traced_ = -1;
  const Pass* pass_ = nullptr;
  int vs_ = 0, unit_ = -1;  // the virtual stage and unit (-1: whole chunk) being emitted
  RepPass* rep_pass_ = nullptr;
  double compute_s_ = 0;  // the pass's compute seconds (summed per pass, then per stage)
  // Per replica: the first task of the pass, of the current unit, and the last so far.
  std::vector<TaskId> first_, unit_first_, last_;
};

}  // namespace

void lower_passes(StepGraph& g) {
  for (int s = 0; s < g.stages(); ++s) {
    StageLowering stage(g, s);
    for (int pi = 0; pi < static_cast<int>(g.schedule.per_stage[s].size()); ++pi)
      stage.lower_pass(pi);
    g.report_progress(StepGraph::PASSES_PROGRESS, s + 1, g.stages());
  }
}

void measure_passes(StepGraph& g) {
  const sim::Engine& e = g.engine;
  for (RepStage& rs : g.reps) {
    // CPU offloading: a compute task's wait for its copy is busy, not bubble.
    for (const auto& [before, waiting] : rs.offload_waits) {
      const sim::SimTime wait = std::max<sim::SimTime>(0, e.start(waiting) - e.finish(before));
      rs.busy_ps += wait;
      rs.offload_wait_s += sim::to_seconds(wait);
    }
    for (const RepPass& pass : rs.passes) {
      for (TaskId t : pass.tasks) rs.busy_ps += e.finish(t) - e.start(t);
      // Summed as the seconds of each list, then per pass, in issue order; overlapped runs
      // count in the totals but not as blocking.
      std::array<double, models::DIM_COUNT> by_dim{}, hidden{};
      double comm_s = 0;
      for (const RepCommList& list : pass.comm_lists) {
        double list_s = 0;
        for (const RepCommList::Run& run : list.runs) {
          const auto add = [&](sim::SimTime ps) {
            const double t = sim::to_seconds(ps);
            by_dim[static_cast<size_t>(models::index(run.dim))] += t;
            if (run.overlapped)
              hidden[static_cast<size_t>(models::index(run.dim))] += t;
            else
              list_s += t;
          };
          if (!run.frozen_ps.empty()) {
            for (sim::SimTime ps : run.frozen_ps) add(ps);
          } else {
            for (TaskId task = run.first; task <= run.last; ++task)
              add(e.finish(task) - e.start(task));
          }
        }
        comm_s += list_s;
      }
      // Exposed time of each overlapped list: the compute stream's wait for its overlapped
      // runs (the one that finished last is charged) and the TP residual. The wait is busy
      // (communication), not pipeline bubble.
      for (const RepPass::Overlap& o : pass.overlaps) {
        const sim::SimTime wait =
            std::max<sim::SimTime>(0, e.start(o.residual) - e.finish(o.before));
        rs.busy_ps += wait;
        comm_s += sim::to_seconds(wait);
        if (o.list < 0) continue;
        const RepCommList::Run* latest = nullptr;
        bool residual_run = false;
        for (const RepCommList::Run& run : pass.comm_lists[static_cast<size_t>(o.list)].runs) {
          if (!run.overlapped) continue;
          residual_run |= run.dim != Dim::EP;
          if (!latest || e.finish(run.last) > e.finish(latest->last)) latest = &run;
        }
        if (latest && wait > 0)
          hidden[static_cast<size_t>(models::index(latest->dim))] -= sim::to_seconds(wait);
        if (residual_run) {
          const double residual = sim::to_seconds(e.finish(o.residual) - e.start(o.residual));
          comm_s += residual;
          hidden[static_cast<size_t>(models::index(Dim::TP))] -= residual * (1 - o.cp_share);
          hidden[static_cast<size_t>(models::index(Dim::CP))] -= residual * o.cp_share;
        }
      }
      rs.comm_s += comm_s;
      for (int k = 0; k < models::DIM_COUNT; ++k) {
        g.comm_total[k] += by_dim[k];
        g.comm_hidden[k] += hidden[k];
      }
    }
  }
}

void lower_pipeline(StepGraph& g) {
  const double act_bytes = models::tokens_per_gpu(g.model, g.plan) * double(g.model.hidden) *
                           models::activation_element_bytes(g.plan) / double(g.plan.tp);
  const int p = g.stages(), vstages = g.stages() * g.chunks();
  for (size_t ri = 0; ri < g.replicas.size(); ++ri) {
    for (int mb = 0; mb < g.micro_batches(); ++mb) {
      for (int vs = 0; vs + 1 < vstages; ++vs) {
        const int r0 = g.gpus[ri][vs % p].rank, r1 = g.gpus[ri][(vs + 1) % p].rank;
        for (int dir = 0; dir < 2; ++dir) {
          const bool fwd = dir == 0;
          const PassTasks& from = g.pass_tasks[ri][g.pass_key(!fwd, mb, fwd ? vs : vs + 1)];
          const PassTasks& to = g.pass_tasks[ri][g.pass_key(!fwd, mb, fwd ? vs + 1 : vs)];
          sim::TransferSpec t;
          t.src_rank = fwd ? r0 : r1;
          t.dst_rank = fwd ? r1 : r0;
          t.bytes = act_bytes;
          t.label = g.label("{} mb{} vs{}->{}", fwd ? "send-act" : "send-grad", mb,
                            fwd ? vs : vs + 1, fwd ? vs + 1 : vs);
          const TaskId tr = g.engine.add_transfer(t, {from.last});
          g.engine.add_dependency(tr, to.first);
          deepspeed_pipe_rendezvous(g, ri, tr, mb, fwd, fwd ? vs : vs + 1, fwd ? vs + 1 : vs);
          if (ri == 0) g.pp_tasks.push_back(tr);
          if (g.options.keep_timeline) g.pp_transfers.push_back({tr, t.src_rank, t.dst_rank});
        }
      }
    }
    g.report_progress(StepGraph::PIPELINE_PROGRESS, double(ri + 1), double(g.replicas.size()));
  }
}

}  // namespace loom::strategies
