// Model inputs: presets, loom model JSON, HuggingFace config.json, and their errors.
// Every file under examples/models/ is loaded here.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "models/model_loader.hpp"
#include "tests/source_path.hpp"

using loom::testing::source_path;

using namespace loom;
using namespace loom::models;

namespace {
std::string example(const std::string& rel) {
  return source_path("examples/models/") + rel;
}
}  // namespace

TEST_CASE("models::Loader: every example model file loads and validates") {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(LOOM_SOURCE_DIR) +
                                                                     "/examples/models")) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 10);
  for (const auto& f : files) {
    CAPTURE(f);
    ModelSpec m;
    CHECK_NOTHROW(m = load_model(f));
    CHECK(count_parameters(m).total > 0);
  }
}

TEST_CASE("models::Loader: HF config.json files translate to the presets exactly") {
  for (const char* name : {"llama3-8b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3",
                           "gpt-oss-120b", "nemotron-3-nano"}) {
    CAPTURE(name);
    const ModelSpec hf = load_model(example(std::string("hf/") + name + "/config.json"));
    const ModelSpec preset = model_preset(name);
    CHECK(hf.name == name);  // named after the folder of config.json
    CHECK(count_parameters(hf).total == count_parameters(preset).total);
    CHECK(count_parameters(hf).active == count_parameters(preset).active);
    CHECK(hf.kv_heads == preset.kv_heads);
    CHECK(hf.moe.experts == preset.moe.experts);
    CHECK(hf.sliding_window == preset.sliding_window);
    CHECK(hf.sliding_window_pattern == preset.sliding_window_pattern);
  }
  // Qwen2 technical report (arXiv:2407.10671) Table 1: Qwen2-57B-A14B, 57B total and 14B
  // activated; qwen2_moe carries a shared expert of 20480 with a sigmoid gate.
  const ModelSpec q = load_model(example("hf/qwen2-57b-a14b/config.json"));
  CHECK(q.moe.shared_experts == 1);
  CHECK(q.moe.shared_ffn == 20480);
  CHECK(q.qkv_bias);
  CHECK(count_parameters(q).total / 1e9 == doctest::Approx(57).epsilon(0.5 / 57));
  CHECK(count_parameters(q).active / 1e9 == doctest::Approx(14).epsilon(0.5 / 14));
}

// Issue 33: HF model types users train. Phi-3-mini: microsoft/Phi-3-mini-4k-instruct
// config.json (huggingface.co, transformers 4.40.2; examples/models/hf/phi-3-mini-4k-instruct),
// "a 3.8 billion parameter language model" (Abdin et al. 2024, arXiv:2404.14219, abstract).
// OLMo 2 13B: allenai/OLMo-2-1124-13B config.json (huggingface.co; examples/models/hf/
// olmo-2-1124-13b), counted by hand: 40 x (4 h^2 + 3 h ffn + 4 h norms) + 2 V h.
TEST_CASE("models::Loader: Phi-3 and OLMo 2 configs as published") {
  const ModelSpec phi = load_model(example("hf/phi-3-mini-4k-instruct/config.json"));
  CHECK(phi.sliding_window == 2047);
  CHECK(phi.sliding_window_pattern == 0);  // every layer windowed
  CHECK(!phi.qk_norm);
  CHECK(!phi.tied_embeddings);
  CHECK(count_parameters(phi).total / 1e9 == doctest::Approx(3.8).epsilon(0.05 / 3.8));
  const ModelSpec olmo = load_model(example("hf/olmo-2-1124-13b/config.json"));
  CHECK(olmo.qk_norm);
  CHECK(olmo.sliding_window == 0);
  const double h = 5120, ffn = 13824, vocab = 100352;
  const double by_hand = 40 * (4 * h * h + 3 * h * ffn + 4 * h) + 2 * vocab * h + h;
  CHECK(static_cast<double>(count_parameters(olmo).total) ==
        doctest::Approx(by_hand).epsilon(1e-4));
}

TEST_CASE("models::Loader: loom model JSON files") {
  // GPT-2 small: 124,439,808 parameters (nanoGPT prints 123.65M, which excludes the 1024 x
  // 768 position embedding; Radford et al. 2019 call it 117M/124M).
  const ModelSpec gpt = load_model(example("tiny-gpt.json"));
  CHECK(count_parameters(gpt).total == 124439808);
  // "base" starts from a preset: only the layer count changes.
  const ModelSpec cut = load_model(example("llama3-8b-16-layers.json"));
  const ModelSpec full = model_preset("llama3-8b");
  CHECK(cut.layers == 16);
  CHECK(count_parameters(full).layers == 2 * count_parameters(cut).layers);
  // Deep MLP by hand: 16 x (4096^2 + 4096) + 4096 x 1000 + 1000.
  const ModelSpec mlp = load_model(example("deep-mlp.json"));
  CHECK(mlp.kind == ModelKind::MLP);
  CHECK(count_parameters(mlp).total == 16.0 * (4096.0 * 4096 + 4096) + 4096.0 * 1000 + 1000);
  const ModelSpec moe = load_model(example("small-moe.json"));
  CHECK(moe.is_moe_layer(1));
  CHECK(!moe.is_moe_layer(0));
  CHECK(moe.moe.capacity_factor == 1.25);
  const ModelSpec mla = load_model(example("small-mla.json"));
  CHECK(mla.attention == AttentionKind::MLA);
  CHECK(mla.head_dim == 192);
}

TEST_CASE("models::Loader: presets are registered by name with descriptions") {
  const auto presets = model_presets();
  CHECK(presets.size() == 28);
  for (const auto& p : presets) {
    CAPTURE(p.name);
    CHECK(!p.description.empty());
    CHECK_NOTHROW(validate_model(model_preset(p.name)));
  }
  // The plain key names the field; the CLI passes "--model".
  CHECK_THROWS_WITH_AS(load_model("llama3-8"),
                       doctest::Contains("model: unknown name 'llama3-8' (did you mean "
                                         "'llama3-8b'?); valid: gpt3-175b, gpt-1.7b"),
                       ValidationError);
  try {
    load_model("llama3-8");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "model");
  }
  CHECK_THROWS_WITH_AS(load_model("llama3-8", "--model"),
                       doctest::Contains("--model: unknown name 'llama3-8'"), ValidationError);
}

TEST_CASE("models::Loader: input errors name the file, position or key") {
  CHECK_THROWS_WITH_AS(load_model("/nonexistent/model.json"),
                       doctest::Contains("/nonexistent/model.json: cannot open model file"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse_model_json("{\n  \"layers\": 2,\n  \"hidden\" 8\n}", "m.json"),
                       doctest::Contains("m.json:3:12: malformed JSON"), ConfigError);
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "tied_embedding": true})", "m.json"),
      doctest::Contains("unknown key 'tied_embedding'; did you mean "
                        "'tied_embeddings'?"),
      ConfigError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 0, "hidden": 8, "heads": 2, "vocab": 10,
                                            "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("m.json: /layers: invalid value 0; allowed: a positive"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 2, "hidden": 8, "heads": -2, "vocab": 10,
                                            "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("/heads: invalid value -2"), ConfigError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 2, "hidden": 8, "heads": 2, "kv_heads": 3,
                                            "vocab": 10, "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("model.kv_heads: 3 does not divide model.heads 2"),
                       ValidationError);
  CHECK_THROWS_WITH_AS(
      import_hf_config(R"({"model_type": "gpt2", "n_layer": 12})", "config.json"),
      "config.json: /model_type: unsupported HuggingFace model_type 'gpt2'; supported: "
      "deepseek_v3, gemma, gemma2, gemma3, gemma3_text, gpt_oss, llama, mistral, mixtral, "
      "nemotron_h, olmo2, phi3, qwen2, qwen2_moe, qwen3, qwen3_moe",
      ValidationError);
  CHECK_THROWS_WITH_AS(import_hf_config(R"({"model_type": "llama", "hidden_size": 8})", "c.json"),
                       doctest::Contains("missing required key 'num_hidden_layers'"), ConfigError);
}

TEST_CASE("models::Loader: dense HF model types mistral, qwen2 and qwen3") {
  // HuggingFace mistralai/Mistral-7B-v0.1 model page: "Model size 7.24B params".
  const ModelSpec mistral = import_hf_config(
      R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
          "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
          "vocab_size": 32000, "sliding_window": 4096, "tie_word_embeddings": false})",
      "mistral/config.json");
  CHECK(count_parameters(mistral).total / 1e9 == doctest::Approx(7.24).epsilon(0.005 / 7.24));
  // HuggingFace Qwen/Qwen2-7B model page: "Model size 7.62B params" (QKV biases).
  const ModelSpec qwen2 = import_hf_config(
      R"({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
          "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
          "vocab_size": 152064, "tie_word_embeddings": false})",
      "qwen2/config.json");
  CHECK(qwen2.qkv_bias);
  CHECK(count_parameters(qwen2).total / 1e9 == doctest::Approx(7.62).epsilon(0.005 / 7.62));
  // Qwen3-8B model card: "Number of Parameters: 8.2B" (head_dim 128, QK norm).
  const ModelSpec qwen3 = import_hf_config(
      R"({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
          "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
          "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": false})",
      "qwen3/config.json");
  CHECK(qwen3.qk_norm);
  CHECK(count_parameters(qwen3).total / 1e9 == doctest::Approx(8.2).epsilon(0.05 / 8.2));
}

TEST_CASE("models::Loader: sliding-window layouts from HF configs and loom model JSON") {
  // Mistral-7B-v0.1's config windows every layer (4096 keys); Qwen2 carries a window its
  // use_sliding_window false turns off.
  const ModelSpec mistral = import_hf_config(
      R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
          "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
          "vocab_size": 32000, "sliding_window": 4096})",
      "mistral/config.json");
  CHECK(mistral.sliding_window == 4096);
  CHECK(mistral.attention_window(0) == 4096);
  CHECK(mistral.attention_window(31) == 4096);
  const ModelSpec qwen2 = import_hf_config(
      R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
          "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
          "vocab_size": 151936, "sliding_window": 32768, "use_sliding_window": false})",
      "qwen2/config.json");
  CHECK(qwen2.sliding_window == 0);
  // openai/gpt-oss-120b config.json: 36 layers alternating sliding (128) and full, sliding
  // first; without layer_types transformers' GptOssConfig builds the same list.
  const std::string oss = R"({"model_type": "gpt_oss", "hidden_size": 2880,
      "intermediate_size": 2880, "num_attention_heads": 64, "num_hidden_layers": 36,
      "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128,
      "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128,
      "attention_bias": true, "tie_word_embeddings": false, "swiglu_limit": 7.0)";
  std::string types = "[";
  for (int i = 0; i < 36; ++i)
    types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  types += "]";
  for (const std::string& text : {oss + "}", oss + ", \"layer_types\": " + types + "}"}) {
    const ModelSpec m = import_hf_config(text, "gpt-oss-120b/config.json");
    CHECK(m.sliding_window == 128);
    CHECK(m.sliding_window_pattern == 2);
    CHECK(m.attention_window(0) == 128);
    CHECK(m.attention_window(1) == 0);
    CHECK(m.linear_bias);
    CHECK(m.activation_clamp == 7.0);  // swiglu_limit
    CHECK(count_parameters(m).total == count_parameters(model_preset("gpt-oss-120b")).total);
  }
  // transformers' GptOssConfig defaults swiglu_limit to 7.0.
  std::string no_limit = oss;
  no_limit.erase(no_limit.find(R"(, "swiglu_limit": 7.0)"),
                 std::string(R"(, "swiglu_limit": 7.0)").size());
  CHECK(import_hf_config(no_limit + "}", "c.json").activation_clamp == 7.0);
  CHECK(import_hf_config(no_limit + R"(, "swiglu_limit": 0})", "c.json").activation_clamp == 0.0);
  CHECK_THROWS_WITH_AS(import_hf_config(oss + R"(, "swiglu_limit": "7"})", "c.json"),
                       doctest::Contains("/swiglu_limit"), ValidationError);
  // loom model JSON: activation_clamp on a gated MLP; not on an ungated one, not negative.
  CHECK(parse_model_json(R"({"base": "llama3-8b", "activation_clamp": 7})", "c.json")
            .activation_clamp == 7.0);
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "mlp": "relu2", "activation_clamp": 7})", "c.json"),
      doctest::Contains("model.activation_clamp: 7 clamps a gated MLP"), ValidationError);
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "activation_clamp": -1})", "c.json"),
      doctest::Contains("model.activation_clamp: -1 is not a finite non-negative"),
      ValidationError);
  // A layout with no period is refused with the fix; so is a wrong length.
  std::string odd = "[\"full_attention\"";
  for (int i = 1; i < 36; ++i) odd += ", \"sliding_attention\"";
  odd += "]";
  CHECK_THROWS_WITH_AS(import_hf_config(oss + ", \"layer_types\": " + odd + "}", "c.json"),
                       doctest::Contains("only periodic layouts"), ValidationError);
  CHECK_THROWS_WITH_AS(
      import_hf_config(oss + R"(, "layer_types": ["full_attention"]})", "c.json"),
      doctest::Contains("one \"sliding_attention\" or \"full_attention\" per layer"),
      ValidationError);
  // loom model JSON: sliding_window and sliding_window_pattern; negatives are bad input.
  const ModelSpec gemma_like = parse_model_json(
      R"({"base": "llama3-8b", "sliding_window": 1024, "sliding_window_pattern": 6})", "g.json");
  CHECK(gemma_like.attention_window(4) == 1024);
  CHECK(gemma_like.attention_window(5) == 0);
  CHECK_THROWS_AS(parse_model_json(R"({"base": "llama3-8b", "sliding_window": -1})", "g.json"),
                  ConfigError);
  // A pattern needs a window, and at most one pattern period per model.
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "sliding_window_pattern": 2})", "g.json"),
      doctest::Contains("needs model.sliding_window"), ValidationError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"base": "llama3-8b", "sliding_window": 512,
                                            "sliding_window_pattern": 33})",
                                        "g.json"),
                       doctest::Contains("exceeds model.layers 32"), ValidationError);
  // HF: a negative window is bad input; Qwen's max_window_layers keeps the first layers
  // full (transformers Qwen2: layer i slides when i >= max_window_layers): all of them full
  // means no window, none full every layer windowed, a split is not periodic.
  CHECK_THROWS_AS(import_hf_config(oss + R"(, "sliding_window": -1})", "c.json"), ConfigError);
  const std::string qwen = R"({"model_type": "qwen2", "hidden_size": 896,
      "intermediate_size": 4864, "num_attention_heads": 14, "num_hidden_layers": 24,
      "num_key_value_heads": 2, "vocab_size": 151936, "sliding_window": 4096,
      "use_sliding_window": true)";
  CHECK(import_hf_config(qwen + R"(, "max_window_layers": 24})", "q.json").sliding_window == 0);
  const ModelSpec all = import_hf_config(qwen + R"(, "max_window_layers": 0})", "q.json");
  CHECK(all.sliding_window == 4096);
  CHECK(all.sliding_window_pattern == 0);
  CHECK_THROWS_WITH_AS(import_hf_config(qwen + R"(, "max_window_layers": 21})", "q.json"),
                       doctest::Contains("not a periodic layout"), ValidationError);
}

TEST_CASE("models::Loader: absurd sizes and wrong types are bad input, never a crash") {
  // 1e300 used to reach an int64 conversion (undefined behaviour) and 2^62 was accepted.
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 2, "hidden": 1e300, "heads": 2,
                                            "vocab": 10, "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("m.json: /hidden: invalid value 1e+300"), ConfigError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 2, "hidden": 4611686018427387904,
                                            "heads": 2, "vocab": 10, "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("/hidden: invalid value 4611686018427387904; allowed: an "
                                         "integer up to 2^53"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 2, "hidden": 1099511627776, "heads": 2,
                                            "vocab": 10, "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("model.hidden: 1099511627776 is beyond the supported "
                                         "maximum 1048576"),
                       ValidationError);
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 100000, "hidden": 8, "heads": 2,
                                            "vocab": 10, "ffn": 4})",
                                        "m.json"),
                       doctest::Contains("model.layers: 100000 is beyond the supported maximum"),
                       ValidationError);
  // capacity_factor above experts / top_k: every expert would take every token.
  CHECK_THROWS_WITH_AS(parse_model_json(R"({"layers": 2, "hidden": 8, "heads": 2, "vocab": 10,
                        "moe": {"experts": 4, "top_k": 2, "expert_ffn": 4,
                                "capacity_factor": 1e308}})",
                                        "m.json"),
                       doctest::Contains("capacity_factor: 1e+308 exceeds experts / top_k = 2"),
                       ValidationError);
  const std::string ds = R"({"model_type": "deepseek_v3", "num_hidden_layers": 4,
      "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "kv_lora_rank": 8,
      "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 4,
      "num_experts_per_tok": 2, "moe_intermediate_size": 16, "intermediate_size": 32)";
  // A non-string topk_method used to escape as an uncaught nlohmann type_error (exit 1).
  CHECK_THROWS_WITH_AS(import_hf_config(ds + R"(, "topk_method": 5})", "config.json"),
                       "config.json: /topk_method: invalid value 5; allowed: a string",
                       ConfigError);
  // 2^32 + 1 used to wrap to 1 when narrowed to int.
  CHECK_THROWS_WITH_AS(
      import_hf_config(ds + R"(, "first_k_dense_replace": 4294967297})", "config.json"),
      doctest::Contains("/first_k_dense_replace: invalid value 4294967297"), ConfigError);
}

TEST_CASE("models::Loader: a HuggingFace model folder loads its config.json; other folders fail") {
  const ModelSpec folder = load_model(example("hf/llama3-8b"));
  CHECK(count_parameters(folder).total == count_parameters(model_preset("llama3-8b")).total);
  CHECK(folder.name == "llama3-8b");
  CHECK_THROWS_WITH_AS(load_model(source_path("examples/")),
                       doctest::Contains("is a directory, not a model file"), ConfigError);
}

// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json (examples/models/hf/nemotron-3-nano):
// the hybrid pattern, the Mamba-2 sizes, squared-ReLU experts, attention without RoPE.
TEST_CASE("models::Loader: a nemotron_h config translates its hybrid layers") {
  const ModelSpec m = load_model(example("hf/nemotron-3-nano/config.json"));
  CHECK(m.pattern.size() == 52);
  CHECK(m.layer_kind(0) == LayerKind::MAMBA);
  CHECK(m.layer_kind(1) == LayerKind::MOE_MLP);
  CHECK(m.layer_kind(5) == LayerKind::ATTENTION);
  CHECK(m.is_moe_layer(1));
  CHECK_FALSE(m.is_moe_layer(0));
  CHECK(m.mamba.in_proj_width() == 2 * 4096 + 2 * 8 * 128 + 64);
  CHECK(m.mlp == MlpKind::RELU2);
  CHECK_FALSE(m.rope);
  CHECK(m.max_position_embeddings == 0);  // its 262144 is a context limit, not a table
  CHECK(m.moe.top_k == 6);
  CHECK(m.moe.shared_ffn == 3712);
  // Ultra-style configs list the block types instead of a pattern string.
  const std::string base = R"({"model_type": "nemotron_h", "hidden_size": 256,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 3,
      "vocab_size": 1000, "intermediate_size": 512, "mamba_num_heads": 8, "mamba_head_dim": 32,
      "ssm_state_size": 16, "n_groups": 2)";
  const ModelSpec listed =
      import_hf_config(base + R"(, "layers_block_type": ["mamba", "attention", "mlp"]})", "c.json");
  CHECK(listed.pattern == "M*-");
  CHECK_THROWS_WITH_AS(
      import_hf_config(base + R"(, "layers_block_type": ["mamba", "conv", "mlp"]})", "c.json"),
      doctest::Contains("'conv' is not a layer type"), ValidationError);
  CHECK_THROWS_WITH_AS(import_hf_config(base + "}", "c.json"),
                       doctest::Contains("hybrid_override_pattern"), ConfigError);
}

TEST_CASE("models::Loader: a hybrid pattern is checked layer by layer") {
  const std::string head = R"({"name": "h", "hidden": 256, "heads": 4, "vocab": 1000,
      "layers": 4, "ffn": 512, "mamba": {"heads": 8, "head_dim": 32, "state": 16, "groups": 2})";
  const ModelSpec ok = parse_model_json(head + R"(, "pattern": "M*-M"})", "m.json");
  CHECK(ok.layer_kind(2) == LayerKind::MLP);
  CHECK(ok.mamba.conv_kernel == 4);  // Megatron's d_conv default
  CHECK(ok.mamba.chunk == 128);
  CHECK_THROWS_WITH_AS(parse_model_json(head + R"(, "pattern": "M*-"})", "m.json"),
                       doctest::Contains("3 characters for model.layers 4"), ValidationError);
  CHECK_THROWS_WITH_AS(parse_model_json(head + R"(, "pattern": "M*-X"})", "m.json"),
                       doctest::Contains("'X' at layer 3 is not a layer type"), ValidationError);
  CHECK_THROWS_WITH_AS(parse_model_json(head + R"(, "pattern": "M*-E"})", "m.json"),
                       doctest::Contains("the pattern has MoE layers (E); give model.moe"),
                       ValidationError);
  const std::string odd = R"({"name": "h", "hidden": 256, "heads": 4, "vocab": 1000, "layers": 1,
      "pattern": "M", "mamba": {"heads": 6, "head_dim": 32, "state": 16, "groups": 4}})";
  CHECK_THROWS_WITH_AS(parse_model_json(odd, "m.json"),
                       doctest::Contains("model.mamba.groups: 4 does not divide"), ValidationError);
}

TEST_CASE("models::Loader: a base model with new hidden or heads derives head_dim") {
  // llama3-8b: hidden 4096, 32 heads, head_dim 128. A 2048-wide variant with 16 heads has
  // head_dim 2048 / 16 = 128; with 32 heads 64; keeping the base's 128 would give Q/K/V
  // 32 x 128 = 4096 wide on a 2048 residual.
  CHECK(parse_model_json(R"({"base": "llama3-8b", "hidden": 2048, "heads": 16})", "b.json")
            .head_dim == 128);
  CHECK(parse_model_json(R"({"base": "llama3-8b", "hidden": 2048, "kv_heads": 8})", "b.json")
            .head_dim == 64);
  CHECK(
      parse_model_json(R"({"base": "llama3-8b", "heads": 64, "kv_heads": 8})", "b.json").head_dim ==
      64);
  // Unchanged shape: the base's own head_dim stays (Qwen3's 128 is not hidden / heads).
  CHECK(parse_model_json(R"({"base": "llama3-8b", "layers": 16})", "b.json").head_dim == 128);
  // An explicit head_dim is kept (decoupled sizes, as Qwen3 and Gemma use).
  CHECK(parse_model_json(R"({"base": "llama3-8b", "hidden": 2048, "head_dim": 96})", "b.json")
            .head_dim == 96);
  // Refused: no head_dim and heads not dividing hidden; an odd head_dim under RoPE.
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "hidden": 5000, "heads": 48})", "b.json"),
      doctest::Contains("head_dim"), ConfigError);
  CHECK_THROWS_WITH_AS(
      parse_model_json(R"({"base": "llama3-8b", "hidden": 2048, "head_dim": 65})", "b.json"),
      doctest::Contains("even size"), ConfigError);
}
