// The cluster JSON reader (format in docs/clusters.md): a node template (a preset's node or
// explicit vertices and links) replicated over N nodes plus a fabric, or an explicit graph.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "topologies/cluster_builder.hpp"
#include "topologies/cluster_presets.hpp"
#include "topologies/gpu_json.hpp"
#include "topologies/link_catalog.hpp"

namespace loom::topo {
namespace {

// Bounds on hand-written values: generous for real hardware, small enough that a typo
// cannot build a graph that exhausts memory.
constexpr int MAX_LINK_LANES = 1024;
constexpr int MAX_SPINES = 4096;
constexpr double MAX_OVERSUBSCRIPTION = 64;

VertexKind parse_vertex_kind(const std::string& s) {
  const auto& names = vertex_kind_names();
  auto it = std::find(names.begin(), names.end(), s);
  return static_cast<VertexKind>(it - names.begin());
}

struct RawVertex {
  NodeTemplate::V v;
  int node = -1;
};

RawVertex read_vertex(ObjectReader& r, bool allow_node) {
  RawVertex out;
  (void)r.raw("name");  // required
  out.v.name = r.get_name_or("name", "");
  if (out.v.name.empty() || out.v.name.find('/') != std::string::npos)
    r.fail("name", fmt::format("'{}'", out.v.name), "a non-empty name without '/'");
  out.v.kind = parse_vertex_kind(r.get_enum("kind", vertex_kind_names()));
  out.v.in_switch_reduce = r.get_bool_or("in_switch_reduce", false);
  if (out.v.in_switch_reduce && out.v.kind != VertexKind::NVSWITCH)
    r.fail("in_switch_reduce", "true", "only on an nvswitch vertex");
  if (allow_node) {
    // Leaves and spines sit outside every node (-1, the default); devices inside one.
    const bool fabric = out.v.kind == VertexKind::LEAF || out.v.kind == VertexKind::SPINE;
    out.node = fabric
                   ? static_cast<int>(r.get_int_in_range_or("node", -1, -1, -1))
                   : static_cast<int>(r.get_int_in_range_or("node", 0, MAX_CLUSTER_NODES - 1, 0));
  }
  r.finish();
  return out;
}

// A link: {"a", "b", "type": catalog key, "lanes"?, "bandwidth"? (total per direction),
// "latency"?}; `known` checks the endpoint names.
template <typename Known>
NodeTemplate::L read_link(ObjectReader& r, Known known) {
  NodeTemplate::L l;
  l.a = r.get_string("a");
  l.b = r.get_string("b");
  for (const auto& [key, name] : {std::pair{"a", l.a}, std::pair{"b", l.b}}) {
    if (!known(name))
      r.fail(key, fmt::format("'{}'", name), "the name of a vertex defined in \"vertices\"");
  }
  if (l.a == l.b) r.fail("b", fmt::format("'{}'", l.b), "a vertex other than \"a\"");
  const std::string type = r.get_enum("type", link_type_names());
  const LinkSpec& spec = find_link_type(type);
  const int lanes =
      static_cast<int>(r.get_int_in_range_or("lanes", 1, MAX_LINK_LANES, spec.default_lanes));
  l.kind = spec.kind;
  l.bandwidth_Bps =
      r.get_quantity_or("bandwidth", Unit::BANDWIDTH, spec.lane_bandwidth_Bps * lanes);
  if (!(l.bandwidth_Bps > 0))
    r.fail("bandwidth", json_excerpt(r.raw("bandwidth")), "a positive bandwidth, e.g. \"450GBps\"");
  l.latency_s = r.get_quantity_or("latency", Unit::TIME, spec.latency_s);
  l.label = lanes > 1 ? fmt::format("{} x{}", spec.label, lanes) : spec.label;
  r.finish();
  return l;
}

using LinkPairs = std::set<std::pair<std::string, std::string>>;

// Fails on a second link between the same two vertices (in either order).
void check_first_link(LinkPairs& seen, ObjectReader& lr, const NodeTemplate::L& l) {
  if (!seen.emplace(std::minmax(l.a, l.b)).second) {
    lr.fail("b", fmt::format("'{}' (a second {} - {} link)", l.b, l.a, l.b),
            "one link per pair of vertices; give a wider link with \"lanes\" or \"bandwidth\"");
  }
}

const nlohmann::json& array_of(ObjectReader& r, std::string_view key) {
  const auto& v = r.raw(key);
  if (!v.is_array() || v.empty()) r.fail(key, json_excerpt(v), "a non-empty JSON array");
  return v;
}

NodeTemplate read_template(ObjectReader& r, const std::string& file) {
  NodeTemplate t;
  std::map<std::string, int, std::less<>> names;
  const auto& vs = array_of(r, "vertices");
  for (size_t i = 0; i < vs.size(); ++i) {
    ObjectReader vr(vs[i], file, fmt::format("{}/{}", r.pointer_of("vertices"), i));
    RawVertex v = read_vertex(vr, false);
    if (v.v.kind == VertexKind::LEAF || v.v.kind == VertexKind::SPINE)
      vr.fail("kind", fmt::format("'{}'", to_string(v.v.kind)),
              "a device inside a node (leaves and spines belong to the fabric)");
    if (!names.emplace(v.v.name, 0).second)
      vr.fail("name", fmt::format("'{}'", v.v.name), "a name not used before in this node");
    t.vertices.push_back(v.v);
  }
  const auto& ls = array_of(r, "links");
  LinkPairs seen;
  for (size_t i = 0; i < ls.size(); ++i) {
    ObjectReader lr(ls[i], file, fmt::format("{}/{}", r.pointer_of("links"), i));
    NodeTemplate::L l = read_link(lr, [&](const std::string& n) { return names.count(n) != 0; });
    check_first_link(seen, lr, l);
    t.links.push_back(std::move(l));
  }
  return t;
}

FabricSpec read_fabric(ObjectReader& r) {
  FabricSpec f;
  f.link = r.get_enum("link", link_type_names());
  const LinkSpec& spec = find_link_type(f.link);
  if (spec.kind != LinkKind::INFINIBAND && spec.kind != LinkKind::ROCE &&
      spec.kind != LinkKind::ETHERNET)
    r.fail("link", fmt::format("'{}'", f.link), "a network link type (ib-*, roce-*)");
  f.bandwidth_Bps = r.get_quantity_or("bandwidth", Unit::BANDWIDTH, 0);
  if (r.has("bandwidth") && !(f.bandwidth_Bps > 0))
    r.fail("bandwidth", json_excerpt(r.raw("bandwidth")), "a positive bandwidth, e.g. \"400Gbps\"");
  f.latency_s = r.get_quantity_or("latency", Unit::TIME, -1);
  f.spines = static_cast<int>(r.get_int_in_range_or("spines", 1, MAX_SPINES, 0));
  f.oversubscription = r.get_number_or("oversubscription", 1);
  if (!(f.oversubscription >= 1 && f.oversubscription <= MAX_OVERSUBSCRIPTION))
    r.fail(
        "oversubscription", json_excerpt(r.raw("oversubscription")),
        fmt::format("a ratio from 1 to {} (downlink : uplink; 2 means 2:1)", MAX_OVERSUBSCRIPTION));
  r.finish();
  return f;
}

GpuSpec read_gpu(ObjectReader& r, const std::string& file, const std::string& fallback) {
  if (!r.has("gpu")) {
    if (fallback.empty()) r.raw("gpu");  // throws missing_key
    return find_gpu(fallback);
  }
  const auto& g = r.raw("gpu");
  if (g.is_string()) {
    try {
      return find_gpu(g.get<std::string>(), r.pointer_of("gpu"));
    } catch (const ValidationError& e) {
      throw ConfigError(file, r.pointer_of("gpu"), fmt::format("{}: {}", file, e.what()));
    }
  }
  ObjectReader gr = r.child("gpu");
  return read_gpu_spec(gr);
}

Cluster read_explicit(ObjectReader& r, const std::string& file, const GpuSpec& gpu,
                      const NodesResolver& resolve_nodes, const std::string& name,
                      const FieldNames& names) {
  Cluster cluster;
  cluster.name = name;
  cluster.gpu = gpu;
  const auto& vs = array_of(r, "vertices");
  std::map<VertexKind, std::map<int, int>> counts;  // kind -> node -> next local index
  int max_node = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    ObjectReader vr(vs[i], file, fmt::format("/vertices/{}", i));
    RawVertex v = read_vertex(vr, true);
    if (cluster.find_vertex(v.v.name) >= 0)
      vr.fail("name", fmt::format("'{}'", v.v.name), "a name not used before");
    if (v.v.kind == VertexKind::GPU && v.node < 0)
      vr.fail("node", "-1", "a node index >= 0 for a GPU");
    Vertex vertex;
    vertex.kind = v.v.kind;
    vertex.name = v.v.name;
    vertex.node = v.node;
    vertex.local_index = counts[v.v.kind][v.node]++;
    vertex.in_switch_reduce = v.v.in_switch_reduce;
    max_node = std::max(max_node, v.node);
    cluster.add_vertex(std::move(vertex));
  }
  if (cluster.gpus().empty()) r.fail("vertices", "(no GPU)", "at least one vertex of kind \"gpu\"");
  // The cluster is homogeneous: nodes 0..max each hold the same number of GPUs.
  const auto& gpus_by_node = counts[VertexKind::GPU];
  auto gpus_on = [&](int n) {
    auto it = gpus_by_node.find(n);
    return it == gpus_by_node.end() ? 0 : it->second;
  };
  const int want = gpus_on(0);
  for (int n = 0; n <= max_node; ++n) {
    const int have = gpus_on(n);
    if (have != want || have == 0) {
      r.fail("vertices", fmt::format("(node {} has {} GPUs, node 0 has {})", n, have, want),
             "nodes numbered 0, 1, ... without gaps, each with the same number of GPUs");
    }
  }
  const std::optional<int> nodes = resolve_nodes(want);
  if (nodes && *nodes != max_node + 1) {
    throw ValidationError(names("nodes"),
                          fmt::format("{} lists explicit vertices on {} nodes; {} / {} cannot "
                                      "resize it (asked for {})",
                                      file, max_node + 1, names("nodes"), names("gpus"), *nodes));
  }
  const auto& ls = array_of(r, "links");
  LinkPairs seen;
  for (size_t i = 0; i < ls.size(); ++i) {
    ObjectReader lr(ls[i], file, fmt::format("/links/{}", i));
    auto l = read_link(lr, [&](const std::string& n) { return cluster.find_vertex(n) >= 0; });
    check_first_link(seen, lr, l);
    cluster.add_duplex_link(cluster.find_vertex(l.a), cluster.find_vertex(l.b), l.kind,
                            l.bandwidth_Bps, l.latency_s, l.label);
  }
  cluster.set_num_nodes(max_node + 1);
  cluster.check_connected();
  cluster.finalize();
  return cluster;
}

// A node template: a preset's node (its GPU and fabric the defaults) or explicit vertices.
struct NodeSource {
  NodeTemplate node;
  std::string preset_gpu;  // empty for an explicit node
  FabricSpec fabric;       // the preset's; empty for an explicit node
};

NodeSource read_node(ObjectReader& nr, const std::string& path) {
  NodeSource out;
  if (nr.has("preset")) {
    PresetDefinition p;
    try {
      p = find_preset(nr.get_string("preset"), nr.pointer_of("preset"));
    } catch (const ValidationError& e) {
      throw ConfigError(path, nr.pointer_of("preset"), fmt::format("{}: {}", path, e.what()));
    }
    out.node = p.node;
    out.preset_gpu = p.gpu;
    out.fabric = p.fabric;
  } else {
    out.node = read_template(nr, path);
  }
  nr.finish();
  return out;
}

// The groups of nodes and the fabric the file's node templates default to.
struct ClusterParts {
  std::vector<NodeGroup> groups;
  FabricSpec fabric;
};

// One group's "nodes", "node" and "gpu" from `r`: a single-group file's top level, or one
// entry of "node_groups". `resolve_nodes`, when given, may replace the file's node count.
ClusterParts read_group(ObjectReader& r, const std::string& path,
                        const NodesResolver* resolve_nodes) {
  const int file_nodes = static_cast<int>(r.get_int_in_range_or("nodes", 1, MAX_CLUSTER_NODES, 1));
  ObjectReader nr = r.child("node");
  NodeSource src = read_node(nr, path);
  if (src.node.num_gpus() == 0)
    r.fail("node", "(no GPU)", "a node with at least one vertex of kind \"gpu\"");
  const int n =
      resolve_nodes ? (*resolve_nodes)(src.node.num_gpus()).value_or(file_nodes) : file_nodes;
  GpuSpec gpu = read_gpu(r, path, src.preset_gpu);
  return {{NodeGroup{std::move(gpu), std::move(src.node), n}}, src.fabric};
}

// "node_groups": [{"nodes": N, "node": {...}, "gpu"?: ...}, ...]: nodes of different GPUs (or
// node designs) under one fabric; the first group's preset fabric is the default.
ClusterParts read_node_groups(ObjectReader& r, const std::string& path,
                              const NodesResolver& resolve_nodes, const FieldNames& names) {
  for (const char* key : {"node", "nodes", "gpu"}) {
    if (r.has(key)) r.fail(key, "(with node_groups)", "\"node_groups\" or a single \"node\"");
  }
  const auto& gs = array_of(r, "node_groups");
  ClusterParts out;
  for (size_t i = 0; i < gs.size(); ++i) {
    ObjectReader gr(gs[i], path, fmt::format("{}/{}", r.pointer_of("node_groups"), i));
    ClusterParts group = read_group(gr, path, nullptr);
    gr.finish();
    if (i == 0) out.fabric = group.fabric;
    out.groups.push_back(std::move(group.groups.front()));
  }
  if (resolve_nodes(out.groups.front().node.num_gpus())) {
    throw ValidationError(names("nodes"),
                          fmt::format("{} gives its node groups' sizes; {} / {} cannot resize it",
                                      path, names("nodes"), names("gpus")));
  }
  return out;
}

// "hosts": {"count", "nics"?, "memory_bandwidth"?, "memory"?, "name"?}; unset figures are
// default_host()'s.
HostsSpec read_hosts(ObjectReader& r) {
  HostsSpec h;
  h.host = default_host();
  h.count = static_cast<int>(r.get_int_in_range_or("count", 0, MAX_CLUSTER_HOSTS, 1));
  h.nics = static_cast<int>(r.get_int_in_range_or("nics", 1, 64, 1));
  const bool custom = r.has("memory_bandwidth") || r.has("memory");
  h.host.memory_bandwidth_Bps =
      r.get_quantity_or("memory_bandwidth", Unit::BANDWIDTH, h.host.memory_bandwidth_Bps);
  if (!(h.host.memory_bandwidth_Bps > 0))
    r.fail("memory_bandwidth", r.raw("memory_bandwidth").dump(), "a positive bandwidth");
  h.host.memory_bytes = r.get_quantity_or("memory", Unit::BYTES, h.host.memory_bytes);
  if (!(h.host.memory_bytes > 0)) r.fail("memory", r.raw("memory").dump(), "a positive size");
  if (custom) h.host.source = "cluster file";
  h.host.name = r.get_name_or("name", custom ? "custom host" : h.host.name);
  r.finish();
  return h;
}

}  // namespace

Cluster read_cluster_json(const std::string& path, const NodesResolver& resolve_nodes,
                          std::optional<int> hosts, const FieldNames& names) {
  return parse_cluster_json(read_text_file(path, "cluster"), path, resolve_nodes, hosts, names);
}

Cluster parse_cluster_json(const std::string& text, const std::string& path,
                           const NodesResolver& resolve_nodes, std::optional<int> hosts,
                           const FieldNames& names) {
  nlohmann::json doc = parse_json_text(text, path);
  ObjectReader r(doc, path, "");
  r.allow({"comment", "$schema"});
  // Without a name the cluster is named after its file, printable (a path may hold any byte).
  std::string name = r.get_name_or("name", printable(path, MAX_NAME_BYTES));
  try {
    if (r.has("vertices") || r.has("links")) {
      if (r.has("node"))
        r.fail("node", "(with vertices)", "either \"node\" or \"vertices\"/\"links\"");
      if (r.has("fabric"))
        r.fail("fabric", "(with vertices)", "fabric only with a \"node\" template");
      if (r.has("nodes")) r.fail("nodes", "(with vertices)", "nodes only with a \"node\" template");
      for (const char* key : {"node_groups", "hosts"}) {
        if (r.has(key)) r.fail(key, "(with vertices)", "node groups and hosts need node templates");
      }
      if (hosts && *hosts > 0) {
        throw ValidationError(names("hosts"),
                              fmt::format("{}: {} lists explicit vertices; {} adds hosts to node "
                                          "templates only",
                                          path, names("hosts"), names("hosts")));
      }
      GpuSpec gpu = read_gpu(r, path, "");
      Cluster c = read_explicit(r, path, gpu, resolve_nodes, name, names);
      r.finish();
      return c;
    }
    ClusterParts parts = r.has("node_groups") ? read_node_groups(r, path, resolve_nodes, names)
                                              : read_group(r, path, &resolve_nodes);
    if (r.has("fabric")) {
      ObjectReader fr = r.child("fabric");
      parts.fabric = read_fabric(fr);
    }
    HostsSpec host_spec;
    host_spec.host = default_host();
    if (r.has("hosts")) {
      ObjectReader hr = r.child("hosts");
      host_spec = read_hosts(hr);
    }
    if (hosts) host_spec.count = *hosts;
    r.finish();
    int n = 0;
    for (const NodeGroup& g : parts.groups) n += g.nodes;
    if (n > 1) name = fmt::format("{} x{}", name, n);
    if (host_spec.count > 0)
      name += fmt::format(" +{} host{}", host_spec.count, host_spec.count == 1 ? "" : "s");
    return build_cluster(name, parts.groups, parts.fabric, host_spec, names);
  } catch (const ValidationError& e) {
    // Graph-level problems (disconnected, duplicate names) get the file name in front; the
    // requested size's own errors pass through.
    if (std::string(e.what()).find(path) != std::string::npos || e.field() == names("nodes") ||
        e.field() == names("gpus") || e.field() == names("hosts"))
      throw;
    throw ConfigError(path, "", fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace loom::topo
