// Parameter counts against published totals. Each total is quoted at the precision its
// source prints, so the checks allow half a unit of the last printed digit.
#include <doctest/doctest.h>

#include <algorithm>

#include "models/model_loader.hpp"
#include "models/model_spec.hpp"

using namespace loom::models;

namespace {
double total_b(const char* name) {
  return count_parameters(model_preset(name)).total / 1e9;
}
double active_b(const char* name) {
  return count_parameters(model_preset(name)).active / 1e9;
}
}  // namespace

TEST_CASE("models::Parameters: Llama 3 and 3.1 totals match Meta's published sizes") {
  // HuggingFace meta-llama/Meta-Llama-3-8B model page: "Model size 8.03B params".
  CHECK(total_b("llama3-8b") == doctest::Approx(8.03).epsilon(0.005 / 8.03));
  // HuggingFace meta-llama/Meta-Llama-3-70B model page: "Model size 70.6B params".
  CHECK(total_b("llama3-70b") == doctest::Approx(70.6).epsilon(0.05 / 70.6));
  // HuggingFace meta-llama/Llama-3.1-405B model page: "Model size 406B params" (405.9B in
  // the safetensors index: 405,853,388,800 parameters).
  CHECK(total_b("llama3-405b") == doctest::Approx(405.9).epsilon(0.05 / 405.9));
}

TEST_CASE("models::Parameters: Llama 2 7B is 6.74B") {
  // HuggingFace meta-llama/Llama-2-7b-hf model page: "Model size 6.74B params".
  CHECK(total_b("llama2-7b") == doctest::Approx(6.74).epsilon(0.005 / 6.74));
  // Touvron et al. 2023 Table 1 names 13B and 70B; HF pages: 13.0B and 69.0B.
  CHECK(total_b("llama2-13b") == doctest::Approx(13.0).epsilon(0.05 / 13.0));
  CHECK(total_b("llama2-70b") == doctest::Approx(69.0).epsilon(0.05 / 69.0));
}

TEST_CASE("models::Parameters: Mixtral 8x7B has 46.7B total and 12.9B active") {
  // Mistral AI, "Mixtral of experts" announcement (Dec 2023): "46.7B total parameters but
  // only uses 12.9B parameters per token".
  CHECK(total_b("mixtral-8x7b") == doctest::Approx(46.7).epsilon(0.05 / 46.7));
  CHECK(active_b("mixtral-8x7b") == doctest::Approx(12.9).epsilon(0.05 / 12.9));
  // Mistral AI, "Cheaper, Better, Faster, Stronger" (Apr 2024): 141B total, 39B active.
  CHECK(total_b("mixtral-8x22b") == doctest::Approx(141).epsilon(0.5 / 141));
  CHECK(active_b("mixtral-8x22b") == doctest::Approx(39).epsilon(0.5 / 39));
}

TEST_CASE("models::Parameters: DeepSeek-V3 has 671B total and 37B active") {
  // DeepSeek-V3 Technical Report (arXiv:2412.19437), abstract: "671B total parameters with
  // 37B activated for each token" (main model, without the MTP module).
  CHECK(total_b("deepseek-v3") == doctest::Approx(671).epsilon(0.5 / 671));
  // The report's 37B leaves out the input-embedding table (a lookup, not a matmul): loom
  // counts 36.6B that way and 37.6B with the embedding, which Mistral does count above.
  const ParameterCounts c = count_parameters(model_preset("deepseek-v3"));
  CHECK((c.active - c.embedding) / 1e9 == doctest::Approx(37).epsilon(0.5 / 37));
  CHECK(c.active / 1e9 == doctest::Approx(37.55).epsilon(0.01 / 37.55));
}

TEST_CASE("models::Parameters: Qwen3-30B-A3B has 30.5B total and 3.3B active") {
  // Qwen3 model card (HuggingFace Qwen/Qwen3-30B-A3B): "Number of Parameters: 30.5B in
  // total and 3.3B activated".
  CHECK(total_b("qwen3-30b-a3b") == doctest::Approx(30.5).epsilon(0.05 / 30.5));
  CHECK(active_b("qwen3-30b-a3b") == doctest::Approx(3.3).epsilon(0.05 / 3.3));
}

TEST_CASE("models::Parameters: gpt-oss-120b and gpt-oss-20b match the OpenAI model card") {
  // "gpt-oss-120b & gpt-oss-20b Model Card" (OpenAI, 2025), Table 1: 116.83B / 20.91B total
  // parameters; active per token 5.13B / 3.61B, which leaves out the input embedding
  // (201088 x 2880 = 0.58B).
  CHECK(total_b("gpt-oss-120b") == doctest::Approx(116.83).epsilon(0.01 / 116.83));
  CHECK(total_b("gpt-oss-20b") == doctest::Approx(20.91).epsilon(0.01 / 20.91));
  const ParameterCounts big = count_parameters(model_preset("gpt-oss-120b"));
  const ParameterCounts small = count_parameters(model_preset("gpt-oss-20b"));
  CHECK((big.active - big.embedding) / 1e9 == doctest::Approx(5.13).epsilon(0.01 / 5.13));
  CHECK((small.active - small.embedding) / 1e9 == doctest::Approx(3.61).epsilon(0.01 / 3.61));
}

TEST_CASE("models::Parameters: GPT-3 is 175B and the Narayanan models match P = 12lh^2(...)") {
  // Brown et al. 2020, Table 2.1: GPT-3 175B (96 layers, d_model 12288).
  CHECK(total_b("gpt3-175b") == doctest::Approx(175).epsilon(0.5 / 175));
  // Narayanan et al. 2021 Sec 5.1: P = 12lh^2 (1 + 13/(12h) + (V + s)/(12lh)); loom also
  // counts the final LayerNorm (2h), which the formula omits. Table 1 prints 145.6B for
  // l=80, h=12288 and 1008.0B for l=128, h=25600.
  const ModelSpec m = model_preset("gpt-145b");
  const double l = m.layers, h = static_cast<double>(m.hidden), V = 51200, s = 2048;
  const double paper = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  CHECK(count_parameters(m).total == doctest::Approx(paper + 2 * h).epsilon(1e-12));
  CHECK(total_b("gpt-145b") == doctest::Approx(145.6).epsilon(0.05 / 145.6));
  CHECK(total_b("gpt-1t") == doctest::Approx(1008.0).epsilon(0.05 / 1008.0));
  CHECK(total_b("gpt-1.7b") == doctest::Approx(1.7).epsilon(0.05 / 1.7));
}

TEST_CASE("models::Parameters: the parts add up and tied embeddings count once") {
  const ModelSpec m = model_preset("llama3-8b");
  const ParameterCounts c = count_parameters(m);
  // By hand: embedding and LM head are 128256 x 4096 each; a layer has q,o 4096^2, k,v
  // 4096 x 1024, SwiGLU 3 x 4096 x 14336 and two RMSNorm scales of 4096.
  CHECK(c.embedding == 128256.0 * 4096);
  CHECK(c.lm_head == 128256.0 * 4096);
  const double layer = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336 + 2 * 4096;
  CHECK(layer_parameters(m, 0).total() == layer);
  CHECK(c.total == c.embedding + c.lm_head + 4096 + 32 * layer);
  CHECK(c.active == c.total);
  const ParameterCounts g = count_parameters(model_preset("gpt3-175b"));
  CHECK(g.lm_head == 0);
}

TEST_CASE(
    "models::Parameters: Nemotron 3 Nano has 31.6B total and 3.2B active (3.6B with embeddings)") {
  // NVIDIA, HuggingFace nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 model card and the
  // Nemotron 3 Nano technical report (arXiv:2512.20848): 31.6B total parameters, 3.2B active
  // per token, 3.6B counting the embeddings.
  const ParameterCounts c = count_parameters(model_preset("nemotron-3-nano"));
  CHECK(c.total / 1e9 == doctest::Approx(31.6).epsilon(0.05 / 31.6));
  CHECK(c.active / 1e9 == doctest::Approx(3.6).epsilon(0.05 / 3.6));
  CHECK((c.active - c.embedding) / 1e9 == doctest::Approx(3.2).epsilon(0.05 / 3.2));
  // One Mamba-2 mixer by hand (Megatron-core MambaMixer): in_proj 2688 x (2 x 4096 + 2 x 8 x
  // 128 + 64), the conv over 6144 channels (kernel 4 + bias), A_log, D and dt_bias per head,
  // the gated norm's 4096 scales, out_proj 4096 x 2688; plus the block's pre-norm.
  const ModelSpec m = model_preset("nemotron-3-nano");
  const LayerParameters mamba = layer_parameters(m, 0);
  CHECK(mamba.mamba == 2688.0 * 10304 + 6144.0 * 5 + 3 * 64 + 4096 + 4096.0 * 2688);
  CHECK(mamba.total() == mamba.mamba + 2688);
  CHECK(mamba.attention == 0);
  CHECK(mamba.mlp == 0);
  // The attention block: q 32 x 128, k and v 2 x 128 each, o 4096 x 2688; no MLP.
  const LayerParameters attn = layer_parameters(m, 5);
  CHECK(attn.total() == 2688.0 * (4096 + 256 + 256) + 4096.0 * 2688 + 2688);
  // An MoE block: the router with its expert bias, 128 squared-ReLU experts (up and down) and
  // the shared expert; no attention.
  const LayerParameters moe = layer_parameters(m, 1);
  CHECK(moe.attention == 0);
  CHECK(moe.router == 2688.0 * 128 + 128);
  CHECK(moe.one_expert == 2.0 * 2688 * 1856);
  CHECK(moe.mlp == 2.0 * 2688 * 3712);
}

TEST_CASE("models::Parameters: Nemotron 3 Super is 120B-A12B with LatentMoE experts") {
  // NVIDIA names it Nemotron 3 Super 120B-A12B (Megatron-Bridge Nemotron3SuperProvider gives
  // the sizes): about 120B total, 12B active; loom counts 120.67B and 12.77B (embeddings in).
  const ParameterCounts c = count_parameters(model_preset("nemotron-3-super"));
  CHECK(c.total / 1e9 == doctest::Approx(120.67).epsilon(0.005 / 120.67));
  CHECK(c.total / 1e9 > 120);
  CHECK(c.total / 1e9 < 121);
  CHECK((c.active - c.embedding) / 1e9 == doctest::Approx(12.2).epsilon(0.05 / 12.2));
  // A LatentMoE expert works at the latent width 1024: up and down of 1024 x 2688; the two
  // latent projections (4096 x 1024 each) sit with the router.
  const LayerParameters moe = layer_parameters(model_preset("nemotron-3-super"), 1);
  CHECK(moe.one_expert == 2.0 * 1024 * 2688);
  CHECK(moe.router == 4096.0 * 512 + 512 + 2.0 * 4096 * 1024);
}

TEST_CASE("models::Parameters: Nemotron-H 8B and 56B hybrids") {
  // NVIDIA, "Nemotron-H: A Family of Accurate and Efficient Hybrid Mamba-Transformer Models"
  // (arXiv:2504.03624), Table 1: 8B and 56B models of 52 and 118 layers (24 / 54 Mamba-2,
  // 24 / 54 FFN, 4 / 10 attention). loom counts 8.10B and 56.32B.
  const ModelSpec h8 = model_preset("nemotron-h-8b");
  CHECK(h8.layers == 52);
  CHECK(std::count(h8.pattern.begin(), h8.pattern.end(), '*') == 4);
  CHECK(total_b("nemotron-h-8b") == doctest::Approx(8.1).epsilon(0.05 / 8.1));
  const ModelSpec h56 = model_preset("nemotron-h-56b");
  CHECK(h56.layers == 118);
  CHECK(std::count(h56.pattern.begin(), h56.pattern.end(), 'M') == 54);
  CHECK(std::count(h56.pattern.begin(), h56.pattern.end(), '*') == 10);
  CHECK(total_b("nemotron-h-56b") == doctest::Approx(56.3).epsilon(0.05 / 56.3));
  // A dense MLP block of the 8B: squared ReLU, up and down of 4096 x 21504, its pre-norm.
  CHECK(layer_parameters(h8, 1).total() == 2.0 * 4096 * 21504 + 4096);
}
