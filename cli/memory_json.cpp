#include "cli/memory_json.hpp"

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

}  // namespace loom::cli
