// Typed quantities: the physically meaningful arithmetic gives the right type and value,
// and the typed parse/format overloads match the double forms.
#include <doctest/doctest.h>

#include <type_traits>

#include "common/error.hpp"
#include "common/quantity.hpp"
#include "common/units.hpp"

using namespace loom;

namespace {

// True when `a / b` compiles; used to prove that meaningless divisions do not.
template <typename A, typename B, typename = void>
struct divisible : std::false_type {};
template <typename A, typename B>
struct divisible<A, B, std::void_t<decltype(std::declval<A>() / std::declval<B>())>>
    : std::true_type {};

template <typename A, typename B, typename = void>
struct addable : std::false_type {};
template <typename A, typename B>
struct addable<A, B, std::void_t<decltype(std::declval<A>() + std::declval<B>())>>
    : std::true_type {};

}  // namespace

TEST_CASE("common::Quantity: transfer time is size over bandwidth") {
  // 1 GiB over a 25 GB/s link: 2^30 / 25e9 = 0.04294967296 s.
  constexpr Seconds t = Bytes(1024.0 * 1024 * 1024) / BytesPerSecond(25e9);
  static_assert(std::is_same_v<std::remove_const_t<decltype(t)>, Seconds>);
  CHECK(t.value() == doctest::Approx(0.04294967296));
  CHECK((BytesPerSecond(25e9) * t).value() == doctest::Approx(1024.0 * 1024 * 1024));
  CHECK((Bytes(100) / Seconds(4)).value() == 25.0);
}

TEST_CASE("common::Quantity: compute time is FLOPs over FLOP rate") {
  // 6 * 175e9 * 2048 FLOPs (one GPT-3 sequence, 6N per token) at 312 TFLOP/s (A100 bf16
  // dense datasheet): 2.150e21 / 3.12e14 = 6.892 s.
  const Seconds t = Flops(6 * 175e9 * 2048) / FlopsPerSecond(312e12);
  CHECK(t.value() == doctest::Approx(6.0 * 175e9 * 2048 / 312e12));
  CHECK(t.value() == doctest::Approx(6.8923).epsilon(1e-4));
  CHECK((FlopsPerSecond(2) * Seconds(3)).value() == 6.0);
  CHECK((Flops(10) / Seconds(4)).value() == 2.5);
}

TEST_CASE("common::Quantity: like quantities add, compare and give plain ratios") {
  Bytes b(10);
  b += Bytes(5);
  b *= 2;
  CHECK(b == Bytes(30));
  CHECK(b - Bytes(10) == Bytes(20));
  CHECK(-b == Bytes(-30));
  CHECK(b / 3 == Bytes(10));
  CHECK(3.0 * Seconds(2) == Seconds(6));
  CHECK(Bytes(3) / Bytes(4) == 0.75);
  CHECK(Seconds(1) < Seconds(2));
  CHECK(BytesPerSecond(2) >= BytesPerSecond(2));
  CHECK(Flops().value() == 0);
  static_assert(!addable<Bytes, Seconds>::value, "a size plus a duration is meaningless");
  static_assert(!addable<Bytes, double>::value, "a bare number has no unit");
  static_assert(!divisible<Seconds, Bytes>::value, "seconds per byte is not a type here");
  static_assert(!divisible<Flops, BytesPerSecond>::value);
  static_assert(!std::is_convertible_v<double, Bytes>, "construction is explicit");
}

TEST_CASE("common::Quantity: typed parse and format match the double forms") {
  CHECK(parse_as<Bytes>("80GiB") == Bytes(80 * GiB));
  CHECK(parse_as<BytesPerSecond>("400Gbps") == BytesPerSecond(50e9));  // bits: 400e9 / 8
  CHECK(parse_as<Seconds>("1.5us").value() == doctest::Approx(1.5e-6).scale(0));
  CHECK(parse_as<FlopsPerSecond>("989TFLOPS").value() == doctest::Approx(989e12));
  CHECK(parse_as<Flops>("3.1e23FLOP").value() == doctest::Approx(3.1e23));
  CHECK_THROWS_WITH_AS(parse_as<Seconds>("3GB", "latency"), doctest::Contains("latency"),
                       ValidationError);
  CHECK(format_bytes(Bytes(80 * GiB)) == format_bytes(80 * GiB));
  CHECK(format_bandwidth(BytesPerSecond(450e9)) == "450.0 GB/s");
  CHECK(format_time(Seconds(1.5e-6)) == format_time(1.5e-6));
  CHECK(format_flop_rate(FlopsPerSecond(989e12)) == format_flop_rate(989e12));
}
