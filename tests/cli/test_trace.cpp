// `loom simulate --trace` writes a Chrome-trace document: processes named by their place in
// the plan, slices on one track never overlap, pipeline sends and receives are slices, and
// memory counters are whole bytes. Runs the loom binary; writes into a unique temp dir.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/temp_dir.hpp"

namespace {

// The trace of gpt-1.7b on one DGX A100, tp 2 pp 2 dp 2, 4 micro-batches, written into `dir`.
nlohmann::json small_trace(const loom::testing::TempDir& dir) {
  const std::string path = dir.file("trace.json");
  const std::string cmd = std::string(LOOM_BINARY) +
                          " simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 8 "
                          "--seq 512 --trace " +
                          path + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("cli::Simulate: the trace is valid Chrome-trace JSON") {
  const loom::testing::TempDir dir("trace");
  const auto doc = small_trace(dir);
  REQUIRE(doc.contains("traceEvents"));
  int slices = 0, counters = 0, sends = 0, receives = 0;
  std::map<int, std::string> process_names;
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
      if (e["cat"] == "pp") {
        const std::string name = e["name"];
        sends += name.rfind("send-", 0) == 0 && name.find(" to rank ") != std::string::npos;
        receives += name.rfind("recv-", 0) == 0 && name.find(" from rank ") != std::string::npos;
      }
    } else if (ph == "C") {
      ++counters;
      CHECK(e["args"]["bytes"].is_number_integer());  // whole bytes, never fractions
      CHECK(e["args"]["bytes"].get<std::int64_t>() > 0);
    } else if (ph == "s" || ph == "f") {
      CHECK(e.contains("id"));  // flows: TEST_CASE below
    } else {
      CHECK(ph == "M");
      if (e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    }
  }
  CHECK(slices > 10);
  CHECK(counters > 0);
  // gbs 8 on dp 2: 4 micro-batches, each sends its activation forward and its gradient back
  // between the two stages' representatives (ranks 0 and 4 in Megatron's layout).
  CHECK(sends == 8);
  CHECK(receives == 8);
  CHECK(process_names[0] == "rank 0: stage 0, tp 0, cp 0, dp 0");
  CHECK(process_names[4] == "rank 4: stage 1, tp 0, cp 0, dp 0");
}

// Issue 33: arrows from each pipeline send to its receive and from a collective to what waited
// for it; slices carry what they did; one memory value per timestamp.
TEST_CASE("cli::Simulate: the trace links sends to receives and slices carry args") {
  const loom::testing::TempDir dir("trace_flows");
  const auto doc = small_trace(dir);
  struct Slice {
    int pid, tid;
    double ts, dur;
    std::string name, cat;
  };
  std::vector<Slice> sends, receives;
  std::map<int, std::pair<nlohmann::json, nlohmann::json>> flows;  // id -> (s, f)
  std::map<std::pair<int, double>, int> counters;                  // (pid, ts) -> values
  int collectives_with_args = 0, computes_with_args = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      const Slice s{e["pid"], e["tid"], e["ts"], e["dur"], e["name"], e["cat"]};
      if (s.cat == "pp" && s.name.rfind("send-", 0) == 0) sends.push_back(s);
      if (s.cat == "pp" && s.name.rfind("recv-", 0) == 0) receives.push_back(s);
      if (!e.contains("args")) continue;
      const auto& a = e["args"];
      if (a.contains("op") && a.contains("bytes") && a.contains("group_size") &&
          a.contains("ranks"))
        ++collectives_with_args;
      if (a.contains("pass") && a.contains("micro_batch")) ++computes_with_args;
    } else if (ph == "s") {
      flows[e["id"].get<int>()].first = e;
    } else if (ph == "f") {
      CHECK(e["bp"] == "e");
      flows[e["id"].get<int>()].second = e;
    } else if (ph == "C") {
      ++counters[{e["pid"].get<int>(), e["ts"].get<double>()}];
    }
  }
  REQUIRE(sends.size() == 8);
  // Every send has an arrow that starts at it and ends on its receive's track.
  for (const Slice& send : sends) {
    int found = 0;
    for (const auto& [id, sf] : flows) {
      const auto& [s, f] = sf;
      if (s.is_null() || f.is_null() || s["cat"] != "pp-flow") continue;
      if (s["pid"] != send.pid || s["tid"] != send.tid || s["ts"].get<double>() != send.ts)
        continue;
      for (const Slice& r : receives)
        found += f["pid"] == r.pid && f["tid"] == r.tid && f["ts"].get<double>() >= r.ts &&
                 f["ts"].get<double>() <= r.ts + r.dur;
    }
    CHECK(found >= 1);
  }
  int dependencies = 0;
  for (const auto& [id, sf] : flows) {
    CHECK(!sf.first.is_null());
    CHECK(!sf.second.is_null());
    if (!sf.first.is_null() && sf.first["cat"] == "dependency") ++dependencies;
    if (!sf.first.is_null() && !sf.second.is_null())
      CHECK(sf.second["ts"].get<double>() >= sf.first["ts"].get<double>());
  }
  CHECK(dependencies > 0);  // TP collectives to the compute that waited for them
  CHECK(collectives_with_args > 0);
  CHECK(computes_with_args > 0);
  for (const auto& [key, values] : counters) CHECK(values == 1);
}
