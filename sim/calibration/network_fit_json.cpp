#include "sim/calibration/network_fit_json.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"

namespace loom::calibration {

namespace {

constexpr double US = 1e-6;  // times in microseconds, as nccl-tests prints them

const std::vector<std::string>& param_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (int k = 0; k < NETWORK_PARAM_COUNT; ++k) n.push_back(to_string(NetworkParam(k)));
    return n;
  }();
  return names;
}

double positive(ObjectReader& r, std::string_view key) {
  const double x = r.get_number(key);
  if (!(x > 0) || !std::isfinite(x)) r.fail(key, fmt::format("{}", x), "a number > 0");
  return x;
}

double non_negative(ObjectReader& r, std::string_view key) {
  const double x = r.get_number(key);
  if (!(x >= 0) || !std::isfinite(x)) r.fail(key, fmt::format("{}", x), "a number >= 0");
  return x;
}

// The objects of array `key`, each read by `read_one`.
template <typename Read>
void each(ObjectReader& r, std::string_view key, Read read_one) {
  const auto& rows = r.raw(key);
  const std::string pointer = r.pointer_of(key);
  if (!rows.is_array())
    throw ConfigError::bad_value(r.file(), pointer, json_excerpt(rows), "an array");
  for (size_t i = 0; i < rows.size(); ++i)
    read_one(ObjectReader(rows[i], r.file(), fmt::format("{}/{}", pointer, i)));
}

NetworkParameter read_parameter(ObjectReader r) {
  NetworkParameter p;
  const std::string name = r.get_enum("name", param_names());
  for (int k = 0; k < NETWORK_PARAM_COUNT; ++k)
    if (name == to_string(NetworkParam(k))) p.param = NetworkParam(k);
  p.value = positive(r, "value");
  p.prior = positive(r, "default");
  p.lower = positive(r, "lower");
  p.upper = positive(r, "upper");
  if (!(p.lower <= p.value && p.value <= p.upper))
    r.fail("value", fmt::format("{}", p.value),
           fmt::format("a value in [lower {}, upper {}]", p.lower, p.upper));
  p.sigma = non_negative(r, "sigma");
  p.status = [&] {
    const std::string s =
        r.get_enum("status", {"fitted", "at_lower_bound", "at_upper_bound", "prior"});
    return parse_bound_status(s, r.pointer_of("status"));
  }();
  r.finish();
  return p;
}

NetworkRow read_row(ObjectReader r) {
  NetworkRow row;
  NetworkObservation& o = row.observation;
  o.op = sim::parse_collective_op(r.get_string("op"), r.pointer_of("op"));
  o.group_size = static_cast<int>(r.get_int_in_range("group_size", 1, 1 << 24));
  o.nodes = static_cast<int>(r.get_int_in_range("nodes", 1, o.group_size));
  o.bytes = static_cast<double>(r.get_positive_int("bytes"));
  o.algorithm =
      sim::parse_algorithm(r.get_string_or("algorithm", "auto"), r.pointer_of("algorithm"));
  o.weight = non_negative(r, "weight");
  o.seconds = positive(r, "measured_us") * US;
  row.uncalibrated_seconds = positive(r, "uncalibrated_us") * US;
  row.fitted_seconds = positive(r, "fitted_us") * US;
  const std::string role = r.get_enum("role", {"bandwidth", "latency", "mixed", "outlier"});
  for (RowRole x : {RowRole::BANDWIDTH, RowRole::LATENCY, RowRole::MIXED, RowRole::OUTLIER})
    if (role == to_string(x)) row.role = x;
  o.log = r.get_string_or("log", "");
  o.source = r.get_string_or("source", "");
  o.gpu = r.get_string_or("gpu", "");
  r.finish();
  return row;
}

TransferTable read_transfer(ObjectReader r) {
  TransferTable t;
  t.held_out = r.get_string("held_out");
  const auto& on = r.raw("fitted_on");
  if (!on.is_array())
    throw ConfigError::bad_value(r.file(), r.pointer_of("fitted_on"), json_excerpt(on),
                                 "an array of log names");
  for (const auto& name : on) {
    if (!name.is_string())
      throw ConfigError::bad_value(r.file(), r.pointer_of("fitted_on"), json_excerpt(name),
                                   "log names");
    t.fitted_on.push_back(name.get<std::string>());
  }
  t.op = sim::parse_collective_op(r.get_string("op"), r.pointer_of("op"));
  t.group_size = static_cast<int>(r.get_int_in_range("group_size", 1, 1 << 24));
  t.nodes = static_cast<int>(r.get_int_in_range("nodes", 1, t.group_size));
  each(r, "rows", [&](ObjectReader q) {
    TransferRow row;
    row.bytes = static_cast<double>(q.get_positive_int("bytes"));
    row.measured_busbw_GBps = non_negative(q, "measured_busbw_GBps");
    row.uncalibrated_busbw_GBps = non_negative(q, "uncalibrated_busbw_GBps");
    row.calibrated_busbw_GBps = non_negative(q, "calibrated_busbw_GBps");
    q.finish();
    t.rows.push_back(row);
  });
  r.finish();
  return t;
}

}  // namespace

OrderedJson fitted_network_to_json(const FittedNetwork& n) {
  OrderedJson j;
  j["cluster"] = n.cluster;
  j["gpu"] = n.gpu;
  j["measured_gpu"] = n.measured_gpu;
  j["fabric"] = n.fabric;
  j["rms_log_residual"] = n.rms_log_residual;
  j["iterations"] = n.iterations;
  OrderedJson params = OrderedJson::array();
  for (const auto& p : n.parameters) {
    params.push_back({{"name", to_string(p.param)},
                      {"value", p.value},
                      {"default", p.prior},
                      {"lower", p.lower},
                      {"upper", p.upper},
                      {"sigma", p.sigma},
                      {"status", to_string(p.status)}});
  }
  j["parameters"] = params;
  OrderedJson rows = OrderedJson::array();
  for (const auto& r : n.rows) {
    const NetworkObservation& o = r.observation;
    rows.push_back({{"op", sim::to_string(o.op)},
                    {"group_size", o.group_size},
                    {"nodes", o.nodes},
                    {"bytes", static_cast<std::int64_t>(o.bytes)},
                    {"algorithm", sim::to_string(o.algorithm)},
                    {"weight", o.weight},
                    {"measured_us", o.seconds / US},
                    {"uncalibrated_us", r.uncalibrated_seconds / US},
                    {"fitted_us", r.fitted_seconds / US},
                    {"role", to_string(r.role)},
                    {"log", o.log},
                    {"source", o.source},
                    {"gpu", o.gpu}});
  }
  j["rows"] = rows;
  OrderedJson loo = OrderedJson::array();
  for (const auto& t : n.leave_one_out) {
    OrderedJson trows = OrderedJson::array();
    for (const auto& r : t.rows) {
      trows.push_back({{"bytes", static_cast<std::int64_t>(r.bytes)},
                       {"measured_busbw_GBps", r.measured_busbw_GBps},
                       {"uncalibrated_busbw_GBps", r.uncalibrated_busbw_GBps},
                       {"calibrated_busbw_GBps", r.calibrated_busbw_GBps}});
    }
    loo.push_back({{"held_out", t.held_out},
                   {"fitted_on", t.fitted_on},
                   {"op", sim::to_string(t.op)},
                   {"group_size", t.group_size},
                   {"nodes", t.nodes},
                   {"rows", trows}});
  }
  j["leave_one_log_out"] = loo;
  return j;
}

FittedNetwork read_fitted_network(ObjectReader r) {
  FittedNetwork n;
  n.cluster = r.get_string_or("cluster", "");
  n.gpu = r.get_string_or("gpu", "");
  n.measured_gpu = r.get_string_or("measured_gpu", "");
  n.fabric = r.get_string_or("fabric", "");
  n.rms_log_residual = r.has("rms_log_residual") ? non_negative(r, "rms_log_residual") : 0;
  n.iterations = static_cast<int>(r.get_int_in_range_or("iterations", 0, 1 << 20, 0));
  each(r, "parameters", [&](ObjectReader p) {
    NetworkParameter q = read_parameter(std::move(p));
    if (n.find(q.param)) {
      throw ConfigError::bad_value(r.file(), r.pointer_of("parameters"), to_string(q.param),
                                   "each parameter once");
    }
    n.parameters.push_back(q);
  });
  if (r.has("rows"))
    each(r, "rows", [&](ObjectReader q) { n.rows.push_back(read_row(std::move(q))); });
  if (r.has("leave_one_log_out"))
    each(r, "leave_one_log_out",
         [&](ObjectReader q) { n.leave_one_out.push_back(read_transfer(std::move(q))); });
  r.finish();
  return n;
}

}  // namespace loom::calibration
