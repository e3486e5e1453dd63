// The Kineto importer on generated traces of growing size (issue 34, items 3 and 4): the work
// grows linearly with the events (timed as a ratio of CPU times: twice the events in at most
// 2.5x the time, never a wall-clock limit), and a trace of more JSON values than loom parses is bad
// input naming MAX_JSON_VALUES, found before nlohmann allocates anything.
#include <doctest/doctest.h>

#include <algorithm>
#include <ctime>  // clock_gettime (POSIX)
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/limits.hpp"
#include "sim/calibration/kineto.hpp"

using namespace loom;
using namespace loom::calibration;

namespace {

// `steps` profiler steps: step i's CPU span is [100 i, 100 i + 50] us, its GPU annotation
// [100 i + 60, 100 i + 140], and one kernel at 100 i + 70 without a launch (no correlation),
// so only the GPU annotation places it in step i.
std::string uncorrelated_trace(int steps) {
  std::string events;
  for (int i = 0; i < steps; ++i) {
    const std::string name = "ProfilerStep#" + std::to_string(i);
    const std::string t = std::to_string(100 * i);
    if (i > 0) events += ",\n";
    events += R"({"ph": "X", "cat": "user_annotation", "name": ")" + name +
              R"(", "pid": 1, "tid": 1, "ts": )" + t + R"(, "dur": 50},
{"ph": "X", "cat": "gpu_user_annotation", "name": ")" +
              name + R"(", "pid": 0, "tid": 7, "ts": )" + std::to_string(100 * i + 60) +
              R"(, "dur": 80},
{"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7, "ts": )" +
              std::to_string(100 * i + 70) + R"(, "dur": 5, "args": {"device": 0}})";
  }
  return R"({"schemaVersion": 1, "traceEvents": [)" + events + "]}";
}

// CPU seconds of this thread to import `text` once: time other processes take from the
// machine does not count.
double import_seconds(const std::string& text) {
  const auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  std::vector<std::string> notes;
  const double start = cpu_now();
  const TraceSummary s = parse_kineto(text, "t.json", notes);
  const double took = cpu_now() - start;
  CHECK(s.activities_outside_steps == 0);
  return took;
}

}  // namespace

TEST_CASE("calibration::Kineto: kernels placed by GPU step annotations, each in its own step") {
  std::vector<std::string> notes;
  const TraceSummary s = parse_kineto(uncorrelated_trace(30), "t.json", notes);
  REQUIRE(s.steps.size() == 30);
  CHECK(s.activities_outside_steps == 0);
  for (const TraceStep& step : s.steps) {
    REQUIRE(step.classes.size() == 1);
    CHECK(step.classes[0].kernels == 1);
  }
}

TEST_CASE("calibration::Kineto: placing uncorrelated kernels is not quadratic in the steps") {
  // Each kernel used to scan every GPU step annotation and every step's name: 20k steps
  // and kernels took 11 s, 2x the input 4x the time. Now a sweep by time: about 2x.
  // The fastest of five imports of each, interleaved, so that other load on the machine
  // slows both alike.
  const std::string small = uncorrelated_trace(8000), large = uncorrelated_trace(16000);
  double t_small = 1e30, t_large = 1e30;
  for (int run = 0; run < 5; ++run) {
    t_small = std::min(t_small, import_seconds(small));
    t_large = std::min(t_large, import_seconds(large));
  }
  INFO("8000 steps " << t_small << " s, 16000 steps " << t_large << " s");
  CHECK(t_large <= 2.5 * t_small);
}

TEST_CASE("calibration::Kineto: a trace of more JSON values than MAX_JSON_VALUES is bad input") {
  // The issue's trace: 510 MB of "{}," (a 495 KB .json.gz) became ~17 GB of parsed JSON.
  // Here zeros (3 bytes of memory each had it been parsed) just past the limit: the root
  // object, the traceEvents array and MAX_JSON_VALUES - 1 numbers are one value too many.
  std::string text = R"({"traceEvents": [)";
  text.reserve(static_cast<size_t>(2 * MAX_JSON_VALUES + 32));
  for (std::int64_t i = 0; i < MAX_JSON_VALUES - 1; ++i) text += i == 0 ? "0" : ",0";
  text += "]}";
  std::vector<std::string> notes;
  std::string message;
  try {
    parse_kineto(text, "big.json", notes);
  } catch (const Error& e) {
    CHECK(e.exit_code() == ExitCode::BAD_INPUT);
    message = e.what();
  }
  CHECK(message.find("big.json:1:") == 0);
  CHECK(message.find("more than 16777216 values (loom's limit MAX_JSON_VALUES") !=
        std::string::npos);
}
