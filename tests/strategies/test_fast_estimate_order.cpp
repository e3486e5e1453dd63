// The fast tier's estimate of a candidate is a function of that candidate alone: an estimator
// that has seen other candidates first (a shard's, a thread's) gives the same number as a fresh
// one. `search --merge` recomputes each listed estimate with a fresh estimator and refused the
// search's own shards when the cached unit times were keyed without tp_comm_overlap.
#include <doctest/doctest.h>

#include <vector>

#include "models/model_loader.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/search/search_space.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

TEST_CASE("strategies::FastEstimator: an estimate does not depend on what was estimated before") {
  const models::ModelSpec model =
      models::load_model(loom::testing::source_path("examples/models/tiny-gpt.json"));
  const topo::Cluster cluster =
      topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, std::nullopt});
  PlanInput in;
  in.sources() = PlanSources::command_line();
  in.set("gbs", std::int64_t{16});
  in.set("seq", std::int64_t{1024});
  const SearchSpace space(model, in, 8);
  // Every 97th candidate, both ways round: a warm estimator against fresh ones.
  std::vector<std::int64_t> ids;
  for (std::int64_t id = 0; id < space.shapes() * space.switch_combinations(); id += 97)
    ids.push_back(id);
  FastEstimator warm(model, cluster);
  int compared = 0, overlapped = 0;
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    models::TrainingPlan plan;
    try {
      plan = space.candidate(*it);
      validate_plan(model, plan, 8);
    } catch (const Error&) {
      continue;
    }
    const double seen = warm.step_time_s(plan);
    FastEstimator fresh(model, cluster);
    CAPTURE(*it);
    CHECK(fresh.step_time_s(plan) == seen);
    ++compared;
    overlapped += plan.tp_comm_overlap && plan.tp > 1;
  }
  CHECK(compared > 50);
  CHECK(overlapped > 0);  // the switch the cache once ignored is among them
}
