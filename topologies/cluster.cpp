#include "topologies/cluster.hpp"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <deque>
#include <limits>

#include "common/error.hpp"

namespace loom::topo {

std::string to_string(VertexKind kind) {
  switch (kind) {
    case VertexKind::GPU:
      return "gpu";
    case VertexKind::NVSWITCH:
      return "nvswitch";
    case VertexKind::PCIE_SWITCH:
      return "pcie-switch";
    case VertexKind::CPU:
      return "cpu";
    case VertexKind::NIC:
      return "nic";
    case VertexKind::LEAF:
      return "leaf";
    case VertexKind::SPINE:
      return "spine";
  }
  return "?";
}

std::string to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::NVLINK:
      return "nvlink";
    case LinkKind::PCIE:
      return "pcie";
    case LinkKind::CPU_INTERCONNECT:
      return "cpu-interconnect";
    case LinkKind::INFINIBAND:
      return "infiniband";
    case LinkKind::ROCE:
      return "roce";
    case LinkKind::ETHERNET:
      return "ethernet";
  }
  return "?";
}

VertexId Cluster::add_vertex(Vertex vertex) {
  if (find_vertex(vertex.name) >= 0) {
    throw ValidationError(
        "vertex", fmt::format("vertex '{}' is defined twice; names must be unique", vertex.name));
  }
  auto id = static_cast<VertexId>(vertices_.size());
  if (vertex.kind == VertexKind::GPU) gpus_.push_back(id);
  vertices_.push_back(std::move(vertex));
  out_.emplace_back();
  return id;
}

VertexId Cluster::find_vertex(const std::string& name) const {
  for (size_t i = 0; i < vertices_.size(); ++i)
    if (vertices_[i].name == name) return static_cast<VertexId>(i);
  return -1;
}

LinkId Cluster::add_duplex_link(VertexId a, VertexId b, LinkKind kind, double bandwidth_Bps,
                                double latency_s, std::string label) {
  auto n = static_cast<VertexId>(vertices_.size());
  if (a < 0 || a >= n || b < 0 || b >= n || a == b) {
    throw ValidationError("link", fmt::format("link {}-{} joins an undefined vertex; define both "
                                              "ends first",
                                              a, b));
  }
  if (!(bandwidth_Bps > 0)) {
    throw ValidationError("link", fmt::format("link {} - {}: bandwidth must be positive",
                                              vertices_[a].name, vertices_[b].name));
  }
  auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{a, b, kind, bandwidth_Bps, latency_s, label});
  links_.push_back(Link{b, a, kind, bandwidth_Bps, latency_s, std::move(label)});
  out_[a].push_back(id);
  out_[b].push_back(id + 1);
  return id;
}

VertexId Cluster::gpu_vertex(int rank) const {
  if (rank < 0 || rank >= num_gpus()) {
    throw ValidationError(
        "rank",
        fmt::format("rank {} is out of range; this cluster has ranks 0..{}", rank, num_gpus() - 1));
  }
  return gpus_[static_cast<size_t>(rank)];
}

namespace {
// A cheap, deterministic mix of the endpoints for ECMP tie-breaking.
std::uint64_t ecmp_hash(VertexId src, VertexId dst, int hop) {
  std::uint64_t x = (static_cast<std::uint64_t>(src) << 32) ^ static_cast<std::uint64_t>(dst) ^
                    (static_cast<std::uint64_t>(hop) * 0x9E3779B97F4A7C15ULL);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}
}  // namespace

Path Cluster::route(VertexId src, VertexId dst) const {
  Path path;
  if (src == dst) return path;
  // Distances to dst by BFS over reversed edges, then walk forward from src choosing among
  // the equal-cost next hops by hash: every shortest path is reachable, the choice is fixed.
  const auto n = vertices_.size();
  std::vector<int> dist(n, std::numeric_limits<int>::max());
  std::vector<std::vector<LinkId>> in(n);
  for (size_t l = 0; l < links_.size(); ++l) in[links_[l].to].push_back(static_cast<LinkId>(l));
  std::deque<VertexId> queue{dst};
  dist[dst] = 0;
  while (!queue.empty()) {
    VertexId v = queue.front();
    queue.pop_front();
    if (v == src) break;
    for (LinkId l : in[v]) {
      VertexId u = links_[l].from;
      // Only GPUs at the ends: traffic never transits through another GPU by default.
      if (dist[u] != std::numeric_limits<int>::max()) continue;
      if (vertices_[u].kind == VertexKind::GPU && u != src) continue;
      dist[u] = dist[v] + 1;
      queue.push_back(u);
    }
  }
  if (dist[src] == std::numeric_limits<int>::max()) {
    throw ValidationError("route", fmt::format("no path from {} to {}; the graph is disconnected",
                                               vertices_[src].name, vertices_[dst].name));
  }
  path.bandwidth_Bps = std::numeric_limits<double>::infinity();
  VertexId v = src;
  int hop = 0;
  while (v != dst) {
    std::vector<LinkId> next;
    for (LinkId l : out_[v])
      if (dist[links_[l].to] == dist[v] - 1) next.push_back(l);
    LinkId chosen = next[ecmp_hash(src, dst, hop) % next.size()];
    path.links.push_back(chosen);
    path.bandwidth_Bps = std::min(path.bandwidth_Bps, links_[chosen].bandwidth_Bps);
    path.latency_s += links_[chosen].latency_s;
    v = links_[chosen].to;
    ++hop;
  }
  return path;
}

void Cluster::check_connected() const {
  if (vertices_.empty()) return;
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Graph g(vertices_.size());
  for (size_t l = 0; l < links_.size(); l += 2) boost::add_edge(links_[l].from, links_[l].to, g);
  std::vector<boost::default_color_type> color(vertices_.size(), boost::white_color);
  boost::breadth_first_visit(g, boost::vertex(0, g),
                             boost::visitor(boost::default_bfs_visitor())
                                 .color_map(boost::make_iterator_property_map(
                                     color.begin(), boost::get(boost::vertex_index, g))));
  for (size_t v = 0; v < vertices_.size(); ++v) {
    if (color[v] == boost::white_color) {
      throw ValidationError("links",
                            fmt::format("vertex '{}' is not connected to '{}'; add a link to it",
                                        vertices_[v].name, vertices_[0].name));
    }
  }
}

}  // namespace loom::topo
