#pragma once
// The network's view of a cluster: per directed link, the usable capacity (line rate times
// the link layer's payload efficiency) in bytes per picosecond and the latency in
// picoseconds, plus a cache of routes between vertices. Shared by every network mode and
// by the collective schedule builder.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/sim_time.hpp"
#include "topologies/cluster.hpp"

namespace loom::sim {

/// Which of NCCL's hardware-latency classes a route falls in (tuning.cc hwLat rows).
enum class LatencyClass : std::uint8_t { NVLINK = 0, PCI = 1, NET = 2 };

/// Fraction of a link's line rate that carries payload, per link kind.
///
/// Defaults and their sources:
/// - NVLink 0.80: 25 GB/s per link per direction line rate carries ~20 GB/s of payload with
///   128-byte packets (NVIDIA/nccl-tests issue #149, sjeaugey 2023-07-05; NCCL topo.h
///   SM80_NVLINK_BW = 20 GB/s per link).
/// - InfiniBand / RoCE 0.94: NDR400 (50 GB/s) sustains 46-48 GB/s bus bandwidth per NIC
///   (NVIDIA/nccl-tests issue #290, AddyLaddy); 47/50. Ethernet assumed the same.
/// - PCIe 0.76: NCCL topo.h PCI_BW = 12 GB/s for a Gen3 x16 link of 15.75 GB/s.
/// - CPU interconnect 1.0: no derating (no published figure used).
struct LinkEfficiency {
  double nvlink = 0.80;
  double pcie = 0.76;
  double cpu_interconnect = 1.0;
  double infiniband = 0.94;
  double roce = 0.94;
  double ethernet = 0.94;

  /// Every link at its full line rate (for hand-checkable alpha-beta tests).
  static LinkEfficiency line_rate() { return {1.0, 1.0, 1.0, 1.0, 1.0, 1.0}; }
  /// The efficiency of a link kind (0 < e <= 1).
  double of(topo::LinkKind kind) const;
};

/// Calibrated scales of NCCL's cost constants (nccl_constants.hpp) that a fitted network
/// (calibration/network_fit.hpp) sets; the defaults are NCCL's own values.
struct NcclTuning {
  /// NVLink SHARP efficiency replacing nvlsEfficiency (0: the architecture's, tuning.cc).
  double nvls_efficiency = 0;
  /// Multiplies baseLat and the NVLINK and PCI hwLat rows (>= 0).
  double intra_latency_scale = 1.0;
  /// Multiplies the NET hwLat rows (>= 0).
  double net_latency_scale = 1.0;
  /// Multiplies every latency of the Simple protocol, base and per step, on top of the two
  /// scales above (>= 0): NCCL's constants leave the Simple protocol's pipeline start-up
  /// (its chunked steps through the proxy and the NIC) to one per-step figure, which a
  /// measured size ramp can disagree with.
  double simple_latency_scale = 1.0;
};

/// A cached route: a slice of Fabric's link storage plus its latency and class.
/// One 64-bit key of an ordered pair of 32-bit ids (vertices, a vertex and a rail): the
/// first in the high half. The key of the fabric's caches and of the collectives' maps.
inline std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
         static_cast<std::uint32_t>(b);
}

struct RouteRef {
  std::uint32_t begin = 0;   ///< first index into Fabric::route_links()
  std::uint32_t length = 0;  ///< number of links
  SimTime latency = 0;       ///< sum of link latencies, picoseconds
  LatencyClass latency_class = LatencyClass::NVLINK;
  /// Leading links no equal-cost (ECMP) choice decided (topo::Path::fixed): `length` when
  /// the route is the only cheapest one.
  std::uint32_t fixed = 0;
  /// Whether the cheapest route is the only one (no ECMP choice on it).
  bool forced() const { return fixed == length; }
};

/// Link capacities and cached routes of a cluster (see file comment).
class Fabric {
 public:
  /// Reads the cluster's links; throws ValidationError when an efficiency is not in (0, 1]
  /// or a tuning value is out of range (nvls_efficiency in [0, 1], scales >= 0).
  Fabric(const topo::Cluster& cluster, LinkEfficiency efficiency = {}, NcclTuning tuning = {});

  const topo::Cluster& cluster() const { return *cluster_; }
  /// The NCCL constant scales the collective cost model applies on this fabric.
  const NcclTuning& tuning() const { return tuning_; }
  int num_links() const { return static_cast<int>(capacity_.size()); }
  /// Usable capacity of a directed link in bytes per picosecond.
  double capacity_Bpps(topo::LinkId link) const { return capacity_[static_cast<size_t>(link)]; }
  /// Latency of a directed link in picoseconds.
  SimTime latency(topo::LinkId link) const { return latency_[static_cast<size_t>(link)]; }
  /// The cached route from vertex `src` to vertex `dst` (computed on first use). Throws
  /// ValidationError when unreachable.
  RouteRef route(topo::VertexId src, topo::VertexId dst);
  /// The links of a route, in order.
  std::span<const topo::LinkId> links(const RouteRef& route) const {
    return {route_links_.data() + route.begin, route.length};
  }
  /// The node index of a vertex (-1 for fabric switches).
  int node_of(topo::VertexId v) const { return cluster_->vertex(v).node; }
  /// NCCL's PXN (NVLink forwarding, on by default since NCCL 2.12): for a transfer between
  /// GPUs `src` and `dst` of different nodes whose routes enter the fabric on different leaf
  /// switches (rails), the GPU of src's NVLink domain on dst's rail, which relays it (src ->
  /// NVLink -> proxy -> its NIC -> dst's leaf -> dst); -1 when none is needed or possible.
  topo::VertexId pxn_proxy(topo::VertexId src, topo::VertexId dst);
  /// pxn_proxy, and in `invariant` whether every route part the answer rests on is forced by
  /// the link costs alone (no ECMP choice): an automorphism of the cluster that keeps link
  /// costs then maps the answer for (src, dst) onto the answer for their images.
  topo::VertexId pxn_proxy(topo::VertexId src, topo::VertexId dst, bool& invariant);

  /// The vertices of node `node` in id order (built on first use; empty for an unknown node).
  const std::vector<topo::VertexId>& node_vertices(int node);
  /// The index of vertex `v` in node_vertices(its node); -1 for a fabric vertex.
  int node_position(topo::VertexId v);
  /// The GPUs of node `node` in rank order (built on first use; empty for an unknown node).
  const std::vector<topo::VertexId>& node_gpus(int node);

  /// Whether node `x` is built and wired like node `x0`: the same devices in vertex-id order,
  /// each with the same links in the same order (kind, capacity, latency), to the same
  /// places of its node or to the same fabric switches (both ways alike); nullopt if so, else
  /// why not. Any permutation of alike nodes is then an automorphism of the cluster that keeps
  /// every link's cost. `like` (when given) receives, for every link of x and every fabric
  /// link into x, its like on x0.
  std::optional<std::string> compare_nodes(
      int x0, int x, std::unordered_map<topo::LinkId, topo::LinkId>* like = nullptr);
  /// Whether nodes `x0` and `x` are built and wired alike (compare_nodes), answered from the
  /// remembered classes of nodes where both have one: one comparison per node, not per call.
  bool nodes_alike(int x0, int x);
  /// Routes looked up by translating another node pair's route (see route()).
  std::size_t routes_translated() const { return translated_; }

  /// A map of the cluster onto itself that acts alike on every node: `place[p]` is the image
  /// of node place p (every node's vertex at that place goes to the same node's vertex at
  /// place[p]) and `fabric` the image of each fabric vertex.
  struct NodeMap {
    std::vector<int> place;
    std::unordered_map<topo::VertexId, topo::VertexId> fabric;
  };
  /// An automorphism of the cluster (links onto links of the same kind, capacity and latency)
  /// that acts alike on every node and takes node place a to b for each (a, b) of `seed`:
  /// found by search over one node's places and the fabric when every node is like node 0
  /// (compare_nodes); nullopt when there is none or the search gives up (sim/fabric_symmetry.cpp).
  /// Remembered per seed.
  const std::optional<NodeMap>& node_automorphism(const std::vector<std::pair<int, int>>& seed);
  /// The image of vertex `v` under `m`.
  topo::VertexId image(const NodeMap& m, topo::VertexId v);
  /// The image of link `l` under `m`: the link between the images of its ends with its kind,
  /// capacity and latency; -1 when there is no one such link.
  topo::LinkId image_link(const NodeMap& m, topo::LinkId l);

  /// A route that is not the cheapest path between two vertices: the route of a flow class
  /// from `src` to `dst`, its links on dst's node replaced by their likes on src's node
  /// (collective_classes.cpp), kept in a table of its own under (src, dst). `make()` gives
  /// the links (a std::vector<topo::LinkId>) when the pair is new.
  template <typename Make>
  RouteRef class_route(topo::VertexId src, topo::VertexId dst, Make&& make);
  /// Routes made so far (cheapest and class routes), each by a topology search or, for
  /// routes_translated() of them, by translating another pair's: the unit of work the
  /// collective lowerings' tests count.
  std::size_t routes_computed() const { return routes_.size(); }

 private:
  RouteRef add_route(std::span<const topo::LinkId> links, std::uint32_t fixed);
  const topo::Cluster* cluster_;
  NcclTuning tuning_;
  std::vector<double> capacity_;
  std::vector<SimTime> latency_;
  std::vector<topo::LinkId> route_links_;
  std::vector<RouteRef> routes_;
  std::unordered_map<std::uint64_t, std::uint32_t> route_index_;   // lookup only, never iterated
  std::unordered_map<std::uint64_t, topo::VertexId> proxy_index_;  // pxn_proxy's answers
  std::vector<std::vector<topo::VertexId>> node_gpus_;      // by node, its GPUs (pxn_proxy's scan)
  std::vector<std::vector<topo::VertexId>> node_vertices_;  // by node, its vertices
  std::vector<int> node_position_;                          // by vertex, its index there
  std::unordered_map<std::uint64_t, std::uint32_t> class_index_;  // class_route's
  // The leaf switch a route from a GPU enters the fabric on (-1 when it does not); `fixed`
  // turns false when that leaf lies past the route's forced prefix.
  topo::VertexId entry_leaf(topo::VertexId src, topo::VertexId dst, bool* fixed = nullptr);
  topo::VertexId find_proxy(topo::VertexId src, topo::VertexId dst, bool* invariant);

  // Routes between alike nodes by translation (route()): each node's class (the first node
  // it is like; -1 when none of the first MAX_NODE_CLASSES classes), a second node of each
  // class, and per shape (class, source place, destination place, same node) the route
  // between the class's two nodes written by place, or unusable (an ECMP choice, a third
  // node).
  static constexpr int MAX_NODE_CLASSES = 16;
  struct RelLink {
    std::int8_t side = 0;     // 0: the source's node, 1: the destination's, 2: the fabric
    std::int8_t partner = 0;  // the other direction of the link found by (place, k)
    std::int32_t place = 0;   // the link's node vertex, by place
    std::int32_t k = 0;       // its index among that vertex's out-links
    topo::LinkId link = 0;    // side 2: the link itself
  };
  struct Shape {
    bool usable = false;
    std::vector<RelLink> links;
  };
  int node_class(int node);
  const Shape& shape(int rep, int from, int to, bool same);
  bool translate(topo::VertexId src, topo::VertexId dst, std::vector<topo::LinkId>& out);
  std::vector<int> node_class_;    // by node: its class's first node (-2: unknown)
  std::vector<int> class_second_;  // by node (a class's first): another of its nodes
  std::vector<int> class_reps_;    // the classes' first nodes
  std::unordered_map<std::uint64_t, Shape> shapes_;  // lookup only
  std::vector<topo::LinkId> scratch_;
  std::size_t translated_ = 0;
  // node_automorphism's: whether every node is like node 0 (-1: not yet known), and the maps
  // found per seed.
  int all_alike_ = -1;
  std::map<std::vector<std::pair<int, int>>, std::optional<NodeMap>> automorphisms_;
  std::unordered_map<std::uint64_t, std::vector<topo::LinkId>> fabric_links_;  // switch pairs'
};

template <typename Make>
RouteRef Fabric::class_route(topo::VertexId src, topo::VertexId dst, Make&& make) {
  auto& index = class_index_;
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                            static_cast<std::uint32_t>(dst);
  auto it = index.find(key);
  if (it != index.end()) return routes_[it->second];
  const std::vector<topo::LinkId> links = make();
  RouteRef ref = add_route(links, static_cast<std::uint32_t>(links.size()));
  index.emplace(key, static_cast<std::uint32_t>(routes_.size()));
  routes_.push_back(ref);
  return ref;
}

}  // namespace loom::sim
