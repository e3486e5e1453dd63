// `loom simulate --trace` writes a Chrome-trace document: processes named by their place in
// the plan, slices on one track never overlap, pipeline sends and receives are slices, and
// memory counters are whole bytes. Runs the loom binary; writes into a unique temp dir.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
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

namespace {

struct Slice {
  int pid = 0;
  double ts = 0, dur = 0;
  std::string name, thread;
  nlohmann::json args;
  double end() const { return ts + dur; }
};

// The "X" slices of `doc` with their thread names.
std::vector<Slice> slices_of(const nlohmann::json& doc) {
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  std::vector<Slice> out;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    Slice s;
    s.pid = e["pid"];
    s.ts = e["ts"];
    s.dur = e["dur"];
    s.name = e["name"];
    s.thread = threads[{s.pid, e["tid"].get<int>()}];
    if (e.contains("args")) s.args = e["args"];
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json trace_of(const loom::testing::TempDir& dir, const std::string& flags) {
  const std::string path = dir.file("trace.json");
  const std::string cmd =
      std::string(LOOM_BINARY) + " simulate " + flags + " --trace " + path + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The pass slice (forward or backward on the compute thread) of rank `pid` enclosing `c`.
const Slice* pass_of(const std::vector<Slice>& all, const Slice& c) {
  for (const Slice& s : all)
    if (s.pid == c.pid && s.thread == "compute" && s.args.contains("collectives") &&
        s.ts <= c.ts + 1e-3 && c.end() <= s.end() + 1e-3)
      return &s;
  return nullptr;
}

}  // namespace

// Issue 33: a pass's TP collectives are slices of their own on a "tp" thread, among the pass's
// GEMMs, rather than one lump after its compute.
TEST_CASE("cli::Simulate: a pass's TP collectives are slices of their own inside the pass") {
  const loom::testing::TempDir dir("trace_tp");
  const auto all = slices_of(small_trace(dir));
  std::map<const Slice*, std::vector<const Slice*>> by_pass;
  for (const Slice& s : all) {
    // No lump of collectives is left on the compute thread.
    if (s.thread == "compute") CHECK(s.name.find("-comm") == std::string::npos);
    if (s.thread != "tp") continue;
    CHECK(s.args["op"] == "all_reduce");  // no sequence parallelism: all-reduces
    CHECK(std::stoll(s.args["bytes"].get<std::string>()) > 0);
    CHECK(s.args["group_size"] == "2");
    CHECK(s.args["ranks"] == (s.pid == 0 ? "0,1" : "4,5"));
    CHECK(s.args["overlap"] == "none");
    CHECK(std::stod(s.args["exposed_us"].get<std::string>()) ==
          doctest::Approx(s.dur).epsilon(1e-3));
    CHECK(s.args["hidden_us"] == "0.000");
    const Slice* pass = pass_of(all, s);
    REQUIRE(pass != nullptr);  // inside its pass's interval
    CHECK(pass->args["micro_batch"] == s.args["micro_batch"]);
    by_pass[pass].push_back(&s);
  }
  // Every pass of both stages' representatives (4 micro-batches, a forward and a backward
  // each) has its collectives: stage 0 runs the embedding (one all-reduce of the
  // vocabulary-parallel lookup) and 12 layers (an all-reduce after attention and one after the
  // MLP each); stage 1 the other 12 layers and the head (one of the vocabulary-parallel
  // cross-entropy).
  REQUIRE(by_pass.size() == 16);
  for (const auto& [pass, tp] : by_pass) {
    CHECK(tp.size() == 25u);
    CHECK(pass->args["collectives"] == std::to_string(tp.size()));
    // Spread over the pass among its GEMMs, not lumped at its end: the first starts in the
    // pass's first quarter, the last ends in its last quarter, and none overlaps another.
    std::vector<const Slice*> in_order = tp;
    std::sort(in_order.begin(), in_order.end(),
              [](const Slice* a, const Slice* b) { return a->ts < b->ts; });
    CHECK(in_order.front()->ts < pass->ts + pass->dur / 4);
    CHECK(in_order.back()->end() > pass->ts + pass->dur * 3 / 4);
    for (size_t i = 1; i < in_order.size(); ++i)
      CHECK(in_order[i]->ts >= in_order[i - 1]->end() - 1e-3);
  }
}

// Under --tp-comm-overlap (with sequence parallelism) each all-gather and reduce-scatter runs
// beside the GEMM it overlaps and says what of it stayed exposed.
TEST_CASE("cli::Simulate: overlapped TP collectives say what they hide and what stays exposed") {
  const loom::testing::TempDir dir("trace_tp_overlap");
  const auto all = slices_of(trace_of(
      dir,
      "--model llama3-8b --cluster dgx-h100 --tp 4 --pp 2 --sp --tp-comm-overlap --gbs 4 --seq "
      "2048"));
  int overlapped = 0, slices = 0;
  for (const Slice& s : all) {
    if (s.thread != "tp") continue;
    ++slices;
    const Slice* pass = pass_of(all, s);
    REQUIRE(pass != nullptr);
    const std::string method = s.args["overlap"];
    if (method == "none") continue;
    ++overlapped;
    CHECK((method == "ring" || method == "pipeline" || method == "bulk"));
    CHECK(s.args.contains("overlaps_op"));
    const double seconds = s.dur;
    const double exposed = std::stod(s.args["exposed_us"].get<std::string>());
    const double hidden = std::stod(s.args["hidden_us"].get<std::string>());
    CHECK(exposed >= 0);
    CHECK(hidden >= 0);
    CHECK(exposed + hidden == doctest::Approx(seconds).epsilon(1e-3));
  }
  CHECK(slices > 0);
  CHECK(overlapped > 0);
}

// A zero-bubble schedule's backward without its weight gradients ("Bi"): its compute slice
// and its collectives name the same pass.
TEST_CASE("cli::Simulate: a Bi pass and its collectives name the same pass") {
  const loom::testing::TempDir dir("trace_bi");
  const auto all = slices_of(trace_of(
      dir, "--model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 8 --seq 512 --schedule zb"));
  int passes = 0, collectives = 0;
  for (const Slice& s : all) {
    if (s.thread == "compute" && s.name.rfind("Bi ", 0) == 0) {
      ++passes;
      CHECK(s.args["pass"] == "backward (input gradients)");
    }
    if (s.thread != "tp") continue;
    const Slice* pass = pass_of(all, s);
    REQUIRE(pass != nullptr);
    if (pass->name.rfind("Bi ", 0) != 0) continue;
    ++collectives;
    CHECK(s.args["pass"] == pass->args["pass"]);
  }
  CHECK(passes > 0);
  CHECK(collectives > 0);
}
