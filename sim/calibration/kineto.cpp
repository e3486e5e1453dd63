#include "sim/calibration/kineto.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "sim/calibration/kineto_shapes.hpp"

namespace loom::calibration {

namespace {

using nlohmann::json;
constexpr double US = 1e-6;  // Chrome traces count microseconds

// A host-side span: a CPU op, a step annotation or a runtime call.
struct HostEvent {
  const json* event = nullptr;
  std::string name;
  std::string thread;  // pid/tid as written (numbers or strings)
  double ts = 0, end = 0;
  std::int64_t external = -1;  // "External id"
};

// A device activity: a kernel, memcpy or memset.
struct Activity {
  const json* args = nullptr;
  std::string category, name;
  double ts = 0, dur = 0;
  std::int64_t correlation = -1, external = -1, device = -1;
};

const json* arg(const json* args, const char* key) {
  if (args == nullptr || !args->is_object()) return nullptr;
  auto it = args->find(key);
  return it == args->end() ? nullptr : &*it;
}

std::int64_t int_arg(const json* args, const char* key) {
  const json* v = arg(args, key);
  return v && v->is_number_integer() ? v->get<std::int64_t>() : -1;
}

std::string string_arg(const json* args, const char* key) {
  const json* v = arg(args, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// The string at `key` of an event, "" when absent or not a string (json::value() would throw).
std::string text_of(const json& event, const char* key) {
  return string_arg(&event, key);
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

json parse_trace_json(std::string_view text, const std::string& file) {
  check_json_bounds(text, file);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    const size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    int line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      column = text[i] == '\n' ? 1 : column + 1;
      if (text[i] == '\n') ++line;
    }
    // "[json.exception.parse_error.101] parse error at line 3, column 1: syntax error ...":
    // keep what follows the position, which loom prints itself.
    std::string detail = e.what();
    if (auto pos = detail.find("parse error"); pos != std::string::npos) {
      if (auto colon = detail.find(": ", pos); colon != std::string::npos) {
        detail = detail.substr(colon + 2);
      }
    }
    throw CalibrationError(fmt::format(
        "{}:{}:{}: malformed JSON at byte {}: {}; the trace is cut off or damaged: export it "
        "again (export_chrome_trace) or import another rank's",
        file, line, column, offset, detail));
  } catch (const json::exception& e) {
    // out_of_range 406: a number beyond a double ("1e400").
    throw CalibrationError(
        fmt::format("{}: invalid JSON: {}; the trace is damaged: export it "
                    "again (export_chrome_trace)",
                    file, e.what()));
  }
}

// Reads the events, links kernels to their launches and CPU ops, and sums them up.
class Importer {
 public:
  Importer(const json& root, const std::string& file, std::vector<std::string>& notes)
      : root_(root), file_(file), notes_(notes) {}
  TraceSummary run();

 private:
  double number(const json& event, size_t i, const char* key) const;
  void collect();
  void add_host(const json& event, size_t i, const std::string& category);
  void index_gpu_steps();
  int step_of(const Activity& a, size_t index) const;
  std::vector<const HostEvent*> linked_ops(const Activity& a) const;
  void add_activity(TraceSummary& s, const Activity& a, size_t index);
  void finish_steps(TraceSummary& s);
  void describe_device(TraceSummary& s) const;
  void add_notes(const TraceSummary& s) const;

  const json& root_;
  const std::string& file_;
  std::vector<std::string>& notes_;
  std::vector<HostEvent> steps_;                // CPU ProfilerStep#N, by start
  std::map<std::string, HostEvent> gpu_steps_;  // gpu_user_annotation ProfilerStep#N by name
  std::vector<HostEvent> ops_;                  // CPU ops
  std::unordered_map<std::int64_t, size_t> op_by_external_;
  std::map<std::string, std::vector<size_t>> ops_by_thread_;  // indices by start
  std::unordered_map<std::int64_t, HostEvent> launch_by_correlation_;
  std::vector<Activity> activities_;
  // Per activity without a launch: the step whose GPU annotation holds it, or -1.
  std::vector<int> gpu_step_of_;
  // Per step: classes, device intervals for the busy union.
  std::vector<std::map<std::string, ClassTime>> step_classes_;
  std::vector<std::vector<std::pair<double, double>>> step_intervals_;
  // Per GEMM call (CPU op): its shape, op name and GEMM kernel time.
  std::map<const HostEvent*, std::pair<GemmShape, double>> gemm_calls_;
  int gemm_kernels_ = 0, gemm_kernels_without_shape_ = 0;
  int nccl_kernels_ = 0, nccl_kernels_without_size_ = 0;
  std::map<std::tuple<int, int, std::string, double>, CollectiveFigure> collectives_;
  std::map<std::string, CopyFigure> copies_;
};

double Importer::number(const json& event, size_t i, const char* key) const {
  auto it = event.find(key);
  if (it == event.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
      (std::string_view(key) == "dur" && it->get<double>() < 0)) {
    throw ConfigError::bad_value(file_, fmt::format("/traceEvents/{}/{}", i, key),
                                 it == event.end() ? "nothing" : json_excerpt(*it),
                                 "a number of microseconds (>= 0 for dur)");
  }
  return it->get<double>();
}

void Importer::add_host(const json& event, size_t i, const std::string& category) {
  HostEvent h;
  h.event = &event;
  h.name = event["name"].get<std::string>();
  h.thread = event.value("pid", json()).dump() + "/" + event.value("tid", json()).dump();
  h.ts = number(event, i, "ts");
  h.end = h.ts + number(event, i, "dur");
  const json* args = arg(&event, "args");
  h.external = int_arg(args, "External id");
  if (starts_with(h.name, "ProfilerStep#")) {
    if (category == "gpu_user_annotation") {
      gpu_steps_[h.name] = h;
    } else {
      steps_.push_back(h);
    }
  } else if (category == "cuda_runtime" || category == "cuda_driver") {
    const std::int64_t correlation = int_arg(args, "correlation");
    if (correlation >= 0) launch_by_correlation_[correlation] = h;
  } else if (category == "cpu_op" || category == "user_annotation") {
    if (h.external >= 0) op_by_external_[h.external] = ops_.size();
    ops_.push_back(std::move(h));
  }
}

void Importer::collect() {
  auto events = root_.find("traceEvents");
  if (events == root_.end() || !events->is_array()) {
    throw ConfigError::bad_value(file_, "/traceEvents",
                                 events == root_.end() ? "nothing" : json_excerpt(*events),
                                 "an array of trace events");
  }
  for (size_t i = 0; i < events->size(); ++i) {
    const json& event = (*events)[i];
    if (!event.is_object() || text_of(event, "ph") != "X") continue;  // metadata, flows, ...
    auto name = event.find("name");
    if (name == event.end() || !name->is_string()) {
      throw ConfigError::bad_value(file_, fmt::format("/traceEvents/{}/name", i),
                                   name == event.end() ? "nothing" : json_excerpt(*name),
                                   "a string");
    }
    const std::string category = text_of(event, "cat");
    if (category == "kernel" || category == "gpu_memcpy" || category == "gpu_memset") {
      Activity a;
      a.args = arg(&event, "args");
      a.category = category;
      a.name = name->get<std::string>();
      a.ts = number(event, i, "ts");
      a.dur = number(event, i, "dur");
      a.correlation = int_arg(a.args, "correlation");
      a.external = int_arg(a.args, "External id");
      a.device = int_arg(a.args, "device");
      activities_.push_back(std::move(a));
    } else {
      add_host(event, i, category);
    }
  }
  std::sort(steps_.begin(), steps_.end(),
            [](const HostEvent& a, const HostEvent& b) { return a.ts < b.ts; });
  if (steps_.empty()) {  // GPU annotations alone still mark the steps
    for (auto& [name, h] : gpu_steps_) steps_.push_back(h);
    std::sort(steps_.begin(), steps_.end(),
              [](const HostEvent& a, const HostEvent& b) { return a.ts < b.ts; });
  }
  for (size_t i = 0; i < ops_.size(); ++i) ops_by_thread_[ops_[i].thread].push_back(i);
  for (auto& [thread, list] : ops_by_thread_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return ops_[a].ts < ops_[b].ts; });
  }
}

// For each activity without a launch, the first GPU step annotation (by name) whose span
// holds its start and that names a CPU step, or -1: one sweep over the activities by start
// time, the spans entering by start and leaving by end, so n log n in kernels and steps
// (a scan of every span for every kernel took 11 s for 20k of each).
void Importer::index_gpu_steps() {
  gpu_step_of_.assign(activities_.size(), -1);
  std::map<std::string_view, int> step_by_name;
  for (size_t i = 0; i < steps_.size(); ++i)
    step_by_name.emplace(steps_[i].name, static_cast<int>(i));  // the first of a name
  struct Span {
    double ts, end;
    int order, step;  // order: position by name in gpu_steps_, which decides among overlaps
  };
  std::vector<Span> spans;
  for (const auto& [name, g] : gpu_steps_) {
    const int order = static_cast<int>(spans.size());
    if (auto it = step_by_name.find(name); it != step_by_name.end())
      spans.push_back({g.ts, g.end, order, it->second});
  }
  if (spans.empty()) return;
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ts < b.ts; });
  std::vector<size_t> queries;
  for (size_t i = 0; i < activities_.size(); ++i)
    if (!launch_by_correlation_.contains(activities_[i].correlation)) queries.push_back(i);
  std::stable_sort(queries.begin(), queries.end(),
                   [&](size_t a, size_t b) { return activities_[a].ts < activities_[b].ts; });
  std::set<std::pair<int, int>> open;  // (order, span) of the spans holding the current time
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      ends;
  size_t next = 0;
  for (size_t q : queries) {
    const double t = activities_[q].ts;
    for (; next < spans.size() && spans[next].ts <= t; ++next) {
      open.emplace(spans[next].order, static_cast<int>(next));
      ends.emplace(spans[next].end, static_cast<int>(next));
    }
    for (; !ends.empty() && ends.top().first < t; ends.pop())
      open.erase({spans[static_cast<size_t>(ends.top().second)].order, ends.top().second});
    if (!open.empty()) gpu_step_of_[q] = spans[static_cast<size_t>(open.begin()->second)].step;
  }
}

int Importer::step_of(const Activity& a, size_t index) const {
  // A kernel belongs to the step that launched it (the profiler's step is a CPU span; the
  // GPU may run its kernels after the span ends).
  double t = a.ts;
  if (auto it = launch_by_correlation_.find(a.correlation); it != launch_by_correlation_.end()) {
    t = it->second.ts;
  } else if (gpu_step_of_[index] >= 0) {
    return gpu_step_of_[index];
  }
  auto after = std::upper_bound(steps_.begin(), steps_.end(), t,
                                [](double v, const HostEvent& s) { return v < s.ts; });
  if (after == steps_.begin()) return -1;
  const HostEvent& s = *(after - 1);
  return t <= s.end ? static_cast<int>(after - 1 - steps_.begin()) : -1;
}

std::vector<const HostEvent*> Importer::linked_ops(const Activity& a) const {
  std::vector<const HostEvent*> out;
  const auto push = [&](const HostEvent* h) {
    if (h != nullptr && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  };
  const auto by_external = [&](std::int64_t id) -> const HostEvent* {
    auto it = op_by_external_.find(id);
    return it == op_by_external_.end() ? nullptr : &ops_[it->second];
  };
  // Ops around [t0, t1] on `thread`, innermost first: aten::linear around aten::addmm.
  const auto push_enclosing = [&](const std::string& thread, double t0, double t1) {
    auto list = ops_by_thread_.find(thread);
    if (list == ops_by_thread_.end()) return;
    const auto& ids = list->second;
    auto at = std::upper_bound(ids.begin(), ids.end(), t0,
                               [&](double t, size_t i) { return t < ops_[i].ts; });
    // Siblings that ended earlier sit between; a bounded look back keeps huge traces linear.
    for (int seen = 0; at != ids.begin() && seen < 256; ++seen) {
      const HostEvent& op = ops_[*--at];
      if (op.end >= t1) push(&op);
    }
  };
  push(by_external(a.external));
  auto launch = launch_by_correlation_.find(a.correlation);
  if (launch != launch_by_correlation_.end()) {
    push(by_external(launch->second.external));
    push_enclosing(launch->second.thread, launch->second.ts, launch->second.ts);
  } else if (!out.empty()) {
    const HostEvent* op = out.front();
    push_enclosing(op->thread, op->ts, op->end);
  }
  return out;
}

// Collective metadata (PyTorch's record_param_comms arguments, copied onto the NCCL kernel by
// recent releases): from the kernel, else from the op that launched it.
const json* comms_args(const Activity& a, const std::vector<const HostEvent*>& ops) {
  if (arg(a.args, "Collective name")) return a.args;
  for (const HostEvent* op : ops) {
    const json* args = arg(op->event, "args");
    if (arg(args, "Collective name")) return args;
  }
  return nullptr;
}

std::string copy_kind(const Activity& a) {
  if (a.category == "gpu_memset") return "memset";
  // "Memcpy HtoD (Pageable -> Device)": the direction word.
  std::string_view name = a.name;
  if (starts_with(name, "Memcpy ")) name.remove_prefix(7);
  return std::string(name.substr(0, name.find(' ')));
}

void add_collective(std::map<std::tuple<int, int, std::string, double>, CollectiveFigure>& figures,
                    const json* args, const std::string& cls, double seconds, bool& sized) {
  const std::optional<sim::CollectiveOp> op = collective_of(cls.substr(5));
  const std::int64_t group = int_arg(args, "Group size");
  const std::int64_t in = int_arg(args, "In msg nelems"), out = int_arg(args, "Out msg nelems");
  const auto [dtype, element_bytes] = kineto::dtype_of(string_arg(args, "dtype"));
  sized = op && group > 0 && std::max(in, out) > 0 && element_bytes > 0;
  if (!sized) return;
  const double bytes = static_cast<double>(std::max(in, out)) * element_bytes;
  CollectiveFigure& f = figures[{static_cast<int>(*op), static_cast<int>(group), dtype, bytes}];
  f.op = *op;
  f.group_size = static_cast<int>(group);
  f.dtype = dtype;
  f.bytes = bytes;
  f.calls += 1;
  f.seconds += seconds;
}

void Importer::add_activity(TraceSummary& s, const Activity& a, size_t index) {
  const std::vector<const HostEvent*> ops = linked_ops(a);
  const json* comms = comms_args(a, ops);
  const std::string cls =
      classify_activity(a.category, a.name, string_arg(comms, "Collective name"));
  const double seconds = a.dur * US;
  if (const int step = step_of(a, index); step >= 0) {
    ClassTime& c = step_classes_[step][cls];
    c.name = cls;
    c.kernels += 1;
    c.seconds += seconds;
    step_intervals_[step].emplace_back(a.ts, a.ts + a.dur);
  } else {
    s.activities_outside_steps += 1;
  }
  if (cls == "gemm") {
    ++gemm_kernels_;
    for (const HostEvent* op : ops) {
      const json* args = arg(op->event, "args");
      if (auto shape = kineto::gemm_shape(op->name, args ? *args : json())) {
        auto& call = gemm_calls_[op];
        call.first = *shape;
        call.second += seconds;
        return;
      }
    }
    ++gemm_kernels_without_shape_;
  } else if (starts_with(cls, "nccl:")) {
    ++nccl_kernels_;
    bool sized = false;
    add_collective(collectives_, comms, cls, seconds, sized);
    if (!sized) ++nccl_kernels_without_size_;
  } else if (cls == "memcpy" || cls == "memset") {
    CopyFigure& c = copies_[copy_kind(a)];
    c.kind = copy_kind(a);
    c.calls += 1;
    const json* bytes = arg(a.args, "bytes");
    if (bytes && bytes->is_number() && bytes->get<double>() > 0) c.bytes += bytes->get<double>();
    c.seconds += seconds;
  }
}

void Importer::finish_steps(TraceSummary& s) {
  for (size_t i = 0; i < steps_.size(); ++i) {
    TraceStep step;
    step.name = steps_[i].name;
    step.wall_seconds = (steps_[i].end - steps_[i].ts) * US;
    auto& intervals = step_intervals_[i];
    std::sort(intervals.begin(), intervals.end());
    double covered_to = -INFINITY, busy = 0;
    for (const auto& [begin, end] : intervals) {
      if (end <= covered_to) continue;
      busy += end - std::max(begin, covered_to);
      covered_to = end;
    }
    step.busy_seconds = busy * US;
    for (auto& [name, c] : step_classes_[i]) step.classes.push_back(c);
    std::sort(step.classes.begin(), step.classes.end(), [](const ClassTime& a, const ClassTime& b) {
      return kernel_class_rank(a.name) < kernel_class_rank(b.name);
    });
    s.steps.push_back(std::move(step));
  }
}

void Importer::describe_device(TraceSummary& s) const {
  const std::int64_t device = activities_.front().device;
  if (auto props = root_.find("deviceProperties"); props != root_.end() && props->is_array()) {
    for (const json& p : *props) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
      if (s.gpu.empty() || (p.contains("id") && p["id"] == device))
        s.gpu = p["name"].get<std::string>();
    }
  }
  if (auto info = root_.find("distributedInfo"); info != root_.end() && info->is_object()) {
    const std::int64_t rank = int_arg(&*info, "rank"), world = int_arg(&*info, "world_size");
    if (rank >= 0 && rank < (1 << 24)) s.rank = static_cast<int>(rank);
    if (world > 0 && world < (1 << 24)) s.world_size = static_cast<int>(world);
  }
}

TraceSummary Importer::run() {
  collect();
  if (activities_.empty()) {
    throw CalibrationError(
        fmt::format("{}: the trace has no GPU kernels, copies or sets; profile with "
                    "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
                    file_));
  }
  TraceSummary s;
  s.source = file_;
  s.format = "kineto";
  describe_device(s);
  step_classes_.resize(steps_.size());
  step_intervals_.resize(steps_.size());
  index_gpu_steps();
  for (size_t i = 0; i < activities_.size(); ++i) add_activity(s, activities_[i], i);
  finish_steps(s);
  std::map<
      std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
      GemmFigure>
      gemms;
  for (const auto& [op, call] : gemm_calls_) {
    const GemmShape& g = call.first;
    GemmFigure& f = gemms[{op->name, g.dtype, g.batch, g.m, g.n, g.k}];
    f = GemmFigure{op->name, g.dtype, g.batch, g.m, g.n, g.k, f.calls + 1, f.seconds + call.second};
  }
  for (auto& [key, f] : gemms) s.gemms.push_back(f);
  for (auto& [key, f] : collectives_) s.collectives.push_back(f);
  for (auto& [key, f] : copies_) s.copies.push_back(f);
  add_notes(s);
  return s;
}

void Importer::add_notes(const TraceSummary& s) const {
  if (steps_.empty()) {
    notes_.push_back(fmt::format(
        "{}: no ProfilerStep#N annotations (profile with a torch.profiler schedule and call "
        "prof.step() each step); no per-step figures",
        file_));
  } else if (s.activities_outside_steps > 0) {
    notes_.push_back(fmt::format(
        "{}: {} device activit{} launched outside the ProfilerStep#N annotations {} left out "
        "of the per-step figures",
        file_, s.activities_outside_steps, s.activities_outside_steps == 1 ? "y" : "ies",
        s.activities_outside_steps == 1 ? "is" : "are"));
  }
  if (gemm_kernels_without_shape_ > 0) {
    notes_.push_back(fmt::format(
        "{}: {} of {} GEMM kernels have no shape (profile with record_shapes=True); they count "
        "in the gemm time, not in the GEMM rates",
        file_, gemm_kernels_without_shape_, gemm_kernels_));
  }
  if (nccl_kernels_without_size_ > 0) {
    notes_.push_back(fmt::format(
        "{}: {} of {} NCCL kernels have no message size or group size in the trace (PyTorch "
        "records them from 2.1 on); they count in the nccl time, not in the bus bandwidths",
        file_, nccl_kernels_without_size_, nccl_kernels_));
  }
}

}  // namespace

bool looks_like_kineto(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{' &&
         text.find("\"traceEvents\"") != std::string_view::npos;
}

TraceSummary parse_kineto(std::string_view text, const std::string& file,
                          std::vector<std::string>& notes) {
  const json root = parse_trace_json(text, file);
  if (!root.is_object()) {
    throw ConfigError::bad_value(file, "/", json_excerpt(root),
                                 "a JSON object with traceEvents (a Chrome trace)");
  }
  return Importer(root, file, notes).run();
}

}  // namespace loom::calibration
