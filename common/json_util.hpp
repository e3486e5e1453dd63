#pragma once
// JSON input helpers: load a file with line/column on syntax errors, and read objects
// key by key so that every error names the file and the JSON pointer, every quantity is
// parsed with its unit, and unknown keys are errors with a did-you-mean hint.
// Include only from .cpp files: nlohmann/json.hpp is heavy.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/limits.hpp"
#include "common/units.hpp"

namespace loom {

/// The largest integer an input file may hold (2^53: every integer up to it is exact in a
/// double, which is how JSON numbers are compared).
inline constexpr std::int64_t MAX_JSON_INT = std::int64_t{1} << 53;

/// Reads a whole text file of at most `max_bytes`; `what` names the kind of file in errors
/// ("model", "cluster"). Throws ConfigError when the path is missing, unreadable, not a
/// regular file (a directory, FIFO or device), larger than `max_bytes` (naming the limit), or
/// the file is empty.
std::string read_text_file(const std::string& path, std::string_view what,
                           std::int64_t max_bytes = MAX_CONFIG_FILE_BYTES);

/// Reads and parses a JSON file; `what` names the kind of file in errors ("model", "cluster").
/// Throws ConfigError (see read_text_file and parse_json_text).
nlohmann::json load_json_file(const std::string& path, std::string_view what,
                              std::int64_t max_bytes = MAX_CONFIG_FILE_BYTES);

/// Parses JSON text; `origin` names it in errors. Throws ConfigError with line and column on
/// malformed JSON, a number out of range ("1e400"), nesting deeper than MAX_JSON_DEPTH or more
/// than MAX_JSON_VALUES values.
nlohmann::json parse_json_text(std::string_view text, const std::string& origin);

/// Throws ConfigError with line and column, naming the limit, when `text` nests arrays and
/// objects deeper than MAX_JSON_DEPTH or holds more than MAX_JSON_VALUES values (objects,
/// arrays, strings, numbers, literals; an object member counts once). parse_json_text checks
/// it; parsers of their own call it first. Linear in the text, allocates nothing.
void check_json_bounds(std::string_view text, const std::string& origin);

/// A short, printable excerpt of `value` for an error message: compact JSON cut after about
/// MAX_ECHO_BYTES ("[1, 2, 3, ..."), whatever its size or depth.
std::string json_excerpt(const nlohmann::json& value);

/// Reads one JSON object. Every accessor records its key as known; finish() rejects the
/// keys nobody asked for.
class ObjectReader {
 public:
  /// Throws ConfigError unless `value` is an object.
  ObjectReader(const nlohmann::json& value, std::string file, std::string pointer);

  bool has(std::string_view key);
  /// Declares keys that are allowed without being read (e.g. comments, "$schema").
  void allow(std::initializer_list<std::string_view> keys);

  const nlohmann::json& raw(std::string_view key);  // required
  /// A string without control characters (every string loom reads is a name, a unit or a
  /// path, printed back one day); throws ConfigError otherwise.
  std::string get_string(std::string_view key);
  std::string get_string_or(std::string_view key, std::string_view fallback);
  /// A name (of a model, cluster, host, vertex): a printable string of at most
  /// MAX_NAME_BYTES, since names are printed in every table; throws ConfigError otherwise.
  std::string get_name_or(std::string_view key, std::string_view fallback);
  double get_number(std::string_view key);
  double get_number_or(std::string_view key, double fallback);
  /// An integer in [min, max]; throws ConfigError naming the key and the range when the
  /// value is not a number, fractional, or outside it.
  std::int64_t get_int_in_range(std::string_view key, std::int64_t min, std::int64_t max);
  std::int64_t get_int_in_range_or(std::string_view key, std::int64_t min, std::int64_t max,
                                   std::int64_t fallback);
  /// A positive integer up to MAX_JSON_INT; throws ConfigError naming the key otherwise.
  std::int64_t get_positive_int(std::string_view key);
  std::int64_t get_positive_int_or(std::string_view key, std::int64_t fallback);
  /// A non-negative integer up to MAX_JSON_INT.
  std::int64_t get_count_or(std::string_view key, std::int64_t fallback);
  bool get_bool_or(std::string_view key, bool fallback);
  /// A quantity with its unit ("80GiB"), in base units; see parse_quantity.
  double get_quantity(std::string_view key, Unit unit);
  double get_quantity_or(std::string_view key, Unit unit, double fallback);
  /// A nested object reader.
  ObjectReader child(std::string_view key);

  /// One of `allowed`; throws ConfigError listing them otherwise.
  std::string get_enum(std::string_view key, const std::vector<std::string>& allowed);
  std::string get_enum_or(std::string_view key, const std::vector<std::string>& allowed,
                          std::string_view fallback);

  /// Throws ConfigError::unknown_key for the first key that no accessor asked for.
  void finish() const;

  const std::string& file() const { return file_; }
  /// JSON pointer of `key` inside this object.
  std::string pointer_of(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, std::string_view value,
                         std::string_view allowed) const;

 private:
  const nlohmann::json& value_;
  std::string file_;
  std::string pointer_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace loom
