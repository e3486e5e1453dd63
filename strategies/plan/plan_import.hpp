#pragma once
// Foreign plan formats enter here and leave as a PlanInput: Megatron-LM command-line flags
// and DeepSpeed JSON configs (the loom plan JSON is plan_json.hpp). Flags and keys that set
// one plan field directly come from the table of plan fields (its megatron and deepspeed
// columns); the rest (recompute, precision, optimizer, buckets, ...) are translated here.
// Nothing else in loom sees their keys. Every value records its source: "--megatron-args
// FLAG" or "FILE#/pointer".
#include <string>
#include <utility>
#include <vector>

#include "strategies/plan/plan_input.hpp"

namespace loom::models {
struct ModelSpec;
}

namespace loom::strategies {

/// A Megatron-LM launch line as loom reads it.
struct MegatronLine {
  PlanInput plan;  ///< what the line sets of the plan
  /// The model-shape flags and their values in the order given ("--num-layers", "32");
  /// a switch's value is empty. megatron_model builds a model from them, or
  /// megatron_model_mismatches checks a model against them.
  std::vector<std::pair<std::string, std::string>> shape;
  /// Megatron-LM flags read and set aside (logging, data, tokenizer, checkpointing, and what
  /// loom does not model), in the order given.
  std::vector<std::string> ignored;
};

/// Every error of one line, one message each (what() joins them with line feeds).
class MegatronArgsError : public ValidationError {
 public:
  explicit MegatronArgsError(std::vector<std::string> lines);
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
};

/// Reads a Megatron-LM launch line ("--tensor-model-parallel-size 8 --sequence-parallel
/// ..."). Every flag of Megatron-LM's parser is known (megatron_flags.hpp): those that set
/// something loom models are translated, model-shape ones collected, the rest set aside.
/// Throws MegatronArgsError with every error of the line (unknown flags with did-you-mean,
/// bad values).
MegatronLine read_megatron_args(const std::string& args);
/// The plan of read_megatron_args.
PlanInput import_megatron_args(const std::string& args);

/// The model a launch line's shape flags describe, with Megatron-LM's defaults for what they
/// omit; `seq` (--seq-length) is its sequence length. Throws ValidationError naming the
/// flag a dense or MoE GPT model needs and the line lacks.
models::ModelSpec megatron_model(const MegatronLine& line);
/// How `model` differs from what the line's shape flags say, one message each ("--hidden-size
/// 4096 but the model's hidden is 8192"); empty when they agree or the line has no shape flag.
std::vector<std::string> megatron_model_mismatches(const MegatronLine& line,
                                                   const models::ModelSpec& model);

/// A torchtitan job config as loom reads it.
struct TorchtitanConfig {
  PlanInput plan;                    ///< what the config sets of the plan (framework torchtitan)
  std::vector<std::string> ignored;  ///< its other keys ("job.dump_folder"), in name order
};

/// Translates a torchtitan job-config TOML (torchtitan/config/job_config.py): [training]
/// local_batch_size, global_batch_size, seq_len, mixed_precision_param; [parallelism] the
/// degrees, fsdp_reshard_after_forward, enable_async_tensor_parallel, the pipeline schedule
/// and micro-batch size; [activation_checkpoint] mode and selective_ac_option; [model]
/// converters float8. Throws ConfigError "FILE:LINE: key: ...".
TorchtitanConfig import_torchtitan_toml(const std::string& path);
/// import_torchtitan_toml on the text of a config; `origin` names it.
TorchtitanConfig parse_torchtitan_toml(const std::string& text, const std::string& origin);

/// A DeepSpeed JSON config as loom reads it.
struct DeepSpeedConfig {
  PlanInput plan;    ///< what its values set (an "auto" value sets nothing)
  std::string file;  ///< its path (or origin), as sources name it
  /// The JSON pointers of its "auto" values ("/train_micro_batch_size_per_gpu"), in the order
  /// its note names them: Hugging Face placeholders that deepspeed_auto.hpp resolves and explains.
  std::vector<std::string> autos;
  int stage = 0;  ///< zero_optimization.stage
};

/// Translates a DeepSpeed JSON config (train_micro_batch_size_per_gpu,
/// gradient_accumulation_steps, train_batch_size, zero_optimization.stage and its buckets,
/// offload_optimizer / offload_param, bf16.enabled, fp16.enabled, optimizer.type,
/// activation_checkpointing, ...). "auto" values (Hugging Face Trainer placeholders) set
/// nothing; one the Trainer does not fill throws. Throws ConfigError.
DeepSpeedConfig read_deepspeed_config(const std::string& path);
/// read_deepspeed_config on the text of a config; `origin` names it in errors and sources.
DeepSpeedConfig parse_deepspeed_config(const std::string& text, const std::string& origin);
/// The plan of read_deepspeed_config.
PlanInput import_deepspeed_json(const std::string& path);
/// The plan of parse_deepspeed_config.
PlanInput parse_deepspeed_json(const std::string& text, const std::string& origin);

}  // namespace loom::strategies
