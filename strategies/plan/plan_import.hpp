#pragma once
// Foreign plan formats enter here and leave as a PlanInput: Megatron-LM command-line flags
// and DeepSpeed JSON configs (the loom plan JSON is plan_json.hpp). Flags and keys that set
// one plan field directly come from the table of plan fields (its megatron and deepspeed
// columns); the rest (recompute, precision, optimizer, buckets, ...) are translated here.
// Nothing else in loom sees their keys. Every value records its source: "--megatron-args
// FLAG" or "FILE#/pointer".
#include <string>

#include "strategies/plan/plan_input.hpp"

namespace loom::strategies {

/// Translates Megatron-LM flags ("--tensor-model-parallel-size 8 --sequence-parallel ...").
/// Model-shape flags (--num-layers, --hidden-size, ...) are rejected (give them with
/// --model); flags that do not change a step's cost (--lr, --data-path, ...) are accepted
/// and ignored. Throws ValidationError for an unknown flag (with did-you-mean) or bad value.
PlanInput import_megatron_args(const std::string& args);

/// Translates a DeepSpeed JSON config (train_micro_batch_size_per_gpu,
/// gradient_accumulation_steps, train_batch_size, zero_optimization.stage, bf16.enabled,
/// fp16.enabled, optimizer.type, activation_checkpointing, ...). Throws ConfigError.
PlanInput import_deepspeed_json(const std::string& path);
/// import_deepspeed_json on the text of a config; `origin` names it in errors and sources.
PlanInput parse_deepspeed_json(const std::string& text, const std::string& origin);

}  // namespace loom::strategies
