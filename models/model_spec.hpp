#pragma once
// The workload as data: one ModelSpec describes a dense or mixture-of-experts decoder
// transformer (GQA/MQA, SwiGLU, GELU or squared-ReLU MLP, DeepSeek MLA attention), a hybrid
// of Mamba-2, attention, MLP and MoE layers (Megatron's hybrid pattern: Nemotron-H,
// Nemotron 3) or a plain deep MLP.
// Sizes are element counts; nothing here knows about hardware or parallelism. Parameter
// counts are exact (every weight, bias and norm the architecture has).
#include <cstdint>
#include <string>
#include <vector>

#include "common/sliding_window.hpp"

namespace loom::models {

/// What family of network the spec describes.
enum class ModelKind { TRANSFORMER, MLP };
/// The feed-forward block: gated SwiGLU (three matrices), or a plain MLP (two) with a GELU
/// or a squared ReLU (Primer; Nemotron's relu2), or gated GeGLU (three matrices, the gate
/// through the tanh-approximated GELU: Gemma, HF `gelu_pytorch_tanh`; Shazeer 2020).
enum class MlpKind { SWIGLU, GELU, RELU2, GEGLU };
/// Whether `k` gates its activation with a second up projection (gate, up and down).
constexpr bool gated_mlp(MlpKind k) {
  return k == MlpKind::SWIGLU || k == MlpKind::GEGLU;
}
/// The normalisation layer: RMSNorm has a scale only, LayerNorm a scale and a bias.
enum class NormKind { RMSNORM, LAYERNORM };
/// Attention flavour: multi-head with optional grouped KV heads, or DeepSeek's MLA.
enum class AttentionKind { MHA, MLA };

/// Mixture-of-experts settings; experts == 0 means a dense model.
struct MoeSpec {
  int experts = 0;                  ///< routed experts per MoE layer
  int top_k = 0;                    ///< routed experts each token goes to
  std::int64_t expert_ffn = 0;      ///< FFN (intermediate) size of one routed expert
  int shared_experts = 0;           ///< always-on shared experts per MoE layer
  std::int64_t shared_ffn = 0;      ///< FFN size of one shared expert (0: same as expert_ffn)
  int first_k_dense = 0;            ///< the first k layers use the dense MLP (spec.ffn)
  double capacity_factor = 1.0;     ///< tokens per expert relative to a perfectly even split
  bool router_bias = false;         ///< a per-expert bias in the router (DeepSeek-V3's
                                    ///< e_score_correction_bias)
  bool shared_expert_gate = false;  ///< a hidden -> 1 gate on the shared experts (Qwen2-MoE)
  /// Group-limited routing (DeepSeek-V3 n_group / topk_group, Megatron
  /// --moe-router-num-groups / --moe-router-group-topk): the experts form `routing_groups`
  /// equal groups and a token's top_k experts come from its best `routing_group_top_k`
  /// groups. 0: no limit.
  int routing_groups = 0;
  int routing_group_top_k = 0;  ///< see routing_groups
  /// LatentMoE (Megatron-core moe_layer.py fc1_latent_proj / fc2_latent_proj; Nemotron 3
  /// Super and Ultra, HF `moe_latent_size`): the routed experts work in this width; a
  /// replicated hidden -> latent projection runs before the dispatch (tokens travel at the
  /// latent width) and a latent -> hidden one after the combine. 0: the hidden width.
  std::int64_t latent = 0;
};

/// Mamba-2 mixer sizes (Dao & Gu 2024; Megatron-core MambaMixer; HF NemotronH
/// `mamba_num_heads`, `mamba_head_dim`, `ssm_state_size`, `n_groups`, `conv_kernel`,
/// `chunk_size`): d_inner = heads x head_dim; B and C have `groups` groups of `state`.
struct MambaSpec {
  int heads = 0;              ///< SSM heads (nheads)
  std::int64_t head_dim = 0;  ///< channels per head (P)
  std::int64_t state = 0;     ///< state size per group (N, d_state)
  int groups = 0;             ///< B / C groups (ngroups)
  int conv_kernel = 4;        ///< depthwise causal conv width (d_conv)
  std::int64_t chunk = 128;   ///< SSD chunk length (Q)
  std::int64_t inner() const { return heads * head_dim; }
  /// Width of the in_proj output: z and x (d_inner each), B and C, dt (one per head).
  std::int64_t in_proj_width() const { return 2 * inner() + 2 * groups * state + heads; }
  /// Channels of the depthwise conv: x, B and C.
  std::int64_t conv_channels() const { return inner() + 2 * groups * state; }
};

/// What one layer holds: the transformer layer (attention, then a dense MLP or routed
/// experts), or one block of a hybrid pattern (ModelSpec::pattern).
enum class LayerKind { DENSE, MOE, MAMBA, ATTENTION, MLP, MOE_MLP };
inline constexpr int LAYER_KINDS = static_cast<int>(LayerKind::MOE_MLP) + 1;
/// Whether a layer of kind `k` holds routed experts.
constexpr bool is_moe_kind(LayerKind k) {
  return k == LayerKind::MOE || k == LayerKind::MOE_MLP;
}
/// Whether a layer of kind `k` holds attention (a transformer layer; a pattern's '*').
constexpr bool has_attention_block(LayerKind k) {
  return k == LayerKind::DENSE || k == LayerKind::MOE || k == LayerKind::ATTENTION;
}
/// Whether a layer of kind `k` holds an MLP or routed experts.
constexpr bool has_mlp_block(LayerKind k) {
  return k != LayerKind::ATTENTION && k != LayerKind::MAMBA;
}

/// DeepSeek multi-head latent attention sizes (used when attention == MLA).
struct MlaSpec {
  std::int64_t q_lora_rank = 0;       ///< query down-projection rank (0: no query compression)
  std::int64_t kv_lora_rank = 0;      ///< key/value latent rank
  std::int64_t qk_rope_head_dim = 0;  ///< per-head dims carrying RoPE (shared key part)
  std::int64_t qk_nope_head_dim = 0;  ///< per-head dims without RoPE
  std::int64_t v_head_dim = 0;        ///< per-head value dims
};

/// One model. For MLP models: `hidden` is the width, `layers` the depth (square
/// width x width linear layers with bias and an activation), `vocab` the output classes;
/// each sample is one token.
struct ModelSpec {
  std::string name;  ///< preset name or file stem, for output
  ModelKind kind = ModelKind::TRANSFORMER;
  int layers = 0;             ///< transformer layers (or MLP depth)
  std::int64_t hidden = 0;    ///< model width h
  int heads = 0;              ///< attention (query) heads a
  int kv_heads = 0;           ///< key/value heads (== heads: MHA; 1: MQA; else GQA)
  std::int64_t head_dim = 0;  ///< per-head dimension (usually hidden / heads)
  std::int64_t ffn = 0;       ///< dense MLP intermediate size
  MlpKind mlp = MlpKind::SWIGLU;
  /// A gated MLP's two halves clamped before the activation: the gate to at most this, the
  /// linear half to [-this, this] (GPT-OSS 7.0: HF GptOssConfig `swiglu_limit`, Megatron-core
  /// `activation_func_clamp_value`); 0: no clamp.
  double activation_clamp = 0;
  std::int64_t vocab = 0;        ///< vocabulary size V
  bool tied_embeddings = false;  ///< LM head shares the input embedding matrix
  NormKind norm = NormKind::RMSNORM;
  bool linear_bias = false;                  ///< every linear layer has a bias (GPT-2/3 style)
  bool qkv_bias = false;                     ///< only the QKV projection has a bias (Qwen2 style)
  bool qk_norm = false;                      ///< per-head RMSNorm on queries and keys (Qwen3 style)
  std::int64_t max_position_embeddings = 0;  ///< learned absolute positions (0: RoPE, none)
  bool rope = true;      ///< without learned positions: rotary (true) or no position encoding
  bool dropout = false;  ///< dropout after attention softmax, attention and MLP
                         ///< (stores 1-byte masks; GPT-3 style)
  /// Each block's output normalised too, before its residual add (Gemma 2/3: HF
  /// post_attention_layernorm and post_feedforward_layernorm beside input_layernorm and
  /// pre_feedforward_layernorm): four norms per transformer layer instead of two.
  bool sandwich_norms = false;
  /// Attention-logit soft-capping (Gemma 2, HF `attn_logit_softcapping` 50): each score
  /// becomes cap * tanh(score / cap) before the softmax; 0: none.
  double attn_logit_softcap = 0;
  /// Final-logit soft-capping (Gemma 2, HF `final_logit_softcapping` 30): the LM head's
  /// logits become cap * tanh(logit / cap) before the loss; 0: none.
  double final_logit_softcap = 0;
  /// The embedding output multiplied by sqrt(hidden) (Gemma's normalizer): one elementwise
  /// kernel over the embedded tokens.
  bool scaled_embedding = false;
  AttentionKind attention = AttentionKind::MHA;
  /// Sliding-window attention (Mistral 7B v0.1, Gemma 2/3, GPT-OSS; HF `sliding_window`): a
  /// windowed layer's query attends to at most this many most recent keys, itself
  /// included; 0: every layer attends to the whole (causal) sequence.
  std::int64_t sliding_window = 0;
  /// Which layers keep full attention when sliding_window > 0 (HF Gemma
  /// `sliding_window_pattern`): layer i (0-based) is full when the pattern is positive and
  /// (i + 1) % pattern == 0 (GPT-OSS alternates: 2); 0: every layer is windowed.
  int sliding_window_pattern = 0;
  MlaSpec mla;
  MoeSpec moe;
  std::int64_t default_seq = 2048;  ///< sequence length the model was trained with, tokens
  /// Multi-token-prediction depth (DeepSeek-V3 report Sec 2.2; HF `num_nextn_predict_layers`):
  /// MTP modules after the main loss on the last pipeline stage, each one transformer layer.
  int mtp_layers = 0;
  /// The MTP depths run one module again (Megatron-core mtp_use_repeated_layer: Nemotron 3
  /// Super's two depths share the weights of its one MTP block); false: each its own.
  bool mtp_repeated_layer = false;
  /// Megatron's hybrid layer pattern (--hybrid-override-pattern, HF
  /// `hybrid_override_pattern`), one character per layer: 'M' a Mamba-2 mixer, '*'
  /// self-attention, '-' a dense MLP, 'E' routed experts; each its own pre-norm and residual.
  /// Empty: every layer is a transformer layer.
  std::string pattern;
  /// The blocks of each MTP depth of a hybrid model, pattern characters (Megatron
  /// --mtp-hybrid-override-pattern; Nemotron 3 Super "*E": attention then MoE). Empty: one
  /// layer built like the model's last.
  std::string mtp_pattern;
  MambaSpec mamba;
  /// What an import set aside and the user should know (a HF config's vision tower), one
  /// sentence each; the commands print them as notes.
  std::vector<std::string> notes;

  bool is_moe() const { return moe.experts > 0; }
  /// What layer `layer_index` (0-based) holds.
  LayerKind layer_kind(int layer_index) const;
  /// True when some layer uses the dense MLP (no experts, or first_k_dense of them; a
  /// hybrid pattern's '-').
  bool has_dense_layers() const {
    if (!pattern.empty()) return pattern.find('-') != std::string::npos;
    return !is_moe() || moe.first_k_dense > 0;
  }
  /// True when some layer attends (every transformer layer; a hybrid pattern's '*').
  bool has_attention() const { return pattern.empty() || pattern.find('*') != std::string::npos; }
  /// True when some layer is a Mamba-2 mixer.
  bool has_mamba() const { return pattern.find('M') != std::string::npos; }
  /// True when some layer attends through a window shorter than `seq` tokens: a window
  /// below the sequence on the layers sliding_window_pattern leaves windowed (all but
  /// pattern 1, which keeps every layer full; patterns above the layer count are refused).
  bool has_window_below(std::int64_t seq) const {
    return sliding_window_pattern != 1 &&
           windowed(static_cast<double>(seq), static_cast<double>(sliding_window));
  }
  /// Keys a query of layer `layer_index` (0-based) attends to at most: the sliding window,
  /// or 0 for a full-attention layer.
  std::int64_t attention_window(int layer_index) const {
    if (sliding_window <= 0) return 0;
    return full_attention_layer(sliding_window_pattern, layer_index) ? 0 : sliding_window;
  }
  /// Whether layer `layer_index` keeps full attention under a sliding-window `pattern`
  /// (every pattern-th layer; 0: none).
  static bool full_attention_layer(int pattern, int layer_index) {
    return pattern > 0 && (layer_index + 1) % pattern == 0;
  }
  /// True when layer `layer_index` (0-based) uses routed experts.
  bool is_moe_layer(int layer_index) const { return is_moe_kind(layer_kind(layer_index)); }
  /// Width of the routed experts' input and output (MoeSpec::latent, else hidden).
  std::int64_t expert_width() const { return moe.latent > 0 ? moe.latent : hidden; }
  /// Width of all query heads together (heads x head_dim; MLA: heads x (nope + rope)).
  std::int64_t q_width() const;
  /// Width of all key heads together (kv_heads x head_dim; MLA: heads x (nope + rope)).
  std::int64_t k_width() const;
  /// Width of all value heads together (kv_heads x head_dim; MLA: heads x v_head_dim).
  std::int64_t v_width() const;
  /// Width of the attention output before the output projection (heads x value dim).
  std::int64_t attn_out_width() const;
  /// Parameters of one norm over `width` features: a scale (RMSNorm), or scale and bias.
  double norm_params(double width) const { return norm == NormKind::LAYERNORM ? 2 * width : width; }
  /// FFN size of one shared expert.
  std::int64_t shared_ffn() const { return moe.shared_ffn > 0 ? moe.shared_ffn : moe.expert_ffn; }
};

/// Upper bounds validate_model enforces: far above any published model, low enough that
/// products of sizes stay exact and a run stays bounded in time and memory.
inline constexpr std::int64_t MAX_MODEL_LAYERS = 16384;   ///< layers (or MLP depth)
inline constexpr std::int64_t MAX_MODEL_WIDTH = 1 << 20;  ///< hidden, ffn, head_dim, ranks
inline constexpr std::int64_t MAX_MODEL_VOCAB = 1 << 24;  ///< vocabulary or classes
inline constexpr std::int64_t MAX_MODEL_HEADS = 1 << 16;  ///< heads, KV heads, experts
inline constexpr std::int64_t MAX_MODEL_SEQ = std::int64_t{1} << 26;  ///< tokens

/// Throws ValidationError naming the field ("model.hidden", ...) when a size is zero,
/// negative or above its MAX_MODEL_* bound, or the sizes contradict each other (kv_heads
/// not dividing heads, top_k > experts, capacity_factor > experts / top_k).
void validate_model(const ModelSpec& model);

/// Parameter counts, in parameters (not bytes), by where they live.
struct ParameterCounts {
  double embedding = 0;   ///< input token (+ learned position) embedding
  double lm_head = 0;     ///< output projection; 0 when tied to the embedding
  double final_norm = 0;  ///< the norm before the LM head
  double layers = 0;      ///< all transformer layers (or MLP layers)
  double total = 0;       ///< everything
  double active = 0;      ///< touched per token (MoE: top-k routed + shared experts)
  double expert = 0;      ///< routed-expert weights in all layers (split by EP)
};

/// Parameters of one layer's pieces (full, unsharded), in parameters.
struct LayerParameters {
  double attention = 0;        ///< QKV (or MLA projections), output projection, their biases
  double mamba = 0;            ///< a Mamba-2 mixer: in/out projections, conv, A, D, dt bias, norm
  double attention_norms = 0;  ///< MLA latent norms and QK norms (replicated under TP)
  double mlp = 0;              ///< dense MLP, or the shared experts of an MoE layer
  double router = 0;           ///< MoE router (replicated under TP)
  double routed_experts = 0;   ///< all routed experts of the layer
  double one_expert = 0;       ///< one routed expert
  double norms = 0;            ///< the layer's pre-attention and pre-MLP norms (and the
                               ///< post-block ones of sandwich_norms)
  /// Everything in the layer.
  double total() const {
    return attention + mamba + attention_norms + mlp + router + routed_experts + norms;
  }
};

/// The parameters of layer `layer_index` (0-based; MoE layers differ from dense ones).
LayerParameters layer_parameters(const ModelSpec& model, int layer_index);
/// Total, active and per-part parameter counts of the whole model.
ParameterCounts count_parameters(const ModelSpec& model);

/// Names as JSON and output spell them ("swiglu", "rmsnorm", "mla", "transformer").
std::string to_string(ModelKind value);
std::string to_string(MlpKind value);
std::string to_string(NormKind value);
std::string to_string(AttentionKind value);
/// "dense", "moe", "mamba", "attention", "mlp", "moe mlp".
std::string to_string(LayerKind value);
/// The JSON spellings of ModelKind, MlpKind and NormKind, indexed by the enum's value.
const std::vector<std::string>& model_kind_names();
const std::vector<std::string>& mlp_kind_names();
const std::vector<std::string>& norm_kind_names();

}  // namespace loom::models
