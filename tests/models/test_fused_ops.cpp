// The memory-bound kernels of a layer (models/fused_ops, models/flops) under each fusion
// level, checked by hand against the byte counts documented in models/fused_ops.cpp and
// docs/defaults.md. Llama-3-8B shapes from its config (hidden 4096, 32 heads, 8 KV heads of
// 128, FFN 14336, vocab 128256; Meta, Llama 3 model card); GPT 1.7B from Narayanan et al.
// 2021, Table 1 (hidden 2304; learned positions, GeLU MLP with biases, dropout).
#include <doctest/doctest.h>

#include <iterator>
#include <string>
#include <vector>

#include "models/flops.hpp"
#include "models/fused_ops.hpp"
#include "models/model_loader.hpp"

using namespace loom::models;

namespace {

const OpCost* find_op(const std::vector<OpCost>& ops, const std::string& name) {
  for (const OpCost& op : ops)
    if (op.name == name) return &op;
  return nullptr;
}

TrainingPlan llama_plan(Fusion fusion) {
  TrainingPlan plan;
  plan.seq = 8192;
  plan.mbs = 1;
  plan.fusion = fusion;
  return plan;
}

}  // namespace

TEST_CASE("models::FusedOps: RoPE reads and writes the local q and k once when fused") {
  const ModelSpec m = model_preset("llama3-8b");
  const auto ops = layer_ops(m, llama_plan(Fusion::MEGATRON), 0);
  const OpCost* rope = find_op(ops, "rope");
  REQUIRE(rope != nullptr);
  // q 4096 + k 1024 columns, 8192 tokens, 2 B: 83,886,080 B read and as many written.
  CHECK(rope->input_bytes == doctest::Approx(8192.0 * 5120 * 2));
  CHECK(rope->output_bytes == doctest::Approx(8192.0 * 5120 * 2));
  CHECK(rope->kernels == 2);
  // Eager: five kernels per tensor moving five times the bytes.
  const auto eager = layer_ops(m, llama_plan(Fusion::NONE), 0);
  const OpCost* eager_rope = find_op(eager, "rope");
  CHECK(eager_rope->input_bytes + eager_rope->output_bytes ==
        doctest::Approx(5 * (rope->input_bytes + rope->output_bytes)));
  CHECK(find_op(eager, "rope")->kernels == 10);
  // Megatron GPT uses learned absolute positions: no rotation.
  CHECK(find_op(layer_ops(model_preset("gpt-1.7b"), llama_plan(Fusion::MEGATRON), 0), "rope") ==
        nullptr);
}

TEST_CASE("models::FusedOps: eager SwiGLU and RMSNorm launch more kernels and move more bytes") {
  const ModelSpec m = model_preset("llama3-8b");
  const auto fused = layer_ops(m, llama_plan(Fusion::MEGATRON), 0);
  const auto eager = layer_ops(m, llama_plan(Fusion::NONE), 0);
  const auto compiled = layer_ops(m, llama_plan(Fusion::COMPILE), 0);
  // Fused SwiGLU: read gate + up (2 x 14336), write 14336, per token, 2 B.
  const OpCost* act = find_op(fused, "mlp_act");
  CHECK(act->input_bytes + act->output_bytes == doctest::Approx(8192.0 * 3 * 14336 * 2));
  CHECK(act->kernels == 1);
  // Eager: silu (r f, w f) then mul (r 2f, w f) = 5f.
  const OpCost* eager_act = find_op(eager, "mlp_act");
  CHECK(eager_act->input_bytes + eager_act->output_bytes ==
        doctest::Approx(8192.0 * 5 * 14336 * 2));
  CHECK(eager_act->kernels == 2);
  // RMSNorm: fused 2 + 2 B per element; eager 9x that (36 B) in six kernels; compile one kernel.
  CHECK(find_op(fused, "attn_norm")->input_bytes == doctest::Approx(8192.0 * 4096 * 2));
  const OpCost* eager_norm = find_op(eager, "attn_norm");
  CHECK(eager_norm->input_bytes + eager_norm->output_bytes ==
        doctest::Approx(9 * 2 * 8192.0 * 4096 * 2));
  CHECK(find_op(eager, "attn_norm")->kernels == 6);
  CHECK(find_op(compiled, "attn_norm")->kernels == 1);
}

TEST_CASE("models::FusedOps: GPT-OSS's clamped halves: Megatron clamps and rejoins them") {
  // gpt-oss-120b (config.json swiglu_limit 7): 4096 tokens x top-4 = 16384 routed copies on
  // one GPU (ep 1), expert FFN 2880; one half of the up projection's output is
  // 16384 x 2880 x 2 B.
  const ModelSpec m = model_preset("gpt-oss-120b");
  REQUIRE(m.activation_clamp == 7.0);
  TrainingPlan plan = llama_plan(Fusion::MEGATRON);
  plan.seq = 4096;
  const double half = 16384.0 * 2880 * 2;
  const auto fused = layer_ops(m, plan, 0);
  const OpCost* clamp = find_op(fused, "expert_act_clamp");
  REQUIRE(clamp != nullptr);
  // Two clamps (r 1 w 1 half each) and the cat (r 2 w 2): 3 kernels, 8 halves; backward the
  // two masks (r 2 w 1 each) and the gradients' cat (r 2 w 2): 10 halves. It keeps the up
  // projection's output (2 halves) and sits between it and the activation.
  CHECK(clamp->kernels == 3);
  CHECK(clamp->input_bytes + clamp->output_bytes == doctest::Approx(8 * half));
  CHECK(clamp->backward_bytes == doctest::Approx(10 * half));
  CHECK(clamp->saved_bytes == doctest::Approx(2 * half));
  CHECK(std::prev(clamp)->name == "expert_up");
  CHECK(std::next(clamp)->name == "expert_act");
  // Megatron's moe_act checkpoint re-runs both and keeps only the clamp's input: the
  // activation's own saved input (the clamped copy) is freed.
  CHECK((clamp->rerun_by & module_bit(RecomputeModule::MOE_ACT)) != 0);
  CHECK((clamp->freed_by & module_bit(RecomputeModule::MOE_ACT)) == 0);
  const OpCost* act = std::next(clamp);
  CHECK((act->freed_by & module_bit(RecomputeModule::MOE_ACT)) != 0);
  CHECK(act->kept_when_freed == 0);
  // Eager: the two clamps only (4 halves; backward 6); torch.compile fuses them away.
  TrainingPlan eager_plan = plan;
  eager_plan.fusion = Fusion::NONE;
  const auto eager_ops = layer_ops(m, eager_plan, 0);
  const OpCost* eager = find_op(eager_ops, "expert_act_clamp");
  REQUIRE(eager != nullptr);
  CHECK(eager->kernels == 2);
  CHECK(eager->input_bytes + eager->output_bytes == doctest::Approx(4 * half));
  CHECK(eager->backward_bytes == doctest::Approx(6 * half));
  TrainingPlan compiled = plan;
  compiled.fusion = Fusion::COMPILE;
  CHECK(find_op(layer_ops(m, compiled, 0), "expert_act_clamp") == nullptr);
  // A model without the clamp has no such op, and its activation keeps its input under moe_act.
  const auto qwen = layer_ops(model_preset("qwen3-30b-a3b"), plan, 0);
  CHECK(find_op(qwen, "expert_act_clamp") == nullptr);
  CHECK((find_op(qwen, "expert_act")->freed_by & module_bit(RecomputeModule::MOE_ACT)) == 0);
}

TEST_CASE("models::FusedOps: two residual adds per layer, dropout fused into them by Megatron") {
  const ModelSpec gpt = model_preset("gpt-1.7b");  // hidden 2304, dropout
  TrainingPlan plan;
  plan.seq = 2048;
  const auto ops = layer_ops(gpt, plan, 0);
  const OpCost* res = find_op(ops, "attn_residual");
  REQUIRE(res != nullptr);
  REQUIRE(find_op(ops, "mlp_residual") != nullptr);
  const double n = 2048.0 * 2304;
  // Read block output + residual (2 x 2 B), write the sum (2 B) and the 1-byte mask.
  CHECK(res->input_bytes == doctest::Approx(4 * n));
  CHECK(res->output_bytes == doctest::Approx(3 * n));
  CHECK(res->saved_bytes == doctest::Approx(n));
  CHECK(res->kernels == 1);
  plan.fusion = Fusion::NONE;
  CHECK(find_op(layer_ops(gpt, plan, 0), "attn_residual")->kernels == 2);
}

TEST_CASE("models::FusedOps: cross-entropy bytes per fp32 logit, fused and eager, by hand") {
  // 1000 logits of 2 B for 10 tokens. Fused: forward reads 2 + 2 + 4, writes 4 + 4 (and a
  // 4-byte loss per token); backward reads the fp32 softmax and writes the 2-byte gradient.
  const OpCost f = cross_entropy_op(1000, 10, 2, CrossEntropy::FUSED);
  CHECK(f.input_bytes == doctest::Approx(2000));  // the logits themselves
  CHECK(f.input_bytes + f.output_bytes == doctest::Approx(16040));
  CHECK(f.backward_bytes == doctest::Approx(6000));
  CHECK(f.kind == OpKind::LOSS);
  // Eager: upcast + two-pass log_softmax forward; zero-fill, log_softmax backward, downcast.
  const OpCost e = cross_entropy_op(1000, 10, 2, CrossEntropy::EAGER);
  CHECK(e.input_bytes + e.output_bytes == doctest::Approx(18040));
  CHECK(e.backward_bytes == doctest::Approx(22000));
  // Unfused (Megatron's default _VocabParallelCrossEntropy, one torch op per step): upcast
  // r2 w4, max r4, sub_ r4 w4, exp_ r4 w4, sum r4, div_ r4 w4 = 38 B per logit and 4 B per
  // token of loss; backward mul_ r4 w4 and the downcast r4 w2 = 14 B. Six forward kernels.
  const OpCost u = cross_entropy_op(1000, 10, 2, CrossEntropy::UNFUSED);
  CHECK(u.input_bytes + u.output_bytes == doctest::Approx(38040));
  CHECK(u.backward_bytes == doctest::Approx(14000));
  CHECK(u.kernels == 6);
}

TEST_CASE("models::FusedOps: embedding backward zero-fills and scatter-adds the dense grad") {
  // Llama-3-8B, tp 2: 64,128 rows of 4096 zero-filled (2 B) + 8192 tokens x 4096 x 3 x 2 B.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan plan = llama_plan(Fusion::MEGATRON);
  plan.tp = 2;
  const OpCost emb = embedding_ops(m, plan).at(0);
  CHECK(emb.backward_bytes ==
        doctest::Approx(2 * 64128.0 * 4096 + 3 * 2 * 8192.0 * 4096).epsilon(1e-12));
  CHECK(grad_accumulation_bytes_per_param(GradDtype::FP32) == 10);
  CHECK(grad_accumulation_bytes_per_param(GradDtype::BF16) == 6);
  CHECK(wgrad_accumulation_fused(Fusion::MEGATRON));
  CHECK_FALSE(wgrad_accumulation_fused(Fusion::COMPILE));
}

TEST_CASE("models::FusedOps: an MoE layer has a router top-k kernel over fp32 logits") {
  // Qwen3-30B-A3B: 128 experts, top-8 (Qwen3 technical report, Table 2).
  const ModelSpec m = model_preset("qwen3-30b-a3b");
  TrainingPlan plan;
  plan.seq = 4096;
  const std::vector<OpCost> ops = layer_ops(m, plan, 0);  // find_op points into it
  const OpCost* topk = find_op(ops, "router_topk");
  REQUIRE(topk != nullptr);
  CHECK(topk->input_bytes == doctest::Approx(4 * 4096.0 * 128));
  CHECK(topk->output_bytes == doctest::Approx(12 * 4096.0 * 8));
  // Megatron's fused router launches 31 kernels with the gating GEMM (Megatron-LM
  // deepseek-v3-gb200-optimization 2.1.4); torchtitan's eager router 3, compiled 1.
  CHECK(topk->kernels == 30);
  plan.fusion = Fusion::NONE;
  CHECK(find_op(layer_ops(m, plan, 0), "router_topk")->kernels == 3);
  plan.fusion = Fusion::COMPILE;
  CHECK(find_op(layer_ops(m, plan, 0), "router_topk")->kernels == 1);
}
