#include "topologies/cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "common/error.hpp"
#include "common/limits.hpp"

namespace loom::topo {

const std::vector<std::string>& vertex_kind_names() {
  static const std::vector<std::string> names = {"gpu", "nvswitch", "pcie-switch", "cpu",
                                                 "nic", "leaf",     "spine"};
  return names;
}

std::string to_string(VertexKind kind) {
  return vertex_kind_names().at(static_cast<size_t>(kind));
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

namespace {

using Cost = std::int64_t;
constexpr Cost INF = std::numeric_limits<Cost>::max() / 4;

// Lexicographic (latency in ps, hops): a hop adds 1 below the picosecond.
Cost link_cost(const Link& l) {
  return std::llround(l.latency_s * 1e12) * 64 + 1;
}

// A cheap, deterministic mix of the endpoints for ECMP tie-breaking.
std::uint64_t ecmp_hash(VertexId src, VertexId dst, int step) {
  std::uint64_t x = (static_cast<std::uint64_t>(src) << 32) ^ static_cast<std::uint64_t>(dst) ^
                    (static_cast<std::uint64_t>(step) * 0x9E3779B97F4A7C15ULL);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

// Everything routing needs, built once per cluster (finalize) and shared by copies.
struct RoutingIndex {
  std::vector<std::vector<LinkId>> in;               // in-links per vertex
  std::vector<Cost> cost;                            // per link
  std::vector<std::vector<VertexId>> node_vertices;  // per node
  std::vector<int> pos;                              // vertex -> index in its node (or fabric)
  std::vector<std::vector<LinkId>> egress;           // per node: node vertex -> fabric links
  std::vector<std::vector<LinkId>> ingress;          // per node: fabric -> node vertex links
  std::vector<VertexId> fabric;                      // vertices with node < 0
  std::vector<std::vector<Cost>> to_fabric;          // [t][u]: cost u -> t inside the fabric
  std::vector<int> domain_of_rank;
  std::vector<std::vector<int>> domain_ranks;
};

VertexId Cluster::add_vertex(Vertex vertex) {
  if (by_name_.count(vertex.name) != 0) {
    throw ValidationError(
        "vertex", fmt::format("vertex '{}' is defined twice; names must be unique", vertex.name));
  }
  if (static_cast<std::int64_t>(vertices_.size()) >= MAX_TOPOLOGY_VERTICES) {
    throw ValidationError("vertex", fmt::format("the cluster has more than {} vertices, loom's "
                                                "limit (MAX_TOPOLOGY_VERTICES in "
                                                "common/limits.hpp, docs/limits.md); describe a "
                                                "smaller cluster",
                                                MAX_TOPOLOGY_VERTICES));
  }
  invalidate();
  auto id = static_cast<VertexId>(vertices_.size());
  if (vertex.kind == VertexKind::GPU) gpus_.push_back(id);
  by_name_.emplace(vertex.name, id);
  vertices_.push_back(std::move(vertex));
  out_.emplace_back();
  return id;
}

VertexId Cluster::find_vertex(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

LinkId Cluster::add_duplex_link(VertexId a, VertexId b, LinkKind kind, double bandwidth_Bps,
                                double latency_s, std::string label) {
  auto n = static_cast<VertexId>(vertices_.size());
  if (a < 0 || a >= n || b < 0 || b >= n || a == b) {
    throw ValidationError("link", fmt::format("link {}-{} joins an undefined vertex; define both "
                                              "ends first",
                                              a, b));
  }
  if (!(bandwidth_Bps > 0) || !std::isfinite(bandwidth_Bps)) {
    throw ValidationError("link", fmt::format("link {} - {}: bandwidth must be positive",
                                              vertices_[a].name, vertices_[b].name));
  }
  if (!(latency_s >= 0) || !std::isfinite(latency_s)) {
    throw ValidationError("link", fmt::format("link {} - {}: latency must be zero or positive",
                                              vertices_[a].name, vertices_[b].name));
  }
  if (static_cast<std::int64_t>(links_.size()) >= 2 * MAX_TOPOLOGY_LINKS) {
    throw ValidationError("link", fmt::format("the cluster has more than {} links, loom's limit "
                                              "(MAX_TOPOLOGY_LINKS in common/limits.hpp, "
                                              "docs/limits.md); describe a smaller cluster",
                                              MAX_TOPOLOGY_LINKS));
  }
  invalidate();
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

bool Cluster::has_fabric() const {
  return !index().fabric.empty();
}

void Cluster::finalize() const {
  (void)index();
}

namespace {

using HeapItem = std::pair<Cost, VertexId>;

// Dijkstra over a subset of vertices (those `member` accepts, addressed by `slot`), from
// `start`, forward (out-links) or reverse (in-links). GPUs other than `start` and
// `endpoint` are never expanded: traffic does not transit through a GPU.
struct SubsetSearch {
  const std::vector<Vertex>& vertices;
  const std::vector<Link>& links;
  const RoutingIndex& idx;
  const std::vector<std::vector<LinkId>>& out;

  // `heap` is caller-owned scratch (a binary min-heap), left empty.
  template <typename Member, typename Slot>
  void run(VertexId start, VertexId endpoint, bool reverse, Member member, Slot slot,
           std::vector<Cost>& dist, std::vector<HeapItem>& heap) const {
    const std::greater<> later;
    heap.clear();
    dist[slot(start)] = 0;
    heap.emplace_back(0, start);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const auto [d, v] = heap.back();
      heap.pop_back();
      if (d > dist[slot(v)]) continue;
      if (v != start && v != endpoint && vertices[v].kind == VertexKind::GPU) continue;
      const auto& adj = reverse ? idx.in[v] : out[v];
      for (LinkId l : adj) {
        VertexId u = reverse ? links[l].from : links[l].to;
        if (!member(u)) continue;
        Cost nd = d + idx.cost[l];
        auto& du = dist[slot(u)];
        if (nd < du) {
          du = nd;
          heap.emplace_back(nd, u);
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
    }
  }
};

// Buffers route() reuses from call to call (one set per thread).
struct RouteScratch {
  std::vector<Cost> near, far;
  std::vector<LinkId> candidates;
  std::vector<std::pair<LinkId, LinkId>> ties;  // (egress, ingress) link pairs
  std::vector<HeapItem> heap;
};

}  // namespace

const RoutingIndex& Cluster::index() const {
  if (index_) return *index_;
  auto idx = std::make_shared<RoutingIndex>();
  const size_t nv = vertices_.size();
  idx->in.resize(nv);
  idx->cost.resize(links_.size());
  for (size_t l = 0; l < links_.size(); ++l) {
    idx->in[static_cast<size_t>(links_[l].to)].push_back(static_cast<LinkId>(l));
    idx->cost[l] = link_cost(links_[l]);
  }
  int max_node = -1;
  for (const auto& v : vertices_) max_node = std::max(max_node, v.node);
  idx->node_vertices.resize(static_cast<size_t>(max_node + 1));
  idx->egress.resize(static_cast<size_t>(max_node + 1));
  idx->ingress.resize(static_cast<size_t>(max_node + 1));
  idx->pos.assign(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    const int node = vertices_[v].node;
    auto& list = node < 0 ? idx->fabric : idx->node_vertices[static_cast<size_t>(node)];
    idx->pos[v] = static_cast<int>(list.size());
    list.push_back(static_cast<VertexId>(v));
  }
  for (size_t l = 0; l < links_.size(); ++l) {
    const int nf = vertices_[links_[l].from].node, nt = vertices_[links_[l].to].node;
    if (nf >= 0 && nt < 0) idx->egress[static_cast<size_t>(nf)].push_back(static_cast<LinkId>(l));
    if (nf < 0 && nt >= 0) idx->ingress[static_cast<size_t>(nt)].push_back(static_cast<LinkId>(l));
  }
  // All-pairs costs over the fabric (switches only): it is small next to the nodes (leaves
  // and spines), so one reverse Dijkstra per fabric vertex.
  const size_t nf = idx->fabric.size();
  idx->to_fabric.assign(nf, std::vector<Cost>(nf, INF));
  const SubsetSearch search{vertices_, links_, *idx, out_};
  auto in_fabric = [&](VertexId v) { return vertices_[v].node < 0; };
  auto slot = [&](VertexId v) { return static_cast<size_t>(idx->pos[v]); };
  std::vector<HeapItem> heap;
  for (size_t t = 0; t < nf; ++t)
    search.run(idx->fabric[t], idx->fabric[t], true, in_fabric, slot, idx->to_fabric[t], heap);
  // NVLink domains: union-find over NVLink links between GPUs and NVSwitches.
  std::vector<VertexId> parent(nv);
  std::iota(parent.begin(), parent.end(), 0);
  auto root = [&](VertexId v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  auto in_domain = [&](VertexId v) {
    return vertices_[v].kind == VertexKind::GPU || vertices_[v].kind == VertexKind::NVSWITCH;
  };
  for (const auto& l : links_) {
    if (l.kind == LinkKind::NVLINK && in_domain(l.from) && in_domain(l.to)) {
      VertexId a = root(l.from), b = root(l.to);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::vector<int> domain_of_root(nv, -1);
  idx->domain_of_rank.resize(gpus_.size());
  for (size_t r = 0; r < gpus_.size(); ++r) {
    VertexId rt = root(gpus_[r]);
    if (domain_of_root[rt] < 0) {
      domain_of_root[rt] = static_cast<int>(idx->domain_ranks.size());
      idx->domain_ranks.emplace_back();
    }
    idx->domain_of_rank[r] = domain_of_root[rt];
    idx->domain_ranks[static_cast<size_t>(domain_of_root[rt])].push_back(static_cast<int>(r));
  }
  index_ = std::move(idx);
  return *index_;
}

Path Cluster::route(VertexId src, VertexId dst) const {
  Path path;
  const auto n = static_cast<VertexId>(vertices_.size());
  if (src < 0 || src >= n || dst < 0 || dst >= n) {
    throw ValidationError("route",
                          fmt::format("route between undefined vertices {} and {}", src, dst));
  }
  if (src == dst) return path;
  const RoutingIndex& idx = index();
  const SubsetSearch search{vertices_, links_, idx, out_};
  // route() runs once per (src, dst) pair a simulation touches: keep its buffers across calls.
  thread_local RouteScratch scratch;
  auto &near = scratch.near, &far = scratch.far;
  auto& candidates = scratch.candidates;
  auto& ties = scratch.ties;
  auto& heap = scratch.heap;
  int step = 0;
  // The first link position an equal-cost choice decided (every link before it is forced by
  // the costs alone); SIZE_MAX while no choice was made.
  size_t first_choice = SIZE_MAX;
  // Walks from `start` to `goal` along a distance field `dist` (cost to `goal` when
  // forward, cost from `goal` when `reverse`), choosing among equal-cost links by hash, and
  // appends the links to the path in forward order. A choice in a reverse walk decides every
  // link before it, back to the walk's first.
  auto walk = [&](VertexId start, VertexId goal, bool reverse, const std::vector<Cost>& dist,
                  auto member, auto slot) {
    const size_t begin = path.links.size();
    for (VertexId v = start; v != goal;) {
      candidates.clear();
      for (LinkId l : reverse ? idx.in[v] : out_[v]) {
        const VertexId w = reverse ? links_[l].from : links_[l].to;
        if (member(w) && dist[slot(w)] != INF && dist[slot(w)] + idx.cost[l] == dist[slot(v)])
          candidates.push_back(l);
      }
      check_invariant(!candidates.empty(), "routing walk lost its way");
      if (candidates.size() > 1)
        first_choice = std::min(first_choice, reverse ? begin : path.links.size());
      const LinkId l = candidates[ecmp_hash(src, dst, step++) % candidates.size()];
      path.links.push_back(l);
      v = reverse ? links_[l].from : links_[l].to;
    }
    if (reverse) std::reverse(path.links.begin() + static_cast<long>(begin), path.links.end());
  };
  // One search over the vertices `member` accepts, then a forward walk; false if unreachable.
  auto direct = [&](auto member, auto slot, size_t size) {
    near.assign(size, INF);
    search.run(dst, src, true, member, slot, near, heap);
    if (near[slot(src)] == INF) return false;
    walk(src, dst, false, near, member, slot);
    return true;
  };
  auto slot = [&](VertexId v) { return static_cast<size_t>(idx.pos[v]); };

  const int ns = vertices_[src].node, nd = vertices_[dst].node;
  auto in_src = [&](VertexId v) { return vertices_[v].node == ns; };
  bool done = false;
  if (ns >= 0 && ns == nd) {
    done = direct(in_src, slot, idx.node_vertices[static_cast<size_t>(ns)].size());
  } else if (ns >= 0 && nd >= 0 && !idx.fabric.empty()) {
    auto in_dst = [&](VertexId v) { return vertices_[v].node == nd; };
    std::vector<Cost>& ds = near;  // cost from src inside its node
    std::vector<Cost>& dd = far;   // cost to dst inside its node
    ds.assign(idx.node_vertices[static_cast<size_t>(ns)].size(), INF);
    dd.assign(idx.node_vertices[static_cast<size_t>(nd)].size(), INF);
    search.run(src, dst, false, in_src, slot, ds, heap);
    search.run(dst, src, true, in_dst, slot, dd, heap);
    auto usable = [&](VertexId g, VertexId endpoint) {
      return vertices_[g].kind != VertexKind::GPU || g == endpoint;
    };
    Cost best = INF;
    ties.clear();
    for (LinkId e : idx.egress[static_cast<size_t>(ns)]) {
      VertexId g = links_[e].from;
      if (!usable(g, src) || ds[slot(g)] == INF) continue;
      const Cost head = ds[slot(g)] + idx.cost[e];
      const size_t f = slot(links_[e].to);
      for (LinkId i : idx.ingress[static_cast<size_t>(nd)]) {
        VertexId g2 = links_[i].to;
        if (!usable(g2, dst) || dd[slot(g2)] == INF) continue;
        const Cost mid = idx.to_fabric[slot(links_[i].from)][f];
        if (mid == INF) continue;
        const Cost total = head + mid + idx.cost[i] + dd[slot(g2)];
        if (total < best) {
          best = total;
          ties.clear();
        }
        if (total == best) ties.emplace_back(e, i);
      }
    }
    if (!ties.empty()) {
      if (ties.size() > 1) first_choice = 0;  // the gateways decide the whole path
      auto [e, i] = ties[ecmp_hash(src, dst, step++) % ties.size()];
      walk(links_[e].from, src, true, ds, in_src, slot);
      path.links.push_back(e);
      auto in_fabric = [&](VertexId v) { return vertices_[v].node < 0; };
      walk(links_[e].to, links_[i].from, false, idx.to_fabric[slot(links_[i].from)], in_fabric,
           slot);
      path.links.push_back(i);
      walk(links_[i].to, dst, false, dd, in_dst, slot);
      done = true;
    }
  }
  // Generic fallback over the whole graph: endpoints in the fabric, a node not connected
  // inside itself, or nodes joined without a fabric (explicit cluster files).
  if (!done && !direct([](VertexId) { return true; },
                       [](VertexId v) { return static_cast<size_t>(v); }, vertices_.size())) {
    throw ValidationError("route", fmt::format("no path from {} to {}; the graph is disconnected",
                                               vertices_[src].name, vertices_[dst].name));
  }
  path.fixed = std::min(first_choice, path.links.size());
  path.bandwidth_Bps = std::numeric_limits<double>::infinity();
  for (LinkId l : path.links) {
    path.bandwidth_Bps = std::min(path.bandwidth_Bps, links_[l].bandwidth_Bps);
    path.latency_s += links_[l].latency_s;
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

int Cluster::nvlink_domain(int rank) const {
  (void)gpu_vertex(rank);
  return index().domain_of_rank[static_cast<size_t>(rank)];
}

int Cluster::nvlink_domain_size(int rank) const {
  return static_cast<int>(index().domain_ranks[static_cast<size_t>(nvlink_domain(rank))].size());
}

int Cluster::num_nvlink_domains() const {
  return static_cast<int>(index().domain_ranks.size());
}

const std::vector<int>& Cluster::nvlink_domain_ranks(int domain) const {
  const auto& d = index().domain_ranks;
  if (domain < 0 || domain >= static_cast<int>(d.size())) {
    throw ValidationError("domain", fmt::format("NVLink domain {} is out of range 0..{}", domain,
                                                static_cast<int>(d.size()) - 1));
  }
  return d[static_cast<size_t>(domain)];
}

double Cluster::nvlink_bandwidth_Bps(int rank) const {
  double total = 0;
  for (LinkId l : out_links(gpu_vertex(rank)))
    if (links_[l].kind == LinkKind::NVLINK && vertices_[links_[l].to].kind != VertexKind::CPU)
      total += links_[l].bandwidth_Bps;
  return total;
}

double Cluster::injection_bandwidth_Bps(int rank) const {
  const RoutingIndex& idx = index();
  const VertexId g = gpu_vertex(rank);
  const int node = vertices_[g].node;
  if (idx.fabric.empty() || node < 0) return 0;
  const auto& egress = idx.egress[static_cast<size_t>(node)];
  double uplink = 0;
  for (LinkId l : egress) uplink += links_[l].bandwidth_Bps;
  int gpus_in_node = 0;
  for (VertexId v : idx.node_vertices[static_cast<size_t>(node)])
    if (vertices_[v].kind == VertexKind::GPU) ++gpus_in_node;
  double share = uplink / std::max(1, gpus_in_node);
  // Cap by the GPU's own path to its cheapest gateway (e.g. a PCIe Gen4 x16 to a 400G NIC).
  Path best;
  Cost best_cost = INF;
  for (LinkId l : egress) {
    VertexId gw = links_[l].from;
    if (vertices_[gw].kind == VertexKind::GPU && gw != g) continue;
    Path p = gw == g ? Path{} : route(g, gw);
    Cost c = idx.cost[l];
    for (LinkId x : p.links) c += idx.cost[x];
    p.links.push_back(l);
    if (c < best_cost) {
      best_cost = c;
      best = p;
    }
  }
  double cap = std::numeric_limits<double>::infinity();
  for (LinkId l : best.links) cap = std::min(cap, links_[l].bandwidth_Bps);
  return std::min(share, cap);
}

namespace {

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, std::int64_t,
        boost::property<boost::edge_residual_capacity_t, std::int64_t,
                        boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;

// Max-flow from the `a` terminals to the `b` terminals over the links `keep` accepts.
// Capacities are integers in kB/s (push-relabel wants exact arithmetic), in a coarser unit
// only when the links' sum would not fit 64 bits otherwise (no real cluster comes close).
template <typename Keep>
double max_flow_Bps(const std::vector<Vertex>& vertices, const std::vector<Link>& links,
                    const std::vector<VertexId>& a, const std::vector<VertexId>& b, Keep keep) {
  const auto nv = vertices.size();
  FlowGraph g(nv + 2);
  const auto source = nv, sink = nv + 1;
  auto cap = boost::get(boost::edge_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  auto add = [&](size_t u, size_t v, std::int64_t c) {
    auto e = boost::add_edge(u, v, g).first;
    auto r = boost::add_edge(v, u, g).first;
    cap[e] = c;
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
  };
  double sum_Bps = 0;
  for (const auto& l : links)
    if (keep(l)) sum_Bps += l.bandwidth_Bps;
  const double unit = std::max(1e3, sum_Bps / 1e17);  // bytes/s per capacity unit
  std::int64_t total = 0;
  for (const auto& l : links) {
    if (!keep(l)) continue;
    auto c = static_cast<std::int64_t>(std::llround(l.bandwidth_Bps / unit));
    add(static_cast<size_t>(l.from), static_cast<size_t>(l.to), c);
    total += c;
  }
  for (VertexId v : a) add(source, static_cast<size_t>(v), total + 1);
  for (VertexId v : b) add(static_cast<size_t>(v), sink, total + 1);
  return static_cast<double>(boost::push_relabel_max_flow(g, source, sink)) * unit;
}

}  // namespace

double Cluster::bisection_bandwidth_Bps() const {
  const RoutingIndex& idx = index();
  if (gpus_.size() < 2) return 0;
  std::vector<std::pair<std::vector<VertexId>, std::vector<VertexId>>> cuts;
  if (!idx.fabric.empty()) {
    // Terminals: the gateways (NICs); only links touching the fabric count.
    const int nodes = num_nodes_;  // GPU nodes: hosts are not part of the bisection
    int rails = 0;
    std::vector<std::pair<VertexId, int>> gateways;  // (vertex, rail)
    std::vector<bool> seen(vertices_.size(), false);
    for (int n = 0; n < nodes; ++n) {
      for (LinkId l : idx.egress[static_cast<size_t>(n)]) {
        VertexId g = links_[l].from;
        if (seen[static_cast<size_t>(g)]) continue;
        seen[static_cast<size_t>(g)] = true;
        gateways.emplace_back(g, vertices_[g].local_index);
        rails = std::max(rails, vertices_[g].local_index + 1);
      }
    }
    std::pair<std::vector<VertexId>, std::vector<VertexId>> by_node, by_rail;
    for (auto [g, rail] : gateways) {
      (vertices_[g].node < nodes / 2 || (nodes == 1) ? by_node.first : by_node.second).push_back(g);
      (rail < (rails + 1) / 2 ? by_rail.first : by_rail.second).push_back(g);
    }
    if (nodes > 1) cuts.push_back(by_node);
    if (rails > 1) cuts.push_back(by_rail);
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [a, b] : cuts) {
      if (a.empty() || b.empty()) continue;
      best = std::min(best, max_flow_Bps(vertices_, links_, a, b, [&](const Link& l) {
                        return vertices_[l.from].node < 0 || vertices_[l.to].node < 0;
                      }));
    }
    return std::isfinite(best) ? best : 0;
  }
  std::vector<VertexId> a(gpus_.begin(), gpus_.begin() + static_cast<long>(gpus_.size() / 2));
  std::vector<VertexId> b(gpus_.begin() + static_cast<long>(gpus_.size() / 2), gpus_.end());
  return max_flow_Bps(vertices_, links_, a, b, [](const Link&) { return true; });
}

}  // namespace loom::topo
