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

#include "common/units.hpp"

namespace loom {

/// Reads and parses a JSON file; `what` names the kind of file in errors ("model", "cluster").
/// Throws ConfigError (file not found, or malformed JSON with line and column).
nlohmann::json load_json_file(const std::string& path, std::string_view what);

/// Parses JSON text; `origin` names it in errors. Throws ConfigError with line and column.
nlohmann::json parse_json_text(std::string_view text, const std::string& origin);

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
  std::string get_string(std::string_view key);
  std::string get_string_or(std::string_view key, std::string_view fallback);
  double get_number(std::string_view key);
  double get_number_or(std::string_view key, double fallback);
  /// A positive integer; throws ConfigError naming the key when zero, negative or fractional.
  std::int64_t get_positive_int(std::string_view key);
  std::int64_t get_positive_int_or(std::string_view key, std::int64_t fallback);
  /// A non-negative integer.
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
