#pragma once
// The network's view of a cluster: per directed link, the usable capacity (line rate times
// the link layer's payload efficiency) in bytes per picosecond and the latency in
// picoseconds, plus a cache of routes between vertices. Shared by every network mode and
// by the collective schedule builder.
#include <cstdint>
#include <span>
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
struct RouteRef {
  std::uint32_t begin = 0;   ///< first index into Fabric::route_links()
  std::uint32_t length = 0;  ///< number of links
  SimTime latency = 0;       ///< sum of link latencies, picoseconds
  LatencyClass latency_class = LatencyClass::NVLINK;
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

 private:
  const topo::Cluster* cluster_;
  NcclTuning tuning_;
  std::vector<double> capacity_;
  std::vector<SimTime> latency_;
  std::vector<topo::LinkId> route_links_;
  std::vector<RouteRef> routes_;
  std::unordered_map<std::uint64_t, std::uint32_t> route_index_;   // lookup only, never iterated
  std::unordered_map<std::uint64_t, topo::VertexId> proxy_index_;  // pxn_proxy's answers
  std::vector<std::vector<topo::VertexId>> node_gpus_;  // by node, its GPUs (pxn_proxy's scan)
  // The leaf switch a route from a GPU enters the fabric on (-1 when it does not).
  topo::VertexId entry_leaf(topo::VertexId src, topo::VertexId dst);
  // The GPUs of node `node` in rank order (built on first use; empty for an unknown node).
  const std::vector<topo::VertexId>& node_gpus(int node);
};

}  // namespace loom::sim
