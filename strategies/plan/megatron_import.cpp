#include "strategies/plan/plan_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/strings.hpp"

namespace loom::strategies {
namespace {

// Megatron-LM flags loom knows: those that set something loom models, those that describe the
// model, and those accepted and ignored.
enum class MegatronArg {
  FIELD,  // sets the plan field whose megatron column names it (plan_fields.cpp)
  RECOMPUTE_GRANULARITY,
  RECOMPUTE_ACTIVATIONS,
  RECOMPUTE_METHOD,
  RECOMPUTE_NUM_LAYERS,
  DIST_OPT,
  BF16,
  FP16,
  FP8,
  FLASH,
  OPTIMIZER,
  GRAD_FP32,
  BUCKET,
  MODEL_SHAPE,    // describes the model: loom takes the model from --model instead
  IGNORED_VALUE,  // does not change the cost of one step; takes a value (docs/plans.md)
  IGNORED_FLAG,   // the same, without a value
};

const std::vector<std::pair<std::string, MegatronArg>>& megatron_args() {
  static const std::vector<std::pair<std::string, MegatronArg>> a = {
      {"--tensor-model-parallel-size", MegatronArg::FIELD},
      {"--pipeline-model-parallel-size", MegatronArg::FIELD},
      {"--virtual-pipeline-model-parallel-size", MegatronArg::FIELD},
      {"--num-layers-per-virtual-pipeline-stage", MegatronArg::FIELD},
      {"--micro-batch-size", MegatronArg::FIELD},
      {"--global-batch-size", MegatronArg::FIELD},
      {"--seq-length", MegatronArg::FIELD},
      {"--sequence-parallel", MegatronArg::FIELD},
      {"--recompute-granularity", MegatronArg::RECOMPUTE_GRANULARITY},
      {"--recompute-activations", MegatronArg::RECOMPUTE_ACTIVATIONS},
      {"--recompute-method", MegatronArg::RECOMPUTE_METHOD},
      {"--recompute-num-layers", MegatronArg::RECOMPUTE_NUM_LAYERS},
      {"--use-distributed-optimizer", MegatronArg::DIST_OPT},
      {"--bf16", MegatronArg::BF16},
      {"--fp16", MegatronArg::FP16},
      {"--fp8-format", MegatronArg::FP8},
      {"--overlap-grad-reduce", MegatronArg::FIELD},
      {"--overlap-param-gather", MegatronArg::FIELD},
      {"--context-parallel-size", MegatronArg::FIELD},
      {"--expert-model-parallel-size", MegatronArg::FIELD},
      {"--use-flash-attn", MegatronArg::FLASH},
      {"--optimizer", MegatronArg::OPTIMIZER},
      {"--accumulate-allreduce-grads-in-fp32", MegatronArg::GRAD_FP32},
      {"--ddp-bucket-size", MegatronArg::BUCKET},
      {"--num-layers", MegatronArg::MODEL_SHAPE},
      {"--hidden-size", MegatronArg::MODEL_SHAPE},
      {"--ffn-hidden-size", MegatronArg::MODEL_SHAPE},
      {"--num-attention-heads", MegatronArg::MODEL_SHAPE},
      {"--num-query-groups", MegatronArg::MODEL_SHAPE},
      {"--group-query-attention", MegatronArg::MODEL_SHAPE},
      {"--kv-channels", MegatronArg::MODEL_SHAPE},
      {"--padded-vocab-size", MegatronArg::MODEL_SHAPE},
      {"--max-position-embeddings", MegatronArg::MODEL_SHAPE},
      {"--swiglu", MegatronArg::MODEL_SHAPE},
      {"--num-experts", MegatronArg::MODEL_SHAPE},
      {"--moe-router-topk", MegatronArg::MODEL_SHAPE},
      {"--untie-embeddings-and-output-weights", MegatronArg::MODEL_SHAPE},
      {"--normalization", MegatronArg::MODEL_SHAPE},
      {"--vocab-size", MegatronArg::MODEL_SHAPE},
      {"--lr", MegatronArg::IGNORED_VALUE},
      {"--min-lr", MegatronArg::IGNORED_VALUE},
      {"--train-iters", MegatronArg::IGNORED_VALUE},
      {"--train-samples", MegatronArg::IGNORED_VALUE},
      {"--weight-decay", MegatronArg::IGNORED_VALUE},
      {"--clip-grad", MegatronArg::IGNORED_VALUE},
      {"--adam-beta1", MegatronArg::IGNORED_VALUE},
      {"--adam-beta2", MegatronArg::IGNORED_VALUE},
      {"--adam-eps", MegatronArg::IGNORED_VALUE},
      {"--lr-decay-style", MegatronArg::IGNORED_VALUE},
      {"--lr-decay-iters", MegatronArg::IGNORED_VALUE},
      {"--lr-warmup-iters", MegatronArg::IGNORED_VALUE},
      {"--lr-warmup-fraction", MegatronArg::IGNORED_VALUE},
      {"--log-interval", MegatronArg::IGNORED_VALUE},
      {"--save", MegatronArg::IGNORED_VALUE},
      {"--load", MegatronArg::IGNORED_VALUE},
      {"--save-interval", MegatronArg::IGNORED_VALUE},
      {"--eval-interval", MegatronArg::IGNORED_VALUE},
      {"--eval-iters", MegatronArg::IGNORED_VALUE},
      {"--data-path", MegatronArg::IGNORED_VALUE},
      {"--split", MegatronArg::IGNORED_VALUE},
      {"--tokenizer-type", MegatronArg::IGNORED_VALUE},
      {"--vocab-file", MegatronArg::IGNORED_VALUE},
      {"--merge-file", MegatronArg::IGNORED_VALUE},
      {"--init-method-std", MegatronArg::IGNORED_VALUE},
      {"--attention-dropout", MegatronArg::IGNORED_VALUE},
      {"--hidden-dropout", MegatronArg::IGNORED_VALUE},
      {"--seed", MegatronArg::IGNORED_VALUE},
      {"--distributed-backend", MegatronArg::IGNORED_VALUE},
      {"--use-mcore-models", MegatronArg::IGNORED_FLAG},
      {"--no-masked-softmax-fusion", MegatronArg::IGNORED_FLAG},
      {"--loss-scale", MegatronArg::IGNORED_VALUE},
      {"--initial-loss-scale", MegatronArg::IGNORED_VALUE},
      {"--log-throughput", MegatronArg::IGNORED_FLAG},
      {"--transformer-impl", MegatronArg::IGNORED_VALUE},
      {"--position-embedding-type", MegatronArg::IGNORED_VALUE},
  };
  return a;
}

const PlanField& megatron_field(std::string_view flag) {
  for (const PlanField& field : plan_fields())
    if (field.megatron == flag) return field;
  throw InternalError(fmt::format("internal invariant broken: no plan field for {}", flag));
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w.rfind("--", 0) == 0 && w.find('=') != std::string::npos) {
      words.push_back(w.substr(0, w.find('=')));
      words.push_back(w.substr(w.find('=') + 1));
    } else {
      words.push_back(w);
    }
  }
  return words;
}

}  // namespace

PlanInput import_megatron_args(const std::string& text) {
  PlanInput f;
  const auto words = split_words(text);
  std::vector<std::string> known;
  for (const auto& [name, arg] : megatron_args()) known.push_back(name);
  std::optional<std::string> granularity;
  std::optional<std::string> method;
  std::optional<FieldSource> granularity_source;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& flag = words[i];
    if (flag.rfind("--", 0) != 0) {
      throw ValidationError("--megatron-args",
                            fmt::format("--megatron-args: unexpected word '{}'; every value must "
                                        "follow its flag",
                                        flag));
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= words.size() || words[i + 1].rfind("--", 0) == 0) {
        throw ValidationError("--megatron-args",
                              fmt::format("--megatron-args: {} needs a value", flag));
      }
      return words[++i];
    };
    auto integer = [&]() -> std::int64_t {
      const std::string v = value();
      try {
        size_t used = 0;
        const long long n = std::stoll(v, &used);
        if (used == v.size() && n >= 1) return n;
      } catch (const std::exception&) {
      }
      throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), v,
                                       "a positive integer");
    };
    auto it = std::find_if(megatron_args().begin(), megatron_args().end(),
                           [&](const auto& e) { return e.first == flag; });
    if (it == megatron_args().end()) {
      const std::string hint = did_you_mean(flag, known);
      throw ValidationError(
          "--megatron-args",
          fmt::format("--megatron-args: unknown Megatron-LM flag '{}'{}; see "
                      "docs/plans.md for the supported ones",
                      flag, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    const FieldSource source = flag_source("--megatron-args", flag);
    switch (it->second) {
      case MegatronArg::FIELD: {
        const PlanField& field = megatron_field(flag);
        if (field.type == FieldType::SWITCH)
          f.set(field.key, true, source);
        else
          f.set(field.key, integer(), source);
        break;
      }
      case MegatronArg::RECOMPUTE_GRANULARITY: {
        granularity = value();
        granularity_source = source;
        if (*granularity != "full" && *granularity != "selective")
          throw ValidationError::bad_value("--megatron-args --recompute-granularity", *granularity,
                                           "full, selective");
        break;
      }
      case MegatronArg::RECOMPUTE_ACTIVATIONS:
        granularity = "selective";
        granularity_source = source;
        break;
      case MegatronArg::RECOMPUTE_METHOD: {
        method = value();
        if (*method != "uniform" && *method != "block")
          throw ValidationError::bad_value("--megatron-args --recompute-method", *method,
                                           "uniform, block");
        break;
      }
      case MegatronArg::RECOMPUTE_NUM_LAYERS:
        integer();
        break;
      case MegatronArg::DIST_OPT:
        f.set("zero", std::int64_t{1}, source);
        break;
      case MegatronArg::BF16:
        f.set("precision", std::string("bf16"), source);
        break;
      case MegatronArg::FP16:
        f.set("precision", std::string("fp16"), source);
        break;
      case MegatronArg::FP8: {
        const std::string v = value();
        if (v != "hybrid" && v != "e4m3")
          throw ValidationError::bad_value("--megatron-args --fp8-format", v, "hybrid, e4m3");
        f.set("precision", std::string("fp8"), source);
        break;
      }
      case MegatronArg::FLASH:
        f.set("flash_attention", true, source);
        break;
      case MegatronArg::OPTIMIZER: {
        const std::string v = value();
        if (v != "adam" && v != "sgd")
          throw ValidationError::bad_value("--megatron-args --optimizer", v, "adam, sgd");
        f.set("optimizer", std::string(v == "adam" ? "adam" : "sgd-momentum"), source);  // Megatron's SGD has momentum
        break;
      }
      case MegatronArg::GRAD_FP32:
        f.set("grad_dtype", std::string("fp32"), source);
        break;
      case MegatronArg::BUCKET:
        f.set("dp_bucket_size", std::to_string(integer() * 4) + "B", source);
        break;
      case MegatronArg::MODEL_SHAPE:
        throw ValidationError("--megatron-args",
                              fmt::format("--megatron-args: {} describes the model; give the "
                                          "model with --model (a preset or a model JSON)",
                                          flag));
      case MegatronArg::IGNORED_VALUE:
        value();
        break;
      case MegatronArg::IGNORED_FLAG:
        break;
    }
  }
  if (granularity) f.set("recompute", *granularity, *granularity_source);
  if (method && !granularity) {
    throw ValidationError("--megatron-args",
                          "--megatron-args: --recompute-method needs --recompute-granularity "
                          "full");
  }
  return f;
}

}  // namespace loom::strategies
