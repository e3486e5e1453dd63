// The profile: JSON round trip, duplicate sizes, log-size interpolation, and the engine
// reproducing an imported nccl-tests table through the CollectiveTimeOverride hook.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "sim/calibration/nccl_tests.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/engine.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::calibration;

namespace {

std::string data(const char* name) {
  return source_path("tests/sim/calibration_data/") + name;
}

Profile imported(const char* name) {
  Profile p;
  for (auto& t : import_files({data(name)}).tables) add_table(p, t);
  return p;
}

// Seconds `loom collective` would report: one all_reduce on ranks 0..n-1, alone.
double collective_seconds(const topo::Cluster& cluster, const sim::CollectiveTimeOverride* o, int n,
                          double bytes) {
  sim::EngineOptions options;
  options.collective_override = o;
  sim::Engine engine(cluster, options);
  sim::CollectiveSpec spec;
  spec.request.op = sim::CollectiveOp::ALL_REDUCE;
  for (int r = 0; r < n; ++r) spec.request.ranks.push_back(r);
  spec.request.bytes = bytes;
  const sim::TaskId task = engine.add_collective(spec);
  engine.run();
  return sim::to_seconds(engine.finish(task));
}

}  // namespace

TEST_CASE("calibration::Profile: the engine reproduces an imported table within 2%") {
  const Profile profile = imported("all_reduce_1node_noisy.txt");
  const MeasuredCollectives measured(profile);
  const topo::Cluster cluster = topo::load_cluster({"dgx-h100", 1, std::nullopt});
  const CollectiveTable& table = profile.collectives.at(0);
  for (const CollectivePoint& p : table.points) {
    CAPTURE(p.bytes);
    const double t = collective_seconds(cluster, &measured, 8, p.bytes);
    CHECK(std::abs(t / p.seconds - 1) < 0.02);
  }
  // Between measured sizes: within the neighbours' times, and on the log-log line through
  // them (at the geometric midpoint, the geometric mean of the two times).
  for (size_t i = 0; i + 1 < table.points.size(); ++i) {
    const CollectivePoint& a = table.points[i];
    const CollectivePoint& b = table.points[i + 1];
    const double mid = std::sqrt(a.bytes * b.bytes);
    CAPTURE(mid);
    const double t = collective_seconds(cluster, &measured, 8, mid);
    CHECK(t >= std::min(a.seconds, b.seconds) * (1 - 1e-9));
    CHECK(t <= std::max(a.seconds, b.seconds) * (1 + 1e-9));
    CHECK(t == doctest::Approx(std::sqrt(a.seconds * b.seconds)).epsilon(1e-6).scale(0));
  }
}

TEST_CASE("calibration::Profile: the model stands outside the measured sizes and groups") {
  const MeasuredCollectives measured(imported("all_reduce_1node_noisy.txt"));
  const topo::Cluster cluster = topo::load_cluster({"dgx-h100", 1, std::nullopt});
  // 1 GiB is above the table's 128 MiB; 4 ranks is a group it did not measure.
  CHECK(collective_seconds(cluster, &measured, 8, 1 << 30) ==
        collective_seconds(cluster, nullptr, 8, 1 << 30));
  CHECK(collective_seconds(cluster, &measured, 4, 1 << 20) ==
        collective_seconds(cluster, nullptr, 4, 1 << 20));
  CHECK_FALSE(measured.seconds(sim::CollectiveOp::ALL_GATHER, 8, 1, 1 << 20).has_value());
  CHECK_FALSE(measured.seconds(sim::CollectiveOp::ALL_REDUCE, 8, 2, 1 << 20).has_value());
}

TEST_CASE("calibration::Profile: JSON round trip keeps every figure and its source") {
  Profile profile = imported("all_reduce_1node_noisy.txt");
  for (auto& t : import_files({data("all_gather_2node.txt")}).tables) add_table(profile, t);
  const testing::TempDir dir("profile");
  const std::string path = dir.file("p.json");
  write_profile(profile, path);
  const Profile back = read_profile(path);
  REQUIRE(back.collectives.size() == 2);
  for (size_t t = 0; t < 2; ++t) {
    const CollectiveTable &a = profile.collectives[t], &b = back.collectives[t];
    CHECK(b.op == a.op);
    CHECK(b.group_size == a.group_size);
    CHECK(b.nodes == a.nodes);
    CHECK(b.gpu == a.gpu);
    REQUIRE(b.points.size() == a.points.size());
    for (size_t i = 0; i < a.points.size(); ++i) {
      CHECK(b.points[i].bytes == a.points[i].bytes);
      CHECK(b.points[i].seconds == doctest::Approx(a.points[i].seconds).epsilon(1e-12));
      CHECK(b.points[i].in_place_seconds.value() ==
            doctest::Approx(a.points[i].in_place_seconds.value()).epsilon(1e-12));
      CHECK(b.points[i].source == a.points[i].source);
    }
  }
}

TEST_CASE("calibration::Profile: the same size measured twice is an error") {
  Profile profile = imported("all_reduce_1node_noisy.txt");
  const auto again = import_files({data("all_reduce_1node_noisy.txt")});
  CHECK_THROWS_WITH_AS(add_table(profile, again.tables[0]),
                       doctest::Contains("both measure all_reduce on 8 ranks over 1 node at 8 B"),
                       CalibrationError);
}

TEST_CASE("calibration::Profile: another version is refused") {
  const testing::TempDir dir("profile_version");
  const std::string path = dir.file("v2.json");
  std::ofstream(path) << R"({"format": "loom-calibration", "version": 2, "collectives": []})";
  CHECK_THROWS_WITH_AS(read_profile(path), doctest::Contains("/version"), ConfigError);
}

TEST_CASE("calibration::Profile: loom-harness GEMM and memory sections round trip") {
  const Profile profile = read_profile(data("harness_synthetic.json"));
  REQUIRE(profile.gemms.size() == 8);
  REQUIRE(profile.memory.size() == 9);
  CHECK(profile.gemms[0].dtype == topo::DType::BF16);
  CHECK(profile.gemms[0].m == 2048);
  // harness_synthetic.json: 2 x 2048^3 FLOP at 520 TFLOP/s = 33.038 us.
  CHECK(profile.gemms[0].seconds == doctest::Approx(33.038e-6).scale(0));
  CHECK(profile.gemms[6].dtype == topo::DType::FP8);
  CHECK(profile.memory[5].kernel == "elementwise");
  const testing::TempDir dir("profile_harness");
  const std::string path = dir.file("p.json");
  write_profile(profile, path);
  const Profile back = read_profile(path);
  CHECK(profile_to_json(back) == profile_to_json(profile));
  CHECK(back.device_json.find("H100") != std::string::npos);
  REQUIRE(back.gemms.size() == profile.gemms.size());
  for (size_t i = 0; i < back.gemms.size(); ++i) {
    CHECK(back.gemms[i].seconds == doctest::Approx(profile.gemms[i].seconds).epsilon(1e-12));
    CHECK(back.gemms[i].samples == profile.gemms[i].samples);
    CHECK(back.gemms[i].algorithm == profile.gemms[i].algorithm);
  }
  REQUIRE(back.memory.size() == profile.memory.size());
  for (size_t i = 0; i < back.memory.size(); ++i) {
    CHECK(back.memory[i].bytes == profile.memory[i].bytes);
    CHECK(back.memory[i].seconds == doctest::Approx(profile.memory[i].seconds).epsilon(1e-12));
  }
}

TEST_CASE("calibration::Profile: the kernel tables take every GEMM and the elementwise plateau") {
  Profile profile = read_profile(data("harness_synthetic.json"));
  topo::MeasuredKernels k = measured_kernels(profile);
  CHECK(k.gemms.size() == 8);
  // The largest elementwise size (1 GiB) streams at 2900 GB/s in harness_synthetic.json.
  CHECK(k.memory_Bps.value() == doctest::Approx(2900e9).epsilon(1e-6));
  // Without elementwise rows the largest copy (3000 GB/s); reductions are never used.
  std::erase_if(profile.memory, [](const MemoryPoint& m) { return m.kernel == "elementwise"; });
  CHECK(measured_kernels(profile).memory_Bps.value() == doctest::Approx(3000e9).epsilon(1e-6));
  std::erase_if(profile.memory, [](const MemoryPoint& m) { return m.kernel == "copy"; });
  CHECK_FALSE(measured_kernels(profile).memory_Bps.has_value());
  profile.gemms.clear();
  CHECK_FALSE(has_kernel_measurements(profile));
}

TEST_CASE("calibration::Profile: memcpy rows (d2d, h2d, d2h) are read but not streamed") {
  const testing::TempDir dir("profile_memcpy");
  const std::string path = dir.file("memcpy.json");
  std::ofstream(path) << R"({"format": "loom-calibration", "version": 1, "collectives": [],
    "memory": [{"kernel": "d2d", "bytes": 1073741824, "time_us": 800},
               {"kernel": "h2d", "bytes": 1073741824, "time_us": 20000},
               {"kernel": "d2h", "bytes": 1073741824, "time_us": 21000}]})";
  const Profile profile = read_profile(path);
  REQUIRE(profile.memory.size() == 3);
  CHECK(profile.memory[1].kernel == "h2d");
  CHECK_FALSE(measured_kernels(profile).memory_Bps.has_value());
  CHECK_FALSE(has_kernel_measurements(profile));
  std::ofstream(path) << R"({"format": "loom-calibration", "version": 1, "collectives": [],
    "memory": [{"kernel": "p2p", "bytes": 8, "time_us": 1}]})";
  CHECK_THROWS_WITH_AS(read_profile(path), doctest::Contains("/memory/0/kernel"), ConfigError);
}

TEST_CASE("calibration::Profile: a bad GEMM row names its JSON pointer") {
  const testing::TempDir dir("profile_gemm");
  const std::string path = dir.file("bad.json");
  std::ofstream(path) << R"({"format": "loom-calibration", "version": 1, "collectives": [],
    "gemm": [{"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "time_us": 200},
             {"dtype": "int4", "m": 4096, "n": 4096, "k": 4096, "time_us": 200}]})";
  CHECK_THROWS_WITH_AS(read_profile(path), doctest::Contains("/gemm/1/dtype"), ConfigError);
}
