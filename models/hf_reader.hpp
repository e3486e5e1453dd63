#pragma once
// The reader of a HuggingFace config.json the translators share (internal to models/:
// model_loader.cpp, hf_gemma.cpp).
#include <cmath>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "common/json_util.hpp"

namespace loom::models::detail {

// HuggingFace configs carry many keys loom does not need, so this reader is never
// finish()ed (the translator is the boundary) and a null value counts as absent; the keys
// loom reads are checked by ObjectReader.
class HfReader {
 public:
  /// Reads object `j` of file `origin`, at JSON pointer `pointer` in it ("": the top level;
  /// a gemma3 config's decoder is at "/text_config"). `j` must outlive the reader.
  HfReader(const nlohmann::json& j, const std::string& origin, const std::string& pointer = "")
      : r_(j, origin, pointer), pointer_(pointer.empty() ? "/" : pointer) {}

  bool has(const char* key) { return r_.has(key) && !r_.raw(key).is_null(); }
  std::int64_t integer(const char* key) {
    if (!has(key)) throw ConfigError::missing_key(r_.file(), pointer_, key);
    const auto& v = r_.raw(key);
    if (!v.is_number_integer()) r_.fail(key, json_excerpt(v), "an integer");
    return v.get<std::int64_t>();
  }
  std::int64_t integer_or(const char* key, std::int64_t fallback) {
    return has(key) ? integer(key) : fallback;
  }
  /// A count of at least `min` (0 or 1), narrowed to int: kept below 2^30 so it cannot wrap.
  int small(const char* key, std::int64_t min) { return narrow(key, integer(key), min); }
  int small_or(const char* key, std::int64_t fallback, std::int64_t min) {
    return narrow(key, integer_or(key, fallback), min);
  }
  /// A finite number (integer or not), else `fallback` when absent or null.
  double number_or(const char* key, double fallback) {
    if (!has(key)) return fallback;
    const auto& v = r_.raw(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      r_.fail(key, json_excerpt(v), "a number");
    return v.get<double>();
  }
  std::string string_or(const char* key, const std::string& fallback) {
    return has(key) ? r_.get_string(key) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) {
    return has(key) ? r_.get_bool_or(key, fallback) : fallback;
  }
  /// The value of `key` as it stands (check has() first).
  const nlohmann::json& raw(const char* key) { return r_.raw(key); }

 private:
  int narrow(const char* key, std::int64_t v, std::int64_t min) const {
    if (v < min || v > (std::int64_t{1} << 30)) {
      r_.fail(key, std::to_string(v),
              min > 0 ? "a positive integer below 2^30" : "a non-negative integer below 2^30");
    }
    return static_cast<int>(v);
  }

  ObjectReader r_;
  std::string pointer_;
};

}  // namespace loom::models::detail
