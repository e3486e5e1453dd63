// `loom calibrate import` then `loom collective --calibration`: the CLI reproduces an
// imported nccl-tests table (a test input written to the nccl-tests format, see
// tests/sim/calibration_data/README.md) within 2% at the measured sizes and interpolates
// smoothly between them. Runs the loom binary.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/source_path.hpp"
#include "tests/temp_dir.hpp"

using loom::testing::source_path;

namespace {

std::string run(const std::string& args) {
  const std::string cmd = std::string(LOOM_BINARY) + " " + args;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  REQUIRE(pclose(pipe) == 0);
  return out;
}

}  // namespace

TEST_CASE("cli::Calibrate: collective --calibration reproduces the imported table") {
  const loom::testing::TempDir dir("calibrate");
  const std::string profile = dir.file("p.json");
  const std::string log = source_path("tests/sim/calibration_data/all_reduce_1node_noisy.txt");
  run("calibrate import " + log + " -o " + profile + " > /dev/null");
  const auto table = nlohmann::json::parse(std::ifstream(profile))["collectives"][0]["points"];
  REQUIRE(table.size() == 25);

  const std::string sweep =
      " collective --cluster dgx-h100 --op all_reduce --format json "
      "--calibration " +
      profile;
  const auto rows = nlohmann::json::parse(run(sweep + " -b 8 -e 128M -f 2"))["results"]["rows"];
  REQUIRE(rows.size() == table.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(rows[i]["size_bytes"] == table[i]["bytes"]);
    const double measured = table[i]["time_us"], simulated = rows[i]["time_us"];
    CHECK(std::abs(simulated / measured - 1) < 0.02);
    CHECK(rows[i]["algorithm"] == "measured");
  }
  // Quarter-octave steps from 1 MiB: each time between its measured neighbours, and the
  // step-to-step ratio never more than the measured octave's (no jumps between sizes).
  const auto fine =
      nlohmann::json::parse(run(sweep + " -b 1M -e 128M -f 1.189207115"))["results"]["rows"];
  REQUIRE(fine.size() == 29);
  for (size_t i = 1; i < fine.size(); ++i) {
    const double a = fine[i - 1]["time_us"], b = fine[i]["time_us"];
    CHECK(b >= a * 0.999);  // this table's times grow with size above 1 MiB
    CHECK(b / a < 1.7);     // an octave at most doubles the time; a quarter is far less
  }
}
