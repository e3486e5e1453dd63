// NVLS lowering (NVLink SHARP): every GPU pushes its buffer into its in-switch-reduction
// NVSwitches, which multicast the reduced result back; one node only. NVLSTree (NCCL's
// NVLS_TREE algorithm) does the same inside every node and joins the nodes by a double
// binary tree per rail.
#include <algorithm>
#include <utility>

#include "sim/collective_lowering.hpp"

namespace loom::sim {

namespace {

// The in-switch-reduction NVSwitches adjacent to a GPU, with the link capacity (bytes/s),
// in vertex order.
std::vector<std::pair<topo::VertexId, double>> nvls_switches(const topo::Cluster& cluster,
                                                             topo::VertexId gpu) {
  std::vector<std::pair<topo::VertexId, double>> out;
  for (topo::LinkId l : cluster.out_links(gpu)) {
    const auto& link = cluster.link(l);
    const auto& to = cluster.vertex(link.to);
    if (to.kind == topo::VertexKind::NVSWITCH && to.in_switch_reduce)
      out.emplace_back(link.to, link.bandwidth_Bps);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether the positions share the same non-empty set of in-switch-reduction NVSwitches.
bool share_nvls_switches(const ScheduleBuilder& b, const std::vector<int>& positions) {
  const auto& cluster = b.fabric().cluster();
  const auto first = nvls_switches(cluster, b.v(positions.front()));
  if (first.empty()) return false;
  for (int i : positions) {
    const auto mine = nvls_switches(cluster, b.v(i));
    bool same = mine.size() == first.size();
    for (size_t s = 0; same && s < mine.size(); ++s) same = mine[s].first == first[s].first;
    if (!same) return false;
  }
  return true;
}

// Each GPU of `positions` pushes its whole buffer into the switches (multimem reduce loads)
// while the switches multicast the reduced result back: S each way per GPU, split over
// switches by link bandwidth, into the open pattern.
void nvls_flows(ScheduleBuilder& b, const std::vector<int>& positions, double S) {
  const auto& cluster = b.fabric().cluster();
  double total_bw = 0;
  for (const auto& s : nvls_switches(cluster, b.v(positions.front()))) total_bw += s.second;
  for (int i : positions) {
    for (const auto& [sw, bw] : nvls_switches(cluster, b.v(i))) {
      double share = S * bw / total_bw;
      b.flow(b.v(i), sw, share);
      b.flow(sw, b.v(i), share);
    }
  }
}

}  // namespace

std::optional<std::string> nvls_cannot_run(const ScheduleBuilder& b) {
  if (nvls_switches(b.fabric().cluster(), b.v(0)).empty()) {
    return "needs an NVSwitch with in-switch reduction (NVLink SHARP) next to every rank; this "
           "cluster has none";
  }
  std::vector<int> all(static_cast<size_t>(b.n()));
  for (int i = 0; i < b.n(); ++i) all[static_cast<size_t>(i)] = i;
  if (!share_nvls_switches(b, all)) {
    return "needs every rank on the same NVLS-capable NVSwitch fabric (one node); use "
           "nvls_tree, hierarchical or ring across nodes";
  }
  return std::nullopt;
}

std::optional<std::string> nvls_tree_cannot_run(const ScheduleBuilder& b) {
  const auto nodes = b.nodes();
  if (nodes.size() < 2)
    return "needs two or more nodes (NCCL disables NVLSTree on one node); use nvls";
  for (const auto& node : nodes) {
    if (node.size() != nodes.front().size() || node.size() < 2)
      return "needs the same number (>= 2) of group ranks on every node";
    if (!share_nvls_switches(b, node)) {
      return "needs every node's ranks next to the same NVSwitches with in-switch reduction "
             "(NVLink SHARP)";
    }
  }
  return std::nullopt;
}

void lower_nvls(ScheduleBuilder& b, double S) {
  // Every rank sees the same switches (nvls_cannot_run); one pipelined step.
  std::vector<int> all(static_cast<size_t>(b.n()));
  for (int i = 0; i < b.n(); ++i) all[static_cast<size_t>(i)] = i;
  int p = b.begin_pattern();
  nvls_flows(b, all, S);
  b.phase(p);
}

void lower_nvls_tree(ScheduleBuilder& b, double S) {
  // NCCL's NVLSTree pipelines three stages over chunks: the NVSwitch reduces each node's
  // buffers into the m heads (one per rail, each owning S/m), the heads run a double binary
  // tree between the nodes (half of S/m on each tree, reduced up and broadcast down), and the
  // heads multicast the result through the switch. Pipelined, the stages overlap: one step
  // whose flows load the NVLink (S each way per GPU) and the rails at once. Over two nodes
  // each head sends and receives S/m; over more, an inner node of one tree carries 3 halves
  // each way and a leaf of the other 1, 2 S/m in all, as a ring would (NCCL's interBw x 2
  // for <= 2 nodes, x 1 beyond).
  const auto nodes = b.nodes();
  const int N = static_cast<int>(nodes.size());
  const int m = static_cast<int>(nodes.front().size());
  const double half = S / m / 2;
  int p = b.begin_pattern();
  for (const auto& node : nodes) nvls_flows(b, node, S);
  for (int c = 0; c < m; ++c) {
    for (int tree = 0; tree < 2; ++tree) {
      for (int x = 0; x < N; ++x) {
        const int up = dtree_parent(N, x, tree);
        if (up < 0) continue;
        const int child = nodes[static_cast<size_t>(x)][static_cast<size_t>(c)];
        const int parent = nodes[static_cast<size_t>(up)][static_cast<size_t>(c)];
        b.flow(b.v(child), b.v(parent), half);  // reduce up
        b.flow(b.v(parent), b.v(child), half);  // broadcast down
      }
    }
  }
  b.phase_class(p, static_cast<int>(LatencyClass::NET));
}

}  // namespace loom::sim
