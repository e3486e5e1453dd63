#include "strategies/plan/plan_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/limits.hpp"
#include "common/strings.hpp"
#include "strategies/plan/megatron_flags.hpp"

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
  VPP_STAGES,          // --num-virtual-stages-per-pipeline-rank: vpp
  GRAD_BF16,           // --grad-reduce-in-bf16: grad_dtype bf16
  FIRST_STAGE_LAYERS,  // --decoder-first-pipeline-num-layers: pipeline_split
  LAST_STAGE_LAYERS,   // --decoder-last-pipeline-num-layers: pipeline_split
  TORCH_FSDP2,         // --use-torch-fsdp2: zero 3 as torch FSDP2
  MEGATRON_FSDP,       // --use-megatron-fsdp: zero from --data-parallel-sharding-strategy
  FSDP_SHARDING,       // --data-parallel-sharding-strategy
  CP_COMM_TYPE,        // --cp-comm-type
  DIST_OPT_INSTANCES,  // --num-distributed-optimizer-instances: 1 is loom's model
  AS_MODELLED,         // what loom models already (grouped expert GEMMs, overlapped p2p)
  MODEL_SHAPE,         // describes the model: checked against --model, or builds it
  IGNORED_VALUE,       // does not change the cost of one step; takes a value (docs/plans.md)
  IGNORED_FLAG,        // the same, without a value
  IGNORED_LIST,        // the same, with one value or more
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
      {"--num-virtual-stages-per-pipeline-rank", MegatronArg::VPP_STAGES},
      {"--grad-reduce-in-bf16", MegatronArg::GRAD_BF16},
      {"--decoder-first-pipeline-num-layers", MegatronArg::FIRST_STAGE_LAYERS},
      {"--decoder-last-pipeline-num-layers", MegatronArg::LAST_STAGE_LAYERS},
      {"--use-torch-fsdp2", MegatronArg::TORCH_FSDP2},
      {"--use-megatron-fsdp", MegatronArg::MEGATRON_FSDP},
      {"--data-parallel-sharding-strategy", MegatronArg::FSDP_SHARDING},
      {"--cp-comm-type", MegatronArg::CP_COMM_TYPE},
      {"--num-distributed-optimizer-instances", MegatronArg::DIST_OPT_INSTANCES},
      // Megatron-core's TEGroupedMLP runs a layer's local experts as one grouped GEMM
      // (megatron/core/transformer/moe/experts.py); loom times the experts' GEMMs that way
      // with or without the flag.
      {"--moe-grouped-gemm", MegatronArg::AS_MODELLED},
      // Pipeline p2p overlapped with compute: loom's pipeline transfers are non-blocking
      // isend/irecv (lower_passes.hpp, lower_pipeline). Megatron-LM releases before the
      // flag became the default spell it --overlap-p2p-communication; today's
      // --no-overlap-p2p-communication (blocking transfers) is not modelled.
      {"--overlap-p2p-communication", MegatronArg::AS_MODELLED},
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
      {"--moe-ffn-hidden-size", MegatronArg::MODEL_SHAPE},
      {"--moe-shared-expert-intermediate-size", MegatronArg::MODEL_SHAPE},
      {"--disable-bias-linear", MegatronArg::MODEL_SHAPE},
      {"--add-qkv-bias", MegatronArg::MODEL_SHAPE},
      {"--qk-layernorm", MegatronArg::MODEL_SHAPE},
      {"--squared-relu", MegatronArg::MODEL_SHAPE},
      {"--position-embedding-type", MegatronArg::MODEL_SHAPE},
      {"--attention-dropout", MegatronArg::MODEL_SHAPE},
      {"--hidden-dropout", MegatronArg::MODEL_SHAPE},
      {"--make-vocab-size-divisible-by", MegatronArg::MODEL_SHAPE},
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

bool starts_flag(const std::string& word) {
  return word.rfind("--", 0) == 0;
}

// Whether the table of plan fields has `key` (a field another change may add).
bool has_plan_field(std::string_view key) {
  const auto& fields = plan_fields();
  return std::any_of(fields.begin(), fields.end(),
                     [&](const PlanField& f) { return f.key == key; });
}

// Walks the words of a Megatron-LM command line, one flag (and its value) at a time; every
// error is kept and the walk goes on, so one run reports all of a line's errors.
// Values carry no source of their own: a rule they break names the plan field the way the
// command line names it, as when the same value is given directly.
class MegatronReader {
 public:
  explicit MegatronReader(const std::string& text) : words_(split_words(text)) {}

  MegatronLine read() {
    for (i_ = 0; i_ < words_.size(); ++i_) {
      try {
        apply(words_[i_]);
      } catch (const ValidationError& e) {
        errors_.emplace_back(e.what());
      }
    }
    try {
      finish();
    } catch (const ValidationError& e) {
      errors_.emplace_back(e.what());
    }
    if (!errors_.empty()) throw MegatronArgsError(errors_);
    line_.plan = input_;
    return line_;
  }

 private:
  void finish() {
    if (granularity_) input_.set("recompute", *granularity_);
    // Megatron offloads --cpu-offloading-num-layers layers (default 0); above 0 it turns
    // cpu_offloading on itself (validate_args), so the older releases' --cpu-offloading
    // switch adds nothing.
    if (offload_layers_ && *offload_layers_ > 0)
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
    if (first_layers_ || last_layers_) uneven_split();
    // Megatron-core's FSDP shards by --data-parallel-sharding-strategy (arguments.py, default
    // optim_grads_params), read only with --use-megatron-fsdp: ZeRO 0 to 3.
    if (megatron_fsdp_) {
      const std::string s = sharding_.value_or("optim_grads_params");
      const std::int64_t stage = s == "no_shard"      ? 0
                                 : s == "optim"       ? 1
                                 : s == "optim_grads" ? 2
                                                      : 3;
      input_.set("zero", stage);
      if (stage == 3) input_.set("fsdp_impl", std::string("fsdp2"));
    } else if (sharding_) {
      line_.ignored.push_back("--data-parallel-sharding-strategy");
    }
    // validate_args turns sequence parallelism off when tp is 1 ("Disabling sequence
    // parallelism because tensor model parallelism is disabled"): when the line itself gives
    // tp 1 (without a tp, the tp may come from a plan file or --tp, laid under or over it).
    if (input_.flag("sp") && input_.integer("tp") == 1) {
      input_.erase("sp");
      line_.ignored.push_back("--sequence-parallel");
    }
    if (method_ && !granularity_) {
      throw ValidationError("--megatron-args",
                            "--megatron-args: --recompute-method needs --recompute-granularity "
                            "full");
    }
  }

  // --decoder-first/last-pipeline-num-layers as Megatron-core splits them
  // (megatron/core/transformer/transformer_block.py, get_num_layers_to_build): the first
  // (last) stage builds the given layers, the rest divide evenly over the other stages.
  void uneven_split() {
    const std::string flag = first_layers_ ? "--decoder-first-pipeline-num-layers"
                                           : "--decoder-last-pipeline-num-layers";
    std::optional<std::int64_t> layers;
    for (const auto& [name, v] : line_.shape)
      if (name == "--num-layers") layers = std::stoll(v);
    const std::optional<std::int64_t> pp = input_.integer("pp");
    if (!layers || !pp || *pp < 2) {
      throw ValidationError("--megatron-args",
                            fmt::format("--megatron-args: {} needs --num-layers and "
                                        "--pipeline-model-parallel-size 2 or more in the same line",
                                        flag));
    }
    std::int64_t rest = *layers, stages = *pp;
    if (first_layers_) rest -= *first_layers_, --stages;
    if (last_layers_) rest -= *last_layers_, --stages;
    if (rest < 0 || (stages > 0 && rest % stages != 0) || (stages == 0 && rest != 0)) {
      throw ValidationError(
          "--megatron-args",
          fmt::format("--megatron-args: {}: the {} layers left do not divide over the {} other "
                      "pipeline stages (Megatron: \"the left over layers must be divisible by "
                      "left over stages\")",
                      flag, rest, stages));
    }
    std::vector<std::string> split(static_cast<size_t>(*pp),
                                   std::to_string(stages > 0 ? rest / stages : 0));
    if (first_layers_) split.front() = std::to_string(*first_layers_);
    if (last_layers_) split.back() = std::to_string(*last_layers_);
    input_.set("pipeline_split", join(split, ","));
  }

  // The word after flag `flag`, which must not be another flag.
  std::string value(const std::string& flag) {
    if (i_ + 1 >= words_.size() || starts_flag(words_[i_ + 1]))
      throw ValidationError("--megatron-args",
                            fmt::format("--megatron-args: {} needs a value", flag));
    return words_[++i_];
  }

  // The words after `flag` up to the next flag (nargs '+').
  std::vector<std::string> values(const std::string& flag) {
    std::vector<std::string> out;
    while (i_ + 1 < words_.size() && !starts_flag(words_[i_ + 1])) out.push_back(words_[++i_]);
    if (out.empty()) value(flag);  // the "needs a value" error
    return out;
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

  // How `flag` is read: loom's own table first, then Megatron-LM's whole parser (what loom
  // does not model is set aside and listed in the note).
  MegatronArg lookup(const std::string& flag) {
    if (!starts_flag(flag)) {
      throw ValidationError("--megatron-args",
                            fmt::format("--megatron-args: unexpected word '{}'; every value must "
                                        "follow its flag",
                                        flag));
    }
    for (const auto& [name, arg] : megatron_args())
      if (name == flag) return arg;
    if (const auto arity = megatron_flag_arity(flag)) {
      switch (*arity) {
        case MegatronArity::SWITCH:
          return MegatronArg::IGNORED_FLAG;
        case MegatronArity::VALUE:
          return MegatronArg::IGNORED_VALUE;
        case MegatronArity::LIST:
          return MegatronArg::IGNORED_LIST;
      }
    }
    // Its values (the words up to the next flag) go with it: one error for the flag.
    while (i_ + 1 < words_.size() && !starts_flag(words_[i_ + 1])) ++i_;
    std::vector<std::string> known = megatron_flag_names();
    for (const auto& [name, arg] : megatron_args()) known.push_back(name);
    const std::string hint = did_you_mean(flag, known);
    throw ValidationError(
        "--megatron-args",
        fmt::format("--megatron-args: '{}' is not a Megatron-LM flag{} (Megatron-LM's "
                    "megatron/training/arguments.py at {})",
                    flag, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint),
                    megatron_lm_commit().substr(0, 12)));
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
      case MegatronArg::CPU_OFFLOADING:  // older releases' switch; see finish()
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
        const std::vector<std::string> scopes = values(flag);
        const auto& names = models::graph_module_names();
        for (const std::string& v : scopes) {
          if (std::find(names.begin(), names.end(), v) == names.end()) {
            throw ValidationError::bad_value(
                fmt::format("--megatron-args {}", flag), v,
                fmt::format("{} (loom does not model moe or full_iteration)", join(names, ", ")));
          }
        }
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
      case MegatronArg::VPP_STAGES:
        input_.set("vpp", integer(flag));
        break;
      case MegatronArg::GRAD_BF16:
        input_.set("grad_dtype", std::string("bf16"));
        break;
      case MegatronArg::FIRST_STAGE_LAYERS:
        first_layers_ = integer(flag, true);
        break;
      case MegatronArg::LAST_STAGE_LAYERS:
        last_layers_ = integer(flag, true);
        break;
      case MegatronArg::TORCH_FSDP2:  // ZeRO-3 as torch's fully_shard (arguments.py asserts)
        input_.set("zero", std::int64_t{3});
        input_.set("fsdp_impl", std::string("fsdp2"));
        break;
      case MegatronArg::MEGATRON_FSDP:
        megatron_fsdp_ = true;
        break;
      case MegatronArg::FSDP_SHARDING:
        sharding_ = one_of(flag, {"no_shard", "optim", "optim_grads", "optim_grads_params"});
        break;
      case MegatronArg::CP_COMM_TYPE:
        cp_comm_type(flag);
        break;
      case MegatronArg::DIST_OPT_INSTANCES:
        if (integer(flag) != 1) {
          throw ValidationError(
              "--megatron-args",
              fmt::format("--megatron-args: {} above 1 (the distributed optimizer sharded "
                          "within instances, all-reduced across them) is not modelled; use 1, "
                          "Megatron's default",
                          flag));
        }
        break;
      case MegatronArg::AS_MODELLED:
        break;
      case MegatronArg::MODEL_SHAPE:
        line_.shape.emplace_back(
            flag, megatron_flag_arity(flag) == MegatronArity::SWITCH ? std::string() : value(flag));
        break;
      case MegatronArg::IGNORED_VALUE:
        // Optional-value flags (nargs '?') may stand alone.
        if (i_ + 1 < words_.size() && !starts_flag(words_[i_ + 1])) ++i_;
        line_.ignored.push_back(flag);
        break;
      case MegatronArg::IGNORED_LIST:
        values(flag);
        line_.ignored.push_back(flag);
        break;
      case MegatronArg::IGNORED_FLAG:
        line_.ignored.push_back(flag);
        break;
    }
  }

  // --cp-comm-type: one type for every layer (Megatron takes one, or one per layer), set when
  // the plan has the field; until then read and listed with the ignored flags.
  void cp_comm_type(const std::string& flag) {
    const std::vector<std::string> types = values(flag);
    for (const std::string& t : types) {
      if (t != "p2p" && t != "a2a" && t != "allgather" && t != "a2a+p2p")
        throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), t,
                                         "p2p, a2a, allgather, a2a+p2p");
      if (t != types.front()) {
        throw ValidationError("--megatron-args",
                              fmt::format("--megatron-args: {}: one type per layer ({} and {}) "
                                          "is not modelled; give one type",
                                          flag, types.front(), t));
      }
    }
    if (has_plan_field("cp_comm_type"))
      input_.set("cp_comm_type", types.front());
    else
      line_.ignored.push_back(flag);
  }

  std::vector<std::string> words_;
  size_t i_ = 0;
  PlanInput input_;
  MegatronLine line_;
  std::vector<std::string> errors_;
  bool megatron_fsdp_ = false;                // --use-megatron-fsdp
  std::optional<std::string> sharding_;       // --data-parallel-sharding-strategy
  std::optional<std::int64_t> first_layers_;  // --decoder-first-pipeline-num-layers
  std::optional<std::int64_t> last_layers_;   // --decoder-last-pipeline-num-layers
  std::optional<std::string> granularity_;
  std::optional<std::string> method_;
  std::optional<std::int64_t> offload_layers_;
  bool fp8_ = false;                   // --fp8-format given
  std::optional<std::string> recipe_;  // --fp8-recipe given
  bool graphs_ = false;                // --enable-cuda-graph or a --cuda-graph-impl
  std::optional<std::string> scope_;   // --cuda-graph-scope's names, comma-joined
};

}  // namespace

MegatronArgsError::MegatronArgsError(std::vector<std::string> lines)
    : ValidationError("--megatron-args", join(lines, "\n")), lines_(std::move(lines)) {}

MegatronLine read_megatron_args(const std::string& text) {
  return MegatronReader(text).read();
}

PlanInput import_megatron_args(const std::string& text) {
  return read_megatron_args(text).plan;
}

}  // namespace loom::strategies
