// Identical concurrent groups costed once. In the default (symmetric) mode of `simulate`,
// a data-parallel collective carries the data-parallel groups of the simulated GPU's tensor-
// and context-parallel peers as concurrent groups, so that links they share are charged
// (lower_with_twins adds their flows to every pattern): at 64k GPUs that lowering was most
// of the step. When every concurrent group is the image of the group under an automorphism
// of the cluster that acts alike on every node (a rail of an 8-GPU node onto another, with
// its PCIe switch, NIC and leaf), and the images of the links the group's flows use are all
// distinct (no link carries two groups), each concurrent group lowers to the image of the
// group's schedule, on links of its own: max-min sharing and the analytical model then give
// each group the group's own times, and the union's time is the group's. The concurrent
// groups are left out (CollectiveSchedule::twins_left_out); tests/sim/test_twins.cpp
// compares both ways, and a step's time with and without.
//
// What the lowering and NCCL's costs look at must be mapped too: the routes of the flows and
// of NCCL's rings over the group (nccl_shape), which are so when they are forced by the link
// costs (no ECMP choice). Only ring and tree lowerings are folded: their flows join group
// ranks and nothing else decides them.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/collective_lowering.hpp"

namespace loom::sim {

namespace {

// Whether the route from `a` to `b` is forced by the link costs.
bool forced(Fabric& fabric, topo::VertexId a, topo::VertexId b) {
  return fabric.route(a, b).forced();
}

}  // namespace

bool twins_fold_away(Fabric& fabric, const CollectiveRequest& req, Algorithm a,
                     const CollectiveSchedule& s) {
  if ((a != Algorithm::RING && a != Algorithm::TREE) || s.has_classes() ||
      req.concurrent_groups.empty() || req.ranks.size() < 2)
    return false;
  const topo::Cluster& c = fabric.cluster();
  // Each concurrent group: the group's ranks moved within their nodes, place by place.
  std::vector<const Fabric::NodeMap*> maps;
  for (const auto& g : req.concurrent_groups) {
    std::vector<std::pair<int, int>> seed;
    for (size_t i = 0; i < req.ranks.size(); ++i) {
      const topo::VertexId u = c.gpu_vertex(req.ranks[i]), w = c.gpu_vertex(g[i]);
      if (fabric.node_of(u) < 0 || fabric.node_of(u) != fabric.node_of(w)) return false;
      seed.emplace_back(fabric.node_position(u), fabric.node_position(w));
    }
    std::sort(seed.begin(), seed.end());
    seed.erase(std::unique(seed.begin(), seed.end()), seed.end());
    const auto& m = fabric.node_automorphism(seed);
    if (!m) return false;
    maps.push_back(&*m);
  }
  // The routes the lowering and the costs rest on, forced: the flows', NCCL's rings', and the
  // first node's first pair (nccl_shape's intra-node class).
  ScheduleBuilder b(fabric, req.ranks);
  for (const auto& order : ring_orders(b))
    for (size_t i = 0; i < order.size(); ++i)
      if (!forced(fabric, b.v(order[i]), b.v(order[(i + 1) % order.size()]))) return false;
  for (const auto& node : b.nodes())
    if (node.size() >= 2) {
      if (!forced(fabric, b.v(node[0]), b.v(node[1]))) return false;
      break;
    }
  // The group's links, each once; then no link carried by two groups: the images of the
  // group's links, all distinct and none of the group's own (a mark per link: who holds it).
  thread_local std::vector<std::int32_t> holder;
  if (holder.size() < static_cast<size_t>(fabric.num_links()))
    holder.assign(static_cast<size_t>(fabric.num_links()), -1);
  std::vector<topo::LinkId> links, marked;
  bool apart = true;
  for (const FlowSpec& f : s.flows) {
    const RouteRef r = fabric.route(f.src, f.dst);
    if (r.fixed != r.length) apart = false;
    for (topo::LinkId l : fabric.links(r)) {
      if (holder[static_cast<size_t>(l)] >= 0) continue;
      holder[static_cast<size_t>(l)] = 0;
      links.push_back(l);
    }
  }
  marked = links;
  for (size_t k = 0; apart && k < maps.size(); ++k) {
    for (topo::LinkId l : links) {
      const topo::LinkId image = fabric.image_link(*maps[k], l);
      if (image < 0 || holder[static_cast<size_t>(image)] >= 0) {
        apart = false;
        break;
      }
      holder[static_cast<size_t>(image)] = static_cast<std::int32_t>(k + 1);
      marked.push_back(image);
    }
  }
  for (topo::LinkId l : marked) holder[static_cast<size_t>(l)] = -1;
  return apart;
}

}  // namespace loom::sim
