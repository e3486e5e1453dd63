#include "strategies/plan/plan_input.hpp"

#include <fmt/format.h>

namespace loom::strategies {

FieldSource file_source(const std::string& file, const std::string& pointer, std::string name) {
  return FieldSource{fmt::format("{}#{}", file, pointer), std::move(name), file, pointer};
}

PlanSources PlanSources::command_line() {
  PlanSources s;
  s.flags_fallback_ = true;
  return s;
}

void PlanSources::set(std::string_view key, FieldSource source) {
  sources_.insert_or_assign(std::string(key), std::move(source));
}

FieldSource PlanSources::of(std::string_view key) const {
  if (auto it = sources_.find(key); it != sources_.end()) return it->second;
  FieldSource s;
  s.where = flags_fallback_ ? std::string(canonical_flag(plan_field(key))) : std::string(key);
  if (s.where.empty()) s.where = std::string(key);
  s.name = s.where;
  return s;
}

bool PlanSources::has(std::string_view key) const {
  return sources_.count(key) > 0;
}

void PlanSources::erase(std::string_view key) {
  if (auto it = sources_.find(key); it != sources_.end()) sources_.erase(it);
}

void PlanSources::merge(const PlanSources& other) {
  for (const auto& [key, source] : other.sources_) sources_.insert_or_assign(key, source);
}

PlanError::PlanError(std::string key, const FieldSource& source, std::string message)
    : ValidationError(source.where, std::move(message)),
      key_(std::move(key)),
      file_(source.file),
      pointer_(source.pointer) {}

void fail_field(const PlanSources& sources, std::string_view key, std::string message) {
  const FieldSource s = sources.of(key);
  // A flag's rule starts with the flag; a value from a file or a foreign flag gets its
  // location in front so that the reader knows which line to edit.
  if (s.where != s.name && message.rfind(s.where, 0) != 0)
    message = fmt::format("{}: {}", s.where, message);
  throw PlanError(std::string(key), s, std::move(message));
}

void PlanInput::set(std::string_view key, PlanValue value, FieldSource source) {
  plan_field(key);  // an unknown key is a bug in the caller
  values_.insert_or_assign(std::string(key), std::move(value));
  sources_.set(key, std::move(source));
}

void PlanInput::set(std::string_view key, PlanValue value) {
  plan_field(key);
  values_.insert_or_assign(std::string(key), std::move(value));
  sources_.erase(key);
}

namespace {
template <typename T>
std::optional<T> get_as(const std::map<std::string, PlanValue, std::less<>>& values,
                        std::string_view key) {
  auto it = values.find(key);
  if (it == values.end()) return std::nullopt;
  const T* v = std::get_if<T>(&it->second);
  check_invariant(v != nullptr, "plan value read as the type its field holds");
  return *v;
}
}  // namespace

std::optional<std::int64_t> PlanInput::integer(std::string_view key) const {
  return get_as<std::int64_t>(values_, key);
}
std::optional<double> PlanInput::number(std::string_view key) const {
  return get_as<double>(values_, key);
}
std::optional<std::string> PlanInput::text(std::string_view key) const {
  return get_as<std::string>(values_, key);
}
bool PlanInput::flag(std::string_view key, bool fallback) const {
  return get_as<bool>(values_, key).value_or(fallback);
}

std::string PlanInput::canonical() const {
  std::string out;
  for (const auto& [key, value] : values_) {
    if (!out.empty()) out += "; ";
    out += key + "=";
    std::visit(
        [&out](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            out += v;
          } else if constexpr (std::is_same_v<T, bool>) {
            out += v ? "true" : "false";
          } else if constexpr (std::is_same_v<T, std::vector<int>>) {
            out += fmt::format("{}", fmt::join(v, ","));
          } else {
            out += fmt::format("{}", v);
          }
        },
        value);
  }
  return out;
}

void PlanInput::merge(const PlanInput& over) {
  for (const auto& [key, value] : over.values_) {
    values_.insert_or_assign(key, value);
    // A value given without a source is named by the fallback, not by the level it replaced.
    if (!over.sources_.has(key)) sources_.erase(key);
    const PlanField& field = plan_field(key);
    // A gbs given at one level overrides a grad_accum from a lower one, and vice versa.
    if (!field.supersedes.empty() && !over.has(field.supersedes) && has(field.supersedes))
      erase(field.supersedes);
  }
  sources_.merge(over.sources_);
}

}  // namespace loom::strategies
