// Direct and master-worker lowerings: every rank straight to its peers, or everything
// through the root.
#include <fmt/format.h>

#include "common/error.hpp"
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

void lower_direct(ScheduleBuilder& b, Op op, double S, int root) {
  const int n = b.n();
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
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (i != j) p2p_flow(b, b.v(i), b.v(j), S / n);
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
