// Incremental rate recomputation in flow mode: only the connected components of the
// flow-link sharing graph that a started or drained flow touches are re-filled. A max-min
// fair allocation decomposes over these components, so the timeline must be bit-identical
// to re-filling every component at every instant (EngineOptions::incremental_rates = false).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "sim/engine.hpp"
#include "star_cluster.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

struct Timeline {
  std::vector<SimTime> start, finish;
  NetworkStats stats;
  bool has_ceiling = false;
};

// A mixed concurrent workload on 4 nodes x 4 GPUs (rails): disjoint and overlapping groups,
// staggered starts (compute tasks ahead of them on their streams), different sizes and
// algorithms, point-to-point transfers, and small all-reduces whose LL/LL128 protocol puts a
// payload-rate ceiling on their flows (NCCL overheads on).
Timeline run_mixed(bool incremental, bool memo) {
  static const auto cluster = testing::rails(4, 4, 300e9, 50e9, 5e-7);
  EngineOptions o;
  o.incremental_rates = incremental;
  o.memo = memo;
  o.check_capacity = true;
  Engine e(cluster, o);
  std::vector<StreamId> comm, compute;
  for (int r = 0; r < 16; ++r) {
    comm.push_back(e.add_stream(fmt::format("r{}/comm", r), r));
    compute.push_back(e.add_stream(fmt::format("r{}/compute", r), r));
  }
  std::vector<TaskId> tasks;
  auto collective = [&](CollectiveOp op, std::vector<int> ranks, double bytes, Algorithm algo,
                        SimTime delay_ps) {
    std::vector<TaskId> deps;
    if (delay_ps > 0) deps.push_back(e.add_compute(compute[ranks[0]], delay_ps, "delay"));
    CollectiveSpec c;
    c.request.op = op;
    c.request.ranks = ranks;
    c.request.bytes = bytes;
    c.request.algorithm = algo;
    tasks.push_back(e.add_collective(c, deps));
  };
  // Rails: GPU i of every node (disjoint from each other across nodes, share NICs with the
  // cross-rail groups below).
  for (int rail = 0; rail < 4; ++rail)
    collective(CollectiveOp::ALL_REDUCE, {rail, rail + 4, rail + 8, rail + 12}, (rail + 1) * 24e6,
               Algorithm::RING, rail * 3'000'000);
  // Intra-node groups (NVLink only), staggered.
  for (int node = 0; node < 4; ++node) {
    std::vector<int> g;
    for (int i = 0; i < 4; ++i) g.push_back(node * 4 + i);
    collective(node % 2 ? CollectiveOp::ALL_GATHER : CollectiveOp::REDUCE_SCATTER, g,
               (node + 2) * 8e6, Algorithm::RING, node * 1'700'000);
  }
  // Overlapping cross-rail groups, different algorithms.
  collective(CollectiveOp::ALL_REDUCE, {0, 5, 10, 15}, 40e6, Algorithm::RING, 2'500'000);
  collective(CollectiveOp::ALL_REDUCE, {1, 6, 11, 12, 3, 9, 2, 14}, 33e6, Algorithm::TREE, 0);
  collective(CollectiveOp::ALL_TO_ALL, {2, 7, 8, 13}, 20e6, Algorithm::DIRECT, 4'100'000);
  // Small all-reduces: LL/LL128 protocols, whose flows carry payload-rate ceilings.
  for (int k = 0; k < 4; ++k)
    collective(CollectiveOp::ALL_REDUCE, {k, (k + 5) % 16, (k + 10) % 16}, 6e4 * (k + 1),
               Algorithm::RING, k * 900'000);
  // Point-to-point transfers across rails and inside nodes.
  for (int k = 0; k < 6; ++k) {
    auto pre = e.add_compute(compute[k], 700'000 * (k + 1), "pre");
    tasks.push_back(e.add_transfer({k, 15 - k, 5e6 * (k + 1), NO_STREAM, NO_STREAM, "p2p"}, {pre}));
  }
  // A second wave on the rails after the first rail group, repeating steps (memo candidates).
  collective(CollectiveOp::ALL_REDUCE, {0, 4, 8, 12}, 24e6, Algorithm::RING, 0);
  e.add_dependency(tasks[0], tasks.back());
  e.run();
  Timeline t;
  for (TaskId id : tasks) {
    t.start.push_back(e.start(id));
    t.finish.push_back(e.finish(id));
    for (const auto& f : e.schedule(id).flows) t.has_ceiling |= f.max_rate_Bpps > 0;
  }
  t.stats = e.network_stats();
  return t;
}

}  // namespace

TEST_CASE("sim::Network: incremental and full re-solves give bit-identical timelines") {
  for (bool memo : {true, false}) {
    CAPTURE(memo);
    const Timeline inc = run_mixed(true, memo);
    const Timeline full = run_mixed(false, memo);
    REQUIRE(inc.has_ceiling);  // the workload exercises the per-flow rate ceilings
    CHECK(inc.start == full.start);
    CHECK(inc.finish == full.finish);  // exact picoseconds, not approximately
    CHECK(inc.stats.flows == full.stats.flows);
    CHECK(inc.stats.delivered_bytes == full.stats.delivered_bytes);
    CHECK(inc.stats.received_bytes == full.stats.received_bytes);
    // Capacity: no link above its capacity at any solve, either way.
    CHECK(inc.stats.max_link_load <= 1 + 1e-9);
    CHECK(full.stats.max_link_load <= 1 + 1e-9);
    // The full re-solve re-fills every active flow at every solve; the incremental one
    // touches strictly fewer on this workload (disjoint groups run side by side).
    CHECK(full.stats.flows_resolved == full.stats.active_at_solves);
    CHECK(inc.stats.flows_resolved < inc.stats.active_at_solves);
    CHECK(inc.stats.flows_resolved < full.stats.flows_resolved);
  }
  // And the run is deterministic.
  CHECK(run_mixed(true, true).finish == run_mixed(true, true).finish);
}

TEST_CASE("sim::Network: a flow ending on one rail re-solves nothing on a disjoint rail") {
  // 2 nodes x 4 GPUs; rank r is GPU r%4 of node r/4, its NIC on rail r%4 at B, hop h.
  // A: 0 -> 4 on rail 0, alone. B (10 MB) and C (30 MB): both 1 -> 5, sharing rail 1's NIC
  // links. When B drains, only C's component is re-filled; A's rate is untouched and A
  // takes exactly its uncontended alpha-beta time.
  const double B = 50e9, h = 5e-7;
  auto cluster = testing::rails(2, 4, 300e9, B, h);
  for (bool incremental : {true, false}) {
    CAPTURE(incremental);
    EngineOptions o = testing::raw();
    o.incremental_rates = incremental;
    Engine e(cluster, o);
    auto a = e.add_transfer({0, 4, 80e6, NO_STREAM, NO_STREAM, "A rail0"});
    auto b = e.add_transfer({1, 5, 10e6, NO_STREAM, NO_STREAM, "B rail1"});
    auto c = e.add_transfer({1, 5, 30e6, NO_STREAM, NO_STREAM, "C rail1"});
    e.run();
    // Route 0 -> 4 is GPU -> rail switch -> GPU: 2 hops, alpha = 2h (raw: no NCCL costs).
    CHECK(e.finish(a) == to_sim_time(2 * h + 80e6 / B));
    // B and C share rail 1 at B/2 each until B has sent 10 MB; then C alone at B.
    CHECK(e.finish(b) == doctest::Approx(to_sim_time(2 * h + 2 * 10e6 / B)).epsilon(1e-9));
    CHECK(e.finish(c) == doctest::Approx(to_sim_time(2 * h + (20e6 + 20e6) / B)).epsilon(1e-9));
    const auto& s = e.network_stats();
    CHECK(s.max_link_load <= 1 + 1e-9);
    if (incremental) {
      // Solves: t=0 all 3 new (2 components: {A}, {B, C}); B drains: only {C} re-filled
      // though A and C are active; C and A drain alone on their links: nothing to re-fill.
      CHECK(s.rate_solves == 2);
      CHECK(s.components_solved == 3);
      CHECK(s.flows_resolved == 4);
      CHECK(s.active_at_solves == 5);
      CHECK(s.flows_resolved < s.active_at_solves);
    } else {
      CHECK(s.flows_resolved == s.active_at_solves);  // every active flow, every solve
    }
  }
}
