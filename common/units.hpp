#pragma once
// Units: every quantity in an input carries its unit ("80GiB", "900GBps", "400Gbps",
// "1.5us", "989TFLOPS"); this is the one parser for them. Values are returned in base SI
// units as doubles: bytes, bytes per second, seconds, FLOP/s, or, through parse_as<Q>, as
// the typed quantities of common/quantity.hpp.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/quantity.hpp"

namespace loom {

/// The kinds of quantity the unit parser understands.
enum class Unit { BYTES, BANDWIDTH, TIME, FLOP_RATE, FLOPS };

/// Parses "<number><unit>" for the given kind; returns the value in base units (bytes,
/// bytes/s, seconds, FLOP/s, FLOPs). Throws ValidationError naming `field` when the unit
/// is missing or wrong, or the number is negative or not finite.
double parse_quantity(std::string_view text, Unit unit, std::string_view field = "value");

/// A whole count with an optional binary suffix, as token counts are written: "8192", "8k" or
/// "8K" (x 1024), "1M" or "1m" (x 1048576). Throws ValidationError naming `field` for anything
/// else (fractions, other suffixes, values below 1 or above 2^62).
std::int64_t parse_binary_count(std::string_view text, std::string_view field = "value");

/// Bytes from "80GiB", "1.5 GB", "4096B"; SI prefixes are powers of 1000, IEC of 1024.
inline double parse_bytes(std::string_view text, std::string_view field = "value") {
  return parse_quantity(text, Unit::BYTES, field);
}
/// Bytes per second from "900GBps", "900GB/s" (bytes) or "400Gbps", "400Gb/s" (bits).
inline double parse_bandwidth(std::string_view text, std::string_view field = "value") {
  return parse_quantity(text, Unit::BANDWIDTH, field);
}
/// Seconds from "1.5us", "2ns", "3ms", "10s", "500ps", "2min", "3h", "1d".
inline double parse_time(std::string_view text, std::string_view field = "value") {
  return parse_quantity(text, Unit::TIME, field);
}
/// FLOP/s from "989TFLOPS", "989 TFLOP/s".
inline double parse_flop_rate(std::string_view text, std::string_view field = "value") {
  return parse_quantity(text, Unit::FLOP_RATE, field);
}

/// The unit kind a typed quantity parses as (Bytes -> BYTES, Seconds -> TIME, ...).
template <typename Q>
constexpr Unit unit_of();
template <>
constexpr Unit unit_of<Bytes>() {
  return Unit::BYTES;
}
template <>
constexpr Unit unit_of<BytesPerSecond>() {
  return Unit::BANDWIDTH;
}
template <>
constexpr Unit unit_of<Seconds>() {
  return Unit::TIME;
}
template <>
constexpr Unit unit_of<FlopsPerSecond>() {
  return Unit::FLOP_RATE;
}
template <>
constexpr Unit unit_of<Flops>() {
  return Unit::FLOPS;
}

/// Typed form of parse_quantity: parse_as<Bytes>("80GiB"), parse_as<Seconds>("1.5us"),
/// parse_as<BytesPerSecond>("400Gbps"), ... Same errors as parse_quantity.
template <typename Q>
Q parse_as(std::string_view text, std::string_view field = "value") {
  return Q(parse_quantity(text, unit_of<Q>(), field));
}

/// "74.53 GiB" style, IEC prefixes, `digits` decimals.
std::string format_bytes(double bytes, int digits = 2);
/// "450.0 GB/s" style, SI prefixes on bytes per second.
std::string format_bandwidth(double bytes_per_s, int digits = 1);
/// "1.23 ms" style: picks ps/ns/us/ms/s.
std::string format_time(double seconds, int digits = 2);
/// "989.0 TFLOP/s" style.
std::string format_flop_rate(double flop_per_s, int digits = 1);
/// Typed overloads of the formatters above; same text as the double forms.
inline std::string format_bytes(Bytes size, int digits = 2) {
  return format_bytes(size.value(), digits);
}
inline std::string format_bandwidth(BytesPerSecond rate, int digits = 1) {
  return format_bandwidth(rate.value(), digits);
}
inline std::string format_time(Seconds time, int digits = 2) {
  return format_time(time.value(), digits);
}
inline std::string format_flop_rate(FlopsPerSecond rate, int digits = 1) {
  return format_flop_rate(rate.value(), digits);
}
/// "7.50B" style count (K, M, B, T) for parameter counts.
std::string format_count(double count, int digits = 2);
/// A whole number with its thousands grouped by commas: 1234567 -> "1,234,567", -1000 ->
/// "-1,000". Callers round a double with std::llrint (to nearest, ties to even, as "{:.0f}").
std::string format_grouped(std::int64_t value);
/// A double rounded to a whole number and grouped like format_grouped below 1e15 in magnitude;
/// at or above it, or not finite, three significant digits ("1.23e+18", "inf"): never an
/// out-of-range conversion to an integer.
std::string format_rounded(double value);
/// A number a user typed or reads, grouped and without exponent: whole values as
/// format_rounded (1e6 -> "1,000,000"), others with up to `digits` decimals and no trailing
/// zeros (2.5 -> "2.5", 1234.125 -> "1,234.13").
std::string format_number(double value, int digits = 2);
/// US dollars for a sentence: "$7,026,736" from 1,000 up (whole dollars), "$12.50" below.
std::string format_money(double usd);
/// A fraction as a percentage: 0.395 -> "39.5%".
std::string format_percent(double fraction, int digits = 1);

inline constexpr double KiB = 1024.0;
inline constexpr double MiB = 1024.0 * KiB;
inline constexpr double GiB = 1024.0 * MiB;
inline constexpr double TiB = 1024.0 * GiB;
inline constexpr double GB = 1e9;

}  // namespace loom
