// Pair by pair (CostOptions::flow_classes off, or a group that is not symmetric), the
// all-to-all folds the transfers that repeat one (source, destination) pair into one
// FlowSpec with their count (collective_direct.cpp). These tests check the fold against the
// flow-by-flow schedule it replaces: the same transfers (PXN relays included), and the same
// time in the analytical and in the flow mode (max-min sharing gives identical flows one
// rate), on a rail-optimised DGX H100 fat-tree at small sizes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

// Drives a Network alone: wakeups in time order until the one batch is done.
struct SoloHost final : NetworkHost {
  std::multimap<SimTime, std::uint64_t> wakeups;
  SimTime done = -1;
  void schedule_network_wakeup(SimTime at, std::uint64_t token) override {
    wakeups.emplace(at, token);
  }
  void batch_done(BatchId, SimTime at) override { done = at; }
  SimTime next_event_time() const override {
    return wakeups.empty() ? INT64_MAX : wakeups.begin()->first;
  }
};

SimTime flow_time(Fabric& fabric, const std::vector<FlowSpec>& flows) {
  SoloHost host;
  auto net = make_network(NetworkMode::FLOW, fabric, host);
  BatchSpec batch;
  batch.flows = flows.data();
  batch.count = flows.size();
  net->start_batch(0, batch, 0);
  while (!host.wakeups.empty()) {
    auto it = host.wakeups.begin();
    const auto [at, token] = *it;
    host.wakeups.erase(it);
    net->on_wakeup(at, token);
  }
  return host.done;
}

// Every folded flow written out `count` times, as the flow-by-flow lowering listed them.
std::vector<FlowSpec> unfolded(const std::vector<FlowSpec>& flows) {
  std::vector<FlowSpec> out;
  for (FlowSpec f : flows) {
    const int k = f.count;
    f.count = 1;
    out.insert(out.end(), static_cast<size_t>(k), f);
  }
  return out;
}

std::vector<std::pair<topo::VertexId, topo::VertexId>> pairs(const std::vector<FlowSpec>& flows) {
  std::vector<std::pair<topo::VertexId, topo::VertexId>> p;
  for (const auto& f : flows)
    for (int k = 0; k < f.count; ++k) p.emplace_back(f.src, f.dst);
  std::sort(p.begin(), p.end());
  return p;
}

CollectiveSchedule all_to_all(Fabric& fabric, int ranks, double bytes) {
  CollectiveRequest req;
  req.op = CollectiveOp::ALL_TO_ALL;
  for (int r = 0; r < ranks; ++r) req.ranks.push_back(r);
  req.bytes = bytes;
  req.algorithm = Algorithm::DIRECT;
  CostOptions pure;
  pure.nccl_overheads = false;
  pure.flow_classes = false;  // pair by pair: the fold (the classes: test_all_to_all_symmetry)
  return build_schedule(fabric, req, Algorithm::DIRECT, Protocol::SIMPLE, pure);
}

}  // namespace

TEST_CASE("sim::all_to_all: the folded flows are the flow-by-flow transfers, PXN relays included") {
  for (int nodes : {1, 2, 4}) {
    const auto cluster = topo::load_cluster({"dgx-h100", nodes, std::nullopt});
    Fabric fabric(cluster);
    const int n = cluster.num_gpus();
    const double share = 64e6 / n;
    const auto s = all_to_all(fabric, n, 64e6);
    // The reference: each ordered pair as NCCL's p2p sends it, relayed through the PXN proxy
    // of its own (source, destination) pair (a fresh fabric: no cached answer).
    Fabric fresh(cluster);
    std::vector<FlowSpec> reference;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        const auto a = cluster.gpu_vertex(i), c = cluster.gpu_vertex(j);
        const auto proxy = fresh.pxn_proxy(a, c);
        if (proxy < 0) {
          reference.push_back({a, c, share});
        } else {
          reference.push_back({a, proxy, share});
          reference.push_back({proxy, c, share});
        }
      }
    }
    CHECK(pairs(s.flows) == pairs(reference));
    for (const auto& f : s.flows) CHECK(f.bytes == share);
    // Folded: one entry per distinct pair; 8 GPUs per node fold the n(n-1) transfers' hops
    // to at most 8 nodes^2 rail pairs plus 64 NVLink pairs per node.
    CHECK(static_cast<int>(s.flows.size()) <= 8 * nodes * nodes + 64 * nodes);
    if (nodes == 4) CHECK(reference.size() >= 5 * s.flows.size());  // 1,664 hops in 320 flows
  }
}

TEST_CASE(
    "sim::all_to_all: folded and flow-by-flow batches take the same time (analytical, flow)") {
  // 4 nodes x 8 H100: NVLink pairs inside each node, rail pairs and PXN relays across.
  const auto cluster = topo::load_cluster({"dgx-h100", 4, std::nullopt});
  Fabric fabric(cluster);
  for (double bytes : {1e3, 1e6, 1e9}) {
    const auto s = all_to_all(fabric, cluster.num_gpus(), bytes);
    const auto flat = unfolded(s.flows);
    REQUIRE(flat.size() > s.flows.size());
    BatchSpec folded_batch, flat_batch;
    folded_batch.flows = s.flows.data();
    folded_batch.count = s.flows.size();
    flat_batch.flows = flat.data();
    flat_batch.count = flat.size();
    const SimTime a_folded = analytical_batch_time(fabric, folded_batch);
    const SimTime a_flat = analytical_batch_time(fabric, flat_batch);
    CHECK(std::abs(a_folded - a_flat) <= 1 + a_flat / 1'000'000'000);  // equal within rounding
    const SimTime f_folded = flow_time(fabric, s.flows);
    const SimTime f_flat = flow_time(fabric, flat);
    CHECK(f_folded > 0);
    CHECK(std::abs(f_folded - f_flat) <= 1 + f_flat / 1'000'000'000);
  }
}

TEST_CASE("sim::all_to_all: a flow standing for k shares its links as k flows do") {
  // Two GPUs of one node over NVLink: 3 flows a->b folded into one with count 3, beside one
  // flow a->b of twice the bytes. Max-min: 4 equal shares of the link; the folded three
  // drain at t = 4 S / C, the big flow then runs alone: S more at C, ending at 5 S / C.
  const auto cluster = topo::load_cluster({"dgx-h100", 1, std::nullopt});
  Fabric fabric(cluster);
  const auto a = cluster.gpu_vertex(0), b = cluster.gpu_vertex(1);
  const double S = 1e6;
  const std::vector<FlowSpec> folded{{a, b, S, 0, 3}, {a, b, 2 * S, 0, 1}};
  const std::vector<FlowSpec> flat = unfolded(folded);
  CHECK(flat.size() == 4);
  CHECK(flow_time(fabric, folded) == flow_time(fabric, flat));
}

TEST_CASE("sim::Network: a memoised ring's repeats are tallied once, not once per step") {
  // A flat ring all-reduce over n ranks runs 2(n-1) steps of the same n flows; the memo
  // reuses each step's time, and the byte counters took every repeat flow by flow: n^2 work.
  // Counted: bookkeeping entries at 2x the ranks stay within 2.5x (they were 4x).
  auto tallied = [](int nodes) {
    const auto cluster = topo::load_cluster({"dgx-h100", nodes, std::nullopt});
    Engine engine(cluster, EngineOptions{});
    CollectiveSpec spec;
    for (int r = 0; r < cluster.num_gpus(); ++r) spec.request.ranks.push_back(r);
    spec.request.bytes = 1 << 30;
    spec.request.algorithm = Algorithm::RING;
    const TaskId task = engine.add_collective(spec);
    engine.run();
    const auto& st = engine.network_stats();
    // Every step's flows and bytes are still counted, repeats included.
    const CollectiveSchedule& s = engine.schedule(task);
    std::int64_t flows = 0;
    double bytes = 0;
    for (const auto& ph : s.phases) {
      for (auto i = s.pattern_begin[ph.pattern]; i < s.pattern_begin[ph.pattern + 1]; ++i) {
        flows += s.flows[i].count;
        bytes += s.flows[i].bytes * s.flows[i].count;
      }
    }
    CHECK(s.phases.size() >= 30);
    CHECK(st.flows == flows);
    CHECK(st.delivered_bytes == doctest::Approx(bytes).epsilon(1e-12));
    return static_cast<double>(st.tallied);
  };
  const double small = tallied(16), large = tallied(32);
  CHECK(large / small <= 2.5);
}
