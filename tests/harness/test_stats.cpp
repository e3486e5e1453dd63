#include <doctest/doctest.h>

#include <stdexcept>

#include "harness/stats.hpp"

using namespace loom::harness;

TEST_CASE("harness::Stats: median and spread are robust to one slow run") {
  // Nine runs of 10 us and one of 100 us (a stray preemption): the median stays 10 us.
  std::vector<double> s(9, 10e-6);
  s.push_back(100e-6);
  const Timing t = summarize(s);
  CHECK(t.median == doctest::Approx(10e-6).scale(0));
  CHECK(t.min == doctest::Approx(10e-6).scale(0));
  CHECK(t.max == doctest::Approx(100e-6).scale(0));
  CHECK(t.spread == doctest::Approx(0));
  CHECK(t.samples == 10);
}

TEST_CASE("harness::Stats: quantiles interpolate like numpy's default") {
  // numpy.quantile([1, 2, 3, 4], [0.25, 0.5, 0.75]) = [1.75, 2.5, 3.25]
  const Timing t = summarize({4, 1, 3, 2});
  CHECK(t.median == doctest::Approx(2.5));
  CHECK(t.spread == doctest::Approx((3.25 - 1.75) / 2.5));
  CHECK(quantile({1, 2, 3, 4}, 0.25) == doctest::Approx(1.75));
  CHECK_THROWS_AS(summarize({}), std::invalid_argument);
}
