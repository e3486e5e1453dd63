#include "cli/plan_flags.hpp"

#include <fmt/format.h>

#include <sstream>

#include "cli/plan_import.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace loom::cli {

void add_plan_flags(CLI::App& app, PlanFlags& f) {
  app.add_option("--tp,--tensor-model-parallel-size", f.tp, "tensor-parallel size");
  app.add_option("--pp,--pipeline-model-parallel-size", f.pp, "pipeline-parallel size");
  app.add_option("--dp,--data-parallel-size", f.dp, "data-parallel size (default: derived)");
  app.add_option("--cp,--context-parallel-size", f.cp, "context-parallel size");
  app.add_option("--ep,--expert-model-parallel-size", f.ep, "expert-parallel size");
  app.add_option("--vpp,--virtual-pipeline-stages", f.vpp,
                 "virtual pipeline stages per rank (interleaved schedule)");
  app.add_option("--mbs,--micro-batch-size", f.mbs, "micro-batch size, sequences");
  app.add_option("--gbs,--global-batch-size", f.gbs, "global batch size, sequences");
  app.add_option("--seq,--seq-length", f.seq, "sequence length, tokens");
  app.add_option("--zero", f.zero, "ZeRO stage 0..3 (3 = FSDP)");
  app.add_option("--recompute", f.recompute, "activation recompute: none|selective|full");
  app.add_flag("--sp,--sequence-parallel", f.sp, "sequence parallelism (with TP)");
  app.add_option("--schedule", f.schedule, "pipeline schedule: naive|gpipe|1f1b|interleaved|zb");
  app.add_option("--precision", f.precision, "fp32|bf16|fp16|fp8");
  app.add_option("--optimizer", f.optimizer, "adam|sgd|sgd-momentum");
  app.add_option("--grad-dtype", f.grad_dtype, "gradient accumulation dtype: fp32|bf16");
  app.add_flag("--overlap-grad-reduce", f.overlap_grad_reduce,
               "overlap the data-parallel gradient reduction with backward");
  app.add_flag("--overlap-param-gather", f.overlap_param_gather,
               "overlap the ZeRO parameter all-gather with forward");
  app.add_option("--dp-bucket-size", f.dp_bucket_size, "DDP bucket size, e.g. 160MB");
  app.add_option("--cuda-context", f.cuda_context, "CUDA context per GPU, e.g. 0.5GiB");
  app.add_option("--fragmentation", f.fragmentation_percent,
                 "allocator fragmentation reserve, percent of the rest");
  app.add_option("--pipeline-split", f.pipeline_split,
                 "layers per pipeline stage, comma-separated, e.g. 20,20,20,20");
  app.add_option("--grad-accum,--gradient-accumulation-steps", f.grad_accum,
                 "gradient accumulation steps (sets --gbs = mbs x dp x steps)");
  app.add_option("--num-layers-per-virtual-pipeline-stage", f.layers_per_virtual_stage,
                 "layers per model chunk (Megatron's way to give --vpp)");
  app.add_option("--flash-attention", f.flash_attention, "fused attention kernels: on|off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--plan", f.plan_file, "loom plan JSON file (docs/plans.md)");
  app.add_option("--megatron-args", f.megatron_args,
                 "Megatron-LM flags in one string, e.g. \"--tensor-model-parallel-size 8\"");
  app.add_option("--deepspeed", f.deepspeed_file, "DeepSpeed JSON config file");
  app.add_flag("--print-config", f.print_config,
               "print the fully resolved plan (defaults included) and exit");
}

PlanFlags merge_plan_flags(const PlanFlags& base, const PlanFlags& o) {
  PlanFlags r = base;
  auto take = [](auto& into, const auto& from) {
    if (from) into = from;
  };
  take(r.tp, o.tp);
  take(r.pp, o.pp);
  take(r.dp, o.dp);
  take(r.cp, o.cp);
  take(r.ep, o.ep);
  take(r.vpp, o.vpp);
  take(r.mbs, o.mbs);
  take(r.gbs, o.gbs);
  take(r.seq, o.seq);
  take(r.zero, o.zero);
  take(r.recompute, o.recompute);
  take(r.schedule, o.schedule);
  take(r.precision, o.precision);
  take(r.optimizer, o.optimizer);
  take(r.grad_dtype, o.grad_dtype);
  take(r.dp_bucket_size, o.dp_bucket_size);
  take(r.cuda_context, o.cuda_context);
  take(r.fragmentation_percent, o.fragmentation_percent);
  take(r.pipeline_split, o.pipeline_split);
  take(r.grad_accum, o.grad_accum);
  take(r.layers_per_virtual_stage, o.layers_per_virtual_stage);
  take(r.flash_attention, o.flash_attention);
  r.sp = base.sp || o.sp;
  r.overlap_grad_reduce = base.overlap_grad_reduce || o.overlap_grad_reduce;
  r.overlap_param_gather = base.overlap_param_gather || o.overlap_param_gather;
  r.print_config = base.print_config || o.print_config;
  // A gbs given at one level overrides a grad_accum from a lower one, and vice versa.
  if (o.gbs && !o.grad_accum) r.grad_accum.reset();
  if (o.grad_accum && !o.gbs) r.gbs.reset();
  return r;
}

std::string render_plan_config(const models::TrainingPlan& plan) {
  OrderedJson doc;
  doc["plan"] = plan_to_json(plan);
  return doc.dump(2) + "\n";
}

namespace {

int positive(const std::optional<std::int64_t>& value, std::string_view flag, int fallback) {
  if (!value) return fallback;
  if (*value < 1) throw ValidationError::not_positive(flag, std::to_string(*value));
  if (*value > (1 << 30)) throw ValidationError::bad_value(flag, std::to_string(*value), "< 2^30");
  return static_cast<int>(*value);
}

std::vector<int> parse_split(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument("bad");
      out.push_back(static_cast<int>(v));
    } catch (const std::exception&) {
      throw ValidationError::bad_value("--pipeline-split", text,
                                       "positive layer counts separated by commas, e.g. 20,20,20");
    }
  }
  return out;
}

}  // namespace

models::TrainingPlan resolve_plan(const PlanFlags& given, std::optional<std::int64_t> gpus,
                                  std::optional<int> model_layers) {
  // Precedence: --plan < --deepspeed < --megatron-args < explicit flags.
  PlanFlags f;
  if (given.plan_file) f = merge_plan_flags(f, import_plan_json(*given.plan_file));
  if (given.deepspeed_file) f = merge_plan_flags(f, import_deepspeed_json(*given.deepspeed_file));
  if (given.megatron_args) f = merge_plan_flags(f, import_megatron_args(*given.megatron_args));
  f = merge_plan_flags(f, given);
  models::TrainingPlan p;
  p.tp = positive(f.tp, "--tp", 1);
  p.pp = positive(f.pp, "--pp", 1);
  p.cp = positive(f.cp, "--cp", 1);
  p.ep = positive(f.ep, "--ep", 1);
  p.vpp = positive(f.vpp, "--vpp", 1);
  if (f.layers_per_virtual_stage) {
    const int per_chunk =
        positive(f.layers_per_virtual_stage, "--num-layers-per-virtual-pipeline-stage", 1);
    if (!model_layers) {
      throw ValidationError("--num-layers-per-virtual-pipeline-stage",
                            "--num-layers-per-virtual-pipeline-stage needs the model's layer "
                            "count; give --vpp (virtual stages per rank) instead");
    }
    if (*model_layers % (std::int64_t{p.pp} * per_chunk) != 0) {
      throw ValidationError(
          "--num-layers-per-virtual-pipeline-stage",
          fmt::format("--num-layers-per-virtual-pipeline-stage {} x --pp {} does not divide the "
                      "model's {} layers; pick a divisor",
                      per_chunk, p.pp, *model_layers));
    }
    const int vpp = *model_layers / (p.pp * per_chunk);
    if (f.vpp && vpp != p.vpp) {
      throw ValidationError("--vpp", fmt::format("--vpp {} contradicts "
                                                 "--num-layers-per-virtual-pipeline-stage {} "
                                                 "(which means --vpp {}); give only one",
                                                 p.vpp, per_chunk, vpp));
    }
    p.vpp = vpp;
  }
  p.mbs = positive(f.mbs, "--mbs", 1);
  p.seq = positive(f.seq, "--seq", static_cast<int>(p.seq));
  const std::int64_t model_parallel = std::int64_t{p.tp} * p.pp * p.cp;
  if (f.dp) {
    p.dp = positive(f.dp, "--dp", 1);
    if (gpus && p.gpus() != *gpus) {
      throw ValidationError(
          "--dp",
          fmt::format("--tp {} x --pp {} x --dp {} x --cp {} = {} GPUs, but the cluster has "
                      "{}; change the sizes or the cluster so they match",
                      p.tp, p.pp, p.dp, p.cp, p.gpus(), *gpus));
    }
  } else if (gpus) {
    if (*gpus % model_parallel != 0) {
      throw ValidationError(
          "--tp", fmt::format("--tp {} x --pp {} x --cp {} = {} does not divide the cluster's {} "
                              "GPUs; pick sizes whose product divides it",
                              p.tp, p.pp, p.cp, model_parallel, *gpus));
    }
    p.dp = static_cast<int>(*gpus / model_parallel);
  }
  if (f.grad_accum) {
    if (*f.grad_accum < 1)
      throw ValidationError::not_positive("--grad-accum", std::to_string(*f.grad_accum));
    const std::int64_t implied = p.mbs * p.dp * *f.grad_accum;
    if (f.gbs && *f.gbs != implied) {
      throw ValidationError(
          "--gbs", fmt::format("--gbs {} contradicts --mbs {} x --dp {} x --grad-accum {} = {}; "
                               "give one of them or make them agree",
                               *f.gbs, p.mbs, p.dp, *f.grad_accum, implied));
    }
    p.gbs = implied;
  }
  if (f.gbs) {
    if (*f.gbs < 1) throw ValidationError::not_positive("--gbs", std::to_string(*f.gbs));
    p.gbs = *f.gbs;
    if (p.gbs % (p.mbs * p.dp) != 0) {
      throw ValidationError(
          "--gbs", fmt::format("--gbs {} is not a multiple of --mbs {} x --dp {} = {}; make the "
                               "global batch a multiple of it",
                               p.gbs, p.mbs, p.dp, p.mbs * p.dp));
    }
  }
  if (f.zero) {
    if (*f.zero < 0 || *f.zero > 3)
      throw ValidationError::bad_value("--zero", std::to_string(*f.zero), "0, 1, 2 or 3");
    p.zero = static_cast<int>(*f.zero);
  }
  if (f.recompute) p.recompute = models::parse_recompute(*f.recompute);
  if (f.schedule) p.schedule = models::parse_schedule(*f.schedule);
  if (f.precision) p.precision = models::parse_precision(*f.precision);
  if (f.optimizer) p.optimizer = models::parse_optimizer(*f.optimizer);
  if (f.grad_dtype) p.grad_dtype = models::parse_grad_dtype(*f.grad_dtype);
  if (p.vpp > 1 && !f.schedule) p.schedule = models::Schedule::INTERLEAVED;
  if (p.schedule == models::Schedule::INTERLEAVED && p.vpp < 2) {
    throw ValidationError("--vpp",
                          "--schedule interleaved needs --vpp 2 or more virtual stages per rank");
  }
  if (p.schedule != models::Schedule::INTERLEAVED && p.vpp > 1) {
    throw ValidationError("--vpp", fmt::format("--vpp {} needs --schedule interleaved", p.vpp));
  }
  p.sp = f.sp;
  if (p.sp && p.tp == 1) {
    throw ValidationError("--sp", "--sp (sequence parallelism) needs --tp 2 or more");
  }
  if (f.flash_attention) p.flash_attention = *f.flash_attention == "on";
  p.overlap_grad_reduce = f.overlap_grad_reduce;
  p.overlap_param_gather = f.overlap_param_gather;
  if (f.dp_bucket_size) p.dp_bucket_bytes = parse_bytes(*f.dp_bucket_size, "--dp-bucket-size");
  if (f.cuda_context) p.cuda_context_bytes = parse_bytes(*f.cuda_context, "--cuda-context");
  if (f.fragmentation_percent) {
    if (*f.fragmentation_percent < 0 || *f.fragmentation_percent >= 100) {
      throw ValidationError::bad_value("--fragmentation",
                                       fmt::format("{}", *f.fragmentation_percent),
                                       "a percentage in [0, 100)");
    }
    p.fragmentation_fraction = *f.fragmentation_percent / 100.0;
  }
  if (f.pipeline_split) {
    p.pipeline_split = parse_split(*f.pipeline_split);
    if (static_cast<int>(p.pipeline_split.size()) != p.pp * p.vpp) {
      throw ValidationError(
          "--pipeline-split",
          fmt::format("--pipeline-split has {} entries but --pp {} x --vpp {} = {} stages; give "
                      "one layer count per stage",
                      p.pipeline_split.size(), p.pp, p.vpp, p.pp * p.vpp));
    }
    if (model_layers) {
      int sum = 0;
      for (int n : p.pipeline_split) sum += n;
      if (sum != *model_layers) {
        throw ValidationError("--pipeline-split",
                              fmt::format("--pipeline-split sums to {} layers but the model has "
                                          "{}; make the counts add up",
                                          sum, *model_layers));
      }
    }
  }
  return p;
}

}  // namespace loom::cli
