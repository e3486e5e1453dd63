// Fitted factors in a calibration profile (JSON round trip, bad values) and the engine's
// collective time scale that applies the fitted collective factor.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "common/error.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"
#include "tests/temp_dir.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::calibration;

namespace {

double all_reduce_s(double scale, sim::CollectiveTiming timing) {
  static const topo::Cluster cluster =
      topo::load_cluster(topo::ClusterRequest{"dgx-h100", 2, std::nullopt});
  sim::EngineOptions options;
  options.collective_timing = timing;
  options.collective_time_scale = scale;
  sim::Engine engine(cluster, options);
  sim::CollectiveSpec spec;
  for (int r = 0; r < 16; ++r) spec.request.ranks.push_back(r);
  spec.request.bytes = 64e6;
  const sim::TaskId task = engine.add_collective(spec);
  engine.run();
  return sim::to_seconds(engine.finish(task));
}

}  // namespace

TEST_CASE("calibration::FitFactors: JSON round trip keeps every factor and the fit summary") {
  Profile profile;
  FitFactors f;
  f.compute_efficiency[topo::dtype_index(topo::DType::BF16)] = 0.85;
  f.compute_efficiency[topo::dtype_index(topo::DType::FP8)] = 0.7;
  f.collective_time = 1.3;
  f.runs = "runs.json";
  f.run_count = 8;
  f.mape_pct = 1.5;
  f.loo_mape_pct = 2.5;
  profile.factors = f;
  const testing::TempDir dir("factors");
  const std::string path = dir.file("p.json");
  write_profile(profile, path);
  const Profile back = read_profile(path);
  REQUIRE(back.factors.has_value());
  const FitFactors& b = *back.factors;
  CHECK(b.compute_efficiency[topo::dtype_index(topo::DType::BF16)].value() == 0.85);
  CHECK(b.compute_efficiency[topo::dtype_index(topo::DType::FP8)].value() == 0.7);
  CHECK_FALSE(b.compute_efficiency[topo::dtype_index(topo::DType::FP16)].has_value());
  CHECK_FALSE(b.memory_bound_time.has_value());
  CHECK(b.collective_time.value() == 1.3);
  CHECK(b.runs == "runs.json");
  CHECK(b.run_count == 8);
  CHECK(b.loo_mape_pct.value() == 2.5);
  const topo::KernelScales s = kernel_scales(b);
  CHECK(s.compute[topo::dtype_index(topo::DType::BF16)] == 0.85);
  CHECK(s.compute[topo::dtype_index(topo::DType::TF32)] == 1.0);
  CHECK(s.memory_bound == 1.0);
}

TEST_CASE("calibration::FitFactors: a factor <= 0 is refused with its JSON pointer") {
  const testing::TempDir dir("factors");
  const std::string path = dir.file("p.json");
  std::ofstream(path) << R"({"format": "loom-calibration", "version": 1, "collectives": [],
    "factors": {"collective_time": -1}})";
  try {
    read_profile(path);
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("/factors/collective_time") != std::string::npos);
  }
}

TEST_CASE("sim::Engine: the collective time scale multiplies a modelled collective's time") {
  const double frozen = all_reduce_s(1.0, sim::CollectiveTiming::FROZEN);
  CHECK(all_reduce_s(1.3, sim::CollectiveTiming::FROZEN) == doctest::Approx(1.3 * frozen));
  // A scaled collective cannot run as flows: it takes the frozen time, scaled.
  CHECK(all_reduce_s(1.3, sim::CollectiveTiming::FLOWS) == doctest::Approx(1.3 * frozen));
  CHECK_THROWS_AS(all_reduce_s(0.0, sim::CollectiveTiming::FROZEN), ValidationError);
}
