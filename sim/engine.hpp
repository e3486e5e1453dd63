#pragma once
// The discrete-event engine: tasks with dependencies on serial streams, and a network.
//
// Model. A *stream* is a serial resource (a CUDA stream: one per GPU for compute, several
// for communication). Tasks are issued to streams in the order they are added (FIFO, as a
// CUDA stream executes): a task starts when all its dependencies have finished AND it is at
// the head of every stream it uses AND those streams are idle. Streams run in parallel.
// Task kinds:
//  - compute: a fixed duration on one stream;
//  - collective: one task from the caller's view, occupying one stream per participating
//    rank (or none), expanded into phases of flows on the network (sim/collectives.hpp);
//  - transfer: point-to-point bytes from one rank to another. Blocking send/recv: give both
//    streams. isend/irecv: give no stream (it starts when its dependencies are done) and
//    "wait" by making later tasks depend on it. A transfer may also name its endpoints as
//    devices (any vertex: a GPU, a host CPU): one plain flow over the route, no NCCL costs.
// Stream order (add_stream): a FIFO stream runs its tasks in issue order; an ARRIVAL stream
// (a server's request queue) runs them in the order they become ready (ties: the order
// their last dependency finished in, then issue order). ARRIVAL streams take compute tasks
// only, each holding that one stream.
// Contention (add_contention): a compute stream may be slowed while another stream (a
// communication stream whose kernels take SMs) is busy; its compute task then progresses
// at 1/slowdown of its rate, re-timed whenever a contending stream starts or stops.
// Time is integer picoseconds; events are ordered by (time, insertion sequence), so a run is
// deterministic. run() throws InternalError on a deadlock (tasks that can never start,
// e.g. two collectives issued in opposite orders on two streams).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "sim/collectives.hpp"
#include "sim/event_queue.hpp"
#include "sim/fabric.hpp"
#include "sim/network.hpp"
#include "sim/sim_time.hpp"
#include "topologies/cluster.hpp"

namespace loom::sim {

using TaskId = std::int32_t;
using StreamId = std::int32_t;
inline constexpr StreamId NO_STREAM = -1;

/// In which order a stream runs its tasks (see file comment).
enum class StreamOrder { FIFO, ARRIVAL };

/// How add_collective times a collective. Both go through the same lowering
/// (plan_collective: algorithm, protocol, phases of flows on routes).
enum class CollectiveTiming {
  /// The phases run as flows on the network, sharing links with all other traffic.
  FLOWS,
  /// The lowered schedule's time on an otherwise idle network (its concurrent_groups'
  /// flows included, estimate_schedule) is computed once per distinct request and the task
  /// holds its streams for that long, without flows: the flow-level cost frozen, for speed
  /// when thousands of identical collectives run in one step. Zero on the IDEAL network.
  FROZEN,
};

/// Measured collective times (a calibration profile) that stand in for the lowered schedule's
/// time. sim/ defines only this hook; the profile and its importers live in calibration/.
class CollectiveTimeOverride {
 public:
  virtual ~CollectiveTimeOverride() = default;
  /// The measured time of `op` on a group of `group_size` ranks spread over `nodes` nodes for
  /// `bytes` (nccl-tests "size"), in seconds; nullopt where the profile has no data for it.
  virtual std::optional<double> seconds(CollectiveOp op, int group_size, int nodes,
                                        double bytes) const = 0;
};

/// Engine settings.
struct EngineOptions {
  NetworkMode network = NetworkMode::FLOW;
  /// Link payload efficiency (NVLink 128-byte packets etc.); line_rate() for raw alpha-beta.
  LinkEfficiency link_efficiency = {};
  /// Calibrated scales of NCCL's latency and NVLS constants (a fitted network profile).
  NcclTuning nccl_tuning = {};
  /// NCCL protocol latencies and efficiencies on collectives and transfers.
  CostOptions cost = {};
  /// Flow mode: assert-style bookkeeping of the maximum link load (for tests).
  bool check_capacity = false;
  /// Flow mode: reuse the time of a repeated step on an otherwise idle network.
  bool memo = true;
  /// Flow mode: re-fill only the components of the flow-link sharing graph that a started
  /// or drained flow touches (false: every component at every solve instant; same result).
  bool incremental_rates = true;
  /// How collectives (not point-to-point transfers, which always run as flows) are timed.
  CollectiveTiming collective_timing = CollectiveTiming::FLOWS;
  /// How errors about a collective request spell its fields (the CLI: its flags).
  FieldNames field_names = {};
  /// Measured times (not owned; must outlive the engine). A collective it covers (algorithm
  /// AUTO, no concurrent groups, contention 1: what a measurement of the group alone shows)
  /// holds its streams for the measured time instead of running flows or a frozen estimate.
  const CollectiveTimeOverride* collective_override = nullptr;
  /// Multiplies the modelled time of every collective (a fitted communication factor,
  /// `loom calibrate fit`); measured times and point-to-point transfers keep theirs. Not 1:
  /// collectives are timed FROZEN (a scaled time cannot run as flows).
  double collective_time_scale = 1.0;
  /// Called during run() with the fraction of tasks finished so far, in [0, 1], at most every
  /// few thousand events and once at the end (for a progress display); empty: not called.
  std::function<void(double)> progress;
  /// Record each collective's and transfer's op, bytes and group (Engine::note), for timelines
  /// that label their slices; off: nothing recorded.
  bool keep_notes = false;
};

/// What a collective or transfer task moved, for timelines (EngineOptions::keep_notes).
struct TaskNote {
  CollectiveOp op = CollectiveOp::ALL_REDUCE;
  double bytes = 0;        ///< nccl-tests "size" (summed over a frozen sequence)
  int group_size = 0;      ///< ranks in the group
  int count = 1;           ///< collectives in the task (a frozen sequence holds several)
  std::vector<int> ranks;  ///< the group's first MAX_NOTE_RANKS ranks, in group order
  static constexpr int MAX_NOTE_RANKS = 16;
};

/// A collective task (see CollectiveRequest for the fields' meaning).
struct CollectiveSpec {
  CollectiveRequest request;
  /// One stream per rank of request.ranks (same order), NO_STREAM entries allowed; empty:
  /// the collective occupies no stream.
  std::vector<StreamId> streams;
  std::string label;
};

/// A point-to-point transfer task.
struct TransferSpec {
  int src_rank = 0;
  int dst_rank = 0;
  double bytes = 0;
  StreamId src_stream = NO_STREAM;  ///< sender's stream (NO_STREAM: non-blocking isend)
  StreamId dst_stream = NO_STREAM;  ///< receiver's stream (NO_STREAM: non-blocking irecv)
  std::string label;
  /// Device endpoints: when both are set (>= 0) they replace the ranks' GPUs and the
  /// transfer is one plain flow (path latency + bytes at the flow's rate; no NCCL costs).
  /// The same vertex at both ends takes no time.
  topo::VertexId src_vertex = -1;
  topo::VertexId dst_vertex = -1;
};

/// One task's execution on one stream, for timelines.
struct Slice {
  StreamId stream = 0;
  TaskId task = 0;
  SimTime start = 0;  ///< picoseconds
  SimTime end = 0;    ///< picoseconds
};

/// The error message of a step over MAX_ENGINE_TASKS (common/limits.hpp), with `counted`
/// after the count when not empty (how the count was found), for ValidationError on "tasks".
std::string too_many_tasks(std::string_view counted = {});

/// The engine (see file comment).
class Engine {
 public:
  /// Keeps a reference to `cluster`, which must outlive the engine.
  explicit Engine(const topo::Cluster& cluster, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Adds a serial stream running its tasks in `order`; `rank` is informational (-1: none).
  /// Returns its id.
  StreamId add_stream(std::string name, int rank = -1, StreamOrder order = StreamOrder::FIFO);
  /// Adds a compute task of `duration` picoseconds on `stream`. Throws ValidationError on an
  /// unknown stream, a negative duration or an unknown dependency.
  TaskId add_compute(StreamId stream, SimTime duration, std::string label,
                     const std::vector<TaskId>& deps = {});
  /// Adds a collective; lowers it now (resolving algorithm "auto") and times it as
  /// EngineOptions::collective_timing says. Throws ValidationError for a bad group, algorithm
  /// or stream list.
  TaskId add_collective(const CollectiveSpec& spec, const std::vector<TaskId>& deps = {});
  /// Adds collectives that run back to back on one group and its streams (a layer's
  /// tensor-parallel all-reduces), each `specs[i]` after the one before; the first waits for
  /// `deps`. FLOWS: one collective task each. FROZEN: one task holding the streams for the
  /// sum of their frozen times (fewer tasks when thousands of GPUs are simulated). Returns
  /// the first and last task; the ids in between are the sequence's. Throws as
  /// add_collective; an empty `specs` is a ValidationError.
  std::pair<TaskId, TaskId> add_collective_sequence(const std::vector<CollectiveSpec>& specs,
                                                    const std::vector<TaskId>& deps = {});
  /// Picoseconds a collective takes under CollectiveTiming::FROZEN (0 for fewer than two
  /// ranks, no bytes, or the IDEAL network); memoised per distinct request.
  SimTime frozen_time(const CollectiveRequest& request);
  /// Picoseconds EngineOptions::collective_override gives `request` (see there), nullopt when
  /// there is no override or it has no data for the request.
  std::optional<SimTime> measured_time(const CollectiveRequest& request) const;
  /// Adds a point-to-point transfer (see TransferSpec). Throws ValidationError on bad ranks
  /// or vertices, or a stream of StreamOrder::ARRIVAL.
  TaskId add_transfer(const TransferSpec& spec, const std::vector<TaskId>& deps = {});
  /// Makes compute tasks on `victim` run `slowdown` (>= 1) times slower while any task runs
  /// on `contender` (several contenders: the largest slowdown, not compounded). Throws
  /// ValidationError on unknown streams, a stream contending with itself or slowdown < 1.
  void add_contention(StreamId victim, StreamId contender, double slowdown);
  /// Makes `after` wait for `before`. Throws ValidationError on unknown ids or after run().
  void add_dependency(TaskId before, TaskId after);

  /// Runs every task to completion. Throws InternalError on a deadlock; may run once.
  void run();

  int num_tasks() const { return static_cast<int>(tasks_.size()); }
  int num_streams() const { return static_cast<int>(streams_.size()); }
  /// Start time of a task in picoseconds (after run()).
  SimTime start(TaskId task) const;
  /// Finish time of a task in picoseconds (after run()).
  SimTime finish(TaskId task) const;
  /// Latest finish time over all tasks, picoseconds.
  SimTime makespan() const { return makespan_; }
  const std::string& label(TaskId task) const;
  const std::string& stream_name(StreamId stream) const;
  int stream_rank(StreamId stream) const;
  /// Executed slices in order of start (then stream), one per task per stream it used.
  std::vector<Slice> slices() const;
  /// Total time a stream was running tasks, picoseconds.
  SimTime busy_time(StreamId stream) const;
  /// The lowered schedule of a collective or transfer task (algorithm, protocol, phases);
  /// throws ValidationError for a compute task.
  const CollectiveSchedule& schedule(TaskId task) const;
  /// What collective or transfer task `task` moved; null for compute tasks or when
  /// EngineOptions::keep_notes is off.
  const TaskNote* note(TaskId task) const;
  /// The tasks that waited for `task` (after run()), in the order their dependencies were added.
  std::span<const TaskId> dependants(TaskId task) const;
  /// Events processed by run().
  std::int64_t events_processed() const { return events_; }
  const NetworkStats& network_stats() const { return network_->stats(); }
  Fabric& fabric() { return *fabric_; }

 private:
  struct Task {
    SimTime duration = 0;
    SimTime start = -1;
    SimTime end = -1;
    std::uint32_t streams_begin = 0;
    std::uint32_t streams_count = 0;
    std::int32_t pending = 0;  // unfinished dependencies
    std::int32_t comm = -1;    // index into comms_; -1 for a compute task
    bool queued = false;       // waiting in an ARRIVAL stream's ready queue
  };
  struct Stream {
    std::string name;
    int rank = -1;
    std::vector<TaskId> queue;  // FIFO: issue order; ARRIVAL: ready order
    std::size_t head = 0;
    bool arrival = false;  // StreamOrder::ARRIVAL
    bool busy = false;
    SimTime busy_time = 0;
    // Contention: the streams this one slows while busy; as a victim, its slowdown, how
    // many of its contenders are busy, and its running compute task's progress (work left
    // in full-speed picoseconds since `since`; `version` tags its live finish event).
    std::vector<StreamId> victims;
    double slowdown = 1.0;
    int busy_contenders = 0;
    TaskId running = -1;
    double work_left = 0;
    SimTime since = 0;
    std::uint32_t version = 0;
  };
  struct Comm {
    CollectiveSchedule schedule;
    std::vector<std::uint32_t> memo_class;  // per phase: first phase with its pattern+overhead
    std::vector<RouteRef> routes;           // per schedule flow: its route (looked up once)
    /// A reduced schedule's (CollectiveSchedule::reduced) request, to lower it whole when it
    /// may share the network (run()).
    std::shared_ptr<const CollectiveRequest> request;
    TaskId task = 0;
    std::int32_t phase = 0;
  };
  class Host;

  TaskId add_task(std::span<const StreamId> streams, const std::vector<TaskId>& deps,
                  bool compute = false);
  TaskId add_flow_collective(const CollectiveSpec& spec, const std::vector<TaskId>& deps);
  TaskId add_scheduled(CollectiveSchedule schedule, std::span<const StreamId> streams,
                       std::string label, const std::vector<TaskId>& deps);
  void check_task(TaskId task, const char* what) const;
  void check_stream(StreamId stream) const;
  void try_start(TaskId task);
  void start_task(TaskId task);
  void finish_task(TaskId task);
  void schedule_contended(StreamId victim);
  void set_contenders_busy(StreamId contender, bool busy);
  void start_phase(std::int32_t comm);
  void set_routes(Comm& comm);
  void on_batch_done(std::int32_t comm);

  EngineOptions options_;
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<Network> network_;
  EventQueue queue_;
  std::vector<Task> tasks_;
  std::vector<std::string> labels_;
  std::vector<StreamId> task_streams_;
  std::vector<Stream> streams_;
  std::vector<Comm> comms_;
  // FROZEN timing's memo: every field of a request that changes its schedule.
  struct FrozenKey {
    CollectiveOp op{};
    Algorithm algorithm{};
    double bytes = 0;
    int root = 0;
    int pipeline_chunks = 0;
    double contention = 0;
    std::vector<int> ranks;
    std::vector<std::vector<int>> concurrent_groups;
    auto operator<=>(const FrozenKey&) const = default;
  };
  std::map<FrozenKey, SimTime> frozen_;
  FrozenKey frozen_scratch_;  // reused lookup key: no allocation per memo hit
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::map<TaskId, TaskNote> notes_;  // EngineOptions::keep_notes
  void keep_note(TaskId id, const CollectiveRequest& request, double bytes, int count);
  std::vector<std::uint32_t> succ_begin_;
  std::vector<TaskId> succ_;
  SimTime now_ = 0;
  SimTime makespan_ = 0;
  std::int64_t events_ = 0;
  std::int64_t finished_ = 0;  // tasks finished, for EngineOptions::progress
  bool ran_ = false;
};

}  // namespace loom::sim
