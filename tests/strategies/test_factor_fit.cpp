// `loom calibrate fit`'s driver: a round trip through runs loom itself produced with altered
// factors, and a calibration profile's measured collective reaching the step's engine.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <set>

#include "common/error.hpp"
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

}  // namespace

TEST_CASE("strategies::FactorFit: recovers compute 0.85 and collective 1.3 from its own runs") {
  const auto one = dgx_h100(1);
  const auto two = dgx_h100(2);
  std::vector<MeasuredRun> runs = {
      run_of(one, 1, 1, 8, 1, 2048, 2), run_of(one, 2, 1, 4, 1, 4096, 2),
      run_of(one, 4, 1, 2, 2, 2048, 2), run_of(one, 8, 1, 1, 1, 8192, 2),
      run_of(two, 8, 1, 2, 1, 4096, 2), run_of(two, 4, 2, 2, 1, 2048, 4),
      run_of(two, 2, 1, 8, 1, 1024, 1), run_of(one, 1, 2, 4, 4, 512, 4),
  };
  // The "measurements": loom with matmuls at 0.85 of its kernel model and collectives 1.3x
  // slower, through the same mechanism the fit adjusts.
  calibration::FitFactors truth;
  truth.compute_efficiency[topo::dtype_index(topo::DType::BF16)] = 0.85;
  truth.collective_time = 1.3;
  for (MeasuredRun& r : runs) {
    r.step_s =
        simulate_step(r.model, r.plan, *r.cluster, with_factors({}, truth, *r.cluster)).step_time_s;
  }
  const FitResult fit = fit_factors(runs);
  const auto& f = fit.factors;
  REQUIRE(f.compute_efficiency[topo::dtype_index(topo::DType::BF16)].has_value());
  REQUIRE(f.memory_bound_time.has_value());
  REQUIRE(f.collective_time.has_value());
  CHECK(*f.compute_efficiency[topo::dtype_index(topo::DType::BF16)] ==
        doctest::Approx(0.85).epsilon(0.02));
  CHECK(*f.memory_bound_time == doctest::Approx(1.0).epsilon(0.02));
  CHECK(*f.collective_time == doctest::Approx(1.3).epsilon(0.02));
  CHECK(f.mape_pct < 0.5);
  REQUIRE(f.loo_mape_pct.has_value());
  CHECK(*f.loo_mape_pct < 1.0);
  REQUIRE(fit.runs.size() == runs.size());
  for (const RunFit& r : fit.runs) {
    CHECK(r.model_s < r.measured_s);  // the datasheet model is faster than the altered runs
    CHECK(r.loo_s > 0);
  }
}

TEST_CASE("strategies::FactorFit: fewer runs than factors is refused") {
  const auto one = dgx_h100(1);
  std::vector<MeasuredRun> runs = {run_of(one, 1, 1, 8, 1, 2048, 1),
                                   run_of(one, 2, 1, 4, 1, 2048, 1)};
  for (MeasuredRun& r : runs) r.step_s = simulate_step(r.model, r.plan, *r.cluster).step_time_s;
  CHECK_THROWS_AS(fit_factors(runs), ValidationError);
  FitOptions o;
  o.memory = false;  // two factors from two runs: exact, no leave-one-out
  const FitResult fit = fit_factors(runs, o);
  CHECK(fit.factors.mape_pct < 0.01);
  CHECK_FALSE(fit.factors.loo_mape_pct.has_value());
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
