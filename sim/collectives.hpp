#pragma once
// Collective operations expanded into schedules of flow batches. A schedule is a sequence
// of *phases*; each phase is one batch of flows (a *pattern*) that starts when the previous
// phase completed. Patterns are stored once and shared by the phases that repeat them
// (every step of a ring is the same pattern), so a ring over 1,024 ranks is 1,024 flows.
//
// Algorithms are registered by name with a description (collective_algorithms()). NCCL's
// latency and protocol constants follow NCCL v2.30.7-1 (src/graph/tuning.cc); see
// nccl_constants.hpp. `auto` picks the algorithm and protocol with the least predicted
// time, as NCCL's tuner does.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "sim/fabric.hpp"
#include "sim/network.hpp"
#include "sim/sim_time.hpp"

namespace loom::sim {

/// The collective operations (DESIGN.md names).
enum class CollectiveOp {
  SEND_RECV,
  BROADCAST,
  SCATTER,
  GATHER,
  REDUCE,
  ALL_GATHER,
  REDUCE_SCATTER,
  ALL_REDUCE,
  ALL_TO_ALL,
  BARRIER,
  /// All-to-all inside each node only: every rank exchanges with the group's ranks on its
  /// own node (`bytes` / their count each, itself included), nodes independently.
  NODE_ALL_TO_ALL,
  /// All-to-all across nodes along rails: every rank exchanges with the group's rank at its
  /// own position on every node (`bytes` / nodes each, its own node included). With
  /// NODE_ALL_TO_ALL after it, the two-level exchange of expert-parallel dispatchers that
  /// send a token once per node and fan it out over NVLink there (DeepEP, HybridEP).
  RAIL_ALL_TO_ALL
};
/// "all_reduce" etc.
std::string to_string(CollectiveOp op);
/// The op of a name; throws ValidationError naming `field` and listing the valid names.
CollectiveOp parse_collective_op(std::string_view name, std::string_view field = "op");
/// Every op name, in DESIGN.md order.
std::vector<std::string> collective_op_names();
/// nccl-tests' bus-bandwidth factor: 2(n-1)/n all_reduce; (n-1)/n all_gather,
/// reduce_scatter, all_to_all, gather, scatter (src/gather.cu, scatter.cu GetBw); 1 otherwise
/// (node and rail all-to-alls included: their peers are a subset of the group).
double bus_bandwidth_factor(CollectiveOp op, int n);

/// Collective algorithms.
enum class Algorithm {
  AUTO,
  RING,
  TREE,
  DIRECT,
  MASTER_WORKER,
  HALVING_DOUBLING,
  HIERARCHICAL,
  NVLS,
  NVLS_TREE
};
/// A registered algorithm: its name, description and the ops it implements.
struct AlgorithmInfo {
  Algorithm id;
  std::string name;
  std::string description;
  std::vector<CollectiveOp> ops;
};
/// The registry, in a fixed order ("auto" first).
const std::vector<AlgorithmInfo>& collective_algorithms();
std::string to_string(Algorithm algorithm);
/// The algorithm of a name; throws ValidationError listing the valid names.
Algorithm parse_algorithm(std::string_view name, std::string_view field = "algorithm");

/// NCCL protocols: LL (8-byte stores with flags, 50% payload), LL128 (120 of 128 bytes),
/// Simple (full payload, higher latency).
enum class Protocol { LL, LL128, SIMPLE };
std::string to_string(Protocol protocol);

/// How a collective is charged beyond the topology's raw alpha-beta.
struct CostOptions {
  /// NCCL base and per-step latencies and protocol payload efficiencies. Off: pure
  /// alpha-beta on the topology (latency = path latency, Simple protocol at full payload).
  bool nccl_overheads = true;
  /// Cost an all-to-all (and a rail all-to-all) over a symmetric group by flow class, once
  /// per class on one representative node (collective_classes.cpp; exact on a network the
  /// collective has to itself). Off: pair by pair, every node's flows.
  bool flow_classes = true;
  /// Leave out a request's concurrent groups when they are images of its group under
  /// automorphisms of the cluster on links of their own (collective_twins.cpp; exact on a
  /// network the collective has to itself): the group's time is then theirs. Off: every
  /// concurrent group's flows are added to every pattern.
  bool twins_once = true;
};

/// A collective as lowered: one phase after another, each a batch of flows.
struct CollectiveSchedule {
  struct Phase {
    std::int32_t pattern = 0;
    SimTime overhead = 0;  ///< protocol step latency charged to this phase, ps
  };
  std::vector<FlowSpec> flows;               ///< all patterns' flows
  std::vector<std::uint32_t> pattern_begin;  ///< pattern p: flows[begin[p], begin[p+1])
  /// Per flow, its route, when some flow's route is not Fabric::route(src, dst) (a flow
  /// class's, FlowSpec::copies); empty otherwise (each flow takes its cheapest route).
  std::vector<RouteRef> routes;
  std::vector<Phase> phases;
  SimTime base_latency = 0;  ///< once per collective (NCCL baseLat), ps
  double wire_factor = 1.0;  ///< wire bytes per payload byte
  /// False when the phases' overheads are NCCL's whole step latencies (wire included): the
  /// network then adds no path latency (BatchSpec::path_latency).
  bool path_latency = true;
  Algorithm algorithm = Algorithm::RING;
  Protocol protocol = Protocol::SIMPLE;

  int num_patterns() const { return static_cast<int>(pattern_begin.size()) - 1; }
  /// The batch of pattern `p` (flows, their routes when the schedule lists them, wire
  /// factor, path latency; no overhead or memo key).
  BatchSpec batch(int p) const;
  /// Whether some flow stands for copies elsewhere (FlowSpec::copies > 1): a flow class.
  bool has_classes() const { return !routes.empty(); }
  /// True when the request's concurrent groups were left out (CostOptions::twins_once).
  bool twins_left_out = false;
  /// Whether the schedule stands for more than its flows (classes, concurrent groups left
  /// out): exact only on a network the collective has to itself.
  bool reduced() const { return has_classes() || twins_left_out; }
};

/// What to run: op, group, size, algorithm.
struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::ALL_REDUCE;
  std::vector<int> ranks;  ///< global ranks in group order (ring order)
  double bytes = 0;  ///< nccl-tests "size": buffer bytes (total bytes for AG/RS/A2A/scatter/gather)
  int root = 0;      ///< index into `ranks` for rooted ops (send_recv: the sender)
  Algorithm algorithm = Algorithm::AUTO;
  int pipeline_chunks = 0;  ///< tree/chain pipelines: chunks (0: automatic)
  /// Identical groups running at the same time (symmetric simulation): their flows are
  /// added to every phase so that they load the links they share with this group.
  std::vector<std::vector<int>> concurrent_groups;
  double contention =
      1.0;  ///< explicit bandwidth divisor (>= 1) for links shared with unseen traffic
};

/// Checks the request itself (group, its concurrent groups' ranks, root, size, chunks,
/// contention) against the cluster; throws ValidationError naming the request field.
void validate_request(const topo::Cluster& cluster, const CollectiveRequest& request);

/// Why a valid request cannot run with `algorithm` (not AUTO) and `protocol` on this fabric,
/// as "algorithm '<name>' <reason>" (the algorithm does not implement the op, NVLS with a
/// protocol other than Simple, halving-doubling on a non-power-of-two group, hierarchical
/// on an uneven group, NVLS without a shared NVLS switch); nullopt when it can. The tuner
/// asks this to skip algorithms; build_schedule throws its answer.
std::optional<std::string> why_cannot_run(Fabric& fabric, const CollectiveRequest& request,
                                          Algorithm algorithm, Protocol protocol);

/// Lowers a request with a fixed algorithm (not AUTO) and protocol. Throws ValidationError
/// on "algorithm" (spelled by `names`) with why_cannot_run's reason when it cannot run, and
/// on "concurrent_groups" when a concurrent group lowers to a different schedule.
CollectiveSchedule build_schedule(Fabric& fabric, const CollectiveRequest& request,
                                  Algorithm algorithm, Protocol protocol,
                                  const CostOptions& options, const FieldNames& names = {});

/// Lowers a request, resolving AUTO (and the protocol) by the least analytical time among
/// the algorithms that can run it; validates the group (distinct, in-range ranks). Errors
/// about the algorithm name it as `names` spells "algorithm".
CollectiveSchedule plan_collective(Fabric& fabric, const CollectiveRequest& request,
                                   const CostOptions& options, const FieldNames& names = {});

/// Uncontended time of a schedule on the analytical model, picoseconds.
SimTime estimate_schedule(Fabric& fabric, const CollectiveSchedule& schedule);

}  // namespace loom::sim
