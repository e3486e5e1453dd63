// --emit: a plan written as Megatron-LM arguments, a torchtitan job config and a DeepSpeed
// config, and read back by loom's own importers to the same plan.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_emit.hpp"
#include "strategies/plan/plan_import.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

models::TrainingPlan plan_of(const std::string& megatron, const models::ModelSpec& model,
                             std::int64_t gpus, PlanInput extra = {}) {
  PlanInput in = import_megatron_args(megatron);
  in.merge(extra);
  return resolve_plan(in, gpus, model);
}

// The fields each framework carries, equal in both plans.
void check_same(const models::TrainingPlan& a, const models::TrainingPlan& b,
                std::initializer_list<const char*> keys) {
  const auto ja = plan_to_json(a), jb = plan_to_json(b);
  for (const char* key : keys) {
    CAPTURE(key);
    CHECK(ja.at(key).dump() == jb.at(key).dump());
  }
}

// The text before the first '#' line (the JSON of emit_deepspeed) and the last line.
std::pair<std::string, std::string> json_and_args(const std::string& text) {
  const size_t hash = text.find("\n#");
  const std::string body = text.substr(0, hash + 1);
  std::string rest = text.substr(hash + 1);
  while (!rest.empty() && rest.back() == '\n') rest.pop_back();
  return {body, rest.substr(rest.rfind('\n') + 1)};
}

}  // namespace

TEST_CASE("strategies::PlanEmit: Megatron-LM arguments read back to the same plan and model") {
  const models::ModelSpec model = models::model_preset("llama3-70b");
  const models::TrainingPlan p = plan_of(
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
      "--num-virtual-stages-per-pipeline-rank 5 --micro-batch-size 1 --global-batch-size 512 "
      "--seq-length 8192 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce "
      "--overlap-param-gather --tp-comm-overlap --bf16 --fp8-format hybrid --fp8-recipe "
      "tensorwise --grad-reduce-in-bf16 --recompute-granularity selective "
      "--cross-entropy-loss-fusion",
      model, 512);
  const std::string text = emit_megatron(model, p);
  CHECK(text.rfind("# Megatron-LM", 0) == 0);
  const MegatronLine line = read_megatron_args(megatron_flags_line(model, p));
  CHECK(line.ignored.empty());
  CHECK(megatron_model_mismatches(line, model).empty());
  const models::TrainingPlan back = resolve_plan(line.plan, 512, model);
  check_same(p, back,
             {"tp",
              "pp",
              "vpp",
              "dp",
              "cp",
              "ep",
              "mbs",
              "gbs",
              "seq",
              "zero",
              "recompute",
              "schedule",
              "precision",
              "fp8_recipe",
              "grad_dtype",
              "sp",
              "overlap_grad_reduce",
              "overlap_param_gather",
              "tp_comm_overlap",
              "cross_entropy",
              "dp_bucket_size",
              "optimizer"});
  // The model the arguments build is the model's shape.
  const models::ModelSpec built = megatron_model(line);
  CHECK(built.layers == model.layers);
  CHECK(built.hidden == model.hidden);
  CHECK(built.kv_heads == model.kv_heads);
  CHECK(built.ffn == model.ffn);
  // Uneven first and last stages as Megatron's --decoder-first/last-pipeline-num-layers.
  PlanInput split;
  split.set("pipeline_split", std::string("18,22,22,18"));
  const models::TrainingPlan uneven = plan_of(
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --global-batch-size 64",
      model, 64, split);
  const models::TrainingPlan uneven_back =
      resolve_plan(read_megatron_args(megatron_flags_line(model, uneven)).plan, 64, model);
  check_same(uneven, uneven_back, {"pipeline_split", "pp", "gbs", "zero"});
}

TEST_CASE("strategies::PlanEmit: a torchtitan job config reads back to the same plan") {
  const models::ModelSpec model = models::model_preset("llama3-8b");
  PlanInput fsdp;
  fsdp.set("zero", std::int64_t{3});
  fsdp.set("recompute", std::string("full"));
  const models::TrainingPlan p = plan_of(
      "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --micro-batch-size 1 "
      "--global-batch-size 128 --seq-length 8192 --sequence-parallel --tp-comm-overlap --bf16",
      model, 64, fsdp);
  const std::string toml = emit_torchtitan(model, p);
  const TorchtitanConfig back_config = parse_torchtitan_toml(toml, "emitted.toml");
  const models::TrainingPlan back = resolve_plan(back_config.plan, 64, model);
  check_same(p, back,
             {"tp", "pp", "dp", "cp", "ep", "mbs", "gbs", "seq", "zero", "fsdp_impl", "recompute",
              "schedule", "precision", "sp", "tp_comm_overlap"});
  CHECK(back.framework == models::Framework::TORCHTITAN);
  // torchtitan's layer-selective AC (every k-th layer) and op-level selective AC.
  PlanInput every;
  every.set("zero", std::int64_t{3});
  every.set("recompute", std::string("full"));
  every.set("recompute_every", std::int64_t{2});
  const models::TrainingPlan q = plan_of("--global-batch-size 64", model, 8, every);
  const models::TrainingPlan q_back =
      resolve_plan(parse_torchtitan_toml(emit_torchtitan(model, q), "q.toml").plan, 8, model);
  check_same(q, q_back, {"recompute", "recompute_every", "dp", "zero", "mbs", "gbs"});
}

TEST_CASE(
    "strategies::PlanEmit: a DeepSpeed config with its Megatron-DeepSpeed arguments reads "
    "back to the same plan") {
  const models::ModelSpec model = models::model_preset("llama3-8b");
  PlanInput ds;
  ds.set("framework", std::string("deepspeed"));
  const models::TrainingPlan p = plan_of(
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --micro-batch-size 2 "
      "--global-batch-size 256 --seq-length 4096 --use-distributed-optimizer "
      "--overlap-grad-reduce --overlap-param-gather --bf16 --recompute-granularity full",
      model, 32, ds);
  const auto [json, args] = json_and_args(emit_deepspeed(model, p));
  PlanInput in = parse_deepspeed_json(json, "ds_config.json");
  in.merge(read_megatron_args(args).plan);
  in.set("framework", std::string("deepspeed"));
  const models::TrainingPlan back = resolve_plan(in, 32, model);
  check_same(p, back,
             {"tp", "pp", "dp", "mbs", "gbs", "seq", "zero", "recompute", "precision",
              "overlap_grad_reduce", "overlap_param_gather", "dp_bucket_size", "optimizer"});
  // ZeRO++ hierarchical partitioning (HSDP-like) is refused by name; 1 is plain ZeRO.
  CHECK_THROWS_WITH_AS(
      parse_deepspeed_json(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}})",
                           "ds.json"),
      doctest::Contains("zero_hpz_partition_size"), ConfigError);
  CHECK(parse_deepspeed_json(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 1}})",
                             "ds.json")
            .integer("zero") == 3);
}

TEST_CASE("strategies::PlanEmit: what a framework cannot express is said, not dropped") {
  const models::ModelSpec model = models::model_preset("llama3-8b");
  PlanInput gpipe;
  gpipe.set("schedule", std::string("gpipe"));
  const models::TrainingPlan p =
      plan_of("--pipeline-model-parallel-size 2 --global-batch-size 16", model, 8, gpipe);
  CHECK(emit_megatron(model, p).find("not expressed by these flags: the gpipe schedule") !=
        std::string::npos);
  CHECK_THROWS_AS(parse_emit_format("nemo"), ValidationError);
}

TEST_CASE("strategies::TorchtitanConfig: errors name the file and line; unknown keys are listed") {
  const std::string text =
      "[job]\ndump_folder = \"./outputs\"\n\n[parallelism]\ntensor_parallel_degree = 2\n"
      "data_parallel_shard_degree = -1\n[training]\nlocal_batch_size = 2\nseq_len = 4096\n"
      "steps = 10 # comment\n[compile]\ncomponents = [\"model\",\n  \"loss\"]\n";
  const TorchtitanConfig c = parse_torchtitan_toml(text, "t.toml");
  CHECK(c.plan.integer("tp") == 2);
  CHECK(c.plan.integer("zero") == 3);
  CHECK(c.plan.integer("seq") == 4096);
  CHECK(c.ignored ==
        std::vector<std::string>{"compile.components", "job.dump_folder", "training.steps"});
  CHECK_THROWS_WITH_AS(
      parse_torchtitan_toml("[parallelism]\n\ntensor_parallel_degree = \"2\"\n", "t.toml"),
      doctest::Contains("t.toml:3: parallelism.tensor_parallel_degree"), ConfigError);
  CHECK_THROWS_WITH_AS(
      parse_torchtitan_toml("[training]\nseq_len = 4096\nseq_len = 8192\n", "t.toml"),
      doctest::Contains("t.toml:3: 'training.seq_len' given twice"), ConfigError);
  CHECK_THROWS_WITH_AS(parse_torchtitan_toml("[[x]]\n", "t.toml"),
                       doctest::Contains("t.toml:1: arrays of tables"), ConfigError);
  CHECK_THROWS_WITH_AS(
      parse_torchtitan_toml(
          "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n",
          "t.toml"),
      doctest::Contains("HSDP"), ConfigError);
}
