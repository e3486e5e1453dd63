// `loom calibrate fit-network`, then `--calibration` on collective, simulate and search: the
// fitted network times collectives through the model, says which groups it covered, warns
// on another GPU or fabric, and `calibrate show` prints the leave-one-log-out table. Runs the
// loom binary on the real logs in tests/sim/calibration_data/real_logs.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <cstdio>
#include <string>

#include "tests/harness/run_loom.hpp"
#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"

using loom::testing::source_path;

namespace {

loom::testing::LoomRun run_status(const std::string& args) {
  return loom::testing::run_loom(args, false);
}

std::string run(const std::string& args) {
  loom::testing::LoomRun r = run_status(args);
  REQUIRE(r.status == 0);
  return r.out;
}

std::string real_log(const std::string& name) {
  return source_path("tests/sim/calibration_data/real_logs/nccl-tests_all_reduce_h100_") + name +
         ".log";
}

// A profile of `logs` with its network fitted on dgx-h100.
std::string fitted(const loom::testing::TempDir& dir, const std::string& name,
                   const std::string& logs) {
  const std::string profile = dir.file(name);
  run("calibrate import " + logs + " -o " + profile + " > /dev/null 2>&1");
  run("calibrate fit-network " + profile + " --cluster dgx-h100 > /dev/null");
  return profile;
}

}  // namespace

// One fit of two logs (the fit is the slow part, most of all under the sanitizers) serves
// `collective --calibration` and `calibrate show`.
TEST_CASE(
    "cli::CalibrateNetwork: collective --calibration runs the model with fitted parameters, and "
    "show prints parameters, residuals and leave-one-log-out") {
  const loom::testing::TempDir dir("fit_network");
  const std::string profile =
      fitted(dir, "q.json", real_log("16gpu_2node") + " " + real_log("32gpu_4node_vm"));
  const std::string shown = run("calibrate show " + profile);
  CHECK(shown.find("nic_efficiency") != std::string::npos);
  CHECK(shown.find("+-1 sigma") != std::string::npos);
  CHECK(shown.find("leave-one-log-out") != std::string::npos);
  CHECK(shown.find("held out nccl-tests_all_reduce_h100_32gpu_4node_vm.log") != std::string::npos);
  const auto doc = nlohmann::json::parse(
      run("collective --cluster dgx-h100 --nodes 8 --op all_reduce -b 1G -e 1G --format json "
          "--calibration " +
          profile));
  const auto& row = doc["results"]["rows"][0];
  CHECK(row["algorithm"] != "measured");  // 8 nodes: no log measured it; the model predicts
  const auto& calibration = doc["context"]["calibration"];
  REQUIRE(calibration["collectives_fitted"].size() == 1);
  CHECK(calibration["collectives_fitted"][0]["nodes"] == 8);
  CHECK(calibration["defaults"].empty());
  CHECK(calibration["notes"].empty());
  // Another GPU and fabric: a note in the JSON (and on stderr for tables).
  const auto a100 = nlohmann::json::parse(
      run("collective --cluster dgx-a100 --nodes 2 --op all_reduce -b 1M -e 1M --format json "
          "--calibration " +
          profile));
  CHECK(a100["context"]["calibration"]["notes"].size() == 2);
  const std::string table =
      run("collective --cluster dgx-a100 --op all_reduce -b 1M -e 1M "
          "--calibration " +
          profile + " 2>&1");
  CHECK(table.find("loom: note: the network was fitted on h100-sxm GPUs") != std::string::npos);
}

TEST_CASE("cli::CalibrateNetwork: simulate says which groups no log covers") {
  const loom::testing::TempDir dir("fit_network_intra");
  const std::string profile = fitted(dir, "intra.json", real_log("8gpu_1node"));
  const auto doc = nlohmann::json::parse(
      run("simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 8 --format json "
          "--calibration " +
          profile));
  const auto& calibration = doc["context"]["calibration"];
  REQUIRE(calibration["collectives_fitted"].size() == 1);
  CHECK(calibration["collectives_fitted"][0]["kind"] == "tp");
  REQUIRE(calibration["defaults"].size() == 1);
  CHECK(calibration["defaults"][0]["kind"] == "dp");
  CHECK(calibration["defaults"][0]["nodes"] == 2);
  const std::string table = run(
      "simulate --model llama3-8b --cluster dgx-h100 --nodes 2 --tp 8 --calibration " + profile);
  CHECK(table.find("calibration: dp (2 ranks over 2 nodes): loom's defaults (nic_efficiency at "
                   "its default: no row of the profile is NIC-bound)") != std::string::npos);
}

TEST_CASE("cli::CalibrateNetwork: bad input exits 2 with one line naming the fix") {
  const loom::testing::TempDir dir("fit_network_bad");
  const std::string profile = dir.file("p.json");
  run("calibrate import " + real_log("16gpu_2node") + " -o " + profile + " > /dev/null 2>&1");
  // An unknown cluster: the did-you-mean names the preset.
  loom::testing::LoomRun r =
      run_status("calibrate fit-network " + profile + " --cluster dgx-h10 2>&1");
  CHECK(r.status == 2);
  CHECK(r.out.find("dgx-h100") != std::string::npos);  // did-you-mean
  // A profile without a fitted network on search: fit it first.
  r = run_status("search --model llama3-8b --cluster dgx-h100 --gbs 64 --calibration " + profile +
                 " 2>&1");
  CHECK(r.status == 2);
  CHECK(r.out.find("calibrate fit-network") != std::string::npos);
}
