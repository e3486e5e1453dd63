#pragma once
// The plan flags shared by simulate, memory, ranks and search (Megatron's names with short
// aliases), and their resolution into a validated models::TrainingPlan.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "models/training_plan.hpp"

namespace loom::cli {

/// Raw flag values as given on the command line; unset means "default" or "derive".
struct PlanFlags {
  std::optional<std::int64_t> tp, pp, dp, cp, ep, vpp, mbs, gbs, seq, zero;
  std::optional<std::string> recompute, schedule, precision, optimizer, grad_dtype;
  bool sp = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  std::optional<std::string> dp_bucket_size;    ///< e.g. "160MB"
  std::optional<std::string> cuda_context;      ///< e.g. "0.5GiB"
  std::optional<double> fragmentation_percent;  ///< e.g. 5
  std::optional<std::string> pipeline_split;    ///< e.g. "20,20,20,20"
};

/// Adds every plan flag to `app`, writing into `flags`.
void add_plan_flags(CLI::App& app, PlanFlags& flags);

/// Resolves flags into a plan. When `gpus` is known, an unset --dp becomes
/// gpus / (tp x pp x cp) and a set one must make tp x pp x dp x cp equal gpus.
/// Throws ValidationError (one line naming the flag and the fix) on any bad value.
models::TrainingPlan resolve_plan(const PlanFlags& flags, std::optional<std::int64_t> gpus);

}  // namespace loom::cli
