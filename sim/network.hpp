#pragma once
// The network behind one narrow interface. The engine hands it *batches*: a set of flows
// (vertex to vertex, payload bytes) that start together and complete as a unit (one step
// of a collective, or one point-to-point transfer). The network reports back through the
// typed NetworkHost interface. Three modes:
//  - flow: flow-level simulation. Every flow follows its routed path; concurrent flows
//    share each link max-min fairly (progressive filling); at each instant where flows
//    start or drain, rates are recomputed incrementally: only the connected components of
//    the flow-link sharing graph that a started or drained flow touches are re-filled (the
//    others' rates are provably unchanged); each flow is delivered its path latency after
//    it drains.
//  - analytical: alpha-beta per batch, contention from the batch's own load on each link
//    (identical concurrent groups are charged by adding their flows to the batch); other
//    batches are ignored, so a batch's time is a pure function of its contents (memoised).
//  - ideal: infinite bandwidth, zero latency.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/fabric.hpp"
#include "sim/sim_time.hpp"

namespace loom::sim {

/// One flow of a batch: payload bytes from vertex `src` to vertex `dst`.
struct FlowSpec {
  topo::VertexId src = 0;
  topo::VertexId dst = 0;
  double bytes = 0;  ///< payload bytes
  /// Ceiling on this flow's payload rate in bytes per picosecond (0: none), e.g. NCCL's LL
  /// bandwidth cap shared among a rank's flows. The network applies it on top of link sharing.
  double max_rate_Bpps = 0;
  /// Identical flows this one stands for (>= 1): `count` flows on the same route with the
  /// same bytes and ceiling, which max-min fair sharing gives the same rate, so one entry
  /// with their count shares each link as they would (a symmetric all-to-all's many flows
  /// between one pair of vertices; see collective_direct.cpp).
  std::int32_t count = 1;
  /// Like copies of this entry elsewhere in the cluster (>= 1), each on links like its own
  /// and loaded like them: a flow class of a symmetric collective (collective_classes.cpp)
  /// costed once on one representative node. Only the tallies see it (count x copies flows
  /// delivered, all tallied to `dst`); rates and times are the entry's own.
  std::int32_t copies = 1;
};

using BatchId = std::int32_t;

/// A batch of flows that start together and complete as a unit.
/// The flows must stay valid until the batch completes.
struct BatchSpec {
  const FlowSpec* flows = nullptr;
  std::size_t count = 0;
  double wire_factor = 1.0;    ///< wire bytes per payload byte (protocol efficiency, contention)
  SimTime overhead = 0;        ///< fixed time added after the last delivery (protocol step latency)
  std::uint64_t memo_key = 0;  ///< identical contents share a key (0: none); enables reuse
  /// True: each flow is delivered its path latency after it drains. False: the overhead is
  /// the whole step latency, wire included (NCCL's hwLat), and flows deliver as they drain.
  bool path_latency = true;
  /// Optional: the flows' routes, as Fabric::route gives them, one per flow (nullptr: the
  /// network looks each one up). Saves a hash lookup per flow on repeated steps. When given,
  /// the flow mode also caches the batch's component structure under (routes, flows): both
  /// arrays must then stay valid and unchanged for the network's lifetime (as the engine's
  /// lowered schedules do).
  const RouteRef* routes = nullptr;
};

/// What a network needs from the engine that drives it.
class NetworkHost {
 public:
  /// Asks for on_wakeup(token) at simulated time `at` (>= now).
  virtual void schedule_network_wakeup(SimTime at, std::uint64_t token) = 0;
  /// Reports that batch `id` completes at time `at` (>= now).
  virtual void batch_done(BatchId id, SimTime at) = 0;
  /// Time of the earliest pending event (INT64 max when none).
  virtual SimTime next_event_time() const = 0;

 protected:
  ~NetworkHost() = default;
};

/// The network modes, registered by name.
enum class NetworkMode { FLOW, ANALYTICAL, IDEAL };
/// The mode of a name ("flow", "analytical", "ideal"); throws ValidationError naming
/// `field` and listing the valid names.
NetworkMode parse_network_mode(std::string_view name, std::string_view field = "network");
std::string to_string(NetworkMode mode);
/// The registered names with one-line descriptions, in a fixed order.
const std::vector<std::pair<std::string, std::string>>& network_modes();

/// Counters every mode keeps (for conservation and capacity checks).
struct NetworkStats {
  /// Payload bytes delivered to each vertex (a flow class's copies, FlowSpec::copies, all
  /// to its representative's destination).
  std::vector<double> received_bytes;
  double delivered_bytes = 0;          ///< total payload bytes delivered
  std::int64_t flows = 0;              ///< flows delivered
  std::int64_t rate_solves = 0;        ///< flow mode: instants at which rates were re-solved
  std::int64_t components_solved = 0;  ///< flow mode: connected components re-filled
  std::int64_t flows_resolved = 0;     ///< flow mode: flows re-filled, summed over solves
  std::int64_t active_at_solves = 0;   ///< flow mode: active flows, summed over solves
  std::int64_t memo_hits = 0;          ///< batches whose time was reused
  /// Flow entries added to the byte counters: the bookkeeping's cost (a memoised batch's
  /// repeats are added once per distinct batch, not once per repeat).
  std::int64_t tallied = 0;
  double max_link_load = 0;  ///< flow mode, when checking: max (sum of rates / capacity)
};

/// The network interface (see file comment).
class Network {
 public:
  virtual ~Network() = default;
  virtual NetworkMode mode() const = 0;
  /// Starts batch `id` at time `now`; the host's batch_done fires later (or at `now`).
  virtual void start_batch(SimTime now, const BatchSpec& batch, BatchId id) = 0;
  /// Called by the host at the time it was asked to with schedule_network_wakeup.
  virtual void on_wakeup(SimTime now, std::uint64_t token) = 0;
  /// When true, the flow mode sums link loads at every rate solve into max_link_load.
  void set_check_capacity(bool on) { check_capacity_ = on; }
  /// When false, no batch time is reused (flow mode's idle-network memo; for benchmarks).
  void set_memo(bool on) { memo_enabled_ = on; }
  /// When false, the flow mode re-fills every component at each solve instant, not only
  /// those a started or drained flow touches (same rates bit for bit; for tests/benchmarks).
  void set_incremental(bool on) { incremental_ = on; }
  const NetworkStats& stats() const {
    flush_tallies();
    return stats_;
  }

 protected:
  Network(Fabric& fabric, NetworkHost& host);
  void tally(const FlowSpec& flow);
  /// Tallies every flow of a batch. When the batch gives its routes (so its flow array stays
  /// valid and unchanged for the network's lifetime, see BatchSpec::routes) the tally is
  /// deferred and counted per array, then added once per array when stats() is read: a
  /// memoised ring repeats one batch of n flows 2(n-1) times, and tallying each repeat flow
  /// by flow made a flat ring over n ranks cost n^2.
  void tally_batch(const BatchSpec& batch);

  Fabric& fabric_;
  NetworkHost& host_;
  mutable NetworkStats stats_;
  bool check_capacity_ = false;
  bool memo_enabled_ = true;
  bool incremental_ = true;

 private:
  void flush_tallies() const;
  struct PendingTally {
    const FlowSpec* flows = nullptr;
    std::size_t count = 0;
    std::int64_t times = 0;
  };
  mutable std::vector<PendingTally> pending_;  // in first-seen order (deterministic sums)
  mutable std::unordered_map<const FlowSpec*, std::size_t> pending_index_;  // lookup only
};

/// Creates the network of a mode over `fabric`, reporting to `host`.
std::unique_ptr<Network> make_network(NetworkMode mode, Fabric& fabric, NetworkHost& host);

/// Alpha-beta time of one batch on an otherwise idle network, picoseconds: the slowest
/// flow's path latency plus the most loaded link's wire bytes over its capacity, plus the
/// batch overhead. This is the analytical mode's cost and the collective tuner's.
SimTime analytical_batch_time(Fabric& fabric, const BatchSpec& batch);

}  // namespace loom::sim
