#include "models/training_plan.hpp"

#include "common/error.hpp"

namespace loom::models {
namespace {

template <typename Enum>
Enum parse_named(std::string_view text, std::string_view field,
                 const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<Enum>(i);
  throw ValidationError::unknown_name(field, text, names);
}

}  // namespace

// Each list is indexed by its enum's value.
const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32", "bf16", "fp16", "fp8"};
  return names;
}
const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"adam", "sgd", "sgd-momentum"};
  return names;
}
const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> names = {"none", "selective", "full"};
  return names;
}
const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"naive", "gpipe", "1f1b", "interleaved", "zb"};
  return names;
}
const std::vector<std::string>& grad_dtype_names() {
  static const std::vector<std::string> names = {"fp32", "bf16"};
  return names;
}

std::string to_string(Precision v) {
  return precision_names()[static_cast<size_t>(v)];
}
std::string to_string(Optimizer v) {
  return optimizer_names()[static_cast<size_t>(v)];
}
std::string to_string(Recompute v) {
  return recompute_names()[static_cast<size_t>(v)];
}
std::string to_string(Schedule v) {
  return schedule_names()[static_cast<size_t>(v)];
}
std::string to_string(GradDtype v) {
  return grad_dtype_names()[static_cast<size_t>(v)];
}

Precision parse_precision(std::string_view t, std::string_view f) {
  return parse_named<Precision>(t, f, precision_names());
}
Optimizer parse_optimizer(std::string_view t, std::string_view f) {
  return parse_named<Optimizer>(t, f, optimizer_names());
}
Recompute parse_recompute(std::string_view t, std::string_view f) {
  return parse_named<Recompute>(t, f, recompute_names());
}
Schedule parse_schedule(std::string_view t, std::string_view f) {
  return parse_named<Schedule>(t, f, schedule_names());
}
GradDtype parse_grad_dtype(std::string_view t, std::string_view f) {
  return parse_named<GradDtype>(t, f, grad_dtype_names());
}

}  // namespace loom::models
