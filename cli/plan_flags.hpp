#pragma once
// The plan flags shared by simulate, memory and ranks, registered from the table of plan
// fields (strategies/plan/plan_fields.hpp), and the command line's side of resolution:
// --plan, --deepspeed and --megatron-args laid under the explicit flags, each value
// remembering whether it came from a flag or from FILE#/pointer for error messages.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "models/training_plan.hpp"
#include "strategies/plan/plan_input.hpp"

namespace loom::models {
struct ModelSpec;
}

namespace loom::cli {

/// Raw flag values as given on the command line, by plan field key; unset means "default"
/// or "derive". Holds CLI11's bindings: do not copy after add_plan_flags.
struct PlanFlags {
  std::map<std::string, std::optional<std::int64_t>, std::less<>> integers;  ///< SIZE, STAGE
  std::map<std::string, std::optional<std::string>, std::less<>> texts;  ///< names, sizes, lists
  std::map<std::string, std::optional<double>, std::less<>> numbers;     ///< PERCENT
  std::map<std::string, int, std::less<>> switches;  ///< SWITCH: +1 per --x, -1 per --no-x
  std::optional<std::string> plan_file;              ///< --plan FILE (loom plan JSON)
  std::optional<std::string> megatron_args;          ///< --megatron-args "..."
  std::optional<std::string> deepspeed_file;         ///< --deepspeed FILE
  std::optional<std::string> torchtitan_file;        ///< --torchtitan FILE.toml
  std::optional<std::string> emit;                   ///< --emit megatron|torchtitan|deepspeed
  bool print_config = false;                         ///< --print-config
  /// Whether the note on --deepspeed's "auto" values was printed (shared by copies: one
  /// note per command however many times it resolves the plan).
  std::shared_ptr<bool> deepspeed_noted = std::make_shared<bool>(false);
};

/// Adds every plan flag of the table, then --plan, --megatron-args, --deepspeed and
/// --print-config, to `app`, writing into `flags`.
void add_plan_flags(CLI::App& app, PlanFlags& flags);

/// Adds --emit megatron|torchtitan|deepspeed (simulate, memory, search, plan) into `flags`.
void add_emit_flag(CLI::App& app, PlanFlags& flags);
/// Prints `plan` as --emit's framework config on stdout (strategies/plan/plan_emit.hpp).
void print_emit(const PlanFlags& flags, const models::ModelSpec& model,
                const models::TrainingPlan& plan);

/// Adds --order (rank layout order, fastest first; Megatron's default tp-cp-ep-dp-pp), the
/// same flag in `ranks` and `simulate`.
void add_order_flag(CLI::App& app, std::string& order);

/// The model of a command: --model (a preset, loom model JSON or HF config.json) checked
/// against the model-shape flags of --megatron-args (every difference reported), or built
/// from them when --model is not given. Prints --megatron-args' note of the flags it set
/// aside on stderr. Throws ValidationError; the lines of a MegatronArgsError but its last
/// are printed first, so each error of a line is its own line.
models::ModelSpec load_plan_model(const std::string& model_arg, const PlanFlags& flags);

/// The explicit flags as a PlanInput (sources: the canonical flag of each field).
strategies::PlanInput flags_input(const PlanFlags& flags);

/// Every plan value the command line gives, merged: --plan < --deepspeed < --torchtitan <
/// --megatron-args < explicit flags, each with its source (what resolve_plan resolves; `loom
/// search` reads which fields are fixed from it). With `model`, --deepspeed's "auto" ZeRO
/// sizes take the values Hugging Face's Trainer derives from its hidden size
/// (strategies/plan/deepspeed_auto.hpp). Throws ConfigError (files) or PlanError (foreign
/// flags).
strategies::PlanInput merged_input(const PlanFlags& flags,
                                   const models::ModelSpec* model = nullptr);

/// Prints, once per command, the note naming each "auto" value of --deepspeed's config, the
/// value loom chose and why (`plan`: the resolved plan; null in a search, whose candidates
/// choose the batch). Nothing without --deepspeed or "auto".
void note_deepspeed_autos(const PlanFlags& flags, const strategies::PlanInput& merged,
                          const models::TrainingPlan* plan, const models::ModelSpec* model);

/// A resolved plan and how messages name each of its fields.
struct ResolvedPlan {
  models::TrainingPlan plan;
  strategies::PlanSources sources;
};

/// Resolves flags into a plan. Values from --plan, --deepspeed and --megatron-args (in that
/// order, later ones winning) come first; flags given explicitly override them. See
/// strategies::resolve_plan for `gpus`, `model_layers` and `model_seq` (the model's sequence
/// length, the default of --seq) and `transformer`. Throws PlanError (a rule, naming the
/// flag or FILE#/pointer) or ConfigError (files).
ResolvedPlan resolve_plan(const PlanFlags& flags, std::optional<std::int64_t> gpus,
                          std::optional<int> model_layers = std::nullopt,
                          std::optional<std::int64_t> model_seq = std::nullopt,
                          bool transformer = true);
/// resolve_plan for `model` (its layers, sequence length and kind).
ResolvedPlan resolve_plan(const PlanFlags& flags, std::optional<std::int64_t> gpus,
                          const models::ModelSpec& model);

}  // namespace loom::cli
