// Issue 33, HF model types users train: Google's Gemma family, imported from the config.json
// files Google published on huggingface.co (examples/models/hf/<name>/config.json):
// google/gemma-2b (`gemma`), google/gemma-2-9b-it and google/gemma-2-27b (`gemma2`),
// google/gemma-3-1b-it (`gemma3_text`), google/gemma-3-4b-it and google/gemma-3-27b-it
// (`gemma3`, the decoder in a nested text_config beside a SigLIP vision tower). Parameter
// counts are checked against the reports' tables:
//   Gemma (arXiv:2403.08295) Table 2: 2B non-embedding 1,981,884,416;
//   Gemma 2 (arXiv:2408.00118) Table 2: 9B non-embedding 8,324,201,984, 27B 26,047,480,320;
//   Gemma 3 (arXiv:2503.19786) Table 1: non-embedding 698M (1B), 3,209M (4B), 25,600M (27B),
//   embedding 302M (1B), vision encoder 417M.
// Gemma and Gemma 2 count a 256,128-row embedding table (Gemma 2 Table 1 "Vocab size 256128":
// 917,962,752 = 256,128 x 3584); the HF checkpoints hold the 256,000 rows of vocab_size.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/model_loader.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::models;

namespace {

ModelSpec gemma(const std::string& name) {
  return load_model(source_path("examples/models/hf/") + name + "/config.json");
}

double non_embedding(const ModelSpec& m) {
  const ParameterCounts c = count_parameters(m);
  return c.total - c.embedding - c.lm_head;
}

TrainingPlan plan_of(int tp, bool flash) {
  TrainingPlan p;
  p.tp = tp;
  p.sp = tp > 1;
  p.seq = 8192;
  p.mbs = 1;
  p.flash_attention = flash;
  return p;
}

std::vector<std::string> names(const std::vector<OpCost>& ops) {
  std::vector<std::string> out;
  for (const OpCost& op : ops) out.push_back(op.name);
  return out;
}

const OpCost& find(const std::vector<OpCost>& ops, const std::string& name) {
  const auto it =
      std::find_if(ops.begin(), ops.end(), [&](const OpCost& op) { return op.name == name; });
  REQUIRE(it != ops.end());
  return *it;
}

bool has(const std::vector<OpCost>& ops, const std::string& name) {
  return std::any_of(ops.begin(), ops.end(), [&](const OpCost& op) { return op.name == name; });
}

}  // namespace

TEST_CASE("models::Gemma: published configs count the reports' parameters") {
  const ModelSpec g1 = gemma("gemma-2b");
  CHECK(g1.mlp == MlpKind::GEGLU);
  CHECK(g1.tied_embeddings);  // GemmaConfig's default: the config does not say
  CHECK(!g1.sandwich_norms);
  CHECK(g1.kv_heads == 1);  // multi-query attention
  CHECK(non_embedding(g1) == 1981884416.0);
  CHECK(count_parameters(g1).embedding == 256000.0 * 2048);

  const ModelSpec g9 = gemma("gemma-2-9b-it");
  CHECK(g9.head_dim == 256);  // not hidden / heads = 224
  CHECK(g9.sandwich_norms);
  CHECK(!g9.qk_norm);
  CHECK(g9.tied_embeddings);
  CHECK(g9.attn_logit_softcap == 50);
  CHECK(g9.final_logit_softcap == 30);
  CHECK(g9.scaled_embedding);
  CHECK(non_embedding(g9) == 8324201984.0);
  // By hand: 42 x (2 x 3584 x 4096 + 2 x 3584 x 2048 + 3 x 3584 x 14336 + 4 x 3584) + 3584.
  CHECK(count_parameters(g9).layers == 42.0 * (44040192 + 154140672 + 4 * 3584));

  const ModelSpec g27 = gemma("gemma-2-27b");
  CHECK(g27.head_dim == 128);  // not hidden / heads = 144 (query_pre_attn_scalar 144 only scales)
  CHECK(non_embedding(g27) == 26047480320.0);

  // Gemma 3: no soft-capping, query/key norms (two head_dim scales per layer), a vocabulary of
  // 262,208 from Gemma3TextConfig where the 27B and 4B configs leave vocab_size out; the 4B's
  // heads, KV heads and head_dim come from the class defaults too (8, 4, 256).
  const ModelSpec g3 = gemma("gemma-3-27b-it");
  CHECK(g3.qk_norm);
  CHECK(g3.sandwich_norms);
  CHECK(g3.attn_logit_softcap == 0);
  CHECK(g3.final_logit_softcap == 0);
  CHECK(g3.vocab == 262208);
  CHECK(non_embedding(g3) / 1e6 == doctest::Approx(25600).epsilon(0.5 / 25600));
  const ModelSpec g4 = gemma("gemma-3-4b-it");
  CHECK(g4.heads == 8);
  CHECK(g4.kv_heads == 4);
  CHECK(g4.head_dim == 256);
  CHECK(non_embedding(g4) / 1e6 == doctest::Approx(3209).epsilon(0.5 / 3209));
  const ModelSpec g1b = gemma("gemma-3-1b-it");
  CHECK(non_embedding(g1b) / 1e6 == doctest::Approx(698).epsilon(0.5 / 698));
  CHECK(count_parameters(g1b).embedding / 1e6 == doctest::Approx(302).epsilon(0.5 / 302));
  CHECK(g1b.notes.empty());  // text only
}

TEST_CASE("models::Gemma: the gemma3 vision tower is set aside with a note") {
  // 27 SigLIP layers of width 1152 (417M, Gemma 3 Table 1) and the 1152 x 5376 projector.
  const ModelSpec g3 = gemma("gemma-3-27b-it");
  REQUIRE(g3.notes.size() == 1);
  CHECK(g3.notes[0].find("/vision_config: the vision tower is not modelled") != std::string::npos);
  CHECK(g3.notes[0].find("27 layers of width 1152") != std::string::npos);
  CHECK(g3.notes[0].find("0.42B parameters") != std::string::npos);
  CHECK(g3.name == "gemma-3-27b-it");
}

TEST_CASE("models::Gemma: sliding windows as transformers places them") {
  // Gemma 2: local (4096) and global layers alternate, sliding first (Gemma2Attention:
  // `sliding_window if not bool(layer_idx % 2)`).
  const ModelSpec g9 = gemma("gemma-2-9b-it");
  CHECK(g9.sliding_window == 4096);
  CHECK(g9.sliding_window_pattern == 2);
  CHECK(g9.attention_window(0) == 4096);
  CHECK(g9.attention_window(1) == 0);
  CHECK(g9.attention_window(41) == 0);
  // Gemma 3: five local layers (1024; the 1B 512) then one global (sliding_window_pattern 6,
  // Gemma3TextConfig's default where the 27B config leaves it out).
  const ModelSpec g3 = gemma("gemma-3-27b-it");
  CHECK(g3.sliding_window == 1024);
  CHECK(g3.sliding_window_pattern == 6);
  int full = 0;
  for (int l = 0; l < g3.layers; ++l) full += g3.attention_window(l) == 0 ? 1 : 0;
  CHECK(full == 10);  // layers 5, 11, ..., 59 of 62
  CHECK(g3.attention_window(5) == 0);
  CHECK(g3.attention_window(60) == 1024);
  CHECK(gemma("gemma-3-1b-it").sliding_window == 512);
  // layer_types, when a newer config writes them, say the same.
  const ModelSpec typed = import_hf_config(
      R"({"model_type": "gemma3_text", "num_hidden_layers": 7, "sliding_window": 512,
          "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                          "sliding_attention", "sliding_attention", "full_attention",
                          "sliding_attention"]})",
      "config.json");
  CHECK(typed.sliding_window_pattern == 6);
  // Fewer layers than the pattern: every layer slides.
  CHECK(import_hf_config(R"({"model_type": "gemma3_text", "num_hidden_layers": 4})", "c.json")
            .sliding_window_pattern == 0);
}

TEST_CASE("models::Gemma: four norms, soft-capping and GeGLU in the op list") {
  const ModelSpec g9 = gemma("gemma-2-9b-it");
  const TrainingPlan flash = plan_of(1, true);
  const std::vector<OpCost> ops = layer_ops(g9, flash, 0);
  const std::vector<std::string> order = names(ops);
  // input_layernorm ... o_proj, post_attention_layernorm, residual; pre_feedforward_layernorm
  // ... down_proj, post_feedforward_layernorm, residual (HF Gemma2DecoderLayer.forward).
  const auto at = [&](const char* n) {
    return std::find(order.begin(), order.end(), n) - order.begin();
  };
  CHECK(at("attn_norm") < at("qkv_proj"));
  CHECK(at("out_proj") + 1 == at("attn_post_norm"));
  CHECK(at("attn_post_norm") + 1 == at("attn_residual"));
  CHECK(at("mlp_down") + 1 == at("mlp_post_norm"));
  CHECK(at("mlp_post_norm") + 1 == at("mlp_residual"));
  CHECK(find(ops, "attn_post_norm").params == 3584);
  // Every parameter of the layer is on some op (tp 1).
  double params = 0;
  for (const OpCost& op : ops) params += op.params;
  CHECK(params == layer_parameters(g9, 0).total());
  // Flash attention applies the cap in its kernel: no tensor, the kernel marked.
  CHECK(find(ops, "attn_scores").softcap);
  CHECK(find(ops, "attn_v").softcap);
  CHECK(!has(ops, "attn_softcap"));
  CHECK(find(ops, "attn_scores").attention.window == 4096);
  CHECK(find(layer_ops(g9, flash, 1), "attn_scores").attention.window == 0);
  // GeGLU: gate and up, the gelu-gated product.
  const OpCost& up = find(ops, "mlp_up");
  CHECK(up.shape.n == 2 * 14336);

  // Unfused (Megatron-Bridge's Gemma 2 core attention): cap * tanh(s / cap) over the whole
  // score square, three eager kernels, the tanh output kept (16-bit): b x heads x s x s.
  const TrainingPlan unfused = plan_of(2, false);
  const std::vector<OpCost> u = layer_ops(g9, unfused, 0);
  const OpCost& cap = find(u, "attn_softcap");
  const double square = 1.0 * (16 / 2) * 8192 * 8192;
  CHECK(cap.saved_bytes == 2 * square);
  CHECK(cap.kernels == 3);
  CHECK(cap.attention_core);
  CHECK(!find(u, "attn_scores").softcap);
  // The post-norms run on the sequence-parallel shard.
  CHECK(find(u, "attn_post_norm").saved_bytes == 2.0 * 8192 / 2 * 3584);

  // The final-logit cap: between the LM head and the loss, over the logits of this GPU's
  // vocabulary shard, its tanh output kept for the head's backward.
  const std::vector<OpCost> head = head_ops(g9, unfused);
  const std::vector<std::string> head_order = names(head);
  const auto lm = std::find(head_order.begin(), head_order.end(), "lm_head");
  REQUIRE(lm != head_order.end());
  CHECK(*(lm + 1) == "logit_softcap");
  CHECK(*(lm + 2) == "cross_entropy");
  CHECK(find(head, "logit_softcap").saved_bytes == 2.0 * 8192 * 256000 / 2);
  // The scaled embedding: one more kernel.
  CHECK(embedding_ops(g9, unfused).front().kernels == 3);
}

TEST_CASE("models::Gemma: Gemma 3 normalises queries and keys and caps nothing") {
  const ModelSpec g3 = gemma("gemma-3-27b-it");
  for (const bool flash : {true, false}) {
    const TrainingPlan p = plan_of(1, flash);
    const std::vector<OpCost> ops = layer_ops(g3, p, 0);
    CHECK(find(ops, "qk_norm").params == 2 * 128);
    CHECK(has(ops, "attn_post_norm"));
    CHECK(has(ops, "mlp_post_norm"));
    CHECK(!has(ops, "attn_softcap"));
    CHECK(!find(ops, "attn_scores").softcap);
    CHECK(!has(head_ops(g3, p), "logit_softcap"));
    CHECK(find(ops, "attn_scores").attention.window == 1024);
    CHECK(find(layer_ops(g3, p, 5), "attn_scores").attention.window == 0);
  }
}

TEST_CASE("models::Gemma: loom model JSON spells the same architecture") {
  const ModelSpec m = parse_model_json(
      R"({"base": "llama3-8b", "mlp": "geglu", "sandwich_norms": true, "attn_logit_softcap": 50,
          "final_logit_softcap": 30, "scaled_embedding": true})",
      "gemma-like.json");
  CHECK(m.mlp == MlpKind::GEGLU);
  CHECK(layer_parameters(m, 0).norms == 4.0 * 4096);
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "attn_logit_softcap": -1})", "bad.json"),
      doctest::Contains("model.attn_logit_softcap: -1 is not a finite"), ValidationError);
}

TEST_CASE("models::Gemma: import errors name the key") {
  CHECK_THROWS_WITH_AS(import_hf_config(R"({"model_type": "gemma3"})", "c.json"),
                       doctest::Contains("missing required key 'text_config'"), ConfigError);
  CHECK_THROWS_WITH_AS(
      import_hf_config(R"({"model_type": "gemma3", "text_config": {"model_type": "llama"}})",
                       "c.json"),
      doctest::Contains("/text_config/model_type: \"llama\" is not gemma3_text"), ValidationError);
  CHECK_THROWS_WITH_AS(
      import_hf_config(R"({"model_type": "gemma2", "num_hidden_layers": 2, "hidden_size": 64,
                           "num_attention_heads": 2, "vocab_size": 10,
                           "hidden_activation": "silu"})",
                       "c.json"),
      doctest::Contains("hidden_activation: 'silu' is not modelled for gemma2"), ValidationError);
  CHECK_THROWS_WITH_AS(
      import_hf_config(R"({"model_type": "gemma2", "num_hidden_layers": 2, "hidden_size": 64,
                           "num_attention_heads": 2, "vocab_size": 10,
                           "attn_logit_softcapping": "50"})",
                       "c.json"),
      doctest::Contains("attn_logit_softcapping"), ConfigError);
  // A null cap is transformers' None: no soft-capping.
  const ModelSpec uncapped =
      import_hf_config(R"({"model_type": "gemma2", "num_hidden_layers": 2, "hidden_size": 64,
                           "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 128,
                           "attn_logit_softcapping": null})",
                       "c.json");
  CHECK(uncapped.attn_logit_softcap == 0);
  CHECK(uncapped.final_logit_softcap == 30);
}
