#pragma once
// The loom error hierarchy. Library code throws these; only cli/main.cpp turns them into
// one line on stderr and an exit code (0 ok, 1 internal bug, 2 bad input, 3 infeasible).
// Library code names the field at fault by its own key ("nodes", "algorithm", "tp"), never
// by a command-line flag; a front end that wants its own spelling passes a FieldNames (the
// CLI: its flags, "--nodes", "--algo") or a `field` argument.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// Exit codes of the loom executable.
enum class ExitCode : int { OK = 0, INTERNAL = 1, BAD_INPUT = 2, INFEASIBLE = 3 };

/// Base of every error loom reports; carries the process exit code. The message is kept to
/// one printable line: control characters and bytes that are not UTF-8 are escaped, and one
/// longer than MAX_MESSAGE_BYTES (common/limits.hpp) keeps its head and its tail, so no input
/// can garble the terminal or flood it.
class Error : public std::runtime_error {
 public:
  Error(const std::string& message, ExitCode code);
  /// The exit code the CLI returns for this error.
  ExitCode exit_code() const { return code_; }

 private:
  ExitCode code_;
};

/// An input file is unreadable or holds something invalid; names the file and JSON pointer.
class ConfigError : public Error {
 public:
  ConfigError(std::string file, std::string pointer, std::string message);
  /// The input file the error is about.
  const std::string& file() const { return file_; }
  /// JSON pointer of the offending value inside the file ("" for the whole file).
  const std::string& pointer() const { return pointer_; }

  static ConfigError file_not_found(const std::string& file, std::string_view what);
  static ConfigError parse_error(const std::string& file, int line, int column,
                                 std::string_view detail);
  static ConfigError unknown_key(const std::string& file, const std::string& pointer,
                                 std::string_view key, std::string_view suggestion);
  static ConfigError missing_key(const std::string& file, const std::string& pointer,
                                 std::string_view key);
  static ConfigError bad_value(const std::string& file, const std::string& pointer,
                               std::string_view value, std::string_view allowed);

 private:
  std::string file_;
  std::string pointer_;
};

/// How messages spell the library's field keys. Library code asks it for the spelling of a
/// key it names in a message; by default a key is spelled as itself ("nodes"), and a front
/// end passes its own speller (the CLI maps "nodes" to "--nodes", "algorithm" to "--algo").
class FieldNames {
 public:
  /// Returns the spelling of one library key.
  using Speller = std::string (*)(std::string_view key);
  /// Plain keys: what library callers get.
  FieldNames() = default;
  /// Keys spelled by `speller`.
  explicit FieldNames(Speller speller) : speller_(speller) {}
  /// The spelling of `key`.
  std::string operator()(std::string_view key) const {
    return speller_ ? speller_(key) : std::string(key);
  }

 private:
  Speller speller_ = nullptr;
};

/// A value breaks a rule (divisibility, batch arithmetic, GPU count, an unknown name, ...).
class ValidationError : public Error {
 public:
  ValidationError(std::string field, std::string message);
  /// The field at fault as the thrower named it: a library key ("nodes", "model.hidden"),
  /// or the caller's spelling when the caller passed one (the CLI passes its flags).
  const std::string& field() const { return field_; }

  /// "field: invalid value 'v'; allowed: ...".
  static ValidationError bad_value(std::string_view field, std::string_view value,
                                   std::string_view allowed);
  /// An unknown name among a registry of names (presets, algorithms, ...), with did-you-mean.
  static ValidationError unknown_name(std::string_view field, std::string_view value,
                                      const std::vector<std::string>& valid);
  /// A size or count that must be positive.
  static ValidationError not_positive(std::string_view field, std::string_view value);

 private:
  std::string field_;
};

/// A model specification is inconsistent or unsupported.
class ModelError : public Error {
 public:
  explicit ModelError(std::string message) : Error(std::move(message), ExitCode::BAD_INPUT) {}
};

/// A calibration profile or measurement log cannot be used.
class CalibrationError : public Error {
 public:
  explicit CalibrationError(std::string message) : Error(std::move(message), ExitCode::BAD_INPUT) {}
};

/// The configuration is valid but cannot run (e.g. does not fit with --require-fit).
class InfeasibleError : public Error {
 public:
  explicit InfeasibleError(std::string message) : Error(std::move(message), ExitCode::INFEASIBLE) {}
};

/// A broken internal invariant: a bug in loom.
class InternalError : public Error {
 public:
  explicit InternalError(std::string message) : Error(std::move(message), ExitCode::INTERNAL) {}
};

/// Throws InternalError with `what` when `condition` is false.
inline void check_invariant(bool condition, const char* what) {
  if (!condition) throw InternalError(std::string("internal invariant broken: ") + what);
}

}  // namespace loom
