#pragma once
// Internal to sim/: what the per-algorithm lowerings share. A lowering appends patterns and
// phases to a ScheduleBuilder; collective_build.cpp dispatches to the lowering of the chosen
// algorithm and charges NCCL's costs (collective_nccl_costs.cpp). Each algorithm's file also
// says when it cannot run on a group (collective_checks.cpp asks), so that neither the
// tuner nor the lowering has to learn it from an exception.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/fabric.hpp"

namespace loom::sim {

// A phase's latency class: the class of NCCL's hwLat row it pays (NVLINK, PCI, NET as
// ints), DERIVED (the slowest class the pattern's flows cross) or UNCHARGED (pipelined
// steady-state phases, whose latency overlaps the previous chunk).
inline constexpr int UNCHARGED = -1;
inline constexpr int DERIVED = -2;

/// Builds a CollectiveSchedule's patterns and phases over one group, addressing ranks by
/// their position in the group.
class ScheduleBuilder {
 public:
  ScheduleBuilder(Fabric& fabric, const std::vector<int>& ranks)
      : fabric_(fabric), n_(static_cast<int>(ranks.size())) {
    for (int r : ranks) v_.push_back(fabric.cluster().gpu_vertex(r));
  }
  /// Group size.
  int n() const { return n_; }
  /// The GPU vertex of group position `i`.
  topo::VertexId v(int i) const { return v_[static_cast<size_t>(i)]; }
  Fabric& fabric() const { return fabric_; }

  /// Opens a new pattern; later flow() calls add to it. Returns its index.
  int begin_pattern() {
    s_.pattern_begin.push_back(static_cast<std::uint32_t>(s_.flows.size()));
    return static_cast<int>(s_.pattern_begin.size()) - 1;
  }
  /// Adds a flow of `bytes` payload bytes to the open pattern (none from a vertex to itself).
  /// `count` > 1: that many identical flows, folded into one entry (FlowSpec::count).
  void flow(topo::VertexId a, topo::VertexId b, double bytes, std::int32_t count = 1) {
    if (a == b) return;
    s_.flows.push_back({a, b, bytes, 0, count});
    if (!routes_.empty()) routes_.push_back(fabric_.route(a, b));
  }
  /// Adds a flow class (FlowSpec::copies) on its own `route` to the open pattern.
  void class_flow(const FlowSpec& f, RouteRef route) {
    if (routes_.empty()) {  // the flows so far take their cheapest routes
      for (const FlowSpec& g : s_.flows) routes_.push_back(fabric_.route(g.src, g.dst));
    }
    s_.flows.push_back(f);
    routes_.push_back(route);
  }
  /// Appends `times` phases of `pattern`, charged at the derived class or uncharged.
  void phase(int pattern, bool charged = true, int times = 1) {
    phase_class(pattern, charged ? DERIVED : UNCHARGED, times);
  }
  /// Appends `times` phases of `pattern` charged at `latency_class`.
  void phase_class(int pattern, int latency_class, int times = 1) {
    for (int i = 0; i < times; ++i) {
      s_.phases.push_back({pattern, latency_class == UNCHARGED ? 0 : 1});
      classes_.push_back(latency_class);
    }
  }
  /// The latency class of each phase (see UNCHARGED, DERIVED).
  const std::vector<int>& phase_classes() const { return classes_; }
  /// Closes the last pattern and hands the schedule over.
  CollectiveSchedule finish() {
    s_.pattern_begin.push_back(static_cast<std::uint32_t>(s_.flows.size()));
    s_.routes = std::move(routes_);
    return std::move(s_);
  }
  /// NCCL's latency class of the route between two positions.
  int route_class(int a, int b) const {
    return static_cast<int>(fabric_.route(v(a), v(b)).latency_class);
  }
  /// The node index of position `i`.
  int node(int i) const { return fabric_.node_of(v(i)); }
  /// Positions grouped by node, nodes in order of first appearance, each in group order.
  std::vector<std::vector<int>> nodes() const {
    std::vector<std::vector<int>> groups;
    std::map<int, size_t> index;
    for (int i = 0; i < n_; ++i) {
      auto [it, inserted] = index.emplace(node(i), groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(i);
    }
    return groups;
  }

 private:
  Fabric& fabric_;
  int n_;
  std::vector<topo::VertexId> v_;
  CollectiveSchedule s_;
  std::vector<RouteRef> routes_;  // per flow once a flow class was added (class_flow)
  std::vector<int> classes_;
};

/// Whether the registry lists `op` among the ops of algorithm `a`.
bool implements(Algorithm a, CollectiveOp op);

/// Chunks of a pipelined chain: about 4 MiB each (NCCL Simple moves 512 KiB slices per
/// channel; 8 channels), at least 1, at most `cap` to bound the phase count.
int default_chunks(double bytes, int cap);

// ---- lowerings (each appends the group's patterns and phases; the group has >= 2 ranks)

/// The rings over the group: one per local position when every node holds the same number
/// (> 1) of the group's ranks (NCCL: one ring per NIC/rail), else one ring in group order.
std::vector<std::vector<int>> ring_orders(const ScheduleBuilder& b);
/// Ring all-reduce / all-gather / reduce-scatter; broadcast and reduce as pipelined chains.
void lower_ring(ScheduleBuilder& b, CollectiveOp op, double bytes, const CollectiveRequest& req);
/// NCCL's double binary tree all-reduce of `bytes`, pipelined in `chunks` chunks.
void lower_tree(ScheduleBuilder& b, double bytes, int chunks);
/// Tree pipeline depth for a protocol: chunks of about NCCL's per-step slice per channel.
int tree_chunks(const ScheduleBuilder& b, double bytes, Protocol protocol);
/// Every rank straight to every rank that needs its share. `classes`: an all-to-all or rail
/// all-to-all over a symmetric group is lowered by flow class (lower_by_classes).
void lower_direct(ScheduleBuilder& b, CollectiveOp op, double bytes, int root, bool classes);
/// An all-to-all (each rank `bytes` / n to every other) or a rail all-to-all (`bytes` / nodes
/// to its like on every other node) over a group whose nodes are alike, as one flow class
/// per distinct transfer of one representative node (FlowSpec::copies; see
/// collective_classes.cpp): appends one pattern and its phase, and returns nullopt; or
/// appends nothing and says why the group is not symmetric.
std::optional<std::string> lower_by_classes(ScheduleBuilder& b, CollectiveOp op, double bytes);
/// Everything to the root and back.
void lower_master_worker(ScheduleBuilder& b, CollectiveOp op, double bytes, int root);
/// Recursive halving and doubling; binomial trees for broadcast and reduce.
void lower_halving_doubling(ScheduleBuilder& b, CollectiveOp op, double bytes, int root);
/// Intra-node ring reduce-scatter, inter-node ring all-reduce, intra-node ring all-gather.
void lower_hierarchical(ScheduleBuilder& b, double bytes);
/// NVLink SHARP all-reduce through the ranks' in-switch-reduction NVSwitches.
void lower_nvls(ScheduleBuilder& b, double bytes);
/// NCCL's NVLSTree all-reduce: NVLS inside each node, a double binary tree per rail between
/// the nodes, all pipelined in one step.
void lower_nvls_tree(ScheduleBuilder& b, double bytes);
/// Parent of node `x` in NCCL's double binary tree over `nodes` nodes (ncclGetDtree), tree
/// 0 or 1; -1 for the root.
int dtree_parent(int nodes, int x, int tree);

// ---- why an algorithm cannot run on a group (nullopt: it can); the reason completes
// "algorithm '<name>' ..."

/// Halving-doubling needs a power-of-two group.
std::optional<std::string> halving_doubling_cannot_run(const ScheduleBuilder& b);
/// Hierarchical needs the same number of group ranks on every node.
std::optional<std::string> hierarchical_cannot_run(const ScheduleBuilder& b);
/// NVLS needs every rank next to the same in-switch-reduction NVSwitches.
std::optional<std::string> nvls_cannot_run(const ScheduleBuilder& b);
/// NVLSTree needs two or more nodes, the same number (>= 2) of group ranks on each, and every
/// node's ranks next to the same in-switch-reduction NVSwitches.
std::optional<std::string> nvls_tree_cannot_run(const ScheduleBuilder& b);

/// Whether the concurrent groups of `req` may be left out of `s`, its group's own schedule
/// lowered with algorithm `a`: each is the image of the group (position by position) under an
/// automorphism of the cluster that acts alike on every node (Fabric::node_automorphism), the
/// routes the lowering and NCCL's costs rest on are forced by the link costs, and the images
/// of the group's links are links of their own (no two groups share one). Each concurrent
/// group then lowers to the image of `s`, its flows share no link with another group's, and
/// the union takes the group's own time, in the analytical and the flow mode alike.
bool twins_fold_away(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                     const CollectiveSchedule& s);

// ---- NCCL's costs

/// Charges NCCL's protocol bandwidth factors and caps, base latency and per-phase step
/// latencies (classes: ScheduleBuilder::phase_classes()) to a lowered schedule of `op` over
/// `bytes` (the barrier already mapped to its all-reduce or all-to-all of 0 bytes).
void apply_nccl_costs(Fabric& fabric, const CollectiveRequest& req, CollectiveOp op, double bytes,
                      const std::vector<int>& classes, CollectiveSchedule& s);

// ---- the whole request

/// The request's schedule with its identical concurrent groups folded into every pattern;
/// nullopt when a concurrent group lowers to a different number of patterns or phases. The
/// request is valid and can run `a` with `protocol` (validate_request, why_cannot_run).
std::optional<CollectiveSchedule> lower_with_twins(Fabric& fabric, const CollectiveRequest& req,
                                                   Algorithm a, Protocol protocol,
                                                   const CostOptions& options);

}  // namespace loom::sim
