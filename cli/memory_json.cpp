#include "cli/memory_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "strategies/memory_plan.hpp"
#include "strategies/plan/plan_rules.hpp"

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
  if (s.host_bytes > 0) {  // DeepSpeed offload: in host memory, not in total_bytes
    j["host_optimizer_bytes"] = s.host_optimizer_bytes;
    j["host_gradient_bytes"] = s.host_gradient_bytes;
    j["host_param_bytes"] = s.host_param_bytes;
    j["host_bytes"] = s.host_bytes;
  }
  return j;
}

}  // namespace

OrderedJson memory_report_json(const models::MemoryReport& r, std::optional<double> capacity) {
  OrderedJson res;
  res["parameters"] = r.parameters;
  res["capacity_bytes"] = capacity ? OrderedJson(*capacity) : OrderedJson(nullptr);
  res["fits"] = capacity ? OrderedJson(r.peak_bytes <= *capacity) : OrderedJson(nullptr);
  res["peak_bytes"] = r.peak_bytes;
  if (r.peak_host_bytes > 0) res["peak_host_bytes"] = r.peak_host_bytes;
  OrderedJson stages = OrderedJson::array();
  for (const auto& s : r.stages) stages.push_back(memory_stage_json(s));
  res["per_stage"] = std::move(stages);
  return res;
}

std::string host_memory_text(const models::MemoryReport& r, std::optional<int> gpus_per_node,
                             std::optional<double> host_bytes) {
  if (r.peak_host_bytes <= 0) return "";
  const auto peak =
      std::max_element(r.stages.begin(), r.stages.end(),
                       [](const models::StageMemory& a, const models::StageMemory& b) {
                         return a.host_bytes < b.host_bytes;
                       });
  std::string out = fmt::format(
      "host memory per GPU (DeepSpeed offload, not in the GPU totals{}): optimizer {} + "
      "gradients {} + parameters {} = {}\n",
      r.stages.size() > 1 ? fmt::format("; stage {}", peak->stage) : "",
      format_bytes(peak->host_optimizer_bytes), format_bytes(peak->host_gradient_bytes),
      format_bytes(peak->host_param_bytes), format_bytes(peak->host_bytes));
  if (gpus_per_node && host_bytes) {
    const double node = peak->host_bytes * *gpus_per_node;
    out += fmt::format("host memory per node: {} x {} GPUs = {} of the host's {} — {}\n",
                       format_bytes(peak->host_bytes), *gpus_per_node, format_bytes(node),
                       format_bytes(*host_bytes), node <= *host_bytes ? "fits" : "does NOT fit");
  }
  return out;
}

std::string misfit_text(const models::MemoryReport& r, double capacity) {
  if (r.peak_bytes <= capacity) return "";
  return fmt::format("stage {} needs {} but the GPU has {}", r.peak_stage,
                     format_bytes(r.peak_bytes), format_bytes(capacity));
}

std::vector<FitSuggestion> fit_suggestions(const models::ModelSpec& model,
                                           const models::TrainingPlan& plan,
                                           const models::MemoryReport& report, double capacity,
                                           std::size_t limit) {
  using Change = std::function<void(models::TrainingPlan&)>;
  std::vector<std::pair<std::string, Change>> changes;
  if (plan.recompute != models::Recompute::FULL) {
    changes.emplace_back("--recompute full", [](models::TrainingPlan& p) {
      p.recompute = models::Recompute::FULL;
      p.recompute_every = 1;
    });
  }
  if (plan.recompute == models::Recompute::NONE) {
    changes.emplace_back("--recompute selective", [](models::TrainingPlan& p) {
      p.recompute = models::Recompute::SELECTIVE;
      p.recompute_every = 1;
    });
  }
  if (plan.tp > 1 && !plan.sp)
    changes.emplace_back("--sp", [](models::TrainingPlan& p) { p.sp = true; });
  for (int zero = plan.zero + 1; zero <= 3 && plan.dp > 1; ++zero) {
    changes.emplace_back(fmt::format("--zero {}", zero),
                         [zero](models::TrainingPlan& p) { p.zero = zero; });
  }
  if (plan.cpu_offloading_num_layers == 0 && model.layers > 1) {
    const int layers = model.layers - 1;
    changes.emplace_back(
        fmt::format("--cpu-offloading-num-layers {}", layers),
        [layers](models::TrainingPlan& p) { p.cpu_offloading_num_layers = layers; });
  }
  // DeepSpeed's ZeRO-Offload (its rules refuse it below ZeRO-1 or under other frameworks).
  if (plan.offload_optimizer == models::Offload::NONE && plan.zero >= 1) {
    changes.emplace_back("--offload-optimizer cpu", [](models::TrainingPlan& p) {
      p.offload_optimizer = models::Offload::CPU;
    });
  }
  // More model parallelism on the same GPUs: twice the PP or TP, half the DP.
  if (plan.dp % 2 == 0) {
    changes.emplace_back(fmt::format("--pp {} --dp {}", plan.pp * 2, plan.dp / 2),
                         [](models::TrainingPlan& p) {
                           p.pp *= 2;
                           p.dp /= 2;
                         });
    changes.emplace_back(fmt::format("--tp {} --dp {}", plan.tp * 2, plan.dp / 2),
                         [](models::TrainingPlan& p) {
                           p.tp *= 2;
                           p.dp /= 2;
                         });
  }
  std::vector<FitSuggestion> out;
  for (const auto& [text, change] : changes) {
    models::TrainingPlan p = plan;
    change(p);
    try {
      strategies::validate_plan(model, p, plan.gpus());
      const models::MemoryReport r = strategies::estimate_memory(model, p);
      if (r.peak_bytes < report.peak_bytes)
        out.push_back({text, report.peak_bytes - r.peak_bytes, r.peak_bytes <= capacity});
    } catch (const Error&) {
      // A change the plan's rules refuse (layers not divisible, heads over TP...): not offered.
    }
  }
  // One ZeRO stage: the lowest that fits (less communication than a higher one), else the
  // highest (the most it saves).
  std::vector<FitSuggestion> zero, rest;
  for (auto& s : out) (s.change.rfind("--zero ", 0) == 0 ? zero : rest).push_back(std::move(s));
  if (!zero.empty()) {
    const auto fitting =
        std::find_if(zero.begin(), zero.end(), [](const auto& s) { return s.fits; });
    rest.push_back(fitting != zero.end() ? *fitting : zero.back());
  }
  out = std::move(rest);
  // What makes the plan fit first, then the largest saving.
  std::stable_sort(out.begin(), out.end(), [](const FitSuggestion& a, const FitSuggestion& b) {
    return a.fits != b.fits ? a.fits : a.saved_bytes > b.saved_bytes;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

void require_fit(const models::ModelSpec& model, const models::TrainingPlan& plan,
                 const models::MemoryReport& report, double capacity) {
  const std::string misfit = misfit_text(report, capacity);
  if (misfit.empty()) return;
  std::vector<std::string> parts;
  const std::vector<FitSuggestion> suggestions = fit_suggestions(model, plan, report, capacity);
  for (const auto& s : suggestions) {
    parts.push_back(fmt::format("{} saves {}{}", s.change, format_bytes(s.saved_bytes),
                                s.fits ? " (fits)" : ""));
  }
  const std::string what =
      parts.empty() ? "no change of one switch lowers the peak; use GPUs with more memory or "
                      "more GPUs"
                    : "peak per GPU, one change at a time: " + join(parts, "; ") +
                          (suggestions.front().fits ? ""
                                                    : "; none fits alone: combine them, or "
                                                      "use more GPUs or GPUs with more memory");
  throw InfeasibleError(fmt::format("--require-fit: {}; {}", misfit, what));
}

}  // namespace loom::cli
