#include "cli/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "cli/field_flags.hpp"
#include "cli/output_file.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "strategies/rank_layout.hpp"

namespace loom::cli {
namespace {

using strategies::Dim;

// Perfetto orders threads by this index: compute first, then the passes' collectives by
// dimension, then the streams that overlap the compute, then the pipeline lanes.
int thread_sort_index(const std::string& stream) {
  static const std::map<std::string, int> fixed = {
      {"compute", 0},    {"tp", 1},         {"cp", 2}, {"ep", 3},
      {"tp-overlap", 4}, {"ep-overlap", 5}, {"dp", 6}, {"dp-ag", 7}};
  if (auto it = fixed.find(stream); it != fixed.end()) return it->second;
  for (const auto& [kind, base] : {std::pair<std::string, int>{"pp-send", 10}, {"pp-recv", 30}}) {
    if (stream.rfind(kind, 0) != 0) continue;
    const std::string lane = stream.substr(kind.size());
    return base + (lane.empty() ? 0 : std::stoi(lane) - 1);
  }
  return 100;
}

OrderedJson metadata(const char* name, int pid, std::optional<int> tid, OrderedJson args) {
  OrderedJson m;
  m["name"] = name;
  m["ph"] = "M";
  m["pid"] = pid;
  if (tid) m["tid"] = *tid;
  m["args"] = std::move(args);
  return m;
}

// "rank 8: stage 1, tp 0, cp 0, dp 1" for every rank that appears in the trace.
void name_processes(const std::set<int>& ranks, const models::TrainingPlan& plan,
                    const std::string& order, OrderedJson& events) {
  const strategies::RankLayout layout(plan, order, flag_names());
  std::vector<Dim> dims = {Dim::PP, Dim::TP, Dim::CP, Dim::DP};
  if (plan.ep > 1) dims.push_back(Dim::EP);
  std::vector<std::vector<int>> coords;
  for (Dim d : dims) coords.push_back(layout.coordinates(d));
  for (int rank : ranks) {
    std::string label = fmt::format("rank {}:", rank);
    for (size_t i = 0; i < dims.size(); ++i) {
      const int c = coords[i][static_cast<size_t>(rank)];
      label += i == 0 ? fmt::format(" stage {}", c)
                      : fmt::format(", {} {}", strategies::to_string(dims[i]), c);
    }
    events.push_back(metadata("process_name", rank, std::nullopt, {{"name", label}}));
    events.push_back(metadata("process_sort_index", rank, std::nullopt, {{"sort_index", rank}}));
  }
}

// The slices as drawn: StepReport::timeline with each laid-out pass (PassLayout) stretched over
// its collectives, the slices it folds left out, and its collectives one slice each.
class Drawn {
 public:
  explicit Drawn(const strategies::StepReport& r) : r_(r), folded_(r.timeline.size()) {
    for (size_t l = 0; l < r.pass_layouts.size(); ++l) {
      const auto& layout = r.pass_layouts[l];
      pass_of_[layout.pass] = l;
      for (const auto& [slice, collective] : layout.folded) folded_[slice] = {l, collective};
    }
  }
  bool folded(size_t i) const { return folded_[i].has_value(); }
  /// The laid-out pass whose slice `i` is, if any.
  std::optional<size_t> layout_of(size_t i) const {
    const auto it = pass_of_.find(i);
    return it == pass_of_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  /// The slice timeline[i] is drawn as (itself, its pass stretched, or the collective that ends
  /// its run), and the layout it belongs to.
  strategies::TimelineSlice slice(size_t i) const {
    if (const auto& f = folded_[i]) {
      const auto& layout = r_.pass_layouts[f->first];
      if (f->second >= 0) return layout.collectives[static_cast<size_t>(f->second)];
      return stretched(layout);
    }
    if (const auto l = layout_of(i)) return stretched(r_.pass_layouts[*l]);
    return r_.timeline[i];
  }
  std::optional<size_t> owner(size_t i) const {
    if (const auto& f = folded_[i]) return f->first;
    return layout_of(i);
  }
  strategies::TimelineSlice stretched(const strategies::PassLayout& layout) const {
    strategies::TimelineSlice s = r_.timeline[layout.pass];
    s.end_s = std::max(s.end_s, layout.end_s);
    s.args.insert(s.args.end(), layout.args.begin(), layout.args.end());
    return s;
  }

 private:
  const strategies::StepReport& r_;
  std::vector<std::optional<std::pair<size_t, std::ptrdiff_t>>> folded_;
  std::map<size_t, size_t> pass_of_;
};

OrderedJson slice_event(const strategies::TimelineSlice& s, int tid) {
  OrderedJson e;
  e["name"] = s.name;
  e["cat"] = strategies::to_string(s.category);
  e["ph"] = "X";
  e["pid"] = s.rank;
  e["tid"] = tid;
  e["ts"] = s.start_s * 1e6;
  e["dur"] = (s.end_s - s.start_s) * 1e6;
  if (!s.args.empty()) {
    OrderedJson args = OrderedJson::object();
    for (const auto& [key, value] : s.args) args[key] = value;
    e["args"] = std::move(args);
  }
  return e;
}

// Flow arrows ("s" at the source slice's start, "f" bound to the enclosing destination slice):
// a pipeline send to its receive, a collective or transfer to the tasks that waited for it.
// An arrow inside one laid-out pass (a run to the next, to the residual) is left out.
void add_flows(const strategies::StepReport& r, const Drawn& drawn,
               const std::map<std::pair<int, std::string>, int>& tids, OrderedJson& events) {
  int id = 0;
  for (const strategies::TimelineFlow& f : r.timeline_flows) {
    const auto from = drawn.owner(f.from);
    if (from && from == drawn.owner(f.to)) continue;
    const strategies::TimelineSlice a = drawn.slice(f.from);
    const strategies::TimelineSlice b = drawn.slice(f.to);
    const bool pipeline = a.category == strategies::TraceCategory::PP;
    for (const auto* s : {&a, &b}) {
      OrderedJson e;
      e["name"] = pipeline ? "send to receive" : "waits for";
      e["cat"] = pipeline ? "pp-flow" : "dependency";
      e["ph"] = s == &a ? "s" : "f";
      if (s == &b) e["bp"] = "e";
      e["id"] = id;
      e["pid"] = s->rank;
      e["tid"] = tids.at({s->rank, s->stream});
      e["ts"] = (s == &a ? a.start_s : std::max(b.start_s, a.start_s)) * 1e6;
      events.push_back(e);
    }
    ++id;
  }
}

}  // namespace

void write_chrome_trace(const std::string& path, const strategies::StepReport& r,
                        const models::TrainingPlan& plan, const std::string& order) {
  OrderedJson events = OrderedJson::array();
  std::set<int> ranks;
  for (const auto& s : r.timeline) ranks.insert(s.rank);
  for (const auto& m : r.memory_samples) ranks.insert(m.rank);
  name_processes(ranks, plan, order, events);
  std::map<std::pair<int, std::string>, int> tids;
  const auto tid_of = [&](const strategies::TimelineSlice& s) {
    auto key = std::make_pair(s.rank, s.stream);
    if (const auto it = tids.find(key); it != tids.end()) return it->second;
    const int tid = static_cast<int>(tids.size());
    tids[key] = tid;
    events.push_back(metadata("thread_name", s.rank, tid, {{"name", s.stream}}));
    events.push_back(
        metadata("thread_sort_index", s.rank, tid, {{"sort_index", thread_sort_index(s.stream)}}));
    return tid;
  };
  const Drawn drawn(r);
  for (size_t i = 0; i < r.timeline.size(); ++i) {
    if (drawn.folded(i)) continue;
    const strategies::TimelineSlice s = drawn.slice(i);
    const int tid = tid_of(s);
    events.push_back(slice_event(s, tid));
  }
  // The passes' collectives, in time order (each track's slices in order, as the rest).
  std::vector<const strategies::TimelineSlice*> collectives;
  for (const auto& layout : r.pass_layouts)
    for (const auto& c : layout.collectives) collectives.push_back(&c);
  std::stable_sort(collectives.begin(), collectives.end(),
                   [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
  for (const auto* c : collectives) {
    const int tid = tid_of(*c);
    events.push_back(slice_event(*c, tid));
  }
  add_flows(r, drawn, tids, events);
  // One counter value per timestamp and rank: the last, what the rank holds after that instant.
  std::map<std::pair<int, double>, size_t> last_sample;
  for (size_t i = 0; i < r.memory_samples.size(); ++i)
    last_sample[{r.memory_samples[i].rank, r.memory_samples[i].time_s}] = i;
  for (size_t i = 0; i < r.memory_samples.size(); ++i) {
    const auto& m = r.memory_samples[i];
    if (last_sample[{m.rank, m.time_s}] != i) continue;
    OrderedJson e;
    e["name"] = "memory";
    e["ph"] = "C";
    e["pid"] = m.rank;
    e["ts"] = m.time_s * 1e6;
    // Whole bytes: the model's per-micro-batch activations are averages over chunks.
    e["args"] = {{"bytes", static_cast<std::int64_t>(std::llround(m.bytes))}};
    events.push_back(e);
  }
  OrderedJson doc;
  doc["traceEvents"] = events;
  doc["displayTimeUnit"] = "ms";
  write_output_file(path, doc.dump() + "\n", "--trace");
}

}  // namespace loom::cli
