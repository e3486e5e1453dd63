#pragma once
// Plan values as their sources gave them, before resolution, each with where it came
// from. Every source (command-line flags, a loom plan JSON, a DeepSpeed config, Megatron
// flags) yields a PlanInput; they merge in precedence order and resolve_plan turns the
// result into a models::TrainingPlan. The provenance lets a rule broken by a value from
// a file name that file and the value's JSON pointer instead of a flag.
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "strategies/plan/plan_fields.hpp"

namespace loom::strategies {

/// Where one field's value came from, as messages should name it.
struct FieldSource {
  std::string where;    ///< the subject of a message: "--tp", "plan.json#/tp", "tp"
  std::string name;     ///< the field in prose: "--tp", "tp"
  std::string file;     ///< the file the value came from; empty for flags and defaults
  std::string pointer;  ///< its JSON pointer in that file ("/tp")
};

/// The source of a value read from `file` at JSON `pointer`: named "FILE#POINTER" as a
/// subject and `name` in prose.
FieldSource file_source(const std::string& file, const std::string& pointer, std::string name);

/// How messages name each plan field. Fields without an entry use the fallback: the
/// plain JSON key, or (for the command line) the canonical flag.
class PlanSources {
 public:
  /// Plain keys: "tp 3 does not divide ...". What library callers get.
  PlanSources() = default;
  /// Fields without an entry are named by their canonical CLI flag ("--tp").
  static PlanSources command_line();

  /// Records that `key`'s value came from `source`.
  void set(std::string_view key, FieldSource source);
  /// The source of `key` (the fallback when none was recorded).
  FieldSource of(std::string_view key) const;
  /// Subject spelling of `key`.
  std::string where(std::string_view key) const { return of(key).where; }
  /// Prose spelling of `key`.
  std::string name(std::string_view key) const { return of(key).name; }
  /// Whether `key` has a recorded source.
  bool has(std::string_view key) const;
  /// Forgets `key`'s source (it falls back again).
  void erase(std::string_view key);
  /// `other`'s entries laid over these.
  void merge(const PlanSources& other);

 private:
  bool flags_fallback_ = false;
  std::map<std::string, FieldSource, std::less<>> sources_;
};

/// A plan rule broken by the value of one field. key() is the plan field ("tp"); file()
/// and pointer() name the file and JSON pointer when the value came from a file.
class PlanError : public ValidationError {
 public:
  PlanError(std::string key, const FieldSource& source, std::string message);
  /// The plan field at fault (its JSON key).
  const std::string& key() const { return key_; }
  /// The file the offending value came from; empty for flags and defaults.
  const std::string& file() const { return file_; }
  /// The JSON pointer of the offending value inside file().
  const std::string& pointer() const { return pointer_; }

 private:
  std::string key_;
  std::string file_;
  std::string pointer_;
};

/// Throws PlanError for field `key` with `message`; the message is prefixed with where the
/// value came from when it does not already start with it and the value came from a file
/// or a foreign flag.
[[noreturn]] void fail_field(const PlanSources& sources, std::string_view key, std::string message);

/// Raw values of some plan fields from one source (or several, merged), with provenance.
class PlanInput {
 public:
  /// Sets `key` to `value` as given by `source`.
  void set(std::string_view key, PlanValue value, FieldSource source);
  /// Sets `key` without a source of its own: messages name it by the fallback (for the
  /// command line, its canonical flag), as for a value given directly.
  void set(std::string_view key, PlanValue value);
  bool has(std::string_view key) const { return values_.count(key) > 0; }
  void erase(std::string_view key) { values_.erase(values_.find(key)); }
  /// The integer value of `key`, if set. Throws InternalError when it holds another type.
  std::optional<std::int64_t> integer(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<std::string> text(std::string_view key) const;
  /// A SWITCH or TOGGLE; `fallback` when unset.
  bool flag(std::string_view key, bool fallback = false) const;

  /// Every value set, "key=value" joined by "; " in key order (a fingerprint of the input:
  /// equal inputs give equal text).
  std::string canonical() const;

  /// `over` laid over this input: each value `over` sets wins (with its source); a value
  /// whose row names a field it supersedes clears that field unless `over` sets it too.
  void merge(const PlanInput& over);

  const PlanSources& sources() const { return sources_; }
  PlanSources& sources() { return sources_; }

 private:
  std::map<std::string, PlanValue, std::less<>> values_;
  PlanSources sources_;
};

}  // namespace loom::strategies
