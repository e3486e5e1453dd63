// ZeRO-3 designs: PyTorch FSDP2 and DeepSpeed ZeRO-3 collective counts and bytes by hand,
// and the FSDP copy-in / copy-out kernels.
#include <doctest/doctest.h>

#include <cmath>

#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/step/dp_lowering.hpp"
#include "strategies/step/step_graph.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

models::TrainingPlan zero3_plan(models::FsdpImpl impl) {
  models::TrainingPlan p;
  p.dp = 8;
  p.zero = 3;
  p.seq = 1024;
  p.mbs = 1;
  p.gbs = 8;  // one micro-batch
  p.fsdp_impl = impl;
  return p;
}

double sum_params(const std::vector<models::OpCost>& ops) {
  double s = 0;
  for (const auto& op : ops) s += op.params;
  return s;
}

struct UnitParams {
  double emb = 0, layer = 0, head = 0;
  int layers = 0;
  double total() const { return emb + layers * layer + head; }
};

UnitParams unit_params_of(const models::ModelSpec& m, const models::TrainingPlan& p) {
  return {sum_params(models::embedding_ops(m, p)), sum_params(models::layer_ops(m, p, 0)),
          sum_params(models::head_ops(m, p)), m.layers};
}

SimulateOptions ideal() {
  SimulateOptions o;
  o.network = sim::NetworkMode::IDEAL;
  return o;
}

}  // namespace

TEST_CASE("strategies::DpFsdp: FSDP2 gathers once per block and use, reduce-scatters per block") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  auto plan = zero3_plan(models::FsdpImpl::FSDP2);
  const UnitParams u = unit_params_of(model, plan);
  const int units = u.layers + 2;   // emb, L0..L31, head
  const double ag = 2.0, rs = 4.0;  // bf16 gathers, fp32 reduce (TrainingPlan defaults)
  SUBCASE("reshard_after_forward: every block but the last re-gathered for backward") {
    // torchtitan apply_fsdp keeps the last block, FSDP2 the root (emb, head), unsharded.
    const auto r = simulate_step(model, plan, cluster, ideal());
    CHECK(r.dp_collectives == units + (u.layers - 1) + units);
    const double gathered = u.total() + (u.layers - 1) * u.layer;
    CHECK(r.dp_bytes_per_gpu == doctest::Approx(ag * gathered + rs * u.total()).epsilon(1e-9));
  }
  SUBCASE("no reshard: one gather per block per micro-batch") {
    plan.reshard_after_forward = false;
    const auto r = simulate_step(model, plan, cluster, ideal());
    CHECK(r.dp_collectives == 2 * units);
    CHECK(r.dp_bytes_per_gpu == doctest::Approx((ag + rs) * u.total()).epsilon(1e-9));
  }
}

TEST_CASE("strategies::DpFsdp: DeepSpeed ZeRO-3 groups parameters as its coordinator prefetches") {
  // Whole tensors off the trace queue until the batch holds the bucket (5e7 here: 3e7 + 3e7),
  // a tensor above the bucket alone; tensors under stage3_param_persistence_threshold (1e5)
  // are persisted on every rank and never gathered.
  CHECK(deepspeed_gather_groups({4096, 3e7, 3e7, 8e7, 4096, 1e7}, 50'000'000) ==
        std::vector<double>{6e7, 8e7, 1e7});
  CHECK(deepspeed_gather_groups({4096, 99'999}, 50'000'000).empty());
  CHECK(deepspeed_gather_groups({2e8}, 50'000'000) == std::vector<double>{2e8});
  // stage3_max_reuse_distance 1e9: kept from forward to backward when the later units'
  // forward and backward traverse fewer elements (2 x 4.9e8 < 1e9; 2 x 5e8 is not).
  CHECK(deepspeed_keeps_for_backward(0));
  CHECK(deepspeed_keeps_for_backward(4.9e8));
  CHECK_FALSE(deepspeed_keeps_for_backward(5e8));
}

TEST_CASE("strategies::DpFsdp: DeepSpeed ZeRO-3 moves each unit in its coordinator's gathers") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  auto plan = zero3_plan(models::FsdpImpl::DEEPSPEED);
  const UnitParams u = unit_params_of(model, plan);
  // Every unit gathered for forward and, unless kept, again for backward: Llama 3 8B's head
  // (525M elements, nothing after it) is kept, its last block (the head after it: 2 x 525M
  // > 1e9) is not. The gradients reduce-scattered in reduce_bucket_size buckets plus the
  // remainder (one backward). DeepSpeed defaults (deepspeed/runtime/zero/config.py): 5e7 and
  // 5e8 elements.
  auto expected = [&](std::int64_t prefetch, std::int64_t reduce, double& gathered) {
    StepGraph g(model, plan, cluster, ideal());
    const auto& units = g.work.units[0];
    double n = 0, after = u.total();
    gathered = 0;
    for (const Unit& unit : units) {
      after -= unit.cost.params;
      const auto groups = deepspeed_gather_groups(unit.cost.tensors, prefetch);
      double elems = 0;
      for (double e : groups) elems += e;
      const int uses = deepspeed_keeps_for_backward(after) ? 1 : 2;
      n += uses * static_cast<double>(groups.size());
      gathered += uses * elems;
    }
    CHECK(deepspeed_keeps_for_backward(0));             // the head
    CHECK_FALSE(deepspeed_keeps_for_backward(u.head));  // the last block
    return static_cast<std::int64_t>(n + std::ceil(u.total() / static_cast<double>(reduce)));
  };
  double gathered = 0;
  const auto r = simulate_step(model, plan, cluster, ideal());
  CHECK(r.dp_collectives == expected(50'000'000, 500'000'000, gathered));
  CHECK(gathered < 2.0 * u.total());  // persisted norms, the kept head
  CHECK(gathered > 2.0 * u.total() - u.head - 1e6 * u.layers);
  // Reduced in the training dtype (bf16, 2 B: DeepSpeed's communication_data_type), not the
  // plan's fp32 gradient accumulation (FSDP2 reduces in 4 B above).
  CHECK(deepspeed_reduce_bytes(plan) == 2.0);
  CHECK(r.dp_bytes_per_gpu == doctest::Approx(2.0 * gathered + 2.0 * u.total()));
  // Larger buckets: fewer, larger collectives, the same bytes.
  plan.ds_prefetch_bucket = 200'000'000;
  plan.ds_reduce_bucket = 1'000'000'000;
  const auto big = simulate_step(model, plan, cluster, ideal());
  CHECK(big.dp_collectives == expected(200'000'000, 1'000'000'000, gathered));
  CHECK(big.dp_collectives < r.dp_collectives);
  CHECK(big.dp_bytes_per_gpu == doctest::Approx(r.dp_bytes_per_gpu));
  CHECK(deepspeed_gathers(0, 50) == 0);
  CHECK(deepspeed_gathers(10, 50) == 1);
  CHECK(deepspeed_gathers(101, 50) == 3);
}

TEST_CASE("strategies::DpFsdp: DeepSpeed's many small gathers are slower at scale") {
  // Each collective pays the ring's latency over its ranks: at 256 ranks the per-bucket
  // gathers of DeepSpeed cost more than FSDP2's one gather per block.
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 32, std::nullopt});
  auto plan = zero3_plan(models::FsdpImpl::FSDP2);
  plan.dp = 256;
  plan.gbs = 256;
  SimulateOptions o;
  o.network = sim::NetworkMode::FLOW;
  const auto fsdp2 = simulate_step(model, plan, cluster, o);
  plan.fsdp_impl = models::FsdpImpl::DEEPSPEED;
  const auto ds = simulate_step(model, plan, cluster, o);
  CHECK(ds.step_time_s > fsdp2.step_time_s);
}

TEST_CASE("strategies::DpFsdp: copy-out is bytes over HBM bandwidth on the compute stream") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  const auto plan = zero3_plan(models::FsdpImpl::FSDP2);
  const SimulateOptions o;
  StepGraph g(model, plan, cluster, o);
  const Unit before = g.work.units[0][1];                                       // L0
  const Unit last_before = g.work.units[0][static_cast<size_t>(model.layers)];  // L31
  add_fsdp_copy_out(g);
  // Read + write of the gathered bf16 block at the streaming fraction of HBM (0.80, docs/
  // simulate.md) plus one kernel's fixed cost (4 us): H100 SXM 3.35 TB/s.
  const double bytes = before.cost.params * 2.0 * 2.0;
  const double t = bytes / (cluster.gpu.hbm_bandwidth_Bps * 0.80) + 4e-6;
  CHECK(g.work.units[0][1].cost.fwd_s - before.cost.fwd_s == doctest::Approx(t).scale(0));
  CHECK(g.work.units[0][1].cost.bwd_input_s - before.cost.bwd_input_s ==
        doctest::Approx(t).scale(0));
  // The last block is not re-gathered for backward (torchtitan's default policy).
  const Unit& last = g.work.units[0][static_cast<size_t>(model.layers)];
  CHECK(last.name == "L31");
  CHECK(last.cost.bwd_input_s == doctest::Approx(last_before.cost.bwd_input_s).scale(0));
  // Copy-in per shard element: cast fp32 -> bf16 (4 + 2 B) and copy into the flat buffer
  // (2 + 2 B), FSDP2 foreach_all_gather.
  CHECK(fsdp2_copy_in_bytes_per_elem(plan) == doctest::Approx(10.0));
}
