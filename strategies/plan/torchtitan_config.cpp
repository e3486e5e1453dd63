// torchtitan job configs both ways: `--torchtitan FILE.toml` into a PlanInput, and
// `--emit torchtitan`. The keys and their defaults are torchtitan's JobConfig
// (torchtitan/config/job_config.py, pytorch/torchtitan commit
// 238fa9953e4aec2a62582121564273d7cbb1e9f1, the last before the TOML configs gave way to
// Python config registries): Training, Parallelism, ActivationCheckpoint, Compile, Model.
#include <fmt/format.h>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "strategies/plan/plan_emit.hpp"
#include "strategies/plan/plan_import.hpp"
#include "strategies/plan/toml_reader.hpp"

namespace loom::strategies {
namespace {

// The keys read; every other key of the file is listed as set aside.
const std::vector<std::string>& read_keys() {
  static const std::vector<std::string> keys = {
      "training.local_batch_size",
      "training.global_batch_size",
      "training.seq_len",
      "training.mixed_precision_param",
      "training.mixed_precision_reduce",
      "parallelism.data_parallel_replicate_degree",
      "parallelism.data_parallel_shard_degree",
      "parallelism.fsdp_reshard_after_forward",
      "parallelism.tensor_parallel_degree",
      "parallelism.enable_async_tensor_parallel",
      "parallelism.pipeline_parallel_degree",
      "parallelism.pipeline_parallel_schedule",
      "parallelism.pipeline_parallel_microbatch_size",
      "parallelism.pipeline_parallel_layers_per_stage",
      "parallelism.context_parallel_degree",
      "parallelism.expert_parallel_degree",
      "parallelism.expert_tensor_parallel_degree",
      "activation_checkpoint.mode",
      "activation_checkpoint.selective_ac_option",
      "model.converters",
      "quantize.linear.float8.recipe_name",
      "float8.recipe_name",
  };
  return keys;
}

class TitanReader {
 public:
  TitanReader(const TomlTable& t, const std::string& origin) : t_(t), origin_(origin) {}

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    const auto it = t_.find(key);
    throw ConfigError(
        origin_, "",
        fmt::format("{}:{}: {}: {}", origin_, it == t_.end() ? 0 : it->second.line, key, what));
  }
  FieldSource source(std::string_view key) const {
    std::string pointer = "/" + std::string(key);
    for (char& c : pointer)
      if (c == '.') c = '/';
    return file_source(origin_, pointer, std::string(key));
  }
  bool has(std::string_view key) const { return t_.count(key) > 0; }
  std::int64_t integer(std::string_view key, std::int64_t fallback) const {
    const auto it = t_.find(key);
    if (it == t_.end()) return fallback;
    if (const auto* n = std::get_if<std::int64_t>(&it->second.value)) return *n;
    fail(key, fmt::format("{} is not an integer", toml_text(it->second)));
  }
  std::string text(std::string_view key, std::string fallback) const {
    const auto it = t_.find(key);
    if (it == t_.end()) return fallback;
    if (const auto* s = std::get_if<std::string>(&it->second.value)) return *s;
    fail(key, fmt::format("{} is not a string", toml_text(it->second)));
  }
  bool boolean(std::string_view key) const {
    const auto it = t_.find(key);
    if (it == t_.end()) return false;
    if (const auto* b = std::get_if<bool>(&it->second.value)) return *b;
    fail(key, fmt::format("{} is not true or false", toml_text(it->second)));
  }
  std::vector<std::string> strings(std::string_view key) const {
    std::vector<std::string> out;
    const auto it = t_.find(key);
    if (it == t_.end()) return out;
    const auto* items = std::get_if<std::vector<TomlValue>>(&it->second.value);
    if (!items) fail(key, "not an array of strings");
    for (const TomlValue& v : *items) {
      const auto* s = std::get_if<std::string>(&v.value);
      if (!s) fail(key, "not an array of strings");
      out.push_back(*s);
    }
    return out;
  }
  // A degree: 1 or more.
  std::int64_t degree(std::string_view key) const {
    const std::int64_t n = integer(key, 1);
    if (n < 1) fail(key, fmt::format("{} is not a degree (1 or more)", n));
    return n;
  }

 private:
  const TomlTable& t_;
  const std::string& origin_;
};

// data_parallel_replicate_degree x data_parallel_shard_degree: DDP, FSDP2 (ZeRO-3) or HSDP.
void read_data_parallel(const TitanReader& r, PlanInput& f) {
  const std::string rk = "parallelism.data_parallel_replicate_degree";
  const std::string sk = "parallelism.data_parallel_shard_degree";
  const std::int64_t replicate = r.degree(rk);
  const std::int64_t shard = r.integer(sk, -1);  // -1: the GPUs left over
  if (shard == 0 || shard < -1) r.fail(sk, fmt::format("{} is not -1 or a degree", shard));
  if (replicate > 1 && shard != 1) {
    r.fail(rk, fmt::format("{} replicas of a shard degree {} is HSDP, which loom does not model "
                           "yet; give data_parallel_shard_degree = 1 (DDP) or "
                           "data_parallel_replicate_degree = 1 (FSDP)",
                           replicate, shard));
  }
  if (shard == 1) {
    f.set("zero", std::int64_t{0}, r.source(sk));
    if (replicate > 1) f.set("dp", replicate, r.source(rk));
    return;
  }
  // torchtitan shards with FSDP2 (fully_shard) whenever the shard degree is above 1.
  f.set("zero", std::int64_t{3}, r.source(sk));
  f.set("fsdp_impl", std::string("fsdp2"), r.source(sk));
  if (shard > 1) f.set("dp", shard, r.source(sk));
  const std::string reshard = r.text("parallelism.fsdp_reshard_after_forward", "default");
  if (reshard == "never")
    f.set("reshard_after_forward", false, r.source("parallelism.fsdp_reshard_after_forward"));
  else if (reshard != "default" && reshard != "always")
    r.fail("parallelism.fsdp_reshard_after_forward",
           fmt::format("\"{}\" is not default, always or never", reshard));
}

void read_model_parallel(const TitanReader& r, PlanInput& f) {
  const std::int64_t tp = r.degree("parallelism.tensor_parallel_degree");
  f.set("tp", tp, r.source("parallelism.tensor_parallel_degree"));
  // torchtitan's TP plans shard the norms' sequence (SequenceParallel) whenever tp > 1.
  if (tp > 1) f.set("sp", true, r.source("parallelism.tensor_parallel_degree"));
  if (r.boolean("parallelism.enable_async_tensor_parallel"))
    f.set("tp_comm_overlap", true, r.source("parallelism.enable_async_tensor_parallel"));
  const std::int64_t pp = r.degree("parallelism.pipeline_parallel_degree");
  f.set("pp", pp, r.source("parallelism.pipeline_parallel_degree"));
  f.set("cp", r.degree("parallelism.context_parallel_degree"),
        r.source("parallelism.context_parallel_degree"));
  const std::int64_t ep = r.degree("parallelism.expert_parallel_degree");
  f.set("ep", ep, r.source("parallelism.expert_parallel_degree"));
  if (r.has("parallelism.expert_tensor_parallel_degree"))
    f.set("etp", r.degree("parallelism.expert_tensor_parallel_degree"),
          r.source("parallelism.expert_tensor_parallel_degree"));
  const std::string sk = "parallelism.pipeline_parallel_schedule";
  const std::string schedule = r.text(sk, "1F1B");
  if (pp > 1) {
    std::string s;
    if (schedule == "1F1B")
      s = "1f1b";
    else if (schedule == "GPipe")
      s = "gpipe";
    else if (schedule == "Interleaved1F1B")
      s = "interleaved";
    else if (schedule == "InterleavedZeroBubble" || schedule == "ZBVZeroBubble")
      s = "zb";
    else
      r.fail(sk, fmt::format("\"{}\" is not one loom models: 1F1B, GPipe, Interleaved1F1B, "
                             "InterleavedZeroBubble, ZBVZeroBubble",
                             schedule));
    f.set("schedule", s, r.source(sk));
    if (r.has("parallelism.pipeline_parallel_layers_per_stage"))
      f.set("layers_per_virtual_stage", r.degree("parallelism.pipeline_parallel_layers_per_stage"),
            r.source("parallelism.pipeline_parallel_layers_per_stage"));
  }
}

// local_batch_size per data-parallel rank and step phase, global_batch_size (-1: local x dp);
// under pipelines the local batch splits into pipeline_parallel_microbatch_size micro-batches.
void read_batch(const TitanReader& r, PlanInput& f, bool pipelined) {
  const std::string lk = "training.local_batch_size", gk = "training.global_batch_size";
  const std::int64_t local = r.integer(lk, 8);
  if (local < 1) r.fail(lk, fmt::format("{} is not a positive batch", local));
  const std::int64_t global = r.integer(gk, -1);
  std::int64_t mbs = local;
  if (pipelined) {
    const std::string mk = "parallelism.pipeline_parallel_microbatch_size";
    mbs = r.degree(mk);
    if (local % mbs != 0)
      r.fail(mk, fmt::format("{} does not divide training.local_batch_size {}", mbs, local));
    f.set("mbs", mbs, r.source(mk));
  } else {
    f.set("mbs", mbs, r.source(lk));
  }
  if (global > 0)
    f.set("gbs", global, r.source(gk));
  else if (global == -1)
    f.set("grad_accum", local / mbs, r.source(lk));
  else
    r.fail(gk, fmt::format("{} is not -1 or a positive batch", global));
}

void read_precision_and_recompute(const TitanReader& r, PlanInput& f) {
  const std::string pk = "training.mixed_precision_param";
  const std::string param = r.text(pk, "bfloat16");
  if (param != "bfloat16" && param != "float32")
    r.fail(pk, fmt::format("\"{}\" is not bfloat16 or float32", param));
  f.set("precision", std::string(param == "float32" ? "fp32" : "bf16"), r.source(pk));
  const std::vector<std::string> converters = r.strings("model.converters");
  if (std::find(converters.begin(), converters.end(), "float8") != converters.end()) {
    f.set("precision", std::string("fp8"), r.source("model.converters"));
    for (const char* key : {"quantize.linear.float8.recipe_name", "float8.recipe_name"}) {
      if (!r.has(key)) continue;
      const std::string recipe = r.text(key, "");
      if (recipe != "tensorwise")
        r.fail(key, fmt::format("\"{}\" is not modelled (tensorwise is)", recipe));
      f.set("fp8_recipe", recipe, r.source(key));
    }
  }
  const std::string mk = "activation_checkpoint.mode",
                    ok = "activation_checkpoint.selective_ac_option";
  const std::string mode = r.text(mk, "selective");
  if (mode == "none" || mode == "full") {
    f.set("recompute", mode, r.source(mk));
  } else if (mode == "selective") {
    const std::string option = r.text(ok, "2");
    if (option == "op") {
      f.set("recompute", std::string("selective"), r.source(mk));
      f.set("selective_recompute", std::string("op"), r.source(ok));
    } else {
      // Layer selective AC: every k-th layer checkpointed whole.
      std::int64_t k = 0;
      try {
        size_t used = 0;
        k = std::stoll(option, &used);
        if (used != option.size()) k = 0;
      } catch (const std::exception&) {
      }
      if (k < 1) r.fail(ok, fmt::format("\"{}\" is not 'op' or a positive integer", option));
      f.set("recompute", std::string("full"), r.source(ok));
      f.set("recompute_every", k, r.source(ok));
    }
  } else {
    r.fail(mk, fmt::format("\"{}\" is not modelled (none, selective, full are)", mode));
  }
}

}  // namespace

TorchtitanConfig parse_torchtitan_toml(const std::string& text, const std::string& origin) {
  const TomlTable t = parse_toml(text, origin);
  const TitanReader r(t, origin);
  TorchtitanConfig out;
  PlanInput& f = out.plan;
  f.set("framework", std::string("torchtitan"), file_source(origin, "", "torchtitan config"));
  if (r.has("training.seq_len")) {
    const std::int64_t seq = r.integer("training.seq_len", 0);
    if (seq < 1) r.fail("training.seq_len", "not a positive length");
    f.set("seq", seq, r.source("training.seq_len"));
  }
  read_data_parallel(r, f);
  read_model_parallel(r, f);
  read_batch(r, f, f.integer("pp").value_or(1) > 1);
  read_precision_and_recompute(r, f);
  const std::string rk = "training.mixed_precision_reduce";
  if (r.text(rk, "float32") != "float32") r.fail(rk, "not float32 (torchtitan's only choice)");
  for (const auto& [key, v] : t) {
    const auto& keys = read_keys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) out.ignored.push_back(key);
  }
  return out;
}

TorchtitanConfig import_torchtitan_toml(const std::string& path) {
  return parse_torchtitan_toml(read_text_file(path, "torchtitan config"), path);
}

std::string emit_torchtitan(const models::ModelSpec& model, const models::TrainingPlan& p) {
  std::vector<std::string> notes;
  std::string out = fmt::format(
      "# torchtitan job config (torchtitan/config/job_config.py); loom model {}: {} layers, "
      "hidden {}, {} heads ({} KV), ffn {}, vocab {}\n",
      model.name, model.layers, model.hidden, model.heads, model.kv_heads, model.ffn, model.vocab);
  out += "[model]\n# name and flavor: torchtitan's model registry entry for this shape\n";
  if (p.precision == models::Precision::FP8) out += "converters = [\"float8\"]\n";
  out += "\n[training]\n";
  const bool pipelined = p.pp > 1;
  const std::int64_t local = pipelined ? p.mbs * p.micro_batches() : p.mbs;
  out += fmt::format("local_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\n", local,
                     p.global_batch(), p.seq);
  out += fmt::format("mixed_precision_param = \"{}\"\nmixed_precision_reduce = \"float32\"\n",
                     p.precision == models::Precision::FP32 ? "float32" : "bfloat16");
  out += "\n[parallelism]\n";
  if (p.zero == 3) {
    out +=
        fmt::format("data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = {}\n", p.dp);
    if (!p.reshard_after_forward) out += "fsdp_reshard_after_forward = \"never\"\n";
  } else {
    out +=
        fmt::format("data_parallel_replicate_degree = {}\ndata_parallel_shard_degree = 1\n", p.dp);
    if (p.zero > 0)
      notes.push_back(fmt::format("ZeRO-{} (torchtitan shards with FSDP2 only)", p.zero));
  }
  out += fmt::format("tensor_parallel_degree = {}\n", p.tp);
  if (p.tp_comm_overlap) out += "enable_async_tensor_parallel = true\n";
  out += fmt::format("pipeline_parallel_degree = {}\n", p.pp);
  if (pipelined) {
    const char* schedule = p.schedule == models::Schedule::GPIPE         ? "GPipe"
                           : p.schedule == models::Schedule::INTERLEAVED ? "Interleaved1F1B"
                           : p.schedule == models::Schedule::ZERO_BUBBLE ? "InterleavedZeroBubble"
                                                                         : "1F1B";
    out +=
        fmt::format("pipeline_parallel_schedule = \"{}\"\npipeline_parallel_microbatch_size = {}\n",
                    schedule, p.mbs);
    if (p.vpp > 1 && model.layers % (p.pp * p.vpp) == 0)
      out +=
          fmt::format("pipeline_parallel_layers_per_stage = {}\n", model.layers / (p.pp * p.vpp));
  }
  out += fmt::format("context_parallel_degree = {}\nexpert_parallel_degree = {}\n", p.cp, p.ep);
  if (p.etp > 0) out += fmt::format("expert_tensor_parallel_degree = {}\n", p.etp);
  out += "\n[activation_checkpoint]\n";
  if (p.recompute == models::Recompute::NONE) {
    out += "mode = \"none\"\n";
  } else if (p.recompute == models::Recompute::FULL && p.recompute_every > 1) {
    out += fmt::format("mode = \"selective\"\nselective_ac_option = \"{}\"\n", p.recompute_every);
  } else if (p.recompute == models::Recompute::FULL) {
    out += "mode = \"full\"\n";
  } else {
    out += "mode = \"selective\"\nselective_ac_option = \"op\"\n";
    if (p.selective_recompute != models::SelectiveRecompute::OP)
      notes.push_back("Megatron's attention-only selective recompute (torchtitan's is 'op')");
  }
  if (p.precision == models::Precision::FP8 && p.fp8_recipe) {
    if (*p.fp8_recipe == Fp8Recipe::TENSORWISE)
      out += "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n";
    else
      notes.push_back(fmt::format("the {} FP8 recipe", loom::to_string(*p.fp8_recipe)));
  }
  if (p.precision == models::Precision::FP16 || p.precision == models::Precision::NVFP4)
    notes.push_back(fmt::format("precision {}", models::to_string(p.precision)));
  if (!notes.empty()) out += "# not expressed: " + join(notes, "; ") + "\n";
  return out;
}

}  // namespace loom::strategies
