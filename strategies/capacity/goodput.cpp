#include "strategies/capacity/goodput.hpp"

#include <cmath>
#include <limits>

namespace loom::strategies {

bool Goodput::finishes() const {
  return std::isfinite(expected_s);
}

double young_daly_interval(double write_s, double mtbf_s) {
  if (!std::isfinite(mtbf_s)) return std::numeric_limits<double>::infinity();
  return std::sqrt(2.0 * write_s * mtbf_s);
}

Goodput expected_run(double ideal_s, long long gpus, const GoodputInputs& in) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  Goodput g;
  g.ideal_s = ideal_s;
  g.checkpoint_write_s = in.checkpoint_bytes / in.checkpoint_write_Bps;
  const double rate_per_s = in.failures_per_gpu_hour * static_cast<double>(gpus) / SECONDS_PER_HOUR;
  g.mtbf_s = rate_per_s > 0 ? 1.0 / rate_per_s : inf;
  g.checkpoint_interval_s = young_daly_interval(g.checkpoint_write_s, g.mtbf_s);
  if (!std::isfinite(g.mtbf_s)) {  // no failures: no checkpoints needed, nothing lost
    g.expected_s = ideal_s;
    return g;
  }
  const double tau = g.checkpoint_interval_s;
  const double delta = g.checkpoint_write_s;
  // A zero-cost checkpoint (delta = 0) gives tau = 0 and no overhead: only restarts count.
  const double write_overhead = tau > 0 ? delta / tau : 0.0;
  const double lost_per_failure = in.restart_s + (tau + delta) / 2.0;
  const double denominator = 1.0 - lost_per_failure / g.mtbf_s;
  if (denominator <= 0) {
    g.expected_s = inf;
    g.expected_failures = inf;
    g.goodput = 0;
    return g;
  }
  g.expected_s = ideal_s * (1.0 + write_overhead) / denominator;
  g.expected_failures = g.expected_s / g.mtbf_s;
  g.goodput = g.expected_s > 0 ? ideal_s / g.expected_s : 1.0;
  return g;
}

}  // namespace loom::strategies
