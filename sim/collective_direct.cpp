// Direct and master-worker lowerings: every rank straight to its peers, or everything
// through the root.
#include <fmt/format.h>

#include <unordered_map>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

using Op = CollectiveOp;

namespace {

void all_pairs(ScheduleBuilder& b, double bytes, int times) {
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i)
    for (int j = 0; j < b.n(); ++j) b.flow(b.v(i), b.v(j), bytes);
  b.phase(p, true, times);
}

// A point-to-point transfer as NCCL's p2p runs it: to another node's GPU on another rail via
// PXN (Fabric::pxn_proxy), as two concurrent flows that stand for the pipelined relay (src ->
// proxy over NVLink, proxy -> dst on dst's rail); otherwise one flow.
void p2p_flow(ScheduleBuilder& b, topo::VertexId src, topo::VertexId dst, double bytes) {
  const topo::VertexId proxy = b.fabric().pxn_proxy(src, dst);
  if (proxy < 0) {
    b.flow(src, dst, bytes);
    return;
  }
  b.flow(src, proxy, bytes);
  b.flow(proxy, dst, bytes);
}

// The leaf switch GPU `g`'s own NIC attaches to (its rail), reached over PCIe switches and
// NICs only; -1 when there is none or more than one.
topo::VertexId own_leaf(const topo::Cluster& c, topo::VertexId g) {
  topo::VertexId leaf = -1;
  std::vector<topo::VertexId> frontier{g}, next;
  for (int depth = 0; depth < 3 && !frontier.empty(); ++depth) {
    next.clear();
    for (topo::VertexId v : frontier) {
      for (topo::LinkId l : c.out_links(v)) {
        const topo::VertexId to = c.link(l).to;
        const auto kind = c.vertex(to).kind;
        if (kind == topo::VertexKind::LEAF) {
          if (leaf >= 0 && leaf != to) return -1;
          leaf = to;
        } else if (kind == topo::VertexKind::NIC || kind == topo::VertexKind::PCIE_SWITCH) {
          next.push_back(to);
        }
      }
    }
    frontier.swap(next);
  }
  return leaf;
}

// The all-to-all's flows, each rank to every other (p2p_flow: PXN relays across rails),
// `share` bytes each, with the flows that repeat one (source, destination) pair folded into
// one FlowSpec with their count: on a rail-optimised fabric the n(n-1) transfers become
// about n^2/g distinct pairs (g GPUs per node): a PXN relay's first hop (src -> proxy) is
// the same for every node the proxy's rail leads to, and its second hop (proxy -> dst) the
// same for every GPU of the source node. Max-min sharing gives identical flows the same
// rate, so the fold is exact (tests/sim/test_all_to_all_classes.cpp checks it against the
// flow-by-flow schedule). When every rank's NIC has one rail leaf, the proxy is looked up
// once per (source, destination rail) rather than per pair: PXN picks it by rail alone
// (Fabric::pxn_proxy), and no route of a relayed pair's direct path is computed.
void all_to_all_flows(ScheduleBuilder& b, double share) {
  const int n = b.n();
  Fabric& fabric = b.fabric();
  const topo::Cluster& cluster = fabric.cluster();
  std::vector<topo::VertexId> rail(static_cast<size_t>(n));
  std::vector<int> node(static_cast<size_t>(n));
  bool railed = true;
  for (int i = 0; i < n; ++i) {
    rail[static_cast<size_t>(i)] = own_leaf(cluster, b.v(i));
    node[static_cast<size_t>(i)] = b.node(i);
    railed = railed && rail[static_cast<size_t>(i)] >= 0 && node[static_cast<size_t>(i)] >= 0;
  }
  std::unordered_map<std::uint64_t, topo::VertexId> proxy_of;  // (src, dst rail): lookup only
  std::unordered_map<std::uint64_t, std::size_t> index;        // (src, dst): lookup only
  std::vector<FlowSpec> flows;
  auto add = [&](topo::VertexId a, topo::VertexId c) {
    const std::uint64_t key = pair_key(a, c);
    auto [it, inserted] = index.emplace(key, flows.size());
    if (inserted) {
      flows.push_back({a, c, share, 0, 1});
    } else {
      ++flows[it->second].count;
    }
  };
  for (int i = 0; i < n; ++i) {
    const topo::VertexId src = b.v(i);
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const topo::VertexId dst = b.v(j);
      topo::VertexId proxy;
      if (node[static_cast<size_t>(i)] == node[static_cast<size_t>(j)]) {
        proxy = -1;
      } else if (railed) {
        const std::uint64_t key = pair_key(src, rail[static_cast<size_t>(j)]);
        auto it = proxy_of.find(key);
        if (it == proxy_of.end()) it = proxy_of.emplace(key, fabric.pxn_proxy(src, dst)).first;
        proxy = it->second;
      } else {
        proxy = fabric.pxn_proxy(src, dst);
      }
      if (proxy < 0) {
        add(src, dst);
      } else {
        add(src, proxy);
        add(proxy, dst);
      }
    }
  }
  for (const FlowSpec& f : flows) b.flow(f.src, f.dst, f.bytes, f.count);
}

void from_root(ScheduleBuilder& b, int root, double bytes) {
  int p = b.begin_pattern();
  for (int j = 0; j < b.n(); ++j) b.flow(b.v(root), b.v(j), bytes);
  b.phase(p);
}

void to_root(ScheduleBuilder& b, int root, double bytes) {
  int p = b.begin_pattern();
  for (int j = 0; j < b.n(); ++j) b.flow(b.v(j), b.v(root), bytes);
  b.phase(p);
}

}  // namespace

namespace {

// The pair-by-pair lowering's bound: an all-to-all that is not lowered by flow class
// enumerates its n(n - 1) transfers.
void check_pairs(const ScheduleBuilder& b, Op op, const std::string& why) {
  if (op != Op::ALL_TO_ALL || b.n() <= MAX_ALL_TO_ALL_RANKS) return;
  throw ValidationError(
      "group",
      fmt::format("an all-to-all over {} ranks whose nodes are not alike ({}) is costed pair by "
                  "pair, n^2, and is above MAX_ALL_TO_ALL_RANKS = {} (common/limits.hpp, "
                  "docs/limits.md); use a group (expert-parallel size) of at most {}, or a "
                  "group with the same GPUs on every node of a homogeneous cluster",
                  b.n(), why, MAX_ALL_TO_ALL_RANKS, MAX_ALL_TO_ALL_RANKS));
}

}  // namespace

void lower_direct(ScheduleBuilder& b, Op op, double S, int root, bool classes) {
  const int n = b.n();
  if (op == Op::ALL_TO_ALL || op == Op::RAIL_ALL_TO_ALL) {
    std::optional<std::string> why = std::string("flow classes are off");
    if (classes && !(why = lower_by_classes(b, op, S))) return;
    check_pairs(b, op, *why);
  }
  switch (op) {
    case Op::SEND_RECV: {
      int p = b.begin_pattern();
      if (n == 2) {
        p2p_flow(b, b.v(root), b.v(1 - root), S);
      } else {
        for (int i = 0; i < n; ++i) p2p_flow(b, b.v(i), b.v((i + 1) % n), S);
      }
      b.phase(p);
      return;
    }
    case Op::ALL_REDUCE:
      all_pairs(b, S / n, 2);
      return;
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
      all_pairs(b, S / n, 1);
      return;
    case Op::ALL_TO_ALL: {
      // NCCL's alltoall is grouped send/recv (p2p): PXN applies.
      int p = b.begin_pattern();
      all_to_all_flows(b, S / n);
      b.phase(p);
      return;
    }
    case Op::NODE_ALL_TO_ALL: {
      // Each node's group ranks among themselves, over NVLink (no PXN: same node).
      int p = b.begin_pattern();
      for (const auto& node : b.nodes()) {
        const double share = S / static_cast<double>(node.size());
        for (int i : node)
          for (int j : node) b.flow(b.v(i), b.v(j), share);
      }
      b.phase(p);
      return;
    }
    case Op::RAIL_ALL_TO_ALL: {
      // Position k of each node with position k of every other node (on a node with fewer
      // group ranks, position k modulo its count): one rail per position.
      const auto nodes = b.nodes();
      const double share = S / static_cast<double>(nodes.size());
      int p = b.begin_pattern();
      for (size_t x = 0; x < nodes.size(); ++x)
        for (size_t k = 0; k < nodes[x].size(); ++k)
          for (size_t y = 0; y < nodes.size(); ++y)
            if (y != x) p2p_flow(b, b.v(nodes[x][k]), b.v(nodes[y][k % nodes[y].size()]), share);
      b.phase(p);
      return;
    }
    case Op::BROADCAST:
      from_root(b, root, S);
      return;
    case Op::SCATTER:
      from_root(b, root, S / n);
      return;
    case Op::GATHER:
      to_root(b, root, S / n);
      return;
    case Op::REDUCE:
      to_root(b, root, S);
      return;
    default:
      throw InternalError(fmt::format("direct lowering asked for {}", to_string(op)));
  }
}

void lower_master_worker(ScheduleBuilder& b, Op op, double S, int root) {
  switch (op) {
    case Op::ALL_REDUCE:
      to_root(b, root, S);
      from_root(b, root, S);
      return;
    case Op::REDUCE:
      to_root(b, root, S);
      return;
    case Op::BROADCAST:
      from_root(b, root, S);
      return;
    case Op::SCATTER:
      from_root(b, root, S / b.n());
      return;
    case Op::GATHER:
      to_root(b, root, S / b.n());
      return;
    default:
      throw InternalError(fmt::format("master-worker lowering asked for {}", to_string(op)));
  }
}

}  // namespace loom::sim
