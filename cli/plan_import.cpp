#include "cli/plan_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"

namespace loom::cli {
namespace {

std::string fmt_number(double v) {
  if (v == static_cast<double>(static_cast<std::int64_t>(v)))
    return std::to_string(static_cast<std::int64_t>(v));
  return fmt::format("{}", v);
}

}  // namespace

PlanFlags import_plan_json(const std::string& path) {
  const nlohmann::json doc = load_json_file(path, "plan");
  ObjectReader r(doc, path, "");
  r.allow({"$schema", "comment"});
  PlanFlags f;
  auto count = [&](std::string_view key, std::optional<std::int64_t>& into) {
    if (r.has(key)) into = r.get_positive_int(key);
  };
  count("tp", f.tp);
  count("pp", f.pp);
  count("dp", f.dp);
  count("cp", f.cp);
  count("ep", f.ep);
  count("vpp", f.vpp);
  count("mbs", f.mbs);
  count("gbs", f.gbs);
  count("seq", f.seq);
  count("grad_accum", f.grad_accum);
  if (r.has("zero")) f.zero = r.get_count_or("zero", 0);
  if (r.has("recompute")) f.recompute = r.get_enum("recompute", models::recompute_names());
  if (r.has("schedule")) f.schedule = r.get_enum("schedule", models::schedule_names());
  if (r.has("precision")) f.precision = r.get_enum("precision", models::precision_names());
  if (r.has("optimizer")) f.optimizer = r.get_enum("optimizer", models::optimizer_names());
  if (r.has("grad_dtype")) f.grad_dtype = r.get_enum("grad_dtype", models::grad_dtype_names());
  f.sp = r.get_bool_or("sp", false);
  f.overlap_grad_reduce = r.get_bool_or("overlap_grad_reduce", false);
  f.overlap_param_gather = r.get_bool_or("overlap_param_gather", false);
  if (r.has("flash_attention"))
    f.flash_attention = r.get_bool_or("flash_attention", true) ? "on" : "off";
  if (r.has("dp_bucket_size"))
    f.dp_bucket_size = fmt_number(r.get_quantity("dp_bucket_size", Unit::BYTES)) + "B";
  if (r.has("cuda_context"))
    f.cuda_context = fmt_number(r.get_quantity("cuda_context", Unit::BYTES)) + "B";
  if (r.has("fragmentation_percent"))
    f.fragmentation_percent = r.get_number("fragmentation_percent");
  if (r.has("pipeline_split")) {
    const auto& v = r.raw("pipeline_split");
    std::vector<std::string> parts;
    bool ok = v.is_array();
    if (ok) {
      for (const auto& x : v) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 1) {
          ok = false;
          break;
        }
        parts.push_back(std::to_string(x.get<std::int64_t>()));
      }
    }
    if (!ok) r.fail("pipeline_split", v.dump(), "an array of positive layer counts, e.g. [20, 20]");
    f.pipeline_split = join(parts, ",");
  }
  r.finish();
  return f;
}

namespace {

// Megatron-LM flags loom knows: those that set something loom models, those that describe the
// model, and those accepted and ignored.
enum class MegatronArg {
  TP,
  PP,
  VPP,
  LAYERS_PER_VSTAGE,
  MBS,
  GBS,
  SEQ,
  SP,
  RECOMPUTE_GRANULARITY,
  RECOMPUTE_ACTIVATIONS,
  RECOMPUTE_METHOD,
  RECOMPUTE_NUM_LAYERS,
  DIST_OPT,
  BF16,
  FP16,
  FP8,
  OVERLAP_GRAD,
  OVERLAP_PARAM,
  CP,
  EP,
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
      {"--tensor-model-parallel-size", MegatronArg::TP},
      {"--pipeline-model-parallel-size", MegatronArg::PP},
      {"--virtual-pipeline-model-parallel-size", MegatronArg::VPP},
      {"--num-layers-per-virtual-pipeline-stage", MegatronArg::LAYERS_PER_VSTAGE},
      {"--micro-batch-size", MegatronArg::MBS},
      {"--global-batch-size", MegatronArg::GBS},
      {"--seq-length", MegatronArg::SEQ},
      {"--sequence-parallel", MegatronArg::SP},
      {"--recompute-granularity", MegatronArg::RECOMPUTE_GRANULARITY},
      {"--recompute-activations", MegatronArg::RECOMPUTE_ACTIVATIONS},
      {"--recompute-method", MegatronArg::RECOMPUTE_METHOD},
      {"--recompute-num-layers", MegatronArg::RECOMPUTE_NUM_LAYERS},
      {"--use-distributed-optimizer", MegatronArg::DIST_OPT},
      {"--bf16", MegatronArg::BF16},
      {"--fp16", MegatronArg::FP16},
      {"--fp8-format", MegatronArg::FP8},
      {"--overlap-grad-reduce", MegatronArg::OVERLAP_GRAD},
      {"--overlap-param-gather", MegatronArg::OVERLAP_PARAM},
      {"--context-parallel-size", MegatronArg::CP},
      {"--expert-model-parallel-size", MegatronArg::EP},
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

PlanFlags import_megatron_args(const std::string& text) {
  PlanFlags f;
  const auto words = split_words(text);
  std::vector<std::string> known;
  for (const auto& [name, arg] : megatron_args()) known.push_back(name);
  std::optional<std::string> granularity;
  std::optional<std::string> method;
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
    switch (it->second) {
      case MegatronArg::TP:
        f.tp = integer();
        break;
      case MegatronArg::PP:
        f.pp = integer();
        break;
      case MegatronArg::VPP:
        f.vpp = integer();
        break;
      case MegatronArg::LAYERS_PER_VSTAGE:
        f.layers_per_virtual_stage = integer();
        break;
      case MegatronArg::MBS:
        f.mbs = integer();
        break;
      case MegatronArg::GBS:
        f.gbs = integer();
        break;
      case MegatronArg::SEQ:
        f.seq = integer();
        break;
      case MegatronArg::SP:
        f.sp = true;
        break;
      case MegatronArg::RECOMPUTE_GRANULARITY: {
        granularity = value();
        if (*granularity != "full" && *granularity != "selective")
          throw ValidationError::bad_value("--megatron-args --recompute-granularity", *granularity,
                                           "full, selective");
        break;
      }
      case MegatronArg::RECOMPUTE_ACTIVATIONS:
        granularity = "selective";
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
        f.zero = 1;
        break;
      case MegatronArg::BF16:
        f.precision = "bf16";
        break;
      case MegatronArg::FP16:
        f.precision = "fp16";
        break;
      case MegatronArg::FP8: {
        const std::string v = value();
        if (v != "hybrid" && v != "e4m3")
          throw ValidationError::bad_value("--megatron-args --fp8-format", v, "hybrid, e4m3");
        f.precision = "fp8";
        break;
      }
      case MegatronArg::OVERLAP_GRAD:
        f.overlap_grad_reduce = true;
        break;
      case MegatronArg::OVERLAP_PARAM:
        f.overlap_param_gather = true;
        break;
      case MegatronArg::CP:
        f.cp = integer();
        break;
      case MegatronArg::EP:
        f.ep = integer();
        break;
      case MegatronArg::FLASH:
        f.flash_attention = "on";
        break;
      case MegatronArg::OPTIMIZER: {
        const std::string v = value();
        if (v != "adam" && v != "sgd")
          throw ValidationError::bad_value("--megatron-args --optimizer", v, "adam, sgd");
        f.optimizer = v == "adam" ? "adam" : "sgd-momentum";  // Megatron's SGD has momentum
        break;
      }
      case MegatronArg::GRAD_FP32:
        f.grad_dtype = "fp32";
        break;
      case MegatronArg::BUCKET:
        f.dp_bucket_size = std::to_string(integer() * 4) + "B";
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
  if (granularity) f.recompute = *granularity;
  if (method && !granularity) {
    throw ValidationError("--megatron-args",
                          "--megatron-args: --recompute-method needs --recompute-granularity "
                          "full");
  }
  return f;
}

PlanFlags import_deepspeed_json(const std::string& path) {
  const nlohmann::json doc = load_json_file(path, "DeepSpeed config");
  ObjectReader r(doc, path, "");
  r.allow({"steps_per_print", "wall_clock_breakdown", "gradient_clipping", "scheduler",
           "prescale_gradients", "communication_data_type", "zero_allow_untested_optimizer",
           "dump_state", "tensorboard", "flops_profiler", "comms_logger", "seed"});
  PlanFlags f;
  if (r.has("train_micro_batch_size_per_gpu"))
    f.mbs = r.get_positive_int("train_micro_batch_size_per_gpu");
  if (r.has("gradient_accumulation_steps"))
    f.grad_accum = r.get_positive_int("gradient_accumulation_steps");
  if (r.has("train_batch_size")) f.gbs = r.get_positive_int("train_batch_size");
  if (r.has("zero_optimization")) {
    ObjectReader z = r.child("zero_optimization");
    z.allow({"contiguous_gradients", "reduce_scatter", "allgather_partitions",
             "round_robin_gradients", "stage3_max_live_parameters", "stage3_max_reuse_distance",
             "stage3_gather_16bit_weights_on_model_save", "stage3_param_persistence_threshold",
             "sub_group_size", "stage3_prefetch_bucket_size", "allgather_bucket_size"});
    const std::int64_t stage = z.get_count_or("stage", 0);
    if (stage > 3) z.fail("stage", std::to_string(stage), "0, 1, 2 or 3");
    f.zero = stage;
    if (z.get_bool_or("overlap_comm", false)) {
      f.overlap_grad_reduce = true;
      f.overlap_param_gather = true;
    }
    if (z.has("reduce_bucket_size")) {
      const double elems = z.get_number("reduce_bucket_size");
      if (elems <= 0) z.fail("reduce_bucket_size", fmt_number(elems), "a positive element count");
      f.dp_bucket_size = fmt_number(elems * 2) + "B";  // DeepSpeed buckets hold 16-bit grads
    }
    for (const char* key : {"offload_optimizer", "offload_param"}) {
      if (z.has(key)) {
        const auto& v = z.raw(key);
        const bool none = v.is_object() && v.value("device", std::string("none")) == "none";
        if (!none)
          z.fail(key, v.dump(), "absent or {\"device\": \"none\"} (loom models no offload)");
      }
    }
    z.finish();
  }
  for (const char* key : {"bf16", "fp16"}) {
    if (!r.has(key)) continue;
    ObjectReader o = r.child(key);
    o.allow({"loss_scale", "loss_scale_window", "initial_scale_power", "hysteresis",
             "min_loss_scale", "auto_cast", "consecutive_hysteresis", "immediate_grad_update"});
    if (o.get_bool_or("enabled", false)) f.precision = key;
    o.finish();
  }
  if (r.has("optimizer")) {
    ObjectReader o = r.child("optimizer");
    o.allow({"params"});
    const std::string type = to_lower(o.get_string("type"));
    if (type == "adam" || type == "adamw" || type == "fusedadam" || type == "onebitadam" ||
        type == "lamb")
      f.optimizer = "adam";
    else if (type == "sgd")
      f.optimizer = "sgd";
    else
      o.fail("type", '"' + type + '"', "Adam, AdamW, FusedAdam, OneBitAdam, Lamb, SGD");
    o.finish();
  }
  if (r.has("activation_checkpointing")) {
    ObjectReader a = r.child("activation_checkpointing");
    a.allow({"partition_activations", "contiguous_memory_optimization", "cpu_checkpointing",
             "number_checkpoints", "synchronize_checkpoint_boundary", "profile"});
    if (a.get_bool_or("cpu_checkpointing", false))
      a.fail("cpu_checkpointing", "true", "false (loom models no CPU offload)");
    f.recompute = "full";
    a.finish();
  }
  r.finish();
  return f;
}

OrderedJson plan_to_json(const models::TrainingPlan& p) {
  OrderedJson j;
  j["tp"] = p.tp;
  j["pp"] = p.pp;
  j["dp"] = p.dp;
  j["cp"] = p.cp;
  j["ep"] = p.ep;
  j["vpp"] = p.vpp;
  j["mbs"] = p.mbs;
  j["gbs"] = p.global_batch();
  j["micro_batches"] = p.micro_batches();
  j["seq"] = p.seq;
  j["zero"] = p.zero;
  j["recompute"] = models::to_string(p.recompute);
  j["sp"] = p.sp;
  j["schedule"] = models::to_string(p.schedule);
  j["precision"] = models::to_string(p.precision);
  j["optimizer"] = models::to_string(p.optimizer);
  j["grad_dtype"] = models::to_string(p.grad_dtype);
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  j["flash_attention"] = p.flash_attention;
  j["dp_bucket_size"] = fmt::format("{}B", fmt_number(p.dp_bucket_bytes));
  j["pipeline_split"] = p.pipeline_split;
  j["cuda_context"] = fmt::format("{}B", fmt_number(p.cuda_context_bytes));
  j["fragmentation_percent"] = p.fragmentation_fraction * 100.0;
  j["gpus"] = p.gpus();
  return j;
}

}  // namespace loom::cli
