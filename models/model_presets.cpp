// Built-in model presets. Each architecture number comes from the cited paper or the
// model's published HuggingFace config.json; the parameter-count tests check the totals.
#include <fmt/format.h>

#include <functional>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "models/model_loader.hpp"

namespace loom::models {
namespace {

// Llama-style decoder (RMSNorm, SwiGLU, RoPE, untied embeddings): the base of every preset.
ModelSpec llama(std::string name, int layers, std::int64_t hidden, int heads, int kv_heads,
                std::int64_t ffn, std::int64_t vocab, std::int64_t seq) {
  ModelSpec m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.ffn = ffn;
  m.mlp = MlpKind::SWIGLU;
  m.vocab = vocab;
  m.norm = NormKind::RMSNORM;
  m.default_seq = seq;
  return m;
}

// GPT-2/3 / Megatron GPT: LayerNorm, biases everywhere, GELU 4h MLP, learned positions,
// tied embeddings, dropout.
ModelSpec gpt(std::string name, int layers, std::int64_t hidden, int heads, std::int64_t vocab) {
  ModelSpec m = llama(std::move(name), layers, hidden, heads, heads, 4 * hidden, vocab, 2048);
  m.mlp = MlpKind::GELU;
  m.tied_embeddings = true;
  m.norm = NormKind::LAYERNORM;
  m.linear_bias = true;
  m.max_position_embeddings = 2048;
  m.dropout = true;
  return m;
}

ModelSpec mixtral(std::string name, int layers, std::int64_t hidden, int heads, std::int64_t ffn,
                  std::int64_t vocab) {
  ModelSpec m = llama(std::move(name), layers, hidden, heads, 8, 0, vocab, 4096);
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn = ffn;
  return m;
}

ModelSpec qwen3_30b_a3b() {
  // Qwen/Qwen3-30B-A3B config.json: 48 layers, hidden 2048, 32 heads, 4 KV heads, head_dim
  // 128, 128 experts top-8 with moe_intermediate_size 768, vocab 151936, untied, QK norm.
  ModelSpec m = llama("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 4096);
  m.head_dim = 128;
  m.qk_norm = true;
  m.moe.experts = 128;
  m.moe.top_k = 8;
  m.moe.expert_ffn = 768;
  return m;
}

ModelSpec gpt_oss(std::string name, int layers, int experts) {
  // OpenAI gpt-oss (transformers GptOssConfig defaults, openai/gpt-oss-120b config.json;
  // "gpt-oss-120b & gpt-oss-20b Model Card", OpenAI 2025, Table 1): hidden 2880, 64 query /
  // 8 KV heads of 64, every layer MoE with top-4 experts of 2880 (SwiGLU), vocab 201088,
  // untied, biases on the attention projections and the expert linears, sliding-window
  // attention of 128 tokens on alternate layers (sliding first), trained at 4096 tokens
  // (YaRN's original_max_position_embeddings), the gated activation's halves clamped to 7
  // (swiglu_limit). The per-head attention sinks (one logit each) are not counted.
  ModelSpec m = llama(std::move(name), layers, 2880, 64, 8, 0, 201088, 4096);
  m.head_dim = 64;
  m.linear_bias = true;
  m.moe.experts = experts;
  m.moe.top_k = 4;
  m.moe.expert_ffn = 2880;
  m.sliding_window = 128;
  m.sliding_window_pattern = 2;
  m.activation_clamp = 7.0;  // config.json swiglu_limit
  return m;
}

// NVIDIA Nemotron 3 hybrids (Megatron-Bridge models/nemotronh/nemotron_h_provider.py;
// transformers NemotronHConfig): Mamba-2 mixers (heads of 64, state 128, 8 groups, conv 4,
// chunk 128), GQA attention with 2 KV heads of 128 and no position encoding, squared-ReLU
// experts with one shared expert, a sigmoid router with expert bias, vocab 131072, untied.
ModelSpec nemotron3(std::string name, std::string pattern, std::int64_t hidden, int mamba_heads) {
  const int layers = static_cast<int>(pattern.size());
  ModelSpec m = llama(std::move(name), layers, hidden, 32, 2, 0, 131072, 8192);
  m.head_dim = 128;
  m.mlp = MlpKind::RELU2;
  m.rope = false;
  m.pattern = std::move(pattern);
  m.mamba = {mamba_heads, 64, 128, 8, 4, 128};
  m.moe.router_bias = true;
  m.moe.shared_experts = 1;
  return m;
}

// Nemotron-H (NVIDIA, arXiv:2504.03624, Table 1; Megatron-Bridge NemotronHModelProvider8B
// and 56B): Mamba-2 and dense squared-ReLU MLP layers with a few attention layers (8 KV heads
// of 128, no position encoding), Mamba heads of 64 in 8 groups, vocab 131072, untied.
ModelSpec nemotron_h(std::string name, std::string pattern, std::int64_t hidden, int heads,
                     std::int64_t ffn, int mamba_heads, std::int64_t state) {
  ModelSpec m = nemotron3(std::move(name), std::move(pattern), hidden, mamba_heads);
  m.heads = heads;
  m.kv_heads = 8;
  m.ffn = ffn;
  m.mamba.state = state;
  m.moe = MoeSpec{};
  return m;
}

ModelSpec nemotron3_nano() {
  // nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json: 52 layers (23 Mamba-2, 23 MoE,
  // 6 attention), hidden 2688, 64 Mamba heads, 128 experts top-6 of 1856, shared expert 3712.
  ModelSpec m = nemotron3("nemotron-3-nano", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
                          2688, 64);
  m.moe.experts = 128;
  m.moe.top_k = 6;
  m.moe.expert_ffn = 1856;
  m.moe.shared_ffn = 3712;
  return m;
}

ModelSpec nemotron3_super() {
  // Megatron-Bridge Nemotron3SuperProvider (models/nemotronh/nemotron_h_provider.py): 88
  // layers (40 Mamba-2, 40 MoE, 8 attention), hidden 4096, 128 Mamba heads, 512 experts
  // top-22 of 2688 on a LatentMoE width of 1024, shared expert 5376, two MTP depths of an
  // attention and an MoE block (mtp_num_layers 2, mtp_hybrid_override_pattern "*E") that
  // repeat one module (the Super recipe's mtp_use_repeated_layer = True; HF
  // num_nextn_predict_layers 1).
  ModelSpec m = nemotron3(
      "nemotron-3-super",
      "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
      4096, 128);
  m.moe.experts = 512;
  m.moe.top_k = 22;
  m.moe.expert_ffn = 2688;
  m.moe.shared_ffn = 5376;
  m.moe.latent = 1024;
  m.mtp_layers = 2;
  m.mtp_pattern = "*E";
  m.mtp_repeated_layer = true;
  return m;
}

ModelSpec deepseek_v3() {
  // deepseek-ai/DeepSeek-V3 config.json (and DeepSeek-V3 technical report, Sec 4.2): 61
  // layers, hidden 7168, 128 heads, MLA q_lora 1536 / kv_lora 512 / rope 64 / nope 128 / v
  // 128, first 3 layers dense (18432), 256 routed experts (2048) top-8 plus 1 shared,
  // vocab 129280, untied. The multi-token-prediction module is not counted (671B).
  ModelSpec m = llama("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096);
  m.attention = AttentionKind::MLA;
  m.head_dim = 192;
  m.mla = {1536, 512, 64, 128, 128};
  m.moe.experts = 256;
  m.moe.top_k = 8;
  m.moe.expert_ffn = 2048;
  m.moe.shared_experts = 1;
  m.moe.first_k_dense = 3;
  m.moe.router_bias = true;
  // Node-limited routing: config.json n_group 8, topk_group 4 (report Sec 2.1.2: "each token
  // will be sent to at most M = 4 nodes", the 256 experts in 8 groups).
  m.moe.routing_groups = 8;
  m.moe.routing_group_top_k = 4;
  // One MTP module: HF config num_nextn_predict_layers 1; DeepSeek-V3 report Sec 2.2 (D = 1).
  m.mtp_layers = 1;
  return m;
}

ModelSpec deep_mlp() {
  ModelSpec m;
  m.name = "deep-mlp";
  m.kind = ModelKind::MLP;
  m.layers = 32;
  m.hidden = 8192;
  m.vocab = 1000;
  m.default_seq = 1;
  return m;
}

struct Preset {
  PresetInfo info;
  std::function<ModelSpec()> make;
};

const std::vector<Preset>& presets() {
  // Narayanan et al. 2021 (SC21, arXiv:2104.04473) Table 1: layers, hidden, heads; vocab
  // 51200 and sequence 2048 per the Megatron-LM README of April 2021.
  static const std::vector<Preset> list = [] {
    std::vector<Preset> v;
    auto add = [&v](std::string name, std::string description, std::function<ModelSpec()> make) {
      v.push_back({{std::move(name), std::move(description)}, std::move(make)});
    };
    add("gpt3-175b", "GPT-3 175B: 96 layers, h 12288, 96 heads, vocab 50257 (Brown et al. 2020)",
        [] { return gpt("gpt3-175b", 96, 12288, 96, 50257); });
    struct Row {
      const char* name;
      int layers;
      int hidden;
      int heads;
    };
    static constexpr Row rows[] = {
        {"gpt-1.7b", 24, 2304, 24},  {"gpt-3.6b", 30, 3072, 32},   {"gpt-7.5b", 36, 4096, 32},
        {"gpt-18b", 40, 6144, 48},   {"gpt-39b", 48, 8192, 64},    {"gpt-76b", 60, 10240, 80},
        {"gpt-145b", 80, 12288, 96}, {"gpt-310b", 96, 16384, 128}, {"gpt-530b", 105, 20480, 128},
        {"gpt-1t", 128, 25600, 160},
    };
    for (const Row& r : rows) {
      add(r.name,
          fmt::format("GPT {} layers, h {}, {} heads, vocab 51200 (Narayanan et al. 2021 Table 1)",
                      r.layers, r.hidden, r.heads),
          [r] { return gpt(r.name, r.layers, r.hidden, r.heads, 51200); });
    }
    add("llama2-7b", "Llama 2 7B: 32 layers, h 4096, MHA, SwiGLU 11008 (Touvron et al. 2023)",
        [] { return llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096); });
    add("llama2-13b", "Llama 2 13B: 40 layers, h 5120, MHA, SwiGLU 13824 (Touvron et al. 2023)",
        [] { return llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096); });
    add("llama2-70b", "Llama 2 70B: 80 layers, h 8192, GQA 8, SwiGLU 28672 (Touvron et al. 2023)",
        [] { return llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096); });
    add("llama3-8b", "Llama 3 8B: 32 layers, h 4096, GQA 8, vocab 128256 (Meta config.json)",
        [] { return llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192); });
    add("llama3-70b", "Llama 3 70B: 80 layers, h 8192, GQA 8, vocab 128256 (Meta config.json)",
        [] { return llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192); });
    add("llama3-405b", "Llama 3.1 405B: 126 layers, h 16384, GQA 8 (Dubey et al. 2024 Table 3)",
        [] { return llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192); });
    add("mixtral-8x7b", "Mixtral 8x7B: 32 layers, h 4096, 8 experts top-2 (Jiang et al. 2024)",
        [] { return mixtral("mixtral-8x7b", 32, 4096, 32, 14336, 32000); });
    add("mixtral-8x22b", "Mixtral 8x22B: 56 layers, h 6144, 8 experts top-2 (Mistral config.json)",
        [] { return mixtral("mixtral-8x22b", 56, 6144, 48, 16384, 32768); });
    add("qwen3-30b-a3b", "Qwen3 30B-A3B: 48 layers, h 2048, 128 experts top-8 (Qwen config.json)",
        qwen3_30b_a3b);
    add("gpt-oss-120b",
        "gpt-oss-120b: 36 layers, h 2880, 128 experts top-4, 128-token sliding window on "
        "alternate layers (OpenAI model card)",
        [] { return gpt_oss("gpt-oss-120b", 36, 128); });
    add("gpt-oss-20b",
        "gpt-oss-20b: 24 layers, h 2880, 32 experts top-4, 128-token sliding window on "
        "alternate layers (OpenAI model card)",
        [] { return gpt_oss("gpt-oss-20b", 24, 32); });
    add("deepseek-v3", "DeepSeek-V3 671B: 61 layers, MLA, 256 experts top-8 + 1 shared (report)",
        deepseek_v3);
    add("nemotron-h-8b",
        "Nemotron-H 8B: 52 hybrid layers (24 Mamba-2, 24 MLP, 4 attention), h 4096 (Nemotron-H "
        "paper Table 1)",
        [] {
          return nemotron_h("nemotron-h-8b", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
                            4096, 32, 21504, 128, 128);
        });
    add("nemotron-h-56b",
        "Nemotron-H 56B: 118 hybrid layers (54 Mamba-2, 54 MLP, 10 attention), h 8192 "
        "(Nemotron-H paper Table 1)",
        [] {
          return nemotron_h("nemotron-h-56b",
                            "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-"
                            "M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
                            8192, 64, 32768, 256, 256);
        });
    add("nemotron-3-nano",
        "Nemotron 3 Nano 30B-A3B: 52 hybrid layers (23 Mamba-2, 23 MoE 128 top-6, 6 attention), "
        "h 2688 (HF config.json)",
        nemotron3_nano);
    add("nemotron-3-super",
        "Nemotron 3 Super 120B-A12B: 88 hybrid layers (40 Mamba-2, 40 LatentMoE 512 top-22, 8 "
        "attention), h 4096, 2 MTP depths (Megatron-Bridge provider)",
        nemotron3_super);
    add("deep-mlp", "plain deep MLP: 32 layers of 8192 x 8192 with bias, 1000 classes", deep_mlp);
    return v;
  }();
  return list;
}

}  // namespace

std::vector<PresetInfo> model_presets() {
  std::vector<PresetInfo> out;
  for (const auto& p : presets()) out.push_back(p.info);
  return out;
}

std::vector<std::string> model_preset_names() {
  return preset_names(model_presets());
}

ModelSpec model_preset(const std::string& name, const std::string& field) {
  // Matched case-insensitively, as GPU and cluster presets are.
  const std::string key = to_lower(name);
  for (const auto& p : presets()) {
    if (p.info.name == key) return p.make();
  }
  throw ValidationError::unknown_name(field, name, model_preset_names());
}

}  // namespace loom::models
