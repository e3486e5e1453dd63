#include "models/fused_ops.hpp"

#include <utility>

namespace loom::models {
namespace {

// Megatron-LM (megatron/training/arguments.py) turns its fusions on by default and offers
// --no-bias-swiglu-fusion, --no-bias-gelu-fusion, --no-bias-dropout-fusion, --no-rope-fusion,
// --no-masked-softmax-fusion and --no-gradient-accumulation-fusion to turn them off;
// Transformer Engine runs the norms fused (LayerNormLinear / LayerNormMLP, TE docs). Under
// torch.compile, Inductor fuses each pointwise/reduction chain into one Triton kernel
// (PyTorch 2 paper, Ansel et al. ASPLOS 2024, section 4). So MEGATRON and COMPILE run one
// kernel per op; NONE (PyTorch eager) runs one kernel per ATen op and re-reads its operands.
bool eager(Fusion fusion) {
  return fusion == Fusion::NONE;
}

// `op` run as `kernels` eager kernels moving `factor` times the fused kernel's bytes. The
// extra traffic re-reads intermediates: it is counted as input so that output_bytes stays
// the op's result tensor (the memory model's widest transient).
void unfuse(OpCost& op, int kernels, double factor) {
  op.kernels = kernels;
  op.input_bytes += (factor - 1) * (op.input_bytes + op.output_bytes);
  if (op.backward_bytes >= 0) op.backward_bytes *= factor;
}

}  // namespace

OpCost elementwise(std::string name, double in_bytes, double out_bytes, double saved,
                   double flops) {
  OpCost op;
  op.name = std::move(name);
  op.kind = OpKind::ELEMENTWISE;
  op.input_bytes = in_bytes;
  op.output_bytes = out_bytes;
  op.saved_bytes = saved;
  op.fwd_flops = flops;
  return op;
}

void apply_norm_fusion(OpCost& op, NormKind norm, Fusion fusion) {
  // Eager RMSNorm (HF LlamaRMSNorm / torchtitan's nn.RMSNorm fallback): x.float() (r2 w4),
  // pow(2) (r4 w4), mean (r4), x * rsqrt (r4 w4), .to(bf16) (r4 w2), weight * x (r2 w2):
  // 36 bytes per element against the fused kernel's 4 (r2 w2), in six kernels.
  // torch.nn.functional.layer_norm is one ATen kernel (native_layer_norm) even in eager.
  if (eager(fusion) && norm == NormKind::RMSNORM) unfuse(op, 6, 9.0);
}

void apply_activation_fusion(OpCost& op, MlpKind mlp, bool bias, Fusion fusion) {
  // GeGLU with the tanh GELU (Gemma: HF gelu_pytorch_tanh; Megatron-Bridge gemma_provider.py
  // activation_func fast_gelu, gated_linear_unit) has no Megatron fusion: megatron/core/
  // transformer/mlp.py fuses only F.gelu and F.silu ("Only support fusion of gelu and
  // swiglu"), so its glu() runs the jit-fused fast_gelu on the gate and then the product,
  // two kernels as in eager (HF GemmaMLP: act_fn(gate) * up).
  if (mlp == MlpKind::GEGLU && fusion != Fusion::COMPILE) {
    unfuse(op, 2, 5.0 / 3.0);  // gelu (r f w f), gate * up (r 2f w f): 5f against 3f
    return;
  }
  if (!eager(fusion)) return;  // Megatron bias_swiglu / bias_gelu fusions; Inductor
  // Eager SwiGLU: silu(gate) (r f w f) then gate * up (r 2f w f): 5f against the fused 3f.
  if (mlp == MlpKind::SWIGLU) unfuse(op, 2, 5.0 / 3.0);
  // Eager squared ReLU: relu (r f w f) then pow(2) (r f w f); eager GeLU with a bias: bias
  // add (r f w f) then gelu (r f w f). Either is twice the fused bytes.
  else if (mlp == MlpKind::RELU2 || bias)
    unfuse(op, 2, 2.0);
}

std::optional<OpCost> activation_clamp_op(std::string name, double half_bytes, Fusion fusion) {
  if (fusion == Fusion::COMPILE) return std::nullopt;  // Inductor: one pointwise kernel
  // Megatron-core (fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl, the routed
  // experts' path, and transformer/mlp.py for dense MLPs): x_glu, x_linear = chunk(2);
  // x_glu.clamp(max=c) (r 1 w 1 half), x_linear.clamp(-c, c) (r 1 w 1), torch.cat of the two
  // (r 2 w 2) before the fused activation: 3 kernels, 4 halves read and 4 written, the cat's
  // output (2 halves) the result. Backward: each clamp's mask applied to its gradient (r 2
  // w 1 per half) and the chunk's gradients rejoined (r 2 w 2): 10 halves, 3 kernels. Eager
  // (HF GptOssMLP): the two clamps only, forward 4 halves, backward 6, 2 kernels. The clamps
  // keep their input for backward (the up projection's output).
  const bool megatron = fusion == Fusion::MEGATRON;
  OpCost op = elementwise(std::move(name), (megatron ? 6 : 2) * half_bytes, 2 * half_bytes,
                          2 * half_bytes, 0);
  op.kernels = megatron ? 3 : 2;
  op.backward_bytes = (megatron ? 10 : 6) * half_bytes;
  return op;
}

OpCost softcap_op(std::string name, double elements, double act, Fusion fusion) {
  // cap * tanh(x / cap) as written in Python (Megatron-Bridge gemma2_provider.py
  // logit_softcapping; HF modeling_gemma2.py eager attention and Gemma2ForCausalLM.forward),
  // under every fusion level but torch.compile: a divide, tanh and multiply, each reading and
  // writing the tensor (6 passes, 3 kernels); tanh keeps its output (d tanh = 1 - y^2), the
  // scalar divide and multiply keep nothing. Backward: the multiply's (r 1 w 1),
  // tanh_backward (r 2 w 1) and the divide's (r 1 w 1): 7 passes. Inductor fuses the chain:
  // forward r 1 w 1, backward r 2 w 1. FLOPs reported: the divide, tanh and multiply.
  const double bytes = act * elements;
  const bool compiled = fusion == Fusion::COMPILE;
  OpCost op = elementwise(std::move(name), (compiled ? 1 : 5) * bytes, bytes, bytes, 3 * elements);
  op.kernels = compiled ? 1 : 3;
  op.backward_bytes = (compiled ? 3 : 7) * bytes;
  return op;
}

void apply_softmax_fusion(OpCost& op, Fusion fusion) {
  // Megatron's FusedScaleMaskSoftmax is one kernel; eager masks (masked_fill) and then
  // softmaxes the score square: two passes over it.
  if (eager(fusion)) unfuse(op, 2, 2.0);
}

OpCost rope_op(double qk_bytes, Fusion fusion) {
  // One fused kernel per tensor (TE fused_rope / Megatron --apply-rope-fusion; Inductor):
  // reads and writes q and k once. Eager apply_rotary_pos_emb (x*cos + rotate_half(x)*sin,
  // rotate_half = cat(-x2, x1)): neg, cat, two muls and an add, 5 kernels per tensor moving
  // about 5x the bytes. The backward rotates the gradients by -theta: the same bytes.
  OpCost op = elementwise("rope", qk_bytes, qk_bytes, 0, 0);
  op.kernels = 2;
  op.backward_bytes = 2 * qk_bytes;
  if (eager(fusion)) unfuse(op, 10, 5.0);
  return op;
}

OpCost residual_op(std::string name, double elements, double act, bool dropout, Fusion fusion) {
  // Forward: read the block output and the residual, write the sum (+ the dropout mask, 1 B
  // per element). Backward: the gradient sum where the residual stream forks (r 2, w 1) with
  // the dropout mask applied in the same kernel: as many bytes as the forward.
  const double mask = dropout ? elements : 0;
  OpCost op = elementwise(std::move(name), 2 * act * elements, act * elements + mask, mask,
                          (dropout ? 3 : 1) * elements);
  op.backward_bytes = op.input_bytes + op.output_bytes;
  // Eager: dropout (r 1 w 1 + mask) before the add (r 2 w 1); Megatron's bias-dropout-add
  // and Inductor run them as one kernel.
  if (dropout && eager(fusion)) {
    op.kernels = 2;
    op.input_bytes += act * elements;
    op.output_bytes += act * elements;
    op.backward_bytes += 2 * act * elements;
  }
  return op;
}

OpCost router_topk_op(double tokens, double experts, double top_k, Fusion fusion) {
  // Reads the fp32 router logits, writes top_k fp32 probabilities and int64 indices per
  // token. Megatron's router with --moe-router-fusion (TE fused_topk_with_score_function and
  // the fused aux-loss kernels, TE PR #1883) still launches 31 kernels per pass, the gating
  // GEMM (the router op) among them: "reducing the total number of kernels in the router part
  // from 72 to 31", the rest "separated by communication kernels of global auxiliary losses"
  // (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization, section 2.1.4); each is a
  // small kernel, so the bytes stay those of the top-k. The backward is taken to launch as
  // many. torchtitan's router (no aux loss: softmax, topk and the probability
  // gather/normalise) is three eager kernels, or one compiled.
  constexpr int megatron_router_kernels = 31 - 1;
  OpCost op = elementwise("router_topk", 4 * tokens * experts, 12 * tokens * top_k, 0,
                          5 * tokens * experts);
  if (fusion == Fusion::MEGATRON) op.kernels = megatron_router_kernels;
  if (eager(fusion)) unfuse(op, 3, 2.0);
  return op;
}

OpCost dispatch_preprocess_op(double tokens, double experts, bool split) {
  // MoEAlltoAllTokenDispatcher.preprocess (megatron/core/transformer/moe/token_dispatcher.py,
  // dropless): routing_map.sum(dim=0) counts each expert's tokens (an int64 result: the
  // .long() after it launches nothing); with experts over several ranks (ep or expert TP),
  // .reshape(ep, local).sum(axis=1) (input_splits), the counts' all-gather over the
  // expert tp x ep group, a slice .contiguous(), .sum(axis=2), .sum(axis=1)
  // (output_splits_tp) and .sum(dim=(0, 1)) (tokens per local expert) follow: 6 kernels.
  // Each reads at most the boolean routing map; the outputs are counts. The counts'
  // all-gather and the device-to-host copies of the splits (the sync before the all-to-all)
  // are not modelled.
  OpCost op = elementwise("moe_preprocess", tokens * experts, 8 * experts, 0, tokens * experts);
  op.kernels = split ? 6 : 1;
  op.backward_bytes = 0;  // counts take no gradient
  return op;
}

OpCost cross_entropy_op(double logits, double tokens, double act, CrossEntropy kind) {
  OpCost op;
  op.name = "cross_entropy";
  op.kind = OpKind::LOSS;
  op.fwd_flops = 5 * logits;
  if (kind == CrossEntropy::FUSED) {
    // Megatron-core fused vocab-parallel cross-entropy (megatron/core/fusions/
    // fused_cross_entropy.py): max over the 16-bit logits (r act), exp of the shifted fp32
    // logits with their sum (r act, w 4), the softmax normalised in place (r 4, w 4) in three
    // kernels; backward reads the fp32 softmax, subtracts the target and writes the 16-bit
    // gradient the LM head's backward reads (r 4, w act), one kernel.
    op.input_bytes = act * logits;  // the logits (the memory model reads their count here)
    op.output_bytes = (act + 4 + 8) * logits + 4 * tokens;  // the rest of the traffic
    op.backward_bytes = (4 + act) * logits;
    op.kernels = 3;
  } else if (kind == CrossEntropy::UNFUSED) {
    // Megatron's default (--cross-entropy-loss-fusion off): _VocabParallelCrossEntropy
    // (megatron/core/tensor_parallel/cross_entropy.py), one torch op per step on the full
    // row: the fp32 upcast (r act, w 4), max (r 4), in-place subtract of the max (r 4, w 4),
    // in-place exp (r 4, w 4), sum (r 4), in-place divide by the sum (r 4, w 4); backward:
    // the target's update (one element per row), in-place multiply by the output gradient
    // (r 4, w 4), the upcast's backward to the 16-bit gradient (r 4, w act).
    op.input_bytes = act * logits;
    op.output_bytes = 36 * logits + 4 * tokens;
    op.backward_bytes = (8 + 4 + act) * logits;
    op.kernels = 6;
  } else {
    // torch F.cross_entropy(logits.float(), labels) (torchtitan): the fp32 upcast (r act,
    // w 4), log_softmax reading the fp32 row twice (max, then sum of exponentials) and
    // writing it (r 8, w 4); backward: nll_loss_backward zero-fills a dense fp32 gradient
    // (w 4), log_softmax_backward_data (r 8, w 4), the upcast's backward (r 4, w act).
    op.input_bytes = act * logits;
    op.output_bytes = (8 + 8) * logits + 4 * tokens;
    op.backward_bytes = (4 + 12 + 4 + act) * logits;
    op.kernels = 3;
  }
  return op;
}

double embedding_backward_bytes(double rows, double width, double tokens, double act) {
  // ATen embedding_dense_backward: the dense weight gradient is zero-filled (w act per
  // element), then each token's output gradient (r act) is added into its row (r act w act).
  return act * rows * width + 3 * act * tokens * width;
}

double grad_accumulation_bytes_per_param(GradDtype grad_dtype) {
  // Megatron DistributedDataParallel's backward hook, param.main_grad.add_(param.grad):
  // read the fp32 main gradient (4), read the 16-bit gradient (2), write the main gradient
  // (4) — megatron/core/distributed/distributed_data_parallel.py _make_backward_post_hook.
  // With 16-bit accumulation, 2 + 2 + 2.
  return grad_dtype == GradDtype::FP32 ? 4 + 2 + 4 : 2 + 2 + 2;
}

bool wgrad_accumulation_fused(Fusion fusion) {
  // Megatron's gradient-accumulation fusion (on unless --no-gradient-accumulation-fusion):
  // the weight-gradient GEMM accumulates into the fp32 main_grad (fused_weight_gradient_mlp_
  // cuda / TE fuse_wgrad_accumulation). Its extra fp32 read+write of the output is in the
  // GEMM epilogue of a GEMM whose arithmetic intensity (tokens / 4 FLOP per byte) is far
  // above the ridge point: not counted. Norms and the embedding still pay the add.
  return fusion == Fusion::MEGATRON;
}

}  // namespace loom::models
