// One simulated training step: bubble fractions through the real engine, memory by schedule,
// symmetric vs full mode. The Chrome trace written by `loom simulate --trace` is tested in
// tests/cli/test_trace.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <vector>

#include "models/model_loader.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/step_simulator.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

// A deep MLP of identical layers (8192 x 8192, 32 layers) with an 8-class head, so that
// every pipeline stage carries the same work (the textbook setting of the bubble formulas).
models::ModelSpec identical_mlp() {
  return models::parse_model_json(
      R"({"kind": "mlp", "name": "mlp-8k-x32", "width": 8192, "depth": 32, "classes": 8})", "test");
}

models::TrainingPlan plan_for(models::Schedule schedule, int pp, int dp, int vpp, int m,
                              std::int64_t mbs = 1024) {
  models::TrainingPlan p;
  p.pp = pp;
  p.dp = dp;
  p.vpp = vpp;
  p.mbs = mbs;
  p.gbs = mbs * dp * m;
  p.schedule = schedule;
  return p;
}

topo::Cluster dgx_a100(int nodes) {
  return topo::load_cluster(topo::ClusterRequest{"dgx-a100", nodes, std::nullopt});
}

}  // namespace

TEST_CASE("strategies::StepSimulator: ideal-network bubble matches the schedule formulas") {
  // Narayanan et al. 2021, Sec. 2.2: GPipe and 1F1B bubble (p-1)/(m+p-1); interleaved
  // (p-1)/(v·m+p-1). Qi et al. 2023: ZB-H1 below 1F1B.
  const auto model = identical_mlp();
  const auto cluster = dgx_a100(1);
  SimulateOptions o;
  o.network = sim::NetworkMode::IDEAL;
  const int p = 8, m = 16;
  const double textbook = double(p - 1) / (m + p - 1);
  for (auto kind : {models::Schedule::GPIPE, models::Schedule::ONE_F_ONE_B}) {
    auto r = simulate_step(model, plan_for(kind, p, 1, 1, m), cluster, o);
    CHECK(r.bubble_fraction == doctest::Approx(textbook).epsilon(0.01));
  }
  auto il = simulate_step(model, plan_for(models::Schedule::INTERLEAVED, p, 1, 2, m), cluster, o);
  CHECK(il.bubble_fraction == doctest::Approx(double(p - 1) / (2 * m + p - 1)).epsilon(0.01));
  auto zb = simulate_step(model, plan_for(models::Schedule::ZERO_BUBBLE, p, 1, 1, m), cluster, o);
  auto ofob = simulate_step(model, plan_for(models::Schedule::ONE_F_ONE_B, p, 1, 1, m), cluster, o);
  CHECK(zb.bubble_fraction < ofob.bubble_fraction);
  CHECK(zb.step_time_s < ofob.step_time_s);
}

TEST_CASE("strategies::StepSimulator: GPipe holds more activations than 1F1B") {
  // GPipe keeps all m micro-batches in flight; 1F1B at most p - stage (Narayanan 2021).
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(1);
  SimulateOptions o;
  o.network = sim::NetworkMode::IDEAL;
  models::TrainingPlan g;
  g.pp = 4;
  g.dp = 2;
  g.mbs = 1;
  g.gbs = 32;
  g.schedule = models::Schedule::GPIPE;
  auto ofob_plan = g;
  ofob_plan.schedule = models::Schedule::ONE_F_ONE_B;
  auto rg = simulate_step(model, g, cluster, o);
  auto r1 = simulate_step(model, ofob_plan, cluster, o);
  for (size_t s = 0; s < rg.memory.stages.size(); ++s)
    CHECK(rg.memory.stages[s].activations_bytes > r1.memory.stages[s].activations_bytes);
  CHECK(rg.memory.peak_bytes > r1.memory.peak_bytes);
}

TEST_CASE("strategies::StepSimulator: symmetric and full modes agree on a homogeneous cluster") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  models::TrainingPlan base;
  base.tp = 2;
  base.pp = 2;
  base.dp = 4;
  base.mbs = 1;
  base.gbs = 32;
  base.seq = 1024;
  // DDP without and with overlap, ZeRO-1 with both overlaps, ZeRO-3.
  std::vector<models::TrainingPlan> plans(4, base);
  plans[1].overlap_grad_reduce = true;
  plans[2].zero = 1;
  plans[2].overlap_grad_reduce = plans[2].overlap_param_gather = true;
  plans[3].zero = 3;
  for (const auto& p : plans) {
    for (auto mode : {sim::NetworkMode::ANALYTICAL, sim::NetworkMode::FLOW}) {
      SimulateOptions sym, full;
      sym.network = full.network = mode;
      full.full = true;
      auto a = simulate_step(model, p, cluster, sym);
      auto b = simulate_step(model, p, cluster, full);
      CHECK(b.simulated_gpus == 16);
      CHECK(a.simulated_gpus == 2);
      CHECK(a.step_time_s == doctest::Approx(b.step_time_s).epsilon(0.01));
      CHECK(a.dp_bytes_per_gpu == doctest::Approx(b.dp_bytes_per_gpu));
    }
  }
}

TEST_CASE("strategies::StepSimulator: a TP group leaving its NVLink domain is slower") {
  const auto model = models::load_model("gpt-7.5b");
  const auto cluster = dgx_a100(2);
  models::TrainingPlan in, out;
  in.tp = 8;
  in.dp = 2;
  in.seq = 1024;
  in.gbs = 8;
  out = in;
  out.tp = 16;
  out.dp = 1;
  auto a = simulate_step(model, in, cluster, {});
  auto b = simulate_step(model, out, cluster, {});
  // TP16 halves each GPU's compute but its all-reduces cross InfiniBand.
  // (2.5x: NCCL's tuner runs Tree/LL128 across the 2 nodes at these sizes, sim/nccl_model.hpp.)
  CHECK(b.comm_time_s[models::index(models::Dim::TP)] >
        2.5 * a.comm_time_s[models::index(models::Dim::TP)]);
}

TEST_CASE("strategies::StepSimulator: report fields are consistent") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(1);
  models::TrainingPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.gbs = 16;
  p.recompute = models::Recompute::FULL;
  auto r = simulate_step(model, p, cluster, {});
  CHECK(r.step_time_s > 0);
  // Full recompute: hardware FLOPs = 4/3 of model FLOPs (Narayanan Eq. 3 vs 72·...).
  CHECK(r.hardware_tflops_per_gpu / r.model_tflops_per_gpu ==
        doctest::Approx(4.0 / 3).epsilon(0.02));
  CHECK(r.mfu < r.hfu);
  CHECK(r.hfu < 1.0);
  CHECK(r.tokens_per_s == doctest::Approx(16.0 * 2048 / r.step_time_s));
  CHECK(r.bubble_fraction > 0);
  CHECK(r.comm_time_s[models::index(models::Dim::TP)] > 0);  // tp
  CHECK(r.comm_time_s[models::index(models::Dim::PP)] > 0);
  CHECK(r.comm_time_s[models::index(models::Dim::DP)] > 0);
}

namespace {

// gpt-1.7b data-parallel over two DGX A100 nodes (the DP ring crosses InfiniBand).
models::TrainingPlan dp16_plan(int zero, std::int64_t gbs) {
  models::TrainingPlan p;
  p.dp = 16;
  p.mbs = 1;
  p.gbs = gbs;
  p.seq = 1024;
  p.zero = zero;
  p.grad_dtype = models::GradDtype::BF16;  // 16-bit gradients, as the ZeRO paper counts
  return p;
}

// Turning a DP overlap on (`off` -> `on`) keeps the DP time and moves 2Ψ elements of
// `bytes_per_element` per GPU (ZeRO paper, Rajbhandari et al. 2020, Sec. 7; Ψ = the parameters
// this GPU holds), but hides some of it: exposed DP below `exposed_share` of `off`'s, a shorter
// step.
void check_overlap_hides_dp(const StepReport& off, const StepReport& on, double exposed_share,
                            double bytes_per_element) {
  const int dp = models::index(models::Dim::DP);
  CHECK(on.comm_time_s[dp] == doctest::Approx(off.comm_time_s[dp]));
  CHECK(on.exposed_comm_s[dp] >= 0);
  CHECK(on.exposed_comm_s[dp] < exposed_share * off.exposed_comm_s[dp]);
  CHECK(on.step_time_s < off.step_time_s);
  const double psi = on.memory.stages[0].parameters;
  CHECK(on.dp_bytes_per_gpu == doctest::Approx(2 * psi * bytes_per_element).epsilon(1e-9));
}

}  // namespace

TEST_CASE(
    "strategies::StepSimulator: DDP buckets overlap the backward with --overlap-grad-reduce") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  auto plan = dp16_plan(0, 32);
  plan.grad_dtype = models::GradDtype::FP32;
  auto off = simulate_step(model, plan, cluster, {});
  plan.overlap_grad_reduce = true;
  auto on = simulate_step(model, plan, cluster, {});
  const int dp = models::index(models::Dim::DP);
  // Same buckets, same bytes: only their timing moves.
  CHECK(on.dp_collectives == off.dp_collectives);
  // Without overlap every bucket runs after the backward: all of it is exposed.
  CHECK(off.exposed_comm_s[dp] == doctest::Approx(off.comm_time_s[dp]).epsilon(0.01));
  // All-reduce volume per rank: 2·Ψ fp32 gradients (ZeRO paper Sec. 7.1: reduce-scatter Ψ +
  // all-gather Ψ).
  check_overlap_hides_dp(off, on, 0.6, 4);
}

TEST_CASE("strategies::StepSimulator: the DP bucket size sets the number of DP collectives") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  auto plan = dp16_plan(0, 16);
  plan.overlap_grad_reduce = true;
  const double psi_bytes = 2.0 * strategies::estimate_memory(model, plan).stages[0].parameters;
  std::int64_t previous = 0;
  for (double bucket : {1e12, 400e6, 160e6, 40e6}) {
    plan.dp_bucket_bytes = bucket;
    auto r = simulate_step(model, plan, cluster, {});
    // Megatron's buckets: gradients in reverse layer order, ceil(gradient bytes / bucket).
    CHECK(r.dp_collectives == static_cast<std::int64_t>(std::ceil(psi_bytes / bucket)));
    CHECK(r.dp_collectives > previous);
    CHECK(r.dp_bytes_per_gpu == doctest::Approx(2 * psi_bytes));
    previous = r.dp_collectives;
  }
}

TEST_CASE("strategies::StepSimulator: ZeRO-1 parameter all-gather overlaps the next forward") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  auto plan = dp16_plan(1, 32);
  plan.overlap_grad_reduce = true;
  auto off = simulate_step(model, plan, cluster, {});
  plan.overlap_param_gather = true;
  auto on = simulate_step(model, plan, cluster, {});
  // Reduce-scatter Ψ 16-bit gradients + all-gather Ψ parameters (ZeRO paper Sec. 7.2.1: 2Ψ).
  check_overlap_hides_dp(off, on, 1.0, 2);
}

TEST_CASE("strategies::StepSimulator: ZeRO-3 moves 1.5x the DP bytes of ZeRO-1/2 and is slower") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  const int dp = models::index(models::Dim::DP);
  // One micro-batch: ZeRO-3 gathers parameters for forward and backward and reduce-scatters
  // gradients, 3Ψ, against 2Ψ for ZeRO-1/2 (ZeRO paper Sec. 7.2.2: 1.5x). DeepSpeed's
  // ZeRO-3 keeps gathered the units whose backward comes within stage3_max_reuse_distance
  // (1e9 elements) of their forward (here the head and the last blocks of 1.7B: the later
  // units' 2 x parameters under 1e9) and never gathers norms and biases (persisted): a little
  // under 1.5x. FSDP2 keeps its root and last block.
  auto z1 = simulate_step(model, dp16_plan(1, 16), cluster, {});
  auto z2 = simulate_step(model, dp16_plan(2, 16), cluster, {});
  auto z3_plan = dp16_plan(3, 16);
  z3_plan.fsdp_impl = models::FsdpImpl::DEEPSPEED;
  auto z3 = simulate_step(model, z3_plan, cluster, {});
  CHECK(z2.dp_bytes_per_gpu == doctest::Approx(z1.dp_bytes_per_gpu));
  CHECK(z3.dp_bytes_per_gpu < 1.5 * z1.dp_bytes_per_gpu);
  CHECK(z3.dp_bytes_per_gpu > 1.3 * z1.dp_bytes_per_gpu);
  // FSDP2 hides most of it behind compute (prefetch), but not all.
  auto fsdp2 = simulate_step(model, dp16_plan(3, 16), cluster, {});
  CHECK(fsdp2.exposed_comm_s[dp] > 0);
  CHECK(fsdp2.exposed_comm_s[dp] < 0.5 * fsdp2.comm_time_s[dp]);
  // With gradient accumulation FSDP re-gathers every micro-batch (2m + ... gathers): on the
  // same plan, with ZeRO-1's overlaps on, ZeRO-3 is not faster.
  auto p1 = dp16_plan(1, 64);
  p1.overlap_grad_reduce = p1.overlap_param_gather = true;
  auto a = simulate_step(model, p1, cluster, {});
  auto b = simulate_step(model, dp16_plan(3, 64), cluster, {});
  CHECK(b.dp_bytes_per_gpu > 4 * a.dp_bytes_per_gpu);
  CHECK(b.step_time_s >= a.step_time_s);
}

TEST_CASE("strategies::StepSimulator: ZeRO-3 prefetch hides parameter gathers") {
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = dgx_a100(2);
  SimulateOptions no_prefetch;
  no_prefetch.fsdp_prefetch = false;
  auto with = simulate_step(model, dp16_plan(3, 32), cluster, {});
  auto without = simulate_step(model, dp16_plan(3, 32), cluster, no_prefetch);
  const int dp = models::index(models::Dim::DP);
  CHECK(with.dp_bytes_per_gpu == doctest::Approx(without.dp_bytes_per_gpu));
  CHECK(with.step_time_s < without.step_time_s);
  CHECK(with.exposed_comm_s[dp] < without.exposed_comm_s[dp]);
}

TEST_CASE("strategies::StepSimulator: progress rises through lowering and the engine to 1") {
  std::vector<double> reports;
  SimulateOptions o;
  o.full = true;
  o.progress = [&reports](double done) { reports.push_back(done); };
  simulate_step(identical_mlp(), plan_for(models::Schedule::ONE_F_ONE_B, 4, 2, 1, 8), dgx_a100(1),
                o);
  // Passes and data-parallel lowering report per stage (4 each), pipeline transfers per
  // simulated replica (dp 2 in full mode), then the engine's final report.
  REQUIRE(reports.size() == 4 + 2 + 4 + 1);
  for (size_t i = 1; i < reports.size(); ++i) CHECK(reports[i] >= reports[i - 1]);
  CHECK(reports.front() > 0);
  CHECK(reports.back() == 1.0);
}

TEST_CASE("strategies::StepSimulator: the rank order moves the simulated ranks") {
  // pp fastest: the two pipeline stages' representatives are ranks 0 and 1, on one node.
  SimulateOptions o;
  o.keep_timeline = true;
  o.order = "pp-tp-cp-ep-dp";
  const StepReport r = simulate_step(
      identical_mlp(), plan_for(models::Schedule::ONE_F_ONE_B, 2, 4, 1, 4), dgx_a100(1), o);
  std::set<int> ranks;
  for (const auto& s : r.timeline) ranks.insert(s.rank);
  CHECK(ranks == std::set<int>{0, 1});
  o.order = "tp-cp-ep-dp-pp";  // Megatron's default: stage 1 starts at rank tp x dp = 4
  const StepReport d = simulate_step(
      identical_mlp(), plan_for(models::Schedule::ONE_F_ONE_B, 2, 4, 1, 4), dgx_a100(1), o);
  ranks.clear();
  for (const auto& s : d.timeline) ranks.insert(s.rank);
  CHECK(ranks == std::set<int>{0, 4});
}

// Megatron's pipeline-split accounting can leave a model chunk with the embedding or the head
// alone (no transformer layer): it is simulated as such, not refused.
TEST_CASE("strategies::StepSimulator: a model chunk holding only the embedding or the head") {
  const models::ModelSpec m = models::model_preset("llama3-8b");
  const topo::Cluster c = dgx_a100(1);
  models::TrainingPlan p;
  p.pp = 4;
  p.dp = 2;
  p.mbs = 1;
  p.seq = 2048;
  p.gbs = 16;
  p.pipeline_split = {0, 16, 16, 0};
  const models::MemoryReport mem = strategies::estimate_memory(m, p);
  CHECK(mem.stages[0].layers.empty());
  CHECK(mem.stages[3].layers.empty());
  // The first rank holds the embedding table alone: vocab x hidden.
  CHECK(mem.stages[0].parameters == doctest::Approx(128256.0 * 4096));
  models::TrainingPlan even_split = p;
  even_split.pipeline_split = {8, 8, 8, 8};
  const StepReport even = simulate_step(m, even_split, c);
  const StepReport r = simulate_step(m, p, c);
  // Two ranks carry all 32 layers instead of four carrying 8: slower, and finite.
  CHECK(std::isfinite(r.step_time_s));
  CHECK(r.step_time_s > even.step_time_s);
}

// A chunk with nothing in it (a 0 of --pipeline-split that is neither the first chunk, which
// holds the embedding, nor the last, which holds the head) has no layers to split its passes
// into: with the DP overlaps, which split a chunk's first forward and final backward by
// layer, its passes were left without tasks and the step failed on task id -1 (arXiv
// 2603.07685's DeepSeek-V3 layout 'Et*3|(tt|)*29m|L' gives such a chunk).
TEST_CASE("strategies::StepSimulator: an empty model chunk under the DP overlaps") {
  const models::ModelSpec m = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.pp = 4;
  p.vpp = 2;
  p.schedule = models::Schedule::INTERLEAVED;
  p.dp = 4;
  p.mbs = 1;
  p.seq = 2048;
  p.gbs = 16;
  p.zero = 1;
  p.overlap_grad_reduce = true;
  p.overlap_param_gather = true;
  p.pipeline_split = {5, 5, 5, 5, 4, 4, 0, 4};
  for (int zero : {1, 3}) {
    CAPTURE(zero);
    p.zero = zero;
    const StepReport r = simulate_step(m, p, dgx_a100(2));
    CHECK(std::isfinite(r.step_time_s));
    CHECK(r.step_time_s > 0);
  }
}
