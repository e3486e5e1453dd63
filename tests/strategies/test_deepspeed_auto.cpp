// Issue 33, "Models users bring": DeepSpeed configs as Hugging Face users write them, with
// "auto" values (resolved as transformers' HfTrainerDeepSpeedConfig resolves them, and said
// so) and ZeRO-Offload / ZeRO-Infinity sections. The two configs are the Hugging Face ones:
// examples/plans/hf-ds-zero2-offload.json is transformers' tests/deepspeed/ds_config_zero2.json
// (huggingface/transformers commit 00e12e7c54598e50e7bef1540db3408f81916de1), and
// examples/plans/hf-ds-zero3-offload.json the ds_config_zero3.json of the Transformers
// DeepSpeed guide (docs/source/en/deepspeed.md, https://huggingface.co/docs/transformers/
// deepspeed, "Notebook" section).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "plan_test_files.hpp"
#include "strategies/plan/deepspeed_auto.hpp"
#include "strategies/plan/plan_emit.hpp"
#include "strategies/plan/plan_import.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The command line's merge: the config, then flags (named by their canonical flag).
PlanInput with_flags(const PlanInput& config, const PlanInput& flags) {
  PlanInput in;
  in.sources() = PlanSources::command_line();
  in.merge(config);
  in.merge(flags);
  return in;
}

}  // namespace

TEST_CASE("strategies::DeepSpeedAuto: the HF ZeRO-2 config's autos stand back for loom's values") {
  const DeepSpeedConfig c =
      read_deepspeed_config(source_path("examples/plans/hf-ds-zero2-offload.json"));
  CHECK(c.stage == 2);
  for (const char* p :
       {"/fp16/enabled", "/bf16/enabled", "/optimizer/params/lr", "/gradient_accumulation_steps",
        "/train_batch_size", "/train_micro_batch_size_per_gpu", "/gradient_clipping",
        "/scheduler/params/warmup_num_steps"})
    CHECK(has(c.autos, p));
  // An "auto" sets nothing: the batch and the precision are loom's.
  CHECK_FALSE(c.plan.has("mbs"));
  CHECK_FALSE(c.plan.has("gbs"));
  CHECK_FALSE(c.plan.has("grad_accum"));
  CHECK_FALSE(c.plan.has("precision"));
  CHECK(c.plan.text("offload_optimizer") == "cpu");
  CHECK(c.plan.flag("offload_pin_memory"));
  PlanInput flags;
  flags.set("mbs", std::int64_t{4});
  flags.set("gbs", std::int64_t{128});
  const PlanInput in = with_flags(c.plan, flags);
  const models::TrainingPlan p = resolve_plan(in, 8);
  CHECK(p.zero == 2);
  CHECK(p.offload_optimizer == models::Offload::CPU);
  CHECK(p.dp_bucket_bytes == doctest::Approx(4e8));  // 2e8 16-bit elements
  const auto notes = deepspeed_auto_notes(c, in, &p, nullptr);
  REQUIRE(notes.size() == 2);
  INFO(notes[0]);
  CHECK(notes[0].find("train_micro_batch_size_per_gpu = 4 (--mbs; HF "
                      "--per_device_train_batch_size)") != std::string::npos);
  CHECK(notes[0].find("gradient_accumulation_steps = 4 (--gbs 128 / (mbs 4 x dp 8)") !=
        std::string::npos);
  CHECK(notes[0].find("train_batch_size = 128 (mbs 4 x gradient_accumulation_steps 4 x dp 8") !=
        std::string::npos);
  CHECK(notes[0].find("fp16.enabled = false (loom's default bf16; HF --fp16)") !=
        std::string::npos);
  CHECK(notes[0].find("bf16.enabled = true (loom's default bf16; HF --bf16)") != std::string::npos);
  CHECK(notes[1].find("optimizer.params.lr (HF --learning_rate)") != std::string::npos);
  CHECK(notes[1].find("gradient_clipping (HF --max_grad_norm)") != std::string::npos);
}

TEST_CASE("strategies::DeepSpeedAuto: the HF ZeRO-3 config's ZeRO sizes come from hidden_size") {
  const DeepSpeedConfig c =
      read_deepspeed_config(source_path("examples/plans/hf-ds-zero3-offload.json"));
  const models::ModelSpec model = models::model_preset("llama3-8b");  // hidden_size 4096
  const PlanInput sizes = deepspeed_model_autos(c, model);
  // trainer_config_finalize: h^2, int(0.9 h^2), 10 h.
  CHECK(sizes.integer("stage3_reduce_bucket_size") == 4096 * 4096);
  CHECK(sizes.integer("stage3_prefetch_bucket_size") == 15099494);
  CHECK(sizes.integer("stage3_param_persistence_threshold") == 40960);
  CHECK(sizes.sources().where("stage3_prefetch_bucket_size") ==
        c.file + "#/zero_optimization/stage3_prefetch_bucket_size");
  PlanInput config = c.plan;
  config.merge(sizes);
  PlanInput flags;
  flags.set("precision", std::string("fp16"));
  const PlanInput in = with_flags(config, flags);
  const models::TrainingPlan p = resolve_plan(in, 8, model);
  CHECK(p.zero == 3);
  CHECK(p.fsdp_impl == models::FsdpImpl::DEEPSPEED);
  CHECK(p.offload_optimizer == models::Offload::CPU);
  CHECK(p.offload_param == models::Offload::CPU);
  CHECK(p.offload_pin_memory);
  CHECK(p.ds_reduce_bucket == 4096 * 4096);
  CHECK(p.ds_prefetch_bucket == 15099494);
  CHECK(p.ds_persistence_threshold == 40960);
  CHECK(p.mbs == 1);
  validate_plan(model, p, 8, in.sources());
  const auto notes = deepspeed_auto_notes(c, in, &p, &model);
  REQUIRE(notes.size() == 2);
  INFO(notes[0]);
  CHECK(notes[0].find("fp16.enabled = true (--precision fp16; HF --fp16)") != std::string::npos);
  CHECK(notes[0].find("zero_optimization.stage3_prefetch_bucket_size = 15099494 (HF int(0.9 x "
                      "hidden_size^2), the model's hidden_size 4096)") != std::string::npos);
  CHECK(notes[0].find("zero_optimization.stage3_param_persistence_threshold = 40960") !=
        std::string::npos);
  CHECK(notes[0].find("train_micro_batch_size_per_gpu = 1 (loom's default; HF") !=
        std::string::npos);
  // Without a plan (a search), the batch is each candidate's.
  const auto search = deepspeed_auto_notes(c, in, nullptr, &model);
  CHECK(search[0].find("train_micro_batch_size_per_gpu = each candidate's") != std::string::npos);
  // ... and the precision is the one given (it was loom's default bf16 whatever was given).
  INFO(search[0]);
  CHECK(search[0].find("fp16.enabled = true (--precision fp16; HF --fp16)") != std::string::npos);
  CHECK(deepspeed_key("/zero_optimization/stage") == "zero_optimization.stage");
}

TEST_CASE("strategies::DeepSpeedAuto: an auto the Trainer does not fill is an error naming it") {
  const std::string sub = test::write_temp_file(
      "sub.json", R"({"zero_optimization": {"stage": 3, "sub_group_size": "auto"}})");
  CHECK_THROWS_WITH_AS(read_deepspeed_config(sub),
                       doctest::Contains((sub + ": /zero_optimization/sub_group_size: \"auto\" is "
                                                "not a value Hugging Face's Trainer fills")
                                             .c_str()),
                       ConfigError);
  CHECK_THROWS_WITH_AS(read_deepspeed_config(sub),
                       doctest::Contains("give zero_optimization."
                                         "sub_group_size a value"),
                       ConfigError);
  // The stage3 sizes are filled under ZeRO-3 only.
  const std::string stage2 = test::write_temp_file(
      "s2.json", R"({"zero_optimization": {"stage": 2, "stage3_prefetch_bucket_size": "auto"}})");
  CHECK_THROWS_WITH_AS(read_deepspeed_config(stage2),
                       doctest::Contains("fills zero_optimization.stage3_prefetch_bucket_size "
                                         "under ZeRO-3 only"),
                       ConfigError);
  // A tiny model's hidden_size^2 is below loom's smallest bucket.
  models::ModelSpec tiny = models::model_preset("llama3-8b");
  tiny.hidden = 128;
  const DeepSpeedConfig c =
      read_deepspeed_config(source_path("examples/plans/hf-ds-zero3-offload.json"));
  CHECK_THROWS_WITH_AS(deepspeed_model_autos(c, tiny),
                       doctest::Contains("\"auto\" resolves to 16384 elements from the model's "
                                         "hidden size 128"),
                       ConfigError);
}

TEST_CASE("strategies::DeepSpeedAuto: offload sections, nvme refused by name") {
  const auto parse = [](const std::string& zero) {
    return parse_deepspeed_config(R"({"zero_optimization": )" + zero + "}", "ds.json");
  };
  CHECK_THROWS_WITH_AS(
      parse(R"({"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}})"),
      doctest::Contains("ds.json: /zero_optimization/offload_param/device: invalid value "
                        "\"nvme\"; allowed: \"cpu\" or \"none\" (ZeRO-Infinity's NVMe swapping "
                        "is not modelled"),
      ConfigError);
  CHECK_THROWS_WITH_AS(
      parse(R"({"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.4}})"),
      doctest::Contains("Twin-Flow"), ConfigError);
  CHECK_THROWS_WITH_AS(parse(R"({"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory":
                                true}, "offload_param": {"device": "cpu"}})"),
                       doctest::Contains("one pin_memory for both"), ConfigError);
  // DeepSpeed reads offload_param under stage 3 only, offload_optimizer from stage 1.
  CHECK_FALSE(
      parse(R"({"stage": 2, "offload_param": {"device": "cpu"}})").plan.has("offload_param"));
  CHECK_FALSE(parse(R"({"stage": 0, "offload_optimizer": {"device": "cpu"}})")
                  .plan.has("offload_optimizer"));
  const DeepSpeedConfig none = parse(R"({"stage": 2, "offload_optimizer": {"device": "none"}})");
  CHECK_FALSE(none.plan.has("offload_optimizer"));
  const DeepSpeedConfig cpu =
      parse(R"({"stage": 1, "offload_optimizer": {"device": "cpu", "pin_memory": false}})");
  CHECK(cpu.plan.text("offload_optimizer") == "cpu");
  CHECK_FALSE(cpu.plan.flag("offload_pin_memory", true));
  CHECK(cpu.plan.sources().where("offload_optimizer") ==
        "ds.json#/zero_optimization/offload_optimizer/device");
  // Flags that turn a section's offload off take its pin_memory along.
  const DeepSpeedConfig pinned =
      parse(R"({"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}})");
  PlanInput none_flag;
  none_flag.set("offload_optimizer", std::string("none"));
  const models::ModelSpec model = models::model_preset("llama3-8b");
  const models::TrainingPlan p = resolve_plan(with_flags(pinned.plan, none_flag), 8, model);
  CHECK(p.offload_optimizer == models::Offload::NONE);
  CHECK_FALSE(p.offload_pin_memory);
  validate_plan(model, p, 8);
}

TEST_CASE("strategies::DeepSpeedAuto: the offload rules DeepSpeed keeps") {
  const models::ModelSpec model = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.dp = 8;
  p.zero = 2;
  p.offload_optimizer = models::Offload::CPU;
  validate_plan(model, p, 8);
  models::TrainingPlan bad = p;
  bad.zero = 0;
  CHECK_THROWS_WITH_AS(validate_plan(model, bad, 8),
                       doctest::Contains("offload_optimizer cpu has no effect with zero 0"),
                       PlanError);
  bad = p;
  bad.offload_param = models::Offload::CPU;
  CHECK_THROWS_WITH_AS(validate_plan(model, bad, 8),
                       doctest::Contains("offload_param cpu needs zero 3"), PlanError);
  bad = p;
  bad.zero = 3;  // FSDP2's design
  CHECK_THROWS_WITH_AS(validate_plan(model, bad, 8), doctest::Contains("use fsdp_impl deepspeed"),
                       PlanError);
  bad = p;
  bad.framework = models::Framework::MEGATRON;
  CHECK_THROWS_WITH_AS(validate_plan(model, bad, 8), doctest::Contains("DeepSpeed's offload"),
                       PlanError);
  bad = p;
  bad.optimizer = models::Optimizer::SGD;
  CHECK_THROWS_WITH_AS(validate_plan(model, bad, 8), doctest::Contains("DeepSpeedCPUAdam"),
                       PlanError);
  bad = models::TrainingPlan{};
  bad.dp = 8;
  bad.offload_pin_memory = true;
  CHECK_THROWS_WITH_AS(validate_plan(model, bad, 8),
                       doctest::Contains("offload_pin_memory on has no effect"), PlanError);
  // ZeRO-Offload on one GPU (ZeRO-2 over a data-parallel group of one) is a plan.
  PlanInput one;
  one.set("zero", std::int64_t{2});
  one.set("offload_optimizer", std::string("cpu"));
  const models::TrainingPlan single = resolve_plan(one, 1, model);
  CHECK(single.zero == 2);
  validate_plan(model, single, 1);
}

TEST_CASE("strategies::DeepSpeedAuto: --emit deepspeed writes the offload, read back the same") {
  const models::ModelSpec model = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.dp = 8;
  p.zero = 3;
  p.fsdp_impl = models::FsdpImpl::DEEPSPEED;
  p.offload_optimizer = models::Offload::CPU;
  p.offload_param = models::Offload::CPU;
  p.offload_pin_memory = true;
  p.ds_persistence_threshold = 40960;
  const std::string text = emit_deepspeed(model, p);
  const std::string json = text.substr(0, text.find("\n#") + 1);
  const models::TrainingPlan back = resolve_plan(parse_deepspeed_json(json, "ds.json"), 8, model);
  CHECK(back.offload_optimizer == models::Offload::CPU);
  CHECK(back.offload_param == models::Offload::CPU);
  CHECK(back.offload_pin_memory);
  CHECK(back.ds_persistence_threshold == 40960);
  CHECK(emit_megatron(model, p).find("DeepSpeed's optimizer and parameter offload") !=
        std::string::npos);
}
