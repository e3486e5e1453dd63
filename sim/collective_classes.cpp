// All-to-alls by flow class. Over a group whose nodes are alike (the same devices and links,
// wired the same way to the same fabric switches, the group's GPUs at the same places), any
// permutation of the group's nodes is an automorphism of the cluster that keeps every link's
// capacity and latency and maps the group onto itself. Where the routes and PXN relays of
// one node's transfers are forced by the link costs (no ECMP choice: topo::Path::fixed), the
// permutation maps them too, so the all-to-all's flows fall into classes that the
// permutations carry onto each other: the transfers between two given places of one node
// (same-node) or of two different nodes (cross-node). Max-min fair sharing has one
// allocation, and a problem the permutations keep has a kept allocation: every flow of a
// class gets the same rate at every instant, and every link like another (the same link on
// another node) carries the same load.
//
// So one representative node x0 stands for all: each class is one FlowSpec on x0 with
// `count` its flows per link (a same-node class: its flows on one node; a cross-node class:
// its flows per ordered pair of nodes times the nodes - 1 it reaches or is reached from) and
// `copies` the nodes; a cross-node class takes the route from x0 to another node x1 with x1's
// links replaced by their likes on x0 (Fabric::class_route), so its sending and receiving
// ends share x0's links with the same-node classes as every node's do. Every link of such a
// route belongs to a node (x0's or its twin on x1) and so has one like link per node: the
// count on it is the same along the route. A route through two fabric switches (a link
// every node shares, e.g. a cross-rail path over a spine when PXN cannot relay) would need
// another count on that link: such groups, and any group whose nodes differ (a slowed link,
// other devices, another rank layout), fall back to the pair-by-pair lowering
// (collective_direct.cpp). tests/sim/test_all_to_all_classes.cpp checks both against each
// other, analytical and flow mode.
//
// The work is linear in the group's nodes (comparing each node with x0) plus the square of
// the group's GPUs per node (its classes), against the square of the group for the pairs.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "common/limits.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

namespace {

// The group's nodes in order of first appearance and each one's GPUs in group order, when
// every node holds the group at the same places (in the same group order for the rail
// exchange, which pairs the k-th rank of each node), orders its ranks alike (PXN scans a
// node's GPUs in rank order) and is built and wired like the first (`like`: the second's
// links onto the first's).
struct Layout {
  std::vector<int> nodes;
  std::vector<std::vector<topo::VertexId>> gpus;
  std::unordered_map<topo::LinkId, topo::LinkId> like;
};

std::optional<std::string> group_layout(const ScheduleBuilder& b, bool ordered, Layout& out) {
  Fabric& fabric = b.fabric();
  std::unordered_map<int, size_t> index;  // lookup only
  for (int i = 0; i < b.n(); ++i) {
    const topo::VertexId v = b.v(i);
    const int x = fabric.node_of(v);
    if (x < 0 || fabric.cluster().vertex(v).kind != topo::VertexKind::GPU)
      return std::string("a rank is not a GPU of a node");
    auto [it, inserted] = index.emplace(x, out.nodes.size());
    if (inserted) {
      out.nodes.push_back(x);
      out.gpus.emplace_back();
    }
    out.gpus[it->second].push_back(v);
  }
  const auto N = out.nodes.size();
  if (N < 2) return std::string("the group is on one node");
  auto places = [&](const std::vector<topo::VertexId>& list, bool sorted) {
    std::vector<int> p;
    for (topo::VertexId v : list) p.push_back(fabric.node_position(v));
    if (sorted) std::sort(p.begin(), p.end());
    return p;
  };
  const std::vector<int> here = places(out.gpus[0], !ordered);
  const std::vector<int> rank_order = places(fabric.node_gpus(out.nodes[0]), false);
  for (size_t k = 1; k < N; ++k) {
    if (places(out.gpus[k], !ordered) != here)
      return fmt::format("node {} holds other places of the group than node {}", out.nodes[k],
                         out.nodes[0]);
    if (places(fabric.node_gpus(out.nodes[k]), false) != rank_order)
      return fmt::format("node {} orders its ranks unlike node {}", out.nodes[k], out.nodes[0]);
    // The first pair maps links onto node 0's (`like`); the others only need to be alike.
    if (k > 1 && fabric.nodes_alike(out.nodes[0], out.nodes[k])) continue;
    if (auto why = fabric.compare_nodes(out.nodes[0], out.nodes[k], k == 1 ? &out.like : nullptr))
      return why;
  }
  return std::nullopt;
}

// The classes of one representative node x0 (and a second node x1), in the order first
// met: same-node (src -> dst on x0) and cross-node (src on x0 -> dst on x1), each with its
// flows per node or per ordered pair of nodes.
class Classes {
 public:
  struct Class {
    topo::VertexId src, dst;
    std::int64_t per = 0;
  };
  Classes(Fabric& fabric, std::int64_t nodes) : fabric_(fabric), nodes_(nodes) {}

  void same(topo::VertexId u, topo::VertexId w, std::int64_t per) {
    add(same_, same_at_, u, w, per);
  }
  // One transfer from u on x0 to w on x1 as NCCL's p2p sends it: across rails a PXN relay,
  // u -> proxy on x0 once for each of the other nodes, then proxy -> w.
  void transfer(topo::VertexId u, topo::VertexId w) {
    bool invariant = true;
    const topo::VertexId proxy = fabric_.pxn_proxy(u, w, invariant);
    if (!invariant && !why_) why_ = "a PXN relay of the group rests on an equal-cost (ECMP) choice";
    if (proxy < 0) {
      add(cross_, cross_at_, u, w, 1);
    } else {
      add(same_, same_at_, u, proxy, nodes_ - 1);
      add(cross_, cross_at_, proxy, w, 1);
    }
  }
  const std::vector<Class>& same() const { return same_; }
  const std::vector<Class>& cross() const { return cross_; }
  const std::optional<std::string>& why() const { return why_; }

 private:
  void add(std::vector<Class>& list, std::unordered_map<std::uint64_t, size_t>& at,
           topo::VertexId u, topo::VertexId w, std::int64_t per) {
    auto [it, inserted] = at.emplace(pair_key(u, w), list.size());
    if (inserted) {
      list.push_back({u, w, 0});
      const RouteRef r = fabric_.route(u, w);
      if (!r.forced() && !why_) why_ = "a route of the group rests on an equal-cost (ECMP) choice";
    }
    list[it->second].per += per;
  }

  Fabric& fabric_;
  std::int64_t nodes_;
  std::vector<Class> same_, cross_;
  std::unordered_map<std::uint64_t, size_t> same_at_, cross_at_;  // lookup only
  std::optional<std::string> why_;
};

constexpr int NO_NODE = -2;  // no vertex's node (fabric switches have -1)

// A class route's links on x0: a cross-node class's links on x1 (or into x1 from the
// fabric) become their likes; nullopt when a link belongs to no node of the pair (between
// two fabric switches, or on a third node): every node shares it, so its count would differ.
std::optional<std::vector<topo::LinkId>> on_x0(
    Fabric& fabric, const RouteRef& r, int x0, int x1,
    const std::unordered_map<topo::LinkId, topo::LinkId>& like) {
  std::vector<topo::LinkId> out;
  for (topo::LinkId l : fabric.links(r)) {
    const auto& link = fabric.cluster().link(l);
    const int from = fabric.node_of(link.from), to = fabric.node_of(link.to);
    if (from == x1 || to == x1) {
      const auto it = like.find(l);
      if (it == like.end()) return std::nullopt;
      out.push_back(it->second);
    } else if ((from == x0 && (to == x0 || to < 0)) || (from < 0 && to == x0)) {
      out.push_back(l);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> lower_by_classes(ScheduleBuilder& b, CollectiveOp op, double S) {
  if (op != CollectiveOp::ALL_TO_ALL && op != CollectiveOp::RAIL_ALL_TO_ALL)
    return fmt::format("{} is not lowered by flow class", to_string(op));
  Fabric& fabric = b.fabric();
  Layout layout;
  if (auto why = group_layout(b, op == CollectiveOp::RAIL_ALL_TO_ALL, layout)) return why;
  const auto N = static_cast<std::int64_t>(layout.nodes.size());
  const int x0 = layout.nodes[0], x1 = layout.nodes[1];
  const auto& g0 = layout.gpus[0];
  const auto& g1 = layout.gpus[1];
  if (g0.size() > static_cast<size_t>(MAX_ALL_TO_ALL_RANKS))  // its classes: the pairs of a node
    return fmt::format("more than MAX_ALL_TO_ALL_RANKS = {} ranks on one node",
                       MAX_ALL_TO_ALL_RANKS);
  Classes classes(fabric, N);
  double share;
  if (op == CollectiveOp::ALL_TO_ALL) {
    share = S / b.n();
    std::vector<topo::VertexId> sorted0 = g0, sorted1 = g1;  // by place: sorted1[k] ~ sorted0[k]
    auto by_place = [&](topo::VertexId a, topo::VertexId c) {
      return fabric.node_position(a) < fabric.node_position(c);
    };
    std::sort(sorted0.begin(), sorted0.end(), by_place);
    std::sort(sorted1.begin(), sorted1.end(), by_place);
    for (topo::VertexId u : sorted0)
      for (topo::VertexId w : sorted0)
        if (u != w) classes.same(u, w, 1);
    for (topo::VertexId u : sorted0)
      for (topo::VertexId w : sorted1) classes.transfer(u, w);
  } else {
    share = S / static_cast<double>(N);
    for (size_t k = 0; k < g0.size(); ++k) classes.transfer(g0[k], g1[k]);
  }
  if (classes.why()) return classes.why();

  constexpr std::int64_t most = std::numeric_limits<std::int32_t>::max();
  std::vector<std::vector<topo::LinkId>> mapped;
  for (const auto& k : classes.cross()) {
    auto links = on_x0(fabric, fabric.route(k.src, k.dst), x0, x1, layout.like);
    if (!links) return std::string("a route of the group crosses links every node shares");
    if (k.per * (N - 1) > most) return std::string("a class holds too many flows");
    mapped.push_back(std::move(*links));
  }
  for (const auto& k : classes.same()) {
    if (!on_x0(fabric, fabric.route(k.src, k.dst), x0, NO_NODE, layout.like))
      return std::string("a route inside a node of the group leaves it");
    if (k.per > most) return std::string("a class holds too many flows");
  }
  const int p = b.begin_pattern();
  const auto copies = static_cast<std::int32_t>(N);
  for (const auto& k : classes.same()) {
    b.class_flow({k.src, k.dst, share, 0, static_cast<std::int32_t>(k.per), copies},
                 fabric.route(k.src, k.dst));
  }
  for (size_t i = 0; i < classes.cross().size(); ++i) {
    const auto& k = classes.cross()[i];
    const RouteRef r = fabric.class_route(k.src, k.dst, [&] { return mapped[i]; });
    b.class_flow({k.src, k.dst, share, 0, static_cast<std::int32_t>(k.per * (N - 1)), copies}, r);
  }
  b.phase(p);
  return std::nullopt;
}

}  // namespace loom::sim
