#include "common/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "common/error.hpp"

namespace loom {
namespace {

struct Prefix {
  std::string_view name;
  double factor;
};

// Longest names first so "Ki" wins over "K".
constexpr std::array<Prefix, 15> PREFIXES = {{{"Ki", 1024.0},
                                              {"Mi", 1024.0 * 1024},
                                              {"Gi", 1024.0 * 1024 * 1024},
                                              {"Ti", 1024.0 * 1024 * 1024 * 1024},
                                              {"Pi", 1024.0 * 1024 * 1024 * 1024 * 1024},
                                              {"k", 1e3},
                                              {"K", 1e3},
                                              {"M", 1e6},
                                              {"G", 1e9},
                                              {"T", 1e12},
                                              {"P", 1e15},
                                              {"E", 1e18},
                                              {"Z", 1e21},
                                              {"Y", 1e24},
                                              {"", 1.0}}};

const char* unit_help(Unit unit) {
  switch (unit) {
    case Unit::BYTES:
      return "a size with its unit, e.g. 80GiB, 1.5GB, 4096B";
    case Unit::BANDWIDTH:
      return "a bandwidth with its unit, e.g. 900GBps, 900GB/s (bytes) or 400Gbps (bits)";
    case Unit::TIME:
      return "a time with its unit, e.g. 1.5us, 20ns, 3ms, 2s, 2h, 1d";
    case Unit::FLOP_RATE:
      return "a FLOP rate with its unit, e.g. 989TFLOPS or 989TFLOP/s";
    case Unit::FLOPS:
      return "a FLOP count with its unit, e.g. 3.1e23FLOP or 310ZFLOP";
  }
  return "";
}

// Splits a unit suffix into an SI/IEC prefix factor and the remaining base unit.
std::pair<double, std::string_view> split_prefix(std::string_view suffix, std::string_view base) {
  for (const auto& p : PREFIXES) {
    if (suffix.size() == p.name.size() + base.size() && suffix.substr(0, p.name.size()) == p.name &&
        suffix.substr(p.name.size()) == base) {
      return {p.factor, base};
    }
  }
  return {0.0, {}};
}

double unit_factor(std::string_view suffix, Unit unit) {
  switch (unit) {
    case Unit::BYTES:
      if (auto [f, b] = split_prefix(suffix, "B"); f > 0) return f;
      break;
    case Unit::BANDWIDTH:
      for (std::string_view base : {"Bps", "B/s", "bps", "b/s"}) {
        if (auto [f, b] = split_prefix(suffix, base); f > 0) return base[0] == 'b' ? f / 8 : f;
      }
      break;
    case Unit::TIME: {
      static constexpr std::array<std::pair<std::string_view, double>, 9> TIMES = {
          {{"ps", 1e-12},
           {"ns", 1e-9},
           {"us", 1e-6},
           {"\xC2\xB5s", 1e-6},
           {"ms", 1e-3},
           {"s", 1.0},
           {"min", 60.0},
           {"h", 3600.0},
           {"d", 86400.0}}};
      for (const auto& [name, f] : TIMES)
        if (suffix == name) return f;
      break;
    }
    case Unit::FLOP_RATE:
      for (std::string_view base : {"FLOPS", "FLOP/s", "FLOPs/s"}) {
        if (auto [f, b] = split_prefix(suffix, base); f > 0) return f;
      }
      break;
    case Unit::FLOPS:
      for (std::string_view base : {"FLOP", "FLOPs"}) {
        if (auto [f, b] = split_prefix(suffix, base); f > 0) return f;
      }
      break;
  }
  return 0.0;
}

}  // namespace

double parse_quantity(std::string_view text, Unit unit, std::string_view field) {
  std::string_view trimmed = text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front())))
    trimmed.remove_prefix(1);
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back())))
    trimmed.remove_suffix(1);
  double number = 0;
  auto [end, ec] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), number);
  if (ec != std::errc() || end == trimmed.data()) {
    throw ValidationError::bad_value(field, text, unit_help(unit));
  }
  std::string_view suffix(end, static_cast<size_t>(trimmed.data() + trimmed.size() - end));
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  if (suffix.empty()) {
    throw ValidationError(std::string(field), fmt::format("{}: '{}' has no unit; write {}", field,
                                                          text, unit_help(unit)));
  }
  double factor = unit_factor(suffix, unit);
  if (factor <= 0) {
    throw ValidationError(std::string(field), fmt::format("{}: unknown unit '{}' in '{}'; write {}",
                                                          field, suffix, text, unit_help(unit)));
  }
  if (!std::isfinite(number) || number < 0) {
    throw ValidationError(
        std::string(field),
        fmt::format("{}: '{}' must be a non-negative finite quantity", field, text));
  }
  if (!std::isfinite(number * factor)) {
    throw ValidationError(
        std::string(field),
        fmt::format("{}: '{}' is too large to represent; write a smaller value: {}", field, text,
                    unit_help(unit)));
  }
  return number * factor;
}

std::int64_t parse_binary_count(std::string_view text, std::string_view field) {
  auto bad = [&]() {
    return ValidationError::bad_value(
        field, text, "a whole count, optionally with k (x 1024) or M (x 1048576), e.g. 8192 or 8k");
  };
  std::int64_t scale = 1;
  std::string_view digits = text;
  if (!digits.empty()) {
    const char last = digits.back();
    if (last == 'k' || last == 'K') scale = std::int64_t{1} << 10;
    if (last == 'm' || last == 'M') scale = std::int64_t{1} << 20;
    if (scale > 1) digits.remove_suffix(1);
  }
  std::int64_t number = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (ec != std::errc() || digits.empty() || end != digits.data() + digits.size() || number < 1)
    throw bad();
  if (number > (std::int64_t{1} << 62) / scale) throw bad();
  return number * scale;
}

namespace {
std::string scaled(double value, int digits, const char* const* names, int count, double step,
                   std::string_view unit) {
  int i = 0;
  double v = value;
  while (i + 1 < count && std::fabs(v) >= step) {
    v /= step;
    ++i;
  }
  return fmt::format("{:.{}f} {}{}", v, digits, names[i], unit);
}
}  // namespace

std::string format_bytes(double bytes, int digits) {
  static const char* const NAMES[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
  return scaled(bytes, digits, NAMES, 6, 1024.0, "B");
}

std::string format_bandwidth(double bytes_per_s, int digits) {
  static const char* const NAMES[] = {"", "k", "M", "G", "T", "P"};
  return scaled(bytes_per_s, digits, NAMES, 6, 1000.0, "B/s");
}

std::string format_flop_rate(double flop_per_s, int digits) {
  static const char* const NAMES[] = {"", "K", "M", "G", "T", "P", "E"};
  return scaled(flop_per_s, digits, NAMES, 7, 1000.0, "FLOP/s");
}

std::string format_count(double count, int digits) {
  static const char* const NAMES[] = {"", "K", "M", "B", "T"};
  int i = 0;
  double v = count;
  while (i + 1 < 5 && std::fabs(v) >= 1000.0) {
    v /= 1000.0;
    ++i;
  }
  return fmt::format("{:.{}f}{}", v, i == 0 ? 0 : digits, NAMES[i]);
}

std::string format_grouped(std::int64_t value) {
  // The magnitude as unsigned: -INT64_MIN does not fit in an int64.
  const std::uint64_t magnitude =
      value < 0 ? 0 - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
  const std::string digits = std::to_string(magnitude);
  std::string out = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_rounded(double value) {
  if (!std::isfinite(value) || std::fabs(value) >= 1e15) return fmt::format("{:.3g}", value);
  return format_grouped(static_cast<std::int64_t>(std::llrint(value)));
}

std::string format_number(double value, int digits) {
  if (!std::isfinite(value) || std::fabs(value) >= 1e15) return fmt::format("{:.3g}", value);
  const double scale = std::pow(10.0, digits);
  const double rounded = std::round(value * scale) / scale;
  const double whole = std::trunc(rounded);
  std::string text = format_grouped(static_cast<std::int64_t>(whole));
  if (rounded < 0 && whole == 0) text = "-" + text;
  std::string fraction = fmt::format("{:.{}f}", std::fabs(rounded - whole), digits);
  fraction = fraction.substr(1);  // ".50"
  while (!fraction.empty() && (fraction.back() == '0' || fraction.back() == '.'))
    fraction.pop_back();
  return text + fraction;
}

std::string format_money(double usd) {
  if (!std::isfinite(usd) || std::fabs(usd) >= 1e15) return fmt::format("${:.3g}", usd);
  if (std::fabs(usd) >= 1000) return "$" + format_rounded(usd);
  return fmt::format("${:.2f}", usd);
}

std::string format_percent(double fraction, int digits) {
  return fmt::format("{:.{}f}%", 100.0 * fraction, digits);
}

std::string format_time(double seconds, int digits) {
  double a = std::fabs(seconds);
  if (a == 0) return fmt::format("{:.{}f} s", 0.0, digits);
  if (a < 1e-9) return fmt::format("{:.{}f} ps", seconds * 1e12, digits);
  if (a < 1e-6) return fmt::format("{:.{}f} ns", seconds * 1e9, digits);
  if (a < 1e-3) return fmt::format("{:.{}f} us", seconds * 1e6, digits);
  if (a < 1.0) return fmt::format("{:.{}f} ms", seconds * 1e3, digits);
  return fmt::format("{:.{}f} s", seconds, digits);
}

}  // namespace loom
