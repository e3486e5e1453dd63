#include "models/model_loader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "models/hf_gemma.hpp"
#include "models/hf_reader.hpp"

namespace loom::models {
namespace {

using detail::HfReader;

// The model's name when its file gives none: the file's stem, printable (a path may hold
// any byte; the name is printed in tables and JSON).
std::string stem_of(const std::string& path) {
  std::filesystem::path p(path);
  std::string stem = p.stem().string();
  // "config.json" says nothing; name it after its folder.
  if (stem == "config" && p.has_parent_path() && !p.parent_path().filename().empty())
    stem = p.parent_path().filename().string();
  return printable(stem, MAX_ECHO_BYTES);
}

bool looks_like_hf(const nlohmann::json& j) {
  return j.is_object() && (j.contains("model_type") || j.contains("architectures"));
}

int to_int(std::int64_t v, ObjectReader& r, std::string_view key) {
  if (v > (std::int64_t{1} << 30)) r.fail(key, std::to_string(v), "a count below 2^30");
  return static_cast<int>(v);
}

// The enum spelled at `key` (one of `names`, indexed by the enum's value), else `fallback`.
template <typename Enum>
Enum get_enum_or(ObjectReader& r, std::string_view key, const std::vector<std::string>& names,
                 Enum fallback) {
  const std::string name = r.get_enum_or(key, names, names[static_cast<size_t>(fallback)]);
  return static_cast<Enum>(std::find(names.begin(), names.end(), name) - names.begin());
}

// head_dim: the given one, else hidden / heads. A base's head_dim is kept only while neither
// hidden nor heads changes: a preset whose head_dim is hidden / heads (Llama, GPT) would
// otherwise keep a size that no longer matches, and one whose head_dim is its own (Qwen3,
// Gemma) cannot tell what the new shape wants. Rotary embeddings rotate pairs of
// channels (RoFormer, Su et al. 2021, Sec. 3.2.2), so a RoPE head_dim must be even.
std::int64_t read_head_dim(ObjectReader& r, const ModelSpec& m, bool from_base) {
  if (r.has("head_dim")) {
    const std::int64_t d = r.get_positive_int("head_dim");
    if (r.get_bool_or("rope", m.rope) && d % 2 != 0 && !r.has("mla"))
      r.fail("head_dim", std::to_string(d),
             "an even size: rotary embeddings rotate channel pairs (or \"rope\": false)");
    return d;
  }
  // MLA's head size is its own (qk_nope + qk_rope), set with the mla block.
  if (r.has("mla") || m.attention == AttentionKind::MLA ||
      (from_base && !r.has("hidden") && !r.has("heads")))
    return m.head_dim;
  if (m.hidden % m.heads != 0)
    r.fail("head_dim", "hidden / heads",
           fmt::format("a \"head_dim\" key: hidden {} is not a multiple of heads {}", m.hidden,
                       m.heads));
  return m.hidden / m.heads;
}

// Reads a loom model object. Keys not present keep the values of `m` (a preset when "base"
// is given, else defaults); without a base, the core sizes are required.
ModelSpec read_loom_model(ObjectReader& r, const std::string& origin) {
  ModelSpec m;
  r.allow({"comment", "$schema"});
  bool from_base = false;
  if (r.has("base")) {
    m = model_preset(r.get_string("base"), r.pointer_of("base"));
    from_base = true;
  }
  m.name = r.get_name_or("name", from_base ? m.name : stem_of(origin));
  m.kind = get_enum_or(r, "kind", model_kind_names(), m.kind);
  auto size = [&](std::string_view key, std::int64_t current) {
    return (from_base || r.has(key) ? r.get_positive_int_or(key, current)
                                    : r.get_positive_int(key));
  };
  if (m.kind == ModelKind::MLP) {
    m.layers = to_int(size("depth", m.layers), r, "depth");
    m.hidden = size("width", m.hidden);
    m.vocab = size("classes", m.vocab);
    m.default_seq = 1;
    r.finish();
    return m;
  }
  m.layers = to_int(size("layers", m.layers), r, "layers");
  m.hidden = size("hidden", m.hidden);
  m.heads = to_int(size("heads", m.heads), r, "heads");
  m.kv_heads =
      to_int(r.get_positive_int_or("kv_heads", from_base ? m.kv_heads : m.heads), r, "kv_heads");
  m.head_dim = read_head_dim(r, m, from_base);
  m.vocab = size("vocab", m.vocab);
  m.mlp = get_enum_or(r, "mlp", mlp_kind_names(), m.mlp);
  m.activation_clamp = r.get_number_or("activation_clamp", m.activation_clamp);
  m.norm = get_enum_or(r, "norm", norm_kind_names(), m.norm);
  m.tied_embeddings = r.get_bool_or("tied_embeddings", m.tied_embeddings);
  m.linear_bias = r.get_bool_or("linear_bias", m.linear_bias);
  m.qkv_bias = r.get_bool_or("qkv_bias", m.qkv_bias);
  m.qk_norm = r.get_bool_or("qk_norm", m.qk_norm);
  m.sandwich_norms = r.get_bool_or("sandwich_norms", m.sandwich_norms);
  m.attn_logit_softcap = r.get_number_or("attn_logit_softcap", m.attn_logit_softcap);
  m.final_logit_softcap = r.get_number_or("final_logit_softcap", m.final_logit_softcap);
  m.scaled_embedding = r.get_bool_or("scaled_embedding", m.scaled_embedding);
  m.dropout = r.get_bool_or("dropout", m.dropout);
  m.max_position_embeddings = r.get_count_or("max_position_embeddings", m.max_position_embeddings);
  m.mtp_layers = to_int(r.get_count_or("mtp_layers", m.mtp_layers), r, "mtp_layers");
  m.default_seq = r.get_positive_int_or("seq", m.default_seq);
  m.sliding_window = r.get_count_or("sliding_window", m.sliding_window);
  m.sliding_window_pattern =
      to_int(r.get_count_or("sliding_window_pattern", m.sliding_window_pattern), r,
             "sliding_window_pattern");
  if (r.has("mla")) {
    ObjectReader a = r.child("mla");
    m.attention = AttentionKind::MLA;
    m.mla.q_lora_rank = a.get_count_or("q_lora_rank", m.mla.q_lora_rank);
    m.mla.kv_lora_rank = a.get_positive_int("kv_lora_rank");
    m.mla.qk_rope_head_dim = a.get_positive_int("qk_rope_head_dim");
    m.mla.qk_nope_head_dim = a.get_positive_int("qk_nope_head_dim");
    m.mla.v_head_dim = a.get_positive_int("v_head_dim");
    a.finish();
    m.kv_heads = m.heads;
    const std::int64_t qk = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim;
    if (r.has("head_dim") && m.head_dim != qk)
      r.fail("head_dim", std::to_string(m.head_dim),
             fmt::format("mla.qk_nope_head_dim + mla.qk_rope_head_dim = {}, or no head_dim", qk));
    m.head_dim = qk;
  }
  m.rope = r.get_bool_or("rope", m.rope);
  m.pattern = r.get_string_or("pattern", m.pattern);
  m.mtp_pattern = r.get_string_or("mtp_pattern", m.mtp_pattern);
  m.mtp_repeated_layer = r.get_bool_or("mtp_repeated_layer", m.mtp_repeated_layer);
  if (r.has("mamba")) {
    ObjectReader a = r.child("mamba");
    m.mamba.heads = to_int(a.get_positive_int("heads"), a, "heads");
    m.mamba.head_dim = a.get_positive_int("head_dim");
    m.mamba.state = a.get_positive_int("state");
    m.mamba.groups = to_int(a.get_positive_int("groups"), a, "groups");
    m.mamba.conv_kernel = to_int(a.get_positive_int_or("conv_kernel", 4), a, "conv_kernel");
    m.mamba.chunk = a.get_positive_int_or("chunk", 128);
    a.finish();
  }
  if (r.has("moe")) {
    ObjectReader e = r.child("moe");
    m.moe.experts = to_int(e.get_positive_int("experts"), e, "experts");
    m.moe.top_k = to_int(e.get_positive_int("top_k"), e, "top_k");
    m.moe.expert_ffn = e.get_positive_int("expert_ffn");
    m.moe.shared_experts = to_int(e.get_count_or("shared_experts", 0), e, "shared_experts");
    m.moe.shared_ffn = e.get_count_or("shared_ffn", 0);
    m.moe.first_k_dense = to_int(e.get_count_or("first_k_dense", 0), e, "first_k_dense");
    m.moe.capacity_factor = e.get_number_or("capacity_factor", 1.0);
    if (!(m.moe.capacity_factor > 0))
      e.fail("capacity_factor", fmt::format("{}", m.moe.capacity_factor), "a positive number");
    m.moe.router_bias = e.get_bool_or("router_bias", false);
    m.moe.shared_expert_gate = e.get_bool_or("shared_expert_gate", false);
    m.moe.routing_groups = to_int(e.get_count_or("routing_groups", 0), e, "routing_groups");
    m.moe.routing_group_top_k =
        to_int(e.get_count_or("routing_group_top_k", 0), e, "routing_group_top_k");
    m.moe.latent = e.get_count_or("latent", 0);
    e.finish();
  }
  const bool needs_ffn = m.has_dense_layers();
  if (needs_ffn)
    m.ffn = size("ffn", m.ffn);
  else
    m.ffn = r.get_count_or("ffn", m.ffn);
  r.finish();
  return m;
}

// The HuggingFace sliding-window layout as loom's (sliding_window, sliding_window_pattern):
// `layer_types` ("sliding_attention" / "full_attention" per layer) when given, else Gemma 3's
// `sliding_window_pattern` (layer i full when (i + 1) % pattern == 0: transformers
// Gemma3TextConfig; a pattern beyond the layer count leaves every layer windowed), else every
// layer windowed (Mistral); GPT-OSS and Gemma 2 without `layer_types` alternate, sliding first
// (transformers GptOssConfig.__post_init__; Gemma2Attention: `sliding_window if not
// bool(layer_idx % 2)`). Only periodic layouts (every k-th layer full) are representable.
void read_hf_sliding_window(HfReader& r, const std::string& type, const std::string& origin,
                            ModelSpec& m) {
  // Qwen2/Qwen3 configs carry a sliding_window that `use_sliding_window: false` disables.
  m.sliding_window =
      r.boolean_or("use_sliding_window", true) ? r.small_or("sliding_window", 0, 0) : 0;
  if (m.sliding_window == 0) return;
  const bool qwen = type.starts_with("qwen");
  const bool has_types = r.has("layer_types");
  if (qwen && !has_types) {
    // transformers Qwen2/Qwen3: layer i slides when i >= max_window_layers (the first ones
    // keep full attention), which is periodic only at the extremes.
    const int full_first = r.small_or("max_window_layers", m.layers, 0);
    if (full_first >= m.layers) m.sliding_window = 0;
    if (full_first == 0 || full_first >= m.layers) return;
    throw ValidationError(
        "max_window_layers",
        fmt::format("{}: /max_window_layers: {} full-attention layers before {} sliding ones is "
                    "not a periodic layout; write a loom model JSON with sliding_window and "
                    "sliding_window_pattern instead",
                    origin, full_first, m.layers - full_first));
  }
  if (!has_types) {
    const bool alternate = type == "gpt_oss" || type == "gemma2";
    m.sliding_window_pattern = alternate ? 2 : r.small_or("sliding_window_pattern", 0, 0);
    if (m.sliding_window_pattern > m.layers) m.sliding_window_pattern = 0;
    return;
  }
  const nlohmann::json& types = r.raw("layer_types");
  std::vector<bool> full;
  if (types.is_array()) {
    for (const auto& t : types) {
      if (!t.is_string()) break;
      const std::string name = t.get<std::string>();
      if (name != "sliding_attention" && name != "full_attention") break;
      full.push_back(name == "full_attention");
    }
  }
  if (!types.is_array() || full.size() != types.size() ||
      full.size() != static_cast<size_t>(m.layers)) {
    throw ValidationError(
        "layer_types",
        fmt::format("{}: /layer_types: expected one \"sliding_attention\" or \"full_attention\" "
                    "per layer ({} layers)",
                    origin, m.layers));
  }
  if (std::all_of(full.begin(), full.end(), [](bool f) { return f; })) {
    m.sliding_window = 0;  // no layer is windowed
    return;
  }
  for (int k = 0; k <= m.layers; ++k) {
    bool matches = true;
    for (int i = 0; i < m.layers && matches; ++i)
      matches = full[static_cast<size_t>(i)] == ModelSpec::full_attention_layer(k, i);
    if (matches) {
      m.sliding_window_pattern = k;
      return;
    }
  }
  throw ValidationError(
      "layer_types",
      fmt::format("{}: /layer_types: only periodic layouts are supported (every k-th layer "
                  "\"full_attention\", the others \"sliding_attention\"); write a loom model "
                  "JSON with sliding_window and sliding_window_pattern instead",
                  origin));
}

// NVIDIA's hybrid Nemotron-H / Nemotron 3 (transformers NemotronHConfig): the layer types
// from `hybrid_override_pattern` (M, *, -, E) or a `layers_block_type` list (mamba,
// attention, mlp, moe); Mamba-2 mixers; non-gated MLPs (relu2); attention without position
// encoding (Megatron --position-embedding-type none); MoE layers with a sigmoid router and
// expert bias, an optional LatentMoE width, and MTP depths.
void read_hf_nemotron_h(HfReader& r, const std::string& origin, ModelSpec& m) {
  if (r.has("hybrid_override_pattern")) {
    m.pattern = r.string_or("hybrid_override_pattern", "");
  } else if (r.has("layers_block_type") && r.raw("layers_block_type").is_array()) {
    static const std::vector<std::pair<std::string, char>> blocks = {
        {"mamba", 'M'}, {"attention", '*'}, {"mlp", '-'}, {"moe", 'E'}};
    for (const auto& v : r.raw("layers_block_type")) {
      const std::string name = v.is_string() ? v.get<std::string>() : "";
      const auto it = std::find_if(blocks.begin(), blocks.end(),
                                   [&](const auto& b) { return b.first == name; });
      if (it == blocks.end()) {
        throw ValidationError(
            "layers_block_type",
            fmt::format("{}: /layers_block_type: '{}' is not a layer type; expected mamba, "
                        "attention, mlp or moe",
                        origin, name));
      }
      m.pattern += it->second;
    }
  } else {
    throw ConfigError::missing_key(origin, "/", "hybrid_override_pattern");
  }
  const std::string act = r.string_or("mlp_hidden_act", "relu2");
  if (act != "relu2") {
    throw ValidationError("mlp_hidden_act",
                          fmt::format("{}: /mlp_hidden_act: '{}' is not modelled for nemotron_h; "
                                      "loom knows relu2 (squared ReLU)",
                                      origin, act));
  }
  m.mlp = MlpKind::RELU2;
  m.rope = false;
  m.head_dim = r.integer_or("head_dim", r.integer_or("attention_head_dim", m.head_dim));
  m.mamba.heads = r.small("mamba_num_heads", 1);
  m.mamba.head_dim = r.integer("mamba_head_dim");
  m.mamba.state = r.integer("ssm_state_size");
  m.mamba.groups = r.small("n_groups", 1);
  m.mamba.conv_kernel = r.small_or("conv_kernel", 4, 1);
  m.mamba.chunk = r.integer_or("chunk_size", 128);
  if (m.pattern.find('E') != std::string::npos) {
    m.moe.experts = r.small("n_routed_experts", 1);
    m.moe.top_k = r.small("num_experts_per_tok", 1);
    m.moe.expert_ffn = r.integer("moe_intermediate_size");
    m.moe.shared_experts = r.small_or("n_shared_experts", 0, 0);
    m.moe.shared_ffn = r.integer_or("moe_shared_expert_intermediate_size", 0);
    m.moe.latent = r.integer_or("moe_latent_size", 0);
    m.moe.router_bias = true;  // sigmoid scores with a per-expert correction bias
  }
  m.mtp_layers = r.small_or("num_nextn_predict_layers", 0, 0);
  if (m.mtp_layers > 0) m.mtp_pattern = r.string_or("mtp_hybrid_override_pattern", "");
}

// Translates a parsed HuggingFace config (see import_hf_config).
ModelSpec import_hf_json(const nlohmann::json& config, const std::string& origin) {
  HfReader(config, origin);  // throws unless the config is an object
  if (!config.contains("model_type") || !config.at("model_type").is_string())
    throw ConfigError::missing_key(origin, "/", "model_type");
  const std::string type = config.at("model_type").get<std::string>();
  const auto& types = hf_model_types();
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    throw ValidationError(
        "model_type",
        fmt::format("{}: /model_type: unsupported HuggingFace model_type '{}'; supported: {}",
                    origin, type, join(types, ", ")));
  }
  // A Gemma config is read as transformers reads it: a gemma3 config's text_config, the
  // keys it leaves out from the config class's defaults (models/hf_gemma.cpp).
  const bool gemma = detail::is_gemma_type(type);
  std::vector<std::string> notes;
  const nlohmann::json decoder =
      gemma ? detail::gemma_decoder_config(config, type, origin, notes) : nlohmann::json();
  HfReader r(gemma ? decoder : config, origin, type == "gemma3" ? "/text_config" : "");
  ModelSpec m;
  m.notes = std::move(notes);
  m.name = stem_of(origin);
  m.layers = r.small("num_hidden_layers", 1);
  m.hidden = r.integer("hidden_size");
  m.heads = r.small("num_attention_heads", 1);
  m.kv_heads = r.small_or("num_key_value_heads", m.heads, 1);
  m.head_dim = r.integer_or("head_dim", m.hidden / m.heads);
  m.ffn = r.integer_or("intermediate_size", 0);
  m.vocab = r.integer("vocab_size");
  m.mlp = MlpKind::SWIGLU;
  m.norm = NormKind::RMSNORM;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.default_seq = 4096;
  if (type == "qwen2" || type == "qwen2_moe") m.qkv_bias = true;
  // OLMo 2 normalises the whole query and key projections (transformers modeling_olmo2.py
  // Olmo2Attention q_norm / k_norm over heads x head_dim): the same bytes as per-head norms.
  // Gemma 3 replaces Gemma 2's score cap with query/key norms over head_dim (Gemma3Attention
  // q_norm / k_norm; Gemma 3 report, arXiv:2503.19786, Sec. 2).
  if (type == "qwen3" || type == "qwen3_moe" || type == "olmo2" || type == "gemma3" ||
      type == "gemma3_text")
    m.qk_norm = true;
  // Phi-3 fuses qkv_proj and gate_up_proj (transformers modeling_phi3.py): the same matmul
  // FLOPs and parameters as separate projections; its sliding_window applies to every layer.
  if (r.boolean_or("attention_bias", false)) m.qkv_bias = true;
  if (type == "mixtral" || type == "gpt_oss") {
    m.moe.experts = r.small("num_local_experts", 1);
    m.moe.top_k = r.small("num_experts_per_tok", 1);
    m.moe.expert_ffn = m.ffn;
    // GPT-OSS: biases on the attention projections (attention_bias) and on every expert
    // linear (gate_up_proj_bias, down_proj_bias; transformers modeling_gpt_oss.py).
    // It also clamps the gated activation's halves (GptOssConfig swiglu_limit, default 7.0).
    if (type == "gpt_oss") {
      m.linear_bias = true;
      m.activation_clamp = 7.0;
      if (r.has("swiglu_limit")) {
        const nlohmann::json& limit = r.raw("swiglu_limit");
        if (!limit.is_number() || !(limit.get<double>() >= 0))
          throw ValidationError("swiglu_limit",
                                fmt::format("{}: /swiglu_limit: {} is not a non-negative number",
                                            origin, json_excerpt(limit)));
        m.activation_clamp = limit.get<double>();
      }
    }
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    m.moe.experts = r.small("num_experts", 1);
    m.moe.top_k = r.small("num_experts_per_tok", 1);
    m.moe.expert_ffn = r.integer("moe_intermediate_size");
    if (r.integer_or("decoder_sparse_step", 1) != 1 ||
        (r.has("mlp_only_layers") && !r.raw("mlp_only_layers").empty())) {
      throw ValidationError(
          "decoder_sparse_step",
          fmt::format("{}: /decoder_sparse_step: only configs where every layer is MoE "
                      "(decoder_sparse_step 1, mlp_only_layers []) are supported",
                      origin));
    }
    std::int64_t shared = r.integer_or("shared_expert_intermediate_size", 0);
    if (shared > 0) {
      m.moe.shared_experts = 1;
      m.moe.shared_ffn = shared;
      m.moe.shared_expert_gate = true;
    }
  } else if (type == "deepseek_v3") {
    m.attention = AttentionKind::MLA;
    m.mla.q_lora_rank = r.integer_or("q_lora_rank", 0);
    m.mla.kv_lora_rank = r.integer("kv_lora_rank");
    m.mla.qk_rope_head_dim = r.integer("qk_rope_head_dim");
    m.mla.qk_nope_head_dim = r.integer("qk_nope_head_dim");
    m.mla.v_head_dim = r.integer("v_head_dim");
    m.kv_heads = m.heads;
    m.head_dim = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim;
    m.moe.experts = r.small("n_routed_experts", 1);
    m.moe.top_k = r.small("num_experts_per_tok", 1);
    m.moe.expert_ffn = r.integer("moe_intermediate_size");
    m.moe.shared_experts = r.small_or("n_shared_experts", 0, 0);
    m.moe.first_k_dense = r.small_or("first_k_dense_replace", 0, 0);
    m.moe.router_bias = r.string_or("topk_method", "") == "noaux_tc";
    m.moe.routing_groups = r.small_or("n_group", 0, 0);
    m.moe.routing_group_top_k = r.small_or("topk_group", 0, 0);
    if (m.moe.routing_groups <= 1) m.moe.routing_groups = m.moe.routing_group_top_k = 0;
    m.mtp_layers = r.small_or("num_nextn_predict_layers", 0, 0);
  } else if (type == "nemotron_h") {
    read_hf_nemotron_h(r, origin, m);
  } else if (gemma) {
    detail::read_hf_gemma(r, type, origin, m);
  }
  read_hf_sliding_window(r, type, origin, m);
  validate_model(m);
  return m;
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types = {
      "deepseek_v3", "gemma",     "gemma2",  "gemma3",     "gemma3_text", "gpt_oss",
      "llama",       "mistral",   "mixtral", "nemotron_h", "olmo2",       "phi3",
      "qwen2",       "qwen2_moe", "qwen3",   "qwen3_moe"};
  return types;
}

ModelSpec import_hf_config(const std::string& text, const std::string& origin) {
  return import_hf_json(parse_json_text(text, origin), origin);
}

ModelSpec parse_model_json(const std::string& text, const std::string& origin) {
  nlohmann::json j = parse_json_text(text, origin);
  if (looks_like_hf(j)) return import_hf_json(j, origin);
  ObjectReader r(j, origin, "");
  ModelSpec m = read_loom_model(r, origin);
  validate_model(m);
  return m;
}

ModelSpec load_model_file(const std::string& path) {
  // A HuggingFace model folder holds its config.json.
  std::error_code ec;
  const std::filesystem::path config = std::filesystem::path(path) / "config.json";
  if (std::filesystem::is_directory(path, ec) && std::filesystem::is_regular_file(config, ec))
    return parse_model_json(read_text_file(config.string(), "model"), config.string());
  return parse_model_json(read_text_file(path, "model"), path);
}

ModelSpec load_model(const std::string& arg, const std::string& field) {
  const auto names = model_preset_names();
  if (std::find(names.begin(), names.end(), to_lower(arg)) != names.end()) {
    ModelSpec m = model_preset(arg);
    validate_model(m);
    return m;
  }
  std::error_code ec;  // a name too long for a path is not a path
  const bool is_path = arg.find('/') != std::string::npos ||
                       (arg.size() > 5 && arg.ends_with(".json")) ||
                       std::filesystem::exists(arg, ec);
  if (is_path) return load_model_file(arg);
  return model_preset(arg, field);
}

}  // namespace loom::models
