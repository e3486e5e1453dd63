#include "cli/memory_json.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/units.hpp"

namespace loom::cli {
namespace {

// One stage's contract fields, in bytes (parameters in parameters).
OrderedJson memory_stage_json(const models::StageMemory& s) {
  OrderedJson j;
  j["parameters"] = s.parameters;
  j["weights_bytes"] = s.weights_bytes;
  j["gradients_bytes"] = s.gradients_bytes;
  j["optimizer_bytes"] = s.optimizer_bytes;
  j["activations_bytes"] = s.activations_bytes;
  j["other_bytes"] = s.other_bytes;
  j["total_bytes"] = s.total_bytes;
  return j;
}

}  // namespace

OrderedJson memory_report_json(const models::MemoryReport& r, std::optional<double> capacity) {
  OrderedJson res;
  res["parameters"] = r.parameters;
  res["capacity_bytes"] = capacity ? OrderedJson(*capacity) : OrderedJson(nullptr);
  res["fits"] = capacity ? OrderedJson(r.peak_bytes <= *capacity) : OrderedJson(nullptr);
  res["peak_bytes"] = r.peak_bytes;
  OrderedJson stages = OrderedJson::array();
  for (const auto& s : r.stages) stages.push_back(memory_stage_json(s));
  res["per_stage"] = std::move(stages);
  return res;
}

std::string misfit_text(const models::MemoryReport& r, double capacity) {
  if (r.peak_bytes <= capacity) return "";
  return fmt::format("stage {} needs {} but the GPU has {}", r.peak_stage,
                     format_bytes(r.peak_bytes), format_bytes(capacity));
}

void require_fit(const models::MemoryReport& r, double capacity) {
  const std::string misfit = misfit_text(r, capacity);
  if (!misfit.empty()) throw InfeasibleError("--require-fit: " + misfit);
}

}  // namespace loom::cli
