// The kernel fit through the CLI: `simulate --calibration` times kernels with fitted
// parameters and says which; `calibrate show` prints them beside the defaults; a malformed
// launch row is refused by name; `calibrate fit` on one run warns instead of pinning factors.
// Runs the loom binary.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "tests/harness/run_loom.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"

using loom::testing::source_path;

namespace {

// Runs loom with `args` (stderr folded into stdout when `with_stderr`).
loom::testing::LoomRun run(const std::string& args, bool with_stderr = false) {
  return loom::testing::run_loom(args, with_stderr);
}

bool contains(const nlohmann::json& list, const std::string& item) {
  for (const auto& x : list)
    if (x.get<std::string>() == item) return true;
  return false;
}

}  // namespace

TEST_CASE("cli::CalibrateKernels: simulate names the kernels fitted, defaulted and measured") {
  const std::string profile = source_path("tests/sim/calibration_data/harness_synthetic.json");
  const loom::testing::LoomRun r =
      run("simulate --model llama3-8b --cluster dgx-h100 --tp 8 --seq 2048 "
          "--format json --calibration " +
          profile);
  REQUIRE(r.status == 0);
  const auto fit = nlohmann::json::parse(r.out)["context"]["kernel_fit"];
  CHECK(contains(fit["fitted"], "bf16 GEMMs"));
  CHECK(contains(fit["fitted"], "fp8 GEMMs"));
  CHECK(contains(fit["fitted"], "per-kernel overhead"));
  CHECK(contains(fit["defaults"], "fused attention"));
  CHECK(contains(fit["defaults"], "fp16 GEMMs"));
  REQUIRE(fit["measured"].size() == 1);
  // Without a profile the context has no kernel_fit: the uncalibrated output is unchanged.
  const loom::testing::LoomRun plain =
      run("simulate --model llama3-8b --cluster dgx-h100 --tp 8 --seq 2048 --format json");
  REQUIRE(plain.status == 0);
  CHECK_FALSE(nlohmann::json::parse(plain.out)["context"].contains("kernel_fit"));
}

TEST_CASE(
    "cli::CalibrateKernels: show prints fitted parameters beside defaults for the --gpu named") {
  const std::string profile = source_path("tests/sim/calibration_data/harness_synthetic.json");
  const loom::testing::LoomRun r = run("calibrate show " + profile + " --gpu h200");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("kernel fit on the h200") != std::string::npos);
  CHECK(r.out.find("gemm_fraction bf16") != std::string::npos);
  CHECK(r.out.find("memory_bandwidth_fraction") != std::string::npos);
  CHECK(r.out.find("GEMM samples: RMS log error default") != std::string::npos);
}

TEST_CASE("cli::CalibrateKernels: a launch row without a usable time is refused by name") {
  const loom::testing::TempDir dir("calibrate_kernels");
  const std::string profile = dir.file("launch.json");
  std::ofstream(profile) << R"({"format": "loom-calibration", "version": 1, "collectives": [],
    "launch": [{"what": "graph_back_to_back", "time_us": -1}]})";
  const loom::testing::LoomRun r = run("calibrate show " + profile + " --gpu h100-sxm", true);
  CHECK(r.status == 2);
  CHECK(r.out.find("/launch/0/time_us") != std::string::npos);
}

TEST_CASE("cli::CalibrateKernels: calibrate fit on one run warns and fits no factor") {
  const loom::testing::TempDir dir("calibrate_fit_one");
  const auto runs = nlohmann::json::parse(
      std::ifstream(source_path("examples/calibration/runs_synthetic.json")))["runs"];
  const std::string one = dir.file("one.json");
  std::ofstream(one) << nlohmann::json::array({runs[0]}).dump();
  const loom::testing::LoomRun r =
      run("calibrate fit --runs " + one + " --cluster dgx-h100 -o " + dir.file("p.json"), true);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("no factor fitted") != std::string::npos);
  CHECK(r.out.find("loom: warning: 1 run can fit at most 0 factors") != std::string::npos);
  const auto written = nlohmann::json::parse(std::ifstream(dir.file("p.json")))["factors"];
  CHECK_FALSE(written.contains("compute_efficiency"));
  CHECK_FALSE(written.contains("memory_bound_time"));
}
