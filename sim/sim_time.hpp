#pragma once
// Simulated time is an integer count of picoseconds: exact, ordered, no floating point in
// the event queue. 2^63 ps is about 106 days of simulated time. This header is the one
// place where typed quantities (common/quantity.hpp) become the engine's units: integer
// picoseconds and bytes per picosecond, and back.
#include <cmath>
#include <cstdint>

#include "common/quantity.hpp"

namespace loom::sim {

/// Simulated time in picoseconds.
using SimTime = std::int64_t;

inline constexpr SimTime PS_PER_SECOND = 1'000'000'000'000;

/// Seconds to picoseconds, rounded to nearest.
inline SimTime to_sim_time(double seconds) {
  return static_cast<SimTime>(std::llround(seconds * static_cast<double>(PS_PER_SECOND)));
}
/// A typed duration to picoseconds, rounded to nearest.
inline SimTime to_sim_time(Seconds time) {
  return to_sim_time(time.value());
}
/// Picoseconds to seconds.
inline double to_seconds(SimTime t) {
  return static_cast<double>(t) / PS_PER_SECOND;
}
/// Picoseconds to a typed duration.
inline Seconds to_duration(SimTime t) {
  return Seconds(to_seconds(t));
}
/// A bandwidth in the engine's unit, bytes per picosecond.
constexpr double to_bytes_per_ps(BytesPerSecond rate) {
  return rate.value() / static_cast<double>(PS_PER_SECOND);
}
/// Bytes per picosecond back to a typed bandwidth.
constexpr BytesPerSecond from_bytes_per_ps(double bytes_per_ps) {
  return BytesPerSecond(bytes_per_ps * static_cast<double>(PS_PER_SECOND));
}

}  // namespace loom::sim
