// EngineOptions::collective_override: a collective the override covers (AUTO, alone) holds
// its streams for the override's time under both timings; an explicit algorithm, twin
// groups, the IDEAL network or a request it declines run the model; the node count it is
// asked for is the number of nodes the group spans.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "sim/engine.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::sim;

namespace {

// 1 ms per all_reduce of exactly 1 MB; records the last (group size, nodes) asked.
class OneSize : public CollectiveTimeOverride {
 public:
  std::optional<double> seconds(CollectiveOp op, int group_size, int nodes,
                                double bytes) const override {
    last_group = group_size;
    last_nodes = nodes;
    if (op != CollectiveOp::ALL_REDUCE || bytes != 1e6) return std::nullopt;
    return 1e-3;
  }
  mutable int last_group = 0;
  mutable int last_nodes = 0;
};

const topo::Cluster& dgx_h100_2() {
  static const topo::Cluster cluster =
      topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  return cluster;
}

double seconds_of(const OneSize* o, CollectiveTiming how, CollectiveRequest request,
                  NetworkMode network = NetworkMode::FLOW) {
  EngineOptions options;
  options.collective_override = o;
  options.collective_timing = how;
  options.network = network;
  Engine engine(dgx_h100_2(), options);
  CollectiveSpec spec;
  spec.request = std::move(request);
  const TaskId task = engine.add_collective(spec);
  engine.run();
  return to_seconds(engine.finish(task));
}

CollectiveRequest all_reduce(std::vector<int> ranks, double bytes) {
  CollectiveRequest r;
  r.ranks = std::move(ranks);
  r.bytes = bytes;
  return r;
}

}  // namespace

TEST_CASE("sim::Engine: a collective the override covers takes the override's time") {
  const OneSize o;
  for (CollectiveTiming how : {CollectiveTiming::FLOWS, CollectiveTiming::FROZEN}) {
    CHECK(seconds_of(&o, how, all_reduce({0, 1, 2, 3}, 1e6)) == doctest::Approx(1e-3).scale(0));
    CHECK(o.last_group == 4);
    CHECK(o.last_nodes == 1);
    CHECK(seconds_of(&o, how, all_reduce({0, 8}, 1e6)) == doctest::Approx(1e-3).scale(0));
    CHECK(o.last_nodes == 2);
  }
}

TEST_CASE("sim::Engine: the model runs where the override does not apply") {
  const OneSize o;
  const auto model = [](CollectiveRequest r) {
    return seconds_of(nullptr, CollectiveTiming::FLOWS, std::move(r));
  };
  // A size the override declines.
  CHECK(seconds_of(&o, CollectiveTiming::FLOWS, all_reduce({0, 1}, 2e6)) ==
        model(all_reduce({0, 1}, 2e6)));
  // An explicit algorithm asks for that algorithm's model.
  CollectiveRequest ring = all_reduce({0, 1}, 1e6);
  ring.algorithm = Algorithm::RING;
  CHECK(seconds_of(&o, CollectiveTiming::FLOWS, ring) == model(ring));
  // Twin groups load shared links: a measurement of one group alone does not say that.
  CollectiveRequest twins = all_reduce({0, 1}, 1e6);
  twins.concurrent_groups = {{2, 3}};
  CHECK(seconds_of(&o, CollectiveTiming::FLOWS, twins) == model(twins));
  // IDEAL: communication is free.
  CHECK(seconds_of(&o, CollectiveTiming::FROZEN, all_reduce({0, 1}, 1e6), NetworkMode::IDEAL) == 0);
}
