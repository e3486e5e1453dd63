#include "topologies/cluster_presets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "topologies/cluster_builder.hpp"
#include "topologies/link_catalog.hpp"

namespace loom::topo {

void NodeTemplate::link(const std::string& a, const std::string& b, const std::string& type,
                        int lanes) {
  const LinkSpec& spec = find_link_type(type);
  const int n = lanes > 0 ? lanes : spec.default_lanes;
  std::string label = spec.label;
  if (n > 1) label += fmt::format(" x{}", n);
  links.push_back(L{a, b, spec.kind, spec.lane_bandwidth_Bps * n, spec.latency_s, label});
}

int NodeTemplate::num_gpus() const {
  return static_cast<int>(std::count_if(vertices.begin(), vertices.end(),
                                        [](const V& v) { return v.kind == VertexKind::GPU; }));
}

std::map<std::string, VertexId, std::less<>> instantiate_node(Cluster& cluster,
                                                              const NodeTemplate& t, int node,
                                                              std::string_view prefix, int index) {
  std::map<VertexKind, int> counts;
  std::map<std::string, VertexId, std::less<>> local;
  for (const auto& v : t.vertices) {
    Vertex vertex;
    vertex.kind = v.kind;
    vertex.name = fmt::format("{}{}/{}", prefix, index < 0 ? node : index, v.name);
    vertex.node = node;
    vertex.local_index = counts[v.kind]++;
    vertex.in_switch_reduce = v.in_switch_reduce;
    local[v.name] = cluster.add_vertex(std::move(vertex));
  }
  for (const auto& l : t.links) {
    cluster.add_duplex_link(local.at(l.a), local.at(l.b), l.kind, l.bandwidth_Bps, l.latency_s,
                            l.label);
  }
  return local;
}

void build_rail_fat_tree(Cluster& cluster, const FabricSpec& fabric, int nodes,
                         const FieldNames& names) {
  const LinkSpec& spec = find_link_type(fabric.link, "fabric link");
  const double port_Bps = fabric.bandwidth_Bps > 0 ? fabric.bandwidth_Bps : spec.lane_bandwidth_Bps;
  const double latency_s = fabric.latency_s >= 0 ? fabric.latency_s : spec.latency_s;
  std::vector<std::vector<VertexId>> rails;  // rails[r] = NIC of rail r in every node
  for (size_t v = 0; v < cluster.vertices().size(); ++v) {
    const Vertex& x = cluster.vertices()[v];
    if (x.kind != VertexKind::NIC || x.node < 0) continue;
    if (static_cast<int>(rails.size()) <= x.local_index)
      rails.resize(static_cast<size_t>(x.local_index + 1));
    rails[static_cast<size_t>(x.local_index)].push_back(static_cast<VertexId>(v));
  }
  if (rails.empty()) {
    throw ValidationError(names("nodes"),
                          fmt::format("cluster '{}' has no NICs, so it cannot span {} "
                                      "nodes; use {} 1 or add NICs",
                                      cluster.name, nodes, names("nodes")));
  }
  // Default spine count: one per rail, but never more than a leaf has uplink ports (so each
  // leaf-spine edge carries at least one NIC port's bandwidth).
  const int uplink_ports = std::max(1, static_cast<int>(nodes / fabric.oversubscription));
  const int spines =
      fabric.spines > 0 ? fabric.spines : std::min(static_cast<int>(rails.size()), uplink_ports);
  std::vector<VertexId> leaves, spine_ids;
  for (size_t r = 0; r < rails.size(); ++r) {
    Vertex leaf;
    leaf.kind = VertexKind::LEAF;
    leaf.name = fmt::format("leaf{}", r);
    leaf.local_index = static_cast<int>(r);
    leaves.push_back(cluster.add_vertex(std::move(leaf)));
  }
  for (int s = 0; s < spines; ++s) {
    Vertex spine;
    spine.kind = VertexKind::SPINE;
    spine.name = fmt::format("spine{}", s);
    spine.local_index = s;
    spine_ids.push_back(cluster.add_vertex(std::move(spine)));
  }
  for (size_t r = 0; r < rails.size(); ++r) {
    for (VertexId nic : rails[r])
      cluster.add_duplex_link(nic, leaves[r], spec.kind, port_Bps, latency_s, spec.label);
    // The leaf's uplink capacity is its downlink capacity / oversubscription, spread evenly
    // over the spines; each leaf-spine edge aggregates the cables between them.
    const double up_Bps =
        static_cast<double>(rails[r].size()) * port_Bps / fabric.oversubscription / spines;
    for (VertexId s : spine_ids)
      cluster.add_duplex_link(leaves[r], s, spec.kind, up_Bps, latency_s,
                              spec.label + " (leaf-spine aggregate)");
  }
}

namespace {

// The graph's size before it is built: every vertex and link a template replicated over
// `nodes` with its fat-tree adds (an upper bound on the spines), against the limits.
void check_graph_size(const NodeTemplate& t, int nodes, const FabricSpec& fabric,
                      const FieldNames& names) {
  const auto nics = static_cast<std::int64_t>(
      std::count_if(t.vertices.begin(), t.vertices.end(),
                    [](const auto& v) { return v.kind == VertexKind::NIC; }));
  const std::int64_t spines = std::max<std::int64_t>(fabric.spines, nics);
  const bool fat_tree = nodes > 1;
  const std::int64_t vertices =
      nodes * static_cast<std::int64_t>(t.vertices.size()) + (fat_tree ? nics + spines : 0);
  const std::int64_t links = nodes * static_cast<std::int64_t>(t.links.size()) +
                             (fat_tree ? nodes * nics + nics * spines : 0);
  const auto fail = [&](std::string_view what, std::int64_t count, std::int64_t limit,
                        std::string_view limit_name, std::size_t per_node) {
    throw ValidationError(
        names("nodes"),
        fmt::format("{}: {} nodes of {} {} each make {} {}, over loom's limit of {} ({} in "
                    "common/limits.hpp, docs/limits.md); simulate fewer nodes or describe the "
                    "node with fewer devices",
                    names("nodes"), nodes, per_node, what, count, what, limit, limit_name));
  };
  if (vertices > MAX_TOPOLOGY_VERTICES)
    fail("vertices", vertices, MAX_TOPOLOGY_VERTICES, "MAX_TOPOLOGY_VERTICES", t.vertices.size());
  if (links > MAX_TOPOLOGY_LINKS)
    fail("links", links, MAX_TOPOLOGY_LINKS, "MAX_TOPOLOGY_LINKS", t.links.size());
}

}  // namespace

Cluster build_cluster(const std::string& name, const GpuSpec& gpu, const NodeTemplate& t, int nodes,
                      const FabricSpec& fabric, const FieldNames& names) {
  return build_cluster(name, {NodeGroup{gpu, t, nodes}}, fabric, HostsSpec{}, names);
}

HostSpec default_host() {
  HostSpec h;
  h.name = "xeon-8480-2s";
  // Intel Xeon Platinum 8480+ (ark.intel.com 231746): 8 DDR5-4800 channels per socket, each
  // 4800 MT/s x 8 B = 38.4 GB/s; two sockets (DGX H100 user guide: 2x 8480C).
  h.memory_bandwidth_Bps = 2 * 8 * 38.4e9;
  h.memory_bytes = 2e12;  // DGX H100 datasheet: 2 TB system memory
  h.source = "Intel ARK Xeon Platinum 8480+ (8 ch DDR5-4800 per socket), 2 sockets; 2 TB DRAM";
  return h;
}

namespace {

// Host h: node `first_node + h`, a CPU and `nics` NICs on PCIe Gen5 x16.
void add_hosts(Cluster& cluster, const HostsSpec& hosts, int first_node) {
  NodeTemplate t;
  t.add(VertexKind::CPU, "cpu0");
  for (int i = 0; i < hosts.nics; ++i) {
    t.add(VertexKind::NIC, fmt::format("nic{}", i));
    t.link("cpu0", fmt::format("nic{}", i), "pcie5");
  }
  for (int h = 0; h < hosts.count; ++h)
    cluster.add_host(instantiate_node(cluster, t, first_node + h, "host", h).at("cpu0"));
  cluster.host = hosts.host;
}

}  // namespace

Cluster build_cluster(const std::string& name, const std::vector<NodeGroup>& groups,
                      const FabricSpec& fabric, const HostsSpec& hosts, const FieldNames& names) {
  std::int64_t gpus = 0;  // 64-bit: products of user-given sizes
  int nodes = 0;
  for (const NodeGroup& g : groups) {
    const auto per_node = static_cast<std::int64_t>(g.node.num_gpus());
    if (per_node != groups.front().node.num_gpus()) {
      throw ValidationError(names("nodes"),
                            fmt::format("node groups hold {} and {} GPUs per node; loom lays "
                                        "ranks out over nodes of equal size, give every group "
                                        "the same GPUs per node",
                                        groups.front().node.num_gpus(), per_node));
    }
    if (static_cast<double>(per_node) * g.nodes + static_cast<double>(gpus) > MAX_CLUSTER_GPUS) {
      throw ValidationError(names("nodes"),
                            fmt::format("{}: {} nodes x {} GPUs = {} GPUs exceed loom's maximum "
                                        "of {}; simulate fewer nodes",
                                        names("nodes"), nodes + g.nodes, per_node,
                                        gpus + per_node * g.nodes, MAX_CLUSTER_GPUS));
    }
    gpus += per_node * g.nodes;
    nodes += g.nodes;
  }
  // Every group's template over all the nodes: an upper bound on the graph the groups build.
  for (const NodeGroup& g : groups) check_graph_size(g.node, nodes, fabric, names);
  Cluster cluster;
  cluster.name = name;
  cluster.gpu = groups.front().gpu;
  std::vector<GpuSpec> types;  // beyond groups.front().gpu, by name
  std::vector<int> rank_type;
  int node = 0;
  for (const NodeGroup& g : groups) {
    int type = 0;
    if (g.gpu.name != cluster.gpu.name || g.gpu.display_name != cluster.gpu.display_name) {
      auto it = std::find_if(types.begin(), types.end(), [&](const GpuSpec& x) {
        return x.name == g.gpu.name && x.display_name == g.gpu.display_name;
      });
      type = static_cast<int>(it - types.begin()) + 1;
      if (it == types.end()) types.push_back(g.gpu);
    }
    for (int n = 0; n < g.nodes; ++n, ++node) {
      instantiate_node(cluster, g.node, node);
      rank_type.insert(rank_type.end(), static_cast<size_t>(g.node.num_gpus()), type);
    }
  }
  cluster.set_num_nodes(nodes);
  if (!types.empty()) cluster.set_gpu_types(std::move(types), std::move(rank_type));
  if (hosts.count > 0) add_hosts(cluster, hosts, nodes);
  if (nodes > 1 || hosts.count > 0) {
    if (fabric.link.empty()) {
      const bool for_hosts = nodes == 1;
      throw ValidationError(
          names(for_hosts ? "hosts" : "nodes"),
          fmt::format("cluster '{}' has no fabric, so it cannot span {} nodes{}; {}", name,
                      nodes + hosts.count, for_hosts ? " with its hosts" : "",
                      for_hosts ? "give a fabric for the hosts' NICs"
                                : fmt::format("use {} 1 or give a fabric", names("nodes"))));
    }
    build_rail_fat_tree(cluster, fabric, nodes + hosts.count, names);
    cluster.fabric_link = fabric.link;
    cluster.oversubscription = fabric.oversubscription;
  }
  cluster.check_connected();
  cluster.finalize();
  return cluster;
}

namespace {

// An HGX-style 8-GPU node: every GPU on one logical NVSwitch vertex (the 4 or 6 physical
// NVSwitch chips aggregated), one PCIe switch per GPU with that GPU's own NIC (rail i =
// NIC i), four PCIe switches per CPU socket, two sockets joined by the socket link. The
// physical boards pair two GPUs and two NICs per PCIe switch; pairing them one-to-one keeps
// rail-aligned traffic on its rail, which is what NCCL's topology search picks anyway.
NodeTemplate hgx8(const std::string& nvlink, bool nvls, const std::string& pcie) {
  NodeTemplate t;
  for (int i = 0; i < 8; ++i) t.add(VertexKind::GPU, fmt::format("gpu{}", i));
  t.add(VertexKind::NVSWITCH, "nvswitch", nvls);
  for (int i = 0; i < 8; ++i) t.add(VertexKind::PCIE_SWITCH, fmt::format("pcie{}", i));
  for (int c = 0; c < 2; ++c) t.add(VertexKind::CPU, fmt::format("cpu{}", c));
  for (int i = 0; i < 8; ++i) t.add(VertexKind::NIC, fmt::format("nic{}", i));
  for (int i = 0; i < 8; ++i) {
    t.link(fmt::format("gpu{}", i), "nvswitch", nvlink);
    t.link(fmt::format("gpu{}", i), fmt::format("pcie{}", i), pcie);
    t.link(fmt::format("pcie{}", i), fmt::format("nic{}", i), pcie);
    t.link(fmt::format("pcie{}", i), fmt::format("cpu{}", i / 4), pcie);
  }
  t.link("cpu0", "cpu1", "cpu-link");
  return t;
}

// GB200 NVL72: 72 GPUs on one logical NVSwitch (18 NVSwitch chips in 9 switch trays), each
// pair of GPUs with its Grace CPU over NVLink-C2C, one ConnectX-7 400G per GPU on PCIe Gen5
// (GB300 NVL72: the same rack with one ConnectX-8 800G per GPU on PCIe Gen6, `nic_pcie`).
NodeTemplate nvl72(const std::string& nic_pcie = "pcie5") {
  NodeTemplate t;
  for (int i = 0; i < 72; ++i) t.add(VertexKind::GPU, fmt::format("gpu{}", i));
  t.add(VertexKind::NVSWITCH, "nvswitch", true);
  for (int c = 0; c < 36; ++c) t.add(VertexKind::CPU, fmt::format("cpu{}", c));
  for (int i = 0; i < 72; ++i) t.add(VertexKind::NIC, fmt::format("nic{}", i));
  for (int i = 0; i < 72; ++i) {
    t.link(fmt::format("gpu{}", i), "nvswitch", "nvlink5");
    t.link(fmt::format("gpu{}", i), fmt::format("cpu{}", i / 2), "nvlink-c2c");
    t.link(fmt::format("gpu{}", i), fmt::format("nic{}", i), nic_pcie);
  }
  return t;
}

// Two sockets, two PCIe switches per socket, two GPUs and one NIC per switch. With
// `bridges`, GPUs 2k and 2k+1 (same switch) share an NVLink bridge.
NodeTemplate pcie_box(const std::string& gpu_pcie, const std::string& bridge) {
  NodeTemplate t;
  for (int i = 0; i < 8; ++i) t.add(VertexKind::GPU, fmt::format("gpu{}", i));
  for (int s = 0; s < 4; ++s) t.add(VertexKind::PCIE_SWITCH, fmt::format("pcie{}", s));
  for (int c = 0; c < 2; ++c) t.add(VertexKind::CPU, fmt::format("cpu{}", c));
  for (int s = 0; s < 4; ++s) t.add(VertexKind::NIC, fmt::format("nic{}", s));
  for (int i = 0; i < 8; ++i)
    t.link(fmt::format("gpu{}", i), fmt::format("pcie{}", i / 2), gpu_pcie);
  for (int s = 0; s < 4; ++s) {
    t.link(fmt::format("pcie{}", s), fmt::format("cpu{}", s / 2), gpu_pcie);
    t.link(fmt::format("pcie{}", s), fmt::format("nic{}", s), gpu_pcie);
  }
  if (!bridge.empty())
    for (int k = 0; k < 4; ++k)
      t.link(fmt::format("gpu{}", 2 * k), fmt::format("gpu{}", 2 * k + 1), bridge);
  t.link("cpu0", "cpu1", "cpu-link");
  return t;
}

// Consumer GPUs have no peer-to-peer over PCIe: every GPU hangs off its socket's root
// complex, so GPU-to-GPU traffic goes through the CPU. One NIC per socket.
NodeTemplate rtx_box() {
  NodeTemplate t;
  for (int i = 0; i < 8; ++i) t.add(VertexKind::GPU, fmt::format("gpu{}", i));
  for (int c = 0; c < 2; ++c) t.add(VertexKind::CPU, fmt::format("cpu{}", c));
  for (int c = 0; c < 2; ++c) t.add(VertexKind::NIC, fmt::format("nic{}", c));
  for (int i = 0; i < 8; ++i) t.link(fmt::format("gpu{}", i), fmt::format("cpu{}", i / 4), "pcie4");
  for (int c = 0; c < 2; ++c) t.link(fmt::format("cpu{}", c), fmt::format("nic{}", c), "pcie4");
  t.link("cpu0", "cpu1", "cpu-link");
  return t;
}

FabricSpec fabric(const std::string& link) {
  FabricSpec f;
  f.link = link;
  return f;
}

std::vector<PresetDefinition> build_presets() {
  return {
      {"dgx-a100",
       "DGX A100: 8x A100-SXM4-80GB, NVLink3 300 GB/s/dir to NVSwitch, 8x ConnectX-6 HDR 200G",
       "a100-sxm-80gb", fabric("ib-hdr"), hgx8("nvlink3", false, "pcie4")},
      {"dgx-h100",
       "DGX H100: 8x H100-SXM5, NVLink4 450 GB/s/dir to NVSwitch (NVLS), 8x ConnectX-7 NDR 400G",
       "h100-sxm", fabric("ib-ndr"), hgx8("nvlink4", true, "pcie5")},
      {"hgx-h200",
       "HGX H200: 8x H200-SXM 141GB, NVLink4 450 GB/s/dir to NVSwitch (NVLS), 8x NDR 400G", "h200",
       fabric("ib-ndr"), hgx8("nvlink4", true, "pcie5")},
      {"gb200-nvl72",
       "GB200 NVL72 rack: 72 B200 in one NVLink5 domain (900 GB/s/dir, NVLS), 72x NDR 400G",
       "gb200", fabric("ib-ndr"), nvl72()},
      {"dgx-b200",
       "DGX B200: 8x B200 (1000W), NVLink5 900 GB/s/dir to NVSwitch (NVLS), 8x ConnectX-7 NDR 400G",
       "b200", fabric("ib-ndr"), hgx8("nvlink5", true, "pcie5")},
      {"dgx-b300",
       "DGX B300: 8x B300, NVLink5 900 GB/s/dir to NVSwitch (NVLS), 8x ConnectX-8 XDR 800G", "b300",
       fabric("ib-xdr"), hgx8("nvlink5", true, "pcie6")},
      {"gb300-nvl72",
       "GB300 NVL72 rack: 72 B300 in one NVLink5 domain (900 GB/s/dir, NVLS), 72x XDR 800G",
       "gb300", fabric("ib-xdr"), nvl72("pcie6")},
      {"l40s-pcie", "8x L40S on PCIe Gen4 (2 sockets, 4 PCIe switches, no NVLink), 4x RoCE 200G",
       "l40s", fabric("roce-200g"), pcie_box("pcie4", "")},
      {"rtx4090-pcie",
       "8x RTX 4090 on the CPU root complexes (no NVLink, no PCIe P2P), 2x RoCE 100G", "rtx4090",
       fabric("roce-100g"), rtx_box()},
      {"a100-pcie-pairs",
       "8x A100-PCIe-80GB, NVLink bridges joining pairs (300 GB/s/dir), 4x HDR 200G",
       "a100-pcie-80gb", fabric("ib-hdr"), pcie_box("pcie4", "nvlink3")},
  };
}

const std::vector<PresetDefinition>& presets() {
  static const std::vector<PresetDefinition> p = build_presets();
  return p;
}

}  // namespace

bool looks_like_path(std::string_view spec) {
  return spec.find('/') != std::string_view::npos ||
         (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json");
}

PresetDefinition find_preset(const std::string& name, const std::string& field) {
  // Preset names are matched case-insensitively, as GPU and model names are.
  const std::string key = to_lower(name);
  for (const auto& p : presets())
    if (p.name == key) return p;
  // A GPU where a cluster belongs ("--cluster h100"): name the presets built on that GPU.
  if (const auto gpu_name = gpu_key(key)) {
    const std::string gpu = *gpu_name;
    std::vector<std::string> with;
    for (const auto& p : presets())
      if (p.gpu == gpu) with.push_back(p.name);
    if (!with.empty()) {
      throw ValidationError(
          field, fmt::format("{}: '{}' is a GPU, not a cluster (did you mean '{}'?); presets "
                             "with {} GPUs: {}; all presets: {}",
                             field, name, with.front(), gpu, join(with, ", "),
                             join(cluster_preset_names(), ", ")));
    }
  }
  throw ValidationError::unknown_name(field, name, cluster_preset_names());
}

std::vector<PresetInfo> cluster_presets() {
  std::vector<PresetInfo> out;
  for (const auto& p : presets()) out.push_back({p.name, p.description});
  return out;
}

std::optional<std::string> cluster_preset_for_gpu(std::string_view gpu) {
  for (const auto& p : presets())
    if (p.gpu == gpu) return p.name;
  return std::nullopt;
}

std::vector<std::string> cluster_preset_names() {
  return preset_names(cluster_presets());
}

namespace {

// Resolves the requested nodes / GPUs against the GPUs per node.
std::optional<int> resolve_nodes(const ClusterRequest& r, int gpus_per_node,
                                 const FieldNames& names) {
  if (r.nodes && *r.nodes < 1)
    throw ValidationError::not_positive(names("nodes"), std::to_string(*r.nodes));
  if (r.gpus && *r.gpus < 1)
    throw ValidationError::not_positive(names("gpus"), std::to_string(*r.gpus));
  if (r.nodes && *r.nodes > MAX_CLUSTER_NODES) {
    throw ValidationError::bad_value(names("nodes"), std::to_string(*r.nodes),
                                     fmt::format("at most {}", MAX_CLUSTER_NODES));
  }
  if (r.gpus && *r.gpus > MAX_CLUSTER_GPUS) {
    throw ValidationError::bad_value(names("gpus"), std::to_string(*r.gpus),
                                     fmt::format("at most {}", MAX_CLUSTER_GPUS));
  }
  if (!r.gpus) return r.nodes;
  if (*r.gpus % gpus_per_node != 0) {
    throw ValidationError(
        names("gpus"), fmt::format("{} {} is not a multiple of the {} GPUs per "
                                   "node of '{}'; use a multiple or {}",
                                   names("gpus"), *r.gpus, gpus_per_node, r.spec, names("nodes")));
  }
  const int nodes = *r.gpus / gpus_per_node;
  if (r.nodes && *r.nodes != nodes) {
    throw ValidationError(names("gpus"), fmt::format("{} {} means {} nodes of {} GPUs, but {} "
                                                     "is {}; give one of them",
                                                     names("gpus"), *r.gpus, nodes, gpus_per_node,
                                                     names("nodes"), *r.nodes));
  }
  return nodes;
}

}  // namespace

Cluster load_cluster(const ClusterRequest& request, const FieldNames& names) {
  if (request.spec.empty()) {
    throw ValidationError(names("cluster"),
                          fmt::format("{} is required; give a preset ({}) or a cluster "
                                      "JSON file",
                                      names("cluster"), join(cluster_preset_names(), ", ")));
  }
  if (request.hosts && (*request.hosts < 0 || *request.hosts > MAX_CLUSTER_HOSTS)) {
    throw ValidationError::bad_value(names("hosts"), std::to_string(*request.hosts),
                                     fmt::format("0 to {}", MAX_CLUSTER_HOSTS));
  }
  if (looks_like_path(request.spec)) {
    // The GPUs per node (which a GPU count needs) are only known once the file is read.
    return read_cluster_json(
        request.spec,
        [&](int gpus_per_node) { return resolve_nodes(request, gpus_per_node, names); },
        request.hosts, names);
  }
  const PresetDefinition p = find_preset(request.spec, names("cluster"));
  const int nodes = resolve_nodes(request, p.node.num_gpus(), names).value_or(1);
  std::string name = nodes > 1 ? fmt::format("{} x{}", p.name, nodes) : p.name;
  HostsSpec hosts;
  hosts.count = request.hosts.value_or(0);
  hosts.host = default_host();
  if (hosts.count > 0) name += fmt::format(" +{} host{}", hosts.count, hosts.count == 1 ? "" : "s");
  return build_cluster(name, {NodeGroup{find_gpu(p.gpu), p.node, nodes}}, p.fabric, hosts, names);
}

}  // namespace loom::topo
