#include "sim/fabric.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"

namespace loom::sim {

namespace {

// The cache key of an ordered vertex pair.
std::uint64_t pair_key(topo::VertexId src, topo::VertexId dst) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
         static_cast<std::uint32_t>(dst);
}

}  // namespace

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

RouteRef Fabric::route(topo::VertexId src, topo::VertexId dst) {
  const std::uint64_t key = pair_key(src, dst);
  auto it = route_index_.find(key);
  if (it != route_index_.end()) return routes_[it->second];
  topo::Path path = cluster_->route(src, dst);
  RouteRef ref;
  ref.begin = static_cast<std::uint32_t>(route_links_.size());
  ref.length = static_cast<std::uint32_t>(path.links.size());
  for (topo::LinkId l : path.links) {
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
  route_index_.emplace(key, static_cast<std::uint32_t>(routes_.size()));
  routes_.push_back(ref);
  return ref;
}

topo::VertexId Fabric::entry_leaf(topo::VertexId src, topo::VertexId dst) {
  for (topo::LinkId l : links(route(src, dst))) {
    const topo::VertexId to = cluster_->link(l).to;
    if (cluster_->vertex(to).kind == topo::VertexKind::LEAF) return to;
  }
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

topo::VertexId Fabric::pxn_proxy(topo::VertexId src, topo::VertexId dst) {
  if (src == dst || node_of(src) < 0 || node_of(src) == node_of(dst)) return -1;
  const std::uint64_t key = pair_key(src, dst);
  const auto it = proxy_index_.find(key);
  if (it != proxy_index_.end()) return it->second;
  topo::VertexId proxy = -1;
  // dst's rail: the leaf its own traffic enters the fabric on (towards src).
  const topo::VertexId rail = entry_leaf(dst, src);
  const topo::VertexId mine = entry_leaf(src, dst);
  if (rail >= 0 && mine >= 0 && rail != mine) {
    // A GPU of src's node that src reaches over NVLink and whose traffic enters on dst's rail.
    for (topo::VertexId p : node_gpus(node_of(src))) {
      if (p == src) continue;
      if (route(src, p).latency_class != LatencyClass::NVLINK) continue;
      if (entry_leaf(p, dst) == rail) {
        proxy = p;
        break;
      }
    }
  }
  proxy_index_.emplace(key, proxy);
  return proxy;
}

}  // namespace loom::sim
