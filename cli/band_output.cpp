#include "cli/band_output.hpp"

#include <fmt/format.h>

#include "common/csv.hpp"

namespace loom::cli {
namespace {

OrderedJson one_band_json(const strategies::Band& b) {
  OrderedJson j;
  j["runs"] = b.runs;
  j["regime"] = b.label;
  OrderedJson matched = OrderedJson::array();
  for (const auto& m : b.matched) matched.push_back(m);
  j["matched"] = matched;
  j["extrapolation"] = b.extrapolation;
  j["published_over_loom"] = band_pair({b.low_ratio, b.high_ratio});
  return j;
}

}  // namespace

namespace {

// The step-time and memory bands of `regime`.
PlanBands bands_of(strategies::Regime regime) {
  PlanBands out;
  out.time = strategies::find_band(regime, strategies::BandMetric::TIME);
  out.memory = strategies::find_band(regime, strategies::BandMetric::MEMORY);
  out.regime = std::move(regime);
  return out;
}

}  // namespace

PlanBands plan_bands(const models::ModelSpec& model, const models::TrainingPlan& plan,
                     topo::GpuArch arch, std::int64_t gpus) {
  return bands_of(strategies::regime_of(model, plan, arch, gpus));
}

PlanBands plan_bands(const models::ModelSpec& model, const models::TrainingPlan& plan,
                     const std::string& generation, std::int64_t gpus) {
  strategies::Regime regime = strategies::regime_of(model, plan, topo::GpuArch::AMPERE, gpus);
  regime.generation = generation;
  return bands_of(std::move(regime));
}

std::string band_line(const std::string& what, double value, std::pair<double, double> edges,
                      const strategies::Band& band,
                      const std::function<std::string(double)>& format) {
  if (band.runs == 0)
    return fmt::format("{} {}: no published run in loom's track record: no band", what,
                       format(value));
  if (band.extrapolation)
    return fmt::format(
        "{} {}: no published run within this regime ({}): extrapolation; all {} runs' {:.0f}% "
        "spread would give {} to {}",
        what, format(value), band.label, band.runs, 100 * band.coverage, format(edges.first),
        format(edges.second));
  return fmt::format("{} {}, {:.0f}% band {} to {}, from {} published runs like this one: {}", what,
                     format(value), 100 * band.coverage, format(edges.first), format(edges.second),
                     band.runs, band.label);
}

OrderedJson band_pair(std::pair<double, double> edges) {
  OrderedJson j = OrderedJson::array();
  j.push_back(edges.first);
  j.push_back(edges.second);
  return j;
}

OrderedJson bands_json(const PlanBands& bands) {
  OrderedJson j;
  j["coverage"] = bands.time.coverage;
  OrderedJson held;
  for (auto [key, metric] : {std::pair{"step_time", strategies::BandMetric::TIME},
                             std::pair{"memory", strategies::BandMetric::MEMORY}}) {
    const auto c = strategies::held_out_coverage(metric);
    held[key] = c ? OrderedJson(*c) : OrderedJson(nullptr);
  }
  j["held_out_coverage"] = held;
  OrderedJson regime;
  const auto& names = strategies::band_feature_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    regime[names[i]] = strategies::feature(bands.regime, i);
  regime["gpus"] = bands.regime.gpus;
  j["regime"] = regime;
  j["step_time"] = one_band_json(bands.time);
  j["memory"] = one_band_json(bands.memory);
  return j;
}

void add_band_columns(const std::string& key, std::pair<double, double> edges,
                      std::vector<std::string>& header, std::vector<std::string>& row) {
  header.push_back(key + "_band_lo");
  row.push_back(csv_number(edges.first));
  header.push_back(key + "_band_hi");
  row.push_back(csv_number(edges.second));
}

}  // namespace loom::cli
