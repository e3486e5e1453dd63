#include "strategies/plan/plan_resolve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/limits.hpp"
#include "common/units.hpp"
#include "models/model_spec.hpp"
#include "strategies/plan/framework_profile.hpp"
#include "strategies/plan/plan_effects.hpp"
#include "strategies/plan/plan_rules.hpp"

namespace loom::strategies {
namespace {

using models::TrainingPlan;

// The value of SIZE field `key`, checked, or `fallback` when unset.
std::int64_t size_or(const PlanInput& in, std::string_view key, std::int64_t fallback) {
  const auto v = in.integer(key);
  if (!v) return fallback;
  check_size(key, *v, in.sources());
  return *v;
}

template <typename Enum>
Enum choice(const PlanInput& in, std::string_view key, Enum fallback) {
  const auto text = in.text(key);
  if (!text) return fallback;
  const auto& names = *plan_field(key).names;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == *text) return static_cast<Enum>(i);
  fail_field(in.sources(), key,
             ValidationError::unknown_name(in.sources().where(key), *text, names).what());
}

// A NAME_LIST field as a set of bits, bit i for the i-th of its names (RecomputeModules,
// GraphModules).
std::uint32_t modules_or(const PlanInput& in, std::string_view key, std::uint32_t fallback) {
  const auto text = in.text(key);
  if (!text) return fallback;
  const auto& names = *plan_field(key).names;
  std::uint32_t set = 0;
  // getline drops a trailing empty item: "attn," names '' as ",attn" does.
  if (!text->empty() && text->back() == ',') {
    fail_field(in.sources(), key,
               ValidationError::unknown_name(in.sources().where(key), "", names).what());
  }
  std::stringstream list(*text);
  std::string item;
  while (std::getline(list, item, ',')) {
    const auto it = std::find(names.begin(), names.end(), item);
    if (it == names.end()) {
      fail_field(in.sources(), key,
                 ValidationError::unknown_name(in.sources().where(key), item, names).what());
    }
    set |= std::uint32_t{1} << static_cast<unsigned>(it - names.begin());
  }
  return set;
}

double bytes_or(const PlanInput& in, std::string_view key, double fallback) {
  const auto text = in.text(key);
  if (!text) return fallback;
  try {
    return parse_bytes(*text, in.sources().where(key));
  } catch (const ValidationError& e) {
    fail_field(in.sources(), key, e.what());
  }
}

// Megatron's --num-layers-per-virtual-pipeline-stage: vpp = layers / (pp x per-chunk).
void resolve_virtual_stages(const PlanInput& in, std::optional<int> layers, TrainingPlan& p) {
  const PlanSources& s = in.sources();
  const auto per_chunk = static_cast<int>(size_or(in, "layers_per_virtual_stage", 1));
  const std::string lpvs = s.name("layers_per_virtual_stage");
  if (!layers) {
    fail_field(s, "layers_per_virtual_stage",
               fmt::format("{} needs the model's layer count; give {} (virtual stages per rank) "
                           "instead",
                           s.where("layers_per_virtual_stage"), s.name("vpp")));
  }
  // Megatron counts the embedding and the loss here too when it accounts for them.
  const int units = *layers + accounting_layers(in);
  if (units % (std::int64_t{p.pp} * per_chunk) != 0) {
    fail_field(s, "layers_per_virtual_stage",
               fmt::format("{} {} x {} {} does not divide the model's {} layers; pick a divisor",
                           lpvs, per_chunk, s.name("pp"), p.pp, units));
  }
  const int vpp = units / (p.pp * per_chunk);
  if (in.has("vpp") && vpp != p.vpp) {
    fail_field(s, "vpp",
               fmt::format("{} {} contradicts {} {} (which means {} {}); give only one",
                           s.name("vpp"), p.vpp, lpvs, per_chunk, s.name("vpp"), vpp));
  }
  p.vpp = vpp;
}

// dp from the cluster, then gbs from grad_accum or gbs itself.
void resolve_batch(const PlanInput& in, std::optional<std::int64_t> gpus, TrainingPlan& p) {
  const PlanSources& s = in.sources();
  const std::int64_t model_parallel = std::int64_t{p.tp} * p.pp * p.cp;
  if (in.has("dp")) {
    p.dp = static_cast<int>(size_or(in, "dp", 1));
    // The GPU-count rule (validate_plan's) now, before the batch arithmetic reads a wrong dp
    // and before --print-config or `loom ranks`, which do not validate, use the plan.
    if (gpus) check_gpu_count(p, *gpus, s);
  } else if (gpus) {
    if (*gpus % model_parallel != 0) {
      fail_field(s, "tp",
                 fmt::format("{} {} x {} {} x {} {} = {} does not divide the cluster's {} GPUs; "
                             "pick sizes whose product divides it",
                             s.name("tp"), p.tp, s.name("pp"), p.pp, s.name("cp"), p.cp,
                             model_parallel, *gpus));
    }
    p.dp = static_cast<int>(*gpus / model_parallel);
  }
  const auto gbs = in.integer("gbs");
  if (in.has("grad_accum")) {
    const std::int64_t steps = size_or(in, "grad_accum", 1);
    const std::int64_t implied = p.mbs * p.dp * steps;
    if (gbs && *gbs != implied) {
      fail_field(s, "gbs",
                 fmt::format("{} {} contradicts {} {} x {} {} x {} {} = {}; give one of them or "
                             "make them agree",
                             s.name("gbs"), *gbs, s.name("mbs"), p.mbs, s.name("dp"), p.dp,
                             s.name("grad_accum"), steps, implied));
    }
    p.gbs = implied;
  }
  if (gbs) {
    p.gbs = size_or(in, "gbs", 0);
    check_global_batch(p, s);
  }
  // Resource limits (common/limits.hpp): the schedule has one entry per micro-batch, and a
  // micro-batch's tokens scale every kernel's time.
  if (p.micro_batches() > MAX_MICRO_BATCHES) {
    fail_field(s, in.has("grad_accum") ? "grad_accum" : "gbs",
               fmt::format("{} {} / ({} {} x {} {}) = {} micro-batches per step, over loom's "
                           "limit of {} (MAX_MICRO_BATCHES, docs/limits.md); raise {} or lower "
                           "the global batch",
                           s.name("gbs"), p.global_batch(), s.name("mbs"), p.mbs, s.name("dp"),
                           p.dp, p.micro_batches(), MAX_MICRO_BATCHES, s.name("mbs")));
  }
  if (p.mbs * p.seq > MAX_MICRO_BATCH_TOKENS) {
    fail_field(s, "mbs",
               fmt::format("{} {} x {} {} = {} tokens per micro-batch, over loom's limit of {} "
                           "(MAX_MICRO_BATCH_TOKENS, docs/limits.md); lower {} or {}",
                           s.name("mbs"), p.mbs, s.name("seq"), p.seq, p.mbs * p.seq,
                           MAX_MICRO_BATCH_TOKENS, s.name("mbs"), s.name("seq")));
  }
}

// Schedule, precision, optimizer and the switches; the interleaved schedule follows vpp.
void resolve_choices(const PlanInput& in, bool transformer, TrainingPlan& p) {
  const PlanSources& s = in.sources();
  p.framework = choice(in, "framework", p.framework);
  const FrameworkProfile& profile = framework_profile(p.framework);
  p.zero = profile.zero;
  if (const auto zero = in.integer("zero")) {
    if (*zero < 0 || *zero > 3) {
      fail_field(s, "zero",
                 ValidationError::bad_value(s.where("zero"), std::to_string(*zero), "0, 1, 2 or 3")
                     .what());
    }
    p.zero = static_cast<int>(*zero);
  }
  p.recompute = choice(in, "recompute", p.recompute);
  p.schedule = choice(in, "schedule", p.schedule);
  p.precision = choice(in, "precision", p.precision);
  p.optimizer = choice(in, "optimizer", p.optimizer);
  p.grad_dtype = choice(in, "grad_dtype", p.grad_dtype);
  p.selective_recompute = choice(in, "selective_recompute", profile.selective_recompute);
  p.cross_entropy = choice(in, "cross_entropy", profile.cross_entropy);
  p.fusion = choice(in, "fusion", profile.fusion);
  p.cuda_graphs = in.flag("cuda_graphs", p.cuda_graphs);
  p.cuda_graph_scope = modules_or(in, "cuda_graph_scope", p.cuda_graph_scope);
  p.fp8_weight_cache = in.flag("fp8_weight_cache", profile.fp8_weight_cache);
  // Index 0 of fp8_recipe_names() is "auto" (unset); the others follow Fp8Recipe.
  if (const int recipe = choice(in, "fp8_recipe", 0); recipe > 0)
    p.fp8_recipe = static_cast<Fp8Recipe>(recipe - 1);
  p.scale_swizzle = in.flag("scale_swizzle", p.scale_swizzle);
  p.first_last_layers_bf16 = in.flag("first_last_layers_bf16", p.first_last_layers_bf16);
  p.num_layers_at_start_in_bf16 =
      static_cast<int>(size_or(in, "num_layers_at_start_in_bf16", p.num_layers_at_start_in_bf16));
  p.num_layers_at_end_in_bf16 =
      static_cast<int>(size_or(in, "num_layers_at_end_in_bf16", p.num_layers_at_end_in_bf16));
  p.keep_mtp_in_bf16 = in.flag("keep_mtp_in_bf16", p.keep_mtp_in_bf16);
  p.recompute_every = static_cast<int>(size_or(in, "recompute_every", p.recompute_every));
  p.recompute_method = choice(in, "recompute_method", p.recompute_method);
  p.cpu_offloading_num_layers =
      static_cast<int>(size_or(in, "cpu_offloading_num_layers", p.cpu_offloading_num_layers));
  p.recompute_num_layers =
      static_cast<int>(size_or(in, "recompute_num_layers", p.recompute_num_layers));
  if (p.vpp > 1 && !in.has("schedule")) p.schedule = models::Schedule::INTERLEAVED;
  if (p.schedule == models::Schedule::INTERLEAVED && p.vpp < 2) {
    fail_field(s, "vpp",
               fmt::format("{} interleaved needs {} 2 or more virtual stages per rank",
                           s.name("schedule"), s.name("vpp")));
  }
  if (p.schedule != models::Schedule::INTERLEAVED && p.vpp > 1) {
    fail_field(s, "vpp",
               fmt::format("{} {} needs {} interleaved", s.name("vpp"), p.vpp, s.name("schedule")));
  }
  // torchtitan's apply_tp always runs its transformers' norms sequence-parallel.
  const bool forced_sp = profile.sequence_parallel_with_tp && p.tp > 1 && transformer;
  p.sp = in.flag("sp", forced_sp);
  if (forced_sp && !p.sp) {
    fail_field(s, "sp",
               fmt::format("{} off: {}'s tensor parallelism always runs sequence-parallel "
                           "(apply_tp: SequenceParallel on the norms); drop it or change {}",
                           s.where("sp"), models::to_string(p.framework), s.name("framework")));
  }
  if (p.sp && p.tp == 1) {
    fail_field(
        s, "sp",
        fmt::format("{} (sequence parallelism) needs {} 2 or more", s.name("sp"), s.name("tp")));
  }
  p.flash_attention = in.flag("flash_attention", p.flash_attention);
  p.overlap_grad_reduce = in.flag("overlap_grad_reduce", profile.overlap_grad_reduce);
  p.overlap_param_gather = in.flag("overlap_param_gather", profile.overlap_param_gather);
  p.tp_comm_overlap = in.flag("tp_comm_overlap", profile.tp_comm_overlap);
  p.overlap_moe_expert_parallel_comm =
      in.flag("overlap_moe_expert_parallel_comm", p.overlap_moe_expert_parallel_comm);
  p.moe_dispatcher = choice(in, "moe_token_dispatcher", p.moe_dispatcher);
  p.cp_comm_type = choice(in, "cp_comm_type", profile.cp_comm_type);
  p.fsdp_impl = choice(in, "fsdp_impl", profile.fsdp_impl);
  p.attention_kernel = choice(in, "attention_kernel", profile.attention_kernel);
  p.reshard_after_forward = in.flag("reshard_after_forward", p.reshard_after_forward);
  p.ds_prefetch_bucket = size_or(in, "stage3_prefetch_bucket_size", p.ds_prefetch_bucket);
  p.ds_reduce_bucket = size_or(in, "stage3_reduce_bucket_size", p.ds_reduce_bucket);
  p.ds_persistence_threshold =
      size_or(in, "stage3_param_persistence_threshold", p.ds_persistence_threshold);
  p.offload_optimizer = choice(in, "offload_optimizer", p.offload_optimizer);
  p.offload_param = choice(in, "offload_param", p.offload_param);
  p.offload_pin_memory = in.flag("offload_pin_memory", p.offload_pin_memory);
  // A DeepSpeed section's pin_memory goes with its offload: flags that turn the offload off
  // take it along (the no-effect rule stays for a value given on its own).
  if (p.offload_optimizer == models::Offload::NONE && p.offload_param == models::Offload::NONE &&
      s.of("offload_pin_memory").pointer.rfind("/zero_optimization/offload_", 0) == 0)
    p.offload_pin_memory = false;
  p.mtp = in.flag("mtp", p.mtp);
  p.recompute_modules = modules_or(in, "recompute_modules", p.recompute_modules);
}

// "sync", "async", "ssp:S" (S >= 0) or "geo:K" (K >= 1) into the plan.
void parse_ps_update(const PlanInput& in, TrainingPlan& p) {
  const auto text = in.text("ps_update");
  if (!text) return;
  const PlanSources& s = in.sources();
  const std::string allowed = "sync, async, ssp:S (S >= 0 steps) or geo:K (K >= 1 steps)";
  const size_t colon = text->find(':');
  const std::string name = text->substr(0, colon);
  if (colon == std::string::npos && (name == "sync" || name == "async")) {
    p.ps_update = name == "sync" ? models::PsUpdate::SYNC : models::PsUpdate::ASYNC;
    return;
  }
  if (colon == std::string::npos || (name != "ssp" && name != "geo"))
    fail_field(s, "ps_update",
               ValidationError::bad_value(s.where("ps_update"), *text, allowed).what());
  const std::string number = text->substr(colon + 1);
  const bool geo = name == "geo";
  long bound = -1;
  try {
    size_t used = 0;
    bound = std::stol(number, &used);
    if (used != number.size()) bound = -1;
  } catch (const std::exception&) {
    bound = -1;
  }
  if (bound < (geo ? 1 : 0) || bound > 1000000)
    fail_field(s, "ps_update",
               ValidationError::bad_value(s.where("ps_update"), *text, allowed).what());
  p.ps_update = geo ? models::PsUpdate::GEO : models::PsUpdate::SSP;
  p.ps_update_bound = static_cast<int>(bound);
}

// The data-parallel design and the parameter-server settings, which need --dp-mode ps.
void resolve_dp_mode(const PlanInput& in, TrainingPlan& p) {
  const PlanSources& s = in.sources();
  p.dp_mode = choice(in, "dp_mode", p.dp_mode);
  // The parameter-server settings apply to --dp-mode ps alone (their `applies` reads dp_mode).
  for (const PlanField& f : plan_fields()) {
    if (is_ps_field(f.key) && in.has(f.key) && !f.applies(p)) {
      fail_field(s, f.key,
                 fmt::format("{} sets up parameter servers; it needs {} ps", s.where(f.key),
                             s.name("dp_mode")));
    }
  }
  p.ps_servers = static_cast<int>(size_or(in, "ps_servers", p.ps_servers));
  parse_ps_update(in, p);
  p.ps_shard = choice(in, "ps_shard", p.ps_shard);
  p.ps_placement = choice(in, "ps_placement", p.ps_placement);
}

// Megatron-core's --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split (TransformerConfig; get_num_layers_to_build in
// megatron/core/transformer/transformer_block.py): the embedding and the loss each count as
// one more layer, the layers plus those divide evenly over the pp x vpp model chunks, and
// the first chunk builds one transformer layer fewer for the embedding, the last one fewer
// for the loss (so a chunk may hold the embedding or the head alone). False when neither is set.
bool resolve_pipeline_accounting(const PlanInput& in, std::optional<int> layers, TrainingPlan& p) {
  const bool embedding = in.flag("account_for_embedding_in_pipeline_split", false);
  const bool loss = in.flag("account_for_loss_in_pipeline_split", false);
  if (!embedding && !loss) return false;
  const PlanSources& s = in.sources();
  const char* key =
      embedding ? "account_for_embedding_in_pipeline_split" : "account_for_loss_in_pipeline_split";
  const std::int64_t chunks = std::int64_t{p.pp} * p.vpp;
  if (in.has("pipeline_split")) {
    fail_field(s, key,
               fmt::format("{} and {} both place the layers; give only one", s.where(key),
                           s.name("pipeline_split")));
  }
  // One chunk builds every layer (Megatron's get_num_layers_to_build): the flags change
  // nothing, and a Megatron command line carrying them stays valid.
  if (chunks == 1) return false;
  if (!layers) {
    fail_field(s, key,
               fmt::format("{} needs the model's layer count; give {} instead", s.where(key),
                           s.name("pipeline_split")));
  }
  const std::int64_t units = *layers + accounting_layers(in);
  if (units % chunks != 0) {
    fail_field(s, key,
               fmt::format("{}: the model's {} layers{}{} = {} do not divide over {} {} x {} {} = "
                           "{} model chunks; change {} or {}, or give {}",
                           s.where(key), *layers, embedding ? " + the embedding" : "",
                           loss ? " + the loss" : "", units, s.name("pp"), p.pp, s.name("vpp"),
                           p.vpp, chunks, s.name("pp"), s.name("vpp"), s.name("pipeline_split")));
  }
  const int per_chunk = static_cast<int>(units / chunks);
  p.pipeline_split.assign(static_cast<size_t>(chunks), per_chunk);
  if (embedding) p.pipeline_split.front() -= 1;
  if (loss) p.pipeline_split.back() -= 1;
  return true;
}

// Memory knobs and the pipeline split.
void resolve_memory(const PlanInput& in, std::optional<int> layers, TrainingPlan& p) {
  const PlanSources& s = in.sources();
  p.dp_bucket_bytes = bytes_or(in, "dp_bucket_size", p.dp_bucket_bytes);
  // Below it the bucket count (gradient bytes / bucket bytes) grows without bound.
  if (!(p.dp_bucket_bytes >= static_cast<double>(MIN_DP_BUCKET_BYTES))) {
    fail_field(s, "dp_bucket_size",
               ValidationError::bad_value(s.where("dp_bucket_size"), *in.text("dp_bucket_size"),
                                          "at least 64KiB (loom's smallest bucket, "
                                          "MIN_DP_BUCKET_BYTES in docs/limits.md)")
                   .what());
  }
  p.cuda_context_bytes = bytes_or(in, "cuda_context", p.cuda_context_bytes);
  if (const auto percent = in.number("fragmentation_percent")) {
    if (*percent < 0 || *percent >= 100) {
      fail_field(s, "fragmentation_percent",
                 ValidationError::bad_value(s.where("fragmentation_percent"),
                                            fmt::format("{}", *percent), "a percentage in [0, 100)")
                     .what());
    }
    p.fragmentation_fraction = *percent / 100.0;
  }
  if (resolve_pipeline_accounting(in, layers, p)) return;
  if (const auto split = in.text("pipeline_split")) {
    p.pipeline_split = parse_layer_list(*split, s);
    check_pipeline_split(p, layers, s);
  }
}

// The derived keys a --print-config document carries must match what they derive from.
void check_derived(const PlanInput& in, const TrainingPlan& p) {
  for (const PlanField& field : plan_fields()) {
    if (field.type != FieldType::DERIVED) continue;
    const auto given = in.integer(field.key);
    if (!given) continue;
    const std::int64_t actual = std::get<std::int64_t>(field.get(p));
    if (*given == actual) continue;
    fail_field(in.sources(), field.key,
               fmt::format("{}: {} but the plan resolves to {} ({}); remove the key or make them "
                           "agree",
                           in.sources().where(field.key), *given, actual, field.doc));
  }
}

}  // namespace

std::vector<int> parse_layer_list(const std::string& text, const PlanSources& sources) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      // Checked before the cast: a count beyond int would wrap to a small one.
      if (used != item.size() || v < 0 || v > models::MAX_MODEL_LAYERS)
        throw std::invalid_argument("bad");
      out.push_back(static_cast<int>(v));
    } catch (const std::exception&) {
      fail_field(sources, "pipeline_split",
                 ValidationError::bad_value(
                     sources.where("pipeline_split"), text,
                     fmt::format("layer counts from 0 to {} separated by commas, e.g. 20,20,20",
                                 models::MAX_MODEL_LAYERS))
                     .what());
    }
  }
  return out;
}

TrainingPlan resolve_plan(const PlanInput& in, std::optional<std::int64_t> gpus,
                          std::optional<int> model_layers, std::optional<std::int64_t> model_seq,
                          bool transformer) {
  TrainingPlan p;
  p.tp = static_cast<int>(size_or(in, "tp", 1));
  p.pp = static_cast<int>(size_or(in, "pp", 1));
  p.cp = static_cast<int>(size_or(in, "cp", 1));
  p.ep = static_cast<int>(size_or(in, "ep", 1));
  p.etp = static_cast<int>(size_or(in, "etp", 0));  // 0: etp = tp
  p.vpp = static_cast<int>(size_or(in, "vpp", 1));
  if (in.has("layers_per_virtual_stage")) resolve_virtual_stages(in, model_layers, p);
  p.mbs = size_or(in, "mbs", 1);
  // One default for every command: the model's own sequence length, whatever other sources
  // (a plan file, Megatron flags) say about other fields.
  p.seq = size_or(in, "seq", model_seq.value_or(p.seq));
  resolve_batch(in, gpus, p);
  resolve_choices(in, transformer, p);
  resolve_dp_mode(in, p);
  resolve_memory(in, model_layers, p);
  check_derived(in, p);
  check_effective(in, p);
  return p;
}

TrainingPlan resolve_plan(const PlanInput& input, std::optional<std::int64_t> gpus,
                          const models::ModelSpec& model) {
  return resolve_plan(input, gpus, model.layers, model.default_seq,
                      model.kind == models::ModelKind::TRANSFORMER);
}

int accounting_layers(const PlanInput& input) {
  return (input.flag("account_for_embedding_in_pipeline_split", false) ? 1 : 0) +
         (input.flag("account_for_loss_in_pipeline_split", false) ? 1 : 0);
}

TrainingPlan resolve_fields(const PlanInput& input, std::initializer_list<const char*> texts,
                            std::initializer_list<const char*> toggles) {
  PlanInput probe;
  probe.sources() = input.sources();
  for (const char* key : texts)
    if (const auto v = input.text(key)) probe.set(key, *v);
  for (const char* key : toggles)
    if (input.has(key)) probe.set(key, input.flag(key));
  return resolve_plan(probe, std::nullopt, std::nullopt);
}

void check_precision_input_on_cluster(const PlanInput& input, const topo::Cluster& cluster) {
  check_precision_on_cluster(resolve_fields(input, {"precision", "fp8_recipe"}, {"scale_swizzle"}),
                             cluster, input.sources());
}

void check_context_window_input(const PlanInput& input, const models::ModelSpec& model) {
  TrainingPlan p;
  p.cp = static_cast<int>(input.integer("cp").value_or(1));
  p.seq = input.integer("seq").value_or(model.default_seq);
  check_context_parallel_window(model, p, input.sources());
}

void check_graph_scope_input(const PlanInput& input, const models::ModelSpec& model) {
  check_cuda_graph_scope_model(
      model, resolve_fields(input, {"cuda_graph_scope", "framework", "dp_mode"}, {"cuda_graphs"}),
      input.sources());
}

}  // namespace loom::strategies
