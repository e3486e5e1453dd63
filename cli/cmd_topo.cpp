// `loom topo`: what a cluster is made of (GPUs, nodes, devices and links by kind, NVLink
// domains, injection and bisection bandwidth) as a table, JSON or Graphviz DOT; and with
// `--path A B`, the hops between two global ranks with their bottleneck and latency.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <tuple>

#include "cli/cluster_flags.hpp"
#include "cli/commands.hpp"
#include "common/document.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "common/units.hpp"
#include "topologies/cluster.hpp"

namespace loom::cli {
namespace {

// GPUs of type `k` in the cluster.
int gpus_of_type(const topo::Cluster& c, int k) {
  int n = 0;
  for (int r = 0; r < c.num_gpus(); ++r) n += c.gpu_type_of_rank(r) == k ? 1 : 0;
  return n;
}

// Every GPU type with its GPU count (heterogeneous clusters).
OrderedJson gpu_types_json(const topo::Cluster& c) {
  OrderedJson out = OrderedJson::array();
  for (int k = 0; k < c.num_gpu_types(); ++k) {
    const topo::GpuSpec& g = c.gpu_type(k);
    out.push_back(
        {{"name", g.name}, {"display_name", g.display_name}, {"gpus", gpus_of_type(c, k)}});
  }
  return out;
}

struct TopoOptions {
  ClusterFlags cluster;
  std::string format;
  std::vector<int> path;
};

using LinkKey = std::tuple<std::string, std::string, double, double>;  // kind, label, bw, lat

// Duplex links grouped by kind, label, bandwidth and latency (sorted: deterministic).
std::map<LinkKey, int> link_groups(const topo::Cluster& c) {
  std::map<LinkKey, int> groups;
  for (size_t l = 0; l < c.links().size(); l += 2) {
    const auto& link = c.links()[l];
    ++groups[{topo::to_string(link.kind), link.label, link.bandwidth_Bps, link.latency_s}];
  }
  return groups;
}

std::map<topo::VertexKind, int> vertex_counts(const topo::Cluster& c) {
  std::map<topo::VertexKind, int> counts;
  for (const auto& v : c.vertices()) ++counts[v.kind];
  return counts;
}

std::string ratio(double r) {
  return fmt::format("{:g}:1", r);
}

int run_summary(const topo::Cluster& c, Format format) {
  const double injection = c.injection_bandwidth_Bps(0);
  const double bisection = c.bisection_bandwidth_Bps();
  const std::map<topo::VertexKind, int> counts = vertex_counts(c);
  auto count_kind = [&](topo::VertexKind kind) {
    auto it = counts.find(kind);
    return it == counts.end() ? 0 : it->second;
  };
  if (format == Format::JSON) {
    OrderedJson results;
    results["gpus"] = c.num_gpus();
    results["nodes"] = c.num_nodes();
    results["gpus_per_node"] = c.gpus_per_node();
    results["gpu"] = {{"name", c.gpu.name},
                      {"display_name", c.gpu.display_name},
                      {"hbm_bytes", c.gpu.hbm_bytes},
                      {"bf16_flops", c.gpu.bf16_flops},
                      {"source", c.gpu.source}};
    if (c.num_gpu_types() > 1) results["gpu_types"] = gpu_types_json(c);
    if (c.num_hosts() > 0) {
      results["hosts"] = {{"count", c.num_hosts()},
                          {"first_rank", c.num_gpus()},
                          {"name", c.host.name},
                          {"memory_bandwidth_Bps", c.host.memory_bandwidth_Bps},
                          {"memory_bytes", c.host.memory_bytes},
                          {"source", c.host.source}};
    }
    OrderedJson vertices = OrderedJson::object();
    for (auto [kind, n] : counts) vertices[topo::to_string(kind)] = n;
    results["vertices"] = vertices;
    OrderedJson links = OrderedJson::array();
    for (const auto& [key, n] : link_groups(c)) {
      links.push_back({{"kind", std::get<0>(key)},
                       {"label", std::get<1>(key)},
                       {"count", n},
                       {"bandwidth_Bps", std::get<2>(key)},
                       {"latency_s", std::get<3>(key)}});
    }
    results["links"] = links;
    results["nvlink_domain_size"] = c.nvlink_domain_size(0);
    results["nvlink_domains"] = c.num_nvlink_domains();
    results["nvlink_bandwidth_Bps"] = c.nvlink_bandwidth_Bps(0);
    results["injection_bandwidth_Bps"] = injection;
    results["bisection_bandwidth_Bps"] = bisection;
    if (c.has_fabric()) {
      results["fabric"] = {{"topology", "rail-optimised fat-tree"},
                           {"link", c.fabric_link},
                           {"leaves", count_kind(topo::VertexKind::LEAF)},
                           {"spines", count_kind(topo::VertexKind::SPINE)},
                           {"oversubscription", c.oversubscription}};
    } else {
      results["fabric"] = nullptr;
    }
    OrderedJson context;
    context["cluster"] = c.name;
    std::cout << render_document(make_document(context, results));
    return 0;
  }
  std::string out;
  out += fmt::format("cluster {}: {} GPUs on {} node{} ({} per node)\n", c.name, c.num_gpus(),
                     c.num_nodes(), c.num_nodes() == 1 ? "" : "s", c.gpus_per_node());
  out += fmt::format("GPU: {} ({}), {:g} GB HBM ({} usable), {} bf16 dense\n", c.gpu.display_name,
                     c.gpu.name, c.gpu.hbm_datasheet_bytes / 1e9, format_bytes(c.gpu.hbm_bytes),
                     format_flop_rate(c.gpu.bf16_flops));
  for (int k = 1; k < c.num_gpu_types(); ++k) {
    const topo::GpuSpec& g = c.gpu_type(k);
    out += fmt::format("GPU: {} ({}), {:g} GB HBM, {} bf16 dense ({} GPUs)\n", g.display_name,
                       g.name, g.hbm_datasheet_bytes / 1e9, format_flop_rate(g.bf16_flops),
                       gpus_of_type(c, k));
  }
  if (c.num_hosts() > 0) {
    out += fmt::format("hosts: {} x {} ({} DRAM), ranks {}..{}\n", c.num_hosts(), c.host.name,
                       format_bandwidth(c.host.memory_bandwidth_Bps), c.num_gpus(),
                       c.num_gpus() + c.num_hosts() - 1);
  }
  if (c.nvlink_bandwidth_Bps(0) > 0) {
    out += fmt::format("NVLink domain: {} GPU{} ({} domain{}), {} per GPU per direction\n",
                       c.nvlink_domain_size(0), c.nvlink_domain_size(0) == 1 ? "" : "s",
                       c.num_nvlink_domains(), c.num_nvlink_domains() == 1 ? "" : "s",
                       format_bandwidth(c.nvlink_bandwidth_Bps(0)));
  } else {
    out += "NVLink: none (GPUs talk over PCIe and the network)\n";
  }
  if (c.has_fabric()) {
    out += fmt::format(
        "fabric: {} rail-optimised fat-tree, {} leaves (one per rail), {} spines, "
        "oversubscription {}\n",
        c.fabric_link, count_kind(topo::VertexKind::LEAF), count_kind(topo::VertexKind::SPINE),
        ratio(c.oversubscription));
    out +=
        fmt::format("injection bandwidth: {} per GPU per direction\n", format_bandwidth(injection));
  } else {
    out += "fabric: none (single node)\n";
  }
  out += fmt::format("bisection bandwidth: {} per direction\n\n", format_bandwidth(bisection));
  Table vertices({"vertex kind", "count"});
  vertices.align_left(0);
  for (auto [kind, n] : counts) vertices.add_row({topo::to_string(kind), std::to_string(n)});
  out += vertices.render() + "\n";
  Table links({"link kind", "label", "count", "bandwidth/dir", "latency"});
  links.align_left(0);
  links.align_left(1);
  for (const auto& [key, n] : link_groups(c)) {
    links.add_row({std::get<0>(key), std::get<1>(key), std::to_string(n),
                   format_bandwidth(std::get<2>(key)), format_time(std::get<3>(key))});
  }
  out += links.render();
  std::cout << out;
  return 0;
}

std::string dot_shape(topo::VertexKind kind) {
  switch (kind) {
    case topo::VertexKind::GPU:
      return "box, style=filled, fillcolor=\"#76b900\"";
    case topo::VertexKind::NVSWITCH:
      return "hexagon, style=filled, fillcolor=\"#b3d67a\"";
    case topo::VertexKind::PCIE_SWITCH:
      return "diamond";
    case topo::VertexKind::CPU:
      return "box3d";
    case topo::VertexKind::NIC:
      return "ellipse, style=filled, fillcolor=\"#9ecae1\"";
    case topo::VertexKind::LEAF:
    case topo::VertexKind::SPINE:
      return "doubleoctagon, style=filled, fillcolor=\"#fdd49e\"";
  }
  return "box";
}

int run_dot(const topo::Cluster& c) {
  std::string out = fmt::format("// {} (loom topo --format dot); render: dot -Tsvg\n", c.name);
  out += "graph loom {\n  graph [overlap=false, fontname=\"Helvetica\"];\n";
  out += "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontsize=8];\n";
  std::map<int, std::vector<topo::VertexId>> by_node;
  std::vector<int> rank_of(c.vertices().size(), -1);
  for (int r = 0; r < c.num_gpus(); ++r)
    rank_of[static_cast<size_t>(c.gpus()[static_cast<size_t>(r)])] = r;
  for (size_t v = 0; v < c.vertices().size(); ++v)
    by_node[c.vertices()[v].node].push_back(static_cast<topo::VertexId>(v));
  for (const auto& [node, ids] : by_node) {
    const std::string indent = node >= 0 ? "    " : "  ";
    if (node >= 0)
      out += fmt::format("  subgraph cluster_node{} {{\n    label=\"node {}\";\n", node, node);
    for (auto id : ids) {
      const auto& v = c.vertex(id);
      std::string label = v.name.substr(v.name.find('/') + 1);
      if (v.kind == topo::VertexKind::GPU)
        label += fmt::format("\\nrank {}", rank_of[static_cast<size_t>(id)]);
      if (v.in_switch_reduce) label += "\\nNVLS";
      out += fmt::format("{}\"{}\" [label=\"{}\", shape={}];\n", indent, v.name, label,
                         dot_shape(v.kind));
    }
    if (node >= 0) out += "  }\n";
  }
  for (size_t l = 0; l < c.links().size(); l += 2) {
    const auto& link = c.links()[l];
    out += fmt::format("  \"{}\" -- \"{}\" [label=\"{}\\n{}\"];\n", c.vertex(link.from).name,
                       c.vertex(link.to).name, link.label, format_bandwidth(link.bandwidth_Bps));
  }
  out += "}\n";
  std::cout << out;
  return 0;
}

int run_path(const topo::Cluster& c, int a, int b, Format format) {
  if (a == b)
    throw ValidationError("--path", fmt::format("--path {} {}: give two different ranks", a, b));
  for (int r : {a, b}) {
    if (r < 0 || r >= c.num_gpus()) {
      throw ValidationError("--path", fmt::format("--path: rank {} is out of range; {} has ranks "
                                                  "0 to {}",
                                                  r, c.name, c.num_gpus() - 1));
    }
  }
  const topo::Path p = c.route_ranks(a, b);
  if (format == Format::JSON) {
    OrderedJson hops = OrderedJson::array();
    for (auto l : p.links) {
      const auto& link = c.link(l);
      hops.push_back({{"from", c.vertex(link.from).name},
                      {"to", c.vertex(link.to).name},
                      {"kind", topo::to_string(link.kind)},
                      {"label", link.label},
                      {"bandwidth_Bps", link.bandwidth_Bps},
                      {"latency_s", link.latency_s}});
    }
    OrderedJson results;
    results["path"] = {{"from_rank", a},
                       {"to_rank", b},
                       {"hops", hops},
                       {"bandwidth_Bps", p.bandwidth_Bps},
                       {"latency_s", p.latency_s}};
    OrderedJson context;
    context["cluster"] = c.name;
    std::cout << render_document(make_document(context, results));
    return 0;
  }
  Table t({"hop", "from", "to", "kind", "link", "bandwidth/dir", "latency"});
  for (size_t i = 1; i <= 4; ++i) t.align_left(i);
  int hop = 0;
  for (auto l : p.links) {
    const auto& link = c.link(l);
    t.add_row({std::to_string(++hop), c.vertex(link.from).name, c.vertex(link.to).name,
               topo::to_string(link.kind), link.label, format_bandwidth(link.bandwidth_Bps),
               format_time(link.latency_s)});
  }
  std::cout << fmt::format("path rank {} -> rank {} on {}\n", a, b, c.name) << t.render()
            << fmt::format("bottleneck {} per direction, latency {}\n",
                           format_bandwidth(p.bandwidth_Bps), format_time(p.latency_s));
  return 0;
}

int run_topo(const TopoOptions& o) {
  const topo::Cluster cluster = resolve_cluster(o.cluster);
  const Format format = parse_format(o.format);
  if (!o.path.empty()) {
    if (format == Format::DOT)
      throw ValidationError("--format", "--format dot draws the whole cluster; drop --path");
    return run_path(cluster, o.path[0], o.path[1], format);
  }
  if (format == Format::DOT) return run_dot(cluster);
  return run_summary(cluster, format);
}

}  // namespace

Command add_topo_command(CLI::App& root) {
  auto options = std::make_shared<TopoOptions>();
  CLI::App* app = root.add_subcommand(
      "topo",
      "the cluster's devices and links, NVLink domains, injection and bisection "
      "bandwidth; --path A B routes between two ranks");
  add_cluster_flags(*app, options->cluster, true);
  add_format_flag(*app, options->format, {"table", "json", "dot"});
  app->add_option("--path", options->path, "two global ranks: show the route from A to B")
      ->expected(2);
  Command command;
  command.app = app;
  command.run = [options]() { return run_topo(*options); };
  return command;
}

}  // namespace loom::cli
