#include "sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "common/strings.hpp"

namespace loom::sim {

std::string too_many_tasks(std::string_view counted) {
  return fmt::format(
      "the step needs more than {} simulated tasks{}, loom's limit (MAX_ENGINE_TASKS in "
      "common/limits.hpp, docs/limits.md); simulate a smaller step: fewer micro-batches, "
      "layers or simulated GPUs",
      MAX_ENGINE_TASKS, counted.empty() ? "" : fmt::format(" ({})", counted));
}

// The engine's side of the network interface: wakeups and batch completions become events.
class Engine::Host final : public NetworkHost {
 public:
  explicit Host(Engine& engine) : engine_(engine) {}
  void schedule_network_wakeup(SimTime at, std::uint64_t token) override {
    engine_.queue_.push(at, EventKind::NETWORK_WAKEUP, token);
  }
  void batch_done(BatchId id, SimTime at) override {
    engine_.queue_.push(at, EventKind::BATCH_DONE, static_cast<std::uint64_t>(id));
  }
  SimTime next_event_time() const override { return engine_.queue_.next_time(); }

 private:
  Engine& engine_;
};

Engine::Engine(const topo::Cluster& cluster, EngineOptions options)
    : options_(options),
      fabric_(std::make_unique<Fabric>(cluster, options.link_efficiency, options.nccl_tuning)),
      host_(std::make_unique<Host>(*this)),
      network_(make_network(options.network, *fabric_, *host_)) {
  if (!(options.collective_time_scale > 0) || !std::isfinite(options.collective_time_scale)) {
    throw ValidationError("collective_time_scale",
                          fmt::format("collective time scale {} is not a finite number > 0",
                                      options.collective_time_scale));
  }
  network_->set_check_capacity(options.check_capacity);
  network_->set_memo(options.memo);
  network_->set_incremental(options.incremental_rates);
}

Engine::~Engine() = default;

StreamId Engine::add_stream(std::string name, int rank, StreamOrder order) {
  Stream s;
  s.name = std::move(name);
  s.rank = rank;
  s.arrival = order == StreamOrder::ARRIVAL;
  streams_.push_back(std::move(s));
  return static_cast<StreamId>(streams_.size() - 1);
}

void Engine::check_task(TaskId task, const char* what) const {
  if (task < 0 || task >= num_tasks()) {
    throw ValidationError(what,
                          fmt::format("task id {} does not exist (0..{})", task, num_tasks() - 1));
  }
}

void Engine::check_stream(StreamId stream) const {
  if (stream < 0 || stream >= num_streams()) {
    throw ValidationError(
        "stream", fmt::format("stream id {} does not exist (0..{})", stream, num_streams() - 1));
  }
}

TaskId Engine::add_task(std::span<const StreamId> streams, const std::vector<TaskId>& deps,
                        bool compute) {
  if (ran_) throw ValidationError("task", "tasks cannot be added after run()");
  for (TaskId d : deps) check_task(d, "deps");
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const StreamId s = streams[i];
    if (s == NO_STREAM) continue;
    check_stream(s);
    if (streams_[s].arrival && !compute) {
      throw ValidationError("stream", fmt::format("stream '{}' runs tasks in arrival order; it "
                                                  "takes compute tasks only",
                                                  streams_[s].name));
    }
    if (std::find(streams.begin(), streams.begin() + static_cast<std::ptrdiff_t>(i), s) !=
        streams.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw ValidationError("stream", fmt::format("stream '{}' is given twice to one task; a "
                                                  "task holds each stream once",
                                                  streams_[s].name));
    }
  }
  if (static_cast<std::int64_t>(tasks_.size()) >= MAX_ENGINE_TASKS) {
    throw ValidationError("tasks", too_many_tasks());
  }
  Task t;
  t.streams_begin = static_cast<std::uint32_t>(task_streams_.size());
  auto id = static_cast<TaskId>(tasks_.size());
  for (StreamId s : streams) {
    if (s == NO_STREAM) continue;
    task_streams_.push_back(s);
    if (!streams_[s].arrival) streams_[s].queue.push_back(id);  // ARRIVAL: queued when ready
  }
  t.streams_count = static_cast<std::uint32_t>(task_streams_.size() - t.streams_begin);
  tasks_.push_back(t);
  for (TaskId d : deps) add_dependency(d, id);
  return id;
}

TaskId Engine::add_compute(StreamId stream, SimTime duration, std::string label,
                           const std::vector<TaskId>& deps) {
  check_stream(stream);  // NO_STREAM too: a compute task runs on a stream
  if (duration < 0) {
    throw ValidationError("duration",
                          fmt::format("task '{}' has negative duration {} ps", label, duration));
  }
  TaskId id = add_task({&stream, 1}, deps, true);
  tasks_[id].duration = duration;
  labels_.push_back(std::move(label));
  return id;
}

namespace {

void check_streams(const CollectiveSpec& spec) {
  if (!spec.streams.empty() && spec.streams.size() != spec.request.ranks.size()) {
    throw ValidationError("streams",
                          fmt::format("collective '{}' lists {} streams for {} ranks; "
                                      "give one per rank or none",
                                      spec.label, spec.streams.size(), spec.request.ranks.size()));
  }
}

}  // namespace

std::pair<TaskId, TaskId> Engine::add_collective_sequence(const std::vector<CollectiveSpec>& specs,
                                                          const std::vector<TaskId>& deps) {
  if (specs.empty()) throw ValidationError("specs", "a collective sequence needs a collective");
  if (options_.collective_timing == CollectiveTiming::FLOWS) {
    const TaskId first = add_collective(specs.front(), deps);
    TaskId last = first;
    for (size_t i = 1; i < specs.size(); ++i) last = add_collective(specs[i], {last});
    return {first, last};
  }
  SimTime duration = 0;
  for (const CollectiveSpec& spec : specs) {
    check_streams(spec);
    duration = later(duration, frozen_time(spec.request));
  }
  const TaskId id = add_task(specs.front().streams, deps);
  tasks_[id].duration = duration;
  labels_.push_back(specs.front().label);
  if (options_.keep_notes) {
    double bytes = 0;
    for (const CollectiveSpec& spec : specs) bytes += spec.request.bytes;
    keep_note(id, specs.front().request, bytes, static_cast<int>(specs.size()));
  }
  return {id, id};
}

TaskId Engine::add_collective(const CollectiveSpec& spec, const std::vector<TaskId>& deps) {
  check_streams(spec);
  const std::optional<SimTime> measured = measured_time(spec.request);
  TaskId id = 0;
  if (!measured && options_.collective_timing == CollectiveTiming::FLOWS &&
      options_.collective_time_scale == 1.0) {
    id = add_flow_collective(spec, deps);
  } else {
    const SimTime duration = measured ? *measured : frozen_time(spec.request);
    id = add_task(spec.streams, deps);
    tasks_[id].duration = duration;
    labels_.push_back(spec.label);
  }
  if (options_.keep_notes) keep_note(id, spec.request, spec.request.bytes, 1);
  return id;
}

std::optional<SimTime> Engine::measured_time(const CollectiveRequest& req) const {
  if (options_.collective_override == nullptr || req.algorithm != Algorithm::AUTO ||
      !req.concurrent_groups.empty() || req.contention != 1.0 || req.ranks.size() < 2 ||
      options_.network == NetworkMode::IDEAL) {
    return std::nullopt;
  }
  validate_request(fabric_->cluster(), req);  // a measured collective is never lowered
  std::vector<int> nodes;
  for (int rank : req.ranks) nodes.push_back(fabric_->cluster().node_of_rank(rank));
  std::sort(nodes.begin(), nodes.end());
  const auto distinct = std::unique(nodes.begin(), nodes.end()) - nodes.begin();
  const std::optional<double> seconds = options_.collective_override->seconds(
      req.op, static_cast<int>(req.ranks.size()), static_cast<int>(distinct), req.bytes);
  if (!seconds) return std::nullopt;
  return to_sim_time(*seconds);
}

SimTime Engine::frozen_time(const CollectiveRequest& req) {
  if (req.ranks.size() < 2 || req.bytes <= 0 || options_.network == NetworkMode::IDEAL) return 0;
  if (const std::optional<SimTime> measured = measured_time(req)) return *measured;
  FrozenKey& key = frozen_scratch_;
  key.op = req.op;
  key.algorithm = req.algorithm;
  key.bytes = req.bytes;
  key.root = req.root;
  key.pipeline_chunks = req.pipeline_chunks;
  key.contention = req.contention;
  key.ranks.assign(req.ranks.begin(), req.ranks.end());
  key.concurrent_groups.resize(req.concurrent_groups.size());
  for (size_t i = 0; i < req.concurrent_groups.size(); ++i)
    key.concurrent_groups[i].assign(req.concurrent_groups[i].begin(),
                                    req.concurrent_groups[i].end());
  auto it = frozen_.find(key);
  if (it != frozen_.end()) return it->second;
  SimTime t = estimate_schedule(
      *fabric_, plan_collective(*fabric_, req, options_.cost, options_.field_names));
  if (options_.collective_time_scale != 1.0)
    t = static_cast<SimTime>(std::llround(static_cast<double>(t) * options_.collective_time_scale));
  frozen_.emplace(key, t);
  return t;
}

TaskId Engine::add_flow_collective(const CollectiveSpec& spec, const std::vector<TaskId>& deps) {
  CollectiveSchedule s =
      plan_collective(*fabric_, spec.request, options_.cost, options_.field_names);
  const bool reduced = s.reduced();
  const TaskId id = add_scheduled(std::move(s), spec.streams, spec.label, deps);
  if (reduced) comms_.back().request = std::make_shared<const CollectiveRequest>(spec.request);
  return id;
}

void Engine::set_routes(Comm& comm) {
  // Phases with the same pattern and overhead are identical batches: they share a memo class
  // (the index of the first such phase). Schedules have few distinct pairs.
  const auto& phases = comm.schedule.phases;
  comm.memo_class.resize(phases.size());
  std::map<std::pair<std::int32_t, SimTime>, std::uint32_t> first;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    auto [it, inserted] = first.emplace(std::make_pair(phases[i].pattern, phases[i].overhead),
                                        static_cast<std::uint32_t>(i));
    comm.memo_class[i] = it->second;
  }
  comm.routes = comm.schedule.routes;  // a flow class's own; else each flow's cheapest
  if (!comm.schedule.has_classes())
    for (const FlowSpec& f : comm.schedule.flows)
      comm.routes.push_back(fabric_->route(f.src, f.dst));
}

TaskId Engine::add_scheduled(CollectiveSchedule schedule, std::span<const StreamId> streams,
                             std::string label, const std::vector<TaskId>& deps) {
  Comm comm;
  comm.schedule = std::move(schedule);
  set_routes(comm);
  TaskId id = add_task(streams, deps);
  comm.task = id;
  tasks_[id].comm = static_cast<std::int32_t>(comms_.size());
  comms_.push_back(std::move(comm));
  labels_.push_back(std::move(label));
  return id;
}

TaskId Engine::add_transfer(const TransferSpec& spec, const std::vector<TaskId>& deps) {
  if (spec.src_vertex >= 0 || spec.dst_vertex >= 0) {
    const auto vertices = static_cast<topo::VertexId>(fabric_->cluster().vertices().size());
    for (topo::VertexId v : {spec.src_vertex, spec.dst_vertex}) {
      if (v < 0 || v >= vertices) {
        throw ValidationError("vertex", fmt::format("transfer '{}': vertex {} does not exist "
                                                    "(0..{}); give both endpoints",
                                                    spec.label, v, vertices - 1));
      }
    }
    if (!(spec.bytes >= 0) || !std::isfinite(spec.bytes)) {
      throw ValidationError("bytes", fmt::format("transfer '{}' of {} bytes; give a size >= 0",
                                                 spec.label, spec.bytes));
    }
    // One plain flow: a device-to-device copy or an RDMA/TCP message, not an NCCL call.
    CollectiveSchedule s;
    s.pattern_begin.push_back(0);
    s.algorithm = Algorithm::DIRECT;
    if (spec.src_vertex != spec.dst_vertex && spec.bytes > 0) {
      s.flows.push_back({spec.src_vertex, spec.dst_vertex, spec.bytes});
      s.pattern_begin.push_back(1);
      s.phases.push_back({0, 0});
    }
    const StreamId streams[2] = {spec.src_stream, spec.dst_stream};
    return add_scheduled(std::move(s), streams, spec.label, deps);
  }
  CollectiveSpec c;
  c.request.op = CollectiveOp::SEND_RECV;
  c.request.ranks = {spec.src_rank, spec.dst_rank};
  c.request.bytes = spec.bytes;
  c.request.root = 0;
  c.request.algorithm = Algorithm::DIRECT;
  c.streams = {spec.src_stream, spec.dst_stream};
  c.label = spec.label;
  const TaskId id = add_flow_collective(c, deps);
  if (options_.keep_notes) keep_note(id, c.request, spec.bytes, 1);
  return id;
}

void Engine::add_contention(StreamId victim, StreamId contender, double slowdown) {
  if (ran_) throw ValidationError("contention", "contention cannot be added after run()");
  check_stream(victim);
  check_stream(contender);
  if (victim == contender || !(slowdown >= 1.0)) {
    throw ValidationError("contention",
                          fmt::format("stream '{}' cannot be slowed {}x by stream '{}'",
                                      streams_[victim].name, slowdown, streams_[contender].name));
  }
  Stream& v = streams_[victim];
  v.slowdown = std::max(v.slowdown, slowdown);
  auto& list = streams_[contender].victims;
  if (std::find(list.begin(), list.end(), victim) == list.end()) list.push_back(victim);
}

// (Re)schedules the finish of the compute task running on a slowed stream from its work
// left and its current rate; earlier finish events of the task become stale.
void Engine::schedule_contended(StreamId victim) {
  Stream& v = streams_[victim];
  const double rate_ps = v.busy_contenders > 0 ? v.slowdown : 1.0;
  const double left_ps = std::max(0.0, v.work_left) * rate_ps;
  if (!(left_ps < 0x1p63)) throw_beyond_clock();
  const auto left = static_cast<SimTime>(std::llround(left_ps));
  ++v.version;
  queue_.push(later(now_, left), EventKind::TASK_DONE,
              static_cast<std::uint64_t>(v.running) | (std::uint64_t{v.version} << 32));
}

// A contending stream became busy or idle: re-times the compute tasks it slows.
void Engine::set_contenders_busy(StreamId contender, bool busy) {
  for (StreamId victim : streams_[contender].victims) {
    Stream& v = streams_[victim];
    const bool was_slow = v.busy_contenders > 0;
    v.busy_contenders += busy ? 1 : -1;
    if (was_slow == (v.busy_contenders > 0) || v.running < 0) continue;
    v.work_left -= static_cast<double>(now_ - v.since) / (was_slow ? v.slowdown : 1.0);
    v.since = now_;
    schedule_contended(victim);
  }
}

void Engine::add_dependency(TaskId before, TaskId after) {
  if (ran_) throw ValidationError("dependency", "dependencies cannot be added after run()");
  check_task(before, "deps");
  check_task(after, "deps");
  edges_.emplace_back(before, after);
  ++tasks_[after].pending;
}

void Engine::try_start(TaskId id) {
  Task& t = tasks_[id];
  if (t.start >= 0 || t.pending > 0) return;
  if (t.streams_count == 1 && streams_[task_streams_[t.streams_begin]].arrival) {
    Stream& s = streams_[task_streams_[t.streams_begin]];
    if (s.busy || s.head < s.queue.size()) {  // behind the tasks that became ready earlier
      if (!t.queued) s.queue.push_back(id);
      t.queued = true;
      return;
    }
    start_task(id);
    return;
  }
  for (std::uint32_t i = 0; i < t.streams_count; ++i) {
    const Stream& s = streams_[task_streams_[t.streams_begin + i]];
    if (s.busy || s.queue[s.head] != id) return;
  }
  start_task(id);
}

void Engine::start_task(TaskId id) {
  Task& t = tasks_[id];
  t.start = now_;
  for (std::uint32_t i = 0; i < t.streams_count; ++i) {
    Stream& s = streams_[task_streams_[t.streams_begin + i]];
    s.busy = true;
    if (!s.arrival || t.queued) ++s.head;  // an ARRIVAL task started at once was never queued
  }
  for (std::uint32_t i = 0; i < t.streams_count; ++i) {
    const StreamId sid = task_streams_[t.streams_begin + i];
    if (!streams_[sid].victims.empty()) set_contenders_busy(sid, true);
  }
  if (t.comm < 0) {  // compute
    const StreamId sid = t.streams_count > 0 ? task_streams_[t.streams_begin] : NO_STREAM;
    if (sid != NO_STREAM && streams_[sid].slowdown > 1.0) {
      Stream& v = streams_[sid];
      v.running = id;
      v.work_left = static_cast<double>(t.duration);
      v.since = now_;
      schedule_contended(sid);
      return;
    }
    queue_.push(later(now_, t.duration), EventKind::TASK_DONE, static_cast<std::uint64_t>(id));
    return;
  }
  Comm& c = comms_[t.comm];
  c.phase = 0;
  if (c.schedule.phases.empty()) {
    queue_.push(later(now_, c.schedule.base_latency), EventKind::TASK_DONE,
                static_cast<std::uint64_t>(id));
  } else {
    start_phase(t.comm);
  }
}

void Engine::start_phase(std::int32_t comm) {
  const Comm& c = comms_[comm];
  const auto& phase = c.schedule.phases[static_cast<size_t>(c.phase)];
  BatchSpec batch = c.schedule.batch(phase.pattern);
  batch.routes = c.routes.data() + c.schedule.pattern_begin[static_cast<size_t>(phase.pattern)];
  batch.overhead = phase.overhead;
  // Memo key (0 = none): the collective and the phase's memo class.
  batch.memo_key =
      (static_cast<std::uint64_t>(comm + 1) << 32) | c.memo_class[static_cast<size_t>(c.phase)];
  network_->start_batch(now_, batch, comm);
}

void Engine::on_batch_done(std::int32_t comm) {
  Comm& c = comms_[comm];
  if (++c.phase < static_cast<std::int32_t>(c.schedule.phases.size())) {
    start_phase(comm);
    return;
  }
  queue_.push(later(now_, c.schedule.base_latency), EventKind::TASK_DONE,
              static_cast<std::uint64_t>(c.task));
}

void Engine::finish_task(TaskId id) {
  Task& t = tasks_[id];
  t.end = now_;
  ++finished_;
  makespan_ = std::max(makespan_, now_);
  for (std::uint32_t i = 0; i < t.streams_count; ++i) {
    Stream& s = streams_[task_streams_[t.streams_begin + i]];
    s.busy = false;
    s.busy_time += t.end - t.start;
    if (s.running == id) s.running = -1;
  }
  for (std::uint32_t i = 0; i < t.streams_count; ++i) {
    const StreamId sid = task_streams_[t.streams_begin + i];
    if (!streams_[sid].victims.empty()) set_contenders_busy(sid, false);
  }
  // An ARRIVAL stream serves the task that has waited longest before newly ready ones.
  if (t.streams_count == 1) {
    const Stream& s = streams_[task_streams_[t.streams_begin]];
    if (s.arrival && s.head < s.queue.size()) start_task(s.queue[s.head]);
  }
  for (auto i = succ_begin_[id]; i < succ_begin_[id + 1]; ++i) {
    TaskId next = succ_[i];
    --tasks_[next].pending;
    try_start(next);
  }
  for (std::uint32_t i = 0; i < t.streams_count; ++i) {
    const Stream& s = streams_[task_streams_[t.streams_begin + i]];
    if (!s.arrival && s.head < s.queue.size()) try_start(s.queue[s.head]);
  }
}

void Engine::keep_note(TaskId id, const CollectiveRequest& request, double bytes, int count) {
  TaskNote n;
  n.op = request.op;
  n.bytes = bytes;
  n.group_size = static_cast<int>(request.ranks.size());
  n.count = count;
  const auto shown = std::min<std::size_t>(request.ranks.size(), TaskNote::MAX_NOTE_RANKS);
  n.ranks.assign(request.ranks.begin(), request.ranks.begin() + static_cast<std::ptrdiff_t>(shown));
  notes_[id] = std::move(n);
}

const TaskNote* Engine::note(TaskId task) const {
  check_task(task, "note");
  const auto it = notes_.find(task);
  return it == notes_.end() ? nullptr : &it->second;
}

std::span<const TaskId> Engine::dependants(TaskId task) const {
  check_task(task, "dependants");
  if (!ran_) return {};
  return {succ_.data() + succ_begin_[task], succ_begin_[task + 1] - succ_begin_[task]};
}

void Engine::run() {
  if (ran_) throw ValidationError("run", "an engine runs once; build a new one to run again");
  ran_ = true;
  // Successor lists in CSR form: one allocation, no per-event lookups.
  succ_begin_.assign(tasks_.size() + 1, 0);
  for (const auto& [a, b] : edges_) ++succ_begin_[a + 1];
  for (size_t i = 1; i < succ_begin_.size(); ++i) succ_begin_[i] += succ_begin_[i - 1];
  succ_.resize(edges_.size());
  std::vector<std::uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
  for (const auto& [a, b] : edges_) succ_[fill[a]++] = b;
  // A reduced collective (flow classes, concurrent groups left out) is exact on a network it
  // has to itself; beside other traffic it runs whole, pair by pair, with the algorithm and
  // protocol already chosen (the reduction's analytical time is the whole's).
  CostOptions pairs = options_.cost;
  pairs.flow_classes = pairs.twins_once = false;
  for (Comm& c : comms_) {
    if (!c.request || comms_.size() == 1) continue;
    c.schedule = build_schedule(*fabric_, *c.request, c.schedule.algorithm, c.schedule.protocol,
                                pairs, options_.field_names);
    c.request.reset();
    set_routes(c);
  }

  for (TaskId id = 0; id < num_tasks(); ++id) try_start(id);
  while (!queue_.empty()) {
    Event e = queue_.pop();
    now_ = e.time;
    // A power of two: the check costs a mask per event.
    if ((++events_ & 0x3fff) == 0 && options_.progress)
      options_.progress(double(finished_) / double(tasks_.size()));
    switch (e.kind) {
      case EventKind::TASK_DONE: {
        const auto id = static_cast<TaskId>(e.payload & 0xffffffffu);
        const auto version = static_cast<std::uint32_t>(e.payload >> 32);
        if (version != 0 && version != streams_[task_streams_[tasks_[id].streams_begin]].version)
          break;  // a slowed task re-timed since this event was scheduled
        finish_task(id);
        break;
      }
      case EventKind::BATCH_DONE:
        on_batch_done(static_cast<std::int32_t>(e.payload));
        break;
      case EventKind::NETWORK_WAKEUP:
        network_->on_wakeup(now_, e.payload);
        break;
    }
  }
  if (options_.progress) options_.progress(1.0);
  std::vector<std::string> stuck;
  int count = 0;
  for (TaskId id = 0; id < num_tasks(); ++id) {
    if (tasks_[id].end >= 0) continue;
    if (++count <= 3) stuck.push_back(fmt::format("'{}'", labels_[id]));
  }
  if (count > 0) {
    const std::string list = join(stuck, ", ");
    // The caller built an impossible task graph: a bug in the caller (the planner), not
    // bad user input, so it exits as an internal error.
    throw InternalError(
        fmt::format("deadlock: {} task(s) can never start (e.g. {}); "
                    "check dependency cycles and that every stream "
                    "issues shared collectives in the same order",
                    count, list));
  }
}

SimTime Engine::start(TaskId task) const {
  check_task(task, "task");
  return tasks_[task].start;
}

SimTime Engine::finish(TaskId task) const {
  check_task(task, "task");
  return tasks_[task].end;
}

const std::string& Engine::label(TaskId task) const {
  check_task(task, "task");
  return labels_[task];
}

const std::string& Engine::stream_name(StreamId stream) const {
  return streams_.at(stream).name;
}
int Engine::stream_rank(StreamId stream) const {
  return streams_.at(stream).rank;
}
SimTime Engine::busy_time(StreamId stream) const {
  return streams_.at(stream).busy_time;
}

std::vector<Slice> Engine::slices() const {
  std::vector<Slice> out;
  for (TaskId id = 0; id < num_tasks(); ++id) {
    const Task& t = tasks_[id];
    if (t.end < 0) continue;
    for (std::uint32_t i = 0; i < t.streams_count; ++i)
      out.push_back({task_streams_[t.streams_begin + i], id, t.start, t.end});
  }
  std::sort(out.begin(), out.end(), [](const Slice& a, const Slice& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.stream != b.stream) return a.stream < b.stream;
    return a.task < b.task;
  });
  return out;
}

const CollectiveSchedule& Engine::schedule(TaskId task) const {
  check_task(task, "task");
  if (tasks_[task].comm < 0) {
    throw ValidationError(
        "task", fmt::format("task '{}' is a compute task; it has no schedule", labels_[task]));
  }
  return comms_[tasks_[task].comm].schedule;
}

}  // namespace loom::sim
