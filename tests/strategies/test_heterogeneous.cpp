// Clusters that are not uniform (GPU types by node group, stragglers) and several steps.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <string>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/step/step_graph.hpp"
#include "strategies/step_simulator.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

topo::Cluster mixed() {
  return topo::load_cluster({source_path("examples/clusters/h100_a100_mixed.json"), {}, {}});
}

models::TrainingPlan plan(int tp, int pp, int dp) {
  models::TrainingPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.mbs = 1;
  p.gbs = 16;
  p.seq = 2048;
  return p;
}

}  // namespace

TEST_CASE("strategies::Heterogeneous: every GPU type must run the plan's precision") {
  // A B200 node first and an H100 node second: NVFP4 needs FP4 tensor cores on both, and the
  // H100 has none, though the cluster's first GPU type does.
  const loom::testing::TempDir dir("mixed_fp4");
  const std::string path = dir.file("b200_h100.json");
  std::ofstream(path) << R"({"name": "b200-h100", "node_groups": [
    {"nodes": 1, "node": {"preset": "dgx-b200"}}, {"nodes": 1, "node": {"preset": "dgx-h100"}}]})";
  const topo::Cluster cluster = topo::load_cluster({path, {}, {}});
  const models::ModelSpec model = models::model_preset("llama3-8b");
  models::TrainingPlan p = plan(1, 1, 16);
  p.precision = models::Precision::NVFP4;
  CHECK_THROWS_WITH_AS(validate_plan_on_cluster(model, p, cluster),
                       doctest::Contains("h100-sxm does not have"), PlanError);
  p.precision = models::Precision::FP8;
  CHECK_NOTHROW(validate_plan_on_cluster(model, p, cluster));
  // --fp8-recipe auto is mxfp8 on the B200s: their GEMMs swizzle block scales, so
  // --scale-swizzle has an effect on this cluster though not on the H100s; an explicit mxfp8
  // is refused because the H100s cannot run it.
  p.scale_swizzle = true;
  CHECK_NOTHROW(validate_plan_on_cluster(model, p, cluster));
  p.fp8_recipe = Fp8Recipe::MXFP8;
  CHECK_THROWS_WITH_AS(validate_plan_on_cluster(model, p, cluster),
                       doctest::Contains("h100-sxm (hopper) has no tensor cores"), PlanError);
}

TEST_CASE("strategies::Heterogeneous: --scale-swizzle needs a GPU type with block scales") {
  // Two DGX H100 nodes: auto is delayed on Hopper, so nothing is block-scaled.
  const models::ModelSpec model = models::model_preset("llama3-8b");
  models::TrainingPlan p = plan(1, 1, 16);
  p.precision = models::Precision::FP8;
  p.scale_swizzle = true;
  CHECK_THROWS_WITH_AS(validate_plan_on_cluster(model, p, topo::load_cluster({"dgx-h100", 2, {}})),
                       doctest::Contains("h100-sxm (hopper: delayed) has no block scales"),
                       PlanError);
}

TEST_CASE("strategies::Heterogeneous: FP8 needs FP8 tensor cores on every GPU type") {
  // H100 and A100: the A100s have no FP8 tensor cores (Transformer Engine refuses FP8 below
  // compute capability 8.9), so an FP8 plan cannot run on this cluster.
  const models::ModelSpec model = models::model_preset("llama3-8b");
  models::TrainingPlan p = plan(1, 1, 16);
  p.precision = models::Precision::FP8;
  CHECK_THROWS_WITH_AS(validate_plan_on_cluster(model, p, mixed()),
                       doctest::Contains("fp8 needs FP8 tensor cores, which a100-sxm-80gb"),
                       PlanError);
  p.precision = models::Precision::BF16;
  CHECK_NOTHROW(validate_plan_on_cluster(model, p, mixed()));
}

TEST_CASE("strategies::Heterogeneous: half H100, half A100 — symmetric and full agree") {
  // Ranks 0-7 are H100 (node 0), 8-15 A100 (node 1). tp 8 dp 2: one DP replica per node, so
  // symmetric mode simulates two representatives (one per GPU type) and full mode all 16.
  // pp 2 tp 8: stage 0 on the H100s, stage 1 on the A100s, one representative per stage.
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = mixed();
  for (const auto& p : {plan(8, 1, 2), plan(8, 2, 1), plan(4, 2, 2)}) {
    for (auto network : {sim::NetworkMode::ANALYTICAL, sim::NetworkMode::FLOW}) {
      SimulateOptions sym, full;
      sym.network = full.network = network;
      full.full = true;
      const StepReport a = simulate_step(model, p, cluster, sym);
      const StepReport b = simulate_step(model, p, cluster, full);
      CHECK(b.simulated_gpus == 16);
      CHECK(a.simulated_gpus < 16);
      CHECK(a.step_time_s == doctest::Approx(b.step_time_s).epsilon(0.01));
    }
  }
  // DP over the two GPU types: the A100 replica computes more slowly (bf16 dense 312 vs
  // 989 TFLOP/s), and the synchronous all-reduce makes the H100 replica wait for it.
  const StepReport dp = simulate_step(model, plan(8, 1, 2), cluster, {});
  REQUIRE(dp.replicas.size() == 2);
  CHECK(dp.replicas[0].gpu == "h100-sxm");
  CHECK(dp.replicas[1].gpu == "a100-sxm-80gb");
  CHECK(dp.replicas[1].compute_s > 1.5 * dp.replicas[0].compute_s);
  CHECK(dp.replicas[0].finish_s == doctest::Approx(dp.replicas[1].finish_s).epsilon(0.01));
  // PP over the two types: per-stage times follow their GPUs.
  const StepReport pp = simulate_step(model, plan(8, 2, 1), cluster, {});
  REQUIRE(pp.stages.size() == 2);
  CHECK(pp.stages[0].gpu == "h100-sxm");
  CHECK(pp.stages[1].gpu == "a100-sxm-80gb");
  CHECK(pp.stages[1].compute_s > 1.5 * pp.stages[0].compute_s);
  // The same plan on H100s only is faster.
  const StepReport h100 =
      simulate_step(model, plan(8, 1, 2), topo::load_cluster({"dgx-h100", 2, {}}), {});
  CHECK(h100.step_time_s < dp.step_time_s);
}

TEST_CASE(
    "strategies::Heterogeneous: one straggler at f slows a synchronous DP step by f on its compute "
    "share") {
  // DDP over 8 H100s, no overlap: step = compute c (passes + optimizer, every GPU alike) +
  // the all-reduce. Rank 3 at f = 1.5 computes 1.5 c; the all-reduce waits for it, so the
  // step grows by (f - 1) c and nothing else.
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = topo::load_cluster({"dgx-h100", 1, {}});
  models::TrainingPlan p = plan(1, 1, 8);
  const StepReport base = simulate_step(model, p, cluster, {});
  SimulateOptions slow;
  slow.stragglers = {{3, 1.5}};
  const StepReport s = simulate_step(model, p, cluster, slow);
  const double c = base.compute_time_s;
  CHECK(s.step_time_s - base.step_time_s == doctest::Approx(0.5 * c).epsilon(0.01));
  CHECK(s.simulated_gpus == 2);  // the representative and the straggler
  slow.full = true;
  const StepReport f = simulate_step(model, p, cluster, slow);
  CHECK(f.step_time_s == doctest::Approx(s.step_time_s).epsilon(1e-6));
  // In symmetric mode the straggler is the second simulated replica.
  REQUIRE(s.replicas.size() == 2);
  CHECK(s.replicas[1].rank == 3);
  CHECK(s.replicas[1].compute_factor == doctest::Approx(1.5));
}

TEST_CASE("strategies::Heterogeneous: seeded random stragglers are reproducible and vary by step") {
  // In every step each GPU is slow with probability 0.25, by 1 + Exp(mean 1): the draws
  // are a function of (seed, step, rank) alone, so runs repeat exactly and symmetric mode
  // (one representative per distinct slowdown pattern) agrees with full mode.
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = topo::load_cluster({"dgx-h100", 1, {}});
  const models::TrainingPlan p = plan(2, 1, 4);
  SimulateOptions o;
  o.steps = 6;
  o.random_stragglers = {0.25, 2.0, 11};
  const StepReport a = simulate_step(model, p, cluster, o);
  const StepReport b = simulate_step(model, p, cluster, o);
  REQUIRE(a.steps.times_s.size() == 6);
  CHECK(a.steps.times_s == b.steps.times_s);
  const double lo = *std::min_element(a.steps.times_s.begin(), a.steps.times_s.end());
  const double hi = *std::max_element(a.steps.times_s.begin(), a.steps.times_s.end());
  CHECK(hi > lo * 1.05);
  CHECK(a.steps.p99_s == doctest::Approx(hi));
  // The mean step is the mean of the step times (the series' end over six steps).
  CHECK(a.steps.mean_s ==
        doctest::Approx(std::accumulate(a.steps.times_s.begin(), a.steps.times_s.end(), 0.0) / 6));
  o.full = true;
  const StepReport f = simulate_step(model, p, cluster, o);
  CHECK(f.steps.mean_s == doctest::Approx(a.steps.mean_s).epsilon(0.01));
  o.random_stragglers.seed = 12;
  CHECK(simulate_step(model, p, cluster, o).steps.times_s != a.steps.times_s);
}

TEST_CASE("strategies::StepSeries: N identical steps take N times one step") {
  // Without variance every step repeats the first: the optimizer of step k ends before step
  // k + 1 starts on the same streams, so the run is N x the single step (to rounding), and
  // the first step's breakdown is the single step's.
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = topo::load_cluster({"dgx-h100", 2, {}});
  for (const auto& p : {plan(2, 2, 4), [] {
                          auto z = plan(2, 1, 8);
                          z.zero = 1;
                          z.overlap_grad_reduce = z.overlap_param_gather = true;
                          return z;
                        }()}) {
    SimulateOptions one, four;
    four.steps = 4;
    const StepReport a = simulate_step(model, p, cluster, one);
    const StepReport b = simulate_step(model, p, cluster, four);
    CHECK(b.steps.times_s.size() == 4);
    CHECK(b.step_time_s == doctest::Approx(a.step_time_s).epsilon(0.01));
    CHECK(b.bubble_time_s == doctest::Approx(a.bubble_time_s));
    CHECK(b.compute_time_s == doctest::Approx(a.compute_time_s));
    CHECK(b.steps.p50_s == doctest::Approx(a.step_time_s).epsilon(0.01));
  }
}

TEST_CASE("strategies::StepSimulator: options out of range are bad input") {
  SimulateOptions o;
  o.steps = 0;
  CHECK_THROWS_WITH_AS(check_simulate_options(o, 8), doctest::Contains("steps"), ValidationError);
  o.steps = 1;
  o.stragglers = {{8, 2.0}};
  CHECK_THROWS_WITH_AS(check_simulate_options(o, 8), doctest::Contains("rank 8 is out of range"),
                       ValidationError);
  o.stragglers = {{1, 0.5}};
  CHECK_THROWS_WITH_AS(check_simulate_options(o, 8), doctest::Contains("must be a number >= 1"),
                       ValidationError);
  o.stragglers.clear();
  o.random_stragglers = {1.5, 2.0, 1};
  CHECK_THROWS_AS(check_simulate_options(o, 8), ValidationError);
  // The draw: exactly the fixed factor without the random model.
  SimulateOptions fixed;
  fixed.stragglers = {{2, 1.25}};
  CHECK(straggler_factor(fixed, 5, 2) == 1.25);
  CHECK(straggler_factor(fixed, 5, 3) == 1.0);
}

TEST_CASE("strategies::Heterogeneous: each GPU type's host launches at its own speed") {
  // H100 + A100 nodes: the H100's host is a DGX H100's Xeon (13.48 us per op, TE issue
  // #2053), the A100's unmeasured (the 10 us reference). A host-bound step (128 tokens per
  // micro-batch) lies strictly between the same step with every host at 10 us and at 13.48 us.
  const auto model = models::load_model("gpt-1.7b");
  models::TrainingPlan p = plan(1, 2, 8);
  p.seq = 128;
  const auto step = [&](double host_s) {
    SimulateOptions o;
    o.host_launch_s = host_s;
    return simulate_step(model, p, mixed(), o).step_time_s;
  };
  const double own = step(-1), ten = step(10e-6), xeon = step(13.48e-6);
  CHECK(ten < own);
  CHECK(own < xeon);
}
