#pragma once
// Simulated time is an integer count of picoseconds: exact, ordered, no floating point in
// the event queue. 2^63 ps is about 106 days of simulated time.
#include <cmath>
#include <cstdint>

namespace loom::sim {

/// Simulated time in picoseconds.
using SimTime = std::int64_t;

inline constexpr SimTime PS_PER_SECOND = 1'000'000'000'000;

/// Seconds to picoseconds, rounded to nearest.
inline SimTime to_sim_time(double seconds) {
  return static_cast<SimTime>(std::llround(seconds * static_cast<double>(PS_PER_SECOND)));
}
/// Picoseconds to seconds.
inline double to_seconds(SimTime t) {
  return static_cast<double>(t) / PS_PER_SECOND;
}

}  // namespace loom::sim
