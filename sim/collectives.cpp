#include "sim/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "sim/nccl_constants.hpp"

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

// Builds patterns and phases. A phase marked `charged` pays the protocol's per-step latency
// (pipelined steady-state phases do not: their latency overlaps the previous chunk).
class Builder {
 public:
  Builder(Fabric& fabric, const CollectiveRequest& request)
      : fabric_(fabric), req_(request), n_(static_cast<int>(request.ranks.size())) {
    for (int r : request.ranks) v_.push_back(fabric.cluster().gpu_vertex(r));
  }
  int n() const { return n_; }
  topo::VertexId v(int i) const { return v_[static_cast<size_t>(i)]; }

  int begin_pattern() {
    s_.pattern_begin.push_back(static_cast<std::uint32_t>(s_.flows.size()));
    return static_cast<int>(s_.pattern_begin.size()) - 1;
  }
  void flow(topo::VertexId a, topo::VertexId b, double bytes) {
    if (a != b) s_.flows.push_back({a, b, bytes});
  }
  void phase(int pattern, bool charged = true, int times = 1) {
    for (int i = 0; i < times; ++i) s_.phases.push_back({pattern, charged ? 1 : 0});
  }
  CollectiveSchedule finish() {
    s_.pattern_begin.push_back(static_cast<std::uint32_t>(s_.flows.size()));
    return std::move(s_);
  }

  // Ranks grouped by node in order of first appearance; each node's positions in group order.
  std::vector<std::vector<int>> nodes() const {
    std::vector<std::vector<int>> groups;
    std::map<int, size_t> index;
    for (int i = 0; i < n_; ++i) {
      int node = fabric_.node_of(v(i));
      auto [it, inserted] = index.emplace(node, groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(i);
    }
    return groups;
  }

 private:
  Fabric& fabric_;
  const CollectiveRequest& req_;
  int n_;
  std::vector<topo::VertexId> v_;
  CollectiveSchedule s_;
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
  throw ValidationError("--algo", fmt::format("algorithm '{}' {}", to_string(a), why));
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

void ring_steps(Builder& b, double bytes, int steps) {
  auto orders = ring_orders(b);
  const int n = b.n();
  const double per_flow = bytes / (static_cast<double>(orders.size()) * n);
  int p = b.begin_pattern();
  for (const auto& order : orders)
    for (int i = 0; i < n; ++i) b.flow(b.v(order[i]), b.v(order[(i + 1) % n]), per_flow);
  b.phase(p, true, steps);
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
    b.phase(it->second, p < hops);
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

void build_tree(Builder& b, double S, int k) {
  const int n = b.n();
  // Tree 0 is the binary tree; tree 1 mirrors it (n even) or shifts it by one (n odd), so
  // that most ranks are a leaf in one tree and an inner node in the other (ncclGetDtree).
  std::array<std::vector<int>, 2> parent;
  for (int t = 0; t < 2; ++t) {
    parent[t].assign(static_cast<size_t>(n), -1);
    for (int r = 0; r < n; ++r) {
      if (t == 0) {
        parent[t][r] = btree_parent(n, r);
      } else if (n % 2 == 0) {
        int p = btree_parent(n, n - 1 - r);
        parent[t][r] = p < 0 ? -1 : n - 1 - p;
      } else {
        int p = btree_parent(n, (r - 1 + n) % n);
        parent[t][r] = p < 0 ? -1 : (p + 1) % n;
      }
    }
  }
  // Phase of each send: reduce: rank r sends chunk c up at phase c + height(r);
  // broadcast: a child at depth d receives chunk c at c + height(root) + d - 1.
  std::map<int, std::vector<FlowSpec>> by_phase;
  const double chunk = S / 2 / k;
  int last = 0, fill = 0;
  for (int t = 0; t < 2; ++t) {
    std::vector<int> height(static_cast<size_t>(n), 0), depth(static_cast<size_t>(n), 0);
    // Heights: iterate until stable (trees are shallow: log2 n rounds).
    for (int round = 0; round < 64; ++round) {
      bool changed = false;
      for (int r = 0; r < n; ++r) {
        int p = parent[t][r];
        if (p >= 0 && height[p] < height[r] + 1) height[p] = height[r] + 1, changed = true;
        if (p >= 0 && depth[r] != depth[p] + 1) depth[r] = depth[p] + 1, changed = true;
      }
      if (!changed) break;
    }
    int root = 0;
    for (int r = 0; r < n; ++r)
      if (parent[t][r] < 0) root = r;
    int max_depth = *std::max_element(depth.begin(), depth.end());
    fill = std::max(fill, height[root] + max_depth);
    for (int c = 0; c < k; ++c) {
      for (int r = 0; r < n; ++r) {
        int p = parent[t][r];
        if (p < 0) continue;
        int up = c + height[r];
        int down = c + height[root] + depth[r] - 1;
        by_phase[up].push_back({b.v(r), b.v(p), chunk});
        by_phase[down].push_back({b.v(p), b.v(r), chunk});
        last = std::max(last, down);
      }
    }
  }
  // Identical consecutive phases share a pattern (the steady state of the pipeline).
  std::vector<FlowSpec> previous;
  int previous_pattern = -1;
  for (int p = 0; p <= last && n > 1; ++p) {
    auto& flows = by_phase[p];
    auto key = [](const FlowSpec& f) { return std::make_tuple(f.src, f.dst); };
    std::sort(flows.begin(), flows.end(),
              [&](const FlowSpec& x, const FlowSpec& y) { return key(x) < key(y); });
    bool same = previous_pattern >= 0 && flows.size() == previous.size() &&
                std::equal(flows.begin(), flows.end(), previous.begin(),
                           [&](const FlowSpec& x, const FlowSpec& y) {
                             return x.src == y.src && x.dst == y.dst && x.bytes == y.bytes;
                           });
    if (!same) {
      previous_pattern = b.begin_pattern();
      for (const auto& f : flows) b.flow(f.src, f.dst, f.bytes);
      previous = flows;
    }
    b.phase(previous_pattern, p < fill);
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

nccl::Family family_of(Algorithm a) {
  if (a == Algorithm::TREE) return nccl::TREE;
  if (a == Algorithm::NVLS) return nccl::NVLS;
  return nccl::RING;  // ring-like step latency for ring, direct, and the textbook algorithms
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

CollectiveSchedule build_one(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                             Protocol protocol, const CostOptions& options) {
  Builder b(fabric, req);
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
                          fmt::format("algorithm '{}' does not implement {}; use one "
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
        build_tree(b, S, req.pipeline_chunks ? req.pipeline_chunks : default_chunks(S, 32));
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
  CollectiveSchedule s = b.finish();
  s.algorithm = a;
  s.protocol = protocol;
  const auto proto = static_cast<size_t>(protocol);
  const auto fam = static_cast<size_t>(family_of(a));
  double wire = 1.0;
  if (options.nccl_overheads) {
    wire /= nccl::PROTOCOL_EFFICIENCY[proto];
    if (a == Algorithm::NVLS) {
      wire /= nccl::NVLS_EFFICIENCY_HOPPER * (nccl::NVLS_CHANNELS - 1) / nccl::NVLS_CHANNELS;
    }
    s.base_latency = to_sim_time(nccl::BASE_LATENCY_US[fam][proto] * 1e-6);
    // Per-step latency by the slowest hardware class the step's flows cross.
    std::vector<SimTime> pattern_latency(static_cast<size_t>(s.num_patterns()), 0);
    for (int p = 0; p < s.num_patterns(); ++p) {
      int cls = -1;
      SimTime wire = 0;
      for (auto i = s.pattern_begin[p]; i < s.pattern_begin[p + 1]; ++i) {
        RouteRef r = fabric.route(s.flows[i].src, s.flows[i].dst);
        cls = std::max(cls, static_cast<int>(r.latency_class));
        wire = std::max(wire, r.latency);
      }
      // NCCL's hwLat is the whole per-step latency, wire included: charge only what it adds
      // to the flows' own path latency, so a step costs max(hwLat, path latency).
      if (cls >= 0) {
        SimTime hw = to_sim_time(nccl::HW_LATENCY_US[cls][fam][proto] * 1e-6);
        pattern_latency[p] = std::max<SimTime>(0, hw - wire);
      }
    }
    for (auto& ph : s.phases) ph.overhead = ph.overhead ? pattern_latency[ph.pattern] : 0;
  } else {
    for (auto& ph : s.phases) ph.overhead = 0;
  }
  s.wire_factor = wire * req.contention;
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
  CollectiveSchedule merged = s;
  merged.flows.clear();
  merged.pattern_begin.clear();
  for (int p = 0; p < s.num_patterns(); ++p) {
    merged.pattern_begin.push_back(static_cast<std::uint32_t>(merged.flows.size()));
    for (const CollectiveSchedule* src : {&s}) {
      for (auto i = src->pattern_begin[p]; i < src->pattern_begin[p + 1]; ++i)
        merged.flows.push_back(src->flows[i]);
    }
    for (const auto& o : others)
      for (auto i = o.pattern_begin[p]; i < o.pattern_begin[p + 1]; ++i)
        merged.flows.push_back(o.flows[i]);
  }
  merged.pattern_begin.push_back(static_cast<std::uint32_t>(merged.flows.size()));
  return merged;
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
  if (req.algorithm != Algorithm::AUTO) return best_protocol(req.algorithm).second;
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
    throw ValidationError("--algo",
                          fmt::format("no algorithm can run {} on this group", to_string(req.op)));
  }
  return best;
}

}  // namespace loom::sim
