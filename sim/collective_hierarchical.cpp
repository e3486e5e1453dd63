// Hierarchical lowering: intra-node ring reduce-scatter, inter-node ring all-reduce among
// the ranks with the same local position (rail-aligned), intra-node ring all-gather.
#include "sim/collective_lowering.hpp"

namespace loom::sim {

std::optional<std::string> hierarchical_cannot_run(const ScheduleBuilder& b) {
  const auto nodes = b.nodes();
  for (const auto& node : nodes) {
    if (node.size() != nodes.front().size())
      return "needs the same number of group ranks on every node; this group is uneven";
  }
  return std::nullopt;
}

void lower_hierarchical(ScheduleBuilder& b, double S) {
  auto nodes = b.nodes();
  const int m = static_cast<int>(nodes.front().size());  // every node's (hierarchical_cannot_run)
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

}  // namespace loom::sim
