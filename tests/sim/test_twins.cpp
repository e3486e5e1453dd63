// Identical concurrent groups costed once (sim/collective_twins.cpp): a collective's
// concurrent groups are left out when each is the image of its group under an automorphism
// of the cluster acting alike on every node, on links of their own. These tests check the
// reduced schedule against the whole one (CostOptions::twins_once off) at small sizes, in the
// analytical estimate and in the flow mode; that what the reduction lowers does not grow with
// the concurrent groups (counted); and that groups sharing links, or a cluster whose nodes
// differ, keep every group.
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "sim/fabric.hpp"
#include "star_cluster.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

// The data-parallel group of local GPUs `locals` on every node, with the groups of the other
// local GPUs of each TP group (`tp` consecutive GPUs) as concurrent groups.
CollectiveRequest dp_request(const topo::Cluster& c, CollectiveOp op, Algorithm a, int tp,
                             double bytes) {
  const int per_node = c.gpus_per_node();
  CollectiveRequest req;
  req.op = op;
  req.algorithm = a;
  req.bytes = bytes;
  for (int x = 0; x < c.num_nodes(); ++x)
    for (int l = 0; l < per_node; l += tp) req.ranks.push_back(x * per_node + l);
  for (int t = 1; t < tp; ++t) {
    std::vector<int> g;
    for (int r : req.ranks) g.push_back(r + t);
    req.concurrent_groups.push_back(g);
  }
  return req;
}

CostOptions twins(bool once) {
  CostOptions o;
  o.twins_once = once;
  return o;
}

SimTime flow_time(const topo::Cluster& c, const CollectiveRequest& req, bool once,
                  bool* left_out = nullptr) {
  EngineOptions o;
  o.cost = twins(once);
  o.check_capacity = true;
  Engine e(c, o);
  CollectiveSpec spec;
  spec.request = req;
  const TaskId t = e.add_collective(spec);
  e.run();
  if (left_out) *left_out = e.schedule(t).twins_left_out;
  return e.finish(t);
}

}  // namespace

TEST_CASE("sim::twins: left out, the group's time is the union's (analytical, flow)") {
  const auto c = topo::load_cluster({"dgx-h100", 4, std::nullopt});
  Fabric fabric(c);
  for (int tp : {8, 4, 2}) {
    for (Algorithm a : {Algorithm::RING, Algorithm::TREE}) {
      for (CollectiveOp op :
           {CollectiveOp::ALL_REDUCE, CollectiveOp::REDUCE_SCATTER, CollectiveOp::ALL_GATHER}) {
        if (a == Algorithm::TREE && op != CollectiveOp::ALL_REDUCE) continue;
        CAPTURE(tp);
        CAPTURE(to_string(a));
        CAPTURE(to_string(op));
        const auto req = dp_request(c, op, a, tp, 96e6);
        for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::SIMPLE}) {
          const auto once = build_schedule(fabric, req, a, p, twins(true));
          const auto whole = build_schedule(fabric, req, a, p, twins(false));
          REQUIRE(once.twins_left_out);
          CHECK_FALSE(whole.twins_left_out);
          CHECK(whole.flows.size() == static_cast<size_t>(tp) * once.flows.size());
          CHECK(estimate_schedule(fabric, once) == estimate_schedule(fabric, whole));
        }
        bool left_out = false;
        const SimTime t = flow_time(c, req, true, &left_out);
        CHECK(left_out);
        CHECK(t == flow_time(c, req, false));
        // The tuner's choice and time too.
        auto automatic = req;
        automatic.algorithm = Algorithm::AUTO;
        CHECK(estimate_schedule(fabric, plan_collective(fabric, automatic, twins(true))) ==
              estimate_schedule(fabric, plan_collective(fabric, automatic, twins(false))));
      }
    }
  }
}

TEST_CASE("sim::twins: the work does not grow with the concurrent groups (counted)") {
  // Flows lowered for TP 8's data-parallel group with its 7 concurrent groups: the group's
  // own, not 8x them.
  const auto c = topo::load_cluster({"dgx-h100", 16, std::nullopt});
  Fabric fabric(c);
  auto alone = dp_request(c, CollectiveOp::ALL_REDUCE, Algorithm::TREE, 8, 1e9);
  const auto with = alone;
  alone.concurrent_groups.clear();
  const auto s_alone =
      build_schedule(fabric, alone, Algorithm::TREE, Protocol::SIMPLE, twins(true));
  const auto s_with = build_schedule(fabric, with, Algorithm::TREE, Protocol::SIMPLE, twins(true));
  CHECK(s_with.twins_left_out);
  CHECK(s_with.flows.size() == s_alone.flows.size());
}

TEST_CASE("sim::twins: groups that share links, or unlike nodes, keep every group") {
  // L40S boxes: two GPUs on one PCIe switch share its NIC, so the data-parallel groups of
  // GPUs 0 and 1 meet on it.
  {
    const auto c = topo::load_cluster({"l40s-pcie", 3, std::nullopt});
    Fabric fabric(c);
    const auto req = dp_request(c, CollectiveOp::ALL_REDUCE, Algorithm::RING, 2, 64e6);
    const auto once = build_schedule(fabric, req, Algorithm::RING, Protocol::SIMPLE, twins(true));
    CHECK_FALSE(once.twins_left_out);
    bool left_out = true;
    CHECK(flow_time(c, req, true, &left_out) == flow_time(c, req, false));
    CHECK_FALSE(left_out);
    auto alone = req;
    alone.concurrent_groups.clear();
    CHECK(flow_time(c, req, true) > flow_time(c, alone, true));  // the shared NICs show
  }
  // A slowed NIC cable on node 1: the nodes are no longer alike.
  {
    auto c = topo::load_cluster({"dgx-h100", 3, std::nullopt});
    sim::testing::slow_first_nic_cable(c, 1);
    Fabric fabric(c);
    const auto req = dp_request(c, CollectiveOp::ALL_REDUCE, Algorithm::RING, 8, 64e6);
    CHECK_FALSE(
        build_schedule(fabric, req, Algorithm::RING, Protocol::SIMPLE, twins(true)).twins_left_out);
    CHECK(flow_time(c, req, true) == flow_time(c, req, false));
  }
}

TEST_CASE("sim::Fabric: node automorphisms map links onto like links") {
  // DGX H100: rail 0 onto rail 5 (another CPU socket): a map exists; its images of every
  // link of node 2 are links with the same kind, capacity and latency.
  const auto c = topo::load_cluster({"dgx-h100", 3, std::nullopt});
  Fabric fabric(c);
  const int gpu0 = fabric.node_position(c.gpu_vertex(0));
  const int gpu5 = fabric.node_position(c.gpu_vertex(5));
  const auto& m = fabric.node_automorphism({{gpu0, gpu5}});
  REQUIRE(m.has_value());
  CHECK(fabric.image(*m, c.gpu_vertex(16)) == c.gpu_vertex(21));
  for (topo::VertexId v : fabric.node_vertices(2)) {
    for (topo::LinkId l : c.out_links(v)) {
      const topo::LinkId k = fabric.image_link(*m, l);
      REQUIRE(k >= 0);
      CHECK(c.link(k).kind == c.link(l).kind);
      CHECK(fabric.capacity_Bpps(k) == fabric.capacity_Bpps(l));
      CHECK(fabric.image(*m, c.link(l).to) == c.link(k).to);
    }
  }
  // Two places onto one: none.
  CHECK_FALSE(fabric.node_automorphism({{gpu0, gpu5}, {gpu5, gpu5}}).has_value());
}
