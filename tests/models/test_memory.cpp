// The memory model against published formulas: ZeRO (Rajbhandari et al. 2020), Megatron's
// distributed optimizer, and Korthikanti et al. 2022 activation memory.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "models/flops.hpp"
#include "models/memory.hpp"
#include "models/model_loader.hpp"

using namespace loom;
using namespace loom::models;

namespace {

// In-flight micro-batches by the published closed formulas: 1F1B holds min(p - r, m) on
// stage r (Narayanan et al. 2021 Sec 2.2), GPipe all m, interleaved Megatron's
// min(2 (p - r - 1) + (v - 1) p + 1, m v) / v. The memory model takes them as input
// (strategies derives them from the schedule); tests/strategies checks the two agree.
std::vector<double> closed_in_flight(const TrainingPlan& p) {
  const double m = static_cast<double>(p.micro_batches()), pp = p.pp, v = p.vpp;
  std::vector<double> in_flight;
  for (int r = 0; r < p.pp; ++r) {
    switch (p.schedule) {
      case Schedule::NAIVE:
        in_flight.push_back(1);
        break;
      case Schedule::GPIPE:
        in_flight.push_back(m);
        break;
      case Schedule::INTERLEAVED:
        in_flight.push_back(std::min(2 * (pp - r - 1) + (v - 1) * pp + 1, m * v) / v);
        break;
      default:
        in_flight.push_back(std::min(pp - r, m));
    }
  }
  return in_flight;
}

MemoryReport estimate_memory(const ModelSpec& m, const TrainingPlan& p) {
  return models::estimate_memory(m, p, closed_in_flight(p));
}

double model_state_bytes(const StageMemory& s) {
  return s.weights_bytes - s.zero3_buffer_bytes + s.gradients_bytes - s.zero3_grad_buffer_bytes +
         s.optimizer_bytes;
}

// Korthikanti et al. 2022 (arXiv:2205.05198) assume 16-bit activations, a GPT block with a
// GELU 4h MLP, dropout, and attention scores materialised (no flash attention).
TrainingPlan korthikanti_plan(int t, bool sp, Recompute recompute) {
  TrainingPlan p;
  p.tp = t;
  p.sp = sp;
  p.recompute = recompute;
  p.seq = 2048;
  p.mbs = 1;
  p.precision = Precision::FP16;
  p.flash_attention = false;
  return p;
}

}  // namespace

TEST_CASE("models::Memory: ZeRO paper Figure 1 model states, 7.5B on 64-way DP") {
  // Rajbhandari et al. 2020 (SC20, arXiv:1910.02054), Figure 1: mixed-precision Adam with
  // fp16 gradients (K = 12), Psi = 7.5B, Nd = 64: 120 / 31.4 / 16.6 / 1.88 GB per GPU for
  // baseline / P_os / P_os+g / P_os+g+p, i.e. 16, 4 + 12/64, 2 + 14/64, 16/64 bytes/param.
  TrainingPlan plan;
  plan.precision = Precision::FP16;
  plan.grad_dtype = GradDtype::BF16;  // 16-bit gradients
  const double psi = 7.5e9;
  const double expected_gb[] = {120, 31.4, 16.6, 1.88};
  const double expected_bpp[] = {16, 4 + 12.0 / 64, 2 + 14.0 / 64, 16.0 / 64};
  for (int zero = 0; zero <= 3; ++zero) {
    const double bpp = sharded_bytes_per_parameter(plan, zero, 64).total();
    CHECK(bpp == doctest::Approx(expected_bpp[zero]).epsilon(1e-12));
    CHECK(bpp * psi / 1e9 == doctest::Approx(expected_gb[zero]).epsilon(0.006));
  }
  // The same through the full estimate of a GPT of 7.5B (Narayanan Table 1), dp = 64.
  const ModelSpec m = model_preset("gpt-7.5b");
  plan.dp = 64;
  for (int zero = 0; zero <= 3; ++zero) {
    plan.zero = zero;
    const MemoryReport r = estimate_memory(m, plan);
    const StageMemory& s = r.stages.at(0);
    CHECK(model_state_bytes(s) / s.parameters ==
          doctest::Approx(expected_bpp[zero]).epsilon(1e-12));
    CHECK((s.zero3_buffer_bytes > 0) == (zero == 3));
  }
}

TEST_CASE("models::Memory: Megatron distributed optimizer is 6 + 12/DP bytes per parameter") {
  // Megatron-LM docs (docs/source/api-guide/dist_optimizer.md): bf16 params with fp32 main
  // grads and Adam cost 18 bytes/param; the distributed optimizer (ZeRO-1) shards the fp32
  // master weights and both moments: 6 + 12/DP.
  TrainingPlan plan;
  plan.precision = Precision::BF16;
  plan.grad_dtype = GradDtype::FP32;
  CHECK(sharded_bytes_per_parameter(plan, 0, 8).total() == 18);
  for (double dp : {2.0, 8.0, 64.0}) {
    CHECK(sharded_bytes_per_parameter(plan, 1, dp).total() == doctest::Approx(6 + 12 / dp));
  }
  // Mixed precision alone does not shrink model states: fp32 Adam is 16, bf16 Adam 18.
  plan.precision = Precision::FP32;
  CHECK(bytes_per_parameter(plan).total() == 16);
  plan.optimizer = Optimizer::SGD_MOMENTUM;
  CHECK(bytes_per_parameter(plan).total() == 12);
  plan.optimizer = Optimizer::SGD;
  CHECK(bytes_per_parameter(plan).total() == 8);
  // fp8 (Transformer Engine): bf16 params + fp8 weight and transpose cache.
  plan.precision = Precision::FP8;
  plan.optimizer = Optimizer::ADAM;
  CHECK(bytes_per_parameter(plan).total() == 20);
}

TEST_CASE("models::Memory: Korthikanti per-layer activations of GPT-3 175B") {
  // Korthikanti et al. 2022 (arXiv:2205.05198) Eq. 1-3, 6 and Table 2, GPT-3 175B: s=2048,
  // b=1, h=12288, a=96, t=8; bytes per layer.
  const ModelSpec m = model_preset("gpt3-175b");
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  auto layer = [&](int tp, bool sp, Recompute rc) {
    return stored_layer_activation_bytes(m, korthikanti_plan(tp, sp, rc), 0);
  };
  // Eq. 1, no parallelism: sbh (34 + 5as/h).
  CHECK(layer(1, false, Recompute::NONE) == doctest::Approx(s * b * h * (34 + 5 * a * s / h)));
  // Eq. 2, TP only: sbh (10 + 24/t + 5as/(ht)).
  CHECK(layer(8, false, Recompute::NONE) ==
        doctest::Approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t))));
  // Eq. 3, TP + SP: sbh (34/t + 5as/(ht)).
  CHECK(layer(8, true, Recompute::NONE) ==
        doctest::Approx(s * b * h * (34 / t + 5 * a * s / (h * t))));
  // Table 2, TP + selective: sbh (10 + 24/t).
  CHECK(layer(8, false, Recompute::SELECTIVE) == doctest::Approx(s * b * h * (10 + 24 / t)));
  // Eq. 6, TP + SP + selective: 34 sbh / t.
  CHECK(layer(8, true, Recompute::SELECTIVE) == doctest::Approx(34 * s * b * h / t));
  // Table 2, full recompute: 2 sbh (the layer input; Megatron divides it by t with SP).
  CHECK(layer(8, false, Recompute::FULL) == doctest::Approx(2 * s * b * h));
  CHECK(layer(8, true, Recompute::FULL) == doctest::Approx(2 * s * b * h / t));
}

TEST_CASE("models::Memory: 1F1B first stage holds L layers' worth, as Korthikanti Sec 4.2.3") {
  // With 1F1B the first stage keeps p micro-batches of L/p layers: (34 sbh / t) x L in
  // total for TP+SP+selective, independent of p (Korthikanti et al. 2022 Sec 4.2.3).
  const ModelSpec m = model_preset("gpt3-175b");
  TrainingPlan p = korthikanti_plan(8, true, Recompute::SELECTIVE);
  p.pp = 8;
  p.gbs = 64;
  const MemoryReport r = estimate_memory(m, p);
  const StageMemory& first = r.stages.front();
  CHECK(first.inflight_microbatches == 8);
  CHECK(first.layer_activation_bytes * first.inflight_microbatches ==
        doctest::Approx(34 * 2048.0 * 12288 / 8 * 96));
  CHECK(r.stages.back().inflight_microbatches == 1);
  CHECK(r.stages.at(3).inflight_microbatches == 5);  // min(p - stage, m)
}

TEST_CASE("models::Memory: activations scale with the in-flight count it is given") {
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.pp = 2;
  p.gbs = 8;
  const MemoryReport one = models::estimate_memory(m, p, {1, 1});
  const MemoryReport three = models::estimate_memory(m, p, {3, 1});
  CHECK(three.stages[0].activations_bytes - one.stages[0].activations_bytes ==
        doctest::Approx(
            2 * (one.stages[0].layer_activation_bytes + one.stages[0].embedding_activation_bytes)));
  CHECK(three.stages[1].activations_bytes == doctest::Approx(one.stages[1].activations_bytes));
  CHECK_THROWS_WITH_AS(models::estimate_memory(m, p, {1}), doctest::Contains("per stage"),
                       ValidationError);
}

TEST_CASE("models::Memory: flash attention, GQA and SwiGLU per-layer activations by hand") {
  // Llama-3-8B, bf16, b=1, s=8192, no TP, flash attention: per layer the two norm inputs
  // (2sh each), QKV input (2sh), Q/K/V (2s(4096+1024+1024)), the fp32 log-sum-exp
  // (4 a s), the output-projection input (2sh), MLP input (2sh), SwiGLU input (2s 2f) and
  // down-projection input (2sf); no s^2 term.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.seq = 8192;
  const double s = 8192, h = 4096, f = 14336;
  const double expected = 2 * 2 * s * h + 2 * s * h + 2 * s * (4096 + 1024 + 1024) + 4 * 32 * s +
                          2 * s * h + 2 * s * h + 2 * s * 2 * f + 2 * s * f;
  CHECK(stored_layer_activation_bytes(m, p, 0) == doctest::Approx(expected));
  // Context parallelism halves everything per GPU at cp = 2.
  p.cp = 2;
  CHECK(stored_layer_activation_bytes(m, p, 0) == doctest::Approx(expected / 2));
}

TEST_CASE("models::Memory: TP splits layer weights but not norms; PP places embedding and head") {
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.tp = 8;
  p.pp = 4;
  const MemoryReport r = estimate_memory(m, p);
  REQUIRE(r.stages.size() == 4);
  const double h = 4096, V = 128256;
  // One layer: matrices / 8, the two RMSNorm scales whole.
  const double layer_matrices = 2 * h * h + 2 * h * 1024 + 3 * h * 14336;
  const double layer = layer_matrices / 8 + 2 * h;
  CHECK(r.stages[1].parameters == doctest::Approx(8 * layer));
  CHECK(r.stages[0].parameters == doctest::Approx(8 * layer + V * h / 8));
  CHECK(r.stages[3].parameters == doctest::Approx(8 * layer + V * h / 8 + h));
  // bf16 Adam, fp32 grads, no ZeRO: 2 + 4 + 12 bytes per parameter.
  CHECK(r.stages[1].weights_bytes + r.stages[1].gradients_bytes + r.stages[1].optimizer_bytes ==
        doctest::Approx(18 * 8 * layer));
  // An explicit split moves layers between stages.
  p.pipeline_split = {5, 9, 9, 9};
  const MemoryReport split = estimate_memory(m, p);
  CHECK(split.stages[0].layers.size() == 5);
  CHECK(split.stages[0].layers.front() == 0);
  CHECK(split.stages[1].layers.front() == 5);
  // Tied embeddings: both ends hold the matrix when pp > 1, one copy when pp == 1.
  const ModelSpec g = model_preset("gpt-1.7b");
  TrainingPlan q;
  q.pp = 2;
  const MemoryReport tied = estimate_memory(g, q);
  CHECK(tied.stages[0].parameters + tied.stages[1].parameters ==
        doctest::Approx(count_parameters(g).total + 51200.0 * 2304));
  q.pp = 1;
  CHECK(estimate_memory(g, q).stages[0].parameters == doctest::Approx(count_parameters(g).total));
}

TEST_CASE("models::Memory: EP splits experts and ZeRO shards them over dp x cp / ep") {
  // Mixtral 8x7B, ep = 8 over dp = 8: each GPU holds one expert per layer.
  const ModelSpec m = model_preset("mixtral-8x7b");
  TrainingPlan p;
  p.dp = 8;
  p.ep = 8;
  p.zero = 1;
  const MemoryReport r = estimate_memory(m, p);
  const ParameterCounts c = count_parameters(m);
  const StageMemory& s = r.stages[0];
  CHECK(s.expert_parameters == doctest::Approx(c.expert / 8));
  CHECK(s.parameters == doctest::Approx(c.total - c.expert + c.expert / 8));
  // Dense params shard the optimizer 8 ways, expert params over dp / ep = 1 rank.
  const double dense = s.parameters - s.expert_parameters;
  CHECK(s.optimizer_bytes == doctest::Approx(dense * 12 / 8 + s.expert_parameters * 12));
}

TEST_CASE("models::Memory: other lines and totals") {
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.cuda_context_bytes = 1e9;
  p.fragmentation_fraction = 0.1;
  const MemoryReport r = estimate_memory(m, p);
  const StageMemory& s = r.stages[0];
  CHECK(s.other.cuda_context_bytes == 1e9);
  CHECK(s.other.comm_buffer_bytes == 0);  // one GPU: no process groups
  const double rest =
      s.weights_bytes + s.gradients_bytes + s.optimizer_bytes + s.activations_bytes + 1e9;
  // The allocator gap: one largest transient, here the fp32 logit buffer (4 x s x V), plus
  // the extra reserve.
  const double gap = 4.0 * 2048 * 128256;
  CHECK(s.other.fragmentation_bytes == doctest::Approx(gap + 0.1 * rest));
  CHECK(s.total_bytes == doctest::Approx(rest * 1.1 + gap));
  CHECK(r.peak_bytes == s.total_bytes);
  // The last stage keeps logits and the fp32 cross-entropy buffer: 2 + 4 bytes x s x V.
  CHECK(s.logits_bytes == doctest::Approx(6.0 * 2048 * 128256));
}

TEST_CASE("models::Memory: GPipe keeps every micro-batch's logits on the last stage") {
  // GPipe runs all m forwards before any backward, so the last stage holds m sets of
  // logits + fp32 cross-entropy copies (2 + 4 bytes x s x V each); 1F1B runs each loss
  // backward right after its forward and holds one. Llama-3-8B, s = 2048, V = 128256, m = 4.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.pp = 2;
  p.gbs = 4;
  p.cross_entropy = CrossEntropy::FUSED;
  const double one = 6.0 * 2048 * 128256;
  CHECK(estimate_memory(m, p).stages.back().logits_bytes == doctest::Approx(one));
  p.schedule = Schedule::GPIPE;
  CHECK(estimate_memory(m, p).stages.back().logits_bytes == doctest::Approx(4 * one));
  // Megatron's unfused loss keeps only its in-place fp32 softmax (4 B) per waiting
  // micro-batch; the one in flight also has its 16-bit logits beside the upcast (2 + 4).
  p.cross_entropy = CrossEntropy::UNFUSED;
  const double logits = 2048.0 * 128256;
  CHECK(estimate_memory(m, p).stages.back().logits_bytes ==
        doctest::Approx(3 * 4 * logits + 6 * logits));
}

TEST_CASE("models::Memory: torchtitan op-level selective recompute keeps every other matmul") {
  // torchtitan/models/llama3/parallelize.py _custom_policy: of wq, wk, wv, wo, w1, w3, w2 the
  // 1st, 3rd, 5th and 7th outputs are saved (wq, wv, w1, w2), plus SDPA's output and fp32
  // log-sum-exp, plus the block input checkpoint() keeps. Llama-3-8B, one GPU, b = 1.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.seq = 4096;
  p.recompute = Recompute::SELECTIVE;
  p.selective_recompute = SelectiveRecompute::OP;
  const double s = 4096, h = 4096, kv = 1024, f = 14336, heads = 32;
  const double by_hand = 2 * s * (h + h + kv + f + h + h) + 4 * s * heads;
  CHECK(stored_layer_activation_bytes(m, p, 0) == doctest::Approx(by_hand));
  // The recompute pass re-runs wk, wo and w3: their share of the FLOPs.
  const auto ops = layer_ops(m, p, 0);
  double recompute = 0;
  for (const auto& op : ops) recompute += op.recompute_flops;
  const double wk = 2 * s * h * kv, wo = 2 * s * h * h, w3 = 2 * s * h * f;
  CHECK(recompute == doctest::Approx(wk + wo + w3).epsilon(0.01));  // + memory-bound ops
  // The time the recompute pass takes follows the same shares: wk of the fused q/k/v
  // projection (1024 of its 6144 outputs), wo whole, w3 of the fused w1/w3 (half), no w2 and
  // no attention (SDPA's output is saved), every memory-bound op whole (not in the save list).
  const std::vector<double> share = selective_rerun_fractions(p, ops);
  REQUIRE(share.size() == ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    CAPTURE(ops[i].name);
    if (ops[i].name == "qkv_proj") CHECK(share[i] == doctest::Approx(1024.0 / 6144.0));
    if (ops[i].name == "out_proj") CHECK(share[i] == 1.0);
    if (ops[i].name == "mlp_up") CHECK(share[i] == doctest::Approx(0.5));
    if (ops[i].name == "mlp_down") CHECK(share[i] == 0.0);
    if (ops[i].kind == OpKind::ATTENTION) CHECK(share[i] == 0.0);
    if (ops[i].name == "attn_norm" || ops[i].name == "rope" || ops[i].name == "mlp_act")
      CHECK(share[i] == 1.0);
  }
  // Megatron's selective recompute: the attention core alone by default ("core_attn").
  TrainingPlan megatron = p;
  megatron.selective_recompute = SelectiveRecompute::ATTENTION;
  const std::vector<double> core = selective_rerun_fractions(megatron, layer_ops(m, megatron, 0));
  for (size_t i = 0; i < ops.size(); ++i) {
    CAPTURE(ops[i].name);
    CHECK(core[i] == (ops[i].attention_core ? 1.0 : 0.0));
  }
}

TEST_CASE("models::Memory: recompute every k-th layer keeps the others whole") {
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.recompute = Recompute::FULL;
  p.recompute_every = 2;
  TrainingPlan none = p;
  none.recompute = Recompute::NONE;
  // torchtitan's selective_ac_option = 2 wraps layers 1, 3, 5, ... (its counter starts at 1).
  CHECK(stored_layer_activation_bytes(m, p, 0) == stored_layer_activation_bytes(m, none, 0));
  CHECK(stored_layer_activation_bytes(m, p, 1) == doctest::Approx(layer_input_bytes(m, p)));
}

TEST_CASE("models::Memory: Megatron's block and uniform full-recompute methods") {
  // --recompute-method block --recompute-num-layers 3: the first 3 layers of each model chunk
  // keep their input only, the rest keep everything. Llama-3-8B (32 layers) on pp 2: chunks
  // of 16, layers 0-2 and 16-18 recompute.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.pp = 2;
  p.recompute = Recompute::FULL;
  p.recompute_method = RecomputeMethod::BLOCK;
  p.recompute_num_layers = 3;
  TrainingPlan none = p;
  none.recompute = Recompute::NONE;
  for (int l : {0, 2, 16, 18}) CHECK(layer_recomputed(m, p, l));
  for (int l : {3, 15, 19, 31}) CHECK_FALSE(layer_recomputed(m, p, l));
  CHECK(stored_layer_activation_bytes(m, p, 2) == doctest::Approx(layer_input_bytes(m, p)));
  CHECK(stored_layer_activation_bytes(m, p, 3) == stored_layer_activation_bytes(m, none, 3));
  // Uniform groups of 4: one input checkpoint per 4 layers, every layer re-runs.
  p.recompute_method = RecomputeMethod::UNIFORM;
  p.recompute_num_layers = 4;
  for (int l : {0, 3, 31}) CHECK(layer_recomputed(m, p, l));
  CHECK(stored_layer_activation_bytes(m, p, 5) == doctest::Approx(layer_input_bytes(m, p) / 4));
}

TEST_CASE("models::Memory: CPU offloading moves the first N layers' activations to the host") {
  // Megatron --cpu-offloading-num-layers 8 (Transformer Engine's double-buffered offload):
  // layers 0-7 keep nothing on the GPU but two layers' worth in transit; the host holds them.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.seq = 8192;
  const StageMemory base = estimate_memory(m, p).stages[0];
  p.cpu_offloading_num_layers = 8;
  const StageMemory off = estimate_memory(m, p).stages[0];
  const double layer = stored_layer_activation_bytes(m, p, 0);
  CHECK(off.layer_activation_bytes == doctest::Approx(base.layer_activation_bytes - 8 * layer));
  CHECK(off.offloaded_activation_bytes == doctest::Approx(8 * layer));
  CHECK(off.offload_buffer_bytes == doctest::Approx(2 * layer));
  CHECK(off.activations_bytes == doctest::Approx(base.activations_bytes - 6 * layer));
}

TEST_CASE("models::Memory: eager cross-entropy peaks at three fp32 logit buffers") {
  // torch F.cross_entropy(pred.float()): log_softmax output, nll_loss's dense gradient and
  // log_softmax's input gradient, all fp32, live together in backward: 12 bytes per logit;
  // Megatron's fused kernel: 16-bit logits + one fp32 buffer, 6.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.seq = 8192;
  p.mbs = 2;
  const double logits = 2.0 * 8192 * 128256;
  CHECK(estimate_memory(m, p).stages[0].logits_bytes == doctest::Approx(6 * logits));
  p.cross_entropy = CrossEntropy::EAGER;
  const StageMemory s = estimate_memory(m, p).stages[0];
  CHECK(s.logits_bytes == doctest::Approx(12 * logits));
  // The allocator gap is one fp32 logit buffer, the largest transient.
  CHECK(s.other.fragmentation_bytes == doctest::Approx(4 * logits));
}

TEST_CASE("models::Memory: the loss and a recomputed layer's working set do not add") {
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.seq = 8192;
  p.recompute = Recompute::FULL;
  const StageMemory s = estimate_memory(m, p).stages[0];
  CHECK(s.recompute_working_bytes > 0);
  const double stored =
      s.layer_activation_bytes + s.embedding_activation_bytes + s.head_activation_bytes;
  CHECK(s.activations_bytes ==
        doctest::Approx(stored + std::max(s.logits_bytes, s.recompute_working_bytes)));
}

TEST_CASE("models::Memory: FSDP holds the root unit and two blocks gathered") {
  // FSDP2 with torchtitan's wrapping: embedding + LM head (the root) plus the block in use
  // and the prefetched one, in 16-bit.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.dp = 8;
  p.zero = 3;
  const auto c = count_parameters(m);
  const double block = (c.total - 2.0 * 128256 * 4096 - 4096) / 32;
  const StageMemory s = estimate_memory(m, p).stages[0];
  CHECK(s.zero3_buffer_bytes == doctest::Approx(2 * (2.0 * 128256 * 4096 + 4096 + 2 * block)));
}

TEST_CASE("models::Memory: MoE combine keeps fp32 probs, FP8 linears keep 1-byte inputs") {
  // Qwen3-30B-A3B (h 2048, 128 experts, top-8, expert FFN 768), b=1, s=4096: R = 8 s routed
  // copies per GPU. Megatron-core applies the probabilities in the experts' weighted SwiGLU,
  // so the combine keeps only the fp32 prob per routed copy (experts.py TEGroupedMLP,
  // token_dispatcher.py combine_postprocess), not R x h expert outputs.
  const ModelSpec m = model_preset("qwen3-30b-a3b");
  TrainingPlan p;
  p.seq = 4096;
  const double R = 8 * 4096.0, h = 2048, f = 768;
  auto saved = [](const std::vector<OpCost>& ops, const std::string& name) {
    for (const OpCost& op : ops)
      if (op.name == name) return op.saved_bytes;
    return -1.0;
  };
  const std::vector<OpCost> bf16 = layer_ops(m, p, 0);
  CHECK(saved(bf16, "moe_combine") == doctest::Approx(4 * R));
  CHECK(saved(bf16, "expert_up") == doctest::Approx(2 * R * h));
  CHECK(saved(bf16, "expert_down") == doctest::Approx(2 * R * f));
  // FP8: Transformer Engine saves the column-wise FP8 cast of each linear input (1 B); the
  // SwiGLU input and the router (a plain bf16 linear) stay 16-bit.
  p.precision = Precision::FP8;
  const std::vector<OpCost> fp8 = layer_ops(m, p, 0);
  CHECK(saved(fp8, "expert_up") == doctest::Approx(R * h));
  CHECK(saved(fp8, "expert_down") == doctest::Approx(R * f));
  CHECK(saved(fp8, "expert_act") == doctest::Approx(saved(bf16, "expert_act")));
  CHECK(saved(fp8, "router") == doctest::Approx(saved(bf16, "router")));
}

// Megatron GPTModel builds an embedding on the last stage when it holds the MTP module
// (mtp_process); the MTP loss's logits wait for the backward like the main loss's.
TEST_CASE("models::Memory: DeepSeek-V3 MTP on the last stage: embedding copy and second logits") {
  const ModelSpec m = model_preset("deepseek-v3");
  TrainingPlan plan;
  plan.pp = 2;
  plan.ep = 1;
  plan.mbs = 1;
  plan.seq = 4096;
  plan.pipeline_split = {31, 30};
  const std::vector<double> in_flight = {2, 1};
  const MemoryReport with = estimate_memory(m, plan, in_flight);
  plan.mtp = false;
  const MemoryReport without = estimate_memory(m, plan, in_flight);
  CHECK(with.stages[0].total_bytes == doctest::Approx(without.stages[0].total_bytes));
  // Logit elements per micro-batch double: 2 x T x V (tp 1).
  CHECK(with.stages[1].logits_bytes == doctest::Approx(2 * without.stages[1].logits_bytes));
  // Parameters: + the MTP layer (like layer 60), eh_proj, three norms, the embedding copy.
  double layer = 0;
  for (const OpCost& op : layer_ops(m, plan, 60)) layer += op.params;
  const double h = 7168, V = 129280;
  CHECK(with.stages[1].parameters - without.stages[1].parameters ==
        doctest::Approx(layer + 2 * h * h + 3 * h + V * h));
}

TEST_CASE("models::Memory: op-level inputs computed once serve plans that differ elsewhere") {
  // memory_ops depends on what the op lists read (tp, cp, mbs, recompute, ...), not on dp,
  // ZeRO or the schedule: the search computes it once per layer key.
  const ModelSpec m = model_preset("gpt3-175b");
  TrainingPlan a;
  a.tp = 8;
  a.pp = 8;
  a.dp = 16;
  a.gbs = 1536;
  a.recompute = Recompute::SELECTIVE;
  const MemoryOps ops = memory_ops(m, a);
  TrainingPlan b = a;
  b.dp = 4;
  b.zero = 3;
  b.gbs = 512;
  const std::vector<double> in_flight(8, 4.0);
  for (const TrainingPlan& p : {a, b}) {
    const MemoryReport direct = estimate_memory(m, p, in_flight);
    const MemoryReport reused = estimate_memory(m, p, in_flight, ops);
    CHECK(reused.peak_bytes == direct.peak_bytes);
    for (size_t s = 0; s < direct.stages.size(); ++s)
      CHECK(reused.stages[s].total_bytes == direct.stages[s].total_bytes);
  }
  // A recomputed layer's facts carry what it rematerialises.
  const LayerMemoryFacts& f = ops.layer(m, a, 0);
  CHECK(f.recompute_working_bytes > 0);
  CHECK(f.dense_params > 0);
}

TEST_CASE("models::Memory: layers kept in bf16 hold no fp8 weight casts and 16-bit inputs") {
  // Llama-3-8B, 32 layers, fp8: each linear weight holds its fp8 cast and transpose, 2 B per
  // parameter. --first-last-layers-bf16 (start 1, end 1) keeps layers 0 and 31 in bf16: their
  // casts go (2 x 2 B x a layer's parameters) and their linears keep 16-bit inputs.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.precision = Precision::FP8;
  const StageMemory all = estimate_memory(m, p).stages[0];
  p.first_last_layers_bf16 = true;
  const StageMemory kept = estimate_memory(m, p).stages[0];
  double layer_params = 0;
  for (const OpCost& op : layer_ops(m, p, 0)) layer_params += op.params;
  CHECK(all.weights_bytes - kept.weights_bytes == doctest::Approx(2 * 2 * layer_params));
  const auto stored = [&](const TrainingPlan& plan, int l) {
    return stored_layer_activation_bytes(m, plan, l);
  };
  TrainingPlan bf16;
  CHECK(stored(p, 0) == doctest::Approx(stored(bf16, 0)));
  CHECK(stored(p, 31) == doctest::Approx(stored(bf16, 31)));
  CHECK(stored(p, 1) < stored(bf16, 1));
  TrainingPlan fp8 = p;
  fp8.first_last_layers_bf16 = false;
  CHECK(kept.layer_activation_bytes - all.layer_activation_bytes ==
        doctest::Approx(2 * (stored(bf16, 0) - stored(fp8, 0))));
}

TEST_CASE("models::Memory: --fp8-weight-cache off frees exactly the cached fp8 copies") {
  // Llama-3-8B, fp8, one stage: the cache holds each layer linear's fp8 cast and transpose,
  // 2 x 1 B per layer parameter (the memory model counts a layer's norms with its linears;
  // not the embedding, final norm or 16-bit LM head). Off, those bytes go; nothing else moves.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.precision = Precision::FP8;
  const StageMemory on = estimate_memory(m, p).stages[0];
  p.fp8_weight_cache = false;
  const StageMemory off = estimate_memory(m, p).stages[0];
  CHECK(bytes_per_parameter(p).fp8_cache == 0);
  double layer_params = 0;
  for (int l = 0; l < m.layers; ++l)
    for (const OpCost& op : layer_ops(m, p, l)) layer_params += op.params;
  CHECK(on.weights_bytes - off.weights_bytes == doctest::Approx(2 * layer_params));
  CHECK(on.activations_bytes == doctest::Approx(off.activations_bytes));
  CHECK(on.gradients_bytes == doctest::Approx(off.gradients_bytes));
  CHECK(on.optimizer_bytes == doctest::Approx(off.optimizer_bytes));
}

TEST_CASE("models::Memory: NCCL memory grows with the communicators a layout creates") {
  // NVIDIA/nccl issue #964 measured 688 MB per communicator of 3+ ranks, 544 MB per pair.
  // tp 8, cp 2, dp 2, pp 4 (llama3-8b, untied): tp (8) + cp (2) + dp x cp (4) + pp (4):
  // 688 + 544 + 688 + 688 MB; the pipeline's send and receive buffers come on top.
  const ModelSpec m = model_preset("llama3-8b");
  TrainingPlan p;
  p.tp = 8;
  p.sp = true;
  p.cp = 2;
  p.dp = 2;
  p.pp = 4;
  p.seq = 8192;
  p.gbs = 8;
  CHECK(nccl_communicator_bytes(m, p, true, false) == doctest::Approx(3 * 688e6 + 544e6));
  const MemoryReport r = estimate_memory(m, p);
  CHECK(r.stages[1].other.comm_buffer_bytes ==
        doctest::Approx(3 * 688e6 + 544e6 + 2 * layer_input_bytes(m, p)));
  // One GPU has no communicator; plain DP has one.
  TrainingPlan one;
  CHECK(nccl_communicator_bytes(m, one, true, true) == 0);
  one.dp = 8;
  CHECK(nccl_communicator_bytes(m, one, true, true) == doctest::Approx(688e6));
  // A tied embedding adds the first and last stages' pair group, not the middle ones'.
  ModelSpec tied = m;
  tied.tied_embeddings = true;
  CHECK(nccl_communicator_bytes(tied, p, true, false) -
            nccl_communicator_bytes(m, p, true, false) ==
        doctest::Approx(544e6));
  CHECK(nccl_communicator_bytes(tied, p, false, false) ==
        doctest::Approx(nccl_communicator_bytes(m, p, false, false)));
}

TEST_CASE("models::Memory: an expert-parallel all-to-all connects every NVLink peer") {
  // NVIDIA/nccl issue #1685: 3.28 GB more NCCL memory on each of 8 H100 at the first
  // all-to-all, 7 peers. ep 8 over dp 8: ep (688 MB) + 7 x 3.28 GB / 7, plus the expert
  // gradient group (dp 8 / ep 8 = 1 rank: none) beside the dp group (688 MB).
  const ModelSpec m = model_preset("qwen3-30b-a3b");
  TrainingPlan p;
  p.dp = 8;
  p.ep = 8;
  CHECK(nccl_communicator_bytes(m, p, true, true) == doctest::Approx(688e6 + 688e6 + 3.28e9));
}
