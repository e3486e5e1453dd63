#pragma once
// Statistics of repeated timings: the median is the figure the profile keeps (robust to a
// stray slow run), the spread says how much to trust it.
#include <vector>

namespace loom::harness {

/// A summary of repeated timings of one measurement, seconds.
struct Timing {
  double median = 0;  ///< seconds
  double min = 0;     ///< seconds
  double max = 0;     ///< seconds
  double spread = 0;  ///< interquartile range / median (0.02 = 2 %)
  int samples = 0;
};

/// Summarises `seconds` (at least one sample; throws std::invalid_argument otherwise).
/// Quantiles interpolate linearly between order statistics (numpy's default).
Timing summarize(std::vector<double> seconds);

/// The q-quantile (0..1) of `sorted` (ascending, non-empty), linear interpolation.
double quantile(const std::vector<double>& sorted, double q);

}  // namespace loom::harness
