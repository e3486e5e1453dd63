#include "sim/calibration/trace_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "sim/calibration/trace_summary_json.hpp"

namespace loom::calibration {

namespace {

constexpr double US = 1e-6;  // the file keeps the trace's microseconds

std::vector<std::string> make_class_names() {
  std::vector<std::string> names = {"gemm", "attention", "normalization", "elementwise"};
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv",
                         "broadcast", "reduce", "gather", "scatter", "barrier", "unknown"}) {
    names.push_back(std::string("nccl:") + op);
  }
  for (const char* name : {"memcpy", "memset", "other"}) names.emplace_back(name);
  return names;
}

double non_negative_us(ObjectReader& r, std::string_view key) {
  const double us = r.get_number(key);
  if (!(us >= 0) || !std::isfinite(us)) r.fail(key, fmt::format("{}", us), "a time >= 0");
  return us * US;
}

template <class F>
void for_each_in(ObjectReader& r, std::string_view key, F&& read) {
  if (!r.has(key)) return;
  const auto& array = r.raw(key);
  if (!array.is_array()) r.fail(key, json_excerpt(array), "an array");
  for (size_t i = 0; i < array.size(); ++i) {
    read(ObjectReader(array[i], r.file(), fmt::format("{}/{}", r.pointer_of(key), i)));
  }
}

TraceStep read_step(ObjectReader r) {
  TraceStep step;
  step.name = r.get_string("name");
  step.wall_seconds = non_negative_us(r, "wall_us");
  step.busy_seconds = non_negative_us(r, "busy_us");
  for_each_in(r, "classes", [&](ObjectReader c) {
    ClassTime t;
    t.name = c.get_string("class");
    if (!is_kernel_class(t.name)) c.fail("class", t.name, "a kernel class (docs/calibration.md)");
    t.kernels = static_cast<int>(c.get_int_in_range("kernels", 0, 1 << 30));
    t.seconds = non_negative_us(c, "time_us");
    c.finish();
    step.classes.push_back(std::move(t));
  });
  r.finish();
  return step;
}

GemmFigure read_gemm(ObjectReader r) {
  GemmFigure g;
  g.op = r.get_string("op");
  g.dtype = r.get_string("dtype");
  g.batch = r.get_positive_int("batch");
  g.m = r.get_positive_int("m");
  g.n = r.get_positive_int("n");
  g.k = r.get_positive_int("k");
  g.calls = static_cast<int>(r.get_int_in_range("calls", 1, 1 << 30));
  g.seconds = non_negative_us(r, "total_us");
  r.allow({"mean_us", "tflops"});  // derived, written for people reading the file
  r.finish();
  return g;
}

CollectiveFigure read_collective(ObjectReader r) {
  CollectiveFigure c;
  c.op = sim::parse_collective_op(r.get_string("op"), r.pointer_of("op"));
  c.group_size = static_cast<int>(r.get_int_in_range("group_size", 1, 1 << 24));
  c.dtype = r.get_string("dtype");
  c.bytes = static_cast<double>(r.get_count_or("bytes", 0));
  c.calls = static_cast<int>(r.get_int_in_range("calls", 1, 1 << 30));
  c.seconds = non_negative_us(r, "total_us");
  r.allow({"mean_us", "busbw_gbps"});
  r.finish();
  return c;
}

CopyFigure read_copy(ObjectReader r) {
  CopyFigure c;
  c.kind = r.get_string("kind");
  c.calls = static_cast<int>(r.get_int_in_range("calls", 1, 1 << 30));
  c.bytes = static_cast<double>(r.get_count_or("bytes", 0));
  c.seconds = non_negative_us(r, "total_us");
  r.allow({"gbps"});
  r.finish();
  return c;
}

}  // namespace

const std::vector<std::string>& kernel_class_names() {
  static const std::vector<std::string> names = make_class_names();
  return names;
}

bool is_kernel_class(std::string_view name) {
  const auto& names = kernel_class_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

int kernel_class_rank(std::string_view name) {
  const auto& names = kernel_class_names();
  return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
}

double CollectiveFigure::bus_bytes_per_second() const {
  if (!(seconds > 0) || calls == 0) return 0;
  return bytes * calls / seconds * sim::bus_bandwidth_factor(op, group_size);
}

std::vector<ClassMean> TraceSummary::per_step() const {
  std::map<int, ClassMean> by_rank;
  for (const TraceStep& step : steps) {
    for (const ClassTime& c : step.classes) {
      ClassMean& m = by_rank[kernel_class_rank(c.name)];
      m.name = c.name;
      m.kernels += c.kernels;
      m.seconds += c.seconds;
    }
  }
  std::vector<ClassMean> out;
  for (auto& [rank, m] : by_rank) {
    m.kernels /= static_cast<double>(steps.size());
    m.seconds /= static_cast<double>(steps.size());
    out.push_back(std::move(m));
  }
  return out;
}

nlohmann::ordered_json trace_summary_to_json(const TraceSummary& s) {
  nlohmann::ordered_json j;
  j["source"] = s.source;
  j["format"] = s.format;
  j["gpu"] = s.gpu;
  if (s.rank >= 0) j["rank"] = s.rank;
  if (s.world_size > 0) j["world_size"] = s.world_size;
  j["activities_outside_steps"] = s.activities_outside_steps;
  j["steps"] = nlohmann::ordered_json::array();
  for (const TraceStep& step : s.steps) {
    nlohmann::ordered_json js{{"name", step.name},
                              {"wall_us", step.wall_seconds / US},
                              {"busy_us", step.busy_seconds / US}};
    js["classes"] = nlohmann::ordered_json::array();
    for (const ClassTime& c : step.classes) {
      js["classes"].push_back(
          {{"class", c.name}, {"kernels", c.kernels}, {"time_us", c.seconds / US}});
    }
    j["steps"].push_back(js);
  }
  j["gemms"] = nlohmann::ordered_json::array();
  for (const GemmFigure& g : s.gemms) {
    j["gemms"].push_back({{"op", g.op},
                          {"dtype", g.dtype},
                          {"batch", g.batch},
                          {"m", g.m},
                          {"n", g.n},
                          {"k", g.k},
                          {"calls", g.calls},
                          {"total_us", g.seconds / US},
                          {"mean_us", g.seconds / g.calls / US},
                          {"tflops", g.flops_per_second() / 1e12}});
  }
  j["collectives"] = nlohmann::ordered_json::array();
  for (const CollectiveFigure& c : s.collectives) {
    j["collectives"].push_back({{"op", sim::to_string(c.op)},
                                {"group_size", c.group_size},
                                {"dtype", c.dtype},
                                {"bytes", static_cast<std::int64_t>(c.bytes)},
                                {"calls", c.calls},
                                {"total_us", c.seconds / US},
                                {"mean_us", c.seconds / c.calls / US},
                                {"busbw_gbps", c.bus_bytes_per_second() / 1e9}});
  }
  j["copies"] = nlohmann::ordered_json::array();
  for (const CopyFigure& c : s.copies) {
    j["copies"].push_back({{"kind", c.kind},
                           {"calls", c.calls},
                           {"bytes", static_cast<std::int64_t>(c.bytes)},
                           {"total_us", c.seconds / US},
                           {"gbps", c.bytes_per_second() / 1e9}});
  }
  return j;
}

TraceSummary trace_summary_from_json(const nlohmann::json& json, const std::string& file,
                                     const std::string& pointer) {
  ObjectReader r(json, file, pointer);
  TraceSummary s;
  s.source = r.get_string_or("source", "");
  s.format = r.get_enum("format", {"kineto"});
  s.gpu = r.get_string_or("gpu", "");
  s.rank = static_cast<int>(r.get_int_in_range_or("rank", 0, 1 << 24, -1));
  s.world_size = static_cast<int>(r.get_int_in_range_or("world_size", 1, 1 << 24, 0));
  s.activities_outside_steps =
      static_cast<int>(r.get_int_in_range_or("activities_outside_steps", 0, 1 << 30, 0));
  for_each_in(r, "steps", [&](ObjectReader o) { s.steps.push_back(read_step(std::move(o))); });
  for_each_in(r, "gemms", [&](ObjectReader o) { s.gemms.push_back(read_gemm(std::move(o))); });
  for_each_in(r, "collectives",
              [&](ObjectReader o) { s.collectives.push_back(read_collective(std::move(o))); });
  for_each_in(r, "copies", [&](ObjectReader o) { s.copies.push_back(read_copy(std::move(o))); });
  r.finish();
  return s;
}

}  // namespace loom::calibration
