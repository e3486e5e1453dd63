// `loom calibrate fit`'s driver: a round trip through runs loom itself produced with altered
// factors, and a calibration profile's measured collective reaching the step's engine.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "models/model_loader.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"
#include "strategies/calibration/factor_fit.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

std::shared_ptr<const topo::Cluster> dgx_h100(int nodes) {
  return std::make_shared<const topo::Cluster>(
      topo::load_cluster(topo::ClusterRequest{"dgx-h100", nodes, std::nullopt}));
}

// A run of llama3-8b under (tp, pp, dp, mbs, seq) on `cluster`, step time still unset.
MeasuredRun run_of(const std::shared_ptr<const topo::Cluster>& cluster, int tp, int pp, int dp,
                   int mbs, int seq, int micro_batches) {
  MeasuredRun r;
  r.id = fmt::format("tp{} pp{} dp{} mbs{} seq{}", tp, pp, dp, mbs, seq);
  r.model = models::model_preset("llama3-8b");
  r.plan.tp = tp;
  r.plan.pp = pp;
  r.plan.dp = dp;
  r.plan.mbs = mbs;
  r.plan.seq = seq;
  r.plan.gbs = static_cast<std::int64_t>(mbs) * dp * micro_batches;
  r.plan.sp = tp > 1;
  r.cluster = cluster;
  return r;
}

// The "measurements": loom with matmuls at 0.85 of its kernel model, memory-bound kernels
// 1.15x slower, NVLink at 0.70 and the inter-node links at 0.85 of line rate, through the
// same mechanism the fit adjusts.
calibration::FitFactors altered() {
  calibration::FitFactors truth;
  truth.compute_efficiency[topo::dtype_index(topo::DType::BF16)] = 0.85;
  truth.memory_bound_time = 1.15;
  truth.nvlink_efficiency = 0.70;
  truth.network_efficiency = 0.85;
  return truth;
}

void measure(std::vector<MeasuredRun>& runs, const calibration::FitFactors& truth) {
  for (MeasuredRun& r : runs) {
    r.step_s =
        simulate_step(r.model, r.plan, *r.cluster, with_factors({}, truth, *r.cluster)).step_time_s;
  }
}

std::vector<MeasuredRun> eight_runs() {
  const auto one = dgx_h100(1);
  const auto two = dgx_h100(2);
  return {
      run_of(one, 1, 1, 8, 1, 2048, 2), run_of(one, 2, 1, 4, 1, 4096, 2),
      run_of(one, 4, 1, 2, 2, 2048, 2), run_of(one, 8, 1, 1, 1, 8192, 2),
      run_of(two, 8, 1, 2, 1, 4096, 2), run_of(two, 4, 2, 2, 1, 2048, 4),
      run_of(two, 2, 1, 8, 1, 1024, 1), run_of(one, 1, 2, 4, 4, 512, 4),
  };
}

const FactorFit* fitted(const FitResult& fit, const std::string& name) {
  for (const FactorFit& f : fit.fitted)
    if (f.parameter.name == name) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("strategies::FactorFit: recovers altered compute, memory and link factors within 2%") {
  std::vector<MeasuredRun> runs = eight_runs();
  measure(runs, altered());
  const FitResult fit = fit_factors(runs);
  const auto& f = fit.factors;
  REQUIRE(f.compute_efficiency[topo::dtype_index(topo::DType::BF16)].has_value());
  REQUIRE(f.memory_bound_time.has_value());
  REQUIRE(f.nvlink_efficiency.has_value());
  REQUIRE(f.network_efficiency.has_value());
  CHECK(*f.compute_efficiency[topo::dtype_index(topo::DType::BF16)] ==
        doctest::Approx(0.85).epsilon(0.02));
  CHECK(*f.memory_bound_time == doctest::Approx(1.15).epsilon(0.02));
  CHECK(*f.nvlink_efficiency == doctest::Approx(0.70).epsilon(0.02));
  CHECK(*f.network_efficiency == doctest::Approx(0.85).epsilon(0.02));
  CHECK_FALSE(f.collective_time.has_value());  // not a physical factor: off by default
  CHECK(f.mape_pct < 0.5);
  REQUIRE(f.loo_mape_pct.has_value());
  CHECK(*f.loo_mape_pct < 1.0);
  CHECK(fit.warnings.empty());
  for (const FactorFit& x : fit.fitted) {
    CHECK(x.parameter.status == topo::BoundStatus::FREE);
    CHECK(x.loo_min <= x.parameter.value * 1.01);
    CHECK(x.loo_max >= x.parameter.value * 0.99);
  }
  REQUIRE(fit.runs.size() == runs.size());
  for (const RunFit& r : fit.runs) {
    CHECK(r.model_s < r.measured_s);  // the datasheet model is faster than the altered runs
    CHECK(r.loo_s > 0);
  }
}

TEST_CASE("strategies::FactorFit: too few runs warn and fit fewer factors, none bound-pinned") {
  std::vector<MeasuredRun> runs = eight_runs();
  runs.resize(2);
  measure(runs, altered());
  // Two runs judge one factor at most: the most influential (compute) is fitted, the rest
  // keep their defaults, with a warning saying so.
  const FitResult two = fit_factors(runs);
  REQUIRE(two.fitted.size() == 1);
  CHECK(two.fitted[0].parameter.name == "compute efficiency bf16");
  CHECK(two.fitted[0].parameter.status == topo::BoundStatus::FREE);
  CHECK_FALSE(two.factors.memory_bound_time.has_value());
  REQUIRE_FALSE(two.warnings.empty());
  CHECK(two.warnings[0].find("can fit at most 1 factor") != std::string::npos);
  // One run: no factor at all, and a warning instead of a pinned guess.
  runs.resize(1);
  const FitResult one = fit_factors(runs);
  CHECK(one.fitted.empty());
  CHECK_FALSE(one.factors.compute_efficiency[topo::dtype_index(topo::DType::BF16)].has_value());
  REQUIRE_FALSE(one.warnings.empty());
  CHECK(one.warnings[0].find("can fit at most 0 factors") != std::string::npos);
}

TEST_CASE("strategies::FactorFit: a factor the runs push past its physical bound warns") {
  std::vector<MeasuredRun> runs = eight_runs();
  runs.resize(4);
  // Runs three times faster than loom's matmuls: beyond the dense peak.
  calibration::FitFactors impossible;
  impossible.compute_efficiency[topo::dtype_index(topo::DType::BF16)] = 3.0;
  measure(runs, impossible);
  FitOptions o;
  o.memory = o.network = o.host = false;
  const FitResult fit = fit_factors(runs, o);
  const FactorFit* compute = fitted(fit, "compute efficiency bf16");
  REQUIRE(compute != nullptr);
  CHECK(compute->parameter.status == topo::BoundStatus::AT_UPPER);
  CHECK(compute->parameter.value < 1.5);  // the peak: 1 / (large-GEMM fraction x clock)
  bool warned = false;
  for (const auto& w : fit.warnings) warned |= w.find("upper bound") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("strategies::ClusterCache: a runs file of many GPU counts holds at most its bound") {
  // 12 runs on 12 different GPU counts of one preset: 12 clusters built, never more than the
  // cache's capacity held at once.
  nlohmann::json runs = nlohmann::json::array();
  for (int nodes = 1; nodes <= 12; ++nodes) {
    runs.push_back({{"id", fmt::format("run{}", nodes)},
                    {"model", {{"name", "llama3-8b"}}},
                    {"hardware", {{"num_gpus", 8 * nodes}}},
                    {"parallelism", {{"tp", 8}, {"pp", 1}, {"dp", nodes}}},
                    {"batch", {{"micro_batch_size", 1}, {"global_batch_size", nodes}}},
                    {"seq_len", 1024},
                    {"measured", {{"iteration_time_s", 0.5}}}});
  }
  const std::string path = "cluster_cache_runs.json";
  {
    std::ofstream out(path);
    out << runs.dump();
  }
  const std::vector<MeasuredRun> read = read_runs(path, std::string("dgx-h100"), 3);
  REQUIRE(read.size() == 12);
  const ClusterCache& cache = *read.front().clusters;
  CHECK(cache.capacity() == 3);
  CHECK(cache.held() <= 3);
  CHECK(cache.builds() == 12);
  for (const MeasuredRun& r : read) {
    CHECK(r.cluster == nullptr);  // a run holds no cluster of its own
    CHECK(r.cluster_ref()->num_gpus() == r.gpus);
    CHECK(cache.held() <= 3);
  }
  std::remove(path.c_str());
}

namespace {

// Records the sizes of the all-reduces the engine asks about, covering none of them.
class SizeRecorder : public sim::CollectiveTimeOverride {
 public:
  std::optional<double> seconds(sim::CollectiveOp op, int group_size, int nodes,
                                double bytes) const override {
    if (op == sim::CollectiveOp::ALL_REDUCE && group_size == 8 && nodes == 1) sizes.insert(bytes);
    return std::nullopt;
  }
  mutable std::set<double> sizes;
};

// loom's own (frozen, as simulate times it) all-reduce of `bytes` over ranks 0..7, seconds.
double model_all_reduce(const topo::Cluster& cluster, double bytes) {
  sim::EngineOptions options;
  options.collective_timing = sim::CollectiveTiming::FROZEN;
  sim::Engine engine(cluster, options);
  sim::CollectiveSpec spec;
  spec.request.ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  spec.request.bytes = bytes;
  const sim::TaskId task = engine.add_collective(spec);
  engine.run();
  return sim::to_seconds(engine.finish(task));
}

}  // namespace

TEST_CASE(
    "strategies::StepSimulator: a profile measuring TP all-reduces 2x slower doubles TP comm") {
  const auto cluster = dgx_h100(1);
  MeasuredRun r = run_of(cluster, 8, 1, 1, 1, 2048, 2);
  r.plan.sp = false;  // TP as all-reduces only
  SimulateOptions plain;
  auto recorder = std::make_shared<SizeRecorder>();
  plain.collective_override = recorder;
  const StepReport before = simulate_step(r.model, r.plan, *cluster, plain);
  REQUIRE_FALSE(recorder->sizes.empty());
  // The "measurement": every all-reduce size the step runs on its TP group, at twice the
  // model's time (a hand-made nccl-tests table).
  calibration::CollectiveTable table;
  table.op = sim::CollectiveOp::ALL_REDUCE;
  table.group_size = 8;
  table.nodes = 1;
  for (double bytes : recorder->sizes) {
    calibration::CollectivePoint p;
    p.bytes = bytes;
    p.seconds = 2 * model_all_reduce(*cluster, bytes);
    table.points.push_back(p);
  }
  calibration::Profile profile;
  calibration::add_table(profile, table);
  SimulateOptions measured;
  measured.collective_override = std::make_shared<calibration::MeasuredCollectives>(profile);
  const StepReport after = simulate_step(r.model, r.plan, *cluster, measured);
  const int tp = models::index(models::Dim::TP);
  REQUIRE(before.comm_time_s[tp] > 0);
  CHECK(after.comm_time_s[tp] == doctest::Approx(2 * before.comm_time_s[tp]).epsilon(1e-6));
  // TP collectives block the compute stream: the step grows by the added TP time.
  CHECK(after.step_time_s - before.step_time_s ==
        doctest::Approx(before.comm_time_s[tp]).epsilon(0.01));
}
