// Context parallelism by --cp-comm-type (models/flops.cpp, strategies/step/pass_cost.cpp
// cp_exchange, strategies/step/tp_overlap.cpp cp_overlap): each type's bytes and messages
// per layer against its closed form, its attention kernel shape, its memory and its overlap.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/memory.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/step/pass_cost.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

topo::Cluster h100(int nodes) {
  return topo::load_cluster(topo::ClusterRequest{"dgx-h100", nodes, std::nullopt});
}

// Llama 3 8B (h 4096, 32 heads, 8 K/V heads of 128) on cp ranks, bf16, tp 1.
models::TrainingPlan cp_plan(int cp, models::CpCommType type) {
  models::TrainingPlan p;
  p.cp = cp;
  p.seq = 8192;
  p.mbs = 1;
  p.gbs = 1;
  p.cp_comm_type = type;
  return p;
}

std::vector<CommItem> cp_items(const std::vector<CommItem>& items) {
  std::vector<CommItem> out;
  for (const CommItem& i : items)
    if (i.dim == models::Dim::CP) out.push_back(i);
  return out;
}

const models::OpCost& op_named(const std::vector<models::OpCost>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  throw InternalError("no op " + name);
}

}  // namespace

TEST_CASE("strategies::cp_comm_type: bytes and messages per layer, by hand") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = h100(1);
  const topo::DatasheetKernelModel kernels(cluster.gpu);
  const int cp = 4;
  // s / cp = 2048 local tokens; K and V 8 heads x 128 = 1024 wide each; Q 4096 wide; bf16.
  const double kv = 2.0 * 2048 * (1024 + 1024), q = 2.0 * 2048 * 4096;
  for (auto type : {models::CpCommType::P2P, models::CpCommType::ALLGATHER}) {
    // K/V of the whole sequence reach every rank: an all-gather of kv x cp (nccl-tests
    // size), (cp - 1) kv bytes per rank in cp - 1 ring steps; the backward reduce-scatters
    // their gradients, the same bytes.
    const models::TrainingPlan p = cp_plan(cp, type);
    const PassCost c = cost_ops(models::layer_ops(model, p, 0), p, kernels, OpList::LAYER, 0);
    const auto f = cp_items(c.fwd_comm), b = cp_items(c.bwd_comm);
    REQUIRE(f.size() == 1);
    REQUIRE(b.size() == 1);
    CHECK(f[0].op == sim::CollectiveOp::ALL_GATHER);
    CHECK(f[0].bytes == doctest::Approx(kv * cp));
    CHECK(b[0].op == sim::CollectiveOp::REDUCE_SCATTER);
    CHECK(b[0].bytes == doctest::Approx(kv * cp));
  }
  // Ulysses: an all-to-all of Q, K, V before the attention, one of its output after (each
  // rank keeps 1 / cp of each, sends the rest), mirrored in the backward: 2 messages.
  const models::TrainingPlan p = cp_plan(cp, models::CpCommType::A2A);
  const PassCost c = cost_ops(models::layer_ops(model, p, 0), p, kernels, OpList::LAYER, 0);
  for (const auto& items : {cp_items(c.fwd_comm), cp_items(c.bwd_comm)}) {
    REQUIRE(items.size() == 2);
    CHECK(items[0].op == sim::CollectiveOp::ALL_TO_ALL);
    CHECK(items[0].bytes == doctest::Approx(q + kv));
    CHECK(items[1].op == sim::CollectiveOp::ALL_TO_ALL);
    CHECK(items[1].bytes == doctest::Approx(q));
  }
}

TEST_CASE("strategies::cp_comm_type: attention kernel shapes") {
  const auto model = models::model_preset("llama3-8b");
  const auto shape = [&](models::CpCommType type, models::Framework fw) {
    models::TrainingPlan p = cp_plan(4, type);
    p.framework = fw;
    return op_named(models::layer_ops(model, p, 0), "attn_scores").attention;
  };
  const auto mg = models::Framework::MEGATRON;
  // p2p: cp chunk kernels of the 2048 local queries (load-balanced causal ring).
  CHECK(shape(models::CpCommType::P2P, mg).cp == 4);
  CHECK(shape(models::CpCommType::P2P, mg).seq_q == 2048);
  // TE all-gather: the local queries against the gathered keys, one kernel.
  CHECK(shape(models::CpCommType::ALLGATHER, mg).cp == 1);
  CHECK(shape(models::CpCommType::ALLGATHER, mg).seq_kv == 8192);
  // Ulysses: the whole sequence for 1 / cp of the heads, one kernel.
  CHECK(shape(models::CpCommType::A2A, mg).cp == 1);
  CHECK(shape(models::CpCommType::A2A, mg).seq_q == 8192);
  // PyTorch's context_parallel runs SDPA per K/V chunk, whichever its rotation.
  CHECK(shape(models::CpCommType::ALLGATHER, models::Framework::TORCHTITAN).cp == 4);
}

TEST_CASE("strategies::cp_comm_type: gathered K/V memory grows with cp at fixed tokens") {
  // 4096 tokens per micro-batch on each rank: seq = 4096 x cp. PyTorch's context_parallel
  // keeps every K/V chunk its SDPA calls were given, (cp - 1) x the local K/V per layer
  // beyond the local ones; Transformer Engine's p2p keeps only the local K/V.
  const auto model = models::model_preset("llama3-8b");
  const double local_kv = 2.0 * 4096 * (1024 + 1024);
  const auto layer = [&](int cp, models::Framework fw, models::CpCommType type) {
    models::TrainingPlan p = cp_plan(cp, type);
    p.seq = 4096 * cp;
    p.framework = fw;
    return models::stored_layer_activation_bytes(model, p, 0);
  };
  const auto tt = models::Framework::TORCHTITAN;
  const auto ag = models::CpCommType::ALLGATHER;
  const double a2 = layer(2, tt, ag), a4 = layer(4, tt, ag), a8 = layer(8, tt, ag);
  CHECK(a4 - a2 == doctest::Approx(2 * local_kv));
  CHECK(a8 - a4 == doctest::Approx(4 * local_kv));
  const auto mg = models::Framework::MEGATRON;
  const auto p2p = models::CpCommType::P2P;
  CHECK(layer(8, mg, p2p) == doctest::Approx(layer(2, mg, p2p)));
}

TEST_CASE("strategies::cp_comm_type: a2a needs whole heads; a2a+p2p is refused") {
  const auto model = models::model_preset("llama3-8b");  // 32 heads
  models::TrainingPlan p = cp_plan(8, models::CpCommType::A2A);
  p.tp = 8;  // 32 heads over 8 x 8 ranks
  CHECK_THROWS_WITH_AS(validate_plan(model, p, std::nullopt),
                       doctest::Contains("a2a needs the 32 heads"), PlanError);
  p.tp = 1;
  p.cp_comm_type = models::CpCommType::A2A_P2P;
  CHECK_THROWS_WITH_AS(validate_plan(model, p, std::nullopt), doctest::Contains("a2a+p2p"),
                       PlanError);
}

TEST_CASE("strategies::cp_comm_type: the p2p ring overlaps its attention; all-gather does not") {
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = h100(1);
  const auto cpi = static_cast<size_t>(models::index(models::Dim::CP));
  SimulateOptions o;
  models::TrainingPlan p = cp_plan(8, models::CpCommType::ALLGATHER);
  p.seq = 65536;
  p.framework = models::Framework::MEGATRON;
  const auto gathered = simulate_step(model, p, cluster, o);
  CHECK(gathered.exposed_comm_s[cpi] == doctest::Approx(gathered.comm_time_s[cpi]));
  p.cp_comm_type = models::CpCommType::P2P;
  const auto ring = simulate_step(model, p, cluster, o);
  CHECK(ring.comm_time_s[cpi] == doctest::Approx(gathered.comm_time_s[cpi]).epsilon(0.01));
  CHECK(ring.exposed_comm_s[cpi] < 0.5 * ring.comm_time_s[cpi]);
  FastEstimator fast(model, cluster, o);
  CHECK(fast.step_time_s(p) == doctest::Approx(ring.step_time_s).epsilon(0.02));
}
