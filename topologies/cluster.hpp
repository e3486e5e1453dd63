#pragma once
// The cluster as a directed graph of devices and links. Vertices are GPUs, NVSwitches,
// PCIe switches, CPUs, NICs, leaf and spine switches; each full-duplex link is two
// directed edges, each with its own capacity and latency. This header is light (plain
// vectors); the Boost.Graph views (connectivity, max-flow bisection) and the routing index
// live in cluster.cpp.
//
// Routing: the cost of a path is its summed latency, then its hop count; among equal-cost
// paths the choice is a deterministic hash of the endpoints (ECMP). Traffic never transits
// through a GPU other than its endpoints (NCCL's PXN NVLink forwarding is the collective
// lowering's, sim::Fabric::pxn_proxy), and a path between two
// nodes never passes through a third node. Routes between nodes are computed hierarchically:
// inside the source node to a gateway (a vertex with a link to a fabric vertex, e.g. a NIC),
// across the fabric (all-pairs table over switches, node = -1), inside the destination node.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "topologies/gpu_catalog.hpp"

namespace loom::topo {

using VertexId = std::int32_t;
using LinkId = std::int32_t;

enum class VertexKind { GPU, NVSWITCH, PCIE_SWITCH, CPU, NIC, LEAF, SPINE };

/// Physical kind of a link; bandwidth and latency are per direction.
enum class LinkKind { NVLINK, PCIE, CPU_INTERCONNECT, INFINIBAND, ROCE, ETHERNET };

/// The vertex kind names as files spell them ("gpu", "nvswitch", ...), indexed by VertexKind.
const std::vector<std::string>& vertex_kind_names();
/// The name of `kind`, e.g. "pcie-switch".
std::string to_string(VertexKind kind);
std::string to_string(LinkKind kind);

struct Vertex {
  VertexKind kind = VertexKind::GPU;
  std::string name;               ///< unique, e.g. "node3/gpu5", "leaf2", "spine0"
  int node = -1;                  ///< node index, -1 for fabric switches
  int local_index = -1;           ///< index within its node among vertices of its kind
  bool in_switch_reduce = false;  ///< NVSwitch with NVLS/SHARP reduction
};

/// One direction of a physical link.
struct Link {
  VertexId from = 0;
  VertexId to = 0;
  LinkKind kind = LinkKind::NVLINK;
  double bandwidth_Bps = 0;  ///< capacity in bytes per second, this direction
  double latency_s = 0;      ///< propagation + switching latency in seconds
  std::string label;         ///< e.g. "NVLink4 x18", "PCIe Gen5 x16", "IB NDR"
};

/// A routed path: the directed links from source to destination in order.
struct Path {
  std::vector<LinkId> links;
  double bandwidth_Bps = 0;  ///< bottleneck (minimum) link bandwidth, bytes per second
  double latency_s = 0;      ///< sum of link latencies, seconds
  /// How many leading links no equal-cost (ECMP) choice decided: links.size() when the path
  /// is the only cheapest one. A graph automorphism that keeps link costs maps this prefix of
  /// route(a, b) onto that of route(image of a, image of b) (sim's flow classes rely on it).
  std::size_t fixed = 0;
};

struct RoutingIndex;

/// A host (a CPU server with its own memory and NIC) that can hold a rank, e.g. a parameter
/// server. Its aggregation and optimizer work is memory-bound at `memory_bandwidth_Bps`.
struct HostSpec {
  std::string name;                 ///< e.g. "xeon-8480-2s"
  double memory_bandwidth_Bps = 0;  ///< DRAM bandwidth, bytes per second (all sockets)
  double memory_bytes = 0;          ///< DRAM capacity in bytes
  std::string source;               ///< citation of the figures
};

/// Devices and links of a cluster plus its GPU ordering (global rank r runs on gpus()[r]).
/// Host ranks follow the GPUs: host h (a CPU vertex registered with add_host) is rank
/// num_gpus() + h. GPUs may differ by node group: rank r runs gpu_of_rank(r) (`gpu` when the
/// cluster is homogeneous). Build it (add_vertex, add_duplex_link), then call finalize()
/// before sharing it between threads: queries build the routing index lazily otherwise.
class Cluster {
 public:
  /// Adds a vertex and returns its id. Throws ValidationError on a duplicate name.
  VertexId add_vertex(Vertex vertex);
  /// Adds a full-duplex link as two directed edges; returns the id of the a->b direction
  /// (b->a is that id + 1). Throws ValidationError on unknown vertices or bandwidth <= 0.
  LinkId add_duplex_link(VertexId a, VertexId b, LinkKind kind, double bandwidth_Bps,
                         double latency_s, std::string label = {});

  /// Every vertex, indexed by VertexId.
  const std::vector<Vertex>& vertices() const { return vertices_; }
  /// Every directed link, indexed by LinkId (a duplex link is ids 2k and 2k + 1).
  const std::vector<Link>& links() const { return links_; }
  /// The vertex `id`; throws std::out_of_range on a bad id (a caller bug).
  const Vertex& vertex(VertexId id) const { return vertices_.at(static_cast<size_t>(id)); }
  /// The directed link `id`; throws std::out_of_range on a bad id (a caller bug).
  const Link& link(LinkId id) const { return links_.at(static_cast<size_t>(id)); }
  /// The outgoing link ids of a vertex.
  const std::vector<LinkId>& out_links(VertexId id) const {
    return out_.at(static_cast<size_t>(id));
  }

  /// GPU vertices in global-rank order.
  const std::vector<VertexId>& gpus() const { return gpus_; }
  /// Number of GPUs (global ranks 0 .. num_gpus() - 1).
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  /// Number of GPU nodes (1 for a single box); hosts sit on nodes num_nodes() and above.
  int num_nodes() const { return num_nodes_; }
  /// Sets the node count (builders only; vertices carry their node index).
  void set_num_nodes(int n) { num_nodes_ = n; }
  /// GPUs per node (num_gpus() / num_nodes(); every node holds the same number).
  int gpus_per_node() const { return num_nodes_ > 0 ? num_gpus() / num_nodes_ : num_gpus(); }
  /// Node of global rank `rank`; throws ValidationError when out of range.
  int node_of_rank(int rank) const { return vertex(gpu_vertex(rank)).node; }
  /// Index of `rank` among the GPUs of its node; throws ValidationError when out of range.
  int local_rank(int rank) const { return vertex(gpu_vertex(rank)).local_index; }
  /// The vertex of global rank `rank`; throws ValidationError when out of range.
  VertexId gpu_vertex(int rank) const;
  /// Looks a vertex up by name; -1 when absent.
  VertexId find_vertex(const std::string& name) const;

  /// Registers CPU vertex `cpu` as host rank num_gpus() + num_hosts(). Throws
  /// ValidationError when it is not a CPU vertex or is registered already.
  void add_host(VertexId cpu);
  /// Host vertices in host order (host h holds rank num_gpus() + h).
  const std::vector<VertexId>& hosts() const { return hosts_; }
  /// Number of hosts that hold ranks.
  int num_hosts() const { return static_cast<int>(hosts_.size()); }
  /// The vertex of host `h`; throws ValidationError when out of range.
  VertexId host_vertex(int h) const;
  /// What every host is (memory bandwidth and capacity).
  HostSpec host;

  /// Sets the GPU of each rank: `types[k - 1]` for ranks whose entry in `rank_type` is k >= 1,
  /// `gpu` for 0 (empty `rank_type`: every rank runs `gpu`). Throws ValidationError when
  /// `rank_type` does not list every rank or names a missing type.
  void set_gpu_types(std::vector<GpuSpec> types, std::vector<int> rank_type);
  /// Index of the GPU type of `rank`: 0 for `gpu`, k for the k-th extra type.
  int gpu_type_of_rank(int rank) const;
  /// GPU type `k` (0: `gpu`); throws ValidationError when out of range.
  const GpuSpec& gpu_type(int k) const;
  /// Number of GPU types (1 when homogeneous).
  int num_gpu_types() const { return 1 + static_cast<int>(extra_gpus_.size()); }
  /// The GPU rank `rank` runs on.
  const GpuSpec& gpu_of_rank(int rank) const { return gpu_type(gpu_type_of_rank(rank)); }

  /// Divides the bandwidth of duplex link `link` (either direction's id) by `factor` >= 1,
  /// both directions (a degraded cable or port). Throws ValidationError on a bad id or factor.
  void slow_link(LinkId link, double factor);

  /// Deterministic shortest path (lowest summed latency, then fewest hops; ties broken by a
  /// hash of the endpoints, i.e. ECMP) from vertex `src` to vertex `dst`. Throws
  /// ValidationError when unreachable.
  Path route(VertexId src, VertexId dst) const;
  /// route() between the GPUs of two global ranks.
  Path route_ranks(int src_rank, int dst_rank) const {
    return route(gpu_vertex(src_rank), gpu_vertex(dst_rank));
  }
  /// Throws ValidationError naming an unreachable vertex when the graph is not connected.
  void check_connected() const;
  /// Builds the routing index now (otherwise built on first query; not thread-safe then).
  void finalize() const;

  /// Index of the NVLink domain of `rank`: GPUs joined by NVLink links, directly or through
  /// NVSwitches. Domains are numbered 0, 1, ... in order of their lowest rank.
  int nvlink_domain(int rank) const;
  /// Number of GPUs in the NVLink domain of `rank` (1 for a GPU without NVLink).
  int nvlink_domain_size(int rank) const;
  /// Number of NVLink domains.
  int num_nvlink_domains() const;
  /// The global ranks in NVLink domain `domain`, ascending.
  const std::vector<int>& nvlink_domain_ranks(int domain) const;
  /// Scale-out injection bandwidth of `rank`, bytes per second per direction: the node's
  /// links into the fabric shared among its GPUs, capped by the GPU's path to its nearest
  /// gateway. 0 when the cluster has no fabric (a single node).
  double injection_bandwidth_Bps(int rank) const;
  /// Scale-up bandwidth of `rank`: the sum of its NVLink links, bytes per second per direction.
  double nvlink_bandwidth_Bps(int rank) const;
  /// Bisection bandwidth in bytes per second, one direction: the smallest max-flow min-cut
  /// over the candidate balanced halves (first/second half of the nodes; lower/upper half of
  /// the rails). With a fabric, the terminals are the NICs and only fabric links count;
  /// without one (a single node), the terminals are the GPUs and the whole node counts.
  double bisection_bandwidth_Bps() const;
  /// Whether the cluster has a scale-out fabric (vertices outside every node).
  bool has_fabric() const;

  /// Free-form name of what this cluster is ("dgx-h100 x4", or a file path).
  std::string name;
  /// The GPU of every node, or of the first node group when GPUs differ (gpu_of_rank).
  GpuSpec gpu;
  /// Link type of the scale-out fabric ("ib-ndr"), empty for a single node.
  std::string fabric_link;
  /// Fabric oversubscription (leaf downlink : uplink bandwidth), 1 for non-blocking.
  double oversubscription = 1.0;

 private:
  const RoutingIndex& index() const;
  void invalidate() { index_.reset(); }

  std::vector<Vertex> vertices_;
  std::vector<Link> links_;
  std::vector<std::vector<LinkId>> out_;
  std::vector<VertexId> gpus_;
  std::vector<VertexId> hosts_;
  std::vector<GpuSpec> extra_gpus_;
  std::vector<int> rank_type_;  // empty: every rank runs `gpu`
  std::map<std::string, VertexId, std::less<>> by_name_;
  int num_nodes_ = 1;
  mutable std::shared_ptr<const RoutingIndex> index_;
};

/// Slows each scale-out link (a duplex link between a node's device and the fabric, e.g. a
/// NIC and its leaf) with probability `fraction` by a factor 1 + X, X exponentially
/// distributed of mean `mean_factor` - 1; every draw is a pure function of (seed, link).
/// Returns the slowed links (the id of each duplex link's first direction) and factors.
/// Throws ValidationError when fraction is not in [0, 1] or mean_factor < 1.
std::vector<std::pair<LinkId, double>> slow_random_links(Cluster& cluster, double fraction,
                                                         double mean_factor, std::uint64_t seed);

}  // namespace loom::topo
