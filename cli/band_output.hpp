#pragma once
// The error bands beside each prediction (strategies/bands/): the table lines ("step time
// 15.3 s, 80% band 14.1 s to 17.9 s, from 46 published runs like this one: Hopper, ..."),
// the JSON `<quantity>_band` pairs with their `bands` object (DESIGN.md), and CSV columns.
// Include only from .cpp files.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/document.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "strategies/bands/error_band.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::cli {

/// A plan's regime and its step-time and peak-memory bands.
struct PlanBands {
  strategies::Regime regime;
  strategies::Band time;
  strategies::Band memory;
};

/// The bands of `plan` for `model` on `gpus` GPUs of architecture `arch`.
PlanBands plan_bands(const models::ModelSpec& model, const models::TrainingPlan& plan,
                     topo::GpuArch arch, std::int64_t gpus);

/// The bands of a plan on a GPU whose generation is `generation` ("unknown" when the GPU is
/// not in the catalog: an extrapolation).
PlanBands plan_bands(const models::ModelSpec& model, const models::TrainingPlan& plan,
                     const std::string& generation, std::int64_t gpus);

/// One table line: "<what> <value>, 80% band <lo> to <hi>, from N published runs like this
/// one: <regime>", or the extrapolation sentence; `format` spells a value with its unit.
std::string band_line(const std::string& what, double value, std::pair<double, double> edges,
                      const strategies::Band& band,
                      const std::function<std::string(double)>& format);

/// [low, high] as a JSON pair.
OrderedJson band_pair(std::pair<double, double> edges);
/// The `bands` object: nominal coverage, the plan's regime features, and per metric (step
/// time, peak memory) the runs behind the band, the features matched and whether it is an
/// extrapolation.
OrderedJson bands_json(const PlanBands& bands);

/// The CSV columns of a band: <key>_band_lo, <key>_band_hi.
void add_band_columns(const std::string& key, std::pair<double, double> edges,
                      std::vector<std::string>& header, std::vector<std::string>& row);

}  // namespace loom::cli
