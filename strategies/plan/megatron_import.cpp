#include "strategies/plan/plan_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/limits.hpp"
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
  CPU_OFFLOADING,  // store_true: --cpu-offloading-num-layers takes effect
  CPU_OFFLOADING_NUM_LAYERS,
  DIST_OPT,
  BF16,
  FP16,
  FP8,
  FP8_RECIPE,
  CUDA_GRAPH,        // --enable-cuda-graph (store_true): whole-layer graphs
  CUDA_GRAPH_IMPL,   // none, local (whole layers) or transformer_engine (partial scopes)
  CUDA_GRAPH_SCOPE,  // nargs '+': the scopes the graphs capture
  FLASH,
  CE_FUSION,
  CE_FUSION_IMPL,
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
      {"--account-for-embedding-in-pipeline-split", MegatronArg::FIELD},
      {"--account-for-loss-in-pipeline-split", MegatronArg::FIELD},
      {"--micro-batch-size", MegatronArg::FIELD},
      {"--global-batch-size", MegatronArg::FIELD},
      {"--seq-length", MegatronArg::FIELD},
      {"--sequence-parallel", MegatronArg::FIELD},
      {"--recompute-granularity", MegatronArg::RECOMPUTE_GRANULARITY},
      {"--recompute-activations", MegatronArg::RECOMPUTE_ACTIVATIONS},
      {"--recompute-method", MegatronArg::RECOMPUTE_METHOD},
      {"--moe-token-dispatcher-type", MegatronArg::FIELD},
      // DeepEP and HybridEP move the same copies and, by default, both permute the tokens
      // received in a kernel of their own (HybridEP's fused permute is opt-in): loom costs
      // them alike, so the backend is read and set aside.
      {"--moe-flex-dispatcher-backend", MegatronArg::IGNORED_VALUE},
      {"--moe-enable-deepep", MegatronArg::IGNORED_FLAG},
      {"--moe-router-num-groups", MegatronArg::MODEL_SHAPE},
      {"--moe-router-group-topk", MegatronArg::MODEL_SHAPE},
      {"--recompute-num-layers", MegatronArg::RECOMPUTE_NUM_LAYERS},
      {"--use-distributed-optimizer", MegatronArg::DIST_OPT},
      {"--bf16", MegatronArg::BF16},
      {"--fp16", MegatronArg::FP16},
      {"--fp8-format", MegatronArg::FP8},
      {"--fp8-recipe", MegatronArg::FP8_RECIPE},
      {"--first-last-layers-bf16", MegatronArg::FIELD},
      {"--num-layers-at-start-in-bf16", MegatronArg::FIELD},
      {"--num-layers-at-end-in-bf16", MegatronArg::FIELD},
      {"--enable-cuda-graph", MegatronArg::CUDA_GRAPH},
      {"--cuda-graph-impl", MegatronArg::CUDA_GRAPH_IMPL},
      {"--cuda-graph-scope", MegatronArg::CUDA_GRAPH_SCOPE},
      {"--overlap-grad-reduce", MegatronArg::FIELD},
      {"--overlap-param-gather", MegatronArg::FIELD},
      {"--tp-comm-overlap", MegatronArg::FIELD},
      {"--cpu-offloading", MegatronArg::CPU_OFFLOADING},
      {"--cpu-offloading-num-layers", MegatronArg::CPU_OFFLOADING_NUM_LAYERS},
      {"--overlap-moe-expert-parallel-comm", MegatronArg::FIELD},
      {"--context-parallel-size", MegatronArg::FIELD},
      {"--expert-model-parallel-size", MegatronArg::FIELD},
      {"--use-flash-attn", MegatronArg::FLASH},
      {"--cross-entropy-loss-fusion", MegatronArg::CE_FUSION},
      {"--cross-entropy-fusion-impl", MegatronArg::CE_FUSION_IMPL},
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
      {"--window-size", MegatronArg::MODEL_SHAPE},  // sliding window: model.sliding_window
      {"--window-attn-skip-freq", MegatronArg::MODEL_SHAPE},
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

// Walks the words of a Megatron-LM command line, one flag (and its value) at a time.
// Values carry no source of their own: a rule they break names the plan field the way the
// command line names it, as when the same value is given directly.
class MegatronReader {
 public:
  explicit MegatronReader(const std::string& text) : words_(split_words(text)) {}

  PlanInput read() {
    for (i_ = 0; i_ < words_.size(); ++i_) apply(words_[i_]);
    if (granularity_) input_.set("recompute", *granularity_);
    // Megatron offloads only with --cpu-offloading, and then --cpu-offloading-num-layers
    // layers (default 0).
    if (cpu_offloading_ && offload_layers_)
      input_.set("cpu_offloading_num_layers", *offload_layers_);
    // Megatron reads --fp8-recipe only with --fp8-format (without it training is not FP8
    // and the recipe is ignored). --fp8-format alone is left to loom's auto (the GPU's
    // recipe) rather than Megatron's default, delayed (megatron/training/arguments.py), so a
    // later --precision bf16 does not meet a recipe the user never gave (docs/plans.md).
    if (fp8_ && recipe_) input_.set("fp8_recipe", *recipe_);
    // Megatron captures graphs with --enable-cuda-graph or a --cuda-graph-impl other than none;
    // its scopes are --cuda-graph-scope's (loom's rules refuse a scope without graphs).
    if (graphs_) input_.set("cuda_graphs", true);
    if (scope_) input_.set("cuda_graph_scope", *scope_);
    if (method_ && !granularity_) {
      throw ValidationError("--megatron-args",
                            "--megatron-args: --recompute-method needs --recompute-granularity "
                            "full");
    }
    return input_;
  }

 private:
  // The word after flag `flag`, which must not be another flag.
  std::string value(const std::string& flag) {
    if (i_ + 1 >= words_.size() || words_[i_ + 1].rfind("--", 0) == 0)
      throw ValidationError("--megatron-args",
                            fmt::format("--megatron-args: {} needs a value", flag));
    return words_[++i_];
  }

  // The integer after `flag`: at least 1, or 0 too when `zero_ok`.
  std::int64_t integer(const std::string& flag, bool zero_ok = false) {
    const std::string v = value(flag);
    try {
      size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used == v.size() && n >= (zero_ok ? 0 : 1)) return n;
    } catch (const std::exception&) {
    }
    throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), v,
                                     zero_ok ? "a whole number, 0 or more" : "a positive integer");
  }

  // A bucket size in fp32 elements: at least loom's smallest bucket (MIN_DP_BUCKET_BYTES),
  // at most 2^40.
  std::int64_t bucket_elements(const std::string& flag) {
    const std::int64_t n = integer(flag);
    constexpr std::int64_t min = MIN_DP_BUCKET_BYTES / 4;
    if (n < min || n > (std::int64_t{1} << 40)) {
      throw ValidationError::bad_value(
          fmt::format("--megatron-args {}", flag), std::to_string(n),
          fmt::format("an element count from {} (64 KiB of fp32 values, loom's smallest "
                      "bucket, docs/limits.md) to 2^40",
                      min));
    }
    return n;
  }

  // The value of `flag`, which must be one of `allowed` ("a, b").
  std::string one_of(const std::string& flag, std::initializer_list<std::string_view> allowed) {
    std::string v = value(flag);
    for (std::string_view a : allowed)
      if (v == a) return v;
    std::vector<std::string> names(allowed.begin(), allowed.end());
    throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), v, join(names, ", "));
  }

  MegatronArg lookup(const std::string& flag) const {
    if (flag.rfind("--", 0) != 0) {
      throw ValidationError("--megatron-args",
                            fmt::format("--megatron-args: unexpected word '{}'; every value must "
                                        "follow its flag",
                                        flag));
    }
    for (const auto& [name, arg] : megatron_args())
      if (name == flag) return arg;
    std::vector<std::string> known;
    for (const auto& [name, arg] : megatron_args()) known.push_back(name);
    const std::string hint = did_you_mean(flag, known);
    throw ValidationError(
        "--megatron-args",
        fmt::format("--megatron-args: unknown Megatron-LM flag '{}'{}; see docs/plans.md for the "
                    "supported ones",
                    flag, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
  }

  void apply(const std::string& flag) {
    switch (lookup(flag)) {
      case MegatronArg::FIELD: {
        const PlanField& field = megatron_field(flag);
        if (field.type == FieldType::SWITCH)
          input_.set(field.key, true);
        else if (field.type == FieldType::CHOICE)
          input_.set(field.key, value(flag));  // the name, checked where the field resolves
        else
          input_.set(field.key, integer(flag, field.min == 0));
        break;
      }
      case MegatronArg::RECOMPUTE_GRANULARITY:
        granularity_ = one_of(flag, {"full", "selective"});
        break;
      case MegatronArg::RECOMPUTE_ACTIVATIONS:
        granularity_ = "selective";
        break;
      case MegatronArg::RECOMPUTE_METHOD:
        method_ = one_of(flag, {"uniform", "block"});
        input_.set("recompute_method", *method_);
        break;
      case MegatronArg::RECOMPUTE_NUM_LAYERS:
        input_.set("recompute_num_layers", integer(flag));
        break;
      case MegatronArg::CPU_OFFLOADING:
        cpu_offloading_ = true;
        break;
      case MegatronArg::CPU_OFFLOADING_NUM_LAYERS:
        offload_layers_ = integer(flag, true);
        break;
      case MegatronArg::DIST_OPT:
        input_.set("zero", std::int64_t{1});
        break;
      case MegatronArg::BF16:
        input_.set("precision", std::string("bf16"));
        break;
      case MegatronArg::FP16:
        input_.set("precision", std::string("fp16"));
        break;
      case MegatronArg::FP8:
        one_of(flag, {"hybrid", "e4m3"});
        input_.set("precision", std::string("fp8"));
        fp8_ = true;
        break;
      case MegatronArg::FP8_RECIPE:  // Megatron's choices (arguments.py), kept until the end
        recipe_ = one_of(
            flag, {loom::to_string(Fp8Recipe::TENSORWISE), loom::to_string(Fp8Recipe::DELAYED),
                   loom::to_string(Fp8Recipe::MXFP8), loom::to_string(Fp8Recipe::BLOCKWISE)});
        break;
      case MegatronArg::CUDA_GRAPH:
        graphs_ = true;
        break;
      case MegatronArg::CUDA_GRAPH_IMPL:
        if (one_of(flag, {"none", "local", "transformer_engine"}) != "none") graphs_ = true;
        break;
      case MegatronArg::CUDA_GRAPH_SCOPE: {
        // Megatron's choices (arguments.py); loom models these six.
        std::vector<std::string> scopes;
        while (i_ + 1 < words_.size() && words_[i_ + 1].rfind("--", 0) != 0) {
          const std::string v = words_[++i_];
          const auto& names = models::graph_module_names();
          if (std::find(names.begin(), names.end(), v) == names.end()) {
            throw ValidationError::bad_value(
                fmt::format("--megatron-args {}", flag), v,
                fmt::format("{} (loom does not model moe or full_iteration)", join(names, ", ")));
          }
          scopes.push_back(v);
        }
        if (scopes.empty()) value(flag);  // the "needs a value" error
        scope_ = join(scopes, ",");
        break;
      }
      case MegatronArg::FLASH:
        input_.set("flash_attention", true);
        break;
      case MegatronArg::CE_FUSION:  // store_true; without it Megatron runs the unfused loss
        input_.set("cross_entropy", std::string("fused"));
        break;
      case MegatronArg::CE_FUSION_IMPL:  // which fused kernel (native, te): loom has one
        one_of(flag, {"native", "te"});
        break;
      case MegatronArg::OPTIMIZER:
        // Megatron's SGD has momentum.
        input_.set("optimizer",
                   std::string(one_of(flag, {"adam", "sgd"}) == "adam" ? "adam" : "sgd-momentum"));
        break;
      case MegatronArg::GRAD_FP32:
        input_.set("grad_dtype", std::string("fp32"));
        break;
      case MegatronArg::BUCKET:  // Megatron counts fp32 elements
        input_.set("dp_bucket_size", std::to_string(bucket_elements(flag) * 4) + "B");
        break;
      case MegatronArg::MODEL_SHAPE:
        throw ValidationError("--megatron-args",
                              fmt::format("--megatron-args: {} describes the model; give the "
                                          "model with --model (a preset or a model JSON)",
                                          flag));
      case MegatronArg::IGNORED_VALUE:
        value(flag);
        break;
      case MegatronArg::IGNORED_FLAG:
        break;
    }
  }

  std::vector<std::string> words_;
  size_t i_ = 0;
  PlanInput input_;
  std::optional<std::string> granularity_;
  std::optional<std::string> method_;
  bool cpu_offloading_ = false;
  std::optional<std::int64_t> offload_layers_;
  bool fp8_ = false;                   // --fp8-format given
  std::optional<std::string> recipe_;  // --fp8-recipe given
  bool graphs_ = false;                // --enable-cuda-graph or a --cuda-graph-impl
  std::optional<std::string> scope_;   // --cuda-graph-scope's names, comma-joined
};

}  // namespace

PlanInput import_megatron_args(const std::string& text) {
  return MegatronReader(text).read();
}

}  // namespace loom::strategies
