// simulate_step with the symmetric costing of collectives (SimulateOptions::symmetric_costing:
// all-to-alls by flow class, concurrent data-parallel groups that are images of the
// simulated one left out) against the step lowered group by group, pair by pair: the same
// step, at small sizes, for dense and MoE plans, frozen and live collectives.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "models/model_loader.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

models::TrainingPlan costing_plan(int tp, int pp, int dp, int zero, int ep = 1) {
  models::TrainingPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.ep = ep;
  p.zero = zero;
  p.mbs = 1;
  p.gbs = 4LL * dp;
  p.seq = 2048;
  p.sp = tp > 1;
  p.overlap_grad_reduce = zero > 0;
  p.overlap_param_gather = zero > 0 && zero < 3;
  return p;
}

}  // namespace

TEST_CASE("strategies::symmetric costing: the same step as group by group, pair by pair") {
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 4, std::nullopt});
  const auto dense = models::model_preset("llama3-8b");
  const auto moe = models::load_model(LOOM_SOURCE_DIR "/examples/models/small-moe.json");
  struct Case {
    std::string name;
    const models::ModelSpec* model;
    models::TrainingPlan plan;
  };
  const std::vector<Case> cases = {
      {"tp8 dp4", &dense, costing_plan(8, 1, 4, 0)},
      {"tp4 pp2 dp4 zero-1", &dense, costing_plan(4, 2, 4, 1)},
      {"tp2 dp16 zero-3", &dense, costing_plan(2, 1, 16, 3)},
      {"moe ep16 dp32", &moe, costing_plan(1, 1, 32, 0, 16)},
      {"moe tp2 ep16 dp16", &moe, costing_plan(2, 1, 16, 1, 16)},
  };
  for (const Case& k : cases) {
    for (bool live : {false, true}) {
      CAPTURE(k.name);
      CAPTURE(live);
      SimulateOptions o;
      o.live_collectives = live;
      const StepReport fast = simulate_step(*k.model, k.plan, cluster, o);
      o.symmetric_costing = false;
      const StepReport whole = simulate_step(*k.model, k.plan, cluster, o);
      // Equal but for the rounding of a class's link load summed at once (a picosecond).
      CHECK(fast.step_time_s == doctest::Approx(whole.step_time_s).epsilon(1e-9));
      CHECK(fast.tasks == whole.tasks);
    }
  }
}
