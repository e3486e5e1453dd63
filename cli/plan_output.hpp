#pragma once
// What `loom plan` prints: the table, the JSON document, the CSV rows and the SVG chart of
// its configurations (strategies/capacity), from one PlanOutput.
#include <optional>
#include <string>
#include <vector>

#include "cli/band_output.hpp"
#include "models/model_spec.hpp"
#include "strategies/capacity/capacity.hpp"

namespace loom::cli {

/// The --days / --budget choice.
struct PlanSelection {
  bool by_days = true;        ///< --days (cheapest within) or --budget (fastest within)
  double limit = 0;           ///< days, or US dollars
  bool by_gpu_hours = false;  ///< --days without prices: the fewest GPU-hours
  std::size_t row = 0;        ///< the chosen configuration
};

/// Everything the renderers print.
struct PlanOutput {
  const models::ModelSpec* model = nullptr;
  std::string tokens_text;  ///< --tokens as given
  std::vector<strategies::CapacityTarget> targets;
  std::vector<std::optional<double>> prices;  ///< by target, USD per GPU-hour
  std::vector<strategies::CapacityRow> rows;
  strategies::CapacityOptions options;
  std::string failure_rate_source;  ///< where the failure rate comes from
  std::vector<std::string> pinned;  ///< dimensions `loom plan` pinned ("mbs 1", ...)
  std::string network;
  std::optional<PlanSelection> selection;
  std::vector<PlanBands> bands;      ///< by row: its error bands (docs/plan.md)
  std::optional<double> confidence;  ///< --confidence: the selection reads the band's upper edge
};

/// `seconds` in days: one decimal, `small_digits` below one day, three significant digits
/// from a million days on ("2.5e+12") or when not finite.
std::string plan_days_text(double seconds, int small_digits);

/// The table (header lines, one row per configuration, notes, the selection).
std::string render_plan_table(const PlanOutput& out);
/// The versioned JSON document.
std::string render_plan_json(const PlanOutput& out);
/// One CSV row per configuration, with a header line.
std::string render_plan_csv(const PlanOutput& out);
/// The SVG chart (days vs GPUs per GPU type, cost on the second axis).
std::string render_plan_svg(const PlanOutput& out);

}  // namespace loom::cli
