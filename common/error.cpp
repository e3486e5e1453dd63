#include "common/error.hpp"

#include <fmt/format.h>

#include "common/limits.hpp"
#include "common/strings.hpp"

namespace loom {
namespace {
std::string where(const std::string& file, const std::string& pointer) {
  if (pointer.empty()) return file;
  return fmt::format("{}: {}", file, pointer);
}
}  // namespace

namespace {
// One printable line of at most about MAX_MESSAGE_BYTES. A longer one keeps its head (what
// and where) and its tail (what to do), cut at UTF-8 character boundaries.
std::string one_line(const std::string& message) {
  std::string line = printable(message);
  const size_t half = MAX_MESSAGE_BYTES / 2;
  if (line.size() <= static_cast<size_t>(MAX_MESSAGE_BYTES)) return line;
  const auto continuation = [&](size_t i) {
    return (static_cast<unsigned char>(line[i]) & 0xC0) == 0x80;
  };
  size_t head = half, tail = line.size() - half;
  while (head > 0 && continuation(head)) --head;
  while (tail < line.size() && continuation(tail)) ++tail;
  return fmt::format("{} ... ({} bytes left out) ... {}", line.substr(0, head), tail - head,
                     line.substr(tail));
}
}  // namespace

Error::Error(const std::string& message, ExitCode code)
    : std::runtime_error(one_line(message)), code_(code) {}

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
                     fmt::format("{}: unknown key '{}'; {}", where(file, pointer),
                                 printable(key, MAX_ECHO_BYTES), hint));
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
                         fmt::format("{}: invalid value '{}'; allowed: {}", field,
                                     printable(value, MAX_ECHO_BYTES), allowed));
}

ValidationError ValidationError::unknown_name(std::string_view field, std::string_view value,
                                              const std::vector<std::string>& valid) {
  std::string suggestion = did_you_mean(value, valid);
  std::string hint = suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion);
  return ValidationError(std::string(field),
                         fmt::format("{}: unknown name '{}'{}; valid: {}", field,
                                     printable(value, MAX_ECHO_BYTES), hint, join(valid, ", ")));
}

ValidationError ValidationError::not_positive(std::string_view field, std::string_view value) {
  return ValidationError(std::string(field), fmt::format("{}: must be a positive number, got '{}'",
                                                         field, printable(value, MAX_ECHO_BYTES)));
}

}  // namespace loom
