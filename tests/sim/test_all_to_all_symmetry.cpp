// All-to-alls by flow class (sim/collective_classes.cpp): over a group whose nodes are alike,
// one FlowSpec per class on a representative node stands for every node's flows. These tests
// check the classes against the pair-by-pair lowering they replace (CostOptions::flow_classes
// off) at small sizes, in the analytical and the flow mode, with NCCL's costs on and off; that
// the work they take grows linearly in the group (counted, not timed: routes computed and
// flows built at 2x the nodes); that groups which are not symmetric fall back to the pairs;
// and that MAX_ALL_TO_ALL_RANKS bounds only the pair-by-pair lowering.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/limits.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "star_cluster.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

CollectiveRequest request(CollectiveOp op, const std::vector<int>& ranks, double bytes) {
  CollectiveRequest req;
  req.op = op;
  req.ranks = ranks;
  req.bytes = bytes;
  req.algorithm = Algorithm::DIRECT;
  return req;
}

std::vector<int> all_ranks(const topo::Cluster& c) {
  std::vector<int> r;
  for (int i = 0; i < c.num_gpus(); ++i) r.push_back(i);
  return r;
}

CostOptions costs(bool nccl, bool classes) {
  CostOptions o;
  o.nccl_overheads = nccl;
  o.flow_classes = classes;
  return o;
}

// Equal within the rounding of summing a link's load in another order.
bool same_time(SimTime a, SimTime b) {
  return std::llabs(a - b) <= 1 + b / 1'000'000'000;
}

struct Run {
  SimTime time = 0;
  NetworkStats stats;
  bool classes = false;
  std::size_t entries = 0;
};

// One collective alone on an engine (the flow mode runs its flows; the analytical mode times
// each phase alpha-beta).
Run run(const topo::Cluster& c, const CollectiveRequest& req, NetworkMode mode, bool nccl,
        bool classes) {
  EngineOptions o;
  o.network = mode;
  o.cost = costs(nccl, classes);
  o.check_capacity = true;
  Engine e(c, o);
  CollectiveSpec spec;
  spec.request = req;
  const TaskId t = e.add_collective(spec);
  e.run();
  Run r;
  r.time = e.finish(t);
  r.stats = e.network_stats();
  r.classes = e.schedule(t).has_classes();
  r.entries = e.schedule(t).flows.size();
  return r;
}

// Classes and pairs agree: schedule estimates for every protocol, and engine runs in both
// network modes with and without NCCL's costs; the same flows and bytes delivered.
void check_exact(const topo::Cluster& c, const CollectiveRequest& req) {
  Fabric fabric(c);
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::SIMPLE}) {
    CAPTURE(to_string(p));
    const auto classes = build_schedule(fabric, req, Algorithm::DIRECT, p, costs(true, true));
    const auto pairs = build_schedule(fabric, req, Algorithm::DIRECT, p, costs(true, false));
    REQUIRE(classes.has_classes());
    CHECK_FALSE(pairs.has_classes());
    CHECK(classes.flows.size() < pairs.flows.size());
    CHECK(same_time(estimate_schedule(fabric, classes), estimate_schedule(fabric, pairs)));
  }
  for (NetworkMode mode : {NetworkMode::ANALYTICAL, NetworkMode::FLOW}) {
    for (bool nccl : {false, true}) {
      CAPTURE(to_string(mode));
      CAPTURE(nccl);
      const Run a = run(c, req, mode, nccl, true);
      const Run b = run(c, req, mode, nccl, false);
      CHECK(a.classes);
      CHECK_FALSE(b.classes);
      CHECK(a.time > 0);
      CHECK(same_time(a.time, b.time));
      CHECK(a.stats.flows == b.stats.flows);
      CHECK(a.stats.delivered_bytes == doctest::Approx(b.stats.delivered_bytes).epsilon(1e-12));
      if (mode == NetworkMode::FLOW) {
        CHECK(a.stats.max_link_load <= 1 + 1e-9);
        CHECK(a.stats.max_link_load == doctest::Approx(b.stats.max_link_load).epsilon(1e-9));
      }
    }
  }
}

}  // namespace

TEST_CASE("sim::all_to_all classes: equal to the pairs on DGX H100 nodes (analytical, flow)") {
  for (int nodes : {2, 3, 5}) {
    CAPTURE(nodes);
    const auto c = topo::load_cluster({"dgx-h100", nodes, std::nullopt});
    // Every GPU: NVLink pairs inside each node, rail pairs and PXN relays across.
    check_exact(c, request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 256e6));
    // Every other GPU of each node (an expert-parallel group beside TP 2), in a scrambled
    // group order: relays through GPUs outside the group.
    std::vector<int> half;
    for (int x = nodes - 1; x >= 0; --x)
      for (int l : {6, 0, 4, 2}) half.push_back(8 * x + l);
    check_exact(c, request(CollectiveOp::ALL_TO_ALL, half, 64e6));
    // One GPU per node (an expert-parallel group across nodes): rail pairs only.
    std::vector<int> one;
    for (int x = 0; x < nodes; ++x) one.push_back(8 * x + 3);
    check_exact(c, request(CollectiveOp::ALL_TO_ALL, one, 16e6));
    // The rail all-to-all of the flex dispatcher.
    check_exact(c, request(CollectiveOp::RAIL_ALL_TO_ALL, all_ranks(c), 128e6));
  }
}

TEST_CASE("sim::all_to_all classes: other presets (A100, B200, B300)") {
  for (const char* preset : {"dgx-a100", "dgx-b200"}) {
    CAPTURE(preset);
    const auto c = topo::load_cluster({preset, 3, std::nullopt});
    check_exact(c, request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 96e6));
  }
  // The rail all-to-all on B300 nodes, every other GPU (relays through the others).
  const auto b300 = topo::load_cluster({"dgx-b300", 4, std::nullopt});
  std::vector<int> ranks;
  for (int x = 0; x < 4; ++x)
    for (int l = 1; l < 8; l += 2) ranks.push_back(8 * x + l);
  check_exact(b300, request(CollectiveOp::RAIL_ALL_TO_ALL, ranks, 32e6));
  check_exact(b300, request(CollectiveOp::ALL_TO_ALL, ranks, 32e6));
}

TEST_CASE("sim::all_to_all classes: the work grows linearly in the group (counted)") {
  // Routes made (a topology search or a translation each) and flow entries built by one lowering of
  // an all-to-all over every GPU of N and 2N DGX H100 nodes: the classes take one route per class
  // plus NCCL's ring over the group, so 2x the ranks cost at most 2.5x; the pairs' routes grow as
  // n^2 (4x).
  struct Work {
    double routes;
    double entries;
  };
  auto work = [](int nodes, bool classes) {
    const auto c = topo::load_cluster({"dgx-h100", nodes, std::nullopt});
    Fabric fabric(c);
    const auto s = build_schedule(fabric, request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 1e9),
                                  Algorithm::DIRECT, Protocol::SIMPLE, costs(true, classes));
    CHECK(s.has_classes() == classes);
    return Work{static_cast<double>(fabric.routes_computed()), static_cast<double>(s.flows.size())};
  };
  const Work small = work(16, true), large = work(32, true);
  CHECK(large.routes / small.routes <= 2.5);
  CHECK(large.entries / small.entries <= 1.0);  // one entry per class, whatever N
  CHECK(large.entries <= 8 * 8 + 8 * 8);        // same-node and cross-node places
  const Work pairs_small = work(16, false), pairs_large = work(32, false);
  MESSAGE("routes at 128 / 256 ranks: classes ", small.routes, " / ", large.routes, ", pairs ",
          pairs_small.routes, " / ", pairs_large.routes);
  CHECK(pairs_large.routes / pairs_small.routes > 2.8);  // what the classes replace: n^2
}

TEST_CASE("sim::all_to_all classes: groups that are not symmetric fall back to the pairs") {
  const auto base = topo::load_cluster({"dgx-h100", 3, std::nullopt});
  // A slowed NIC cable (--slow-link): its node is no longer like the others.
  {
    auto c = base;
    sim::testing::slow_first_nic_cable(c, 1);
    const auto req = request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 64e6);
    const Run a = run(c, req, NetworkMode::FLOW, true, true);
    const Run b = run(c, req, NetworkMode::FLOW, true, false);
    CHECK_FALSE(a.classes);
    CHECK(a.time == b.time);
    CHECK(a.time > run(base, req, NetworkMode::FLOW, true, true).time);  // the slow cable shows
  }
  // Other places on each node.
  {
    const auto req = request(CollectiveOp::ALL_TO_ALL, {0, 1, 8, 10, 16, 17}, 64e6);
    CHECK_FALSE(run(base, req, NetworkMode::FLOW, true, true).classes);
  }
  // One node only: nothing to fold.
  CHECK_FALSE(
      run(base, request(CollectiveOp::ALL_TO_ALL, {0, 1, 2, 3}, 1e6), NetworkMode::FLOW, true, true)
          .classes);
  // Two GPUs on one Grace CPU (GB200 NVL72): NVLink through the switch and NVLink-C2C
  // through the CPU cost the same, an ECMP choice hashed on the endpoints (PXN's scan for a
  // relay meets it from every GPU), so NVL72 racks are costed pair by pair.
  {
    const auto nvl = topo::load_cluster({"gb200-nvl72", 2, std::nullopt});
    const auto req = request(CollectiveOp::ALL_TO_ALL, {0, 1, 72, 73}, 32e6);
    const Run a = run(nvl, req, NetworkMode::FLOW, true, true);
    CHECK_FALSE(a.classes);
    CHECK(a.time == run(nvl, req, NetworkMode::FLOW, true, false).time);
  }
  // No NVLink to relay across rails (L40S boxes): cross-rail routes cross the spines, which
  // every node shares, chosen by ECMP hash.
  {
    const auto c = topo::load_cluster({"l40s-pcie", 3, std::nullopt});
    const auto req = request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 64e6);
    const Run a = run(c, req, NetworkMode::FLOW, true, true);
    CHECK_FALSE(a.classes);
    CHECK(a.time == run(c, req, NetworkMode::FLOW, true, false).time);
  }
}

TEST_CASE("sim::all_to_all classes: beside other traffic the engine runs the pairs") {
  // A flow class loads one representative node for all; another collective on the network
  // would meet it there only. With two collectives the engine lowers the classes pair by
  // pair (same algorithm and protocol), so the result is the pairs' own.
  const auto c = topo::load_cluster({"dgx-h100", 2, std::nullopt});
  auto twice = [&](bool classes) {
    EngineOptions o;
    o.cost.flow_classes = classes;
    Engine e(c, o);
    CollectiveSpec a2a;
    a2a.request = request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 64e6);
    CollectiveSpec ar;
    ar.request = request(CollectiveOp::ALL_REDUCE, {0, 8}, 256e6);
    ar.request.algorithm = Algorithm::RING;
    const TaskId t = e.add_collective(a2a);
    e.add_collective(ar);
    e.run();
    CHECK_FALSE(e.schedule(t).has_classes());
    return e.finish(t);
  };
  CHECK(twice(true) == twice(false));
}

TEST_CASE("sim::all_to_all classes: MAX_ALL_TO_ALL_RANKS bounds the pairs only") {
  const int nodes = MAX_ALL_TO_ALL_RANKS / 8 + 1;
  const auto c = topo::load_cluster({"dgx-h100", nodes, std::nullopt});
  Fabric fabric(c);
  const auto req = request(CollectiveOp::ALL_TO_ALL, all_ranks(c), 1e9);
  CHECK_NOTHROW(validate_request(c, req));
  // Symmetric: lowered by class, a few hundred entries for 4,104 ranks.
  const auto s =
      build_schedule(fabric, req, Algorithm::DIRECT, Protocol::SIMPLE, costs(true, true));
  CHECK(s.has_classes());
  CHECK(s.flows.size() <= 128);
  // Pair by pair (classes off, or a group that is not symmetric): refused, naming the limit.
  CHECK_THROWS_WITH_AS(
      build_schedule(fabric, req, Algorithm::DIRECT, Protocol::SIMPLE, costs(true, false)),
      doctest::Contains("above MAX_ALL_TO_ALL_RANKS = 4096"), ValidationError);
  auto slow = c;
  slow.slow_link(0, 2.0);
  Fabric slow_fabric(slow);
  CHECK_THROWS_WITH_AS(
      plan_collective(slow_fabric, request(CollectiveOp::ALL_TO_ALL, all_ranks(slow), 1e9),
                      costs(true, true)),
      doctest::Contains("not alike"), ValidationError);
}
