// Tree lowering: NCCL's double binary tree across nodes with a chain inside each node,
// reduce up and broadcast down, pipelined in chunks.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "sim/collective_lowering.hpp"

namespace loom::sim {

namespace {

// Parent of `rank` in NCCL's binary tree over n ranks (ncclGetBtree), -1 for the root.
int btree_parent(int n, int rank) {
  if (rank == 0) return -1;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  return up;
}

// NCCL's tree: a double binary tree across nodes (ncclGetDtree) and a chain inside each
// node (src/graph/connect.cc: the intra-node ranks of a tree channel form a chain whose head
// talks to the network). loom runs one channel per local rank c of the first node: the
// channel's chain in every node starts at local rank c (its head, on rail c) and visits the
// node's other ranks in order; heads follow binary tree 0 (even c) or 1 (odd c) over the
// nodes, so that inter-node traffic spreads over every rail. Each channel carries S/C,
// reduced up and broadcast down, pipelined in k chunks.
struct TreeChannel {
  std::vector<int> parent;  // by group position, -1 for the root
  std::vector<int> height;  // hops to the deepest descendant
  std::vector<int> depth;   // hops from the root
  int root = 0;
};

TreeChannel tree_channel(const std::vector<std::vector<int>>& nodes, int c, int n) {
  const int N = static_cast<int>(nodes.size());
  TreeChannel t;
  t.parent.assign(static_cast<size_t>(n), -1);
  std::vector<int> head(static_cast<size_t>(N));
  for (int x = 0; x < N; ++x) {
    const auto& node = nodes[static_cast<size_t>(x)];
    const int m = static_cast<int>(node.size());
    const int start = c % m;
    head[static_cast<size_t>(x)] = node[static_cast<size_t>(start)];
    for (int j = 1; j < m; ++j) {
      t.parent[static_cast<size_t>(node[static_cast<size_t>((start + j) % m)])] =
          node[static_cast<size_t>((start + j - 1) % m)];
    }
  }
  // Tree 0 is the binary tree over nodes; tree 1 mirrors it (N even) or shifts it by one
  // (N odd), so most nodes are a leaf in one tree and an inner node in the other.
  for (int x = 0; x < N; ++x) {
    const int up = dtree_parent(N, x, c % 2);
    if (up >= 0)
      t.parent[static_cast<size_t>(head[static_cast<size_t>(x)])] = head[static_cast<size_t>(up)];
  }
  t.height.assign(static_cast<size_t>(n), 0);
  t.depth.assign(static_cast<size_t>(n), -1);
  for (int r = 0; r < n; ++r) {
    if (t.parent[static_cast<size_t>(r)] < 0) t.root = r;
  }
  // Depths by walking up (memoised), heights by visiting ranks deepest first.
  std::vector<int> walk;
  for (int r = 0; r < n; ++r) {
    int x = r;
    walk.clear();
    while (x >= 0 && t.depth[static_cast<size_t>(x)] < 0) {
      walk.push_back(x);
      x = t.parent[static_cast<size_t>(x)];
    }
    int d = x < 0 ? -1 : t.depth[static_cast<size_t>(x)];
    for (auto it = walk.rbegin(); it != walk.rend(); ++it) t.depth[static_cast<size_t>(*it)] = ++d;
  }
  std::vector<int> order(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) order[static_cast<size_t>(r)] = r;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return t.depth[static_cast<size_t>(a)] > t.depth[static_cast<size_t>(b)];
  });
  for (int r : order) {
    int q = t.parent[static_cast<size_t>(r)];
    if (q >= 0) {
      t.height[static_cast<size_t>(q)] =
          std::max(t.height[static_cast<size_t>(q)], t.height[static_cast<size_t>(r)] + 1);
    }
  }
  return t;
}

}  // namespace

int dtree_parent(int N, int x, int tree) {
  if (tree == 0) return btree_parent(N, x);
  if (N % 2 == 0) {
    const int q = btree_parent(N, N - 1 - x);
    return q < 0 ? -1 : N - 1 - q;
  }
  const int q = btree_parent(N, (x - 1 + N) % N);
  return q < 0 ? -1 : (q + 1) % N;
}

void lower_tree(ScheduleBuilder& b, double S, int k) {
  const int n = b.n();
  const auto nodes = b.nodes();
  const int C = static_cast<int>(nodes.front().size());
  std::vector<TreeChannel> channels;
  for (int c = 0; c < C; ++c) channels.push_back(tree_channel(nodes, c, n));
  // Reduce: rank r sends chunk i up at phase i + height(r); broadcast: a rank at depth d
  // receives chunk i at phase i + height(root) + d - 1. The first `fill` phases carry chunk
  // 0 along the critical path and pay that hop's latency; the rest overlap.
  int fill = 0, last = 0;
  for (const auto& t : channels) {
    const int max_depth = *std::max_element(t.depth.begin(), t.depth.end());
    fill = std::max(fill, t.height[static_cast<size_t>(t.root)] + max_depth);
    last = std::max(last, k - 1 + t.height[static_cast<size_t>(t.root)] + max_depth - 1);
  }
  const double chunk = S / C / k;
  std::vector<FlowSpec> flows, previous;
  int previous_pattern = -1;
  for (int p = 0; p <= last; ++p) {
    flows.clear();
    int cls = UNCHARGED;
    for (const auto& t : channels) {
      const int top = t.height[static_cast<size_t>(t.root)];
      for (int r = 0; r < n; ++r) {
        const int q = t.parent[static_cast<size_t>(r)];
        if (q < 0) continue;
        const int up = p - t.height[static_cast<size_t>(r)];
        const int down = p - (top + t.depth[static_cast<size_t>(r)] - 1);
        if (up >= 0 && up < k) {
          flows.push_back({b.v(r), b.v(q), chunk});
          if (up == 0) cls = std::max(cls, b.route_class(r, q));
        }
        if (down >= 0 && down < k) {
          flows.push_back({b.v(q), b.v(r), chunk});
          if (down == 0) cls = std::max(cls, b.route_class(q, r));
        }
      }
    }
    std::sort(flows.begin(), flows.end(), [](const FlowSpec& x, const FlowSpec& y) {
      return std::tie(x.src, x.dst) < std::tie(y.src, y.dst);
    });
    const bool same = previous_pattern >= 0 && flows.size() == previous.size() &&
                      std::equal(flows.begin(), flows.end(), previous.begin(),
                                 [](const FlowSpec& x, const FlowSpec& y) {
                                   return x.src == y.src && x.dst == y.dst;
                                 });
    if (!same) {
      previous_pattern = b.begin_pattern();
      for (const auto& f : flows) b.flow(f.src, f.dst, f.bytes);
      std::swap(previous, flows);
    }
    b.phase_class(previous_pattern, p < fill ? (cls == UNCHARGED ? DERIVED : cls) : UNCHARGED);
  }
}

// Tree pipeline depth: chunks of about NCCL's per-step slice per channel (LL 4 KiB: a 64 KiB
// LL buffer over 8 steps at half payload; LL128 ~120 KiB; Simple 512 KiB), 1 to 64 chunks.
int tree_chunks(const ScheduleBuilder& b, double S, Protocol protocol) {
  const double slice = protocol == Protocol::LL      ? 4.0 * 1024
                       : protocol == Protocol::LL128 ? 120.0 * 1024
                                                     : 512.0 * 1024;
  const double per_channel = S / static_cast<double>(b.nodes().front().size());
  return static_cast<int>(std::clamp(std::ceil(per_channel / slice), 1.0, 64.0));
}

}  // namespace loom::sim
