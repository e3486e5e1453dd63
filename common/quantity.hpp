#pragma once
// Typed quantities: cheap strong types over a double in a base SI unit, in the spirit of
// ns-3's DataRate and Time. They exist so that a size cannot be passed where a duration is
// expected and so that each value's unit is part of its type instead of a comment. Only
// arithmetic with a physical meaning compiles: sums of like quantities, scaling by a plain
// number, ratios of like quantities (a plain number), and the cross-type rules
//   Bytes / BytesPerSecond = Seconds,  Bytes / Seconds = BytesPerSecond,
//   BytesPerSecond * Seconds = Bytes,  Flops / FlopsPerSecond = Seconds,
//   Flops / Seconds = FlopsPerSecond,  FlopsPerSecond * Seconds = Flops.
// The conversion to the engine's integer picoseconds and bytes per picosecond lives in one
// place, sim/sim_time.hpp. Header-only and constexpr; no heavier include than <compare>.
#include <compare>

namespace loom {

/// A double in the base unit named by `Tag`. Construction is explicit; `.value()` returns
/// the number in that base unit.
template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  /// Wraps `value`, given in the type's base unit.
  constexpr explicit Quantity(double value) : value_(value) {}

  /// The number in the type's base unit (see each alias below).
  constexpr double value() const { return value_; }

  constexpr Quantity& operator+=(Quantity other) {
    value_ += other.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity other) {
    value_ -= other.value_;
    return *this;
  }
  constexpr Quantity& operator*=(double k) {
    value_ *= k;
    return *this;
  }
  constexpr Quantity& operator/=(double k) {
    value_ /= k;
    return *this;
  }

  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    return Quantity(a.value_ + b.value_);
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    return Quantity(a.value_ - b.value_);
  }
  friend constexpr Quantity operator-(Quantity a) { return Quantity(-a.value_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(k * a.value_); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.value_ / k); }
  /// The ratio of two like quantities is a plain number.
  friend constexpr double operator/(Quantity a, Quantity b) { return a.value_ / b.value_; }

  friend constexpr bool operator==(Quantity a, Quantity b) = default;
  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;

 private:
  double value_ = 0;
};

struct BytesTag {};
struct SecondsTag {};
struct BytesPerSecondTag {};
struct FlopsTag {};
struct FlopsPerSecondTag {};

/// A size; value() in bytes.
using Bytes = Quantity<BytesTag>;
/// A duration; value() in seconds.
using Seconds = Quantity<SecondsTag>;
/// A bandwidth; value() in bytes per second (not bits: 400 Gb/s is 50e9).
using BytesPerSecond = Quantity<BytesPerSecondTag>;
/// A count of floating-point operations; value() in FLOPs.
using Flops = Quantity<FlopsTag>;
/// A compute rate; value() in FLOPs per second.
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;

/// Time to move `size` at `rate`.
constexpr Seconds operator/(Bytes size, BytesPerSecond rate) {
  return Seconds(size.value() / rate.value());
}
/// Rate that moves `size` in `time`.
constexpr BytesPerSecond operator/(Bytes size, Seconds time) {
  return BytesPerSecond(size.value() / time.value());
}
/// Bytes moved at `rate` during `time`.
constexpr Bytes operator*(BytesPerSecond rate, Seconds time) {
  return Bytes(rate.value() * time.value());
}
constexpr Bytes operator*(Seconds time, BytesPerSecond rate) {
  return rate * time;
}

/// Time to perform `work` at `rate`.
constexpr Seconds operator/(Flops work, FlopsPerSecond rate) {
  return Seconds(work.value() / rate.value());
}
/// Rate that performs `work` in `time`.
constexpr FlopsPerSecond operator/(Flops work, Seconds time) {
  return FlopsPerSecond(work.value() / time.value());
}
/// FLOPs performed at `rate` during `time`.
constexpr Flops operator*(FlopsPerSecond rate, Seconds time) {
  return Flops(rate.value() * time.value());
}
constexpr Flops operator*(Seconds time, FlopsPerSecond rate) {
  return rate * time;
}

}  // namespace loom
