#include "models/hf_gemma.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace loom::models::detail {
namespace {

// transformers' config-class defaults for the keys a published Gemma config may leave out.
// GemmaConfig and Gemma2Config (configuration_gemma.py, configuration_gemma2.py): head_dim 256
// and tied embeddings; Gemma 2's 4096-token window and its caps, 50 on the attention scores
// and 30 on the final logits. Gemma3TextConfig (configuration_gemma3.py as of transformers
// 4.50, which wrote the published gemma-3 configs): google/gemma-3-4b-it's text_config names
// only hidden_size, intermediate_size, num_hidden_layers and sliding_window, leaving the
// heads, head_dim, vocabulary (262208) and the 5:1 local/global pattern to these. Gemma 3
// caps nothing (attn_logit_softcapping and final_logit_softcapping default to None).
nlohmann::json class_defaults(const std::string& type) {
  nlohmann::json d = {{"head_dim", 256}, {"tie_word_embeddings", true}};
  if (type == "gemma2") {
    d["sliding_window"] = 4096;
    d["attn_logit_softcapping"] = 50.0;
    d["final_logit_softcapping"] = 30.0;
  } else if (type == "gemma3" || type == "gemma3_text") {
    d.update({{"vocab_size", 262208},
              {"hidden_size", 2304},
              {"intermediate_size", 9216},
              {"num_hidden_layers", 26},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 4},
              {"sliding_window", 4096},
              {"sliding_window_pattern", 6}});
  }
  return d;
}

// The sentence that says what a gemma3 config's vision tower is and that loom leaves it out:
// a SigLIP vision transformer (transformers modeling_siglip.py SiglipVisionTransformer: the
// patch-embedding conv with its bias, learned positions, per layer two LayerNorms, q/k/v/out
// and fc1/fc2 with biases, a final LayerNorm; Gemma 3 has no pooling head, vision_use_head
// false) and the projector into the decoder (modeling_gemma3.py Gemma3MultiModalProjector: an
// RMSNorm and a vision-width x hidden matrix). The Gemma 3 report (arXiv:2503.19786, Table 1)
// counts 417M for the encoder, "kept frozen" in training (Sec. 2.1).
std::string vision_note(const nlohmann::json& vision, std::int64_t text_hidden,
                        const std::string& origin) {
  HfReader v(vision, origin, "/vision_config");  // SiglipVisionConfig's defaults
  const double h = v.small_or("hidden_size", 768, 1);
  const double inner = v.small_or("intermediate_size", 3072, 1);
  const std::int64_t layers = v.small_or("num_hidden_layers", 12, 0);
  const double patch = v.small_or("patch_size", 16, 1);
  const double image = v.small_or("image_size", 224, 1);
  const double channels = v.small_or("num_channels", 3, 1);
  const double per_layer = 4 * (h * h + h) + 4 * h + 2 * h * inner + inner + h;
  const double side = std::floor(image / patch);  // SiglipVisionEmbeddings num_patches
  const double positions = side * side;
  const double params = channels * patch * patch * h + h + positions * h +
                        static_cast<double>(layers) * per_layer + 2 * h +
                        h * static_cast<double>(text_hidden) + h;
  return fmt::format(
      "{}: /vision_config: the vision tower is not modelled (SigLIP, {} layers of width {:g}, "
      "and its projector: {:.2f}B parameters, kept frozen in Gemma 3's training): loom costs "
      "the text decoder, text_config; image tokens' encoder passes and these weights are left "
      "out",
      origin, layers, h, params / 1e9);
}

}  // namespace

bool is_gemma_type(const std::string& type) {
  return type == "gemma" || type == "gemma2" || type == "gemma3" || type == "gemma3_text";
}

nlohmann::json gemma_decoder_config(const nlohmann::json& config, const std::string& type,
                                    const std::string& origin, std::vector<std::string>& notes) {
  nlohmann::json given = config;
  if (type == "gemma3") {
    // Gemma3ForConditionalGeneration (modeling_gemma3.py): the language model is built from
    // text_config, its LM head tied to the embedding as the outer config says.
    if (!config.contains("text_config") || !config.at("text_config").is_object())
      throw ConfigError::missing_key(origin, "/", "text_config");
    given = config.at("text_config");
    const auto it = given.find("model_type");
    if (it != given.end() && !(it->is_string() && it->get<std::string>() == "gemma3_text")) {
      throw ValidationError(
          "text_config",
          fmt::format("{}: /text_config/model_type: {} is not gemma3_text; a gemma3 config's "
                      "text_config describes its Gemma 3 decoder",
                      origin, json_excerpt(*it)));
    }
    if (config.contains("tie_word_embeddings"))
      given["tie_word_embeddings"] = config.at("tie_word_embeddings");
  }
  nlohmann::json out = class_defaults(type);
  for (const auto& [key, value] : given.items()) out[key] = value;  // null stays: None
  if (type == "gemma3" && config.contains("vision_config") &&
      config.at("vision_config").is_object()) {
    notes.push_back(vision_note(config.at("vision_config"),
                                HfReader(out, origin, "/text_config").small_or("hidden_size", 0, 0),
                                origin));
  }
  return out;
}

void read_hf_gemma(HfReader& r, const std::string& type, const std::string& origin, ModelSpec& m) {
  // Every Gemma gates its MLP with the tanh-approximated GELU (HF GemmaMLP / Gemma2MLP /
  // Gemma3MLP: down(act(gate(x)) * up(x)), hidden_activation "gelu_pytorch_tanh"; Gemma 1's
  // configs say "hidden_act": "gelu", which transformers >= 4.39 runs as the approximation),
  // multiplies the embedded tokens by sqrt(hidden) and ties the LM head to the embedding.
  const std::string act = r.string_or("hidden_activation", r.string_or("hidden_act", "gelu"));
  if (!act.starts_with("gelu")) {
    throw ValidationError("hidden_activation",
                          fmt::format("{}: hidden_activation: '{}' is not modelled for {}; loom "
                                      "knows Gemma's GELU-gated MLP (gelu, gelu_pytorch_tanh)",
                                      origin, act, type));
  }
  m.mlp = MlpKind::GEGLU;
  m.scaled_embedding = true;
  if (type == "gemma") return;
  // Gemma 2 and 3 normalise each block's input and output (Gemma2DecoderLayer /
  // Gemma3DecoderLayer: input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
  // post_feedforward_layernorm) and may cap the attention scores and the final logits
  // (Gemma 2: attn_logit_softcapping 50, final_logit_softcapping 30; Gemma 3 has query/key
  // norms instead, model_loader.cpp).
  m.sandwich_norms = true;
  m.attn_logit_softcap = r.number_or("attn_logit_softcapping", 0);
  m.final_logit_softcap = r.number_or("final_logit_softcapping", 0);
}

}  // namespace loom::models::detail
