// The engine's two collective timings (EngineOptions::collective_timing): FLOWS runs a
// collective's phases as flows on the network, FROZEN holds its streams for the lowered
// schedule's time on an idle network. On a cluster where nothing else runs the two must
// agree; FROZEN memoises per distinct request; add_collective_sequence makes one task
// (FROZEN) or a chain (FLOWS).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/engine.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

// Two DGX H100 nodes (8 H100 SXM each on NVLink4 NVSwitches, 8 ConnectX-7 NDR rails): the
// cluster the CLI's golden collective test uses.
const topo::Cluster& dgx_h100_2() {
  static const topo::Cluster cluster =
      topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  return cluster;
}

EngineOptions timing(CollectiveTiming how) {
  EngineOptions o;
  o.collective_timing = how;
  // FLOWS: solve every phase's flows live (no reuse of a repeated phase's time), so the
  // comparison with FROZEN's analytical estimate is between two independent computations.
  o.memo = false;
  return o;
}

std::vector<int> ranks(int first, int count) {
  std::vector<int> r;
  for (int i = 0; i < count; ++i) r.push_back(first + i);
  return r;
}

CollectiveSpec spec(CollectiveOp op, Algorithm algorithm, std::vector<int> group, double bytes) {
  CollectiveSpec s;
  s.request.op = op;
  s.request.algorithm = algorithm;
  s.request.ranks = std::move(group);
  s.request.bytes = bytes;
  s.label = "c";
  return s;
}

// Gives `s` one new stream per rank of its group on `e`.
void add_streams(Engine& e, CollectiveSpec& s) {
  s.streams.clear();
  for (int r : s.request.ranks) s.streams.push_back(e.add_stream("comm", r));
}

// Duration (picoseconds) of `s` run alone on an engine with `how`.
SimTime alone(CollectiveSpec s, CollectiveTiming how) {
  Engine e(dgx_h100_2(), timing(how));
  add_streams(e, s);
  const TaskId t = e.add_collective(s);
  e.run();
  CHECK(e.start(t) == 0);
  return e.finish(t) - e.start(t);
}

struct Case {
  const char* what;
  CollectiveOp op;
  Algorithm algorithm;
  std::vector<int> group;
  double bytes;
};

}  // namespace

TEST_CASE("sim::Engine: FROZEN and FLOWS time an isolated collective the same") {
  const double MiB = 1024.0 * 1024;
  const std::vector<Case> cases = {
      {"ring all-reduce, 16 GPUs", CollectiveOp::ALL_REDUCE, Algorithm::RING, ranks(0, 16),
       256 * MiB},
      {"ring all-gather, one node", CollectiveOp::ALL_GATHER, Algorithm::RING, ranks(0, 8),
       64 * MiB},
      {"ring reduce-scatter, 16 GPUs", CollectiveOp::REDUCE_SCATTER, Algorithm::RING, ranks(0, 16),
       64 * MiB},
      {"direct all-to-all, 16 GPUs", CollectiveOp::ALL_TO_ALL, Algorithm::DIRECT, ranks(0, 16),
       64 * MiB},
      {"tree all-reduce, 16 GPUs", CollectiveOp::ALL_REDUCE, Algorithm::TREE, ranks(0, 16),
       32 * MiB},
      {"nvls all-reduce, one node", CollectiveOp::ALL_REDUCE, Algorithm::NVLS, ranks(8, 8),
       128 * MiB},
      {"hierarchical all-reduce", CollectiveOp::ALL_REDUCE, Algorithm::HIERARCHICAL, ranks(0, 16),
       128 * MiB},
      {"auto all-reduce, small", CollectiveOp::ALL_REDUCE, Algorithm::AUTO, ranks(0, 16),
       64 * 1024},
      {"ring broadcast, 2 GPUs across nodes",
       CollectiveOp::BROADCAST,
       Algorithm::RING,
       {0, 8},
       8 * MiB},
  };
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const CollectiveSpec s = spec(c.op, c.algorithm, c.group, c.bytes);
    const SimTime flows = alone(s, CollectiveTiming::FLOWS);
    const SimTime frozen = alone(s, CollectiveTiming::FROZEN);
    CHECK(flows > 0);
    // Integer picoseconds on both paths: equal to the picosecond.
    CHECK(std::llabs(flows - frozen) <= 1);
  }
}

TEST_CASE("sim::Engine: FROZEN ignores traffic it shares links with, FLOWS shares them") {
  // Two all-gathers on the same two GPUs of different nodes (one InfiniBand rail), on
  // separate streams, at the same time: as flows they split the rail and each takes longer
  // than alone (at most twice: bandwidth halves, latency does not double); frozen, each
  // keeps its idle-network time (FROZEN's documented approximation).
  auto a = spec(CollectiveOp::ALL_GATHER, Algorithm::RING, {0, 8}, 256e6);
  const SimTime single = alone(a, CollectiveTiming::FROZEN);
  for (auto how : {CollectiveTiming::FLOWS, CollectiveTiming::FROZEN}) {
    Engine e(dgx_h100_2(), timing(how));
    auto x = a, y = a;
    add_streams(e, x);
    add_streams(e, y);
    const TaskId tx = e.add_collective(x);
    const TaskId ty = e.add_collective(y);
    e.run();
    CHECK(e.start(ty) == 0);
    const SimTime tx_time = e.finish(tx) - e.start(tx);
    if (how == CollectiveTiming::FROZEN) {
      CHECK(tx_time == single);
    } else {
      CHECK(tx_time > single + single / 2);
      CHECK(tx_time <= 2 * single);
    }
  }
}

TEST_CASE("sim::Engine: FROZEN memoises a request, keyed on every field that changes it") {
  Engine e(dgx_h100_2(), timing(CollectiveTiming::FROZEN));
  const auto a = spec(CollectiveOp::ALL_REDUCE, Algorithm::RING, ranks(0, 16), 64e6).request;
  const SimTime first = e.frozen_time(a);
  CHECK(first > 0);
  CHECK(e.frozen_time(a) == first);
  // Two tasks of the same request run back to back on the same streams: twice the time.
  auto s = spec(CollectiveOp::ALL_REDUCE, Algorithm::RING, ranks(0, 16), 64e6);
  add_streams(e, s);
  const TaskId t1 = e.add_collective(s);
  const TaskId t2 = e.add_collective(s);
  e.run();
  CHECK(e.finish(t1) - e.start(t1) == first);
  CHECK(e.finish(t2) - e.start(t2) == first);
  CHECK(e.start(t2) == e.finish(t1));
  // A different size, group or algorithm is a different entry, not a stale hit.
  auto bigger = a;
  bigger.bytes = 128e6;
  CHECK(e.frozen_time(bigger) > first);
  auto node = a;
  node.ranks = ranks(0, 8);  // inside one NVLink domain: faster than crossing InfiniBand
  CHECK(e.frozen_time(node) < first);
  auto tree = a;
  tree.algorithm = Algorithm::TREE;
  CHECK(e.frozen_time(tree) != first);
  CHECK(e.frozen_time(a) == first);
}

TEST_CASE("sim::Engine: FROZEN is zero on the ideal network and for trivial requests") {
  EngineOptions ideal = timing(CollectiveTiming::FROZEN);
  ideal.network = NetworkMode::IDEAL;
  Engine e(dgx_h100_2(), ideal);
  const auto r = spec(CollectiveOp::ALL_REDUCE, Algorithm::RING, ranks(0, 16), 64e6).request;
  CHECK(e.frozen_time(r) == 0);
  Engine f(dgx_h100_2(), timing(CollectiveTiming::FROZEN));
  auto one = r;
  one.ranks = {3};
  CHECK(f.frozen_time(one) == 0);
  auto empty = r;
  empty.bytes = 0;
  CHECK(f.frozen_time(empty) == 0);
}

TEST_CASE("sim::Engine: a collective sequence is one FROZEN task, a FLOWS chain") {
  // A layer's tensor-parallel collectives on one node: all-reduce, then all-gather, then
  // reduce-scatter (sequence parallelism), each after the one before.
  std::vector<CollectiveSpec> specs = {
      spec(CollectiveOp::ALL_REDUCE, Algorithm::AUTO, ranks(0, 8), 32e6),
      spec(CollectiveOp::ALL_GATHER, Algorithm::AUTO, ranks(0, 8), 16e6),
      spec(CollectiveOp::REDUCE_SCATTER, Algorithm::AUTO, ranks(0, 8), 16e6),
  };
  SimTime sum = 0;
  {
    Engine e(dgx_h100_2(), timing(CollectiveTiming::FROZEN));
    const auto streams = [&] {
      CollectiveSpec tmp = specs[0];
      add_streams(e, tmp);
      return tmp.streams;
    }();
    for (auto& s : specs) s.streams = streams;
    const StreamId other = e.add_stream("compute", 0);
    const TaskId before = e.add_compute(other, 1'000'000, "before");
    for (const auto& s : specs) sum += e.frozen_time(s.request);
    const auto [first, last] = e.add_collective_sequence(specs, {before});
    CHECK(first == last);
    CHECK(e.num_tasks() == 2);
    e.run();
    CHECK(e.start(first) == 1'000'000);
    CHECK(e.finish(first) - e.start(first) == sum);
    CHECK(e.label(first) == "c");
  }
  Engine e(dgx_h100_2(), timing(CollectiveTiming::FLOWS));
  CollectiveSpec tmp = specs[0];
  add_streams(e, tmp);
  for (auto& s : specs) s.streams = tmp.streams;
  const auto [first, last] = e.add_collective_sequence(specs);
  CHECK(last - first == 2);
  CHECK(e.num_tasks() == 3);
  e.run();
  CHECK(e.start(first + 1) == e.finish(first));
  CHECK(e.start(last) == e.finish(first + 1));
  // Alone on the network, the chain takes what the frozen sum says.
  CHECK(std::llabs((e.finish(last) - e.start(first)) - sum) <= 3);
}

TEST_CASE("sim::Engine: an empty collective sequence is a ValidationError") {
  for (auto how : {CollectiveTiming::FLOWS, CollectiveTiming::FROZEN}) {
    Engine e(dgx_h100_2(), timing(how));
    CHECK_THROWS_AS(e.add_collective_sequence({}), ValidationError);
    // A bad stream list is rejected in both timings too.
    auto s = spec(CollectiveOp::ALL_REDUCE, Algorithm::RING, ranks(0, 4), 1e6);
    s.streams = {e.add_stream("one", 0)};
    CHECK_THROWS_AS(e.add_collective_sequence({s}), ValidationError);
    CHECK_THROWS_AS(e.add_collective(s), ValidationError);
  }
}
