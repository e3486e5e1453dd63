#pragma once
// Small hand-checkable clusters and engine options for the sim tests.
#include <fmt/format.h>

#include "sim/engine.hpp"
#include "topologies/cluster.hpp"

namespace loom::sim::testing {

/// Pure alpha-beta engine options: links at line rate, no NCCL overheads, capacity checked.
inline EngineOptions raw(NetworkMode mode = NetworkMode::FLOW) {
  EngineOptions o;
  o.network = mode;
  o.link_efficiency = LinkEfficiency::line_rate();
  o.cost.nccl_overheads = false;
  o.check_capacity = true;
  return o;
}

/// Slows node `node`'s first InfiniBand cable `factor` times (--slow-link): the node is then
/// no longer built like the others.
inline void slow_first_nic_cable(topo::Cluster& c, int node, double factor = 4.0) {
  for (topo::LinkId l = 0; l < static_cast<topo::LinkId>(c.links().size()); l += 2) {
    const auto& link = c.link(l);
    if (link.kind == topo::LinkKind::INFINIBAND && c.vertex(link.from).node == node) {
      c.slow_link(l, factor);
      return;
    }
  }
}

/// `n` GPUs on one switch, every GPU-switch link `bandwidth_Bps` per direction and
/// `hop_latency_s`; a GPU-to-GPU path is 2 hops (alpha = 2 * hop latency).
inline topo::Cluster star(int n, double bandwidth_Bps, double hop_latency_s,
                          bool in_switch_reduce = false,
                          topo::LinkKind kind = topo::LinkKind::NVLINK) {
  topo::Cluster c;
  c.name = fmt::format("star{}", n);
  std::vector<topo::VertexId> gpus;
  for (int i = 0; i < n; ++i) {
    topo::Vertex v;
    v.kind = topo::VertexKind::GPU;
    v.name = fmt::format("node0/gpu{}", i);
    v.node = 0;
    v.local_index = i;
    gpus.push_back(c.add_vertex(v));
  }
  topo::Vertex sw;
  sw.kind = topo::VertexKind::NVSWITCH;
  sw.name = "node0/nvswitch";
  sw.node = 0;
  sw.in_switch_reduce = in_switch_reduce;
  auto s = c.add_vertex(sw);
  for (auto g : gpus) c.add_duplex_link(g, s, kind, bandwidth_Bps, hop_latency_s, "link");
  return c;
}

/// `nodes` nodes of `per_node` GPUs, each node a star at `intra_Bps`; GPU i of every node
/// has a NIC on rail switch i (`rails` = per_node) at `nic_Bps`; rail switches are joined by
/// one spine at `nic_Bps * per_node`. Latencies `hop_s` everywhere.
inline topo::Cluster rails(int nodes, int per_node, double intra_Bps, double nic_Bps,
                           double hop_s) {
  topo::Cluster c;
  c.name = "rails";
  c.set_num_nodes(nodes);
  std::vector<topo::VertexId> rail_switch;
  for (int r = 0; r < per_node; ++r) {
    topo::Vertex v;
    v.kind = topo::VertexKind::LEAF;
    v.name = fmt::format("rail{}", r);
    rail_switch.push_back(c.add_vertex(v));
  }
  topo::Vertex spine;
  spine.kind = topo::VertexKind::SPINE;
  spine.name = "spine";
  auto sp = c.add_vertex(spine);
  for (auto r : rail_switch)
    c.add_duplex_link(r, sp, topo::LinkKind::INFINIBAND, nic_Bps * nodes, hop_s, "uplink");
  for (int n = 0; n < nodes; ++n) {
    topo::Vertex sw;
    sw.kind = topo::VertexKind::NVSWITCH;
    sw.name = fmt::format("node{}/nvswitch", n);
    sw.node = n;
    auto s = c.add_vertex(sw);
    for (int i = 0; i < per_node; ++i) {
      topo::Vertex g;
      g.kind = topo::VertexKind::GPU;
      g.name = fmt::format("node{}/gpu{}", n, i);
      g.node = n;
      g.local_index = i;
      auto gv = c.add_vertex(g);
      c.add_duplex_link(gv, s, topo::LinkKind::NVLINK, intra_Bps, hop_s, "nvlink");
      c.add_duplex_link(gv, rail_switch[i], topo::LinkKind::INFINIBAND, nic_Bps, hop_s, "nic");
    }
  }
  return c;
}

}  // namespace loom::sim::testing
