#pragma once
// A resolved plan as a framework's launch configuration (`--emit`): Megatron-LM's
// pretrain_gpt.py arguments with the model's shape, a torchtitan job-config TOML, or a
// DeepSpeed ds_config JSON with the Megatron-DeepSpeed arguments beside it. What loom's own
// importers (plan_import.hpp) read back from each is the same plan; what a framework cannot
// express is said in a comment line, never dropped silently.
#include <string>
#include <string_view>

#include "models/model_spec.hpp"
#include "models/training_plan.hpp"

namespace loom::strategies {

/// The frameworks --emit writes for.
enum class EmitFormat { MEGATRON, TORCHTITAN, DEEPSPEED };

/// "megatron", "torchtitan" or "deepspeed"; throws ValidationError naming `field` otherwise.
EmitFormat parse_emit_format(std::string_view name, std::string_view field = "emit");

/// Megatron-LM pretrain_gpt.py arguments: '#' comment lines, then one line of flags that
/// --megatron-args reads back (model shape included).
std::string emit_megatron(const models::ModelSpec& model, const models::TrainingPlan& plan);
/// The Megatron flags alone (the last line of emit_megatron).
std::string megatron_flags_line(const models::ModelSpec& model, const models::TrainingPlan& plan);
/// A torchtitan job-config TOML (torchtitan/config/job_config.py's tables) that --torchtitan
/// reads back.
std::string emit_torchtitan(const models::ModelSpec& model, const models::TrainingPlan& plan);
/// A DeepSpeed ds_config JSON (what --deepspeed reads back).
std::string deepspeed_config_json(const models::TrainingPlan& plan);
/// The ds_config JSON, then the Megatron-DeepSpeed arguments as comment-free lines after a
/// '#' header.
std::string emit_deepspeed(const models::ModelSpec& model, const models::TrainingPlan& plan);
/// The plan in `format`.
std::string emit_plan(EmitFormat format, const models::ModelSpec& model,
                      const models::TrainingPlan& plan);

}  // namespace loom::strategies
