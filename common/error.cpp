#include "common/error.hpp"

#include <fmt/format.h>

#include "common/strings.hpp"

namespace loom {
namespace {
std::string where(const std::string& file, const std::string& pointer) {
  if (pointer.empty()) return file;
  return fmt::format("{}: {}", file, pointer);
}
}  // namespace

ConfigError::ConfigError(std::string file, std::string pointer, std::string message)
    : Error(std::move(message), ExitCode::BAD_INPUT),
      file_(std::move(file)),
      pointer_(std::move(pointer)) {}

ConfigError ConfigError::file_not_found(const std::string& file, std::string_view what) {
  return ConfigError(
      file, "",
      fmt::format("{}: cannot open {} file; check the path exists and is readable", file, what));
}

ConfigError ConfigError::parse_error(const std::string& file, int line, int column,
                                     std::string_view detail) {
  return ConfigError(file, "",
                     fmt::format("{}:{}:{}: malformed JSON: {}; fix the syntax at that position",
                                 file, line, column, detail));
}

ConfigError ConfigError::unknown_key(const std::string& file, const std::string& pointer,
                                     std::string_view key, std::string_view suggestion) {
  std::string hint =
      suggestion.empty() ? std::string("remove it") : fmt::format("did you mean '{}'?", suggestion);
  return ConfigError(file, pointer,
                     fmt::format("{}: unknown key '{}'; {}", where(file, pointer), key, hint));
}

ConfigError ConfigError::missing_key(const std::string& file, const std::string& pointer,
                                     std::string_view key) {
  return ConfigError(
      file, pointer,
      fmt::format("{}: missing required key '{}'; add it", where(file, pointer), key));
}

ConfigError ConfigError::bad_value(const std::string& file, const std::string& pointer,
                                   std::string_view value, std::string_view allowed) {
  return ConfigError(
      file, pointer,
      fmt::format("{}: invalid value {}; allowed: {}", where(file, pointer), value, allowed));
}

ValidationError::ValidationError(std::string field, std::string message)
    : Error(std::move(message), ExitCode::BAD_INPUT), field_(std::move(field)) {}

ValidationError ValidationError::bad_value(std::string_view field, std::string_view value,
                                           std::string_view allowed) {
  return ValidationError(std::string(field),
                         fmt::format("{}: invalid value '{}'; allowed: {}", field, value, allowed));
}

ValidationError ValidationError::unknown_name(std::string_view field, std::string_view value,
                                              const std::vector<std::string>& valid) {
  std::string suggestion = did_you_mean(value, valid);
  std::string hint = suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion);
  return ValidationError(std::string(field), fmt::format("{}: unknown name '{}'{}; valid: {}",
                                                         field, value, hint, join(valid, ", ")));
}

ValidationError ValidationError::not_positive(std::string_view field, std::string_view value) {
  return ValidationError(std::string(field),
                         fmt::format("{}: must be a positive number, got '{}'", field, value));
}

}  // namespace loom
