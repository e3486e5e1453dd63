// Error bands from loom's track record (strategies/bands/error_band.hpp).
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/bands/error_band.hpp"

namespace {

using loom::strategies::BandMetric;
using loom::strategies::find_band;
using loom::strategies::Regime;
using loom::strategies::TrackRun;

Regime hopper_dense(std::int64_t gpus = 64) {
  Regime r;
  r.generation = "hopper";
  r.moe = "dense";
  r.precision = "16-bit";
  r.dims = "TP+PP";
  r.framework = "megatron";
  r.scale = "<=64";
  r.zero3 = "no-zero3";
  r.recompute = "none";
  r.overlaps = "overlap";
  r.gpus = gpus;
  return r;
}

std::vector<TrackRun> runs_with(const Regime& regime, const std::vector<double>& errors) {
  std::vector<TrackRun> out;
  for (std::size_t i = 0; i < errors.size(); ++i)
    out.push_back({"fam", "r" + std::to_string(i), BandMetric::TIME, errors[i], regime});
  return out;
}

}  // namespace

TEST_CASE("strategies::ErrorBand: quantile interpolates between order statistics") {
  // 0..10 sorted: the 10th percentile at h = 10 x 0.1 = 1, the 90th at 9.
  std::vector<double> v = {5, 0, 10, 1, 9, 2, 8, 3, 7, 4, 6};
  CHECK(loom::strategies::quantile(v, 0.1) == doctest::Approx(1));
  CHECK(loom::strategies::quantile(v, 0.9) == doctest::Approx(9));
  // Four values, p 0.5: h = 1.5, halfway between 0.2 and 0.3.
  CHECK(loom::strategies::quantile({0.4, 0.1, 0.3, 0.2}, 0.5) == doctest::Approx(0.25));
  CHECK(loom::strategies::quantile({}, 0.5) == 0);
}

TEST_CASE("strategies::ErrorBand: the band is the matching runs' 10th-90th percentile residuals") {
  // Ten runs with residuals -0.10 .. +0.08 (step 0.02): q10 = -0.082, q90 = 0.062 (h = 0.9, 8.1).
  std::vector<double> errors;
  for (int i = 0; i < 10; ++i) errors.push_back(-0.10 + 0.02 * i);
  const auto runs = runs_with(hopper_dense(), errors);
  const auto band = find_band(runs, hopper_dense(), BandMetric::TIME);
  CHECK_FALSE(band.extrapolation);
  CHECK(band.runs == 10);
  CHECK(band.matched.size() == loom::strategies::band_feature_names().size());
  // published = loom / (1 + error): the low edge from the high residual.
  CHECK(band.low_ratio == doctest::Approx(1 / 1.062));
  CHECK(band.high_ratio == doctest::Approx(1 / (1 - 0.082)));
  // It contains the prediction (residuals on both sides of zero) ...
  const auto [lo, hi] = band.of_time(10.0);
  CHECK(lo < 10.0);
  CHECK(hi > 10.0);
  // ... and throughput moves the other way.
  const auto [rlo, rhi] = band.of_rate(100.0);
  CHECK(rlo == doctest::Approx(100.0 * (1 - 0.082)));
  CHECK(rhi == doctest::Approx(100.0 * 1.062));
  // Computed from the data: other residuals, another band.
  std::vector<double> wider;
  for (double e : errors) wider.push_back(3 * e);
  const auto band3 = find_band(runs_with(hopper_dense(), wider), hopper_dense(), BandMetric::TIME);
  CHECK(band3.high_ratio > band.high_ratio);
  CHECK(band3.low_ratio < band.low_ratio);
  // The one-sided 90% edge is the band's upper edge.
  CHECK(band.upper_ratio(0.9) == doctest::Approx(band.high_ratio));
}

TEST_CASE("strategies::ErrorBand: too few matching runs back off feature by feature") {
  Regime other = hopper_dense();
  other.recompute = "full";  // the second-last feature differs; overlaps (last) is dropped first
  std::vector<TrackRun> runs = runs_with(other, std::vector<double>(8, 0.1));
  for (auto& r : runs_with(hopper_dense(), {-0.2, -0.2})) runs.push_back(r);
  const auto band = find_band(runs, hopper_dense(), BandMetric::TIME);
  CHECK_FALSE(band.extrapolation);
  CHECK(band.runs == 10);  // generation .. zero3 kept: the 8 full-recompute runs and the 2 own
  CHECK(band.matched.size() == loom::strategies::band_feature_names().size() - 2);
  CHECK(band.label.find("recompute") == std::string::npos);
  CHECK(band.label.find("Hopper") == 0);
}

TEST_CASE("strategies::ErrorBand: outside every regime is an extrapolation") {
  const auto runs = runs_with(hopper_dense(), std::vector<double>(20, 0.05));
  // A GPU generation no published run used.
  Regime volta = hopper_dense();
  volta.generation = "volta";
  const auto unseen = find_band(runs, volta, BandMetric::TIME);
  CHECK(unseen.extrapolation);
  CHECK(unseen.label.find("Volta") != std::string::npos);
  // 64 times the largest run's GPUs.
  const auto huge = find_band(runs, hopper_dense(64 * 64), BandMetric::TIME);
  CHECK(huge.extrapolation);
  CHECK(huge.label.find("largest published run") != std::string::npos);
  // No memory runs at all.
  CHECK(find_band(runs, hopper_dense(), BandMetric::MEMORY).runs == 0);
}

TEST_CASE("strategies::ErrorBand: the built-in track record gives bands from its own runs") {
  const auto& record = loom::strategies::track_record();
  REQUIRE(record.size() > 100);
  std::int64_t largest = 0;
  for (const auto& r : record) largest = std::max(largest, r.regime.gpus);
  // A dense BF16 Llama 3 8B on 8 H100s under Megatron's defaults: runs like it exist.
  const auto model = loom::models::model_preset("llama3-8b");
  loom::models::TrainingPlan plan;
  plan.tp = 2;
  plan.dp = 4;
  const Regime regime = loom::strategies::regime_of(model, plan, loom::topo::GpuArch::HOPPER, 8);
  CHECK(regime.dims == "TP");
  CHECK(regime.moe == "dense");
  const auto band = find_band(regime, BandMetric::TIME);
  CHECK_FALSE(band.extrapolation);
  CHECK(band.runs >= loom::strategies::band_min_runs(BandMetric::TIME));
  // The band is the quantiles of exactly the runs whose kept features match.
  std::vector<double> matching;
  for (const auto& r : record) {
    bool same = r.metric == BandMetric::TIME;
    for (std::size_t i = 0; i < band.matched.size() && same; ++i)
      same = loom::strategies::feature(r.regime, i) == loom::strategies::feature(regime, i);
    if (same) matching.push_back(r.error);
  }
  CHECK(static_cast<int>(matching.size()) == band.runs);
  CHECK(band.low_ratio == doctest::Approx(1 / (1 + loom::strategies::quantile(matching, 0.9))));
  CHECK(band.high_ratio == doctest::Approx(1 / (1 + loom::strategies::quantile(matching, 0.1))));
  CHECK(band.low_ratio < band.high_ratio);
  // An unseen generation and 64x the largest run are extrapolations.
  CHECK(find_band(loom::strategies::regime_of(model, plan, loom::topo::GpuArch::VOLTA, 8),
                  BandMetric::TIME)
            .extrapolation);
  CHECK(
      find_band(loom::strategies::regime_of(model, plan, loom::topo::GpuArch::HOPPER, 64 * largest),
                BandMetric::TIME)
          .extrapolation);
}

TEST_CASE("strategies::ErrorBand: a malformed track record names the field") {
  CHECK_THROWS_WITH_AS(loom::strategies::parse_track_record(R"({"runs": [{"family": "x"}]})"),
                       doctest::Contains("id"), loom::ConfigError);
  CHECK_THROWS_AS(loom::strategies::parse_track_record(R"({"rows": []})"), loom::ConfigError);
}
