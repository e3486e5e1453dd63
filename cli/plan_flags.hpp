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
  std::optional<std::int64_t> grad_accum;       ///< gradient accumulation steps (DeepSpeed)
  std::optional<std::int64_t> layers_per_virtual_stage;  ///< Megatron's per-chunk layer count
  std::optional<std::string> flash_attention;            ///< "on" or "off"
  std::optional<std::string> plan_file;                  ///< --plan FILE (loom plan JSON)
  std::optional<std::string> megatron_args;              ///< --megatron-args "..."
  std::optional<std::string> deepspeed_file;             ///< --deepspeed FILE
  bool print_config = false;                             ///< --print-config
};

/// Adds every plan flag to `app`, writing into `flags`.
void add_plan_flags(CLI::App& app, PlanFlags& flags);

/// Resolves flags into a plan. Values from --plan, --deepspeed and --megatron-args (in that
/// order, later ones winning) come first; flags given explicitly override them. When `gpus`
/// is known, an unset --dp becomes gpus / (tp x pp x cp) and a set one must make
/// tp x pp x dp x cp equal gpus. `model_layers`, when known, converts Megatron's
/// --num-layers-per-virtual-pipeline-stage into --vpp and checks --pipeline-split.
/// Throws ValidationError (one line naming the flag and the fix) or ConfigError (files).
models::TrainingPlan resolve_plan(const PlanFlags& flags, std::optional<std::int64_t> gpus,
                                  std::optional<int> model_layers = std::nullopt);

/// `overrides` laid over `base`: every value set in `overrides` wins; booleans are or-ed.
PlanFlags merge_plan_flags(const PlanFlags& base, const PlanFlags& overrides);

/// The resolved plan, defaults included, as a JSON document (for --print-config).
std::string render_plan_config(const models::TrainingPlan& plan);

}  // namespace loom::cli
