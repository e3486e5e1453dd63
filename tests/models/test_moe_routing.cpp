// Where a token's routed copies go (models/moe_routing.hpp): the expected number of expert
// blocks (GPUs, nodes) a token's top-k reaches, by hand, and the group-limited routing fields
// of the model inputs. The hand figures were also checked against a 200,000-token Monte
// Carlo of the same routing (uniform top-k, groups picked uniformly), within 0.05 %.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "models/moe_routing.hpp"

using namespace loom;
using namespace loom::models;

namespace {

MoeSpec moe(int experts, int top_k, int groups = 0, int group_top_k = 0) {
  MoeSpec m;
  m.experts = experts;
  m.top_k = top_k;
  m.expert_ffn = 1;
  m.routing_groups = groups;
  m.routing_group_top_k = group_top_k;
  return m;
}

// C(a, k) / C(b, k) as a product, for the hand figures.
double ratio(double a, double b, int k) {
  double r = 1;
  for (int i = 0; i < k; ++i) r *= (a - i) / (b - i);
  return r;
}

}  // namespace

TEST_CASE("models::MoeRouting: distinct GPUs and nodes a token's top-k reaches") {
  // Qwen3-30B-A3B (128 experts, top 8). One block: always reached; 128 blocks of one expert:
  // all 8 copies land apart.
  const MoeSpec q = moe(128, 8);
  CHECK(expected_blocks_reached(q, 1) == doctest::Approx(1.0));
  CHECK(expected_blocks_reached(q, 128) == doctest::Approx(8.0));
  // ep 16 (8 experts per GPU): 16 (1 - C(120, 8) / C(128, 8)) = 6.5965 GPUs, not 8 copies;
  // over 2 nodes (64 experts each): 2 (1 - C(64, 8) / C(128, 8)) = 1.9938 nodes, not 4 + 4.
  CHECK(expected_blocks_reached(q, 16) == doctest::Approx(16 * (1 - ratio(120, 128, 8))));
  CHECK(expected_blocks_reached(q, 16) == doctest::Approx(6.5965).epsilon(1e-4));
  CHECK(expected_blocks_reached(q, 2) == doctest::Approx(1.9938).epsilon(1e-4));
  // DeepSeek-V3 (256 experts, top 8 from 4 of 8 groups): 8 nodes, one group each, are
  // reached when their group is picked (1/2) and then hit: 8 x 1/2 x (1 - C(96, 8) /
  // C(128, 8)) = 3.629 — at most 4 nodes, as the report's node-limited routing says.
  const MoeSpec d = moe(256, 8, 8, 4);
  CHECK(expected_blocks_reached(d, 8) == doctest::Approx(4 * (1 - ratio(96, 128, 8))));
  CHECK(expected_blocks_reached(d, 8) == doctest::Approx(3.629).epsilon(1e-3));
  CHECK(expected_blocks_reached(d, 8) < expected_blocks_reached(moe(256, 8), 8));
  // 64 GPUs (4 experts each, 8 per group): 64 x 1/2 x (1 - C(124, 8) / C(128, 8)).
  CHECK(expected_blocks_reached(d, 64) == doctest::Approx(32 * (1 - ratio(124, 128, 8))));
  // 4 blocks of two groups each: j of a block's groups picked (hypergeometric), then the 8
  // draws from the 128 pooled experts miss its j x 32: sum_j P(j) C(128 - 32 j, 8) / C(128, 8).
  const double p0 = 15.0 / 70, p1 = 40.0 / 70, p2 = 15.0 / 70;  // C(2,j) C(6,4-j) / C(8,4)
  const double miss = p0 + p1 * ratio(96, 128, 8) + p2 * ratio(64, 128, 8);
  CHECK(expected_blocks_reached(d, 4) == doctest::Approx(4 * (1 - miss)));
  CHECK(expected_blocks_reached(d, 4) == doctest::Approx(2.9282).epsilon(1e-4));
  // Blocks that straddle group edges (96 experts, 8 groups of 12, 12 blocks of 8): the
  // chosen-group subsets are enumerated, so it is still exact: 5.0794 (the Monte Carlo gives
  // 5.081; ignoring the group limit would give 12 (1 - C(88, 8) / C(96, 8)) = 6.18).
  CHECK(expected_blocks_reached(moe(96, 8, 8, 4), 12) == doctest::Approx(5.0794).epsilon(1e-4));
  CHECK(expected_blocks_reached(moe(96, 8), 12) == doctest::Approx(6.18).epsilon(1e-3));
  CHECK_THROWS_AS(expected_blocks_reached(q, 3), InternalError);
}

TEST_CASE("models::MoeRouting: group-limited routing in presets, model JSON and HF configs") {
  const ModelSpec d = model_preset("deepseek-v3");
  CHECK(d.moe.routing_groups == 8);
  CHECK(d.moe.routing_group_top_k == 4);
  const std::string base = R"({"layers": 2, "hidden": 256, "heads": 4, "ffn": 512,
      "vocab": 1000, "moe": {"experts": 16, "top_k": 4, "expert_ffn": 64)";
  const ModelSpec m =
      parse_model_json(base + R"(, "routing_groups": 4, "routing_group_top_k": 2}})", "m.json");
  CHECK(m.moe.routing_groups == 4);
  CHECK(m.moe.routing_group_top_k == 2);
  CHECK_THROWS_WITH_AS(
      parse_model_json(base + R"(, "routing_groups": 3, "routing_group_top_k": 2}})", "m.json"),
      doctest::Contains("model.moe.routing_groups: 3 must divide"), ValidationError);
  // One of 8 groups holds 2 experts: too few for top 4.
  CHECK_THROWS_WITH_AS(
      parse_model_json(base + R"(, "routing_groups": 8, "routing_group_top_k": 1}})", "m.json"),
      doctest::Contains("hold at least top_k 4"), ValidationError);
  const ModelSpec hf = import_hf_config(R"({"model_type": "deepseek_v3", "num_hidden_layers": 4,
      "hidden_size": 512, "num_attention_heads": 4, "intermediate_size": 1024,
      "vocab_size": 1000, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32, "n_routed_experts": 16,
      "num_experts_per_tok": 4, "moe_intermediate_size": 64, "n_group": 4, "topk_group": 2})",
                                        "config.json");
  CHECK(hf.moe.routing_groups == 4);
  CHECK(hf.moe.routing_group_top_k == 2);
}
