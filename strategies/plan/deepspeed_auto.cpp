#include "strategies/plan/deepspeed_auto.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "models/model_spec.hpp"

namespace loom::strategies {
namespace {

// What HfTrainerDeepSpeedConfig fills (transformers integrations/deepspeed.py, commit
// 3a80c166389f), with the Trainer argument or rule it takes the value from.
struct HfAuto {
  std::string_view pointer;
  std::string_view from;  // the Trainer's source of the value
  bool modelled;          // whether the value changes loom's plan
  bool zero3_only;        // filled only under ZeRO-3 (trainer_config_finalize: is_zero3())
};

constexpr HfAuto HF_AUTOS[] = {
    {"/train_micro_batch_size_per_gpu", "--per_device_train_batch_size", true, false},
    {"/gradient_accumulation_steps", "--gradient_accumulation_steps", true, false},
    {"/train_batch_size",
     "world size x --per_device_train_batch_size x "
     "--gradient_accumulation_steps",
     true, false},
    {"/fp16/enabled", "--fp16", true, false},
    {"/bf16/enabled", "--bf16", true, false},
    {"/zero_optimization/reduce_bucket_size", "hidden_size^2", true, false},
    {"/zero_optimization/stage3_prefetch_bucket_size", "int(0.9 x hidden_size^2)", true, true},
    {"/zero_optimization/stage3_param_persistence_threshold", "10 x hidden_size", true, true},
    {"/gradient_clipping", "--max_grad_norm", false, false},
    {"/optimizer/params/lr", "--learning_rate", false, false},
    {"/optimizer/params/betas", "--adam_beta1, --adam_beta2", false, false},
    {"/optimizer/params/eps", "--adam_epsilon", false, false},
    {"/optimizer/params/weight_decay", "--weight_decay", false, false},
    {"/scheduler/params/warmup_min_lr", "0", false, false},
    {"/scheduler/params/warmup_max_lr", "--learning_rate", false, false},
    {"/scheduler/params/warmup_num_steps", "--warmup_steps", false, false},
    {"/scheduler/params/total_num_steps", "the run's training steps", false, false},
    {"/amp/enabled", "--fp16 with --fp16_backend apex", false, false},
    {"/amp/opt_level", "--fp16_opt_level", false, false},
};

const HfAuto* hf_auto(std::string_view pointer) {
  for (const HfAuto& a : HF_AUTOS)
    if (a.pointer == pointer) return &a;
  return nullptr;
}

// Every "auto" string under `v`, by JSON pointer, in document order.
void collect(const nlohmann::json& v, const std::string& pointer, std::vector<std::string>& out) {
  if (v.is_string() && v.get_ref<const std::string&>() == "auto") out.push_back(pointer);
  if (!v.is_object()) return;
  for (const auto& [key, child] : v.items()) {
    std::string escaped;  // RFC 6901: ~ as ~0, / as ~1
    for (char c : key) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    collect(child, pointer + "/" + escaped, out);
  }
}

int stage_of(const nlohmann::json& doc) {
  const auto z = doc.find("zero_optimization");
  if (z == doc.end() || !z->is_object()) return 0;
  const auto stage = z->find("stage");
  return stage != z->end() && stage->is_number_integer() ? stage->get<int>() : 0;
}

// The smallest bucket loom takes (MIN_DP_BUCKET_BYTES of 16-bit elements), as the importer.
constexpr std::int64_t MIN_BUCKET_ELEMS = MIN_DP_BUCKET_BYTES / 2;

// Where the value of plan field `key` came from, in prose: its flag or FILE#/pointer, or
// loom's default.
std::string origin(const PlanInput& merged, std::string_view key) {
  return merged.has(key) ? merged.sources().where(key) : "loom's default";
}

// Without a plan (a search): the precision `merged` names, else loom's default.
models::Precision given_precision(const PlanInput& merged) {
  const auto& names = models::precision_names();
  const auto name = merged.text("precision");
  const auto it = name ? std::find(names.begin(), names.end(), *name) : names.end();
  return it != names.end() ? static_cast<models::Precision>(it - names.begin())
                           : models::TrainingPlan{}.precision;
}

// The HF value of a hidden-size auto at `pointer` for hidden size `h`.
std::int64_t hidden_value(std::string_view pointer, std::int64_t h) {
  if (pointer == "/zero_optimization/reduce_bucket_size") return h * h;
  // Python's int(0.9 * h * h): the same double products, truncated.
  if (pointer == "/zero_optimization/stage3_prefetch_bucket_size")
    return static_cast<std::int64_t>(0.9 * static_cast<double>(h) * static_cast<double>(h));
  return 10 * h;
}

// The plan field a hidden-size auto sets at `stage`.
const char* hidden_field(std::string_view pointer, int stage) {
  if (pointer == "/zero_optimization/reduce_bucket_size")
    return stage < 3 ? "dp_bucket_size" : "stage3_reduce_bucket_size";
  if (pointer == "/zero_optimization/stage3_prefetch_bucket_size")
    return "stage3_prefetch_bucket_size";
  return "stage3_param_persistence_threshold";
}

bool hidden_auto(std::string_view pointer) {
  return pointer.substr(0, 19) == "/zero_optimization/";
}

// One modelled auto's "key = value (why)".
std::string modelled_text(const DeepSpeedConfig& c, std::string_view pointer,
                          const PlanInput& merged, const models::TrainingPlan* p,
                          const models::ModelSpec* model) {
  const std::string key = deepspeed_key(pointer);
  const HfAuto& hf = *hf_auto(pointer);
  if (hidden_auto(pointer)) {
    if (!model) return fmt::format("{} left at loom's default (no model to size it)", key);
    const std::int64_t h = model->hidden;
    const std::int64_t v = hidden_value(pointer, h);
    std::string text =
        fmt::format("{} = {} (HF {}, the model's hidden_size {})", key, v, hf.from, h);
    const char* field = hidden_field(pointer, c.stage);
    if (merged.has(field) && merged.sources().of(field).pointer != pointer)
      text += fmt::format(", overridden by {}", merged.sources().where(field));
    return text;
  }
  const std::string hf_arg = fmt::format("HF {}", hf.from);
  if (pointer == "/fp16/enabled" || pointer == "/bf16/enabled") {
    const bool fp16 = pointer == "/fp16/enabled";
    const models::Precision precision = p ? p->precision : given_precision(merged);
    const bool on =
        fp16 ? precision == models::Precision::FP16
             : precision == models::Precision::BF16 || precision == models::Precision::FP8;
    return fmt::format("{} = {} ({} {}; {})", key, on ? "true" : "false",
                       origin(merged, "precision"), models::to_string(precision), hf_arg);
  }
  if (!p) return fmt::format("{} = each candidate's ({})", key, hf_arg);
  if (pointer == "/train_micro_batch_size_per_gpu")
    return fmt::format("{} = {} ({}; {})", key, p->mbs, origin(merged, "mbs"), hf_arg);
  if (pointer == "/gradient_accumulation_steps") {
    std::string why = merged.has("grad_accum") ? merged.sources().where("grad_accum")
                      : merged.has("gbs")
                          ? fmt::format("{} {} / (mbs {} x dp {})", merged.sources().where("gbs"),
                                        p->global_batch(), p->mbs, p->dp)
                          : "loom's default: gbs = mbs x dp";
    return fmt::format("{} = {} ({}; {})", key, p->micro_batches(), why, hf_arg);
  }
  return fmt::format(
      "{} = {} (mbs {} x gradient_accumulation_steps {} x dp {}, as HF computes "
      "it)",
      key, p->global_batch(), p->mbs, p->micro_batches(), p->dp);
}

}  // namespace

std::string deepspeed_key(std::string_view pointer) {
  std::string s(pointer.substr(1));
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

std::vector<std::string> deepspeed_autos(const nlohmann::json& doc, const std::string& file) {
  std::vector<std::string> autos;
  collect(doc, "", autos);
  // In HF_AUTOS' order (the batch first), the unknown ones last.
  const auto rank = [](const std::string& pointer) {
    const HfAuto* hf = hf_auto(pointer);
    return hf ? hf - HF_AUTOS : std::ssize(HF_AUTOS);
  };
  std::stable_sort(autos.begin(), autos.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  const int stage = stage_of(doc);
  for (const std::string& pointer : autos) {
    const HfAuto* hf = hf_auto(pointer);
    if (!hf) {
      throw ConfigError(
          file, pointer,
          fmt::format("{}: {}: \"auto\" is not a value Hugging Face's Trainer fills "
                      "(transformers integrations/deepspeed.py fills the batch sizes, "
                      "gradient_clipping, fp16/bf16.enabled, optimizer and scheduler params and "
                      "the ZeRO reduce_bucket_size, stage3_prefetch_bucket_size and "
                      "stage3_param_persistence_threshold) and DeepSpeed reads no \"auto\"; "
                      "give {} a value",
                      file, pointer, deepspeed_key(pointer)));
    }
    if (hf->zero3_only && stage != 3) {
      throw ConfigError(file, pointer,
                        fmt::format("{}: {}: \"auto\" at ZeRO stage {}: Hugging Face's Trainer "
                                    "fills {} under ZeRO-3 only (trainer_config_finalize) and "
                                    "DeepSpeed reads no \"auto\"; give it a value or drop it",
                                    file, pointer, stage, deepspeed_key(pointer)));
    }
  }
  return autos;
}

PlanInput deepspeed_model_autos(const DeepSpeedConfig& c, const models::ModelSpec& model) {
  PlanInput out;
  for (const std::string& pointer : c.autos) {
    if (!hidden_auto(pointer)) continue;
    const std::int64_t v = hidden_value(pointer, model.hidden);
    const char* field = hidden_field(pointer, c.stage);
    const bool bucket = std::string_view(field) != "stage3_param_persistence_threshold";
    if (bucket && v < MIN_BUCKET_ELEMS) {
      throw ConfigError(
          c.file, pointer,
          fmt::format("{}: {}: \"auto\" resolves to {} elements from the model's "
                      "hidden size {}, below loom's smallest bucket of {} "
                      "(docs/limits.md); give {} a value",
                      c.file, pointer, v, model.hidden, MIN_BUCKET_ELEMS, deepspeed_key(pointer)));
    }
    PlanValue value = v;
    if (std::string_view(field) == "dp_bucket_size") value = std::to_string(v * 2) + "B";
    out.set(field, value, file_source(c.file, pointer, deepspeed_key(pointer)));
  }
  return out;
}

std::vector<std::string> deepspeed_auto_notes(const DeepSpeedConfig& c, const PlanInput& merged,
                                              const models::TrainingPlan* plan,
                                              const models::ModelSpec* model) {
  std::vector<std::string> modelled, other;
  for (const std::string& pointer : c.autos) {
    const HfAuto& hf = *hf_auto(pointer);
    if (hf.modelled)
      modelled.push_back(modelled_text(c, pointer, merged, plan, model));
    else
      other.push_back(fmt::format("{} (HF {})", deepspeed_key(pointer), hf.from));
  }
  std::vector<std::string> lines;
  if (!modelled.empty()) {
    lines.push_back(fmt::format(
        "--deepspeed {}: \"auto\" resolved as Hugging Face's Trainer resolves it "
        "(transformers integrations/deepspeed.py), loom's values standing for the Trainer's "
        "arguments: {}",
        c.file, join(modelled, "; ")));
  }
  if (!other.empty()) {
    lines.push_back(
        fmt::format("--deepspeed {}: \"auto\" left to the Trainer, no effect on time or memory: {}",
                    c.file, join(other, "; ")));
  }
  return lines;
}

}  // namespace loom::strategies
