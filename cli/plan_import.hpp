#pragma once
// Foreign plan formats enter here and leave as PlanFlags: the loom plan JSON (docs/plans.md),
// Megatron-LM command-line flags and DeepSpeed JSON configs. Nothing else in loom sees their
// keys. Include only from .cpp files (it pulls nlohmann/json through common/document.hpp).
#include <string>

#include "cli/plan_flags.hpp"
#include "common/document.hpp"

namespace loom::cli {

/// Reads a loom plan JSON file (keys as the flag names: "tp", "pp", "mbs", "zero",
/// "recompute", "dp_bucket_size": "160MB", ...). Throws ConfigError (missing file, malformed
/// JSON with line/column, unknown key with did-you-mean, bad value).
PlanFlags import_plan_json(const std::string& path);

/// Translates Megatron-LM flags ("--tensor-model-parallel-size 8 --sequence-parallel ...").
/// Model-shape flags (--num-layers, --hidden-size, ...) are rejected (give them with
/// --model); flags that do not change a step's cost (--lr, --data-path, ...) are accepted
/// and ignored. Throws ValidationError for an unknown flag (with did-you-mean) or bad value.
PlanFlags import_megatron_args(const std::string& args);

/// Translates a DeepSpeed JSON config (train_micro_batch_size_per_gpu,
/// gradient_accumulation_steps, train_batch_size, zero_optimization.stage, bf16.enabled,
/// fp16.enabled, optimizer.type, activation_checkpointing, ...). Throws ConfigError.
PlanFlags import_deepspeed_json(const std::string& path);

/// The plan as the JSON "plan" object of the context block and of --print-config.
OrderedJson plan_to_json(const models::TrainingPlan& plan);

}  // namespace loom::cli
