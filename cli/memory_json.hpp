#pragma once
// The `memory` block of the JSON contract (DESIGN.md): parameters, capacity_bytes, fits,
// peak_bytes and per_stage (parameters, weights_bytes, gradients_bytes, optimizer_bytes,
// activations_bytes, other_bytes, total_bytes). Shared by `loom memory` and `loom simulate`
// so both print the same fields the same way; and the one wording of "does not fit" and of
// --require-fit that both use. Include only from .cpp files.
#include <optional>
#include <string>
#include <vector>

#include "common/document.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/training_plan.hpp"

namespace loom::cli {

/// The contract fields of a memory report against `capacity_bytes` (null "capacity_bytes"
/// and "fits" when unknown); "per_stage" holds one object per stage, in stage order, to which
/// a caller may append its own fields.
OrderedJson memory_report_json(const models::MemoryReport& report,
                               std::optional<double> capacity_bytes);

/// DeepSpeed offload's host memory (models::StageMemory::host_*), the largest stage's: one
/// line per GPU's process ("host memory per GPU (DeepSpeed offload, not in the GPU totals):
/// optimizer 9.78 GiB + gradients 3.26 GiB + parameters 0 B = 13.04 GiB") and, with
/// `gpus_per_node` and `host_bytes` (a cluster's node and host DRAM), one per node against
/// the host. Empty when nothing is offloaded.
std::string host_memory_text(const models::MemoryReport& report,
                             std::optional<int> gpus_per_node = std::nullopt,
                             std::optional<double> host_bytes = std::nullopt);

/// "stage 3 needs 90.12 GiB but the GPU has 74.51 GiB" when the peak stage needs more than
/// `capacity_bytes`; empty when the plan fits.
std::string misfit_text(const models::MemoryReport& report, double capacity_bytes);

/// --require-fit: throws InfeasibleError ("--require-fit: " + misfit_text, exit code 3) when
/// the plan does not fit `capacity_bytes`; the message names the
/// changes of one switch (recompute, SP, ZeRO stage, CPU offload, more PP or TP on the same GPU
/// count) that lower the peak, each with the bytes it saves and whether it then fits, each
/// measured by running the memory model again on the changed plan (fit_suggestions).
void require_fit(const models::ModelSpec& model, const models::TrainingPlan& plan,
                 const models::MemoryReport& report, double capacity_bytes);

/// One change of a plan and what it does to the peak memory per GPU.
struct FitSuggestion {
  std::string change;  ///< the flags, e.g. "--recompute full" or "--pp 8 --dp 2"
  double saved_bytes;  ///< peak before minus peak after
  bool fits;           ///< the changed plan fits the capacity
};

/// The one-switch changes of `plan` that lower its peak (a valid plan on the same GPUs, per
/// strategies::validate_plan), largest saving first; at most `limit`.
std::vector<FitSuggestion> fit_suggestions(const models::ModelSpec& model,
                                           const models::TrainingPlan& plan,
                                           const models::MemoryReport& report,
                                           double capacity_bytes, std::size_t limit = 5);

}  // namespace loom::cli
