// `loom simulate --trace` writes a Chrome-trace document: slices on one track never overlap
// and memory counters are present. Runs the loom binary.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "tests/temp_dir.hpp"

TEST_CASE("cli::Simulate: the trace is valid Chrome-trace JSON") {
  const loom::testing::TempDir dir("trace");
  const std::string path = dir.file("trace.json");
  const std::string cmd = std::string(LOOM_BINARY) +
                          " simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 8 "
                          "--seq 512 --trace " +
                          path + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  REQUIRE(doc.contains("traceEvents"));
  int slices = 0, counters = 0;
  std::map<std::pair<int, int>, double> last_end;
  for (const auto& e : doc["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      CHECK(e["name"].is_string());
      CHECK(e["ts"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      // One tid per serial stream: slices on a track never overlap (in start order).
      auto key = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
      const double ts = e["ts"], dur = e["dur"];
      if (last_end.count(key)) CHECK(ts >= last_end[key] - 1e-3);
      last_end[key] = ts + dur;
    } else if (ph == "C") {
      ++counters;
      CHECK(e["args"]["bytes"].get<double>() > 0);
    } else {
      CHECK(ph == "M");
    }
  }
  CHECK(slices > 10);
  CHECK(counters > 0);
}
