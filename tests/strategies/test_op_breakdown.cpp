// The op breakdown of `loom simulate --ops` (strategies/op_breakdown): the distinct op lists of
// a plan, each timed as the step's pass costing times it, so that the lists, weighted by how
// many layers are alike, add up to the simulated stage's passes.
#include <doctest/doctest.h>

#include <vector>

#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/op_breakdown.hpp"
#include "strategies/step/pass_cost.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"
#include "topologies/kernel_model.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

doctest::Approx rel(double value) {
  return doctest::Approx(value).epsilon(1e-9).scale(0);
}

// DeepSeek-V3 (3 dense layers, then 58 MoE layers; HF config first_k_dense_replace 3) on two
// DGX H100 nodes, every GPU an expert rank, the flex dispatcher across both nodes.
models::TrainingPlan deepseek_plan() {
  models::TrainingPlan p;
  p.seq = 4096;
  p.dp = p.ep = 16;
  p.moe_dispatcher = models::MoeDispatcher::FLEX;
  return p;
}

}  // namespace

TEST_CASE(
    "strategies::op_breakdown: one list per distinct layer, adding up to the stage's passes") {
  const auto model = models::load_model("deepseek-v3");
  const auto plan = deepseek_plan();
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  const auto lists = op_breakdown(model, plan, cluster);
  REQUIRE(lists.size() == 4);
  for (const auto& l : lists) CHECK(l.gpu == "h100-sxm");
  CHECK(lists[0].what == "embedding");
  CHECK(lists[1].what == "layer 0 (dense)");
  CHECK(lists[1].count == 3);
  CHECK(lists[2].what == "layer 3 (moe)");
  CHECK(lists[2].count == 58);
  CHECK(lists[3].what == "head");
  // Each list's kernel seconds are its ops' sums; the pass as run is never shorter.
  for (const auto& l : lists) {
    CAPTURE(l.what);
    double fwd = 0, bwd = 0;
    for (const auto& o : l.ops) {
      fwd += o.fwd_s;
      bwd += o.bwd_input_s + o.bwd_weight_s;
    }
    CHECK(l.fwd_kernel_s == rel(fwd));
    CHECK(l.bwd_kernel_s == rel(bwd));
    CHECK(l.pass.fwd_s >= l.fwd_kernel_s);
  }
  // The rate's FLOPs: a matmul's as the model counts them; causal fused attention's, the half
  // of the square the kernel computes (attention_causal_fraction 0.5).
  const auto layer_ops = models::layer_ops(model, plan, 0);
  for (const auto& o : lists[1].ops)
    for (const auto& m : layer_ops)
      if (m.name == o.name) {
        CAPTURE(o.name);
        CHECK(o.fwd_flops == (m.causal ? 0.5 * m.fwd_flops : m.fwd_flops));
        CHECK(o.fwd_bytes == m.input_bytes + m.output_bytes + m.weight_bytes);
      }
  // The MoE layer's exchanges: dispatch and combine, each a flex token exchange.
  int exchanges = 0;
  for (const auto& o : lists[2].ops) exchanges += o.comm == models::CommKind::EP_TOKEN_EXCHANGE;
  CHECK(exchanges == 2);
  // Weighted by the layers alike, the lists are the one stage's passes as the step costs them
  // (the x86 host of DGX H100: 13.48 us per launch; both nodes in the expert group).
  const topo::DatasheetKernelModel kernels(cluster.gpu, {});
  const double host_s = pass_host_launch_s(plan, -1, cluster.gpu);
  const StageWork work = cost_stages(model, plan, kernels, host_s, 2);
  double fwd = 0, bwd = 0;
  for (const auto& l : lists) {
    fwd += l.count * l.pass.fwd_s;
    bwd += l.count * (l.pass.bwd_input_s + l.pass.bwd_weight_s);
  }
  REQUIRE(work.chunk_cost.size() == 1);
  CHECK(fwd == rel(work.chunk_cost[0].fwd_s));
  CHECK(bwd == rel(work.chunk_cost[0].bwd_input_s + work.chunk_cost[0].bwd_weight_s));
}

TEST_CASE("strategies::op_breakdown: graphed ops launch nothing of their own; a slow host bounds") {
  const auto model = models::load_model("deepseek-v3");
  auto plan = deepseek_plan();
  plan.cuda_graphs = true;  // whole layers; an MoE layer's routed part stays eager
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  SimulateOptions options;
  options.host_launch_s = 1e-3;  // a host far slower than the GPU
  const auto lists = op_breakdown(model, plan, cluster, options);
  REQUIRE(lists.size() == 4);
  for (const auto& o : lists[1].ops) {
    CAPTURE(o.name);
    CHECK(o.graphed);
    CHECK(o.fwd_launches == 0);
  }
  // The dense layer is one graph: its pass is its kernels, whatever the host.
  CHECK(lists[1].pass.fwd_s == rel(lists[1].fwd_kernel_s));
  bool eager_expert = false;
  for (const auto& o : lists[2].ops)
    if (o.name == "expert_up") eager_expert = !o.graphed && o.fwd_launches > 0;
  CHECK(eager_expert);
  CHECK(lists[1].whole_graph);
  CHECK_FALSE(lists[2].whole_graph);
  // The MoE layer launches its graph and its eager ops one by one at 1 ms each: host-bound.
  CHECK(lists[2].pass.fwd_s > lists[2].fwd_kernel_s);
  CHECK(lists[2].pass.fwd_s > 20 * 1e-3);
}

TEST_CASE(
    "strategies::op_breakdown: a mixed cluster gets each GPU type's lists, each its own speed") {
  // examples/clusters/h100_a100_mixed.json: one DGX H100 node and one DGX A100 node.
  const auto model = models::load_model("llama2-7b");
  models::TrainingPlan plan;
  plan.seq = 4096;
  plan.dp = 16;
  const auto cluster = topo::load_cluster(
      topo::ClusterRequest{loom::testing::source_path("examples/clusters/h100_a100_mixed.json"),
                           std::nullopt, std::nullopt});
  REQUIRE(cluster.num_gpu_types() == 2);
  const auto lists = op_breakdown(model, plan, cluster);
  REQUIRE(lists.size() == 6);  // embedding, layer, head on each type
  CHECK(lists[1].gpu == cluster.gpu_type(0).name);
  CHECK(lists[4].gpu == cluster.gpu_type(1).name);
  CHECK(lists[1].what == lists[4].what);
  // The same layer on the A100 (312 TFLOP/s bf16, 2.0 TB/s) is slower than on the H100
  // (989 TFLOP/s, 3.35 TB/s; NVIDIA datasheets).
  CHECK(lists[4].fwd_kernel_s > 2 * lists[1].fwd_kernel_s);
}
