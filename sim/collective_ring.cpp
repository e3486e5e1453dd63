// Ring lowering: rings over the group (one per rail across nodes) for all-reduce,
// all-gather and reduce-scatter; pipelined chains for broadcast and reduce.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

using Op = CollectiveOp;

// The rings: one per local position when the group spans several nodes with the same
// number of ranks each (NCCL builds one ring per NIC/rail). Otherwise one ring in group
// order.
std::vector<std::vector<int>> ring_orders(const ScheduleBuilder& b) {
  auto nodes = b.nodes();
  bool uniform = nodes.size() > 1 && nodes.front().size() > 1;
  for (const auto& node : nodes) uniform = uniform && node.size() == nodes.front().size();
  std::vector<std::vector<int>> orders;
  if (!uniform) {
    std::vector<int> order(static_cast<size_t>(b.n()));
    for (int i = 0; i < b.n(); ++i) order[static_cast<size_t>(i)] = i;
    orders.push_back(order);
    return orders;
  }
  // Channel c visits node i starting at local position s_i = c - i and leaves it from
  // s_i - 1 = s_{i+1}: every node-to-node hop stays on one rail (same local position), and
  // the channels use distinct rails at every crossing, as NCCL's rings do.
  const int m = static_cast<int>(nodes.front().size());
  for (int c = 0; c < m; ++c) {
    std::vector<int> order;
    for (size_t i = 0; i < nodes.size(); ++i) {
      int start = ((c - static_cast<int>(i)) % m + m) % m;
      for (int j = 0; j < m; ++j) order.push_back(nodes[i][static_cast<size_t>((start + j) % m)]);
    }
    orders.push_back(order);
  }
  return orders;
}

namespace {

// The slowest latency class among a ring pattern's intra-node hops (NVLINK when none).
int intra_class(const ScheduleBuilder& b, const std::vector<std::vector<int>>& orders) {
  int cls = static_cast<int>(LatencyClass::NVLINK);
  for (const auto& order : orders) {
    for (size_t i = 0; i < order.size(); ++i) {
      int a = order[i], c = order[(i + 1) % order.size()];
      if (b.node(a) == b.node(c)) cls = std::max(cls, b.route_class(a, c));
    }
  }
  return cls;
}

// `steps` identical ring steps. NCCL's ring latency charges the steps that cross nodes
// (2(nNodes-1) of 2(n-1) for all-reduce: a chunk's trip round the ring) at the NET latency and
// the others at the intra-node latency, so the phases of the one pattern are charged so.
void ring_steps(ScheduleBuilder& b, double bytes, int steps) {
  auto orders = ring_orders(b);
  const int n = b.n();
  const int nodes = static_cast<int>(b.nodes().size());
  const double per_flow = bytes / (static_cast<double>(orders.size()) * n);
  int p = b.begin_pattern();
  for (const auto& order : orders)
    for (int i = 0; i < n; ++i) b.flow(b.v(order[i]), b.v(order[(i + 1) % n]), per_flow);
  const int inter = n > 1 ? steps / (n - 1) * (nodes - 1) : 0;
  b.phase_class(p, static_cast<int>(LatencyClass::NET), inter);
  b.phase_class(p, intra_class(b, orders), steps - inter);
}

// Pipelined chain from position `root` (toward it when `to_root`), k chunks.
void chain(ScheduleBuilder& b, double bytes, int root, bool to_root, int k) {
  const int n = b.n();
  std::vector<int> order;
  for (int i = 0; i < n; ++i) order.push_back((root + i) % n);
  const int hops = n - 1;
  std::map<std::pair<int, int>, int> patterns;
  for (int p = 0; p < hops + k - 1; ++p) {
    int lo = std::max(0, p - k + 1), hi = std::min(hops - 1, p);
    auto [it, inserted] = patterns.emplace(std::make_pair(lo, hi), 0);
    if (inserted) {
      it->second = b.begin_pattern();
      for (int h = lo; h <= hi; ++h) {
        if (to_root) {
          b.flow(b.v(order[hops - h]), b.v(order[hops - h - 1]), bytes / k);
        } else {
          b.flow(b.v(order[h]), b.v(order[h + 1]), bytes / k);
        }
      }
    }
    if (p < hops) {
      int h = to_root ? hops - 1 - p : p;  // the hop chunk 0 crosses in this phase
      b.phase_class(it->second, b.route_class(order[h], order[h + 1]));
    } else {
      b.phase(it->second, false);
    }
  }
}

}  // namespace

void lower_ring(ScheduleBuilder& b, Op op, double S, const CollectiveRequest& req) {
  const int n = b.n();
  switch (op) {
    case Op::ALL_REDUCE:
      ring_steps(b, S, 2 * (n - 1));
      return;
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
      ring_steps(b, S, n - 1);
      return;
    case Op::BROADCAST:
      chain(b, S, req.root, false,
            req.pipeline_chunks ? req.pipeline_chunks : default_chunks(S, 64));
      return;
    case Op::REDUCE:
      chain(b, S, req.root, true,
            req.pipeline_chunks ? req.pipeline_chunks : default_chunks(S, 64));
      return;
    default:
      // collective_checks.cpp rejects the ops the registry does not list.
      throw InternalError(fmt::format("ring lowering asked for {}", to_string(op)));
  }
}

}  // namespace loom::sim
