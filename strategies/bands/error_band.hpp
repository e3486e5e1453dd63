#pragma once
// Error bands from loom's own track record: the residuals of loom against the published runs
// bench/validate_runs.py scores (strategies/bands/track_record.json, embedded at build time),
// each with the regime of its plan. A prediction's band is the 10th-90th percentile of the
// residuals of the runs whose regime matches its own, backing off one feature at a time
// (BAND_FEATURE_ORDER, last first) until enough runs remain; a plan whose GPU generation has
// too few runs, or whose scale lies far above every run, is an extrapolation.
// bench/validate_runs.py (band_for) mirrors find_band line for line for its coverage check.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"
#include "topologies/gpu_catalog.hpp"

namespace loom::strategies {

/// What a residual measures: step time (throughput converted to step time) or peak memory.
enum class BandMetric { TIME, MEMORY };

/// The regime features of a plan, as the track record stores them (strings for equality).
struct Regime {
  std::string generation;  ///< GPU architecture: "ampere", "hopper", "blackwell", ...
  std::string moe;         ///< "moe" or "dense"
  std::string precision;   ///< "16-bit", "fp8", "fp4", "fp32"
  std::string dims;        ///< model-parallel dimensions used: "TP+PP+CP+EP" subsets, "DP only"
  std::string
      framework;  ///< "megatron" (Megatron-core, NeMo, loom's defaults), "torchtitan", "deepspeed"
  std::string scale;      ///< GPU count bucket: "<=8", "<=64", "<=512", "<=4096", ">4096"
  std::string zero3;      ///< "zero3" or "no-zero3"
  std::string recompute;  ///< "none", "selective", "full"
  std::string overlaps;   ///< "overlap" (any DP or TP overlap on) or "no-overlap"
  std::int64_t gpus = 0;  ///< the plan's GPU count (not matched; the scale check reads it)
};

/// Feature names in back-off order: a band drops the last remaining one while too few runs
/// match, down to the generation alone.
const std::vector<std::string>& band_feature_names();
/// The value of feature `index` (band_feature_names order) of `r`.
const std::string& feature(const Regime& r, std::size_t index);

/// The regime of `plan` (resolved) for `model` on `gpus` GPUs of architecture `arch`.
Regime regime_of(const models::ModelSpec& model, const models::TrainingPlan& plan,
                 topo::GpuArch arch, std::int64_t gpus);

/// One scored published run: its family, id, residual (loom - published) / published on
/// step time or peak memory, and its plan's regime.
struct TrackRun {
  std::string family;
  std::string id;
  BandMetric metric = BandMetric::TIME;
  double error = 0;
  Regime regime;
};

/// The track record built into loom (strategies/bands/track_record.json); parsed once.
const std::vector<TrackRun>& track_record();
/// A track record from its JSON text ({"runs": [{family, id, metric, error, regime}]});
/// throws ConfigError naming the bad field.
std::vector<TrackRun> parse_track_record(const std::string& json_text);

/// The share of published runs inside their band when the band is built without the run's
/// family (leave-one-family-out, bench/validate_runs.py --band-coverage), as the track record
/// states it; nullopt when it states none (a single family of the metric).
std::optional<double> held_out_coverage(BandMetric metric);

/// Nominal coverage of every band: the 10th to the 90th percentile.
inline constexpr double BAND_COVERAGE = 0.8;
/// Fewest runs a band is taken from: 8 for step time; 5 for peak memory, whose published
/// rows are fewer (torchtitan's 7), at the cost of a noisier band (docs/simulate.md).
int band_min_runs(BandMetric metric);
/// A plan above this many times the largest run's GPU count is an extrapolation.
inline constexpr double BAND_SCALE_LIMIT = 4.0;

/// The interval of published / loom ratios a prediction's band spans.
struct Band {
  double low_ratio = 1;   ///< published / loom at the band's low edge (1 / (1 + q90))
  double high_ratio = 1;  ///< published / loom at the band's high edge (1 / (1 + q10))
  int runs = 0;           ///< runs behind the band
  double coverage = BAND_COVERAGE;
  bool extrapolation = false;        ///< no published run within this regime: spread of all runs
  std::vector<std::string> matched;  ///< the features kept, as "name=value"
  std::string label;                 ///< the regime in words: "Hopper, MoE, FP8, TP+PP+EP"
  std::vector<double> errors;        ///< the residuals behind the band
  /// published / loom at one-sided `confidence` (0.5..1): the (1 - confidence) residual
  /// quantile; 0.9 gives high_ratio, the band's upper edge.
  double upper_ratio(double confidence) const;
  /// [low, high] of a quantity proportional to step time (days, GPU-hours, memory).
  std::pair<double, double> of_time(double value) const {
    return {value * low_ratio, value * high_ratio};
  }
  /// [low, high] of a quantity inverse to step time (tokens/s, TFLOP/s, MFU).
  std::pair<double, double> of_rate(double value) const {
    return {value / high_ratio, value / low_ratio};
  }
};

/// The band of `regime` for `metric` from `runs`: the matching runs' 10th and 90th percentile
/// residuals (linear interpolation), after backing off features until band_min_runs remain.
Band find_band(const std::vector<TrackRun>& runs, const Regime& regime, BandMetric metric);
/// find_band over the built-in track record.
Band find_band(const Regime& regime, BandMetric metric);

/// The p-quantile (0..1) of `values` by linear interpolation between order statistics
/// (NumPy's default); `values` need not be sorted. 0 when empty.
double quantile(std::vector<double> values, double p);

}  // namespace loom::strategies
