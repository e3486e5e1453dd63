#pragma once
// Internal to topologies/: node templates (vertices with local names, links), their
// instantiation per node, and the rail-optimised fat-tree fabric. Shared by the presets and
// the cluster JSON reader.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "topologies/cluster.hpp"

namespace loom::topo {

/// One node's devices and links, with names local to the node ("gpu0", "nic3").
struct NodeTemplate {
  struct V {
    VertexKind kind = VertexKind::GPU;
    std::string name;
    bool in_switch_reduce = false;
  };
  struct L {
    std::string a, b;
    LinkKind kind = LinkKind::NVLINK;
    double bandwidth_Bps = 0;  ///< per direction
    double latency_s = 0;
    std::string label;
  };
  std::vector<V> vertices;
  std::vector<L> links;

  void add(VertexKind kind, std::string name, bool in_switch_reduce = false) {
    vertices.push_back(V{kind, std::move(name), in_switch_reduce});
  }
  /// A link of catalog type `type` ("nvlink4") with `lanes` lanes (0: the type's default).
  void link(const std::string& a, const std::string& b, const std::string& type, int lanes = 0);
  /// Number of GPU vertices in the node.
  int num_gpus() const;
};

/// The scale-out fabric between nodes.
struct FabricSpec {
  std::string link;             ///< link type key ("ib-ndr"); empty: no fabric
  double bandwidth_Bps = 0;     ///< per NIC port per direction; 0: the link type's
  double latency_s = -1;        ///< per hop; < 0: the link type's
  int spines = 0;               ///< 0: one per rail, at most nodes / oversubscription
  double oversubscription = 1;  ///< leaf downlink : uplink bandwidth, >= 1
};

/// Hosts that hold ranks (parameter servers): CPU servers on the fabric, outside the GPU
/// nodes. Host h is node nodes + h with vertices "host<h>/cpu0" and "host<h>/nic<i>"; each NIC
/// joins the CPU over PCIe Gen5 x16 and the fabric on rail i.
struct HostsSpec {
  int count = 0;  ///< hosts; 0: none
  int nics = 1;   ///< NICs per host (rails 0 .. nics - 1)
  HostSpec host;  ///< memory bandwidth and capacity of each
};

/// The host `--hosts N` adds to a preset: a dual-socket Xeon Platinum 8480+ server, DGX H100's
/// CPUs (docs/clusters.md gives the figures and their sources).
HostSpec default_host();

/// One group of identical nodes: their GPU and node template.
struct NodeGroup {
  GpuSpec gpu;
  NodeTemplate node;
  int nodes = 1;
};

/// Adds one node built from `t`: vertex names "<prefix><n>/<local>" ("node" for GPU nodes,
/// "host" for parameter-server hosts, numbered by `index`), local_index per kind. Returns the
/// ids of its vertices by local name.
std::map<std::string, VertexId, std::less<>> instantiate_node(Cluster& cluster,
                                                              const NodeTemplate& t, int node,
                                                              std::string_view prefix = "node",
                                                              int index = -1);
/// Adds leaves (one per rail: NIC local index) and spines, links NICs to leaves and every
/// leaf to every spine. Throws ValidationError on "nodes" (spelled by `names`) when the
/// nodes have no NICs.
void build_rail_fat_tree(Cluster& cluster, const FabricSpec& fabric, int nodes,
                         const FieldNames& names);
/// Builds `nodes` copies of `t`, plus the fabric when nodes > 1; checks connectivity.
/// Throws ValidationError on "nodes" (spelled by `names`) for too many GPUs or no fabric.
Cluster build_cluster(const std::string& name, const GpuSpec& gpu, const NodeTemplate& t, int nodes,
                      const FabricSpec& fabric, const FieldNames& names);
/// Builds the node groups in order (ranks follow: group 0's nodes first), `hosts` after them,
/// and the fabric when there is more than one node or a host; checks connectivity. Throws
/// ValidationError on "nodes" for too many GPUs, groups with different GPUs per node, or no
/// fabric, and on "hosts" (spelled by `names`) for hosts without a fabric.
Cluster build_cluster(const std::string& name, const std::vector<NodeGroup>& groups,
                      const FabricSpec& fabric, const HostsSpec& hosts, const FieldNames& names);

/// A preset's node template and default fabric; throws ValidationError on an unknown name.
struct PresetDefinition {
  std::string name;
  std::string description;
  std::string gpu;  ///< GPU catalog key
  FabricSpec fabric;
  NodeTemplate node;
};
PresetDefinition find_preset(const std::string& name, const std::string& field = "cluster");

/// The node count a caller asks for, given the GPUs per node the file defines (a GPU count
/// needs it to become nodes); nullopt keeps the file's own count.
using NodesResolver = std::function<std::optional<int>(int gpus_per_node)>;

/// Reads a cluster JSON file (see docs/clusters.md) into a cluster of
/// `resolve_nodes(gpus per node)` nodes when that is set, with `hosts` hosts when that is set
/// (else the file's). Throws ConfigError / ValidationError (naming "nodes", "gpus" and
/// "hosts" as `names` spells them).
Cluster read_cluster_json(const std::string& path, const NodesResolver& resolve_nodes,
                          std::optional<int> hosts, const FieldNames& names);
/// read_cluster_json on the text of a cluster JSON; `origin` names it in errors.
Cluster parse_cluster_json(const std::string& text, const std::string& origin,
                           const NodesResolver& resolve_nodes, std::optional<int> hosts,
                           const FieldNames& names);

}  // namespace loom::topo
