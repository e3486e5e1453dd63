#include "common/json_util.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/strings.hpp"

namespace loom {

nlohmann::json parse_json_text(std::string_view text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports a byte offset; users want line and column.
    size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    int line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string detail = e.what();
    if (auto pos = detail.find("parse error"); pos != std::string::npos) {
      if (auto colon = detail.find(": ", pos); colon != std::string::npos)
        detail = detail.substr(colon + 2);
    }
    throw ConfigError::parse_error(origin, line, column, detail);
  }
}

std::string read_text_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(
        path, "",
        fmt::format("{}: is a directory, not a {} file; give the path of a JSON file", path, what));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError::file_not_found(path, what);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw ConfigError(
        path, "", fmt::format("{}: the {} file is empty; write a JSON object in it", path, what));
  }
  return text;
}

nlohmann::json load_json_file(const std::string& path, std::string_view what) {
  return parse_json_text(read_text_file(path, what), path);
}

ObjectReader::ObjectReader(const nlohmann::json& value, std::string file, std::string pointer)
    : value_(value), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!value_.is_object()) {
    throw ConfigError::bad_value(file_, pointer_.empty() ? "/" : pointer_, value_.dump(),
                                 "a JSON object");
  }
}

std::string ObjectReader::pointer_of(std::string_view key) const {
  return fmt::format("{}/{}", pointer_, key);
}

void ObjectReader::fail(std::string_view key, std::string_view value,
                        std::string_view allowed) const {
  throw ConfigError::bad_value(file_, pointer_of(key), value, allowed);
}

bool ObjectReader::has(std::string_view key) {
  known_.emplace(key);
  return value_.contains(key);
}

void ObjectReader::allow(std::initializer_list<std::string_view> keys) {
  for (auto k : keys) known_.emplace(k);
}

const nlohmann::json& ObjectReader::raw(std::string_view key) {
  if (!has(key)) throw ConfigError::missing_key(file_, pointer_.empty() ? "/" : pointer_, key);
  return value_.find(key).value();
}

std::string ObjectReader::get_string(std::string_view key) {
  const auto& v = raw(key);
  if (!v.is_string()) fail(key, v.dump(), "a string");
  return v.get<std::string>();
}

std::string ObjectReader::get_string_or(std::string_view key, std::string_view fallback) {
  return has(key) ? get_string(key) : std::string(fallback);
}

double ObjectReader::get_number(std::string_view key) {
  const auto& v = raw(key);
  if (!v.is_number()) fail(key, v.dump(), "a number");
  return v.get<double>();
}

double ObjectReader::get_number_or(std::string_view key, double fallback) {
  return has(key) ? get_number(key) : fallback;
}

std::int64_t ObjectReader::get_int_in_range(std::string_view key, std::int64_t min,
                                            std::int64_t max) {
  const auto& v = raw(key);
  // JSON integers are compared as integers; other numbers as doubles, before any conversion
  // (converting an out-of-range double to an integer is undefined behaviour).
  bool ok = false;
  std::int64_t value = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(max);
    value = ok ? static_cast<std::int64_t>(u) : 0;
  } else if (v.is_number_integer()) {
    value = v.get<std::int64_t>();
    ok = value <= max;
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    ok = std::isfinite(d) && std::floor(d) == d && d <= static_cast<double>(max) &&
         d >= static_cast<double>(min);
    value = ok ? static_cast<std::int64_t>(d) : 0;
  }
  if (!ok || value < min) {
    const bool too_large =
        (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) ||
        (v.is_number() && v.get<double>() > static_cast<double>(max));
    std::string allowed;
    if (max < MAX_JSON_INT)
      allowed = fmt::format("an integer from {} to {}", min, max);
    else if (too_large)
      allowed = "an integer up to 2^53";
    else
      allowed = min == 0   ? "a non-negative integer"
                : min == 1 ? "a positive integer"
                           : fmt::format("an integer >= {}", min);
    fail(key, v.dump(), allowed);
  }
  return value;
}

std::int64_t ObjectReader::get_int_in_range_or(std::string_view key, std::int64_t min,
                                               std::int64_t max, std::int64_t fallback) {
  return has(key) ? get_int_in_range(key, min, max) : fallback;
}

std::int64_t ObjectReader::get_positive_int(std::string_view key) {
  return get_int_in_range(key, 1, MAX_JSON_INT);
}

std::int64_t ObjectReader::get_positive_int_or(std::string_view key, std::int64_t fallback) {
  return has(key) ? get_positive_int(key) : fallback;
}

std::int64_t ObjectReader::get_count_or(std::string_view key, std::int64_t fallback) {
  return get_int_in_range_or(key, 0, MAX_JSON_INT, fallback);
}

bool ObjectReader::get_bool_or(std::string_view key, bool fallback) {
  if (!has(key)) return fallback;
  const auto& v = raw(key);
  if (!v.is_boolean()) fail(key, v.dump(), "true or false");
  return v.get<bool>();
}

double ObjectReader::get_quantity(std::string_view key, Unit unit) {
  const auto& v = raw(key);
  if (!v.is_string()) {
    fail(key, v.dump(), "a string with its unit, e.g. \"80GiB\", \"900GBps\", \"1.5us\"");
  }
  try {
    return parse_quantity(v.get<std::string>(), unit, pointer_of(key));
  } catch (const ValidationError& e) {
    throw ConfigError(file_, pointer_of(key), fmt::format("{}: {}", file_, e.what()));
  }
}

double ObjectReader::get_quantity_or(std::string_view key, Unit unit, double fallback) {
  return has(key) ? get_quantity(key, unit) : fallback;
}

ObjectReader ObjectReader::child(std::string_view key) {
  return ObjectReader(raw(key), file_, pointer_of(key));
}

std::string ObjectReader::get_enum(std::string_view key, const std::vector<std::string>& allowed) {
  std::string s = get_string(key);
  for (const auto& a : allowed)
    if (a == s) return s;
  std::string suggestion = did_you_mean(s, allowed);
  fail(key,
       fmt::format("'{}'{}", s, suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)"),
       join(allowed, ", "));
}

std::string ObjectReader::get_enum_or(std::string_view key, const std::vector<std::string>& allowed,
                                      std::string_view fallback) {
  return has(key) ? get_enum(key, allowed) : std::string(fallback);
}

void ObjectReader::finish() const {
  std::vector<std::string> candidates(known_.begin(), known_.end());
  for (const auto& item : value_.items()) {
    if (known_.find(item.key()) == known_.end()) {
      throw ConfigError::unknown_key(file_, pointer_.empty() ? "/" : pointer_, item.key(),
                                     did_you_mean(item.key(), candidates));
    }
  }
}

}  // namespace loom
