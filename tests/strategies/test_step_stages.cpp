// simulate_step end to end, for the plan features that only CLI runs touched before:
// context, expert and sequence parallelism, FP8 and selective/full recompute each move the
// step time in the expected direction, by an amount bounded by a figure worked out
// independently (datasheet rates, collective volumes); and a plan that does not fit in GPU
// memory still simulates. Cluster: one DGX H100 (8 H100 SXM, NVLink4 450 GB/s per direction
// per GPU through NVSwitch: DGX H100 user guide / H100 datasheet).
#include <doctest/doctest.h>

#include <vector>

#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "strategies/step/pass_cost.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"
#include "topologies/gpu_catalog.hpp"

using namespace loom;
using namespace loom::strategies;
using models::Dim;

namespace {

// doctest::Approx adds 1 to its scale, so on quantities far below one (seconds of a kernel)
// it compares absolutely; rel() compares relatively (default: to 1e-6).
doctest::Approx rel(double value, double epsilon = 1e-6) {
  return doctest::Approx(value).epsilon(epsilon).scale(0);
}

constexpr double NVLINK4_BPS = 450e9;  // per GPU per direction (H100 SXM datasheet: 900 GB/s)

const topo::Cluster& dgx_h100() {
  static const topo::Cluster c =
      topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  return c;
}

// gpt-1.7b (Narayanan 2021 Table 1: 24 layers, h 2304, 24 heads) data-parallel on 8 GPUs,
// two micro-batches of one 2048-token sequence.
models::TrainingPlan gpt_plan() {
  models::TrainingPlan p;
  p.dp = 8;
  p.mbs = 1;
  p.gbs = 16;
  p.seq = 2048;
  return p;
}

double comm(const StepReport& r, Dim d) {
  return r.comm_time_s[models::index(d)];
}

}  // namespace

TEST_CASE("strategies::StepStages: selective recompute adds the attention-core forward") {
  // Korthikanti et al. 2022: selective recompute re-runs QKᵀ, softmax and attention x V
  // before each layer's backward. gpt-1.7b with flash attention on H100: scores and
  // attention x V each 2 x 24 x 2048² x 96 FLOPs, half computed under the causal mask, at
  // 518/989 x 989.4 TFLOP/s (H100 datasheet; Hopper cuDNN attention fraction,
  // docs/defaults.md) plus 4 us: 22.648 us each at the boost clock and the reference shape;
  // at this shape (causal 2048, head dim 96: attention_shape_factor 0.817017,
  // kernel_model.cpp) and the sustained load clock (0.888052 of boost: the H200 SXM's MSMF /
  // MAMF, docs/defaults.md) 18.648 / 0.817017 / 0.888052 + 4 = 29.702 us each, x 2 x 24
  // layers x 2 micro-batches = 2.8514 ms.
  const auto model = models::load_model("gpt-1.7b");
  auto plan = gpt_plan();
  const StepReport none = simulate_step(model, plan, dgx_h100());
  plan.recompute = models::Recompute::SELECTIVE;
  const StepReport sel = simulate_step(model, plan, dgx_h100());
  const double expected = 2 * 24 * 2 * (18.6482e-6 / 0.817017 / 0.888052 + 4e-6);
  CHECK(sel.compute_time_s - none.compute_time_s == rel(expected, 1e-3));
  CHECK(sel.step_time_s - none.step_time_s == rel(expected, 0.02));
  // Model FLOPs do not change; hardware FLOPs grow by the recomputed attention matmuls.
  CHECK(sel.hfu > sel.mfu);
}

TEST_CASE("strategies::StepStages: full recompute adds about one forward per layer") {
  // Chen et al. 2016; Narayanan et al. 2021 Eq. 3: the forward is a third of forward +
  // backward FLOPs, so recomputing it adds about a third of the compute time. Megatron's
  // full recompute replays the transformer layers only (not the embedding or LM head), and
  // a layer's backward takes at least twice its forward (GEMMs exactly 2x, fused attention
  // 2x FLOPs at 0.8 of the rate, memory-bound ops 2x bytes), so at most a third.
  const auto model = models::load_model("gpt-1.7b");
  auto plan = gpt_plan();
  const StepReport none = simulate_step(model, plan, dgx_h100());
  plan.recompute = models::Recompute::FULL;
  const StepReport full = simulate_step(model, plan, dgx_h100());
  const double added = full.compute_time_s - none.compute_time_s;
  const double passes = none.compute_time_s - none.optimizer_time_s;
  CHECK(added > 0.25 * passes);
  CHECK(added < (1.0 / 3 + 0.005) * passes);
  CHECK(full.step_time_s - none.step_time_s == rel(added, 0.02));
}

TEST_CASE("strategies::StepStages: fp8 speeds GEMMs by at most the peak ratio, not the rest") {
  // H100 SXM datasheet: 1,978.9 TFLOP/s fp8 vs 989.4 bf16 (2.0x). Pass compute (C, less the
  // optimizer) = matmul work G + per-kernel overheads O + memory-bound ops M + the rest H.
  // fp8 at most halves G, so C8 - C16/2 = O/2 + M/2 + (H8 - H16/2) >= (O + M)/2. Were the
  // memory-bound ops sped up too, C8 - C16/2 would fall to about O/2.
  const auto model = models::load_model("gpt-1.7b");
  auto plan = gpt_plan();
  const StepReport bf16 = simulate_step(model, plan, dgx_h100());
  plan.precision = models::Precision::FP8;
  const StepReport fp8 = simulate_step(model, plan, dgx_h100());
  CHECK(fp8.peak_flops == rel(1978.9e12));
  CHECK(bf16.peak_flops == rel(989.4e12));
  CHECK(fp8.step_time_s < bf16.step_time_s);
  const double c16 = bf16.compute_time_s - bf16.optimizer_time_s;
  const double c8 = fp8.compute_time_s - fp8.optimizer_time_s;
  // Only the linears run FP8 (at 0.566 of their bf16 time plus casts); attention, the LM
  // head and the memory-bound ops keep their bf16 time.
  CHECK(c8 < 0.9 * c16);
  CHECK(c8 > 0.5 * c16);
  // M and O over 24 layers x 2 micro-batches: the memory-bound ops' forward and backward
  // (timed by the kernel model from their bytes), and 4 us for each of a layer's 16 matmul
  // kernels (4 GEMMs x forward, dgrad, wgrad; scores and attention x V x forward, backward).
  auto ops = models::layer_ops(model, plan, 0);
  std::erase_if(ops, [](const models::OpCost& op) { return op.is_matmul(); });
  const topo::DatasheetKernelModel h100(topo::find_gpu("h100-sxm"));
  const PassCost mem = cost_ops(ops, plan, h100);
  const double memory_bound = 2 * 24 * (mem.fwd_s + mem.bwd_input_s + mem.bwd_weight_s);
  const double overheads = 2 * 24 * 16 * 4e-6;
  CHECK(memory_bound > 0.05 * c16);
  CHECK(c8 - c16 / 2 >= (memory_bound + overheads) / 2);
}

TEST_CASE("strategies::StepStages: CP adds K/V all-gathers bounded by NVLink bandwidth") {
  // cp = 2 on gpt-1.7b: each layer all-gathers the sequence's K and V (2 bytes x 2048 x
  // 2 x 2304 = 18.87 MB) in forward and reduce-scatters their gradients in backward. On two
  // GPUs each receives half over NVLink4 at <= 450 GB/s: >= 20.97 us per collective. Same
  // global batch: 4 micro-batches of 1024 tokens per GPU instead of 2 of 2048, so
  // >= 2 x 24 layers x 4 x 20.97 us = 4.027 ms per step; NCCL at these sizes reaches well
  // over half of line rate, so under twice that.
  const auto model = models::load_model("gpt-1.7b");
  auto plan = gpt_plan();
  const StepReport cp1 = simulate_step(model, plan, dgx_h100());
  CHECK(comm(cp1, Dim::CP) == 0);
  plan.cp = 2;
  plan.dp = 4;
  // Transformer Engine's all-gather CP, which blocks (the p2p ring beside the attention:
  // tests/strategies/test_cp_comm.cpp).
  plan.cp_comm_type = models::CpCommType::ALLGATHER;
  const StepReport cp2 = simulate_step(model, plan, dgx_h100());
  const double floor = 2 * 24 * 4 * (2.0 * 2048 * 2 * 2304 / 2) / NVLINK4_BPS;
  CHECK(comm(cp2, Dim::CP) >= floor);
  CHECK(comm(cp2, Dim::CP) < 2 * floor);
  CHECK(comm(cp2, Dim::EP) == 0);
  // The K/V exchange blocks the compute stream: all of it is exposed and adds to the step
  // on top of the compute difference (smaller GEMMs, more kernels). Gradients are reduced
  // over the same 8 ranks (Megatron-core reduces over dp x cp), so DP time is unchanged.
  CHECK(cp2.exposed_comm_s[models::index(Dim::CP)] == rel(comm(cp2, Dim::CP)));
  CHECK(comm(cp2, Dim::DP) == rel(comm(cp1, Dim::DP), 0.01));
  const double delta = cp2.step_time_s - cp1.step_time_s;
  CHECK(delta == rel(cp2.compute_time_s - cp1.compute_time_s + comm(cp2, Dim::CP), 0.02));
}

TEST_CASE("strategies::StepStages: EP all-to-alls on mixtral bounded by NVLink bandwidth") {
  // Mixtral 8x7B (Jiang et al. 2024), ep = 8 on one node: each of the 32 MoE layers runs two
  // all-to-alls of 2 bytes x 4096 tokens x top-2 x 4096 = 67.1 MB forward and two backward;
  // each GPU sends 7/8 of it over NVLink4 at <= 450 GB/s: >= 130.5 us each, 16.7 ms a step.
  const auto model = models::load_model("mixtral-8x7b");
  models::TrainingPlan plan;
  plan.dp = 8;
  plan.seq = 4096;
  plan.gbs = 8;
  const StepReport ep1 = simulate_step(model, plan, dgx_h100());
  CHECK(comm(ep1, Dim::EP) == 0);
  plan.ep = 8;
  const StepReport ep8 = simulate_step(model, plan, dgx_h100());
  const double floor = 4 * 32 * (7.0 / 8 * 2.0 * 4096 * 2 * 4096) / NVLINK4_BPS;
  CHECK(comm(ep8, Dim::EP) >= floor);
  CHECK(comm(ep8, Dim::EP) < 2 * floor);
  CHECK(comm(ep8, Dim::CP) == 0);
  CHECK(ep8.exposed_comm_s[models::index(Dim::EP)] == rel(comm(ep8, Dim::EP)));
  // EP moves experts, not work: with balanced routing each GPU runs the same expert FLOPs,
  // in one GEMM of 8192 tokens instead of 8 of 1024. Mid-size GEMMs run slower per FLOP
  // (Hopper's measured half-dimension, 125 elements in bf16), so ep 8 computes a little
  // faster, never slower, and by less than the experts' share of the step.
  const double c1 = ep1.compute_time_s - ep1.optimizer_time_s;
  const double c8 = ep8.compute_time_s - ep8.optimizer_time_s;
  CHECK(c8 < c1);
  CHECK(c8 > 0.85 * c1);
  // Each GPU keeps 1/8 of the experts: the optimizer steps over far fewer parameters.
  CHECK(ep8.optimizer_time_s < 0.25 * ep1.optimizer_time_s);
}

TEST_CASE("strategies::StepStages: SP turns TP all-reduces into AG + RS and shards norms") {
  // gpt-7.5b (Narayanan 2021 Table 1: 36 layers, h 4096), tp = 8 on one node, 2
  // micro-batches. With SP each layer runs 4 collectives forward and 4 backward (Korthikanti
  // 2022, Sec. 4.2.2) on the full activation S = 2 x 2048 x 4096 bytes; a ring all-gather
  // or reduce-scatter sends (7/8) S per GPU over NVLink4 at <= 450 GB/s, so TP time >=
  // 8 x 36 x 2 x 32.6 us = 18.8 ms; a plausibility band puts it under 3x that.
  const auto model = models::load_model("gpt-7.5b");
  models::TrainingPlan plan;
  plan.tp = 8;
  plan.seq = 2048;
  plan.gbs = 2;
  const StepReport off = simulate_step(model, plan, dgx_h100());
  plan.sp = true;
  const StepReport on = simulate_step(model, plan, dgx_h100());
  const double floor = 8 * 36 * 2 * (7.0 / 8 * 2.0 * 2048 * 4096) / NVLINK4_BPS;
  CHECK(comm(on, Dim::TP) >= floor);
  CHECK(comm(on, Dim::TP) < 3 * floor);
  CHECK(on.exposed_comm_s[models::index(Dim::TP)] == rel(comm(on, Dim::TP)));
  // SP runs the norms and dropouts on 1/8 of the tokens: less compute, by at most their
  // memory-bound time (the GEMMs are unchanged).
  auto ops = models::layer_ops(model, plan, 0);
  std::erase_if(ops, [](const models::OpCost& op) { return op.is_matmul(); });
  plan.sp = false;
  auto unsharded = models::layer_ops(model, plan, 0);
  std::erase_if(unsharded, [](const models::OpCost& op) { return op.is_matmul(); });
  const topo::DatasheetKernelModel h100(topo::find_gpu("h100-sxm"));
  const PassCost mem = cost_ops(unsharded, plan, h100);
  const double memory_bound = 2 * 36 * (mem.fwd_s + mem.bwd_input_s);
  const double saved = off.compute_time_s - on.compute_time_s;
  CHECK(saved > 0);
  CHECK(saved < memory_bound);
}

TEST_CASE("strategies::StepStages: a plan over GPU memory still simulates") {
  // llama3-8b (8.03e9 parameters) with plain DDP and Adam: 16 bytes per parameter (ZeRO
  // paper, Rajbhandari et al. 2020, Sec. 3.1: 2 + 2 + 12) = 128 GB > 80 GB of an H100 SXM.
  const auto model = models::load_model("llama3-8b");
  models::TrainingPlan plan;
  plan.dp = 8;
  plan.seq = 8192;
  const StepReport r = simulate_step(model, plan, dgx_h100());
  CHECK(r.step_time_s > 0);
  CHECK(r.memory.peak_bytes > 16 * 8.0e9);
  // StepReport carries the estimate; comparing it with the GPU's capacity (79.11 GiB, what an
  // H100 SXM's runtime reports) is the caller's (the CLI marks it over capacity).
  CHECK(r.memory.peak_bytes > dgx_h100().gpu.hbm_bytes);
  CHECK(r.memory.stages.size() == 1);
  CHECK(r.memory.stages[0].total_bytes == r.memory.peak_bytes);
}
