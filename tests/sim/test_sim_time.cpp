// The one conversion between typed quantities and the engine's integer picoseconds and
// bytes per picosecond.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "common/error.hpp"
#include "sim/sim_time.hpp"

using namespace loom;
using namespace loom::sim;

TEST_CASE("sim::SimTime: typed durations and bandwidths convert to engine units") {
  CHECK(to_sim_time(Seconds(1.5e-6)) == 1'500'000);  // 1.5 us = 1.5e6 ps
  CHECK(to_sim_time(Seconds(0.4e-12)) == 0);         // rounded to nearest picosecond
  CHECK(to_sim_time(Seconds(0.6e-12)) == 1);
  CHECK(to_duration(2'000'000'000'000).value() == 2.0);
  // 450 GB/s (NVLink4 per direction) is 0.45 bytes per picosecond.
  CHECK(to_bytes_per_ps(BytesPerSecond(450e9)) == doctest::Approx(0.45));
  CHECK(from_bytes_per_ps(0.45).value() == doctest::Approx(450e9));
  // A 1 MB message at 0.45 B/ps takes 1e6 / 0.45 ps = 2.222 us, as Bytes / BytesPerSecond.
  const Seconds t = Bytes(1e6) / BytesPerSecond(450e9);
  CHECK(to_sim_time(t) == 2'222'222);
}

TEST_CASE("sim::SimTime: durations beyond the clock are bad input, not a wrapped integer") {
  CHECK(to_sim_time(1e6) == std::int64_t{1'000'000} * PS_PER_SECOND);  // 11.6 days fits
  CHECK_THROWS_WITH_AS(to_sim_time(1e8), doctest::Contains("2^63 ps"), ValidationError);
  CHECK_THROWS_AS(to_sim_time(-1e8), ValidationError);
  CHECK_THROWS_AS(to_sim_time(std::nan("")), ValidationError);
  CHECK(later(5, 7) == 12);
  CHECK_THROWS_AS(later(INT64_MAX - 3, 4), ValidationError);
}
