#pragma once
// The cluster as a directed graph of devices and links. Vertices are GPUs, NVSwitches,
// PCIe switches, CPUs, NICs, leaf and spine switches; each full-duplex link is two
// directed edges, each with its own capacity and latency. This header is light (plain
// vectors); the Boost.Graph view used for routing lives in cluster.cpp.
#include <cstdint>
#include <string>
#include <vector>

namespace loom::topo {

using VertexId = std::int32_t;
using LinkId = std::int32_t;

enum class VertexKind { GPU, NVSWITCH, PCIE_SWITCH, CPU, NIC, LEAF, SPINE };

/// Physical kind of a link; bandwidth and latency are per direction.
enum class LinkKind { NVLINK, PCIE, CPU_INTERCONNECT, INFINIBAND, ROCE, ETHERNET };

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
};

/// Devices and links of a cluster plus its GPU ordering (global rank r runs on gpus()[r]).
class Cluster {
 public:
  /// Adds a vertex and returns its id. Throws ValidationError on a duplicate name.
  VertexId add_vertex(Vertex vertex);
  /// Adds a full-duplex link as two directed edges; returns the id of the a->b direction
  /// (b->a is that id + 1). Throws ValidationError on unknown vertices or bandwidth <= 0.
  LinkId add_duplex_link(VertexId a, VertexId b, LinkKind kind, double bandwidth_Bps,
                         double latency_s, std::string label = {});

  const std::vector<Vertex>& vertices() const { return vertices_; }
  const std::vector<Link>& links() const { return links_; }
  const Vertex& vertex(VertexId id) const { return vertices_.at(static_cast<size_t>(id)); }
  const Link& link(LinkId id) const { return links_.at(static_cast<size_t>(id)); }
  /// The outgoing link ids of a vertex.
  const std::vector<LinkId>& out_links(VertexId id) const {
    return out_.at(static_cast<size_t>(id));
  }

  /// GPU vertices in global-rank order.
  const std::vector<VertexId>& gpus() const { return gpus_; }
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  int num_nodes() const { return num_nodes_; }
  void set_num_nodes(int n) { num_nodes_ = n; }
  /// The vertex of global rank `rank`; throws ValidationError when out of range.
  VertexId gpu_vertex(int rank) const;
  /// Looks a vertex up by name; -1 when absent.
  VertexId find_vertex(const std::string& name) const;

  /// Deterministic shortest path (fewest hops; ties broken by a hash of the endpoints,
  /// i.e. ECMP) from vertex `src` to vertex `dst`. Throws ValidationError when unreachable.
  Path route(VertexId src, VertexId dst) const;
  /// route() between the GPUs of two global ranks.
  Path route_ranks(int src_rank, int dst_rank) const {
    return route(gpu_vertex(src_rank), gpu_vertex(dst_rank));
  }
  /// Throws ValidationError naming an unreachable vertex when the graph is not connected.
  void check_connected() const;

  /// Free-form name of what this cluster is ("dgx-h100 x4", or a file path).
  std::string name;

 private:
  std::vector<Vertex> vertices_;
  std::vector<Link> links_;
  std::vector<std::vector<LinkId>> out_;
  std::vector<VertexId> gpus_;
  int num_nodes_ = 1;
};

}  // namespace loom::topo
