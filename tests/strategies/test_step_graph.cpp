// The step graph's communication physics: NCCL's SM share slows overlapped compute
// (tensor-parallel overlap: tests/strategies/test_tp_overlap.cpp).
#include <doctest/doctest.h>

#include "models/model_loader.hpp"
#include "strategies/step/step_graph.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

topo::Cluster h100(int nodes) {
  return topo::load_cluster(topo::ClusterRequest{"dgx-h100", nodes, std::nullopt});
}

models::TrainingPlan fsdp_plan() {
  models::TrainingPlan p;
  p.dp = 16;
  p.zero = 3;
  p.seq = 4096;
  p.mbs = 1;
  p.gbs = 32;
  return p;
}

}  // namespace

TEST_CASE("strategies::StepGraph: NCCL's SM share, by hand") {
  // H100 SXM: 132 SMs (Hopper whitepaper); 18 NVLinks -> 2 x 18 = 36 channels, capped at
  // MAXCHANNELS = 32 (NCCL src/include/device.h). One CTA (SM) per channel.
  const auto c = h100(1);
  CHECK(comm_sm_share(c.gpu) == doctest::Approx(32.0 / 132.0));
  CHECK(overlap_slowdown(c.gpu) == doctest::Approx(132.0 / 100.0));
}

TEST_CASE("strategies::StepGraph: overlap slowdown stays within the SM share NCCL takes") {
  const auto model = models::model_preset("llama3-8b");
  auto contended = h100(2);
  auto free = contended;
  free.gpu.sm_count = 1000000;  // NCCL's channels a negligible share: no contention
  const auto plan = fsdp_plan();
  SimulateOptions o;
  // Both time kernels with the real GPU (the kernel model's waves depend on the SM count).
  o.kernels = std::make_shared<topo::DatasheetKernelModel>(contended.gpu, o.efficiency);
  const auto slow = simulate_step(model, plan, contended, o);
  const auto fast = simulate_step(model, plan, free, o);
  const double share = comm_sm_share(contended.gpu);
  CHECK(slow.step_time_s > fast.step_time_s);
  // Only the compute that overlaps a collective stretches, by at most 1 / (1 - share).
  CHECK(slow.step_time_s <= fast.step_time_s / (1.0 - share) * (1 + 1e-9));
}

TEST_CASE("strategies::StepGraph: EP all-to-all overlap hides the all-to-alls behind compute") {
  // Megatron-core's combined 1F1B schedule (--overlap-moe-expert-parallel-comm) runs each
  // micro-batch's dispatch and combine beside another's compute: a pass then takes about
  // max(compute slowed by NCCL's SM share, its all-to-alls), never less than either.
  const auto model = models::model_preset("qwen3-30b-a3b");
  const auto cluster = h100(2);
  models::TrainingPlan plan;
  plan.dp = 16;
  plan.ep = 16;
  plan.seq = 4096;
  plan.mbs = 1;
  plan.gbs = 32;
  plan.precision = models::Precision::FP8;
  SimulateOptions o;
  const auto base = simulate_step(model, plan, cluster, o);
  plan.overlap_moe_expert_parallel_comm = true;
  const auto over = simulate_step(model, plan, cluster, o);
  const auto ep = static_cast<size_t>(models::index(models::Dim::EP));
  CHECK(base.exposed_comm_s[ep] == doctest::Approx(base.comm_time_s[ep]).scale(0));
  CHECK(over.comm_time_s[ep] == doctest::Approx(base.comm_time_s[ep]).epsilon(0.02));
  CHECK(over.step_time_s < base.step_time_s);
  CHECK(over.exposed_comm_s[ep] < over.comm_time_s[ep]);
  // Hiding cannot beat the longer of the two streams, nor stretch compute past NCCL's share.
  const double share = comm_sm_share(cluster.gpu);
  CHECK(over.step_time_s >= base.compute_time_s * (1 - 1e-9));
  CHECK(over.step_time_s >= over.comm_time_s[ep] * (1 - 1e-9));
  CHECK(over.compute_time_s <= base.compute_time_s / (1.0 - share) * (1 + 1e-9));
}

TEST_CASE("strategies::StepGraph: CPU offloading hides behind compute unless the link is slow") {
  // Each offloaded layer's saved tensors go to the host after its forward and come back
  // before its backward. Over a DGX H100's PCIe Gen5 path (~50 GB/s) a Llama-3-8B layer at
  // 8k tokens (about 2.7 GB) takes longer than the layer's forward: the step grows, by at
  // most the copies themselves. Offloading no layer changes nothing.
  const auto model = models::model_preset("llama3-8b");
  const auto cluster = h100(1);
  models::TrainingPlan plan;
  plan.dp = 8;
  plan.zero = 1;
  plan.seq = 8192;
  plan.mbs = 1;
  plan.gbs = 8;
  SimulateOptions o;
  const auto base = simulate_step(model, plan, cluster, o);
  plan.cpu_offloading_num_layers = 4;
  const auto off = simulate_step(model, plan, cluster, o);
  CHECK(off.step_time_s > base.step_time_s);
  const double bytes = models::stored_layer_activation_bytes(model, plan, 0);
  // Out and back, four layers, at no less than 1 GB/s: a loose upper bound on the cost.
  CHECK(off.step_time_s - base.step_time_s < 2 * 4 * bytes / 1e9);
  CHECK(off.memory.peak_bytes < base.memory.peak_bytes);
}

TEST_CASE("strategies::StepGraph: exposed time goes to the dimension the compute waited for") {
  // Mixtral-8x7B on two DGX H100 with tp 2 (SP) and ep 8: each MoE pass issues TP collectives
  // and EP all-to-alls. Overlapping only the all-to-alls leaves the TP collectives blocking,
  // all exposed and counted once; overlapping only TP leaves at least its 1/tp residual and
  // no more than its traffic exposed, the all-to-alls all exposed.
  const auto model = models::model_preset("mixtral-8x7b");
  const auto cluster = h100(2);
  models::TrainingPlan plan;
  plan.tp = 2;
  plan.sp = true;
  plan.ep = 8;
  plan.dp = 8;
  plan.seq = 4096;
  plan.mbs = 1;
  plan.gbs = 32;
  SimulateOptions o;
  const auto tp = static_cast<size_t>(models::index(models::Dim::TP));
  const auto ep = static_cast<size_t>(models::index(models::Dim::EP));
  plan.overlap_moe_expert_parallel_comm = true;
  const auto ep_over = simulate_step(model, plan, cluster, o);
  CHECK(ep_over.exposed_comm_s[tp] == doctest::Approx(ep_over.comm_time_s[tp]).scale(0));
  CHECK(ep_over.exposed_comm_s[ep] < ep_over.comm_time_s[ep]);
  plan.overlap_moe_expert_parallel_comm = false;
  plan.tp_comm_overlap = true;
  const auto tp_over = simulate_step(model, plan, cluster, o);
  CHECK(tp_over.exposed_comm_s[tp] <= tp_over.comm_time_s[tp] * (1 + 1e-9));
  CHECK(tp_over.exposed_comm_s[tp] >= tp_over.comm_time_s[tp] / 2 * 0.9);
  CHECK(tp_over.exposed_comm_s[ep] == doctest::Approx(tp_over.comm_time_s[ep]).scale(0));
}
