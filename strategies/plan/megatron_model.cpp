// The model a Megatron-LM launch line describes (--num-layers, --hidden-size, ...), and how a
// given model differs from it. Megatron-LM's defaults for what a line omits are
// megatron/training/arguments.py's (validate_args) and TransformerConfig's
// (megatron/core/transformer/transformer_config.py), at the commit megatron_flags.hpp names.
#include <fmt/format.h>

#include <optional>

#include "common/error.hpp"
#include "models/model_spec.hpp"
#include "strategies/plan/plan_import.hpp"

namespace loom::strategies {
namespace {

// The line's shape flags by name.
class Shape {
 public:
  explicit Shape(const MegatronLine& line) : line_(line) {}

  bool has(std::string_view flag) const { return find(flag) != nullptr; }
  std::optional<std::string> text(std::string_view flag) const {
    const std::string* v = find(flag);
    return v ? std::optional<std::string>(*v) : std::nullopt;
  }
  // A whole number at least `min`; throws naming the flag otherwise.
  std::optional<std::int64_t> integer(std::string_view flag, std::int64_t min = 1) const {
    const std::string* v = find(flag);
    if (!v) return std::nullopt;
    try {
      size_t used = 0;
      const long long n = std::stoll(*v, &used);
      if (used == v->size() && n >= min) return n;
    } catch (const std::exception&) {
    }
    throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), *v,
                                     min == 0 ? "a whole number, 0 or more" : "a positive integer");
  }
  std::optional<double> number(std::string_view flag) const {
    const std::string* v = find(flag);
    if (!v) return std::nullopt;
    try {
      size_t used = 0;
      const double x = std::stod(*v, &used);
      if (used == v->size() && x >= 0 && x <= 1) return x;
    } catch (const std::exception&) {
    }
    throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), *v,
                                     "a probability from 0 to 1");
  }
  // The value of `flag`, which must be one of `allowed`.
  std::optional<std::string> choice(std::string_view flag,
                                    std::initializer_list<std::string_view> allowed) const {
    const std::string* v = find(flag);
    if (!v) return std::nullopt;
    for (std::string_view a : allowed)
      if (*v == a) return *v;
    std::string names;
    for (std::string_view a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
    throw ValidationError::bad_value(fmt::format("--megatron-args {}", flag), *v, names);
  }
  // Whether the line describes the model at all (then Megatron's defaults stand for what it
  // omits).
  bool describes_model() const {
    return has("--num-layers") || has("--hidden-size") || has("--num-attention-heads");
  }

 private:
  const std::string* find(std::string_view flag) const {
    for (const auto& [name, v] : line_.shape)
      if (name == flag) return &v;
    return nullptr;
  }
  const MegatronLine& line_;
};

// Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by (128) times the
// tensor-parallel size (megatron/core/tokenizers/utils/build_tokenizer.py,
// vocab_size_with_padding).
std::int64_t padded_vocab(const Shape& s, const MegatronLine& line, std::int64_t vocab) {
  const std::int64_t multiple = s.integer("--make-vocab-size-divisible-by").value_or(128) *
                                line.plan.integer("tp").value_or(1);
  return (vocab + multiple - 1) / multiple * multiple;
}

// `base` with what the line says laid over it; with `defaults`, Megatron's defaults stand for
// the shape switches and derived sizes the line omits.
models::ModelSpec apply_shape(const MegatronLine& line, models::ModelSpec m, bool defaults) {
  const Shape s(line);
  if (auto v = s.integer("--num-layers")) m.layers = static_cast<int>(*v);
  if (auto v = s.integer("--hidden-size")) m.hidden = *v;
  if (auto v = s.integer("--num-attention-heads")) m.heads = static_cast<int>(*v);
  // TransformerConfig: num_query_groups None means one group per head.
  if (auto v = s.integer("--num-query-groups"))
    m.kv_heads = static_cast<int>(*v);
  else if (defaults)
    m.kv_heads = m.heads;
  if (auto v = s.integer("--kv-channels"))
    m.head_dim = *v;
  else if (defaults && m.heads > 0)
    m.head_dim = m.hidden / m.heads;
  if (s.has("--swiglu"))
    m.mlp = models::MlpKind::SWIGLU;
  else if (s.has("--squared-relu"))
    m.mlp = models::MlpKind::RELU2;
  else if (defaults)
    m.mlp = models::MlpKind::GELU;
  // validate_args: 4h, or for SwiGLU 2/3 of it rounded down to a multiple of 64.
  if (auto v = s.integer("--ffn-hidden-size"))
    m.ffn = *v;
  else if (defaults)
    m.ffn = m.mlp == models::MlpKind::SWIGLU ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden;
  if (auto v = s.choice("--normalization", {"LayerNorm", "RMSNorm"}))
    m.norm = *v == "RMSNorm" ? models::NormKind::RMSNORM : models::NormKind::LAYERNORM;
  else if (defaults)
    m.norm = models::NormKind::LAYERNORM;
  if (defaults || s.has("--untie-embeddings-and-output-weights"))
    m.tied_embeddings = !s.has("--untie-embeddings-and-output-weights");
  if (defaults || s.has("--disable-bias-linear")) m.linear_bias = !s.has("--disable-bias-linear");
  if (defaults || s.has("--add-qkv-bias")) m.qkv_bias = s.has("--add-qkv-bias") && !m.linear_bias;
  if (defaults || s.has("--qk-layernorm")) m.qk_norm = s.has("--qk-layernorm");
  // Megatron's position embedding defaults to learned_absolute, sized
  // --max-position-embeddings.
  const auto pos = s.choice("--position-embedding-type",
                            {"learned_absolute", "rope", "mrope", "relative", "none"});
  if (pos || defaults) {
    const std::string type = pos.value_or("learned_absolute");
    m.rope = type == "rope" || type == "mrope";
    m.max_position_embeddings =
        type == "learned_absolute"
            ? s.integer("--max-position-embeddings").value_or(line.plan.integer("seq").value_or(0))
            : 0;
  }
  const auto attn_drop = s.number("--attention-dropout"),
             hidden_drop = s.number("--hidden-dropout");
  if (attn_drop || hidden_drop || defaults)
    m.dropout = attn_drop.value_or(0.1) > 0 || hidden_drop.value_or(0.1) > 0;
  if (auto v = s.integer("--num-experts", 0)) {
    m.moe.experts = static_cast<int>(*v);
    m.moe.top_k = static_cast<int>(s.integer("--moe-router-topk").value_or(2));
    m.moe.expert_ffn = s.integer("--moe-ffn-hidden-size").value_or(m.ffn);
    if (auto shared = s.integer("--moe-shared-expert-intermediate-size")) {
      m.moe.shared_experts = 1;
      m.moe.shared_ffn = *shared;
    }
    if (auto g = s.integer("--moe-router-num-groups")) m.moe.routing_groups = static_cast<int>(*g);
    if (auto g = s.integer("--moe-router-group-topk"))
      m.moe.routing_group_top_k = static_cast<int>(*g);
  }
  if (auto v = s.integer("--vocab-size"))
    m.vocab = padded_vocab(s, line, *v);
  else if (auto p = s.integer("--padded-vocab-size"))
    m.vocab = *p;
  if (auto seq = line.plan.integer("seq")) m.default_seq = *seq;
  return m;
}

}  // namespace

models::ModelSpec megatron_model(const MegatronLine& line) {
  const Shape s(line);
  for (const char* flag : {"--num-layers", "--hidden-size", "--num-attention-heads"}) {
    if (!s.has(flag)) {
      throw ValidationError("--model",
                            fmt::format("--model: not given, and --megatron-args has no {}; give "
                                        "--model, or the model's shape in --megatron-args",
                                        flag));
    }
  }
  if (!s.has("--vocab-size") && !s.has("--padded-vocab-size")) {
    throw ValidationError("--model",
                          "--model: not given, and --megatron-args has no --vocab-size (a "
                          "tokenizer's vocabulary loom cannot read); add --vocab-size N");
  }
  for (const char* flag : {"--window-size", "--window-attn-skip-freq"}) {
    if (s.has(flag)) {
      throw ValidationError("--model", fmt::format("--model: a model with {} is not built from "
                                                   "--megatron-args; give it with --model",
                                                   flag));
    }
  }
  models::ModelSpec m = apply_shape(line, models::ModelSpec{}, true);
  m.name = "megatron-args";
  models::validate_model(m);
  return m;
}

std::vector<std::string> megatron_model_mismatches(const MegatronLine& line,
                                                   const models::ModelSpec& model) {
  const Shape s(line);
  const models::ModelSpec want = apply_shape(line, model, s.describes_model());
  std::vector<std::string> out;
  auto check = [&](std::string_view flag, std::string_view field, auto line_value,
                   auto model_value) {
    if (line_value != model_value) {
      out.push_back(fmt::format("--megatron-args {}: the line says {} {}, --model {} has {}", flag,
                                field, line_value, model.name, model_value));
    }
  };
  check("--num-layers", "layers", want.layers, model.layers);
  check("--hidden-size", "hidden", want.hidden, model.hidden);
  check("--num-attention-heads", "heads", want.heads, model.heads);
  check("--num-query-groups", "kv_heads", want.kv_heads, model.kv_heads);
  check("--kv-channels", "head_dim", want.head_dim, model.head_dim);
  if (model.has_dense_layers()) check("--ffn-hidden-size", "ffn", want.ffn, model.ffn);
  check("--swiglu", "mlp", models::to_string(want.mlp), models::to_string(model.mlp));
  auto norm = [](models::NormKind k) {
    return k == models::NormKind::RMSNORM ? "RMSNorm" : "LayerNorm";
  };
  check("--normalization", "norm", norm(want.norm), norm(model.norm));
  check("--untie-embeddings-and-output-weights", "tied_embeddings", want.tied_embeddings,
        model.tied_embeddings);
  check("--disable-bias-linear", "linear_bias", want.linear_bias, model.linear_bias);
  check("--add-qkv-bias", "qkv_bias", want.qkv_bias, model.qkv_bias);
  check("--qk-layernorm", "qk_norm", want.qk_norm, model.qk_norm);
  check("--position-embedding-type", "max_position_embeddings", want.max_position_embeddings,
        model.max_position_embeddings);
  check("--attention-dropout", "dropout", want.dropout, model.dropout);
  check("--num-experts", "moe.experts", want.moe.experts, model.moe.experts);
  if (model.is_moe()) {
    check("--moe-router-topk", "moe.top_k", want.moe.top_k, model.moe.top_k);
    check("--moe-ffn-hidden-size", "moe.expert_ffn", want.moe.expert_ffn, model.moe.expert_ffn);
  }
  // The vocabulary as given or as Megatron pads it.
  if (auto v = s.integer("--vocab-size"); v && *v != model.vocab && want.vocab != model.vocab) {
    out.push_back(
        fmt::format("--megatron-args --vocab-size: the line says vocab {} ({} padded), "
                    "--model {} has {}",
                    *v, want.vocab, model.name, model.vocab));
  }
  return out;
}

}  // namespace loom::strategies
