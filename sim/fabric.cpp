#include "sim/fabric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace loom::sim {

double LinkEfficiency::of(topo::LinkKind kind) const {
  switch (kind) {
    case topo::LinkKind::NVLINK:
      return nvlink;
    case topo::LinkKind::PCIE:
      return pcie;
    case topo::LinkKind::CPU_INTERCONNECT:
      return cpu_interconnect;
    case topo::LinkKind::INFINIBAND:
      return infiniband;
    case topo::LinkKind::ROCE:
      return roce;
    case topo::LinkKind::ETHERNET:
      return ethernet;
  }
  return 1.0;
}

Fabric::Fabric(const topo::Cluster& cluster, LinkEfficiency efficiency, NcclTuning tuning)
    : cluster_(&cluster), tuning_(tuning) {
  if (!(tuning.nvls_efficiency >= 0 && tuning.nvls_efficiency <= 1))
    throw ValidationError("nvls_efficiency", fmt::format("nvls_efficiency {} must be in [0, 1]",
                                                         tuning.nvls_efficiency));
  if (!(tuning.intra_latency_scale >= 0) || !std::isfinite(tuning.intra_latency_scale) ||
      !(tuning.net_latency_scale >= 0) || !std::isfinite(tuning.net_latency_scale) ||
      !(tuning.simple_latency_scale >= 0) || !std::isfinite(tuning.simple_latency_scale))
    throw ValidationError("latency_scale", "NCCL latency scales must be finite and >= 0");
  const auto& links = cluster.links();
  capacity_.reserve(links.size());
  latency_.reserve(links.size());
  for (const auto& link : links) {
    double e = efficiency.of(link.kind);
    if (!(e > 0 && e <= 1)) {
      throw ValidationError("link_efficiency",
                            fmt::format("efficiency {} for {} links must be in (0, 1]", e,
                                        topo::to_string(link.kind)));
    }
    capacity_.push_back(to_bytes_per_ps(BytesPerSecond(link.bandwidth_Bps * e)));
    latency_.push_back(to_sim_time(Seconds(link.latency_s)));
  }
}

RouteRef Fabric::add_route(std::span<const topo::LinkId> links, std::uint32_t fixed) {
  RouteRef ref;
  ref.begin = static_cast<std::uint32_t>(route_links_.size());
  ref.length = static_cast<std::uint32_t>(links.size());
  ref.fixed = std::min(fixed, ref.length);
  for (topo::LinkId l : links) {
    route_links_.push_back(l);
    ref.latency += latency_[static_cast<size_t>(l)];
    auto kind = cluster_->link(l).kind;
    LatencyClass c = LatencyClass::NVLINK;
    if (kind == topo::LinkKind::INFINIBAND || kind == topo::LinkKind::ROCE ||
        kind == topo::LinkKind::ETHERNET) {
      c = LatencyClass::NET;
    } else if (kind == topo::LinkKind::PCIE || kind == topo::LinkKind::CPU_INTERCONNECT) {
      c = LatencyClass::PCI;
    }
    if (static_cast<int>(c) > static_cast<int>(ref.latency_class)) ref.latency_class = c;
  }
  return ref;
}

// A route between two alike nodes' vertices is looked up by translating the route between
// the same places of two fixed nodes of their class when that one is forced by the link costs
// (no ECMP choice): a permutation of alike nodes is an automorphism of the cluster that keeps
// link costs, so it maps the only cheapest path onto the only cheapest path. Otherwise (an
// ECMP choice, hashed on the endpoints; nodes unlike; a fabric vertex) the cluster routes it.
RouteRef Fabric::route(topo::VertexId src, topo::VertexId dst) {
  const std::uint64_t key = pair_key(src, dst);
  auto it = route_index_.find(key);
  if (it != route_index_.end()) return routes_[it->second];
  RouteRef ref;
  if (translate(src, dst, scratch_)) {
    ref = add_route(scratch_, static_cast<std::uint32_t>(scratch_.size()));
    ++translated_;
  } else {
    const topo::Path path = cluster_->route(src, dst);
    ref = add_route(path.links, static_cast<std::uint32_t>(path.fixed));
  }
  route_index_.emplace(key, static_cast<std::uint32_t>(routes_.size()));
  routes_.push_back(ref);
  return ref;
}

std::optional<std::string> Fabric::compare_nodes(
    int x0, int x, std::unordered_map<topo::LinkId, topo::LinkId>* like) {
  const topo::Cluster& c = *cluster_;
  const auto& v0 = node_vertices(x0);
  const auto& v1 = node_vertices(x);
  if (v0.size() != v1.size() || v0.empty())
    return fmt::format("nodes {} and {} hold different devices", x0, x);
  auto same_link = [&](topo::LinkId a, topo::LinkId b) {
    return c.link(a).kind == c.link(b).kind && capacity_Bpps(a) == capacity_Bpps(b) &&
           latency(a) == latency(b);
  };
  for (size_t p = 0; p < v0.size(); ++p) {
    const topo::Vertex &a = c.vertex(v0[p]), &b = c.vertex(v1[p]);
    const auto &out0 = c.out_links(v0[p]), &out1 = c.out_links(v1[p]);
    if (a.kind != b.kind || a.in_switch_reduce != b.in_switch_reduce || out0.size() != out1.size())
      return fmt::format("nodes {} and {} hold different devices", x0, x);
    for (size_t k = 0; k < out0.size(); ++k) {
      const topo::LinkId l0 = out0[k], l1 = out1[k];
      const topo::VertexId to0 = c.link(l0).to, to1 = c.link(l1).to;
      const int n0 = node_of(to0);
      bool wired = same_link(l0, l1);
      if (n0 == x0) {
        wired = wired && node_of(to1) == x && node_position(to0) == node_position(to1);
      } else if (n0 < 0) {  // the same fabric switch, both ways alike (l ^ 1: the other way)
        wired = wired && to1 == to0 && same_link(l0 ^ 1, l1 ^ 1);
        if (like) (*like)[l1 ^ 1] = l0 ^ 1;
      } else {
        return fmt::format("node {} is linked to node {} without a fabric", x0, n0);
      }
      if (!wired) return fmt::format("nodes {} and {} are linked differently", x0, x);
      if (like) (*like)[l1] = l0;
    }
  }
  return std::nullopt;
}

bool Fabric::nodes_alike(int x0, int x) {
  // Being alike is an equivalence (the same devices, links and switches), so a node in x0's
  // class is alike x0, and one matching none of the first classes is alike none of them.
  node_vertices(x0);  // built first: node_class sizes its table by them
  const int rep = node_class(x0);
  if (rep >= 0) return node_class(x) == rep;
  return !compare_nodes(x0, x);
}

int Fabric::node_class(int node) {
  if (node_class_.empty()) {
    const size_t nodes = node_vertices_.size();  // node_vertices() has run (node_position)
    node_class_.assign(nodes, -2);
    class_second_.assign(nodes, -1);
  }
  int& cls = node_class_[static_cast<size_t>(node)];
  if (cls != -2) return cls;
  cls = -1;
  for (int rep : class_reps_) {
    if (compare_nodes(rep, node)) continue;
    cls = rep;
    if (class_second_[static_cast<size_t>(rep)] < 0) class_second_[static_cast<size_t>(rep)] = node;
    return cls;
  }
  if (class_reps_.size() < MAX_NODE_CLASSES) {
    class_reps_.push_back(node);
    cls = node;
  }
  return cls;
}

const Fabric::Shape& Fabric::shape(int rep, int from, int to, bool same) {
  const std::uint64_t key = (static_cast<std::uint64_t>(rep) << 43) |
                            (static_cast<std::uint64_t>(from) << 22) |
                            (static_cast<std::uint64_t>(to) << 1) | (same ? 1 : 0);
  auto it = shapes_.find(key);
  if (it != shapes_.end()) return it->second;
  Shape sh;
  const int second = same ? rep : class_second_[static_cast<size_t>(rep)];
  const topo::Path path = cluster_->route(node_vertices(rep)[static_cast<size_t>(from)],
                                          node_vertices(second)[static_cast<size_t>(to)]);
  sh.usable = path.fixed == path.links.size();
  // Each link by place: a node vertex's out-link (or the other way of one, into the node).
  auto index_of = [&](topo::VertexId v, topo::LinkId l) {
    const auto& out = cluster_->out_links(v);
    return static_cast<std::int32_t>(std::find(out.begin(), out.end(), l) - out.begin());
  };
  for (size_t i = 0; sh.usable && i < path.links.size(); ++i) {
    const topo::LinkId l = path.links[i];
    const auto& link = cluster_->link(l);
    RelLink r;
    const bool out = node_of(link.from) >= 0;
    const topo::VertexId v = out ? link.from : link.to;
    const int n = node_of(v);
    if (n < 0) {
      r.side = 2;
      r.link = l;
    } else if (n == rep || n == second) {
      r.side = n == rep ? 0 : 1;
      r.partner = out ? 0 : 1;
      r.place = node_position(v);
      r.k = index_of(v, out ? l : (l ^ 1));
    } else {
      sh.usable = false;  // through a third node
    }
    sh.links.push_back(r);
  }
  return shapes_.emplace(key, std::move(sh)).first->second;
}

bool Fabric::translate(topo::VertexId src, topo::VertexId dst, std::vector<topo::LinkId>& out) {
  const int x = node_of(src), y = node_of(dst);
  if (x < 0 || y < 0) return false;
  const int from = node_position(src), to = node_position(dst);
  const int rep = node_class(x);
  if (rep < 0 || node_class(y) != rep) return false;
  if (x != y && class_second_[static_cast<size_t>(rep)] < 0) return false;
  const Shape& sh = shape(rep, from, to, x == y);
  if (!sh.usable) return false;
  out.clear();
  for (const RelLink& r : sh.links) {
    if (r.side == 2) {
      out.push_back(r.link);
      continue;
    }
    const topo::VertexId v = node_vertices(r.side == 0 ? x : y)[static_cast<size_t>(r.place)];
    const topo::LinkId l = cluster_->out_links(v)[static_cast<size_t>(r.k)];
    out.push_back(r.partner ? (l ^ 1) : l);
  }
  return true;
}

topo::VertexId Fabric::entry_leaf(topo::VertexId src, topo::VertexId dst, bool* fixed) {
  const RouteRef r = route(src, dst);
  const auto path = links(r);
  for (std::uint32_t k = 0; k < r.length; ++k) {
    const topo::VertexId to = cluster_->link(path[k]).to;
    if (cluster_->vertex(to).kind == topo::VertexKind::LEAF) {
      if (fixed && k >= r.fixed) *fixed = false;
      return to;
    }
  }
  if (fixed && !r.forced()) *fixed = false;  // another choice might cross a leaf
  return -1;
}

const std::vector<topo::VertexId>& Fabric::node_gpus(int node) {
  if (node_gpus_.empty()) {
    for (topo::VertexId g : cluster_->gpus()) {
      const int n = node_of(g);
      if (n < 0) continue;
      if (node_gpus_.size() <= static_cast<size_t>(n))
        node_gpus_.resize(static_cast<size_t>(n) + 1);
      node_gpus_[static_cast<size_t>(n)].push_back(g);
    }
  }
  static const std::vector<topo::VertexId> none;
  return node >= 0 && static_cast<size_t>(node) < node_gpus_.size()
             ? node_gpus_[static_cast<size_t>(node)]
             : none;
}

const std::vector<topo::VertexId>& Fabric::node_vertices(int node) {
  if (node_position_.empty()) {
    const auto& vertices = cluster_->vertices();
    node_position_.assign(vertices.size(), -1);
    for (size_t v = 0; v < vertices.size(); ++v) {
      const int n = vertices[v].node;
      if (n < 0) continue;
      if (node_vertices_.size() <= static_cast<size_t>(n))
        node_vertices_.resize(static_cast<size_t>(n) + 1);
      auto& list = node_vertices_[static_cast<size_t>(n)];
      node_position_[v] = static_cast<int>(list.size());
      list.push_back(static_cast<topo::VertexId>(v));
    }
  }
  static const std::vector<topo::VertexId> none;
  return node >= 0 && static_cast<size_t>(node) < node_vertices_.size()
             ? node_vertices_[static_cast<size_t>(node)]
             : none;
}

int Fabric::node_position(topo::VertexId v) {
  (void)node_vertices(0);  // builds the positions
  return node_position_.at(static_cast<size_t>(v));
}

topo::VertexId Fabric::pxn_proxy(topo::VertexId src, topo::VertexId dst) {
  if (src == dst || node_of(src) < 0 || node_of(src) == node_of(dst)) return -1;
  const std::uint64_t key = pair_key(src, dst);
  const auto it = proxy_index_.find(key);
  if (it != proxy_index_.end()) return it->second;
  const topo::VertexId proxy = find_proxy(src, dst, nullptr);
  proxy_index_.emplace(key, proxy);
  return proxy;
}

topo::VertexId Fabric::pxn_proxy(topo::VertexId src, topo::VertexId dst, bool& invariant) {
  invariant = true;
  if (src == dst || node_of(src) < 0 || node_of(src) == node_of(dst)) return -1;
  return find_proxy(src, dst, &invariant);
}

topo::VertexId Fabric::find_proxy(topo::VertexId src, topo::VertexId dst, bool* invariant) {
  topo::VertexId proxy = -1;
  // dst's rail: the leaf its own traffic enters the fabric on (towards src).
  const topo::VertexId rail = entry_leaf(dst, src, invariant);
  const topo::VertexId mine = entry_leaf(src, dst, invariant);
  if (rail >= 0 && mine >= 0 && rail != mine) {
    // A GPU of src's node that src reaches over NVLink and whose traffic enters on dst's rail.
    for (topo::VertexId p : node_gpus(node_of(src))) {
      if (p == src) continue;
      const RouteRef to_p = route(src, p);
      if (invariant && !to_p.forced()) *invariant = false;  // its class may differ
      if (to_p.latency_class != LatencyClass::NVLINK) continue;
      if (entry_leaf(p, dst, invariant) == rail) {
        proxy = p;
        break;
      }
    }
  }
  return proxy;
}

}  // namespace loom::sim
