#include "strategies/bands/error_band.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "strategies/bands/track_record_text.hpp"

namespace loom::strategies {
namespace {

const char* const TRACK_RECORD_FILE = "strategies/bands/track_record.json";

// Kept longest first: the GPU generation and dense/MoE move loom's residuals most (the
// validation table: MoE rows 20-45 % optimistic where dense rows are within 10-15 %), then
// the precision, the parallel dimensions, the framework, the scale, the ZeRO design,
// recompute and overlaps.
const std::vector<std::string> FEATURES = {"generation", "moe",       "precision",
                                           "dims",       "framework", "scale",
                                           "zero3",      "recompute", "overlaps"};

std::string scale_bucket(std::int64_t gpus) {
  if (gpus <= 8) return "<=8";
  if (gpus <= 64) return "<=64";
  if (gpus <= 512) return "<=512";
  if (gpus <= 4096) return "<=4096";
  return ">4096";
}

std::string precision_class(models::Precision p) {
  switch (p) {
    case models::Precision::FP32:
      return "fp32";
    case models::Precision::FP8:
      return "fp8";
    case models::Precision::NVFP4:
      return "fp4";
    default:
      return "16-bit";
  }
}

std::string framework_class(models::Framework f) {
  switch (f) {
    case models::Framework::TORCHTITAN:
      return "torchtitan";
    case models::Framework::DEEPSPEED:
      return "deepspeed";
    default:
      return "megatron";  // NONE is Megatron-LM's defaults; NeMo runs Megatron-core
  }
}

std::string recompute_class(models::Recompute r) {
  switch (r) {
    case models::Recompute::FULL:
      return "full";
    case models::Recompute::SELECTIVE:
      return "selective";
    default:
      return "none";
  }
}

// How a band's label spells a matched feature.
std::string feature_words(std::size_t index, const std::string& value) {
  const std::string& name = FEATURES[index];
  if (name == "generation" || name == "framework") {
    std::string out = value;
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    if (out == "Megatron") return "Megatron-core";
    return out;
  }
  if (name == "moe") return value == "moe" ? "MoE" : "dense";
  if (name == "precision") return value == "16-bit" ? "BF16/FP16" : fmt::format("{}", value);
  if (name == "scale") return fmt::format("{} GPUs", value);
  if (name == "zero3") return value == "zero3" ? "ZeRO-3/FSDP" : "no ZeRO-3";
  if (name == "recompute") return fmt::format("recompute {}", value);
  if (name == "overlaps") return value == "overlap" ? "overlaps on" : "no overlaps";
  return value;
}

std::string upper_precision(std::string text) {
  if (text == "fp8" || text == "fp4" || text == "fp32")
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_string())
    throw ConfigError::missing_key(TRACK_RECORD_FILE, where, key);
  return j.at(key).get<std::string>();
}

Regime regime_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw ConfigError::missing_key(TRACK_RECORD_FILE, where, "regime");
  Regime r;
  std::string* fields[] = {&r.generation, &r.moe,   &r.precision, &r.dims,    &r.framework,
                           &r.scale,      &r.zero3, &r.recompute, &r.overlaps};
  for (std::size_t i = 0; i < FEATURES.size(); ++i)
    *fields[i] = json_string(j, FEATURES[i].c_str(), where);
  if (!j.contains("gpus") || !j.at("gpus").is_number_integer())
    throw ConfigError::missing_key(TRACK_RECORD_FILE, where, "gpus");
  r.gpus = j.at("gpus").get<std::int64_t>();
  return r;
}

Band band_from(std::vector<double> errors, int runs) {
  Band b;
  b.runs = runs;
  // published = loom / (1 + error): the high residual gives the low edge.
  b.low_ratio = 1.0 / (1.0 + quantile(errors, 0.5 + BAND_COVERAGE / 2));
  b.high_ratio = 1.0 / (1.0 + quantile(errors, 0.5 - BAND_COVERAGE / 2));
  b.errors = std::move(errors);
  return b;
}

}  // namespace

const std::vector<std::string>& band_feature_names() {
  return FEATURES;
}

double Band::upper_ratio(double confidence) const {
  if (errors.empty()) return 1;
  return 1.0 / (1.0 + quantile(errors, 1.0 - confidence));
}

const std::string& feature(const Regime& r, std::size_t index) {
  const std::string* fields[] = {&r.generation, &r.moe,   &r.precision, &r.dims,    &r.framework,
                                 &r.scale,      &r.zero3, &r.recompute, &r.overlaps};
  return *fields[index];
}

Regime regime_of(const models::ModelSpec& model, const models::TrainingPlan& plan,
                 topo::GpuArch arch, std::int64_t gpus) {
  Regime r;
  r.generation = topo::to_string(arch);
  r.moe = model.is_moe() ? "moe" : "dense";
  r.precision = precision_class(plan.precision);
  std::string dims;
  auto add = [&dims](bool used, const char* name) {
    if (used) dims += (dims.empty() ? "" : "+") + std::string(name);
  };
  add(plan.tp > 1, "TP");
  add(plan.pp > 1, "PP");
  add(plan.cp > 1, "CP");
  add(plan.ep > 1, "EP");
  r.dims = dims.empty() ? "DP only" : dims;
  r.framework = framework_class(plan.framework);
  r.scale = scale_bucket(gpus);
  r.zero3 = plan.zero == 3 ? "zero3" : "no-zero3";
  r.recompute = recompute_class(plan.recompute);
  r.overlaps = plan.overlap_grad_reduce || plan.overlap_param_gather || plan.tp_comm_overlap ||
                       plan.overlap_moe_expert_parallel_comm
                   ? "overlap"
                   : "no-overlap";
  r.gpus = gpus;
  return r;
}

std::vector<TrackRun> parse_track_record(const std::string& json_text) {
  const nlohmann::json doc = parse_json_text(json_text, TRACK_RECORD_FILE);
  if (!doc.contains("runs") || !doc.at("runs").is_array())
    throw ConfigError::missing_key(TRACK_RECORD_FILE, "", "runs");
  std::vector<TrackRun> runs;
  for (std::size_t i = 0; i < doc.at("runs").size(); ++i) {
    const auto& j = doc.at("runs")[i];
    const std::string where = fmt::format("/runs/{}", i);
    TrackRun run;
    run.family = json_string(j, "family", where);
    run.id = json_string(j, "id", where);
    const std::string metric = json_string(j, "metric", where);
    if (metric != "time" && metric != "memory")
      throw ConfigError::bad_value(TRACK_RECORD_FILE, where + "/metric", metric, "time, memory");
    run.metric = metric == "time" ? BandMetric::TIME : BandMetric::MEMORY;
    if (!j.contains("error") || !j.at("error").is_number())
      throw ConfigError::missing_key(TRACK_RECORD_FILE, where, "error");
    run.error = j.at("error").get<double>();
    if (!(run.error > -1.0))
      throw ConfigError::bad_value(TRACK_RECORD_FILE, where + "/error",
                                   fmt::format("{}", run.error), "a residual above -1");
    run.regime = regime_from_json(j.contains("regime") ? j.at("regime") : nlohmann::json(),
                                  where + "/regime");
    runs.push_back(std::move(run));
  }
  return runs;
}

const std::vector<TrackRun>& track_record() {
  static const std::vector<TrackRun> runs = parse_track_record(TRACK_RECORD_JSON);
  return runs;
}

std::optional<double> held_out_coverage(BandMetric metric) {
  static const nlohmann::json held = [] {
    const nlohmann::json doc = parse_json_text(TRACK_RECORD_JSON, TRACK_RECORD_FILE);
    return doc.contains("held_out_coverage") ? doc.at("held_out_coverage") : nlohmann::json();
  }();
  const char* key = metric == BandMetric::TIME ? "time" : "memory";
  if (!held.is_object() || !held.contains(key) || !held.at(key).is_number()) return std::nullopt;
  return held.at(key).get<double>();
}

int band_min_runs(BandMetric metric) {
  return metric == BandMetric::TIME ? 8 : 5;
}

double quantile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double h = (static_cast<double>(values.size()) - 1) * std::clamp(p, 0.0, 1.0);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Band find_band(const std::vector<TrackRun>& runs, const Regime& regime, BandMetric metric) {
  std::vector<const TrackRun*> pool;
  std::int64_t largest = 0;
  for (const auto& run : runs) {
    if (run.metric != metric) continue;
    pool.push_back(&run);
    largest = std::max(largest, run.regime.gpus);
  }
  const int need = band_min_runs(metric);
  const bool beyond_scale =
      static_cast<double>(regime.gpus) > BAND_SCALE_LIMIT * static_cast<double>(largest);
  for (std::size_t kept = FEATURES.size(); kept >= 1 && !beyond_scale; --kept) {
    std::vector<double> errors;
    for (const TrackRun* run : pool) {
      bool same = true;
      for (std::size_t i = 0; i < kept && same; ++i)
        same = feature(run->regime, i) == feature(regime, i);
      if (same) errors.push_back(run->error);
    }
    if (static_cast<int>(errors.size()) < need) continue;
    Band b = band_from(errors, static_cast<int>(errors.size()));
    for (std::size_t i = 0; i < kept; ++i) {
      b.matched.push_back(FEATURES[i] + "=" + feature(regime, i));
      b.label += (i ? ", " : "") + upper_precision(feature_words(i, feature(regime, i)));
    }
    return b;
  }
  // Outside every regime: the spread of every run of the metric, labelled as such.
  std::vector<double> errors;
  for (const TrackRun* run : pool) errors.push_back(run->error);
  Band b = band_from(errors, static_cast<int>(errors.size()));
  b.extrapolation = true;
  b.label = beyond_scale ? fmt::format("{} GPUs, over {:g}x the largest published run ({})",
                                       regime.gpus, BAND_SCALE_LIMIT, largest)
                         : fmt::format("no {} {} run", feature_words(0, regime.generation),
                                       metric == BandMetric::TIME ? "step-time" : "memory");
  return b;
}

Band find_band(const Regime& regime, BandMetric metric) {
  return find_band(track_record(), regime, metric);
}

}  // namespace loom::strategies
