// The search space: candidate lists, enumeration counts checked by hand on a tiny case, fixed
// flags pinning a dimension, the balanced pipeline split, the rules it leaves to validate_plan.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "models/model_loader.hpp"
#include "strategies/search/search.hpp"
#include "tests/source_path.hpp"
#include "topologies/cluster_presets.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::strategies;

namespace {

// Four layers, four heads: tp and pp over {1, 2, 4} all divide the model.
models::ModelSpec tiny(int heads = 4) {
  return models::parse_model_json(
      fmt::format(R"({{"name": "tiny", "layers": 4, "hidden": 256, "heads": {}, "ffn": 1024,
                      "vocab": 1000, "seq": 256}})",
                  heads),
      "test");
}

// One node of the 4-GPU example cluster.
topo::Cluster four_gpus() {
  return topo::load_cluster(topo::ClusterRequest{
      source_path("examples/clusters/custom_4gpu_roce.json"), 1, std::nullopt});
}

// gbs and seq fixed, and cp, mbs, sp and the schedule pinned: tp, pp, zero, recompute and the
// three overlaps are free.
PlanInput tiny_input(std::int64_t gbs = 4) {
  PlanInput in;
  in.sources() = PlanSources::command_line();
  in.set("gbs", gbs);
  in.set("seq", std::int64_t{256});
  in.set("cp", std::int64_t{1});
  in.set("mbs", std::int64_t{1});
  in.set("sp", false);
  in.set("schedule", std::string("1f1b"));
  return in;
}

SearchOptions one_thread() {
  SearchOptions o;
  o.top = 3;
  o.threads = 1;
  return o;
}

}  // namespace

TEST_CASE("strategies::SearchSpace: enumeration counts on a tiny case, by hand") {
  const auto model = tiny();
  const SearchSpace space(model, tiny_input(), 4);
  // tp and pp: the divisors of 4 GPUs {1, 2, 4} (pp at most the 4 layers); the rest pinned.
  CHECK(space.shapes() == 9);
  // zero 4 x recompute 3 x overlap-grad-reduce 2 x overlap-param-gather 2 x tp-comm-overlap 2.
  CHECK(space.switch_combinations() == 96);
  // Of the 9 (tp, pp), 6 divide 4 GPUs: (1,1) dp 4, (1,2) dp 2, (1,4) dp 1, (2,1) dp 2,
  // (2,2) dp 1, (4,1) dp 1. Switches that cannot act are not enumerated: with dp > 1,
  // zero {0..3} x ogr {off,on} with opg only under ZeRO 1/2 = (1 + 2 + 2 + 1) x 2 = 12; with
  // dp 1 just 1; x 3 recompute; x 2 tp-comm-overlap when tp > 1.
  CHECK(space.switch_count(1, 4) == 36);
  CHECK(space.switch_count(1, 1) == 3);
  CHECK(space.switch_count(2, 2) == 72);
  CHECK(space.switch_count(4, 1) == 6);
  int plans = 0;
  for (std::int64_t i = 0; i < space.shapes(); ++i)
    if (space.shape(i)) ++plans;
  CHECK(plans == 6);
  const auto tally = fast_tier(model, space, four_gpus(), one_thread());
  CHECK(tally.shapes == 6);
  CHECK(tally.enumerated == 36 + 36 + 3 + 72 + 6 + 6);
  CHECK(tally.invalid == 0);
  CHECK(tally.out_of_memory == 0);  // a 4-layer model fits anywhere
  CHECK(tally.fitting == 159);
}

TEST_CASE("strategies::SearchSpace: the EP all-to-all overlap is a free switch of MoE models") {
  // The tiny model with 4 experts; tp 1, zero 0 and the other overlaps fixed, gbs 8: pp
  // {1, 2, 4} x ep {1, 2, 4}, and recompute 3 x overlap-moe-expert-parallel-comm 2 switches.
  const auto model = models::parse_model_json(
      R"({"name": "tiny-moe", "layers": 4, "hidden": 256, "heads": 4, "ffn": 1024,
          "vocab": 1000, "seq": 256, "moe": {"experts": 4, "top_k": 2, "expert_ffn": 512}})",
      "test");
  PlanInput in = tiny_input(8);
  in.set("tp", std::int64_t{1});
  in.set("zero", std::int64_t{0});
  in.set("overlap_grad_reduce", false);
  in.set("overlap_param_gather", false);
  in.set("tp_comm_overlap", false);
  const SearchSpace space(model, in, 4);
  CHECK(space.switch_combinations() == 6);
  CHECK(space.describe().find("overlap-moe-expert-parallel-comm {off,on}") != std::string::npos);
  // EP divides dp: pp 1 (dp 4) takes ep 1, 2, 4; pp 2 (dp 2) ep 1, 2; pp 4 (dp 1) ep 1. The
  // other three shapes are invalid, 6 candidates each. The overlap's "on" acts only with
  // ep > 1, pp 1 (1f1b is pinned: no virtual stages) and no full recompute: in (pp 1, ep 2)
  // and (pp 1, ep 4) with recompute none or selective; its other 4 x 3 + 2 x 1 "on"
  // candidates are invalid by Megatron's rules.
  const auto tally = fast_tier(model, space, four_gpus(), one_thread());
  CHECK(tally.enumerated == 9 * 6);
  CHECK(tally.invalid == 18 + 4 * 3 + 2);
  CHECK(tally.invalid_by_field.at("ep").count == 18);
  CHECK(tally.invalid_by_field.at("overlap_moe_expert_parallel_comm").count == 14);
  CHECK(tally.invalid_by_field.at("overlap_moe_expert_parallel_comm")
            .example.find("has no effect with --ep 1") != std::string::npos);
  CHECK(tally.fitting + tally.out_of_memory == 22);
  int overlapped = 0;
  for (const RankedId& r : tally.best) {
    const auto plan = space.candidate(r.id);
    if (plan.overlap_moe_expert_parallel_comm) {
      CHECK(plan.ep > 1);
      CHECK(plan.pp == 1);
      CHECK(plan.recompute != models::Recompute::FULL);
      ++overlapped;
    }
  }
  CHECK(overlapped > 0);  // the ranking holds plans with the overlap on
  // A fixed ep 1 rules the switch out everywhere: it is not in the space.
  in.set("ep", std::int64_t{1});
  CHECK(SearchSpace(model, in, 4).switch_combinations() == 3);
  CHECK(SearchSpace(model, in, 4).describe().find("overlap-moe") == std::string::npos);
  // A dense model has no such switch.
  CHECK(SearchSpace(tiny(), tiny_input(), 4).describe().find("overlap-moe") == std::string::npos);
}

TEST_CASE("strategies::SearchSpace: invalid candidates are counted by the rule they break") {
  // Two heads: tp 4 does not divide them (6 candidates of shape tp 4 pp 1). gbs 2: dp 4 with
  // mbs 1 is not a whole number of micro-batches (36 candidates of shape tp 1 pp 1).
  const auto model = tiny(2);
  const SearchSpace space(model, tiny_input(2), 4);
  const auto tally = fast_tier(model, space, four_gpus(), one_thread());
  CHECK(tally.enumerated == 159);
  CHECK(tally.invalid == 42);
  REQUIRE(tally.invalid_by_field.size() == 2);
  CHECK(tally.invalid_by_field.at("tp").count == 6);
  CHECK(tally.invalid_by_field.at("tp").example ==
        "--tp: 4 does not divide model.heads 2; pick a --tp that divides 2");
  CHECK(tally.invalid_by_field.at("gbs").count == 36);
  CHECK(tally.invalid_by_field.at("gbs").example ==
        "--gbs 2 is not a multiple of --mbs 1 x --dp 4 = 4; make the global batch a multiple of "
        "it");
  CHECK(tally.fitting == 159 - 42);
}

TEST_CASE("strategies::SearchSpace: a fixed flag pins its dimension") {
  const auto model = tiny();
  PlanInput in = tiny_input();
  in.set("tp", std::int64_t{2});
  in.set("zero", std::int64_t{1});
  const SearchSpace space(model, in, 4);
  CHECK(space.describe().find("tp 2 (fixed)") != std::string::npos);
  CHECK(space.describe().find("zero 1 (fixed)") != std::string::npos);
  const auto tally = fast_tier(model, space, four_gpus(), one_thread());
  // tp 2 with pp 1 (dp 2) or pp 2 (dp 1); zero 1 pinned (kept even with dp 1): with dp 2,
  // ogr x opg 4, x 3 recompute x 2 tpo = 24; with dp 1, 3 x 2 = 6.
  CHECK(tally.enumerated == 30);
  for (const RankedId& r : tally.best) {
    const auto plan = space.candidate(r.id);
    CHECK(plan.tp == 2);
    CHECK(plan.zero == 1);
  }
}

TEST_CASE("strategies::SearchSpace: the global batch must be fixed") {
  PlanInput in;
  in.sources() = PlanSources::command_line();
  CHECK_THROWS_WITH_AS(SearchSpace(tiny(), in, 4),
                       doctest::Contains("--gbs: a search needs the global batch fixed"),
                       PlanError);
}

TEST_CASE("strategies::SearchSpace: pp x vpp not dividing the layers gets the balanced split") {
  // 6 layers on 4 stages: 1 + 2 + 2 + 1, the fewer on the first and last stage (embedding,
  // loss); 10 layers on 4: 2 + 3 + 3 + 2.
  const auto six = models::parse_model_json(
      R"({"name": "six", "layers": 6, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000})",
      "test");
  PlanInput in = tiny_input(8);
  const SearchSpace space(six, in, 8);
  PlanShape shape;
  shape.pp = 4;
  CHECK(space.shape_input(shape).text("pipeline_split") == "1,2,2,1");
  shape.pp = 2;
  CHECK_FALSE(space.shape_input(shape).has("pipeline_split"));
  const auto plan = space.resolve(
      PlanShape{1, 4, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  CHECK(plan.pipeline_split == std::vector<int>{1, 2, 2, 1});
}

TEST_CASE("strategies::SearchSpace: the fingerprint names the model, cluster and fixed flags") {
  // Shards of different searches of the same size must not merge: the model, the cluster and
  // every fixed plan value (e.g. the precision) are part of the fingerprint.
  const auto model = tiny();
  const SearchSpace a(model, tiny_input(), 4, "cluster-a");
  CHECK(a.fingerprint() == SearchSpace(model, tiny_input(), 4, "cluster-a").fingerprint());
  CHECK(a.fingerprint() != SearchSpace(model, tiny_input(), 4, "cluster-b").fingerprint());
  PlanInput fp8 = tiny_input();
  fp8.set("precision", std::string("fp8"));
  CHECK(a.fingerprint() != SearchSpace(model, fp8, 4, "cluster-a").fingerprint());
  models::ModelSpec renamed = model;
  renamed.name = "tiny-2";
  CHECK(a.fingerprint() != SearchSpace(renamed, tiny_input(), 4, "cluster-a").fingerprint());
}

TEST_CASE(
    "strategies::SearchSpace: under --framework megatron no candidate breaks Megatron's rules") {
  // Every candidate of a Megatron search with sp, zero, the overlaps, pp and the schedule all
  // free: each one the space hands out (candidate() does not throw) keeps Megatron-LM's
  // validate_args asserts (TP overlap needs SP; param-gather overlap needs grad-reduce
  // overlap; ZeRO-3 as torch FSDP2 needs pp 1), and each refused one is refused for one of
  // them or an ordinary plan rule. Megatron refuses some of this space, so both kinds occur.
  const models::ModelSpec model = tiny();
  PlanInput in;
  in.sources() = PlanSources::command_line();
  in.set("gbs", std::int64_t{8});
  in.set("seq", std::int64_t{256});
  in.set("cp", std::int64_t{1});
  in.set("framework", std::string("megatron"));
  const SearchSpace space{model, in, 8};
  int accepted = 0, refused_by_megatron = 0;
  for (std::int64_t id = 0; id < space.shapes() * space.switch_combinations(); ++id) {
    try {
      const models::TrainingPlan p = space.candidate(id);
      ++accepted;
      CAPTURE(id);
      CHECK_FALSE((p.tp_comm_overlap && !p.sp));
      CHECK_FALSE((p.overlap_param_gather && !p.overlap_grad_reduce));
      CHECK_FALSE((p.zero >= 3 && (p.pp > 1 || p.ep > 1)));
    } catch (const PlanError& e) {
      const std::string key = e.key();
      refused_by_megatron += key == "tp_comm_overlap" || key == "overlap_param_gather";
    } catch (const ValidationError& e) {
      const std::string field = e.field();
      refused_by_megatron +=
          field == "tp_comm_overlap" || field == "overlap_param_gather" || field == "zero";
    }
  }
  CHECK(accepted > 0);
  CHECK(refused_by_megatron > 0);
}
