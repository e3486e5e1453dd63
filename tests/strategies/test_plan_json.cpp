// The loom plan JSON: what the writer prints, the reader accepts and resolves to the same plan;
// values read from a file carry FILE#/pointer into the messages of the rules they break.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "plan_test_files.hpp"
#include "strategies/plan/plan_json.hpp"
#include "strategies/plan/plan_resolve.hpp"
#include "strategies/plan/plan_rules.hpp"

using namespace loom;
using namespace loom::strategies;

namespace {

models::TrainingPlan busy_plan() {
  models::TrainingPlan p;
  p.tp = 2;
  p.pp = 4;
  p.dp = 2;
  p.cp = 2;
  p.vpp = 2;
  p.mbs = 2;
  p.gbs = 64;
  p.seq = 4096;
  p.zero = 1;
  p.sp = true;
  p.recompute = models::Recompute::SELECTIVE;
  p.schedule = models::Schedule::INTERLEAVED;
  p.precision = models::Precision::FP8;
  p.optimizer = models::Optimizer::SGD_MOMENTUM;
  p.overlap_grad_reduce = true;
  p.flash_attention = false;
  p.dp_bucket_bytes = 12.5e6;
  p.cuda_context_bytes = 768.0 * 1024 * 1024;
  p.fragmentation_fraction = 0.075;
  p.pipeline_split = {4, 4, 4, 4, 4, 4, 4, 4};
  return p;
}

}  // namespace

TEST_CASE("strategies::PlanJson: a written plan reads back to the same plan") {
  const models::TrainingPlan p = busy_plan();
  const std::string path = test::write_temp_file("roundtrip.json", render_plan_config(p));
  const models::TrainingPlan q = resolve_plan(read_plan_json(path), 32, 32);
  CHECK(q.tp == 2);
  CHECK(q.pp == 4);
  CHECK(q.dp == 2);
  CHECK(q.cp == 2);
  CHECK(q.vpp == 2);
  CHECK(q.gbs == 64);
  CHECK(q.sp);
  CHECK(q.precision == models::Precision::FP8);
  CHECK(q.optimizer == models::Optimizer::SGD_MOMENTUM);
  CHECK_FALSE(q.flash_attention);
  CHECK(q.dp_bucket_bytes == 12.5e6);
  CHECK(q.cuda_context_bytes == 768.0 * 1024 * 1024);
  CHECK(q.fragmentation_fraction == doctest::Approx(0.075));
  CHECK(q.pipeline_split == p.pipeline_split);
  CHECK(plan_to_json(q).dump() == plan_to_json(p).dump());
}

TEST_CASE("strategies::PlanJson: a bare plan object reads too; derived keys must agree") {
  const std::string path = test::write_temp_file("bare.json", R"({"tp": 2, "gbs": 16})");
  const models::TrainingPlan p = resolve_plan(read_plan_json(path), 8);
  CHECK(p.dp == 4);
  CHECK(p.micro_batches() == 4);
  const std::string wrong =
      test::write_temp_file("wrong.json", R"({"plan": {"tp": 2, "gbs": 16, "micro_batches": 3}})");
  CHECK_THROWS_WITH_AS(
      resolve_plan(read_plan_json(wrong), 8),
      doctest::Contains((wrong + "#/plan/micro_batches: 3 but the plan resolves to 4").c_str()),
      PlanError);
}

TEST_CASE("strategies::PlanJson: unknown keys and wrong types are file errors") {
  const std::string typo = test::write_temp_file("typo.json", R"({"tp": 2, "schedul": "1f1b"})");
  CHECK_THROWS_WITH_AS(read_plan_json(typo), doctest::Contains("did you mean 'schedule'"),
                       ConfigError);
  const std::string name = test::write_temp_file("name.json", R"({"recompute": "most"})");
  CHECK_THROWS_AS(read_plan_json(name), ConfigError);
  CHECK_THROWS_AS(read_plan_json("/nonexistent/plan.json"), ConfigError);
}

TEST_CASE("strategies::PlanJson: a rule broken by a file value names the file and pointer") {
  const std::string path = test::write_temp_file("tp3.json", R"({"tp": 3})");
  const PlanInput input = read_plan_json(path);
  const models::TrainingPlan p = resolve_plan(input, std::nullopt);
  try {
    validate_plan(models::model_preset("llama3-8b"), p, std::nullopt, input.sources());
    FAIL("tp 3 must not divide Llama-3-8B's 32 heads");
  } catch (const PlanError& e) {
    CHECK(e.key() == "tp");
    CHECK(e.file() == path);
    CHECK(e.pointer() == "/tp");
    CHECK(std::string(e.what()) ==
          path + "#/tp: 3 does not divide model.heads 32; pick a tp that divides 32");
  }
}

TEST_CASE("strategies::PlanJson: sizes beyond int64 are written as numbers, not converted") {
  // Found by fuzz_plan_json: "160EB" was converted to int64 (undefined behaviour).
  const PlanInput input = parse_plan_json(R"({"dp": 8, "dp_bucket_size": "160EB"})", "big.json");
  const models::TrainingPlan p = resolve_plan(input, std::nullopt);
  CHECK(p.dp_bucket_bytes == doctest::Approx(1.6e20));
  CHECK(bytes_text(1.6e20) == "1.6e+20B");
  CHECK(bytes_text(160e6) == "160000000B");
}
