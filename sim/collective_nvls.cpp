// NVLS lowering (NVLink SHARP): every GPU pushes its buffer into its in-switch-reduction
// NVSwitches, which multicast the reduced result back; one node only.
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

}  // namespace

std::optional<std::string> nvls_cannot_run(const ScheduleBuilder& b) {
  const auto& cluster = b.fabric().cluster();
  const auto first = nvls_switches(cluster, b.v(0));
  if (first.empty()) {
    return "needs an NVSwitch with in-switch reduction (NVLink SHARP) next to every rank; this "
           "cluster has none";
  }
  for (int i = 1; i < b.n(); ++i) {
    const auto mine = nvls_switches(cluster, b.v(i));
    bool same = mine.size() == first.size();
    for (size_t s = 0; same && s < mine.size(); ++s) same = mine[s].first == first[s].first;
    if (!same) {
      return "needs every rank on the same NVLS-capable NVSwitch fabric (one node); use "
             "hierarchical or ring across nodes";
    }
  }
  return std::nullopt;
}

void lower_nvls(ScheduleBuilder& b, double S) {
  const auto& cluster = b.fabric().cluster();
  // Every rank sees the same switches (nvls_cannot_run).
  double total_bw = 0;
  for (const auto& s : nvls_switches(cluster, b.v(0))) total_bw += s.second;
  // Each GPU pushes its whole buffer into the switches (multimem reduce loads) while the
  // switches multicast the reduced result back: S each way per GPU, split over switches
  // by link bandwidth, all in one pipelined step.
  int p = b.begin_pattern();
  for (int i = 0; i < b.n(); ++i) {
    for (const auto& [sw, bw] : nvls_switches(cluster, b.v(i))) {
      double share = S * bw / total_bw;
      b.flow(b.v(i), sw, share);
      b.flow(sw, b.v(i), share);
    }
  }
  b.phase(p);
}

}  // namespace loom::sim
