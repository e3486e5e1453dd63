#include "models/model_spec.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <utility>

#include "common/error.hpp"

namespace loom::models {

std::int64_t ModelSpec::q_width() const {
  if (attention == AttentionKind::MLA) return heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim);
  return heads * head_dim;
}
std::int64_t ModelSpec::k_width() const {
  if (attention == AttentionKind::MLA) return heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim);
  return kv_heads * head_dim;
}
std::int64_t ModelSpec::v_width() const {
  if (attention == AttentionKind::MLA) return heads * mla.v_head_dim;
  return kv_heads * head_dim;
}
std::int64_t ModelSpec::attn_out_width() const {
  if (attention == AttentionKind::MLA) return heads * mla.v_head_dim;
  return heads * head_dim;
}

// Each list is indexed by its enum's value.
const std::vector<std::string>& model_kind_names() {
  static const std::vector<std::string> names = {"transformer", "mlp"};
  return names;
}
const std::vector<std::string>& mlp_kind_names() {
  static const std::vector<std::string> names = {"swiglu", "gelu", "relu2", "geglu"};
  return names;
}
const std::vector<std::string>& norm_kind_names() {
  static const std::vector<std::string> names = {"rmsnorm", "layernorm"};
  return names;
}

std::string to_string(ModelKind value) {
  return model_kind_names()[static_cast<size_t>(value)];
}
std::string to_string(MlpKind value) {
  return mlp_kind_names()[static_cast<size_t>(value)];
}
std::string to_string(NormKind value) {
  return norm_kind_names()[static_cast<size_t>(value)];
}
std::string to_string(AttentionKind value) {
  return value == AttentionKind::MLA ? "mla" : "mha";
}
std::string to_string(LayerKind value) {
  static constexpr const char* NAMES[LAYER_KINDS] = {"dense",     "moe", "mamba",
                                                     "attention", "mlp", "moe mlp"};
  return NAMES[static_cast<size_t>(value)];
}

LayerKind ModelSpec::layer_kind(int layer_index) const {
  if (pattern.empty()) {
    return is_moe() && layer_index >= moe.first_k_dense ? LayerKind::MOE : LayerKind::DENSE;
  }
  switch (pattern[static_cast<size_t>(layer_index)]) {
    case 'M':
      return LayerKind::MAMBA;
    case '*':
      return LayerKind::ATTENTION;
    case 'E':
      return LayerKind::MOE_MLP;
    default:
      return LayerKind::MLP;
  }
}

namespace {

void require_positive(std::int64_t value, const char* field) {
  if (value <= 0) throw ValidationError::not_positive(field, std::to_string(value));
}

// Far above any published model, low enough that products of sizes stay exact in int64 and
// a run cannot allocate or loop without bound.
void require_at_most(std::int64_t value, std::int64_t max, const char* field) {
  if (value > max) {
    throw ValidationError(field, fmt::format("{}: {} is beyond the supported maximum {}; give a "
                                             "realistic size",
                                             field, value, max));
  }
}

// Group-limited routing: none (both 0), or groups that split the experts evenly, at least
// one chosen per token and enough chosen experts for top_k.
void validate_routing_groups(const MoeSpec& moe) {
  const int g = moe.routing_groups, k = moe.routing_group_top_k;
  if (g == 0 && k == 0) return;
  if (g <= 0 || moe.experts % g != 0) {
    throw ValidationError("model.moe.routing_groups",
                          fmt::format("model.moe.routing_groups: {} must divide model.moe.experts "
                                      "{} evenly; give a divisor, or 0 for no group limit",
                                      g, moe.experts));
  }
  if (k <= 0 || k > g || static_cast<std::int64_t>(k) * (moe.experts / g) < moe.top_k) {
    throw ValidationError(
        "model.moe.routing_group_top_k",
        fmt::format("model.moe.routing_group_top_k: {} must lie in [1, routing_groups {}] and "
                    "its groups hold at least top_k {} experts ({} per group)",
                    k, g, moe.top_k, moe.experts / g));
  }
}

// One MLP block of intermediate size f over `width` features (the hidden size, or a routed
// expert's latent): SwiGLU and GeGLU have gate, up and down; GELU and squared ReLU up and down.
double mlp_params(const ModelSpec& m, std::int64_t f, std::int64_t width) {
  const double h = static_cast<double>(width);
  if (gated_mlp(m.mlp)) return 3.0 * h * f + (m.linear_bias ? 2.0 * f + h : 0.0);
  return 2.0 * h * f + (m.linear_bias ? 1.0 * f + h : 0.0);
}

// A Mamba-2 mixer (Megatron-core MambaMixer): in_proj (no bias), the depthwise conv with its
// bias, A_log, D and dt_bias per head, the gated RMSNorm's scale, out_proj (no bias).
double mamba_params(const ModelSpec& m) {
  const MambaSpec& s = m.mamba;
  const double h = static_cast<double>(m.hidden);
  return h * static_cast<double>(s.in_proj_width()) +
         static_cast<double>(s.conv_channels()) * (s.conv_kernel + 1) + 3.0 * s.heads +
         static_cast<double>(s.inner()) + static_cast<double>(s.inner()) * h;
}

// The hybrid pattern: one known block per layer, each with the sizes it needs.
void validate_pattern(const ModelSpec& m) {
  if (m.pattern.empty()) {
    if (!m.mtp_pattern.empty())
      throw ValidationError("model.mtp_pattern",
                            "model.mtp_pattern: needs a hybrid model.pattern; drop it");
    return;
  }
  if (static_cast<std::int64_t>(m.pattern.size()) != m.layers) {
    throw ValidationError("model.pattern",
                          fmt::format("model.pattern: {} characters for model.layers {}; give one "
                                      "character per layer",
                                      m.pattern.size(), m.layers));
  }
  const auto bad = m.pattern.find_first_not_of("M*-E");
  if (bad != std::string::npos) {
    throw ValidationError(
        "model.pattern",
        fmt::format("model.pattern: '{}' at layer {} is not a layer type; use M (Mamba-2), * "
                    "(attention), - (MLP) or E (MoE)",
                    m.pattern[bad], bad));
  }
  if (m.pattern.find('E') != std::string::npos && !m.is_moe()) {
    throw ValidationError("model.moe", "model.moe: the pattern has MoE layers (E); give model.moe");
  }
  if (m.is_moe() && m.pattern.find('E') == std::string::npos) {
    throw ValidationError("model.moe",
                          "model.moe: the pattern has no MoE layer (E); drop model.moe or add one");
  }
  for (const char c : m.mtp_pattern) {
    if (m.pattern.find(c) == std::string::npos) {
      throw ValidationError("model.mtp_pattern",
                            fmt::format("model.mtp_pattern: '{}' is not a layer type of the "
                                        "pattern; use characters of model.pattern",
                                        c));
    }
  }
  if (m.moe.first_k_dense != 0) {
    throw ValidationError("model.moe.first_k_dense",
                          "model.moe.first_k_dense: the pattern places the dense and MoE layers; "
                          "give 0");
  }
  const MambaSpec& s = m.mamba;
  if (!m.has_mamba()) {
    if (s.heads != 0) {
      throw ValidationError("model.mamba",
                            "model.mamba: the pattern has no Mamba layer (M); drop model.mamba or "
                            "add one");
    }
    return;
  }
  if (s.heads == 0) {
    throw ValidationError("model.mamba",
                          "model.mamba: the pattern has Mamba layers (M); give model.mamba");
  }
  const std::pair<std::int64_t, std::int64_t> sizes[] = {
      {s.heads, MAX_MODEL_HEADS},  {s.head_dim, MAX_MODEL_WIDTH},    {s.state, MAX_MODEL_WIDTH},
      {s.groups, MAX_MODEL_HEADS}, {s.conv_kernel, MAX_MODEL_WIDTH}, {s.chunk, MAX_MODEL_SEQ}};
  const char* fields[] = {"model.mamba.heads",  "model.mamba.head_dim",    "model.mamba.state",
                          "model.mamba.groups", "model.mamba.conv_kernel", "model.mamba.chunk"};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    require_positive(sizes[i].first, fields[i]);
    require_at_most(sizes[i].first, sizes[i].second, fields[i]);
  }
  if (s.heads % s.groups != 0) {
    throw ValidationError("model.mamba.groups",
                          fmt::format("model.mamba.groups: {} does not divide model.mamba.heads "
                                      "{}; give a divisor of the head count",
                                      s.groups, s.heads));
  }
}

}  // namespace

void validate_model(const ModelSpec& m) {
  require_positive(m.layers, "model.layers");
  require_positive(m.hidden, "model.hidden");
  require_positive(m.vocab, "model.vocab");
  require_at_most(m.layers, MAX_MODEL_LAYERS, "model.layers");
  require_at_most(m.hidden, MAX_MODEL_WIDTH, "model.hidden");
  require_at_most(m.vocab, MAX_MODEL_VOCAB, "model.vocab");
  require_at_most(m.default_seq, MAX_MODEL_SEQ, "model.seq");
  if (m.kind == ModelKind::MLP) return;
  require_positive(m.heads, "model.heads");
  require_at_most(m.heads, MAX_MODEL_HEADS, "model.heads");
  require_at_most(m.kv_heads, MAX_MODEL_HEADS, "model.kv_heads");
  require_at_most(m.head_dim, MAX_MODEL_WIDTH, "model.head_dim");
  require_at_most(m.ffn, MAX_MODEL_WIDTH, "model.ffn");
  require_at_most(m.max_position_embeddings, MAX_MODEL_SEQ, "model.max_position_embeddings");
  require_at_most(m.mla.q_lora_rank, MAX_MODEL_WIDTH, "model.mla.q_lora_rank");
  require_at_most(m.mla.kv_lora_rank, MAX_MODEL_WIDTH, "model.mla.kv_lora_rank");
  require_at_most(m.mla.qk_rope_head_dim, MAX_MODEL_WIDTH, "model.mla.qk_rope_head_dim");
  require_at_most(m.mla.qk_nope_head_dim, MAX_MODEL_WIDTH, "model.mla.qk_nope_head_dim");
  require_at_most(m.mla.v_head_dim, MAX_MODEL_WIDTH, "model.mla.v_head_dim");
  require_at_most(m.moe.experts, MAX_MODEL_HEADS, "model.moe.experts");
  require_at_most(m.moe.expert_ffn, MAX_MODEL_WIDTH, "model.moe.expert_ffn");
  require_at_most(m.moe.shared_experts, MAX_MODEL_HEADS, "model.moe.shared_experts");
  require_at_most(m.moe.shared_ffn, MAX_MODEL_WIDTH, "model.moe.shared_ffn");
  require_at_most(m.moe.latent, MAX_MODEL_WIDTH, "model.moe.latent");
  if (m.moe.latent < 0)
    throw ValidationError::not_positive("model.moe.latent", std::to_string(m.moe.latent));
  validate_pattern(m);
  require_at_most(m.mtp_layers, MAX_MODEL_LAYERS, "model.mtp_layers");
  require_at_most(m.sliding_window, MAX_MODEL_SEQ, "model.sliding_window");
  require_at_most(m.sliding_window_pattern, MAX_MODEL_LAYERS, "model.sliding_window_pattern");
  if (m.sliding_window < 0)
    throw ValidationError::not_positive("model.sliding_window", std::to_string(m.sliding_window));
  if (m.sliding_window_pattern < 0)
    throw ValidationError::not_positive("model.sliding_window_pattern",
                                        std::to_string(m.sliding_window_pattern));
  if (m.sliding_window_pattern > 0 && m.sliding_window == 0) {
    throw ValidationError("model.sliding_window_pattern",
                          fmt::format("model.sliding_window_pattern: {} needs model.sliding_window "
                                      "(the window of the other layers); give one or drop the "
                                      "pattern",
                                      m.sliding_window_pattern));
  }
  if (m.sliding_window_pattern > m.layers) {
    throw ValidationError("model.sliding_window_pattern",
                          fmt::format("model.sliding_window_pattern: {} exceeds model.layers {}; "
                                      "give 1 to {} (every k-th layer full) or 0 (all windowed)",
                                      m.sliding_window_pattern, m.layers, m.layers));
  }
  if (!(m.activation_clamp >= 0) || !std::isfinite(m.activation_clamp)) {
    throw ValidationError("model.activation_clamp",
                          fmt::format("model.activation_clamp: {} is not a finite non-negative "
                                      "number; give the clamp (GPT-OSS 7) or 0 for none",
                                      m.activation_clamp));
  }
  for (const auto& [cap, field] : {std::pair{m.attn_logit_softcap, "model.attn_logit_softcap"},
                                   std::pair{m.final_logit_softcap, "model.final_logit_softcap"}}) {
    if (!(cap >= 0) || !std::isfinite(cap)) {
      throw ValidationError(field, fmt::format("{}: {} is not a finite non-negative number; give "
                                               "the cap (Gemma 2: 50 and 30) or 0 for none",
                                               field, cap));
    }
  }
  if (m.activation_clamp > 0 && m.mlp != MlpKind::SWIGLU) {
    throw ValidationError("model.activation_clamp",
                          fmt::format("model.activation_clamp: {} clamps a gated MLP's two halves, "
                                      "and model.mlp is {}; use mlp \"swiglu\" or drop the clamp",
                                      m.activation_clamp, to_string(m.mlp)));
  }
  if (m.mtp_layers < 0)
    throw ValidationError::not_positive("model.mtp_layers", std::to_string(m.mtp_layers));
  if (m.mtp_repeated_layer && m.mtp_layers < 2) {
    throw ValidationError("model.mtp_repeated_layer",
                          fmt::format("model.mtp_repeated_layer: repeats one MTP module over the "
                                      "depths, and model.mtp_layers is {}; give 2 or more, or "
                                      "drop it",
                                      m.mtp_layers));
  }
  if (m.max_position_embeddings < 0)
    throw ValidationError::not_positive("model.max_position_embeddings",
                                        std::to_string(m.max_position_embeddings));
  if (m.attention == AttentionKind::MLA) {
    require_positive(m.mla.kv_lora_rank, "model.mla.kv_lora_rank");
    require_positive(m.mla.qk_rope_head_dim, "model.mla.qk_rope_head_dim");
    require_positive(m.mla.qk_nope_head_dim, "model.mla.qk_nope_head_dim");
    require_positive(m.mla.v_head_dim, "model.mla.v_head_dim");
    if (m.mla.q_lora_rank < 0)
      throw ValidationError::not_positive("model.mla.q_lora_rank",
                                          std::to_string(m.mla.q_lora_rank));
  } else {
    require_positive(m.kv_heads, "model.kv_heads");
    require_positive(m.head_dim, "model.head_dim");
    if (m.heads % m.kv_heads != 0) {
      throw ValidationError("model.kv_heads",
                            fmt::format("model.kv_heads: {} does not divide model.heads {}; use a "
                                        "divisor of the head count (1 = MQA, heads = MHA)",
                                        m.kv_heads, m.heads));
    }
  }
  if (m.has_dense_layers()) require_positive(m.ffn, "model.ffn");
  if (m.moe.experts < 0)
    throw ValidationError::not_positive("model.moe.experts", std::to_string(m.moe.experts));
  if (m.is_moe()) {
    require_positive(m.moe.top_k, "model.moe.top_k");
    require_positive(m.moe.expert_ffn, "model.moe.expert_ffn");
    if (m.moe.top_k > m.moe.experts) {
      throw ValidationError("model.moe.top_k",
                            fmt::format("model.moe.top_k: {} exceeds model.moe.experts {}; route "
                                        "each token to at most all experts",
                                        m.moe.top_k, m.moe.experts));
    }
    if (m.moe.shared_experts < 0 || m.moe.shared_ffn < 0)
      throw ValidationError::not_positive("model.moe.shared_experts",
                                          std::to_string(m.moe.shared_experts));
    if (m.moe.first_k_dense < 0 || m.moe.first_k_dense > m.layers) {
      throw ValidationError("model.moe.first_k_dense",
                            fmt::format("model.moe.first_k_dense: {} must lie in [0, layers {}]",
                                        m.moe.first_k_dense, m.layers));
    }
    validate_routing_groups(m.moe);
    if (!(m.moe.capacity_factor > 0))
      throw ValidationError::not_positive("model.moe.capacity_factor",
                                          fmt::format("{}", m.moe.capacity_factor));
    // Beyond experts / top_k every expert could take every token: more is meaningless.
    const double max_factor = static_cast<double>(m.moe.experts) / m.moe.top_k;
    if (!(m.moe.capacity_factor <= max_factor)) {
      throw ValidationError(
          "model.moe.capacity_factor",
          fmt::format("model.moe.capacity_factor: {:g} exceeds experts / top_k = {:g} (every "
                      "expert taking every token); give a factor from 0 to {:g}",
                      m.moe.capacity_factor, max_factor, max_factor));
    }
  }
  if (m.default_seq <= 0)
    throw ValidationError::not_positive("model.seq", std::to_string(m.default_seq));
}

namespace {

// The attention weights of a layer (QKV or the MLA projections, the output projection,
// their biases) and its attention-internal norms.
void attention_parameters(const ModelSpec& m, LayerParameters& p) {
  const double h = static_cast<double>(m.hidden);
  if (m.attention == AttentionKind::MLA) {
    const auto& a = m.mla;
    const double q_head = static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim);
    if (a.q_lora_rank > 0) {
      p.attention += h * a.q_lora_rank + 1.0 * a.q_lora_rank * m.heads * q_head;
      p.attention_norms += static_cast<double>(a.q_lora_rank);
    } else {
      p.attention += h * m.heads * q_head;
    }
    p.attention += h * (a.kv_lora_rank + a.qk_rope_head_dim);
    p.attention_norms += static_cast<double>(a.kv_lora_rank);
    p.attention += 1.0 * a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
    p.attention += 1.0 * m.heads * a.v_head_dim * h;
  } else {
    const double qkv = static_cast<double>(m.q_width() + m.k_width() + m.v_width());
    p.attention = h * qkv + static_cast<double>(m.attn_out_width()) * h;
    if (m.linear_bias)
      p.attention += qkv + h;
    else if (m.qkv_bias)
      p.attention += qkv;
    if (m.qk_norm) p.attention_norms = 2.0 * m.head_dim;
  }
}

}  // namespace

LayerParameters layer_parameters(const ModelSpec& m, int layer_index) {
  LayerParameters p;
  const double h = static_cast<double>(m.hidden);
  if (m.kind == ModelKind::MLP) {
    p.mlp = h * h + h;  // one width x width linear layer with bias
    return p;
  }
  // A transformer layer holds attention and an MLP (or experts); a pattern's block one of
  // them (or a Mamba-2 mixer), each with its own pre-norm.
  const LayerKind kind = m.layer_kind(layer_index);
  const bool attention = has_attention_block(kind);
  const bool mlp = has_mlp_block(kind);
  p.norms = (attention && mlp ? 2 : 1) * m.norm_params(h);
  // Gemma 2/3 normalise each attention and MLP block's output as well (HF Gemma2DecoderLayer
  // post_attention_layernorm, post_feedforward_layernorm; Gemma 2 report, arXiv:2408.00118
  // Sec. 2: "post-norm and pre-norm with RMSNorm").
  if (m.sandwich_norms) p.norms += ((attention ? 1 : 0) + (mlp ? 1 : 0)) * m.norm_params(h);
  if (kind == LayerKind::MAMBA) p.mamba = mamba_params(m);
  if (attention) attention_parameters(m, p);
  if (!mlp) return p;
  if (m.is_moe_layer(layer_index)) {
    p.router = h * m.moe.experts + (m.moe.router_bias ? m.moe.experts : 0) +
               (m.moe.shared_expert_gate ? h : 0.0);
    if (m.moe.latent > 0) p.router += 2.0 * h * m.moe.latent;  // the latent projections
    p.one_expert = mlp_params(m, m.moe.expert_ffn, m.expert_width());
    p.routed_experts = p.one_expert * m.moe.experts;
    p.mlp = m.moe.shared_experts * mlp_params(m, m.shared_ffn(), m.hidden);
  } else {
    p.mlp = mlp_params(m, m.ffn, m.hidden);
  }
  return p;
}

ParameterCounts count_parameters(const ModelSpec& m) {
  ParameterCounts c;
  const double h = static_cast<double>(m.hidden);
  if (m.kind == ModelKind::MLP) {
    c.lm_head = h * m.vocab + m.vocab;  // classifier with bias
  } else {
    c.embedding = h * m.vocab + h * m.max_position_embeddings;
    c.lm_head = m.tied_embeddings ? 0.0 : h * m.vocab;
    c.final_norm = m.norm_params(h);
  }
  c.total = c.embedding + c.lm_head + c.final_norm;
  c.active = c.total;
  for (int l = 0; l < m.layers; ++l) {
    LayerParameters p = layer_parameters(m, l);
    c.layers += p.total();
    c.expert += p.routed_experts;
    c.active += p.total() - p.routed_experts + p.one_expert * m.moe.top_k;
  }
  c.total += c.layers;
  return c;
}

}  // namespace loom::models
