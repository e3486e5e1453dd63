#pragma once
// The SVG chart of `loom plan --chart FILE`: expected days to train against the GPU count
// (both axes logarithmic), one line per GPU type, and the cost on a second (linear) axis
// when prices were given. Plain text, byte-for-byte the same for the same input.
#include <optional>
#include <string>
#include <vector>

namespace loom::cli {

/// One point of a series: GPUs and the value (days, or US dollars).
struct ChartPoint {
  double gpus = 0;
  double value = 0;
};

/// One GPU type's line(s).
struct ChartSeries {
  std::string name;                ///< legend label ("h100")
  std::vector<ChartPoint> days;    ///< expected days by GPUs, ascending
  std::vector<ChartPoint> cost;    ///< cost by GPUs (empty without a price)
  std::vector<double> infeasible;  ///< GPU counts at which no plan fits or finishes
};

/// The chart as an SVG document. `title` heads it; `marked` (series index and GPUs) is
/// ringed and labelled (the --days / --budget choice); `days_limit` (--days) is drawn as a
/// dashed line; each series' infeasible GPU counts are crosses on the GPU axis. Series without
/// any point are left out of the lines.
std::string render_plan_chart(const std::string& title, const std::vector<ChartSeries>& series,
                              std::optional<std::pair<std::size_t, double>> marked,
                              std::optional<double> days_limit = std::nullopt);

}  // namespace loom::cli
