#include "sim/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "sim/nccl_constants.hpp"
#include "sim/nccl_model.hpp"

namespace loom::sim {

namespace {

const std::vector<std::pair<CollectiveOp, std::string>>& op_table() {
  static const std::vector<std::pair<CollectiveOp, std::string>> table = {
      {CollectiveOp::SEND_RECV, "send_recv"},
      {CollectiveOp::BROADCAST, "broadcast"},
      {CollectiveOp::SCATTER, "scatter"},
      {CollectiveOp::GATHER, "gather"},
      {CollectiveOp::REDUCE, "reduce"},
      {CollectiveOp::ALL_GATHER, "all_gather"},
      {CollectiveOp::REDUCE_SCATTER, "reduce_scatter"},
      {CollectiveOp::ALL_REDUCE, "all_reduce"},
      {CollectiveOp::ALL_TO_ALL, "all_to_all"},
      {CollectiveOp::BARRIER, "barrier"},
  };
  return table;
}

using Op = CollectiveOp;

}  // namespace

std::string to_string(CollectiveOp op) {
  for (const auto& [o, name] : op_table())
    if (o == op) return name;
  return "?";
}

std::vector<std::string> collective_op_names() {
  std::vector<std::string> names;
  for (const auto& entry : op_table()) names.push_back(entry.second);
  return names;
}

CollectiveOp parse_collective_op(std::string_view name, std::string_view field) {
  for (const auto& [o, n] : op_table())
    if (n == name) return o;
  throw ValidationError::unknown_name(field, name, collective_op_names());
}

double bus_bandwidth_factor(CollectiveOp op, int n) {
  if (n <= 0) return 1.0;
  switch (op) {
    case Op::ALL_REDUCE:
      return 2.0 * (n - 1) / n;
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
    case Op::ALL_TO_ALL:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

const std::vector<AlgorithmInfo>& collective_algorithms() {
  static const std::vector<AlgorithmInfo> registry = {
      {Algorithm::AUTO,
       "auto",
       "least predicted time among ring, tree and nvls (direct for point-to-point ops), "
       "protocol LL/LL128/Simple chosen likewise, as NCCL's tuner does",
       {Op::SEND_RECV, Op::BROADCAST, Op::SCATTER, Op::GATHER, Op::REDUCE, Op::ALL_GATHER,
        Op::REDUCE_SCATTER, Op::ALL_REDUCE, Op::ALL_TO_ALL, Op::BARRIER}},
      {Algorithm::RING,
       "ring",
       "ring over the group (one ring per local GPU, i.e. per rail, across nodes); broadcast "
       "and reduce as a pipelined chain",
       {Op::BROADCAST, Op::REDUCE, Op::ALL_GATHER, Op::REDUCE_SCATTER, Op::ALL_REDUCE,
        Op::BARRIER}},
      {Algorithm::TREE,
       "tree",
       "NCCL's double binary tree, each tree carrying half the data, reduce and broadcast "
       "pipelined in chunks",
       {Op::ALL_REDUCE, Op::BARRIER}},
      {Algorithm::DIRECT,
       "direct",
       "naive: every rank sends its share straight to every rank that needs it",
       {Op::SEND_RECV, Op::BROADCAST, Op::SCATTER, Op::GATHER, Op::REDUCE, Op::ALL_GATHER,
        Op::REDUCE_SCATTER, Op::ALL_REDUCE, Op::ALL_TO_ALL, Op::BARRIER}},
      {Algorithm::MASTER_WORKER,
       "master_worker",
       "gather everything to the root, reduce there, broadcast from the root",
       {Op::BROADCAST, Op::SCATTER, Op::GATHER, Op::REDUCE, Op::ALL_REDUCE, Op::BARRIER}},
      {Algorithm::HALVING_DOUBLING,
       "halving_doubling",
       "recursive halving (reduce-scatter) and doubling (all-gather), binomial trees for "
       "broadcast and reduce; power-of-two groups",
       {Op::BROADCAST, Op::REDUCE, Op::ALL_GATHER, Op::REDUCE_SCATTER, Op::ALL_REDUCE,
        Op::BARRIER}},
      {Algorithm::HIERARCHICAL,
       "hierarchical",
       "intra-node ring reduce-scatter, inter-node ring all-reduce per local rank, intra-node "
       "ring all-gather",
       {Op::ALL_REDUCE}},
      {Algorithm::NVLS,
       "nvls",
       "NVLink SHARP: the NVSwitch reduces and multicasts; one node whose NVSwitch supports "
       "in-switch reduction",
       {Op::ALL_REDUCE}},
  };
  return registry;
}

std::string to_string(Algorithm algorithm) {
  for (const auto& info : collective_algorithms())
    if (info.id == algorithm) return info.name;
  return "?";
}

Algorithm parse_algorithm(std::string_view name, std::string_view field) {
  std::vector<std::string> valid;
  for (const auto& info : collective_algorithms()) {
    if (info.name == name) return info.id;
    valid.push_back(info.name);
  }
  throw ValidationError::unknown_name(field, name, valid);
}

std::string to_string(Protocol protocol) {
  switch (protocol) {
    case Protocol::LL:
      return "LL";
    case Protocol::LL128:
      return "LL128";
    case Protocol::SIMPLE:
      return "Simple";
  }
  return "?";
}

BatchSpec CollectiveSchedule::batch(int p) const {
  BatchSpec b;
  auto begin = pattern_begin[static_cast<size_t>(p)];
  auto end = pattern_begin[static_cast<size_t>(p) + 1];
  b.flows = flows.data() + begin;
  b.count = end - begin;
  b.wire_factor = wire_factor;
  b.path_latency = path_latency;
  return b;
}

namespace {

const AlgorithmInfo& info_of(Algorithm a) {
  for (const auto& info : collective_algorithms())
    if (info.id == a) return info;
  throw InternalError("unregistered algorithm");
}

bool implements(Algorithm a, Op op) {
  const auto& ops = info_of(a).ops;
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

// Builds patterns and phases. Each phase carries a latency class: the class of NCCL's
// hwLat row it pays (NVLINK, PCI, NET), DERIVED (the slowest class the pattern's flows
// cross) or UNCHARGED (pipelined steady-state phases, whose latency overlaps the previous
// chunk).
inline constexpr int UNCHARGED = -1;
inline constexpr int DERIVED = -2;

class Builder {
 public:
  Builder(Fabric& fabric, const std::vector<int>& ranks)
      : fabric_(fabric), n_(static_cast<int>(ranks.size())) {
    for (int r : ranks) v_.push_back(fabric.cluster().gpu_vertex(r));
  }
  int n() const { return n_; }
  topo::VertexId v(int i) const { return v_[static_cast<size_t>(i)]; }
  Fabric& fabric() const { return fabric_; }

  int begin_pattern() {
    s_.pattern_begin.push_back(static_cast<std::uint32_t>(s_.flows.size()));
    return static_cast<int>(s_.pattern_begin.size()) - 1;
  }
  void flow(topo::VertexId a, topo::VertexId b, double bytes) {
    if (a != b) s_.flows.push_back({a, b, bytes});
  }
  void phase(int pattern, bool charged = true, int times = 1) {
    phase_class(pattern, charged ? DERIVED : UNCHARGED, times);
  }
  void phase_class(int pattern, int latency_class, int times = 1) {
    for (int i = 0; i < times; ++i) {
      s_.phases.push_back({pattern, latency_class == UNCHARGED ? 0 : 1});
      classes_.push_back(latency_class);
    }
  }
  /// The latency class of each phase (see UNCHARGED, DERIVED).
  const std::vector<int>& phase_classes() const { return classes_; }
  CollectiveSchedule finish() {
    s_.pattern_begin.push_back(static_cast<std::uint32_t>(s_.flows.size()));
    return std::move(s_);
  }
  /// NCCL's latency class of the route between two positions.
  int route_class(int a, int b) const {
    return static_cast<int>(fabric_.route(v(a), v(b)).latency_class);
  }
  int node(int i) const { return fabric_.node_of(v(i)); }

  // Ranks grouped by node in order of first appearance; each node's positions in group order.
  std::vector<std::vector<int>> nodes() const {
    std::vector<std::vector<int>> groups;
    std::map<int, size_t> index;
    for (int i = 0; i < n_; ++i) {
      auto [it, inserted] = index.emplace(node(i), groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(i);
    }
    return groups;
  }

 private:
  Fabric& fabric_;
  int n_;
  std::vector<topo::VertexId> v_;
  CollectiveSchedule s_;
  std::vector<int> classes_;
};

int default_chunks(double bytes, int cap) {
  // Pipelines split a message into chunks of about 4 MiB (NCCL Simple moves 512 KiB slices
  // per channel; 8 channels), at least 1, at most `cap` to bound the phase count.
  double k = std::ceil(bytes / (4.0 * 1024 * 1024));
  return static_cast<int>(std::clamp(k, 1.0, static_cast<double>(cap)));
}

bool is_power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

[[noreturn]] void cannot(Algorithm a, std::string_view why) {
  throw ValidationError("--algo", fmt::format("--algo: algorithm '{}' {}", to_string(a), why));
}

// ---- ring -------------------------------------------------------------------------------

// The rings: one per local position when the group spans several nodes with the same
// number of ranks each (NCCL builds one ring per NIC/rail). Otherwise one ring in group
// order.
std::vector<std::vector<int>> ring_orders(const Builder& b) {
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

// The slowest latency class among a ring pattern's intra-node hops (NVLINK when none).
int intra_class(const Builder& b, const std::vector<std::vector<int>>& orders) {
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
void ring_steps(Builder& b, double bytes, int steps) {
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
void chain(Builder& b, double bytes, int root, bool to_root, int k) {
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

void build_ring(Builder& b, Op op, double S, const CollectiveRequest& req) {
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
      cannot(Algorithm::RING, fmt::format("does not implement {}", to_string(op)));
  }
}

// ---- double binary tree ------------------------------------------------------------------

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
    int up;
    if (c % 2 == 0) {
      up = btree_parent(N, x);
    } else if (N % 2 == 0) {
      int q = btree_parent(N, N - 1 - x);
      up = q < 0 ? -1 : N - 1 - q;
    } else {
      int q = btree_parent(N, (x - 1 + N) % N);
      up = q < 0 ? -1 : (q + 1) % N;
    }
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

void build_tree(Builder& b, double S, int k) {
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

// ---- direct, master-worker ---------------------------------------------------------------

void all_pairs(Builder& b, double bytes, int times) {
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i)
    for (int j = 0; j < b.n(); ++j) b.flow(b.v(i), b.v(j), bytes);
  b.phase(p, true, times);
}

void from_root(Builder& b, int root, double bytes) {
  int p = b.begin_pattern();
  for (int j = 0; j < b.n(); ++j) b.flow(b.v(root), b.v(j), bytes);
  b.phase(p);
}

void to_root(Builder& b, int root, double bytes) {
  int p = b.begin_pattern();
  for (int j = 0; j < b.n(); ++j) b.flow(b.v(j), b.v(root), bytes);
  b.phase(p);
}

void build_direct(Builder& b, Op op, double S, int root) {
  const int n = b.n();
  switch (op) {
    case Op::SEND_RECV: {
      int p = b.begin_pattern();
      if (n == 2) {
        b.flow(b.v(root), b.v(1 - root), S);
      } else {
        for (int i = 0; i < n; ++i) b.flow(b.v(i), b.v((i + 1) % n), S);
      }
      b.phase(p);
      return;
    }
    case Op::ALL_REDUCE:
      all_pairs(b, S / n, 2);
      return;
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
    case Op::ALL_TO_ALL:
      all_pairs(b, S / n, 1);
      return;
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
      cannot(Algorithm::DIRECT, fmt::format("does not implement {}", to_string(op)));
  }
}

void build_master_worker(Builder& b, Op op, double S, int root) {
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
      cannot(Algorithm::MASTER_WORKER, fmt::format("does not implement {}", to_string(op)));
  }
}

// ---- recursive halving-doubling ---------------------------------------------------------

void exchange(Builder& b, int distance, double bytes) {
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i) b.flow(b.v(i), b.v(i ^ distance), bytes);
  b.phase(p);
}

void build_halving_doubling(Builder& b, Op op, double S, int root) {
  const int n = b.n();
  if (!is_power_of_two(n)) {
    cannot(Algorithm::HALVING_DOUBLING,
           fmt::format("needs a power-of-two group; this group has {} ranks", n));
  }
  auto halving = [&] {
    for (int d = n / 2, part = 2; d >= 1; d /= 2, part *= 2) exchange(b, d, S / part);
  };
  auto doubling = [&] {
    for (int d = 1; d < n; d *= 2) exchange(b, d, S * d / n);
  };
  switch (op) {
    case Op::ALL_REDUCE:
      halving();
      doubling();
      return;
    case Op::REDUCE_SCATTER:
      halving();
      return;
    case Op::ALL_GATHER:
      doubling();
      return;
    case Op::BROADCAST:
    case Op::REDUCE: {
      // Binomial tree relative to the root: step with distance d pairs i < d with i + d.
      std::vector<int> distances;
      for (int d = 1; d < n; d *= 2) distances.push_back(d);
      if (op == Op::REDUCE) std::reverse(distances.begin(), distances.end());
      for (int d : distances) {
        int p = b.begin_pattern();
        for (int i = 0; i < d; ++i) {
          int a = (root + i) % n, c = (root + i + d) % n;
          if (op == Op::BROADCAST) {
            b.flow(b.v(a), b.v(c), S);
          } else {
            b.flow(b.v(c), b.v(a), S);
          }
        }
        b.phase(p);
      }
      return;
    }
    default:
      cannot(Algorithm::HALVING_DOUBLING, fmt::format("does not implement {}", to_string(op)));
  }
}

// ---- hierarchical ----------------------------------------------------------------------

void build_hierarchical(Builder& b, double S) {
  auto nodes = b.nodes();
  const int m = static_cast<int>(nodes.front().size());
  for (const auto& node : nodes) {
    if (static_cast<int>(node.size()) != m) {
      cannot(Algorithm::HIERARCHICAL,
             "needs the same number of group ranks on every node; this group is uneven");
    }
  }
  const int N = static_cast<int>(nodes.size());
  auto intra = [&](int steps) {
    if (m < 2) return;
    int p = b.begin_pattern();
    for (const auto& node : nodes)
      for (int j = 0; j < m; ++j) b.flow(b.v(node[j]), b.v(node[(j + 1) % m]), S / m);
    b.phase(p, true, steps);
  };
  intra(m - 1);  // reduce-scatter inside each node: S/m per step
  if (N > 1) {   // all-reduce of each S/m shard among the ranks with the same local position
    int p = b.begin_pattern();
    for (int j = 0; j < m; ++j)
      for (int x = 0; x < N; ++x) b.flow(b.v(nodes[x][j]), b.v(nodes[(x + 1) % N][j]), S / m / N);
    b.phase(p, true, 2 * (N - 1));
  }
  intra(m - 1);  // all-gather inside each node
}

// ---- NVLS ------------------------------------------------------------------------------

void build_nvls(Builder& b, Fabric& fabric, double S) {
  const auto& cluster = fabric.cluster();
  // The in-switch-reduction NVSwitches adjacent to each rank's GPU, with the link capacity.
  auto switches_of = [&](topo::VertexId gpu) {
    std::vector<std::pair<topo::VertexId, double>> out;
    for (topo::LinkId l : cluster.out_links(gpu)) {
      const auto& link = cluster.link(l);
      const auto& to = cluster.vertex(link.to);
      if (to.kind == topo::VertexKind::NVSWITCH && to.in_switch_reduce)
        out.emplace_back(link.to, link.bandwidth_Bps);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  auto first = switches_of(b.v(0));
  if (first.empty()) {
    cannot(Algorithm::NVLS,
           "needs an NVSwitch with in-switch reduction (NVLink SHARP) next to "
           "every rank; this cluster has none");
  }
  for (int i = 1; i < b.n(); ++i) {
    auto mine = switches_of(b.v(i));
    bool same = mine.size() == first.size();
    for (size_t s = 0; same && s < mine.size(); ++s) same = mine[s].first == first[s].first;
    if (!same) {
      cannot(Algorithm::NVLS,
             "needs every rank on the same NVLS-capable NVSwitch fabric (one "
             "node); use hierarchical or ring across nodes");
    }
  }
  double total_bw = 0;
  for (const auto& s : first) total_bw += s.second;
  // Each GPU pushes its whole buffer into the switches (multimem reduce loads) while the
  // switches multicast the reduced result back: S each way per GPU, split over switches
  // by link bandwidth, all in one pipelined step.
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i) {
    for (const auto& [sw, bw] : switches_of(b.v(i))) {
      double share = S * bw / total_bw;
      b.flow(b.v(i), sw, share);
      b.flow(sw, b.v(i), share);
    }
  }
  b.phase(p);
}

void validate(const topo::Cluster& cluster, const CollectiveRequest& req) {
  const int n = static_cast<int>(req.ranks.size());
  if (n < 1)
    throw ValidationError("group", "a collective needs at least one rank; the group is empty");
  if (req.op == Op::SEND_RECV && n < 2) {
    throw ValidationError("group", "send_recv needs at least 2 ranks; the group has 1");
  }
  std::set<int> seen;
  for (int r : req.ranks) {
    cluster.gpu_vertex(r);  // throws when out of range
    if (!seen.insert(r).second) {
      throw ValidationError("group", fmt::format("rank {} appears twice in the group; list each "
                                                 "rank once",
                                                 r));
    }
  }
  if (req.root < 0 || req.root >= n) {
    throw ValidationError(
        "root", fmt::format("root index {} is outside the group of {} ranks", req.root, n));
  }
  if (!(req.bytes >= 0) || !std::isfinite(req.bytes)) {
    throw ValidationError("bytes",
                          fmt::format("message size {} must be finite and >= 0", req.bytes));
  }
  if (req.pipeline_chunks < 0) {
    throw ValidationError::not_positive("pipeline_chunks", std::to_string(req.pipeline_chunks));
  }
  if (!(req.contention >= 1.0)) {
    throw ValidationError(
        "contention",
        fmt::format("contention {} must be >= 1 (a bandwidth divisor)", req.contention));
  }
  for (const auto& g : req.concurrent_groups) {
    if (static_cast<int>(g.size()) != n) {
      throw ValidationError("concurrent_groups",
                            fmt::format("a concurrent group has {} ranks; identical groups must "
                                        "have {} like the simulated one",
                                        g.size(), n));
    }
  }
}

}  // namespace

NcclShape nccl_shape(Fabric& fabric, const std::vector<int>& ranks) {
  Builder b(fabric, ranks);
  const auto& gpu = fabric.cluster().gpu;
  NcclShape shape;
  shape.ranks = b.n();
  const auto nodes = b.nodes();
  shape.nodes = static_cast<int>(nodes.size());
  shape.arch = nccl_arch(gpu);
  shape.channels = nccl_channels(gpu);
  for (const auto& node : nodes) {
    if (node.size() >= 2) {
      shape.intra = static_cast<LatencyClass>(b.route_class(node[0], node[1]));
      break;
    }
  }
  if (b.n() < 2) return shape;
  // The raw bus bandwidth (NCCL: nChannels x bw from its topology search) is the rate at
  // which each rank sends in one uncontended step of loom's rings: one byte per flow, the
  // busiest link's load over its capacity.
  // Per-link load in a scratch buffer sized to the fabric once and reset only where touched:
  // this runs for every point-to-point send of a lowered step, and a fresh fabric-sized
  // vector per call dominated --full runs.
  thread_local std::vector<double> load;
  thread_local std::vector<topo::LinkId> touched;
  if (load.size() < static_cast<size_t>(fabric.num_links()))
    load.assign(static_cast<size_t>(fabric.num_links()), 0.0);
  touched.clear();
  const auto orders = ring_orders(b);
  double ps_per_byte = 0;
  for (const auto& order : orders) {
    for (size_t i = 0; i < order.size(); ++i) {
      RouteRef r = fabric.route(b.v(order[i]), b.v(order[(i + 1) % order.size()]));
      for (topo::LinkId l : fabric.links(r)) {
        double& x = load[static_cast<size_t>(l)];
        if (x == 0.0) touched.push_back(l);
        x += 1.0;
        ps_per_byte = std::max(ps_per_byte, x / fabric.capacity_Bpps(l));
      }
    }
  }
  for (topo::LinkId l : touched) load[static_cast<size_t>(l)] = 0.0;
  if (ps_per_byte > 0) {
    shape.bus_bandwidth_GBps =
        static_cast<double>(orders.size()) / ps_per_byte * static_cast<double>(PS_PER_SECOND) / 1e9;
  }
  return shape;
}

namespace {

// Tree pipeline depth: chunks of about NCCL's per-step slice per channel (LL 4 KiB: a 64 KiB
// LL buffer over 8 steps at half payload; LL128 ~120 KiB; Simple 512 KiB), 1 to 64 chunks.
int tree_chunks(const Builder& b, double S, Protocol protocol) {
  const double slice = protocol == Protocol::LL      ? 4.0 * 1024
                       : protocol == Protocol::LL128 ? 120.0 * 1024
                                                     : 512.0 * 1024;
  const double per_channel = S / static_cast<double>(b.nodes().front().size());
  return static_cast<int>(std::clamp(std::ceil(per_channel / slice), 1.0, 64.0));
}

CollectiveSchedule build_one(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                             Protocol protocol, const CostOptions& options) {
  Builder b(fabric, req.ranks);
  Op op = req.op;
  double S = req.bytes;
  if (op == Op::BARRIER) {  // a barrier is an all-reduce of nothing: latency only
    op = a == Algorithm::DIRECT ? Op::ALL_TO_ALL : Op::ALL_REDUCE;
    S = 0;
  }
  if (!implements(a, req.op)) {
    std::vector<std::string> names;
    for (const auto& info : collective_algorithms())
      if (implements(info.id, req.op)) names.push_back(info.name);
    throw ValidationError("--algo",
                          fmt::format("--algo: algorithm '{}' does not implement {}; use one "
                                      "of: {}",
                                      to_string(a), to_string(req.op), join(names, ", ")));
  }
  if (a == Algorithm::NVLS && protocol != Protocol::SIMPLE) {
    cannot(a, "runs only with the Simple protocol");
  }
  if (b.n() > 1) {
    switch (a) {
      case Algorithm::RING:
        build_ring(b, op, S, req);
        break;
      case Algorithm::TREE:
        build_tree(b, S, req.pipeline_chunks ? req.pipeline_chunks : tree_chunks(b, S, protocol));
        break;
      case Algorithm::DIRECT:
        build_direct(b, op, S, req.root);
        break;
      case Algorithm::MASTER_WORKER:
        build_master_worker(b, op, S, req.root);
        break;
      case Algorithm::HALVING_DOUBLING:
        build_halving_doubling(b, op, S, req.root);
        break;
      case Algorithm::HIERARCHICAL:
        build_hierarchical(b, S);
        break;
      case Algorithm::NVLS:
        build_nvls(b, fabric, S);
        break;
      case Algorithm::AUTO:
        throw InternalError("build_schedule called with auto");
    }
  }
  const std::vector<int> classes = b.phase_classes();
  CollectiveSchedule s = b.finish();
  s.algorithm = a;
  s.protocol = protocol;
  if (!options.nccl_overheads) {
    for (auto& ph : s.phases) ph.overhead = 0;
    s.wire_factor = req.contention;
    return s;
  }
  const NcclShape shape = nccl_shape(fabric, req.ranks);
  // Bandwidth: NCCL's multiplicative refinements slow the wire (LL's 8-byte stores carry 4
  // bytes, etc.); its absolute caps (llMaxBw, nChannels x perChMax) bound each rank's send
  // rate, shared by the rank's flows of a step.
  double factor, cap_GBps;
  if (a == Algorithm::NVLS) {
    // The tuner's own factor (per architecture), so lowering and choice agree.
    factor = nccl_nvls_factor(shape);
    cap_GBps = std::numeric_limits<double>::infinity();
  } else {
    NcclBandwidth bw = nccl_bus_bandwidth(a, protocol, op, shape);
    factor = bw.factor;
    cap_GBps = bw.cap_GBps;
    if (a == Algorithm::TREE) {
      const double corr = nccl_tree_correction(protocol, S);
      factor *= corr;
      cap_GBps *= corr;
    }
  }
  s.wire_factor = req.contention / factor;
  if (std::isfinite(cap_GBps)) {
    const double cap_Bpps = cap_GBps * 1e9 / static_cast<double>(PS_PER_SECOND);
    std::map<topo::VertexId, int> out_degree;
    for (int p = 0; p < s.num_patterns(); ++p) {
      out_degree.clear();
      for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i)
        ++out_degree[s.flows[i].src];
      for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i)
        s.flows[i].max_rate_Bpps = cap_Bpps / out_degree[s.flows[i].src];
    }
  }
  // Latency: NCCL's baseLat once, and per charged phase the hwLat of its class
  // (nccl_step_latency_us), wire included (so the flows' own path latency is not added).
  // Ring+Simple all-reduce across nodes pays the plateau factor on both (tuning.cc).
  s.path_latency = false;
  const nccl::Family family = nccl_family(a);
  const double scale = a == Algorithm::RING && nccl_ring_plateau(protocol, op, shape, S)
                           ? nccl::RING_PLATEAU_LATENCY_FACTOR
                           : 1.0;
  s.base_latency =
      to_sim_time(scale * nccl::BASE_LATENCY_US[family][static_cast<size_t>(protocol)] * 1e-6);
  std::vector<int> derived(static_cast<size_t>(s.num_patterns()), -1);
  for (int p = 0; p < s.num_patterns(); ++p) {
    for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i) {
      RouteRef r = fabric.route(s.flows[i].src, s.flows[i].dst);
      derived[p] = std::max(derived[p], static_cast<int>(r.latency_class));
    }
  }
  for (size_t i = 0; i < s.phases.size(); ++i) {
    auto& ph = s.phases[i];
    int cls = classes[i] == DERIVED ? derived[static_cast<size_t>(ph.pattern)] : classes[i];
    if (classes[i] == UNCHARGED || cls < 0) {
      ph.overhead = 0;
      continue;
    }
    const double us = nccl_step_latency_us(family, static_cast<LatencyClass>(cls), protocol, shape);
    ph.overhead = to_sim_time(scale * us * 1e-6);
  }
  return s;
}

}  // namespace

CollectiveSchedule build_schedule(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                                  Protocol protocol, const CostOptions& options) {
  validate(fabric.cluster(), req);
  CollectiveSchedule s = build_one(fabric, req, a, protocol, options);
  if (req.concurrent_groups.empty()) return s;
  // Add the identical groups' flows to every pattern, pattern by pattern.
  std::vector<CollectiveSchedule> others;
  for (const auto& g : req.concurrent_groups) {
    CollectiveRequest other = req;
    other.ranks = g;
    other.concurrent_groups.clear();
    validate(fabric.cluster(), other);
    others.push_back(build_one(fabric, other, a, protocol, options));
    if (others.back().num_patterns() != s.num_patterns() ||
        others.back().phases.size() != s.phases.size()) {
      throw ValidationError("concurrent_groups",
                            "a concurrent group lowers to a different schedule (different "
                            "node layout); only identical groups can be folded together");
    }
  }
  std::vector<FlowSpec> flows;
  std::vector<std::uint32_t> begin;
  auto append = [&](const CollectiveSchedule& from, int p) {
    flows.insert(flows.end(), from.flows.begin() + from.pattern_begin[p],
                 from.flows.begin() + from.pattern_begin[p + 1]);
  };
  for (int p = 0; p < s.num_patterns(); ++p) {
    begin.push_back(static_cast<std::uint32_t>(flows.size()));
    append(s, p);
    for (const auto& o : others) append(o, p);
  }
  begin.push_back(static_cast<std::uint32_t>(flows.size()));
  s.flows = std::move(flows);
  s.pattern_begin = std::move(begin);
  return s;
}

SimTime estimate_schedule(Fabric& fabric, const CollectiveSchedule& s) {
  std::vector<SimTime> memo(static_cast<size_t>(s.num_patterns()), -1);
  SimTime total = s.base_latency;
  for (const auto& ph : s.phases) {
    auto& t = memo[static_cast<size_t>(ph.pattern)];
    if (t < 0) t = analytical_batch_time(fabric, s.batch(ph.pattern));
    total += t + ph.overhead;
  }
  return total;
}

CollectiveSchedule plan_collective(Fabric& fabric, const CollectiveRequest& req,
                                   const CostOptions& options) {
  validate(fabric.cluster(), req);
  std::vector<Protocol> protocols = {Protocol::SIMPLE};
  if (options.nccl_overheads) protocols = {Protocol::LL, Protocol::LL128, Protocol::SIMPLE};
  // Algorithms NCCL does not have: the protocol with the least analytical time.
  auto best_protocol = [&](Algorithm a) {
    CollectiveSchedule best;
    SimTime best_time = std::numeric_limits<SimTime>::max();
    for (Protocol p : protocols) {
      if (a == Algorithm::NVLS && p != Protocol::SIMPLE) continue;
      CollectiveSchedule s = build_schedule(fabric, req, a, p, options);
      SimTime t = estimate_schedule(fabric, s);
      if (t < best_time) best_time = t, best = std::move(s);
    }
    return std::make_pair(best_time, std::move(best));
  };
  // NCCL's tuner: every (algorithm, protocol) its model covers, by predicted time; ties go
  // to the first in NCCL's loop order (Tree, Ring, NVLS; LL, LL128, Simple).
  auto tuned = [&](const std::vector<Algorithm>& algorithms) {
    std::vector<std::tuple<double, int, Algorithm, Protocol>> options_by_time;
    if (!options.nccl_overheads || req.ranks.size() < 2) return options_by_time;
    const NcclShape shape = nccl_shape(fabric, req.ranks);
    int order = 0;
    for (Algorithm a : algorithms) {
      if (!implements(a, req.op)) continue;
      for (Protocol p : protocols) {
        double t = nccl_time_us(a, p, req.op, shape, req.op == Op::BARRIER ? 0.0 : req.bytes);
        if (t >= 0) options_by_time.emplace_back(t, order++, a, p);
      }
    }
    std::sort(options_by_time.begin(), options_by_time.end());
    return options_by_time;
  };
  // The first candidate this group can run (e.g. NVLS needs an NVLS switch next to every rank).
  auto first_buildable = [&](const std::vector<std::tuple<double, int, Algorithm, Protocol>>& c,
                             CollectiveSchedule& out) {
    for (const auto& [t, order, a, p] : c) {
      try {
        out = build_schedule(fabric, req, a, p, options);
        return true;
      } catch (const ValidationError&) {
        if (req.algorithm != Algorithm::AUTO) throw;
      }
    }
    return false;
  };
  CollectiveSchedule chosen;
  if (req.algorithm != Algorithm::AUTO) {
    if (first_buildable(tuned({req.algorithm}), chosen)) return chosen;
    return best_protocol(req.algorithm).second;
  }
  if (first_buildable(tuned({Algorithm::TREE, Algorithm::RING, Algorithm::NVLS}), chosen)) {
    return chosen;
  }
  // Without NCCL's model (overheads off, or an op it does not cover): least analytical time.
  std::vector<Algorithm> candidates;
  for (Algorithm a : {Algorithm::RING, Algorithm::TREE, Algorithm::NVLS})
    if (implements(a, req.op)) candidates.push_back(a);
  if (candidates.empty()) candidates.push_back(Algorithm::DIRECT);
  SimTime best_time = std::numeric_limits<SimTime>::max();
  CollectiveSchedule best;
  for (Algorithm a : candidates) {
    try {
      auto [t, s] = best_protocol(a);
      if (t < best_time) best_time = t, best = std::move(s);
    } catch (const ValidationError&) {
      // Not applicable to this group (e.g. NVLS across nodes); the tuner skips it.
    }
  }
  if (best_time == std::numeric_limits<SimTime>::max()) {
    throw ValidationError(
        "--algo", fmt::format("--algo: no algorithm can run {} on this group; try --algo direct",
                              to_string(req.op)));
  }
  return best;
}

}  // namespace loom::sim
