// The search's two tiers: the same answer for any thread count and any sharding, top-K
// ordering, the partial-result JSON, Spearman's rho, and the fast tier against the step
// simulator.
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

#include "models/model_loader.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/search/search.hpp"
#include "strategies/step/pass_cost.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"
#include "topologies/gpu_catalog.hpp"
#include "topologies/kernel_model.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

// The small GPT example on one DGX A100: a few thousand candidates, every dimension free but
// the batch (gbs 16) and the sequence (1024).
struct Case {
  models::ModelSpec model = models::load_model(source_path("examples/models/tiny-gpt.json"));
  topo::Cluster cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, std::nullopt});
  SearchSpace space{model, input(), 8};

  static PlanInput input() {
    PlanInput in;
    in.sources() = PlanSources::command_line();
    in.set("gbs", std::int64_t{16});
    in.set("seq", std::int64_t{1024});
    return in;
  }
};

SearchOptions options(int threads) {
  SearchOptions o;
  o.top = 5;
  o.exact = 12;
  o.sample = 8;
  o.threads = threads;
  return o;
}

}  // namespace

TEST_CASE("strategies::Search: the same answer for any thread count") {
  const Case c;
  const SearchResult one = run_search(c.model, c.space, c.cluster, options(1));
  const SearchResult three = run_search(c.model, c.space, c.cluster, options(3));
  CHECK(one.tally == three.tally);
  REQUIRE(one.ranked.size() == three.ranked.size());
  for (size_t i = 0; i < one.ranked.size(); ++i) {
    CHECK(one.ranked[i].id == three.ranked[i].id);
    CHECK(one.ranked[i].report.step_time_s == three.ranked[i].report.step_time_s);
    CHECK(one.ranked[i].fast_step_s == three.ranked[i].fast_step_s);
  }
  CHECK(one.sample_times == three.sample_times);
  CHECK(one.resimulated == three.resimulated);
  CHECK(one.winner_stable == three.winner_stable);
  CHECK(one.stable_margin == three.stable_margin);
  CHECK(one.tally.enumerated > 1000);
  CHECK(one.tally.invalid > 0);
}

TEST_CASE("strategies::Search: shards merge into the whole, through their JSON") {
  const Case c;
  const SearchTally whole = fast_tier(c.model, c.space, c.cluster, options(2));
  SearchTally merged;
  for (int k = 0; k < 3; ++k) {
    const SearchTally part = fast_tier(c.model, c.space, c.cluster, options(1), {k, 3});
    CHECK(part.enumerated < whole.enumerated);
    const std::string text = tally_to_json(part, c.space);
    const SearchTally back = tally_from_json(text, "part.json", c.space);
    CHECK(back == part);
    merged.merge(back);
  }
  CHECK(merged == whole);
}

TEST_CASE("strategies::Search: a partial result of another search does not merge") {
  const Case c;
  const SearchTally part = fast_tier(c.model, c.space, c.cluster, options(1), {0, 4});
  PlanInput other = Case::input();
  other.set("tp", std::int64_t{2});
  const SearchSpace pinned(c.model, other, 8);
  CHECK_THROWS_WITH_AS(tally_from_json(tally_to_json(part, c.space), "part.json", pinned),
                       doctest::Contains("part.json: a partial result of another search"),
                       ConfigError);
  CHECK_THROWS_AS(tally_from_json("{\"schema\": 1}", "bad.json", c.space), ConfigError);
  CHECK_THROWS_AS(fast_tier(c.model, c.space, c.cluster, options(1), {3, 3}), ValidationError);
}

TEST_CASE("strategies::Search: top-K ordering") {
  const Case c;
  const SearchResult r = run_search(c.model, c.space, c.cluster, options(2));
  // The fast tier's list is sorted by (estimate, id); the final ranking by (simulated, id).
  for (size_t i = 1; i < r.tally.best.size(); ++i) CHECK(r.tally.best[i - 1] < r.tally.best[i]);
  // The first 12, then on in batches of 8 (stable_window) until the winner is stable.
  CHECK(r.resimulated >= 12);
  CHECK(r.resimulated <= 96);
  CHECK((r.resimulated - 12) % 8 == 0);
  REQUIRE(r.ranked.size() == static_cast<size_t>(r.resimulated));
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    const auto& a = r.ranked[i - 1];
    const auto& b = r.ranked[i];
    CHECK(std::make_tuple(a.report.step_time_s, a.report.memory.peak_bytes, a.id) <
          std::make_tuple(b.report.step_time_s, b.report.memory.peak_bytes, b.id));
  }
  // Every re-simulated plan is one of the fast tier's best, named by its position there.
  for (const auto& s : r.ranked) {
    REQUIRE(s.fast_rank >= 1);
    REQUIRE(s.fast_rank <= r.resimulated);
    CHECK(r.tally.best[static_cast<size_t>(s.fast_rank - 1)].id == s.id);
    CHECK(s.report.memory.peak_bytes <= c.cluster.gpu.hbm_bytes);
  }
  CHECK(r.sample_times.size() == 8);
}

namespace {

// A kernel model the step simulator cannot run: every kernel throws a loom error.
class FailingKernels final : public topo::KernelTimeModel {
 public:
  double seconds(const topo::KernelOp&, topo::KernelPass, DType) const override {
    throw ModelError("no kernel times (a test's failing kernel model)");
  }
  double peak_flops(DType) const override { return 1e15; }
};

}  // namespace

TEST_CASE("strategies::Search: finishing with no plan the simulator can run is an error") {
  // A whole-space tally (as --merge and MPI rank 0 hold), finished with a step simulator that
  // fails on every candidate: an InternalError naming the failure, not an empty ranking.
  const Case c;
  SearchOptions o = options(1);
  o.sample = 0;
  const SearchTally tally = fast_tier(c.model, c.space, c.cluster, o);
  REQUIRE(tally.fitting > 0);
  o.simulate.kernels = std::make_shared<FailingKernels>();
  CHECK_THROWS_WITH_AS(finish_search(c.model, c.space, c.cluster, tally, o),
                       doctest::Contains("could not run any of the 96 best plans; the first "
                                         "error: no kernel times"),
                       InternalError);  // no winner, so on to the cap, 8 x 12
  o.simulate.kernels = nullptr;
  const SearchResult r = finish_search(c.model, c.space, c.cluster, tally, o);
  CHECK(r.ranked.size() == static_cast<size_t>(r.resimulated));
}

TEST_CASE("strategies::Search: the exact tier goes down a misleading fast ranking, to its cap") {
  // The fast tier's best 96, put in the reverse of their simulated order (the estimates left
  // in order): every batch the exact tier re-simulates holds a new winner, so it never settles
  // and goes down the ranking to its cap, where the true winner is.
  const Case c;
  SearchOptions o = options(2);
  o.sample = 0;
  o.exact = 96;  // a tally of the best 768; its first 96 re-simulated at once
  const SearchTally tally = fast_tier(c.model, c.space, c.cluster, o);
  REQUIRE(tally.best.size() > 96);
  const SearchResult truth = exact_tier(c.model, c.space, c.cluster, tally, o);
  REQUIRE(truth.ranked.size() == 96);
  SearchTally misleading = tally;
  for (size_t i = 0; i < 96; ++i) misleading.best[i].id = truth.ranked[95 - i].id;

  o.exact = 12;  // cap 8 x 12 = 96
  for (int threads : {1, 3}) {
    o.threads = threads;
    const SearchResult r = exact_tier(c.model, c.space, c.cluster, misleading, o);
    CHECK(r.resimulated == 96);
    CHECK_FALSE(r.winner_stable);
    CHECK(r.ranked.front().id == truth.ranked.front().id);
    CHECK(r.ranked.front().fast_rank == 96);
  }
  // A lower cap: it stops there, not stable, with a slower plan than the true winner.
  o.exact_cap = 20;
  REQUIRE(o.keep_count() == 20);
  const SearchResult capped = exact_tier(c.model, c.space, c.cluster, misleading, o);
  CHECK(capped.resimulated == 20);
  CHECK_FALSE(capped.winner_stable);
  CHECK(capped.ranked.front().id == truth.ranked[76].id);
  // The true ranking: the exact tier settles before its cap (the tally's own order).
  o.exact_cap = 0;
  const SearchResult settled = exact_tier(c.model, c.space, c.cluster, tally, o);
  CHECK(settled.winner_stable);
  CHECK(settled.resimulated < 96);
  CHECK(settled.ranked.front().report.step_time_s == truth.ranked.front().report.step_time_s);
}

TEST_CASE("strategies::Search: Spearman's rho") {
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == doctest::Approx(1.0));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == doctest::Approx(-1.0));
  // Ranks (1, 2, 3, 4) and (1, 3, 2, 4): 1 - 6 x 2 / (4 x 15) = 0.8.
  CHECK(spearman({1, 2, 3, 4}, {1, 3, 2, 4}) == doctest::Approx(0.8));
  // Ties take their average rank: (1, 2.5, 2.5, 4) against (1, 2, 3, 4): Pearson 0.9487.
  CHECK(spearman({1, 2, 2, 3}, {1, 2, 3, 4}) == doctest::Approx(0.948683).epsilon(1e-5));
  CHECK(std::isnan(spearman({1}, {2})));
  CHECK(std::isnan(spearman({1, 1}, {2, 3})));
}

TEST_CASE("strategies::FastEstimator: memory is the memory model's, time near the simulator's") {
  // GPT-3 175B on 1,024 A100: Narayanan et al.'s plan and a few around it (1F1B, ZeRO-1 with
  // both DP overlaps, TP overlap, zero-bubble, ZeRO-3). The fast tier composes the same costs
  // in closed form; it stays within 2% of the simulated step on these.
  const auto model = models::load_model("gpt3-175b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 128, std::nullopt});
  FastEstimator fast(model, cluster);
  struct Variant {
    int tp, pp, zero;
    models::Recompute recompute;
    bool sp, ogr, opg, tpo;
    models::Schedule schedule;
  };
  using models::Recompute;
  using models::Schedule;
  for (const Variant& v :
       {Variant{8, 8, 0, Recompute::FULL, false, false, false, false, Schedule::ONE_F_ONE_B},
        Variant{8, 8, 1, Recompute::SELECTIVE, true, true, true, true, Schedule::ONE_F_ONE_B},
        Variant{8, 16, 1, Recompute::SELECTIVE, true, true, false, false, Schedule::GPIPE},
        Variant{8, 8, 0, Recompute::FULL, true, false, false, true, Schedule::ZERO_BUBBLE},
        Variant{8, 4, 3, Recompute::FULL, true, false, false, false, Schedule::ONE_F_ONE_B}}) {
    models::TrainingPlan p;
    p.tp = v.tp;
    p.pp = v.pp;
    p.dp = 1024 / (v.tp * v.pp);
    p.gbs = 1536;
    p.precision = models::Precision::FP16;
    p.zero = v.zero;
    p.recompute = v.recompute;
    p.sp = v.sp;
    p.overlap_grad_reduce = v.ogr;
    p.overlap_param_gather = v.opg;
    p.tp_comm_overlap = v.tpo;
    p.schedule = v.schedule;
    CAPTURE(p.tp);
    CAPTURE(p.pp);
    CAPTURE(p.zero);
    const StepReport exact = simulate_step(model, p, cluster);
    CHECK(fast.peak_memory_bytes(p) == exact.memory.peak_bytes);
    CHECK(std::abs(fast.step_time_s(p) / exact.step_time_s - 1) < 0.02);
  }
}

namespace {

// A plan of 4096-token micro-batches of one sequence over pp x dp GPUs, experts over ep, ZeRO-1.
models::TrainingPlan layered_plan(int pp, int dp, int ep, std::int64_t gbs) {
  models::TrainingPlan p;
  p.pp = pp;
  p.dp = dp;
  p.ep = ep;
  p.zero = 1;
  p.seq = 4096;
  p.mbs = 1;
  p.gbs = gbs;
  return p;
}

}  // namespace

TEST_CASE("strategies::FastEstimator: sliding-window and full layers each cost their own") {
  // gpt-oss-120b alternates 128-token windowed and full attention layers: the simulator costs
  // each kind of layer once (layer 0 windowed, layer 1 full), the fast tier blends the two
  // half and half; a full layer's attention at 4096 tokens costs more than a windowed one's.
  const auto model = models::load_model("gpt-oss-120b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 8, std::nullopt});
  models::TrainingPlan p = layered_plan(4, 16, 8, 64);
  p.etp = 1;
  const topo::DatasheetKernelModel kernels(topo::find_gpu("h100-sxm"));
  const StageWork work = cost_stages(model, p, kernels);
  const PassCost& windowed = work.units[0][1].cost;  // L0 (after the embedding)
  const PassCost& full = work.units[0][2].cost;      // L1
  REQUIRE(work.units[0][1].layer == 0);
  REQUIRE(work.units[0][2].layer == 1);
  CHECK(full.fwd_s > windowed.fwd_s);
  CHECK(full.bwd_input_s > windowed.bwd_input_s);
  FastEstimator fast(model, cluster);
  const StepReport exact = simulate_step(model, p, cluster);
  CHECK(std::abs(fast.step_time_s(p) / exact.step_time_s - 1) < 0.03);
}

TEST_CASE("strategies::FastEstimator: a hybrid's chunks sum their own blocks") {
  // examples/models/small-hybrid.json, pattern MEM*EM-E, over pp 4: the stages hold ME, M*,
  // EM and -E. The fast tier sums each chunk block by block, so the stages' times are the
  // simulator's, not a model-wide blend of Mamba, attention and MLP layers (which put the
  // step 2.2 % off).
  const auto model = models::load_model("examples/models/small-hybrid.json");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  models::TrainingPlan p = layered_plan(4, 2, 2, 32);
  FastEstimator fast(model, cluster);
  const StepReport exact = simulate_step(model, p, cluster);
  CHECK(std::abs(fast.step_time_s(p) / exact.step_time_s - 1) < 0.002);
  // Under fp8 with the first layer and the last two kept in bf16 (the first and last stages'
  // own layers), likewise.
  p.precision = models::Precision::FP8;
  p.first_last_layers_bf16 = true;
  p.num_layers_at_end_in_bf16 = 2;
  const StepReport kept = simulate_step(model, p, cluster);
  CHECK(std::abs(fast.step_time_s(p) / kept.step_time_s - 1) < 0.002);
}

namespace {

// Qwen3-30B-A3B at ep 16 over two DGX H100 nodes, one micro-batch of 4096 tokens per GPU.
models::TrainingPlan qwen3_ep16_plan() {
  models::TrainingPlan p;
  p.dp = 16;
  p.ep = 16;
  p.etp = 1;
  p.seq = 4096;
  p.mbs = 1;
  p.gbs = 64;
  return p;
}

}  // namespace

TEST_CASE("strategies::FastEstimator: EP all-to-all overlap as the simulator lowers it") {
  // Qwen3-30B-A3B on 16 H100 with ep 16: the all-to-alls block the compute, or run beside it
  // (--overlap-moe-expert-parallel-comm); the fast tier's closed form follows both within 3%.
  const auto model = models::load_model("qwen3-30b-a3b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  FastEstimator fast(model, cluster);
  models::TrainingPlan p = qwen3_ep16_plan();
  p.precision = models::Precision::FP8;
  for (const bool overlap : {false, true}) {
    p.overlap_moe_expert_parallel_comm = overlap;
    CAPTURE(overlap);
    const StepReport exact = simulate_step(model, p, cluster);
    CHECK(std::abs(fast.step_time_s(p) / exact.step_time_s - 1) < 0.03);
  }
}

TEST_CASE("strategies::FastEstimator: the flex dispatcher's two-level exchange as simulated") {
  // The same layout with the flex dispatcher: rail and node all-to-alls per dispatch and
  // combine (flex_exchange_nodes = 2 in both tiers); the fast tier's closed form follows the
  // simulator within 3%, as it does for the all-to-all one.
  const auto model = models::load_model("qwen3-30b-a3b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  FastEstimator fast(model, cluster);
  models::TrainingPlan p = qwen3_ep16_plan();
  p.moe_dispatcher = models::MoeDispatcher::FLEX;
  const StepReport exact = simulate_step(model, p, cluster);
  CHECK(std::abs(fast.step_time_s(p) / exact.step_time_s - 1) < 0.03);
  p.moe_dispatcher = models::MoeDispatcher::ALLTOALL;
  CHECK(simulate_step(model, p, cluster).step_time_s > exact.step_time_s);
}

TEST_CASE("strategies::FastEstimator: layer costs are not reused across micro-batch counts") {
  // Under fp8 with the weight cache each pass pays 1 / m of its weight casts (m micro-batches),
  // so two plans that differ only in how many micro-batches a replica runs (here pp 2 vs 4 at
  // the same tp, mbs and gbs) cost their layers differently: an estimator that costed one
  // first must give the other what a fresh estimator gives.
  const auto model = models::load_model("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  models::TrainingPlan a;
  a.tp = 2;
  a.pp = 2;
  a.dp = 2;
  a.seq = 4096;
  a.mbs = 1;
  a.gbs = 16;
  a.precision = models::Precision::FP8;
  models::TrainingPlan b = a;
  b.pp = 4;
  b.dp = 1;
  CHECK(a.micro_batches() != b.micro_batches());
  FastEstimator shared(model, cluster);
  (void)shared.step_time_s(a);
  FastEstimator fresh(model, cluster);
  CHECK(shared.step_time_s(b) == doctest::Approx(fresh.step_time_s(b)).epsilon(1e-12));
}

TEST_CASE("strategies::FastEstimator: memory as each data-parallel design leaves it") {
  // Parameter-server workers hold no optimizer state; DataParallel's GPU 0 also holds the
  // other replicas' outputs. The fast tier's out-of-memory filter must see what the simulator
  // reports, not DDP's figure.
  const auto model = models::load_model("gpt-1.7b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  FastEstimator fast(model, cluster);
  models::TrainingPlan p;
  p.dp = 8;
  p.seq = 2048;
  p.mbs = 1;
  p.gbs = 8;
  const double ddp = fast.peak_memory_bytes(p);
  CHECK(ddp == strategies::estimate_memory(model, p).peak_bytes);
  p.dp_mode = models::DpMode::PS;
  CHECK(fast.peak_memory_bytes(p) == strategies::estimate_memory(model, p).peak_bytes);
  CHECK(fast.peak_memory_bytes(p) < ddp);
  p.dp_mode = models::DpMode::DATAPARALLEL;
  CHECK(fast.peak_memory_bytes(p) == strategies::estimate_memory(model, p).peak_bytes);
  CHECK(fast.peak_memory_bytes(p) > ddp);
}

TEST_CASE("strategies::StepSimulator: only the layers the recompute policy picks re-run") {
  // torchtitan's every-k-th layer (--recompute-every 2): half the layers replay their
  // forward, so the step lies between no recompute and full recompute, about halfway (the
  // layers' forward is the same; the head and embedding never re-run), and the fast tier
  // blends the two kinds of layer the same way.
  const auto model = models::load_model("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  models::TrainingPlan p;
  p.tp = 8;
  p.sp = true;
  p.seq = 8192;
  p.mbs = 1;
  p.gbs = 4;
  const double none = simulate_step(model, p, cluster).step_time_s;
  p.recompute = models::Recompute::FULL;
  const double every = simulate_step(model, p, cluster).step_time_s;
  p.recompute_every = 2;
  const StepReport half = simulate_step(model, p, cluster);
  CHECK(half.step_time_s < every);
  CHECK(half.step_time_s > none);
  CHECK(half.step_time_s - none == doctest::Approx((every - none) / 2).epsilon(0.05));
  FastEstimator fast(model, cluster);
  CHECK(std::abs(fast.step_time_s(p) / half.step_time_s - 1) < 0.02);
  // Megatron's block method with 16 of 32 layers re-runs as many layers.
  p.recompute_every = 1;
  p.recompute_method = models::RecomputeMethod::BLOCK;
  p.recompute_num_layers = 16;
  const StepReport block = simulate_step(model, p, cluster);
  CHECK(block.step_time_s == doctest::Approx(half.step_time_s).epsilon(0.01));
  CHECK(std::abs(fast.step_time_s(p) / block.step_time_s - 1) < 0.02);
}

TEST_CASE(
    "strategies::FastEstimator: block recompute and CPU offloading as the simulator runs them") {
  // Block recompute re-runs the first N layers of each model chunk: which layers depends on
  // pp, so an estimator that costed a pp 1 plan first must give a pp 2 plan what a fresh one
  // gives. CPU offloading over a DGX H100's PCIe path (slower than a layer's compute) is
  // exposed; the fast tier bounds each offloaded layer by its copy and follows the simulator.
  const auto model = models::load_model("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  models::TrainingPlan a;
  a.dp = 8;
  a.seq = 4096;
  a.mbs = 1;
  a.gbs = 16;
  a.recompute = models::Recompute::FULL;
  a.recompute_method = models::RecomputeMethod::BLOCK;
  a.recompute_num_layers = 4;
  models::TrainingPlan b = a;
  b.pp = 2;
  b.dp = 4;
  FastEstimator shared(model, cluster);
  (void)shared.step_time_s(a);
  (void)shared.peak_memory_bytes(a);
  FastEstimator fresh(model, cluster);
  CHECK(shared.step_time_s(b) == doctest::Approx(fresh.step_time_s(b)).epsilon(1e-12));
  CHECK(shared.peak_memory_bytes(b) == fresh.peak_memory_bytes(b));
  models::TrainingPlan off;
  off.dp = 8;
  off.zero = 1;
  off.seq = 8192;
  off.mbs = 1;
  off.gbs = 16;
  off.cpu_offloading_num_layers = 8;
  const StepReport exact = simulate_step(model, off, cluster);
  CHECK(exact.offload_wait_s > 0);
  CHECK(std::abs(fresh.step_time_s(off) / exact.step_time_s - 1) < 0.05);
}
