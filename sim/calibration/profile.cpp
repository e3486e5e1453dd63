#include "sim/calibration/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "common/document.hpp"
#include "common/error.hpp"
#include "common/file_output.hpp"
#include "common/json_util.hpp"
#include "sim/calibration/network_fit_json.hpp"
#include "sim/calibration/trace_summary_json.hpp"

namespace loom::calibration {

namespace {

constexpr const char* FORMAT_NAME = "loom-calibration";
constexpr double US = 1e-6;  // the file keeps nccl-tests' microseconds

auto key_of(const CollectiveTable& t) {
  return std::make_tuple(t.op, t.group_size, t.nodes);
}

std::string describe(const CollectiveTable& t) {
  return fmt::format("{} on {} ranks over {} node{}", sim::to_string(t.op), t.group_size, t.nodes,
                     t.nodes == 1 ? "" : "s");
}

CollectivePoint read_point(ObjectReader r) {
  CollectivePoint p;
  p.bytes = static_cast<double>(r.get_positive_int("bytes"));
  const double time_us = r.get_number("time_us");
  if (!(time_us > 0) || !std::isfinite(time_us))
    r.fail("time_us", fmt::format("{}", time_us), "a time > 0");
  p.seconds = time_us * US;
  if (r.has("out_of_place_us")) p.out_of_place_seconds = r.get_number("out_of_place_us") * US;
  if (r.has("in_place_us")) p.in_place_seconds = r.get_number("in_place_us") * US;
  p.source = r.get_string_or("source", "");
  p.weight = r.get_number_or("weight", 1);
  if (!(p.weight >= 0 && p.weight <= 1))
    r.fail("weight", fmt::format("{}", p.weight), "a weight from 0 to 1");
  p.out_of_place_outlier = r.get_bool_or("out_of_place_outlier", false);
  p.in_place_outlier = r.get_bool_or("in_place_outlier", false);
  r.finish();
  return p;
}

CollectiveTable read_table(ObjectReader r, const std::string& file) {
  CollectiveTable t;
  t.op = sim::parse_collective_op(r.get_string("op"), r.pointer_of("op"));
  t.group_size = static_cast<int>(r.get_int_in_range("group_size", 1, 1 << 24));
  t.nodes = static_cast<int>(r.get_int_in_range("nodes", 1, t.group_size));
  t.gpu = r.get_string_or("gpu", "");
  t.program = r.get_string_or("program", "");
  t.source = r.get_string_or("source", "");
  t.op_inferred_from = r.get_string_or("op_inferred_from", "");
  t.dtype = r.get_string_or("dtype", "");
  if (r.has("env")) {
    const auto& env = r.raw("env");
    for (const auto& [name, value] : env.items()) {
      if (!env.is_object() || !value.is_string()) {
        throw ConfigError::bad_value(file, r.pointer_of("env"), json_excerpt(env),
                                     "an object of NCCL_* names to strings");
      }
      t.env[name] = value.get<std::string>();
    }
  }
  if (r.has("forced")) {
    ObjectReader forced = r.child("forced");
    t.forced_algo = forced.get_string_or("algo", "");
    t.forced_proto = forced.get_string_or("proto", "");
    forced.finish();
  }
  const auto& points = r.raw("points");
  const std::string pointer = r.pointer_of("points");
  if (!points.is_array() || points.empty()) {
    throw ConfigError::bad_value(file, pointer, json_excerpt(points),
                                 "a non-empty array of points");
  }
  for (size_t i = 0; i < points.size(); ++i) {
    CollectivePoint p = read_point(ObjectReader(points[i], file, fmt::format("{}/{}", pointer, i)));
    if (!t.points.empty() && !(p.bytes > t.points.back().bytes)) {
      throw ConfigError::bad_value(file, fmt::format("{}/{}/bytes", pointer, i),
                                   fmt::format("{:.0f}", p.bytes),
                                   "sizes in increasing order, each once");
    }
    t.points.push_back(std::move(p));
  }
  r.finish();
  return t;
}

constexpr topo::DType DTYPES[] = {topo::DType::FP32, topo::DType::TF32, topo::DType::BF16,
                                  topo::DType::FP16, topo::DType::FP8};

double read_factor(ObjectReader& r, std::string_view key) {
  const double x = r.get_number(key);
  if (!(x > 0) || !std::isfinite(x)) r.fail(key, fmt::format("{}", x), "a factor > 0");
  return x;
}

FitFactors read_factors(ObjectReader r) {
  FitFactors f;
  if (r.has("compute_efficiency")) {
    ObjectReader c = r.child("compute_efficiency");
    for (topo::DType d : DTYPES) {
      if (c.has(std::string(loom::to_string(d))))
        f.compute_efficiency[topo::dtype_index(d)] =
            read_factor(c, std::string(loom::to_string(d)));
    }
    c.finish();
  }
  if (r.has("memory_bound_time")) f.memory_bound_time = read_factor(r, "memory_bound_time");
  if (r.has("collective_time")) f.collective_time = read_factor(r, "collective_time");
  for (auto [key, field] : {std::pair{"nvlink_efficiency", &f.nvlink_efficiency},
                            std::pair{"network_efficiency", &f.network_efficiency}}) {
    if (!r.has(key)) continue;
    *field = read_factor(r, key);
    if (**field > 1) r.fail(key, fmt::format("{}", **field), "an efficiency in (0, 1]");
  }
  if (r.has("host_launch_time")) f.host_launch_time = read_factor(r, "host_launch_time");
  if (r.has("fit")) {
    ObjectReader fit = r.child("fit");
    f.runs = fit.get_string_or("runs", "");
    f.run_count = static_cast<int>(fit.get_int_in_range_or("run_count", 0, 1 << 30, 0));
    f.mape_pct = fit.get_number_or("mape_pct", 0);
    if (fit.has("loo_mape_pct")) f.loo_mape_pct = fit.get_number("loo_mape_pct");
    fit.finish();
  }
  r.finish();
  return f;
}

OrderedJson factors_json(const FitFactors& f) {
  OrderedJson j;
  OrderedJson compute = OrderedJson::object();
  for (topo::DType d : DTYPES) {
    if (const auto& x = f.compute_efficiency[topo::dtype_index(d)])
      compute[std::string(loom::to_string(d))] = *x;
  }
  if (!compute.empty()) j["compute_efficiency"] = compute;
  if (f.memory_bound_time) j["memory_bound_time"] = *f.memory_bound_time;
  if (f.collective_time) j["collective_time"] = *f.collective_time;
  if (f.nvlink_efficiency) j["nvlink_efficiency"] = *f.nvlink_efficiency;
  if (f.network_efficiency) j["network_efficiency"] = *f.network_efficiency;
  if (f.host_launch_time) j["host_launch_time"] = *f.host_launch_time;
  OrderedJson fit;
  fit["runs"] = f.runs;
  fit["run_count"] = f.run_count;
  fit["mape_pct"] = f.mape_pct;
  if (f.loo_mape_pct) fit["loo_mape_pct"] = *f.loo_mape_pct;
  j["fit"] = fit;
  return j;
}

// The median, min, max, spread and samples of a harness row into the out-parameters.
struct Timing {
  double seconds = 0;
  std::optional<double> min_seconds, max_seconds, spread;
  std::optional<std::int64_t> samples;
};

Timing read_timing(ObjectReader& r) {
  Timing t;
  const double time_us = r.get_number("time_us");
  if (!(time_us > 0) || !std::isfinite(time_us))
    r.fail("time_us", fmt::format("{}", time_us), "a time > 0");
  t.seconds = time_us * US;
  if (r.has("min_us")) t.min_seconds = r.get_number("min_us") * US;
  if (r.has("max_us")) t.max_seconds = r.get_number("max_us") * US;
  if (r.has("spread")) t.spread = r.get_number("spread");
  if (r.has("samples")) t.samples = r.get_count_or("samples", 0);
  return t;
}

template <typename Point>
void put_timing(OrderedJson& j, const Point& p) {
  j["time_us"] = p.seconds / US;
  if (p.min_seconds) j["min_us"] = *p.min_seconds / US;
  if (p.max_seconds) j["max_us"] = *p.max_seconds / US;
  if (p.spread) j["spread"] = *p.spread;
  if (p.samples) j["samples"] = *p.samples;
}

template <typename Point>
void set_timing(Point& p, const Timing& t) {
  p.seconds = t.seconds;
  p.min_seconds = t.min_seconds;
  p.max_seconds = t.max_seconds;
  p.spread = t.spread;
  p.samples = t.samples;
}

GemmPoint read_gemm(ObjectReader r) {
  GemmPoint g;
  const std::string dtype = r.get_enum("dtype", {"bf16", "fp16", "tf32", "fp8"});
  for (topo::DType d : DTYPES) {
    if (dtype == to_string(d)) g.dtype = d;
  }
  g.m = r.get_positive_int("m");
  g.n = r.get_positive_int("n");
  g.k = r.get_positive_int("k");
  set_timing(g, read_timing(r));
  g.algorithm = r.get_string_or("algorithm", "");
  r.allow({"tflops"});  // derived, for people reading the file
  r.finish();
  return g;
}

MemoryPoint read_memory(ObjectReader r) {
  MemoryPoint m;
  // d2d, h2d, d2h: cudaMemcpyAsync copies, shown but not used for the kernel model.
  m.kernel = r.get_enum("kernel", {"copy", "elementwise", "reduction", "d2d", "h2d", "d2h"});
  m.bytes = static_cast<double>(r.get_positive_int("bytes"));
  set_timing(m, read_timing(r));
  r.allow({"gb_per_s"});  // derived
  r.finish();
  return m;
}

// The array at `key` of the profile, each element read by `read_one`.
template <typename T, typename Read>
std::vector<T> read_array(ObjectReader& r, const std::string& path, std::string_view key,
                          Read read_one) {
  std::vector<T> out;
  const auto& rows = r.raw(key);
  const std::string pointer = r.pointer_of(key);
  if (!rows.is_array()) throw ConfigError::bad_value(path, pointer, json_excerpt(rows), "an array");
  for (size_t i = 0; i < rows.size(); ++i)
    out.push_back(read_one(ObjectReader(rows[i], path, fmt::format("{}/{}", pointer, i))));
  return out;
}

void put_harness_sections(OrderedJson& doc, const Profile& profile) {
  if (!profile.gemms.empty()) {
    OrderedJson rows = OrderedJson::array();
    for (const GemmPoint& g : profile.gemms) {
      OrderedJson j = {
          {"dtype", std::string(to_string(g.dtype))}, {"m", g.m}, {"n", g.n}, {"k", g.k}};
      put_timing(j, g);
      j["tflops"] = g.flops_per_second() / 1e12;
      j["algorithm"] = g.algorithm;
      rows.push_back(j);
    }
    doc["gemm"] = rows;
  }
  if (!profile.memory.empty()) {
    OrderedJson rows = OrderedJson::array();
    for (const MemoryPoint& m : profile.memory) {
      OrderedJson j = {{"kernel", m.kernel}, {"bytes", static_cast<std::int64_t>(m.bytes)}};
      put_timing(j, m);
      j["gb_per_s"] = m.bytes_per_second() / 1e9;
      rows.push_back(j);
    }
    doc["memory"] = rows;
  }
}

}  // namespace

topo::MeasuredKernels measured_kernels(const Profile& profile) {
  topo::MeasuredKernels out;
  for (const GemmPoint& g : profile.gemms) out.gemms.push_back({g.dtype, g.m, g.n, g.k, g.seconds});
  // The streaming plateau: the largest size of the elementwise kernel (read + write, as a
  // model's elementwise ops are), else of the copy kernel.
  for (const char* kernel : {"elementwise", "copy"}) {
    const MemoryPoint* largest = nullptr;
    for (const MemoryPoint& m : profile.memory) {
      if (m.kernel == kernel && (!largest || m.bytes > largest->bytes)) largest = &m;
    }
    if (largest) {
      out.memory_Bps = largest->bytes_per_second();
      break;
    }
  }
  return out;
}

bool has_kernel_measurements(const Profile& profile) {
  const topo::MeasuredKernels k = measured_kernels(profile);
  return !k.gemms.empty() || k.memory_Bps.has_value();
}

topo::KernelScales kernel_scales(const FitFactors& factors) {
  topo::KernelScales s;
  for (size_t i = 0; i < s.compute.size(); ++i)
    s.compute[i] = factors.compute_efficiency[i].value_or(1.0);
  s.memory_bound = factors.memory_bound_time.value_or(1.0);
  return s;
}

void add_table(Profile& profile, CollectiveTable table) {
  std::sort(table.points.begin(), table.points.end(),
            [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
  for (CollectiveTable& have : profile.collectives) {
    if (key_of(have) != key_of(table)) continue;
    for (const CollectivePoint& p : table.points) {
      for (const CollectivePoint& q : have.points) {
        if (p.bytes == q.bytes) {
          throw CalibrationError(fmt::format(
              "{} and {} both measure {} at {:.0f} B; import one of them (or average them "
              "yourself)",
              q.source, p.source, describe(table), p.bytes));
        }
      }
    }
    have.points.insert(have.points.end(), table.points.begin(), table.points.end());
    std::sort(have.points.begin(), have.points.end(),
              [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
    if (have.source != table.source) have.source += ", " + table.source;
    return;
  }
  auto at = std::upper_bound(
      profile.collectives.begin(), profile.collectives.end(), table,
      [](const CollectiveTable& a, const CollectiveTable& b) { return key_of(a) < key_of(b); });
  profile.collectives.insert(at, std::move(table));
}

std::string profile_to_json(const Profile& profile) {
  OrderedJson doc;
  doc["format"] = FORMAT_NAME;
  doc["version"] = PROFILE_VERSION;
  if (!profile.harness_json.empty()) doc["harness"] = OrderedJson::parse(profile.harness_json);
  if (!profile.device_json.empty()) doc["device"] = OrderedJson::parse(profile.device_json);
  if (!profile.launch_json.empty()) doc["launch"] = OrderedJson::parse(profile.launch_json);
  if (!profile.attention_json.empty())
    doc["attention"] = OrderedJson::parse(profile.attention_json);
  OrderedJson tables = OrderedJson::array();
  for (const CollectiveTable& t : profile.collectives) {
    OrderedJson j;
    j["op"] = sim::to_string(t.op);
    j["group_size"] = t.group_size;
    j["nodes"] = t.nodes;
    j["gpu"] = t.gpu;
    j["program"] = t.program;
    j["source"] = t.source;
    if (!t.op_inferred_from.empty()) j["op_inferred_from"] = t.op_inferred_from;
    if (!t.dtype.empty()) j["dtype"] = t.dtype;
    if (!t.env.empty()) j["env"] = t.env;
    if (!t.forced_algo.empty()) j["forced"]["algo"] = t.forced_algo;
    if (!t.forced_proto.empty()) j["forced"]["proto"] = t.forced_proto;
    OrderedJson points = OrderedJson::array();
    for (const CollectivePoint& p : t.points) {
      OrderedJson q;
      q["bytes"] = static_cast<std::int64_t>(p.bytes);
      q["time_us"] = p.seconds / US;
      if (p.out_of_place_seconds) q["out_of_place_us"] = *p.out_of_place_seconds / US;
      if (p.in_place_seconds) q["in_place_us"] = *p.in_place_seconds / US;
      q["source"] = p.source;
      if (p.weight != 1) q["weight"] = p.weight;
      if (p.out_of_place_outlier) q["out_of_place_outlier"] = true;
      if (p.in_place_outlier) q["in_place_outlier"] = true;
      points.push_back(q);
    }
    j["points"] = points;
    tables.push_back(j);
  }
  doc["collectives"] = tables;
  // Only when there are any: a profile of nccl-tests logs alone reads as it always did.
  if (!profile.traces.empty()) {
    OrderedJson traces = OrderedJson::array();
    for (const TraceSummary& t : profile.traces) traces.push_back(trace_summary_to_json(t));
    doc["trace_summaries"] = traces;
  }
  put_harness_sections(doc, profile);
  if (profile.factors) doc["factors"] = factors_json(*profile.factors);
  if (profile.network) doc["network"] = fitted_network_to_json(*profile.network);
  return dump_json(doc, 2) + "\n";
}

void write_profile(const Profile& profile, const std::string& path) {
  // Replaced in one step: a full disk leaves the old profile, not a truncated one.
  if (const auto why = replace_file(path, profile_to_json(profile))) {
    throw CalibrationError(fmt::format(
        "{}: cannot write the profile ({}); check the folder exists and is writable", path, *why));
  }
}

Profile read_profile(const std::string& path) {
  return parse_profile(read_text_file(path, "calibration profile", MAX_MEASUREMENT_FILE_BYTES),
                       path);
}

Profile parse_profile(const std::string& text, const std::string& path) {
  const nlohmann::json json = parse_json_text(text, path);
  ObjectReader r(json, path, "");
  const std::string format = r.get_string("format");
  if (format != FORMAT_NAME) r.fail("format", "\"" + format + "\"", "\"loom-calibration\"");
  const std::int64_t version = r.get_int_in_range("version", 1, 1 << 20);
  if (version != PROFILE_VERSION) {
    r.fail("version", std::to_string(version),
           fmt::format("{} (this loom reads version {} profiles; re-import the measurements)",
                       PROFILE_VERSION, PROFILE_VERSION));
  }
  Profile profile;
  // loom-harness's description of itself and the device: kept, not used.
  if (r.has("harness")) profile.harness_json = r.raw("harness").dump();
  if (r.has("device")) profile.device_json = r.raw("device").dump();
  if (r.has("launch")) profile.launch_json = r.raw("launch").dump();
  if (r.has("attention")) profile.attention_json = r.raw("attention").dump();
  if (r.has("gemm")) profile.gemms = read_array<GemmPoint>(r, path, "gemm", read_gemm);
  // Duplicates found through a map: a profile may hold many rows.
  std::map<std::tuple<topo::DType, std::int64_t, std::int64_t, std::int64_t>, size_t> gemm_rows;
  for (size_t i = 0; i < profile.gemms.size(); ++i) {
    const GemmPoint& g = profile.gemms[i];
    const auto [it, added] = gemm_rows.emplace(std::tuple{g.dtype, g.m, g.n, g.k}, i);
    if (!added) {
      throw ConfigError::bad_value(
          path, fmt::format("/gemm/{}", i),
          fmt::format("{} {}x{}x{} (also /gemm/{})", to_string(g.dtype), g.m, g.n, g.k, it->second),
          "one row per (dtype, m, n, k)");
    }
  }
  if (r.has("memory")) profile.memory = read_array<MemoryPoint>(r, path, "memory", read_memory);
  const auto& tables = r.raw("collectives");
  if (!tables.is_array()) {
    throw ConfigError::bad_value(path, "/collectives", json_excerpt(tables), "an array of tables");
  }
  std::set<decltype(key_of(CollectiveTable{}))> table_keys;
  for (size_t i = 0; i < tables.size(); ++i) {
    CollectiveTable t =
        read_table(ObjectReader(tables[i], path, fmt::format("/collectives/{}", i)), path);
    if (!table_keys.insert(key_of(t)).second) {
      throw ConfigError::bad_value(path, fmt::format("/collectives/{}", i), describe(t),
                                   "one table per (op, group_size, nodes)");
    }
    profile.collectives.push_back(std::move(t));
  }
  if (r.has("trace_summaries")) {
    const auto& traces = r.raw("trace_summaries");
    if (!traces.is_array()) {
      throw ConfigError::bad_value(path, "/trace_summaries", json_excerpt(traces),
                                   "an array of summaries");
    }
    for (size_t i = 0; i < traces.size(); ++i) {
      profile.traces.push_back(
          trace_summary_from_json(traces[i], path, fmt::format("/trace_summaries/{}", i)));
    }
  }
  if (r.has("factors")) profile.factors = read_factors(r.child("factors"));
  if (r.has("network")) profile.network = read_fitted_network(r.child("network"));
  r.finish();
  return profile;
}

std::optional<double> interpolate(const CollectiveTable& table, double bytes) {
  const auto& pts = table.points;
  // A point none of whose measured times follows the trend (weight 0) is skipped.
  const auto sound = [](const CollectivePoint& p) { return p.weight > 0; };
  const auto first = std::find_if(pts.begin(), pts.end(), sound);
  const auto last = std::find_if(pts.rbegin(), pts.rend(), sound);
  if (first == pts.end() || !(bytes >= first->bytes) || !(bytes <= last->bytes)) {
    return std::nullopt;
  }
  auto hi = std::lower_bound(first, last.base(), bytes,
                             [](const CollectivePoint& p, double b) { return p.bytes < b; });
  while (!sound(*hi)) ++hi;  // stops at `last` at the latest
  if (hi->bytes == bytes) return hi->seconds;
  auto lo = hi - 1;
  while (!sound(*lo)) --lo;  // stops at `first` at the latest
  // Power law between neighbours: straight in log-log, as a bandwidth curve looks.
  const double f = std::log(bytes / lo->bytes) / std::log(hi->bytes / lo->bytes);
  return std::exp(std::log(lo->seconds) + f * std::log(hi->seconds / lo->seconds));
}

const CollectiveTable* MeasuredCollectives::find(sim::CollectiveOp op, int group_size,
                                                 int nodes) const {
  for (const CollectiveTable& t : profile_.collectives) {
    if (t.op == op && t.group_size == group_size && t.nodes == nodes) return &t;
  }
  return nullptr;
}

std::optional<double> MeasuredCollectives::seconds(sim::CollectiveOp op, int group_size, int nodes,
                                                   double bytes) const {
  const CollectiveTable* table = find(op, group_size, nodes);
  return table ? interpolate(*table, bytes) : std::nullopt;
}

}  // namespace loom::calibration
