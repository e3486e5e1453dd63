#pragma once
// "auto" in a DeepSpeed config: the placeholder Hugging Face's Trainer replaces before
// DeepSpeed reads the config (transformers src/transformers/integrations/deepspeed.py,
// HfTrainerDeepSpeedConfig at commit 3a80c166389f: trainer_config_process fills the batch,
// clipping, optimizer, scheduler and fp16 / bf16 keys from TrainingArguments,
// trainer_config_finalize the three ZeRO sizes from the model's hidden size). loom resolves
// them the same way, with its own values standing for the Trainer's arguments (--mbs for
// --per_device_train_batch_size, --gbs / --grad-accum for --gradient_accumulation_steps,
// --precision for --fp16 / --bf16), and says so in one note. DeepSpeed itself reads no
// "auto": one the Trainer does not fill is an error naming the key.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "strategies/plan/plan_import.hpp"

namespace loom::models {
struct ModelSpec;
}

namespace loom::strategies {

/// "zero_optimization.stage" for "/zero_optimization/stage": how prose names a DeepSpeed key.
std::string deepspeed_key(std::string_view pointer);

/// The JSON pointers of the "auto" values of DeepSpeed config `doc` read from `file`, in
/// the order the note names them (batch, precision, ZeRO sizes, then clipping, optimizer and
/// scheduler). Throws ConfigError naming the first the Trainer does not fill (a key
/// outside HfTrainerDeepSpeedConfig's list, or a stage3_* size below stage 3, which the
/// Trainer fills under ZeRO-3 only).
std::vector<std::string> deepspeed_autos(const nlohmann::json& doc, const std::string& file);

/// The plan values of `config`'s "auto" ZeRO sizes, as trainer_config_finalize derives them
/// from the model's hidden size h: reduce_bucket_size h^2 (the DP bucket, 16-bit elements,
/// below stage 3; stage3_reduce_bucket_size at stage 3), stage3_prefetch_bucket_size
/// int(0.9 h^2) and stage3_param_persistence_threshold 10 h (stage 3). Sourced
/// FILE#/pointer; empty when the config has none.
PlanInput deepspeed_model_autos(const DeepSpeedConfig& config, const models::ModelSpec& model);

/// The note lines (without "loom: note: ") naming each "auto" of `config`, the value loom
/// chose and why: the first for the values loom models (from `plan`, the resolved plan, and
/// `merged`, the input it resolved from, to name where each came from; without a plan, as
/// in a search, the batch values are each candidate's), the second for those it does not
/// model (learning rate, clipping, scheduler), which the Trainer fills from its arguments.
/// Empty without "auto".
std::vector<std::string> deepspeed_auto_notes(const DeepSpeedConfig& config,
                                              const PlanInput& merged,
                                              const models::TrainingPlan* plan,
                                              const models::ModelSpec* model);

}  // namespace loom::strategies
