// The plan rules (strategies/plan/plan_rules.hpp): one check per rule, each naming the plan
// field; the command line's sources spell the field as its flag.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "strategies/plan/plan_rules.hpp"

using namespace loom;
using namespace loom::strategies;
using models::ModelSpec;
using models::TrainingPlan;

TEST_CASE("strategies::PlanRules: one rule per check, named by plan field") {
  const ModelSpec m = models::model_preset("llama3-8b");
  TrainingPlan p;
  p.tp = 3;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       "tp: 3 does not divide model.heads 32; pick a tp that divides 32",
                       PlanError);
  p.tp = 16;  // divides 32 heads but not the 8 KV heads
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt), doctest::Contains("model.kv_heads 8"),
                       PlanError);
  p.tp = 1;
  p.pp = 5;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       doctest::Contains("do not divide model.layers 32"), PlanError);
  p.pipeline_split = {6, 6, 6, 6, 6};
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt), doctest::Contains("sums to 30 layers"),
                       PlanError);
  p.pipeline_split = {8, 6, 6, 6, 6};
  CHECK_NOTHROW(validate_plan(m, p, std::nullopt));
  p = TrainingPlan{};
  p.ep = 2;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       doctest::Contains("needs a mixture-of-experts"), PlanError);
  const ModelSpec moe = models::model_preset("mixtral-8x7b");
  p.dp = 3;
  p.ep = 3;
  CHECK_THROWS_WITH_AS(validate_plan(moe, p, std::nullopt),
                       doctest::Contains("ep: 3 does not divide model.moe.experts 8"), PlanError);
  p = TrainingPlan{};
  p.cp = 3;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       doctest::Contains("does not divide seq 2048"), PlanError);
  ModelSpec bad = m;
  bad.hidden = 0;
  CHECK_THROWS_WITH_AS(validate_plan(bad, TrainingPlan{}, std::nullopt),
                       doctest::Contains("model.hidden"), ValidationError);
}

TEST_CASE("strategies::PlanRules: the command line's sources name the flag") {
  const ModelSpec m = models::model_preset("llama3-8b");
  TrainingPlan p;
  p.tp = 3;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt, PlanSources::command_line()),
                       "--tp: 3 does not divide model.heads 32; pick a --tp that divides 32",
                       PlanError);
  p = TrainingPlan{};
  p.precision = models::Precision::FP32;
  p.grad_dtype = models::GradDtype::BF16;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("--grad-dtype: bf16 gradients need a 16-bit --precision"),
                       PlanError);
}

TEST_CASE("strategies::PlanRules: the interleaved schedule needs micro-batches in groups of pp") {
  // Megatron-LM's rule (schedules.py asserts num_microbatches % pipeline_parallel_size == 0).
  const ModelSpec m = models::model_preset("llama3-8b");
  TrainingPlan p;
  p.pp = 4;
  p.vpp = 2;
  p.schedule = models::Schedule::INTERLEAVED;
  p.gbs = 6;  // 6 micro-batches of 1 on dp 1
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       "the interleaved schedule needs the number of micro-batches (6) to be a "
                       "multiple of pp 4 (Megatron-LM's rule); change gbs",
                       PlanError);
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt, PlanSources::command_line()),
                       doctest::Contains("multiple of --pp 4 (Megatron-LM's rule); change --gbs"),
                       PlanError);
  p.gbs = 8;
  CHECK_NOTHROW(validate_plan(m, p, std::nullopt));
}

TEST_CASE("strategies::PlanRules: the GPU count must match the cluster") {
  const ModelSpec m = models::model_preset("llama3-8b");
  TrainingPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 3;  // 2 x 2 x 3 = 12 GPUs
  CHECK_NOTHROW(validate_plan(m, p, std::nullopt));
  CHECK_NOTHROW(validate_plan(m, p, 12));
  try {
    validate_plan(m, p, 16);
    FAIL("12 GPUs of plan on a 16-GPU cluster");
  } catch (const PlanError& e) {
    CHECK(e.key() == "dp");
    CHECK(std::string(e.what()) ==
          "tp 2 x pp 2 x dp 3 x cp 1 = 12 GPUs, but the cluster has 16; "
          "change the sizes or the cluster so they match");
  }
}

TEST_CASE("strategies::PlanRules: nvfp4 needs a GPU with FP4 tensor cores") {
  TrainingPlan p;
  p.precision = models::Precision::NVFP4;
  CHECK_THROWS_WITH_AS(check_precision_on_gpu(p, topo::find_gpu("h100")),
                       doctest::Contains("precision: nvfp4 needs FP4 tensor cores"), PlanError);
  CHECK_NOTHROW(check_precision_on_gpu(p, topo::find_gpu("b200")));
  p.precision = models::Precision::FP8;
  CHECK_NOTHROW(check_precision_on_gpu(p, topo::find_gpu("h100")));
}

TEST_CASE("strategies::PlanRules: mxfp8 needs Blackwell; --scale-swizzle needs block scales") {
  TrainingPlan p;
  p.precision = models::Precision::FP8;
  p.fp8_recipe = Fp8Recipe::MXFP8;
  CHECK_THROWS_WITH_AS(check_precision_on_gpu(p, topo::find_gpu("h100")),
                       doctest::Contains("mxfp8: h100-sxm (hopper) has no tensor cores"),
                       PlanError);
  CHECK_NOTHROW(check_precision_on_gpu(p, topo::find_gpu("b200")));
  // 128-element block scaling needs Hopper or later (Ada runs only per-tensor recipes).
  p.fp8_recipe = Fp8Recipe::BLOCKWISE;
  CHECK_NOTHROW(check_precision_on_gpu(p, topo::find_gpu("h100")));
  CHECK_THROWS_WITH_AS(check_precision_on_gpu(p, topo::find_gpu("l40s")),
                       doctest::Contains("128-element block scales (Blackwell or Hopper does); "
                                         "use tensorwise or delayed"),
                       PlanError);
  p.fp8_recipe = Fp8Recipe::TENSORWISE;
  CHECK_NOTHROW(check_precision_on_gpu(p, topo::find_gpu("l40s")));
}

TEST_CASE("strategies::PlanRules: the batch rule and the interleaved schedule's pipeline") {
  const ModelSpec model = models::model_preset("llama3-8b");
  models::TrainingPlan p;
  p.dp = 4;
  p.gbs = 6;  // 6 sequences over 4 data-parallel ranks
  CHECK_THROWS_WITH_AS(validate_plan(model, p, std::nullopt),
                       "gbs 6 is not a multiple of mbs 1 x dp 4 = 4; make the global batch a "
                       "multiple of it",
                       PlanError);
  p.gbs = 8;
  p.schedule = models::Schedule::INTERLEAVED;
  p.vpp = 2;
  // Megatron-LM: virtual pipeline stages need a pipeline.
  CHECK_THROWS_WITH_AS(validate_plan(model, p, std::nullopt),
                       doctest::Contains("pp: the interleaved schedule needs pp 2 or more"),
                       PlanError);
}

// Megatron-core's MambaMixer splits heads and B/C groups over TP and asserts both divide;
// context parallelism over Mamba layers (MambaContextParallel) is not modelled.
TEST_CASE("strategies::PlanRules: a hybrid Mamba model's TP and CP rules") {
  ModelSpec m = models::model_preset("nemotron-3-nano");
  m.kv_heads = 32;  // so that the attention heads do not refuse tp 16 first
  TrainingPlan p;
  p.tp = 16;  // divides 64 Mamba heads, not 8 groups
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       doctest::Contains("does not divide model.mamba.groups 8"), PlanError);
  p.tp = 8;
  CHECK_NOTHROW(validate_plan(m, p, std::nullopt));
  p.tp = 1;
  p.cp = 2;
  CHECK_THROWS_WITH_AS(validate_plan(m, p, std::nullopt),
                       doctest::Contains("context parallelism over Mamba-2 layers"), PlanError);
  // A pattern without attention needs no head split: tp 4 with 2 KV heads is fine there.
  ModelSpec pure = models::model_preset("nemotron-3-nano");
  pure.pattern = std::string(pure.pattern.size(), 'M');
  pure.moe = {};
  TrainingPlan q;
  q.tp = 4;
  CHECK_NOTHROW(validate_plan(pure, q, std::nullopt));
}
