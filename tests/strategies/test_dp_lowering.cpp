// Data-parallel lowering: expert gradients over the expert data-parallel group.
#include <doctest/doctest.h>

#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

// Local parameters of one GPU over all layers, split into routed-expert and dense ones, plus
// the embedding and head (pp == 1: one stage holds everything), from the op list.
std::pair<double, double> expert_and_dense(const models::ModelSpec& m,
                                           const models::TrainingPlan& p) {
  double expert = 0, dense = 0;
  for (const auto& op : models::embedding_ops(m, p)) dense += op.params;
  for (int l = 0; l < m.layers; ++l)
    for (const auto& op : models::layer_ops(m, p, l)) (op.expert ? expert : dense) += op.params;
  for (const auto& op : models::head_ops(m, p)) dense += op.params;
  return {expert, dense};
}

models::TrainingPlan mixtral_plan(int dp, int ep) {
  models::TrainingPlan p;
  p.dp = dp;
  p.ep = ep;
  p.seq = 1024;
  p.mbs = 1;
  p.gbs = dp;
  return p;
}

}  // namespace

TEST_CASE("strategies::DpLowering: expert gradients reduce over the expert data-parallel group") {
  // Megatron-core reduces expert grads over expert_data_parallel_group (dp x cp / ep ranks),
  // dense grads over DP. ZeRO paper Sec. 7 volume: an all-reduce moves 2x the gradient bytes.
  const auto model = models::model_preset("mixtral-8x7b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  SimulateOptions o;
  o.network = sim::NetworkMode::IDEAL;
  const double grad = 4.0;  // fp32 main grads (TrainingPlan default)
  SUBCASE("ep = dp: one rank per expert group, only dense gradients move") {
    const auto plan = mixtral_plan(8, 8);
    const auto [expert, dense] = expert_and_dense(model, plan);
    CHECK(expert > 3 * dense);  // the bug: 57.9 GB counted the experts too
    const auto r = simulate_step(model, plan, cluster, o);
    CHECK(r.dp_bytes_per_gpu == doctest::Approx(2 * grad * dense).epsilon(1e-9));
  }
  SUBCASE("ep = 2 of dp = 8: experts reduce over 4 ranks, as separate buckets") {
    const auto plan = mixtral_plan(8, 2);
    const auto [expert, dense] = expert_and_dense(model, plan);
    const auto r = simulate_step(model, plan, cluster, o);
    CHECK(r.dp_bytes_per_gpu == doctest::Approx(2 * grad * (dense + expert)).epsilon(1e-9));
    const auto dense_only = simulate_step(model, mixtral_plan(8, 8), cluster, o);
    CHECK(r.dp_collectives > dense_only.dp_collectives);
  }
  SUBCASE("ZeRO-3 gathers and reduce-scatters the experts over their group, no deadlock") {
    auto plan = mixtral_plan(8, 2);
    plan.zero = 3;
    const auto r = simulate_step(model, plan, cluster, o);
    CHECK(r.step_time_s > 0);
    CHECK(r.dp_bytes_per_gpu > 0);
  }
}
