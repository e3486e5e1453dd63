#include "harness/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace loom::harness {

double quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Timing summarize(std::vector<double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("summarize: no samples");
  std::sort(seconds.begin(), seconds.end());
  Timing t;
  t.samples = static_cast<int>(seconds.size());
  t.min = seconds.front();
  t.max = seconds.back();
  t.median = quantile(seconds, 0.5);
  const double iqr = quantile(seconds, 0.75) - quantile(seconds, 0.25);
  t.spread = t.median > 0 ? iqr / t.median : 0;
  return t;
}

}  // namespace loom::harness
