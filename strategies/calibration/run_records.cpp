#include "strategies/calibration/run_records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "topologies/cluster_presets.hpp"

namespace loom::strategies {
namespace {

using Json = nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void fail(const std::string& file, const std::string& pointer,
                       const std::string& what) {
  throw ConfigError(file, pointer, fmt::format("{}#{}: {}", file, pointer, what));
}

// The value at `key` of `obj` when it is set (absent and null both mean "not stated").
const Json* stated(const Json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return nullptr;
  return &obj[key];
}

// A positive integer at obj[key], or nothing; anything else is an error at its pointer.
std::optional<std::int64_t> stated_int(const Json& obj, const char* key, const std::string& file,
                                       const std::string& pointer) {
  const Json* v = stated(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() || v->get<std::int64_t>() < 0)
    fail(file, pointer + "/" + key,
         fmt::format("invalid value {}; allowed: an integer >= 0 or null", json_excerpt(*v)));
  return v->get<std::int64_t>();
}

// The loom model of a record: loom.model, else model.name as a preset, else the record's
// architecture as a llama-style decoder (SwiGLU, RMSNorm, RoPE, untied).
models::ModelSpec record_model(const Json& rec, const std::string& file, const std::string& at) {
  const Json* loom = stated(rec, "loom");
  if (loom && stated(*loom, "model")) {
    const Json& model = (*loom)["model"];
    if (!model.is_string())
      fail(file, at + "/loom/model",
           fmt::format("invalid value {}; allowed: a preset name or a model file",
                       json_excerpt(model)));
    std::string arg = model.get<std::string>();
    const auto beside = std::filesystem::path(file).parent_path() / arg;
    std::error_code ec;  // a name too long for a path is not a path
    if (!std::filesystem::exists(arg, ec) && std::filesystem::exists(beside, ec))
      arg = beside.string();
    return models::load_model(arg, file + "#" + at + "/loom/model");
  }
  const Json* m = stated(rec, "model");
  if (!m || !m->is_object())
    fail(file, at + "/model", "missing model; give the record's model or loom.model");
  if (const Json* name = stated(*m, "name")) {
    const auto names = models::model_preset_names();
    if (name->is_string() && std::count(names.begin(), names.end(), name->get<std::string>()))
      return models::model_preset(name->get<std::string>());
  }
  Json hf;
  hf["model_type"] = "llama";
  const std::pair<const char*, const char*> keys[] = {
      {"num_layers", "num_hidden_layers"},      {"hidden_size", "hidden_size"},
      {"num_heads", "num_attention_heads"},     {"num_kv_heads", "num_key_value_heads"},
      {"ffn_hidden_size", "intermediate_size"}, {"vocab_size", "vocab_size"}};
  for (const auto& [ours, theirs] : keys) {
    const auto v = stated_int(*m, ours, file, at + "/model");
    if (!v) {
      fail(file, at + "/model/" + ours,
           "not stated; loom needs the architecture (or set loom.model to a preset or model file)");
    }
    hf[theirs] = *v;
  }
  if (stated(*m, "moe"))
    fail(file, at + "/model/moe", "a MoE architecture needs loom.model (a preset or model file)");
  return models::import_hf_config(hf.dump(), file + "#" + at + "/model");
}

// The plan keys the record's schema states, as a PlanInput with sources in the file.
PlanInput record_plan(const Json& rec, const std::string& file, const std::string& at) {
  PlanInput in;
  const auto set_int = [&](const Json& obj, const char* key, const std::string& ptr,
                           const char* field) {
    if (auto v = stated_int(obj, key, file, ptr); v && *v > 0)
      in.set(field, *v, file_source(file, ptr + "/" + key, field));
  };
  const Json& par = stated(rec, "parallelism") ? rec["parallelism"] : Json::object();
  const std::string pp = at + "/parallelism";
  for (const char* k : {"tp", "pp", "dp", "cp", "ep"}) set_int(par, k, pp, k);
  if (auto vp = stated_int(par, "vp", file, pp); vp && *vp > 1)
    in.set("vpp", *vp, file_source(file, pp + "/vp", "vpp"));
  if (auto z = stated_int(par, "zero_stage", file, pp)) {
    in.set("zero", *z, file_source(file, pp + "/zero_stage", "zero"));
  } else if (const Json* f = stated(par, "fsdp"); f && f->is_boolean() && f->get<bool>()) {
    in.set("zero", std::int64_t{3}, file_source(file, pp + "/fsdp", "zero"));
  } else if (const Json* d = stated(par, "distributed_optimizer");
             d && d->is_boolean() && d->get<bool>()) {
    in.set("zero", std::int64_t{1}, file_source(file, pp + "/distributed_optimizer", "zero"));
  }
  if (const Json* sp = stated(par, "sequence_parallel"); sp && sp->is_boolean() && sp->get<bool>())
    in.set("sp", true, file_source(file, pp + "/sequence_parallel", "sp"));
  const Json& batch = stated(rec, "batch") ? rec["batch"] : Json::object();
  set_int(batch, "micro_batch_size", at + "/batch", "mbs");
  set_int(batch, "global_batch_size", at + "/batch", "gbs");
  set_int(rec, "seq_len", at, "seq");
  // Free text: the words loom knows; anything else leaves loom's default (loom.plan says more).
  if (const Json* r = stated(rec, "recompute"); r && r->is_string()) {
    const std::string t = lower(r->get<std::string>());
    for (const char* name : {"full", "selective", "none"})
      if (t.find(name) != std::string::npos) {
        in.set("recompute", std::string(name), file_source(file, at + "/recompute", "recompute"));
        break;
      }
  }
  if (const Json* p = stated(rec, "precision"); p && p->is_string()) {
    const std::string t = lower(p->get<std::string>());
    for (const char* name : {"fp8", "bf16", "fp16", "fp32"})
      if (t.find(name) != std::string::npos) {
        in.set("precision", std::string(name), file_source(file, at + "/precision", "precision"));
        break;
      }
  }
  return in;
}

// The measured step time: iteration_time_s, else the step tokens over tokens/s per GPU.
double record_step(const Json& rec, const models::TrainingPlan& plan, int gpus,
                   const std::string& file, const std::string& at) {
  const Json* m = stated(rec, "measured");
  const auto positive = [&](const char* key) -> std::optional<double> {
    const Json* v = m ? stated(*m, key) : nullptr;
    if (!v) return std::nullopt;
    if (!v->is_number() || !(v->get<double>() > 0))
      fail(file, at + "/measured/" + key,
           fmt::format("invalid value {}; allowed: a number > 0", json_excerpt(*v)));
    return v->get<double>();
  };
  if (auto t = positive("iteration_time_s")) return *t;
  if (auto tps = positive("tokens_per_sec_per_gpu")) {
    return static_cast<double>(plan.global_batch()) * static_cast<double>(plan.seq) / (*tps * gpus);
  }
  fail(file, at + "/measured",
       "no measurement loom can fit to; give iteration_time_s or tokens_per_sec_per_gpu");
}

MeasuredRun read_record(const Json& rec, const std::string& file, const std::string& at,
                        const std::optional<std::string>& default_cluster,
                        const std::shared_ptr<ClusterCache>& clusters) {
  if (!rec.is_object()) fail(file, at, "a run record must be a JSON object");
  MeasuredRun run;
  run.where = file + "#" + at;
  const Json* id = stated(rec, "id");
  run.id = id && id->is_string() ? id->get<std::string>() : at;
  const Json* loom = stated(rec, "loom");
  if (loom && !loom->is_object()) fail(file, at + "/loom", "loom must be an object");
  std::optional<std::string> cluster = default_cluster;
  if (loom && stated(*loom, "cluster")) {
    const Json& name = (*loom)["cluster"];
    if (!name.is_string())
      fail(file, at + "/loom/cluster",
           fmt::format("invalid value {}; allowed: a preset name or a cluster file",
                       json_excerpt(name)));
    cluster = name.get<std::string>();
  }
  if (!cluster) fail(file, at, "no cluster for this run; give --cluster or set loom.cluster");
  const Json& hw = stated(rec, "hardware") ? rec["hardware"] : Json::object();
  const auto gpus = stated_int(hw, "num_gpus", file, at + "/hardware");
  if (!gpus || *gpus < 1)
    fail(file, at + "/hardware/num_gpus", "not stated; loom needs the run's GPU count");
  if (*gpus > MAX_CLUSTER_GPUS)
    fail(file, at + "/hardware/num_gpus",
         fmt::format("invalid value {}; allowed: at most {} GPUs (docs/limits.md)", *gpus,
                     MAX_CLUSTER_GPUS));
  // Built now so a bad cluster fails at its record; held by the bounded cache, not the run.
  clusters->get(*cluster, static_cast<int>(*gpus));
  run.cluster_name = *cluster;
  run.gpus = static_cast<int>(*gpus);
  run.clusters = clusters;
  run.model = record_model(rec, file, at);
  PlanInput in = record_plan(rec, file, at);
  if (loom && stated(*loom, "plan")) {
    ObjectReader r(rec["loom"]["plan"], file, at + "/loom/plan");
    in.merge(read_plan_fields(r));
  }
  run.plan = resolve_plan(in, *gpus, run.model);
  validate_plan(run.model, run.plan, *gpus, in.sources());
  run.step_s = record_step(rec, run.plan, static_cast<int>(*gpus), file, at);
  return run;
}

}  // namespace

ClusterCache::ClusterCache(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

std::shared_ptr<const topo::Cluster> ClusterCache::get(const std::string& name, int gpus) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->name == name && it->gpus == gpus) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().cluster;
    }
  }
  auto cluster = std::make_shared<const topo::Cluster>(
      topo::load_cluster(topo::ClusterRequest{name, std::nullopt, gpus}));
  ++builds_;
  entries_.push_front({name, gpus, cluster});
  while (entries_.size() > capacity_) entries_.pop_back();
  return cluster;
}

std::shared_ptr<const topo::Cluster> MeasuredRun::cluster_ref() const {
  if (cluster) return cluster;
  check_invariant(clusters != nullptr, "a measured run without a cluster");
  return clusters->get(cluster_name, gpus);
}

std::vector<MeasuredRun> read_runs(const std::string& path,
                                   const std::optional<std::string>& default_cluster,
                                   size_t cluster_capacity) {
  const Json doc = load_json_file(path, "runs");
  const bool wrapped = doc.is_object() && doc.contains("runs");
  const Json& runs = wrapped ? doc["runs"] : doc;
  const std::string base = wrapped ? "/runs" : "";
  if (!runs.is_array() || runs.empty())
    fail(path, wrapped ? "/runs" : "",
         "expected a non-empty array of run records (or {\"runs\": [...]})");
  auto clusters = std::make_shared<ClusterCache>(cluster_capacity);
  std::vector<MeasuredRun> out;
  for (size_t i = 0; i < runs.size(); ++i)
    out.push_back(
        read_record(runs[i], path, fmt::format("{}/{}", base, i), default_cluster, clusters));
  return out;
}

}  // namespace loom::strategies
