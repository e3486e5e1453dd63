#include "common/json_util.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>

#include "common/error.hpp"
#include "common/strings.hpp"

namespace loom {

namespace {

// Line and column (1-based) of byte `offset` in `text`.
std::pair<int, int> line_column(std::string_view text, size_t offset) {
  int line = 1, column = 1;
  for (size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// nlohmann's message without its "[json.exception.kind.N] " tag (and, for parse errors, the
// position loom prints itself).
std::string exception_detail(const nlohmann::json::exception& e) {
  std::string detail = e.what();
  if (auto tag = detail.find("] "); detail.rfind("[json.exception", 0) == 0 && tag != detail.npos)
    detail = detail.substr(tag + 2);
  if (auto pos = detail.find("parse error"); pos != std::string::npos) {
    if (auto colon = detail.find(": ", pos); colon != std::string::npos)
      detail = detail.substr(colon + 2);
  }
  return detail;
}

// `text` as an ASCII JSON string; a character cut in two by substr() becomes U+FFFD.
std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

// Writes at most about `budget` bytes of compact JSON for `v` to `out`; containers stop
// early, so the recursion is no deeper than the budget.
void write_excerpt(const nlohmann::json& v, std::string& out, size_t budget) {
  if (out.size() >= budget) return;
  if (v.is_object() || v.is_array()) {
    const bool object = v.is_object();
    out += object ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (out.size() >= budget) return;
      if (!first) out += ", ";
      first = false;
      if (object) out += quoted(it.key().substr(0, budget)) + ": ";
      write_excerpt(it.value(), out, budget);
    }
    out += object ? '}' : ']';
  } else if (v.is_string()) {
    out += quoted(v.get_ref<const std::string&>().substr(0, budget));
  } else {
    out += v.dump();
  }
}

}  // namespace

// nlohmann parses iteratively, but everything that walks the value afterwards (dump, copies,
// comparisons) recurses: the depth is checked before the parser sees the text. The values are
// counted here too, before nlohmann allocates 50 to 120 bytes for each: "{}," is 3 bytes of
// text but one heap-allocated object parsed.
void check_json_bounds(std::string_view text, const std::string& origin) {
  int depth = 0;
  bool in_string = false, escaped = false, opened = false;
  // Values: the root, plus one per comma, plus one per non-empty array or object.
  std::int64_t values = 1;
  const auto fail = [&](size_t i, const std::string& what) {
    const auto [line, column] = line_column(text, i);
    throw ConfigError(origin, "", fmt::format("{}:{}:{}: {}", origin, line, column, what));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (opened && c != ']' && c != '}') ++values;
    opened = false;
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      opened = true;
      if (++depth > MAX_JSON_DEPTH) {
        fail(i, fmt::format("JSON nested deeper than {} levels (loom's limit MAX_JSON_DEPTH, "
                            "docs/limits.md); loom inputs nest a few levels: check that this is "
                            "the right file",
                            MAX_JSON_DEPTH));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',') {
      ++values;
    }
    if (values > MAX_JSON_VALUES) {
      fail(i, fmt::format("JSON holds more than {} values (loom's limit MAX_JSON_VALUES, "
                          "docs/limits.md); check that this is the right file, or profile "
                          "fewer steps",
                          MAX_JSON_VALUES));
    }
  }
}

nlohmann::json parse_json_text(std::string_view text, const std::string& origin) {
  check_json_bounds(text, origin);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports a byte offset; users want line and column.
    const size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const auto [line, column] = line_column(text, offset);
    throw ConfigError::parse_error(origin, line, column, exception_detail(e));
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number beyond a double ("1e400").
    throw ConfigError(origin, "",
                      fmt::format("{}: invalid JSON: {}; numbers must fit a double (about "
                                  "1.8e308 at most)",
                                  origin, exception_detail(e)));
  }
}

std::string json_excerpt(const nlohmann::json& value) {
  std::string out;
  write_excerpt(value, out, MAX_ECHO_BYTES);
  return printable(out, MAX_ECHO_BYTES);
}

std::string read_text_file(const std::string& path, std::string_view what, std::int64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::is_directory(status)) {
    throw ConfigError(
        path, "",
        fmt::format("{}: is a directory, not a {} file; give the path of a JSON file", path, what));
  }
  if (ec || !fs::exists(status)) throw ConfigError::file_not_found(path, what);
  if (!fs::is_regular_file(status)) {
    throw ConfigError(path, "",
                      fmt::format("{}: not a regular file (a FIFO, socket or device); loom reads "
                                  "{} files from disk: give the path of one",
                                  path, what));
  }
  const auto too_large = [&](std::uintmax_t size) {
    return ConfigError(
        path, "",
        fmt::format("{}: the {} file holds {} bytes, over loom's limit of {} bytes ({} in "
                    "common/limits.hpp, docs/limits.md); check that this is the right file",
                    path, what, size, max_bytes,
                    max_bytes == MAX_CONFIG_FILE_BYTES ? "MAX_CONFIG_FILE_BYTES"
                                                       : "MAX_MEASUREMENT_FILE_BYTES"));
  };
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > static_cast<std::uintmax_t>(max_bytes)) throw too_large(size);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError::file_not_found(path, what);
  // Read in chunks and stop past the limit: the file may have grown since it was measured.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > static_cast<size_t>(max_bytes)) throw too_large(text.size());
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw ConfigError(
        path, "", fmt::format("{}: the {} file is empty; write a JSON object in it", path, what));
  }
  return text;
}

nlohmann::json load_json_file(const std::string& path, std::string_view what,
                              std::int64_t max_bytes) {
  return parse_json_text(read_text_file(path, what, max_bytes), path);
}

ObjectReader::ObjectReader(const nlohmann::json& value, std::string file, std::string pointer)
    : value_(value), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!value_.is_object()) {
    throw ConfigError::bad_value(file_, pointer_.empty() ? "/" : pointer_, json_excerpt(value_),
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
  if (!v.is_string()) fail(key, json_excerpt(v), "a string");
  const auto& text = v.get_ref<const std::string&>();
  if (!is_printable(text))
    fail(key, json_excerpt(v), "a string without control characters or bidirectional overrides");
  return text;
}

std::string ObjectReader::get_string_or(std::string_view key, std::string_view fallback) {
  return has(key) ? get_string(key) : std::string(fallback);
}

std::string ObjectReader::get_name_or(std::string_view key, std::string_view fallback) {
  if (!has(key)) return std::string(fallback);
  std::string name = get_string(key);
  if (name.size() > static_cast<size_t>(MAX_NAME_BYTES)) {
    fail(key, json_excerpt(raw(key)),
         fmt::format("a name of at most {} bytes (loom's limit MAX_NAME_BYTES, docs/limits.md)",
                     MAX_NAME_BYTES));
  }
  return name;
}

double ObjectReader::get_number(std::string_view key) {
  const auto& v = raw(key);
  if (!v.is_number()) fail(key, json_excerpt(v), "a number");
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
    fail(key, json_excerpt(v), allowed);
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
  if (!v.is_boolean()) fail(key, json_excerpt(v), "true or false");
  return v.get<bool>();
}

double ObjectReader::get_quantity(std::string_view key, Unit unit) {
  const auto& v = raw(key);
  if (!v.is_string()) {
    fail(key, json_excerpt(v), "a string with its unit, e.g. \"80GiB\", \"900GBps\", \"1.5us\"");
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
       fmt::format("'{}'{}", printable(s, MAX_ECHO_BYTES),
                   suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)"),
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
