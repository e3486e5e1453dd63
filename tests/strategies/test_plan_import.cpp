// Plan inputs: loom plan JSON, Megatron-LM flags, DeepSpeed JSON, and their precedence.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include "cli/plan_flags.hpp"
#include "cli/plan_import.hpp"
#include "common/error.hpp"

using namespace loom;
using namespace loom::cli;

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = std::string("/tmp/loom_test_plan_") + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("strategies::PlanImport: the example plan file resolves") {
  PlanFlags f;
  f.plan_file = std::string(LOOM_SOURCE_DIR) + "/examples/plans/gpt3-175b-1024.json";
  auto p = resolve_plan(f, 1024);
  CHECK(p.tp == 8);
  CHECK(p.pp == 8);
  CHECK(p.dp == 16);
  CHECK(p.micro_batches() == 96);
  CHECK(p.recompute == models::Recompute::FULL);
  CHECK(p.precision == models::Precision::FP16);
  CHECK(p.dp_bucket_bytes == doctest::Approx(160e6));
}

TEST_CASE("strategies::PlanImport: explicit flags override the file") {
  PlanFlags f;
  f.plan_file = std::string(LOOM_SOURCE_DIR) + "/examples/plans/gpt3-175b-1024.json";
  f.pp = 4;
  f.recompute = "selective";
  auto p = resolve_plan(f, 1024);
  CHECK(p.pp == 4);
  CHECK(p.dp == 32);
  CHECK(p.recompute == models::Recompute::SELECTIVE);
}

TEST_CASE("strategies::PlanImport: unknown plan key is an error with did-you-mean") {
  PlanFlags f;
  f.plan_file = write_temp("bad.json", R"({"tp": 2, "schedul": "1f1b"})");
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8), doctest::Contains("did you mean 'schedule'"),
                       ConfigError);
  f.plan_file = write_temp("badval.json", R"({"recompute": "most"})");
  CHECK_THROWS_AS(resolve_plan(f, 8), ConfigError);
  f.plan_file = "/nonexistent/plan.json";
  CHECK_THROWS_AS(resolve_plan(f, 8), ConfigError);
}

TEST_CASE("strategies::PlanImport: Megatron-LM flags translate") {
  auto f = import_megatron_args(
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
      "--num-layers-per-virtual-pipeline-stage 5 --micro-batch-size 1 --global-batch-size 512 "
      "--seq-length 4096 --sequence-parallel --recompute-activations --use-distributed-optimizer "
      "--bf16 --overlap-grad-reduce --lr 3e-4 --train-iters=100");
  PlanFlags g;
  g.megatron_args =
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
      "--num-layers-per-virtual-pipeline-stage 5 --micro-batch-size 1 "
      "--global-batch-size 512 --seq-length 4096 --sequence-parallel "
      "--recompute-activations --use-distributed-optimizer --bf16";
  auto p = resolve_plan(g, 256, 80);
  CHECK(f.tp == 8);
  CHECK(f.overlap_grad_reduce);
  CHECK(p.tp == 8);
  CHECK(p.pp == 4);
  CHECK(p.vpp == 4);  // 80 layers / (4 stages x 5 layers per chunk)
  CHECK(p.schedule == models::Schedule::INTERLEAVED);
  CHECK(p.dp == 8);
  CHECK(p.seq == 4096);
  CHECK(p.sp);
  CHECK(p.recompute == models::Recompute::SELECTIVE);
  CHECK(p.zero == 1);
  CHECK(p.micro_batches() == 64);
}

TEST_CASE("strategies::PlanImport: unknown Megatron flag is an error with did-you-mean") {
  CHECK_THROWS_WITH_AS(import_megatron_args("--tensor-model-paralel-size 2"),
                       doctest::Contains("did you mean '--tensor-model-parallel-size'"),
                       ValidationError);
  CHECK_THROWS_WITH_AS(import_megatron_args("--num-layers 24"), doctest::Contains("--model"),
                       ValidationError);
  CHECK_THROWS_AS(import_megatron_args("--micro-batch-size"), ValidationError);
  CHECK_THROWS_AS(import_megatron_args("--micro-batch-size two"), ValidationError);
}

TEST_CASE("strategies::PlanImport: DeepSpeed JSON translates") {
  PlanFlags f;
  f.deepspeed_file = std::string(LOOM_SOURCE_DIR) + "/examples/plans/deepspeed-zero2.json";
  auto p = resolve_plan(f, 16);
  CHECK(p.mbs == 2);
  CHECK(p.dp == 16);
  CHECK(p.global_batch() == 2 * 16 * 4);
  CHECK(p.zero == 2);
  CHECK(p.precision == models::Precision::BF16);
  CHECK(p.recompute == models::Recompute::FULL);
  CHECK(p.overlap_grad_reduce);
  CHECK(p.dp_bucket_bytes == doctest::Approx(100e6));
}

TEST_CASE("strategies::PlanImport: DeepSpeed batch arithmetic must agree") {
  PlanFlags f;
  f.deepspeed_file = write_temp(
      "ds.json",
      R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
  CHECK_THROWS_WITH_AS(resolve_plan(f, 16), doctest::Contains("contradicts"), ValidationError);
  f.deepspeed_file = write_temp("ds2.json", R"({"zero_optimization": {"stag": 2}})");
  CHECK_THROWS_WITH_AS(resolve_plan(f, 16), doctest::Contains("did you mean 'stage'"), ConfigError);
}

TEST_CASE("strategies::PlanImport: validation rules name the flag") {
  PlanFlags f;
  f.tp = 3;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8), doctest::Contains("does not divide"), ValidationError);
  f = {};
  f.gbs = 10;
  f.mbs = 4;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 2), doctest::Contains("--gbs 10"), ValidationError);
  f = {};
  f.dp = 3;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8), doctest::Contains("GPUs"), ValidationError);
  f = {};
  f.pipeline_split = "10,10";
  f.pp = 2;
  CHECK_THROWS_WITH_AS(resolve_plan(f, 8, 24), doctest::Contains("sums to 20"), ValidationError);
}

TEST_CASE("strategies::PlanImport: print-config shows every resolved field") {
  PlanFlags f;
  f.tp = 2;
  auto text = render_plan_config(resolve_plan(f, 8));
  for (const char* key : {"\"tp\": 2", "\"dp\": 4", "\"schedule\": \"1f1b\"", "\"recompute\"",
                          "\"dp_bucket_size\": \"160000000B\"", "\"flash_attention\": true"})
    CHECK(text.find(key) != std::string::npos);
}
