#include "strategies/step/timeline_links.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <tuple>

#include "models/flops.hpp"
#include "strategies/step/step_graph.hpp"
#include "topologies/cluster.hpp"

namespace loom::strategies {
namespace {

// "mb3" -> "3" when `token` is `prefix` followed by digits only.
std::optional<std::string> numbered(const std::string& token, const std::string& prefix) {
  if (token.size() <= prefix.size() || token.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  const std::string rest = token.substr(prefix.size());
  for (char c : rest)
    if (c < '0' || c > '9') return std::nullopt;
  return rest;
}

// The pass a compute label's first token names ("F mb3 c0": forward; "Bi", a zero-bubble
// schedule's backward without its weight gradients); "" for any other token. The one name of
// each pass: a compute slice's "pass" argument and its collectives' (PartLayout::slice).
std::string pass_name(const std::string& token) {
  if (token == "F") return "forward";
  if (token == "B") return "backward";
  if (token == "Bi") return "backward (input gradients)";
  if (token == "W") return "backward (weight gradients)";
  if (token == "R") return "recompute";
  return "";
}

using Args = std::vector<std::pair<std::string, std::string>>;

// A collective's or transfer's "bytes" argument: whole bytes.
std::string bytes_arg(double bytes) {
  return fmt::format("{}", static_cast<long long>(std::llround(bytes)));
}

// The "group_size" and "ranks" arguments of a collective or transfer from its engine note:
// the ranks the note keeps, "..." after them when the group has more.
Args note_args(const sim::TaskNote& n) {
  std::string ranks = fmt::format("{}", fmt::join(n.ranks, ","));
  if (n.group_size > static_cast<int>(n.ranks.size())) ranks += ",...";
  return {{"group_size", fmt::format("{}", n.group_size)}, {"ranks", std::move(ranks)}};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> slice_args(const sim::Engine& engine,
                                                            sim::TaskId task,
                                                            const std::string& label) {
  Args args;
  std::istringstream words(label);
  std::string token, previous;
  bool first = true;
  while (words >> token) {
    if (first && !pass_name(token).empty()) args.emplace_back("pass", pass_name(token));
    if (auto mb = numbered(token, "mb")) args.emplace_back("micro_batch", *mb);
    if (auto c = numbered(token, "c")) args.emplace_back("chunk", *c);
    if (previous == "layers" || previous == "layer") args.emplace_back("layers", token);
    previous = token;
    first = false;
  }
  if (const sim::TaskNote* n = engine.note(task)) {
    args.emplace_back("op", sim::to_string(n->op));
    args.emplace_back("bytes", bytes_arg(n->bytes));
    for (auto& arg : note_args(*n)) args.push_back(std::move(arg));
    if (n->count > 1) args.emplace_back("collectives", fmt::format("{}", n->count));
  }
  return args;
}

void link_dependants(const sim::Engine& engine, const SliceIndex& slices, StepReport& r) {
  for (const auto& [key, from] : slices) {
    const auto [task, rank] = key;
    if (engine.note(task) == nullptr) continue;  // compute: its order on the stream says it
    for (sim::TaskId next : engine.dependants(task)) {
      const auto it = slices.find({next, rank});
      if (it != slices.end() && it->second != from) r.timeline_flows.push_back({from, it->second});
    }
  }
}

namespace {

using Work = TracedPart::Work;

// One op of a unit as the trace weighs it: its kernels' seconds in each pass (cost_ops) and
// how many of the pass's collectives it issued.
struct ScriptOp {
  std::string name;
  const std::string* unit = nullptr;  // its unit's name ("emb", "L3", "head")
  models::OpKind kind = models::OpKind::ELEMENTWISE;
  models::CommKind comm = models::CommKind::NONE;
  double fwd = 0, recompute = 0, bwd = 0, bwd_input = 0;
  int fwd_items = 0, bwd_items = 0, recompute_items = 0;

  double seconds(Work w) const {
    switch (w) {
      case Work::FORWARD:
        return fwd;
      case Work::RECOMPUTE:
        return recompute;
      case Work::BACKWARD:
        return bwd;
      case Work::BACKWARD_INPUT:
        return bwd_input;
    }
    return 0;
  }
  int items(Work w) const {
    return w == Work::FORWARD ? fwd_items : w == Work::RECOMPUTE ? recompute_items : bwd_items;
  }
};

// The op lists of the plan's units timed per GPU type, as cost_stages costs them.
class Scripts {
 public:
  explicit Scripts(const StepGraph& g) : g_(g) {}

  // The ops of unit `u` of virtual stage `vs` on GPU type `type`; null when they do not
  // account for the unit's collectives.
  const std::vector<ScriptOp>* unit(int type, int vs, int u) {
    const auto key = std::make_tuple(type, vs, u);
    auto it = units_.find(key);
    if (it == units_.end()) it = units_.emplace(key, build(type, vs, u)).first;
    return it->second ? &*it->second : nullptr;
  }

 private:
  std::optional<std::vector<ScriptOp>> build(int type, int vs, int u) {
    const Unit& unit = g_.work.units[static_cast<size_t>(vs)][static_cast<size_t>(u)];
    const models::ModelSpec& m = g_.model;
    const models::TrainingPlan& p = g_.plan;
    // cost_stages: the embedding, each layer (alike layers once), the head.
    const bool emb = unit.layer < 0 && unit.name == "emb";
    const int list = emb ? 0 : unit.layer < 0 ? 2 : 1;
    const LayerCostKey key = list == 1 ? layer_cost_key(m, p, unit.layer) : LayerCostKey{};
    const auto tkey = std::make_tuple(type, list, key);
    auto it = timings_.find(tkey);
    if (it == timings_.end()) {
      std::vector<OpTiming> t;
      const topo::KernelTimeModel& k = g_.kernels_of(type);
      if (list == 0)
        cost_ops(models::embedding_ops(m, p), p, k, OpList::EMBEDDING, 0, true, 1, &t);
      else if (list == 1)
        cost_ops(models::layer_ops(m, p, unit.layer), p, k, OpList::LAYER, 0, key.recomputed,
                 g_.ep_nodes, &t);
      else
        cost_ops(models::head_ops(m, p), p, k, OpList::HEAD, 0, true, g_.ep_nodes, &t);
      it = timings_.emplace(tkey, std::move(t)).first;
    }
    std::vector<ScriptOp> out;
    size_t fwd = 0, bwd = 0, recompute = 0;
    for (const OpTiming& t : it->second) {
      ScriptOp op;
      op.name = t.name;
      op.unit = &unit.name;
      op.kind = t.kind;
      op.comm = t.comm;
      op.fwd = t.fwd_s;
      op.recompute = t.recompute_share * t.fwd_s;
      op.bwd = t.bwd_input_s + t.bwd_weight_s;
      op.bwd_input = t.bwd_input_s;
      op.fwd_items = t.fwd_comm_items;
      op.bwd_items = t.bwd_comm_items;
      op.recompute_items = t.recompute_comm_items;
      fwd += static_cast<size_t>(op.fwd_items);
      bwd += static_cast<size_t>(op.bwd_items);
      recompute += static_cast<size_t>(op.recompute_items);
      out.push_back(std::move(op));
    }
    const PassCost& c = unit.cost;
    if (fwd != c.fwd_comm.size() || bwd != c.bwd_comm.size() ||
        recompute != c.recompute_comm.size())
      return std::nullopt;
    return out;
  }

  const StepGraph& g_;
  std::map<std::tuple<int, int, int>, std::optional<std::vector<ScriptOp>>> units_;
  std::map<std::tuple<int, int, LayerCostKey>, std::vector<OpTiming>> timings_;
};

// The letter of the work's collectives' labels ("B-comm tp ..." after a B or a Bi pass).
const char* work_letter(Work w) {
  return w == Work::FORWARD ? "F" : w == Work::RECOMPUTE ? "R" : "B";
}

// The first token of the work's compute label (lower_passes.cpp: "F", "R", "B", "Bi").
const char* work_token(Work w) {
  switch (w) {
    case Work::FORWARD:
      return "F";
    case Work::RECOMPUTE:
      return "R";
    case Work::BACKWARD:
      return "B";
    case Work::BACKWARD_INPUT:
      return "Bi";
  }
  return "";
}

const char* method_name(TpOverlapMethod m) {
  switch (m) {
    case TpOverlapMethod::NONE:
      return "none";
    case TpOverlapMethod::RING:
      return "ring";
    case TpOverlapMethod::PIPELINE:
      return "pipeline";
    case TpOverlapMethod::BULK:
      return "bulk";
  }
  return "none";
}

std::string micros(double seconds) {
  return fmt::format("{:.3f}", seconds * 1e6);
}

// One collective of a traced part as laid out.
struct Placed {
  std::size_t item = 0;
  std::size_t op = 0;       // the op (in the part's ops) whose collective it is
  std::size_t anchor = 0;   // the op it runs after or beside
  int run = -1;             // index in TracedPart::runs
  bool overlapped = false;  // beside a GEMM (a TP or CP overlap)
  double seconds = 0;       // what it ran for
  double exposed = 0;       // of which the compute stream waited for
  double start = 0, end = 0;
};

// The op an overlapped collective of op `i` runs beside: a row-parallel GEMM's own; the GEMM
// a gathered activation feeds (TP all-gather, and its backward mirror beside that GEMM's
// weight gradients); the attention blocks a CP exchange feeds (tp_overlaps' pairing).
std::size_t anchor_of(const std::vector<const ScriptOp*>& ops, std::size_t i,
                      const CommItem& item) {
  if (item.tp_overlap.method == TpOverlapMethod::NONE || ops[i]->kind == models::OpKind::MATMUL)
    return i;
  const auto want =
      item.dim == models::Dim::CP ? models::OpKind::ATTENTION : models::OpKind::MATMUL;
  for (std::size_t j = i + 1; j < ops.size() && ops[j]->unit == ops[i]->unit; ++j)
    if (ops[j]->kind == want) return j;
  return i;
}

// The layout of one traced part on its simulated GPU's rank (lay_out_passes).
class PartLayout {
 public:
  PartLayout(const StepGraph& g, const TracedPart& tp, const SliceIndex& slices,
             const StepReport& r)
      : g_(g),
        tp_(tp),
        slices_(slices),
        r_(r),
        rank_(g.gpus[tp.replica][static_cast<size_t>(tp.stage)].rank),
        forward_(tp.work == Work::FORWARD || tp.work == Work::RECOMPUTE) {}

  // The part laid out, or nothing when it has no collective of its own on this rank or its
  // ops do not account for its collectives.
  std::optional<PassLayout> run(Scripts& scripts) {
    const std::optional<std::size_t> pass = slice_of(tp_.compute);
    if (!pass || tp_.items == nullptr || tp_.runs.empty() || !gather_ops(scripts) ||
        !measure_runs() || placed_.empty())
      return std::nullopt;
    pass_ = *pass;
    const TimelineSlice& compute = r_.timeline[pass_];
    start_ = compute.start_s;
    compute_end_ = compute.end_s;
    end_ = compute.end_s;
    for (std::size_t j = 0; j < tp_.runs.size(); ++j)
      if (laid_[j] && !tp_.runs[j].overlapped) end_ = std::max(end_, spans_[j].second);
    if (!charge_residual()) return std::nullopt;
    place();
    keep_tracks_apart();
    return emit();
  }

 private:
  std::optional<std::size_t> slice_of(sim::TaskId t) const {
    const auto it = slices_.find({t, rank_});
    if (it == slices_.end()) return std::nullopt;
    return it->second;
  }

  // The part's ops in forward order and the op that issued each of its collectives.
  bool gather_ops(Scripts& scripts) {
    const auto& units = g_.work.units[static_cast<size_t>(tp_.virtual_stage)];
    const int u0 = tp_.unit < 0 ? 0 : tp_.unit;
    const int u1 = tp_.unit < 0 ? static_cast<int>(units.size()) : tp_.unit + 1;
    const int type = g_.gpus[tp_.replica][static_cast<size_t>(tp_.stage)].gpu_type;
    for (int u = u0; u < u1; ++u) {
      const std::vector<ScriptOp>* script = scripts.unit(type, tp_.virtual_stage, u);
      if (script == nullptr) return false;
      for (const ScriptOp& op : *script) ops_.push_back(&op);
    }
    for (std::size_t i = 0; i < ops_.size(); ++i)
      op_of_.insert(op_of_.end(), static_cast<size_t>(ops_[i]->items(tp_.work)), i);
    return op_of_.size() == tp_.items->size();
  }

  // Each run's span on this rank and each of its collectives' seconds in it: the tasks' own
  // when the run is a task per collective, else the frozen times, scaled to the span.
  bool measure_runs() {
    const std::vector<CommItem>& items = *tp_.items;
    spans_.assign(tp_.runs.size(), {0, 0});
    laid_.assign(tp_.runs.size(), false);
    for (std::size_t j = 0; j < tp_.runs.size(); ++j) {
      const TracedPart::Run& run = tp_.runs[j];
      // EP beside another micro-batch's compute: left as simulated.
      if (run.overlapped && items[run.begin].dim == models::Dim::EP) continue;
      laid_[j] = true;
      std::vector<double> own;
      for (sim::TaskId t = run.first; t <= run.last; ++t) {
        const std::optional<std::size_t> s = slice_of(t);
        if (!s) continue;
        const TimelineSlice& sl = r_.timeline[*s];
        if (own.empty()) spans_[j].first = sl.start_s;
        spans_[j].second = sl.end_s;
        own.push_back(sl.end_s - sl.start_s);
        folded_.emplace_back(*s, static_cast<int>(j));
      }
      if (own.empty()) return false;  // the run left no slice on this rank
      const std::size_t n = run.end - run.begin;
      std::vector<double> share(n, 1.0);
      if (own.size() == n) {
        share = own;
      } else if (run.item_ps.size() == n) {
        for (std::size_t k = 0; k < n; ++k) share[k] = static_cast<double>(run.item_ps[k]);
      }
      double total = 0;
      for (double x : share) total += x;
      const double span = spans_[j].second - spans_[j].first;
      for (std::size_t k = 0; k < n; ++k) {
        Placed p;
        p.item = run.begin + k;
        p.op = op_of_[p.item];
        p.run = static_cast<int>(j);
        p.overlapped = run.overlapped;
        p.seconds = total > 0 ? span * share[k] / total : span / static_cast<double>(n);
        p.exposed = run.overlapped ? 0 : p.seconds;
        p.anchor = run.overlapped ? anchor_of(ops_, p.op, items[p.item]) : p.op;
        placed_.push_back(p);
      }
    }
    return true;
  }

  // The overlap residual: what the overlapped collectives left exposed, which the compute
  // stream ran after waiting for them; each one's share is tp_overlap_exposed_s of its
  // seconds.
  bool charge_residual() {
    if (tp_.residual < 0) return true;
    const std::optional<std::size_t> res = slice_of(tp_.residual);
    if (!res) return false;
    const TimelineSlice& rs = r_.timeline[*res];
    const double residual_s = rs.end_s - rs.start_s;
    end_ = std::max(end_, rs.end_s);
    folded_.emplace_back(*res, -1);
    const int sms =
        g_.cluster.gpu_of_rank(g_.gpus[0][static_cast<size_t>(tp_.stage)].rank).sm_count;
    double sum = 0;
    for (Placed& p : placed_) {
      if (!p.overlapped) continue;
      p.exposed = tp_overlap_exposed_s((*tp_.items)[p.item].tp_overlap, p.seconds, sms);
      sum += p.exposed;
    }
    // Nothing to charge: the residual stays a wait at the pass's end.
    for (Placed& p : placed_)
      if (p.overlapped) p.exposed = sum > 0 ? p.exposed * residual_s / sum : 0;
    return true;
  }

  bool beside(const Placed& p) const {
    return p.overlapped && (*tp_.items)[p.item].tp_overlap.method != TpOverlapMethod::NONE;
  }

  // Walks the ops in the order the pass runs them: each op's share of the compute seconds,
  // a blocking collective after its op (before it in the backward), an overlapped one from
  // the start of the GEMM it overlaps, that GEMM followed by what it left exposed.
  void place() {
    double weight = 0;
    for (const ScriptOp* op : ops_) weight += op->seconds(tp_.work);
    const double compute_s = compute_end_ - start_;
    const double scale = weight > 0 ? compute_s / weight : 0;
    const double even = weight > 0 ? 0 : compute_s / static_cast<double>(ops_.size());
    std::vector<std::vector<std::size_t>> by_op(ops_.size()), by_anchor(ops_.size());
    for (std::size_t k = 0; k < placed_.size(); ++k)
      (beside(placed_[k]) ? by_anchor[placed_[k].anchor] : by_op[placed_[k].op]).push_back(k);
    // Each blocking run's wait for its group: the gap before it on the compute stream.
    std::vector<double> wait(tp_.runs.size(), 0);
    double prev_end = compute_end_;
    for (std::size_t j = 0; j < tp_.runs.size(); ++j) {
      if (!laid_[j] || tp_.runs[j].overlapped) continue;
      wait[j] = std::max(0.0, spans_[j].first - prev_end);
      prev_end = spans_[j].second;
    }
    std::vector<bool> started(tp_.runs.size(), false);
    double t = start_;
    const auto in_turn = [&](std::size_t k) {  // one the compute stream waits for
      Placed& p = placed_[k];
      const auto j = static_cast<size_t>(p.run);
      if (!p.overlapped && !started[j]) t += wait[j];
      started[j] = true;
      p.start = t;
      p.end = t + p.seconds;
      t += p.overlapped ? p.exposed : p.seconds;
    };
    for (std::size_t n = 0; n < ops_.size(); ++n) {
      const std::size_t i = forward_ ? n : ops_.size() - 1 - n;
      if (!forward_)
        for (auto k = by_op[i].rbegin(); k != by_op[i].rend(); ++k) in_turn(*k);
      for (std::size_t k : by_anchor[i]) placed_[k].start = t;
      t += weight > 0 ? ops_[i]->seconds(tp_.work) * scale : even;
      for (std::size_t k : by_anchor[i]) {
        placed_[k].end = placed_[k].start + placed_[k].seconds;
        t += placed_[k].exposed;
      }
      if (forward_)
        for (std::size_t k : by_op[i]) in_turn(k);
    }
  }

  // One track per dimension: in start order no two slices overlap (an overlapped collective
  // gives way; the blocking ones keep their times) and none leaves the pass.
  void keep_tracks_apart() {
    const std::vector<CommItem>& items = *tp_.items;
    order_.resize(placed_.size());
    for (std::size_t k = 0; k < order_.size(); ++k) order_[k] = k;
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      const auto da = items[placed_[a].item].dim, db = items[placed_[b].item].dim;
      if (da != db) return models::index(da) < models::index(db);
      return placed_[a].start < placed_[b].start;
    });
    for (std::size_t n = 0; n < order_.size(); ++n) {
      Placed& p = placed_[order_[n]];
      p.start = std::clamp(p.start, start_, end_);
      p.end = std::clamp(p.end, p.start, end_);
      if (n == 0 || items[placed_[order_[n - 1]].item].dim != items[p.item].dim) continue;
      Placed& q = placed_[order_[n - 1]];
      if (q.end <= p.start) continue;
      if (q.overlapped) {
        q.end = std::max(q.start, p.start);
      } else {
        p.start = q.end;
        p.end = std::max(p.end, p.start);
      }
    }
  }

  TimelineSlice slice(const Placed& p) const {
    const CommItem& item = (*tp_.items)[p.item];
    TimelineSlice s;
    s.rank = rank_;
    s.stream = models::to_string(item.dim);
    s.category = item.dim == models::Dim::CP   ? TraceCategory::CP
                 : item.dim == models::Dim::EP ? TraceCategory::EP
                                               : TraceCategory::TP;
    const std::string& unit = *ops_[p.op]->unit;
    s.name = fmt::format("{}-comm {} {} mb{} c{} {}", work_letter(tp_.work), s.stream,
                         sim::to_string(item.op), tp_.micro_batch, tp_.chunk, unit);
    s.start_s = p.start;
    s.end_s = p.end;
    s.args = {{"pass", pass_name(work_token(tp_.work))},
              {"micro_batch", fmt::format("{}", tp_.micro_batch)},
              {"chunk", fmt::format("{}", tp_.chunk)},
              {"unit", unit},
              {"op", sim::to_string(item.op)},
              {"bytes", bytes_arg(item.bytes)}};
    if (const sim::TaskNote* note = g_.engine.note(tp_.runs[static_cast<size_t>(p.run)].first))
      for (auto& arg : note_args(*note)) s.args.push_back(std::move(arg));
    s.args.emplace_back("after_op", ops_[p.op]->name);
    s.args.emplace_back("overlap", p.overlapped ? method_name(item.tp_overlap.method) : "none");
    if (beside(p)) s.args.emplace_back("overlaps_op", ops_[p.anchor]->name);
    const double exposed = std::min(p.exposed, p.seconds);
    s.args.emplace_back("exposed_us", micros(exposed));
    s.args.emplace_back("hidden_us", micros(std::max(0.0, p.seconds - exposed)));
    return s;
  }

  PassLayout emit() const {
    PassLayout layout;
    layout.pass = pass_;
    layout.end_s = end_;
    std::vector<std::ptrdiff_t> run_last(tp_.runs.size(), -1);
    double exposed_s = 0;
    for (std::size_t k : order_) {
      const Placed& p = placed_[k];
      exposed_s += p.overlapped ? p.exposed : p.seconds;
      run_last[static_cast<size_t>(p.run)] = static_cast<std::ptrdiff_t>(layout.collectives.size());
      layout.collectives.push_back(slice(p));
    }
    for (const auto& [slice, run] : folded_)
      layout.folded.emplace_back(slice, run < 0 ? -1 : run_last[static_cast<size_t>(run)]);
    layout.args = {{"compute_us", micros(compute_end_ - start_)},
                   {"collectives", fmt::format("{}", layout.collectives.size())},
                   {"exposed_comm_us", micros(exposed_s)}};
    return layout;
  }

  const StepGraph& g_;
  const TracedPart& tp_;
  const SliceIndex& slices_;
  const StepReport& r_;
  const int rank_;
  const bool forward_;  // ops in forward order (forward, recompute); else reversed
  std::vector<const ScriptOp*> ops_;
  std::vector<std::size_t> op_of_;                // by item: its op
  std::vector<std::pair<double, double>> spans_;  // by run: its start and end on this rank
  std::vector<bool> laid_;                        // by run: laid out (not EP beside)
  std::vector<Placed> placed_;
  std::vector<std::size_t> order_;                   // placed_ by track, then start
  std::vector<std::pair<std::size_t, int>> folded_;  // (slice, run; -1: the residual)
  std::size_t pass_ = 0;
  double start_ = 0, compute_end_ = 0, end_ = 0;
};

}  // namespace

void lay_out_passes(const StepGraph& g, const SliceIndex& slices, StepReport& r) {
  if (!g.options.trace_collectives) return;  // no traced parts: only the trace reads layouts
  Scripts scripts(g);
  for (const TracedPart& tp : g.traced_parts)
    if (auto layout = PartLayout(g, tp, slices, r).run(scripts))
      r.pass_layouts.push_back(std::move(*layout));
}

}  // namespace loom::strategies
