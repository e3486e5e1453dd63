#pragma once
// Simulated time is an integer count of picoseconds: exact, ordered, no floating point in
// the event queue. 2^63 ps is about 106 days of simulated time. This header is the one
// place where typed quantities (common/quantity.hpp) become the engine's units: integer
// picoseconds and bytes per picosecond, and back.
#include <cmath>
#include <cstdint>

#include "common/error.hpp"
#include "common/quantity.hpp"

namespace loom::sim {

/// Simulated time in picoseconds.
using SimTime = std::int64_t;

inline constexpr SimTime PS_PER_SECOND = 1'000'000'000'000;

/// The longest duration the clock holds, in seconds (2^63 ps, about 106 days).
inline constexpr double MAX_SIM_SECONDS = 0x1p63 / static_cast<double>(PS_PER_SECOND);

/// Throws the ValidationError to_sim_time throws: a time beyond the clock.
[[noreturn]] inline void throw_beyond_clock() {
  throw ValidationError("duration",
                        "a task lasts longer than the simulated clock holds (2^63 ps, about "
                        "106 days; docs/limits.md); the step is too large to simulate: lower "
                        "the batch, the sequence length or the model size");
}

/// `now` + `duration` picoseconds (both >= 0); throws as to_sim_time when the sum is beyond
/// the clock.
inline SimTime later(SimTime now, SimTime duration) {
  if (duration > INT64_MAX - now) throw_beyond_clock();
  return now + duration;
}

/// Seconds to picoseconds, rounded to nearest. Throws ValidationError ("duration") when the
/// duration is not finite or beyond MAX_SIM_SECONDS either way: no input can wrap the clock.
inline SimTime to_sim_time(double seconds) {
  const double ps = seconds * static_cast<double>(PS_PER_SECOND);
  if (!(std::abs(ps) < 0x1p63)) throw_beyond_clock();
  return static_cast<SimTime>(std::llround(ps));
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
