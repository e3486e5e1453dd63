// FLOP counts against Narayanan et al. 2021 (SC21, arXiv:2104.04473), Sec 5.1 / Eq. 3, and
// by-hand matmul shapes.
#include <doctest/doctest.h>

#include <array>
#include <cmath>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/model_loader.hpp"

using namespace loom::models;

namespace {

// Narayanan et al. Eq. 3 (with activation recomputation): F = 96 B s l h^2 (1 + s/(6h) +
// V/(16 l h)). Without recomputation: the forward pass is 24 B s l h^2 (1 + s/(6h)) for
// the layers plus 2 B s h V for the LM head, the backward pass is twice the forward, and
// recomputation adds one more forward of the layers only (not the LM head), so
//   F_no_recompute = 3 (24 B s l h^2 (1 + s/6h) + 2 B s h V)
//                  = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
double eq3_full(double B, double s, double l, double h, double V) {
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}
double eq3_none(double B, double s, double l, double h, double V) {
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

void check_eq3(const char* preset, std::int64_t batch, int tp, int pp) {
  const ModelSpec m = model_preset(preset);
  TrainingPlan plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.seq = 2048;
  plan.mbs = 1;
  plan.dp = 1;
  plan.gbs = batch;
  const double B = static_cast<double>(batch), s = 2048, l = m.layers,
               h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
  plan.recompute = Recompute::FULL;
  CHECK(hardware_flops_per_step(m, plan) ==
        doctest::Approx(eq3_full(B, s, l, h, V)).epsilon(1e-12));
  CHECK(model_flops_per_step(m, plan) == doctest::Approx(eq3_none(B, s, l, h, V)).epsilon(1e-12));
  plan.recompute = Recompute::NONE;
  CHECK(hardware_flops_per_step(m, plan) ==
        doctest::Approx(eq3_none(B, s, l, h, V)).epsilon(1e-12));
  CHECK(model_flops_per_step(m, plan) == doctest::Approx(eq3_none(B, s, l, h, V)).epsilon(1e-12));
}

}  // namespace

TEST_CASE("models::Flops: full recompute equals Narayanan Eq. 3, 72x form without") {
  // GPT-3 175B (Brown et al. 2020 Table 2.1: l=96, h=12288, V=50257) at batch 1536.
  check_eq3("gpt3-175b", 1536, 8, 8);
  // Narayanan Table 1 row: 1T parameters, l=128, h=25600, V=51200, batch 3072.
  check_eq3("gpt-1t", 3072, 8, 64);
  check_eq3("gpt-1.7b", 512, 1, 1);
}

TEST_CASE("models::Flops: per-GPU op shares sum to the step total") {
  // Splitting by tp, cp and micro-batches only divides the work: one GPU's ops times
  // tp x cp x micro-batches x dp equals the whole step (the FLOP counts are linear in the
  // token count and in the split dimensions).
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan plan;
  plan.tp = 4;
  plan.cp = 2;
  plan.dp = 2;
  plan.mbs = 2;
  plan.gbs = 16;
  plan.seq = 8192;
  plan.sp = true;
  double per_gpu = 0;
  for (int l = 0; l < m.layers; ++l)
    for (const OpCost& op : layer_ops(m, plan, l))
      if (op.is_matmul()) per_gpu += op.train_flops();
  for (const OpCost& op : head_ops(m, plan))
    if (op.is_matmul()) per_gpu += op.train_flops();
  const double gpus_share = 4.0 * 2 * 2 * static_cast<double>(plan.micro_batches());
  CHECK(per_gpu * gpus_share == doctest::Approx(model_flops_per_step(m, plan)).epsilon(1e-12));
}

TEST_CASE("models::Flops: matmul shapes and backward split of a GQA layer") {
  // Llama-3-8B, tp=8, mbs=1, s=8192: QKV is column-parallel, [8192 x 4096] x [4096 x
  // (4096+1024+1024)/8]; the output projection row-parallel [8192 x 512] x [512 x 4096].
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan plan;
  plan.tp = 8;
  plan.seq = 8192;
  const auto ops = layer_ops(m, plan, 0);
  auto find = [&](const std::string& name) {
    for (const auto& op : ops)
      if (op.name == name) return op;
    FAIL("op not found: " << name);
    return OpCost{};
  };
  const OpCost qkv = find("qkv_proj");
  CHECK(qkv.shape.m == 8192);
  CHECK(qkv.shape.n == 768);
  CHECK(qkv.shape.k == 4096);
  CHECK(qkv.fwd_flops == 2.0 * 8192 * 768 * 4096);
  CHECK(qkv.bwd_input_flops == qkv.fwd_flops);
  CHECK(qkv.bwd_weight_flops == qkv.fwd_flops);
  const OpCost out = find("out_proj");
  CHECK(out.shape.k == 512);
  CHECK(out.comm == CommKind::TP_ALL_REDUCE);
  // Attention scores: 4 heads per GPU, [8192 x 128] x [128 x 8192] each; no weights, so
  // both backward matmuls are input gradients.
  const OpCost scores = find("attn_scores");
  CHECK(scores.shape.batch == 4);
  CHECK(scores.fwd_flops == 2.0 * 4 * 8192 * 8192 * 128);
  CHECK(scores.bwd_input_flops == 2 * scores.fwd_flops);
  CHECK(scores.bwd_weight_flops == 0);
  CHECK(scores.attention_core);
  // SwiGLU up projection is gate and up fused: n = 2 x 14336 / 8.
  CHECK(find("mlp_up").shape.n == 3584);
}

TEST_CASE("models::Flops: a sliding-window layer counts only its window's scores, by hand") {
  // gpt-oss-120b at s = 4096, one sequence: layer 0 windows 128 keys, layer 1 is full.
  // Full: the counted square is 64 heads x 4096 x 4096 keys (a causal kernel computes half).
  // Window: sum over rows of min(i + 1, 128) = 128 x 4096 - 128 x 127 / 2 = 516,160 scores
  // per head, half of a count of 2 x 128 - 128 x 127 / 4096 = 252.03 keys per row.
  const ModelSpec m = model_preset("gpt-oss-120b");
  TrainingPlan plan;
  plan.seq = 4096;
  plan.mbs = plan.gbs = 1;
  auto scores = [&](int layer) {
    for (const OpCost& op : layer_ops(m, plan, layer))
      if (op.name == "attn_scores") return op;
    return OpCost{};
  };
  const OpCost full = scores(1), windowed = scores(0);
  CHECK(full.fwd_flops == doctest::Approx(2.0 * 64 * 4096 * 4096 * 64));
  CHECK(full.attention.window == 0);
  CHECK(windowed.attention.window == 128);
  CHECK(windowed.fwd_flops ==
        doctest::Approx(2.0 * 64 * 4096 * (2 * 128 - 128.0 * 127 / 4096) * 64));
  CHECK(windowed.fwd_flops / 2 == doctest::Approx(2.0 * 64 * 64 * (128.0 * 4096 - 128 * 127 / 2)));
  // The projections are the same in both layers.
  for (const char* name : {"qkv_proj", "out_proj"}) {
    double a = 0, b = 0;
    for (const OpCost& op : layer_ops(m, plan, 0))
      if (op.name == name) a = op.fwd_flops;
    for (const OpCost& op : layer_ops(m, plan, 1))
      if (op.name == name) b = op.fwd_flops;
    CHECK(a == b);
  }
}

TEST_CASE("models::Flops: selective recompute repeats only the attention core") {
  const ModelSpec m = model_preset("gpt3-175b");
  TrainingPlan plan;
  plan.recompute = Recompute::SELECTIVE;
  double core = 0, recompute = 0;
  for (const OpCost& op : layer_ops(m, plan, 0)) {
    if (op.attention_core) core += op.fwd_flops;
    recompute += op.recompute_flops;
  }
  CHECK(recompute == core);
  CHECK(recompute > 0);
  plan.recompute = Recompute::NONE;
  for (const OpCost& op : layer_ops(m, plan, 0)) CHECK(op.recompute_flops == 0);
}

TEST_CASE("models::Flops: MoE counts top-k experts, the router and the EP all-to-all") {
  // Mixtral 8x7B, one micro-batch of 4096 tokens, ep=8 tp=1: each GPU processes
  // 4096 x 2 routed token copies on its one local expert, [8192 x 4096] x [4096 x 28672].
  const ModelSpec m = model_preset("mixtral-8x7b");
  TrainingPlan plan;
  plan.seq = 4096;
  plan.dp = 8;
  plan.ep = 8;
  double router = 0, experts = 0;
  bool all_to_all = false;
  for (const OpCost& op : layer_ops(m, plan, 0)) {
    if (op.name == "router") router = op.fwd_flops;
    if (op.name == "expert_up") {
      experts = op.fwd_flops;
      CHECK(op.shape.m == 8192);
      CHECK(op.shape.n == 28672);
      CHECK(op.shape.batch == 1);
      CHECK(op.expert);
    }
    if (op.comm == CommKind::EP_ALL_TO_ALL) all_to_all = true;
  }
  CHECK(router == 2.0 * 4096 * 4096 * 8);
  CHECK(experts == 2.0 * 4096 * 2 * 4096 * 28672);
  CHECK(all_to_all);
  // Model FLOPs follow active parameters: dense-equivalent 6 x tokens x active (minus the
  // embedding lookup) plus attention, so MoE FLOPs stay far below 6 x tokens x total.
  plan.ep = 1;
  plan.dp = 1;
  const double step = model_flops_per_step(m, plan);
  const ParameterCounts c = count_parameters(m);
  CHECK(step < 6 * 4096 * c.total / 2);
  CHECK(step > 6 * 4096 * (c.active - c.embedding));
}

TEST_CASE("models::Flops: expert tensor parallelism 1 under tp 2 keeps experts whole") {
  // Mixtral 8x7B, 4096 tokens, tp 2 with SP, ep 8. etp = tp (Megatron's default): each GPU
  // runs all 4096 x 2 routed copies at ffn / 2 = 14336 and reduce-scatters the down
  // projection. etp 1 (the Megatron-Bridge MoE recipes): each TP rank routes its own 2048
  // tokens, 4096 copies at the full 28672 width, no TP collective after the experts. FLOPs
  // per GPU are the same; each GPU holds its expert whole (twice the parameters).
  const ModelSpec m = model_preset("mixtral-8x7b");
  TrainingPlan plan;
  plan.seq = 4096;
  plan.tp = 2;
  plan.sp = true;
  plan.dp = 8;
  plan.ep = 8;
  auto find = [&](const char* name) {
    for (const OpCost& op : layer_ops(m, plan, 0))
      if (op.name == name) return op;
    return OpCost{};
  };
  const OpCost up_tp = find("expert_up"), down_tp = find("expert_down");
  CHECK(up_tp.shape.m == 8192);
  CHECK(up_tp.shape.n == 28672 / 2);
  CHECK(down_tp.comm == CommKind::TP_REDUCE_SCATTER);
  plan.etp = 1;
  const OpCost up = find("expert_up"), down = find("expert_down"), combine = find("moe_combine");
  CHECK(up.shape.m == 4096);
  CHECK(up.shape.n == 28672);
  CHECK(down.comm == CommKind::NONE);
  CHECK(up.fwd_flops == up_tp.fwd_flops);          // 2 x 4096 x 28672 x 4096 both ways
  CHECK(up.params == 2 * up_tp.params);            // whole experts on each GPU of the etp group
  CHECK(combine.comm_bytes == 2.0 * 4096 * 4096);  // bf16 x 4096 copies x h
  // Per-step model FLOPs do not depend on the split.
  TrainingPlan other = plan;
  other.etp = 0;
  CHECK(model_flops_per_step(m, plan) == model_flops_per_step(m, other));
}

// DeepSeek-V3 report Sec 2.2 / Megatron-core multi_token_prediction.py: one MTP module after
// the main loss: embedding of the shifted tokens, two RMSNorms, eh_proj (2h -> h), one
// transformer layer like the last (MoE) layer, the shared LM head and its loss.
TEST_CASE("models::Flops: DeepSeek-V3 MTP adds eh_proj, one MoE layer and a second LM head") {
  const ModelSpec m = model_preset("deepseek-v3");
  REQUIRE(m.mtp_layers == 1);
  TrainingPlan plan;
  plan.mbs = 1;
  plan.seq = 4096;
  const double T = 4096, h = 7168, V = 129280;
  auto matmul_fwd = [](const std::vector<OpCost>& ops) {
    double f = 0;
    for (const OpCost& op : ops)
      if (op.is_matmul()) f += op.fwd_flops;
    return f;
  };
  const auto with = head_ops(m, plan);
  plan.mtp = false;
  const auto without = head_ops(m, plan);
  const double layer = matmul_fwd(layer_ops(m, plan, 60));
  // eh_proj: 2 T (2h) h; the shared head again: 2 T h V.
  CHECK(matmul_fwd(with) - matmul_fwd(without) ==
        doctest::Approx(layer + 2 * T * 2 * h * h + 2 * T * h * V));
  int losses = 0;
  for (const OpCost& op : with) losses += op.kind == OpKind::LOSS;
  CHECK(losses == 2);
  // On a single stage the MTP module shares the embedding and head: no new table.
  double params_with = 0, params_without = 0;
  for (const OpCost& op : with) params_with += op.expert ? 0 : op.params;
  for (const OpCost& op : without) params_without += op.expert ? 0 : op.params;
  double layer_dense = 0;
  for (const OpCost& op : layer_ops(m, plan, 60)) layer_dense += op.expert ? 0 : op.params;
  // + eh_proj 2h x h, enorm, hnorm, the MTP final norm (h each).
  CHECK(params_with - params_without == doctest::Approx(layer_dense + 2 * h * h + 3 * h));
}

// Megatron --recompute-modules (transformer_config.py recompute_modules): "mla_up_proj"
// re-runs MLA's q/kv up-projections (+ RoPE, no FLOPs counted) and frees Q, K, V; "mlp" a
// dense layer's MLP; "moe" an MoE layer's whole MLP block. Shapes: DeepSeek-V3 config
// (q_lora_rank 1536, kv_lora_rank 512, 128 heads, nope 128 + rope 64, v 128, ffn 18432).
TEST_CASE("models::Flops: Megatron recompute modules re-run their ops by hand") {
  const ModelSpec m = model_preset("deepseek-v3");
  TrainingPlan plan;
  plan.mbs = 1;
  plan.seq = 4096;
  plan.recompute = Recompute::SELECTIVE;
  const double T = 4096, h = 7168, f = 18432;
  auto recompute = [&](int layer) {
    double r = 0;
    for (const OpCost& op : layer_ops(m, plan, layer))
      if (op.is_matmul()) r += op.recompute_flops;
    return r;
  };
  plan.recompute_modules = module_bit(RecomputeModule::MLA_UP_PROJ);
  const double q_up = 2 * T * 1536 * (128 * 192.0), kv_up = 2 * T * 512 * (128 * 256.0);
  CHECK(recompute(0) == doctest::Approx(q_up + kv_up));
  plan.recompute_modules = module_bit(RecomputeModule::MLP);
  CHECK(recompute(0) == doctest::Approx(3 * 2 * T * h * f));  // gate, up, down
  CHECK(recompute(3) == 0);                                   // MoE layer: "mlp" does not apply
  // The default (core_attn) is the attention core: scores + attention x V, 2 T s heads d.
  plan.recompute_modules = module_bit(RecomputeModule::CORE_ATTN);
  CHECK(recompute(0) == doctest::Approx(2 * T * 4096 * 128 * (192.0 + 128)));
  plan.recompute_modules = module_bit(RecomputeModule::MOE);
  double mlp_part = 0;
  bool in_mlp = false;
  for (const OpCost& op : layer_ops(m, plan, 3)) {
    in_mlp = in_mlp || op.name == "router";
    if (in_mlp && op.is_matmul()) mlp_part += op.fwd_flops;
  }
  CHECK(recompute(3) == doctest::Approx(mlp_part));
}

// Stored activations under "mla_up_proj": Q (T x 128 x 192), K (T x 128 x 192) and
// V (T x 128 x 128) in bf16 are freed, and the RoPE's saved bytes (none: it keeps nothing).
TEST_CASE("models::Flops: mla_up_proj recompute frees the up-projected Q, K, V") {
  const ModelSpec m = model_preset("deepseek-v3");
  TrainingPlan plan;
  plan.mbs = 1;
  plan.seq = 4096;
  plan.recompute = Recompute::SELECTIVE;
  plan.recompute_modules = 0;
  double none = 0, up = 0;
  for (const OpCost& op : layer_ops(m, plan, 0)) none += selective_saved_bytes(plan, op);
  plan.recompute_modules = module_bit(RecomputeModule::MLA_UP_PROJ);
  for (const OpCost& op : layer_ops(m, plan, 0)) up += selective_saved_bytes(plan, op);
  const double T = 4096;
  CHECK(none - up == doctest::Approx(2 * T * 128 * (192.0 + 192 + 128)));
}

// A Mamba-2 block of Nemotron 3 Nano by hand (models/mamba_ops.cpp): at tp 2 the in_proj
// and the conv split heads and groups, the SSD's fp32 chunk-state traffic follows T / Q x
// heads x P x N, and the ops' parameters add up to the layer's count.
TEST_CASE("models::Flops: a Mamba-2 block's ops by hand") {
  const ModelSpec m = model_preset("nemotron-3-nano");
  TrainingPlan p;
  p.tp = 2;
  p.sp = true;
  p.seq = 8192;
  const std::vector<OpCost> ops = layer_ops(m, p, 0);
  const auto find = [&](const char* name) -> const OpCost& {
    for (const OpCost& op : ops)
      if (op.name == name) return op;
    FAIL("no op " << name);
    return ops.front();
  };
  const OpCost& in = find("mamba_in_proj");
  CHECK(in.shape.n == 10304 / 2);
  CHECK(in.shape.k == 2688);
  CHECK(in.fwd_flops == 2.0 * 8192 * 5152 * 2688);
  CHECK(find("mamba_norm").comm == CommKind::TP_ALL_GATHER);  // sequence-parallel
  CHECK(find("mamba_out_proj").comm == CommKind::TP_REDUCE_SCATTER);
  CHECK(find("mamba_conv").params == 3072.0 * 5);
  // T = 8192 tokens, 32 local heads of P 64, N 128, chunks of 128: fp32 states of
  // 64 chunks x 32 x 64 x 128, written and read twice in the forward (2 + 2 passes).
  const double states = 4.0 * 64 * 32 * 64 * 128;
  const OpCost& ssd = find("mamba_ssd");
  const double xbc = 2.0 * 8192 * (2048 + 2 * 4 * 128);
  const double y = 2.0 * 8192 * 2048;  // the local d_inner
  CHECK(ssd.input_bytes ==
        doctest::Approx(2 * xbc + y + 8.0 * 8192 * 32 + 2 * states + 4.0 * 8192 * 4 * 128));
  CHECK(ssd.saved_bytes == y);
  // in_proj's 16-bit output is kept by the conv-scan, not as an FP8 linear input.
  CHECK(find("mamba_conv").saved_bytes == 2.0 * 8192 * 5152);
  CHECK(find("mamba_out_norm").saved_bytes == doctest::Approx(y + 4.0 * 8192 * 4));
  CHECK(ssd.backward_bytes ==
        doctest::Approx(2 * (ssd.input_bytes + ssd.output_bytes) + 3 * states));
  double params = 0;
  for (const OpCost& op : ops) params += op.params;
  const LayerParameters lp = layer_parameters(m, 0);
  // Every part split by tp 2 but the pre-norm, which each rank holds whole.
  CHECK(params == doctest::Approx(lp.mamba / 2 + 2688));
  // No attention and no MLP in a Mamba block; none of them recomputed by "layernorm".
  for (const OpCost& op : ops) {
    CHECK(op.kind != OpKind::ATTENTION);
    CHECK(op.rerun_by == 0);
  }
  // The attention block of the pattern has no RoPE and no MLP; the MoE block no attention.
  for (const OpCost& op : layer_ops(m, p, 5)) {
    CHECK(op.name != "rope");
    CHECK(op.name.find("mlp") == std::string::npos);
  }
  for (const OpCost& op : layer_ops(m, p, 1)) CHECK(op.kind != OpKind::ATTENTION);
}

// LatentMoE (Megatron-core moe_layer.py): tokens reach the experts at the latent width.
TEST_CASE("models::Flops: LatentMoE dispatches at the latent width") {
  ModelSpec m = model_preset("nemotron-3-nano");
  TrainingPlan p;
  p.ep = 8;
  p.dp = 8;
  p.seq = 4096;
  const auto dispatch_bytes = [&](const ModelSpec& model) {
    for (const OpCost& op : layer_ops(model, p, 1))
      if (op.name == "moe_dispatch") return op.comm_bytes;
    return 0.0;
  };
  const double full = dispatch_bytes(m);
  m.moe.latent = 672;  // hidden / 4, the LatentMoE paper's compression
  CHECK(dispatch_bytes(m) == doctest::Approx(full / 4));
  bool down = false, up = false;
  for (const OpCost& op : layer_ops(m, p, 1)) {
    if (op.name == "latent_down") down = op.shape.n == 672 && op.params == 2688.0 * 672;
    if (op.name == "latent_up") up = op.shape.k == 672;
    if (op.name == "expert_up") CHECK(op.shape.k == 672);
  }
  CHECK(down);
  CHECK(up);
}

// The permute after a flex (DeepEP) exchange reads the receive buffer, each token once per
// GPU its experts reach, and writes the routed copies; the unpermute before the combine the
// reverse (Megatron-core _DeepepManager.get_permuted_hidden_states_by_experts /
// get_restored_hidden_states_by_experts). The all-to-all dispatcher permutes its own tokens.
TEST_CASE("models::Flops: a flex dispatcher permutes the tokens it received") {
  const ModelSpec m = model_preset("qwen3-30b-a3b");  // h 2048, 128 experts top-8
  TrainingPlan p;
  p.ep = 16;
  p.dp = 16;
  p.seq = 4096;
  const auto bytes = [&](MoeDispatcher d, const char* name) {
    p.moe_dispatcher = d;
    for (const OpCost& op : layer_ops(m, p, 0))
      if (op.name == name) return std::pair{op.input_bytes, op.output_bytes};
    return std::pair{0.0, 0.0};
  };
  const double tokens = 4096.0 * 2048 * 2, copies = 8 * tokens;
  // 8 local experts of 128: a token's top-8 reach 16 (1 - C(120, 8) / C(128, 8)) GPUs.
  double miss = 1;
  for (int i = 0; i < 8; ++i) miss *= (120.0 - i) / (128.0 - i);
  const double reached = 16 * (1 - miss);
  CHECK(reached == doctest::Approx(6.5965).epsilon(1e-4));
  CHECK(bytes(MoeDispatcher::FLEX, "moe_dispatch").first == doctest::Approx(tokens * reached));
  CHECK(bytes(MoeDispatcher::FLEX, "moe_dispatch").second == doctest::Approx(copies));
  CHECK(bytes(MoeDispatcher::FLEX, "moe_combine").first == doctest::Approx(copies));
  CHECK(bytes(MoeDispatcher::FLEX, "moe_combine").second == doctest::Approx(tokens * reached));
  CHECK(bytes(MoeDispatcher::ALLTOALL, "moe_dispatch").first == doctest::Approx(tokens));
  CHECK(bytes(MoeDispatcher::ALLTOALL, "moe_combine").second == doctest::Approx(tokens));
  // The all-to-all dispatcher sends the routed copies' fp32 probabilities in an all-to-all of
  // their own: 4096 x 8 x 4 B; the flex exchange carries them.
  const auto probs = [&](MoeDispatcher d) {
    p.moe_dispatcher = d;
    for (const OpCost& op : layer_ops(m, p, 0))
      if (op.name == "moe_probs_dispatch")
        return op.comm == CommKind::EP_ALL_TO_ALL ? op.comm_bytes : -1.0;
    return 0.0;
  };
  CHECK(probs(MoeDispatcher::ALLTOALL) == doctest::Approx(4096.0 * 8 * 4));
  CHECK(probs(MoeDispatcher::FLEX) == 0.0);
  // torchtitan weights by the scores on the token's own GPU: its all-to-alls carry tokens only.
  p.framework = Framework::TORCHTITAN;
  CHECK(probs(MoeDispatcher::ALLTOALL) == 0.0);
}

// A hybrid's MTP depth is built from its MTP pattern (Nemotron 3 Super: "*E", an attention
// and an MoE block; Megatron --mtp-hybrid-override-pattern), each depth after the main loss.
TEST_CASE("models::Flops: a hybrid's MTP depths follow its MTP pattern") {
  const ModelSpec m = model_preset("nemotron-3-super");
  TrainingPlan p;
  p.seq = 4096;
  int attention = 0, experts = 0, heads = 0;
  for (const OpCost& op : head_ops(m, p)) {
    if (op.name == "mtp_attn_scores") ++attention;
    if (op.name == "mtp_expert_up") ++experts;
    if (op.name.ends_with("lm_head")) ++heads;
  }
  CHECK(attention == 2);  // two depths (mtp_layers 2), one attention block each
  CHECK(experts == 2);
  CHECK(heads == 3);  // the main head and one per depth
  ModelSpec bad = m;
  bad.mtp_pattern = "*X";
  CHECK_THROWS_WITH_AS(validate_model(bad), doctest::Contains("'X' is not a layer type"),
                       loom::ValidationError);
}

TEST_CASE("models::Flops: a repeated MTP module holds its weights once") {
  // Nemotron 3 Super's recipe runs its two MTP depths through one module
  // (mtp_use_repeated_layer): both depths compute, the second holds no parameters of its own.
  ModelSpec m = model_preset("nemotron-3-super");
  REQUIRE(m.mtp_repeated_layer);
  TrainingPlan p;
  p.seq = 4096;
  p.pp = 2;  // the last stage holds its own embedding copy, once
  const auto mtp_params = [&](const ModelSpec& model) {
    double first = 0, later = 0, flops = 0;
    int depth = -1;
    for (const OpCost& op : head_ops(model, p)) {
      if (!op.name.starts_with("mtp_")) continue;
      if (op.name == "mtp_embedding") ++depth;
      (depth == 0 ? first : later) += op.params;
      flops += op.fwd_flops;
    }
    return std::array<double, 3>{first, later, flops};
  };
  const auto repeated = mtp_params(m);
  CHECK(repeated[0] > 0);
  CHECK(repeated[1] == 0);
  m.mtp_repeated_layer = false;
  const auto own = mtp_params(m);
  CHECK(own[0] == repeated[0]);
  // Each depth its own module: the second holds the first's parameters less the embedding
  // table, which the depths always share.
  double table = 0;
  for (const OpCost& op : embedding_ops(m, p)) table += op.params;
  CHECK(own[1] == doctest::Approx(repeated[0] - table));
  CHECK(own[2] == repeated[2]);  // the same work either way
  m.mtp_repeated_layer = true;
  m.mtp_layers = 1;
  CHECK_THROWS_WITH_AS(validate_model(m), doctest::Contains("model.mtp_repeated_layer"),
                       loom::ValidationError);
}
